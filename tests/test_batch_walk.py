"""The batched data walk (exec/tape.py, exec/batch_groups.py, exec/batch_run.py): the blocks' tile
ops recorded, then computed group by group, an op once for a group's blocks where it can be.
Outputs and reports are the plain data walk's bit for bit (FlashAttention, whose blocks fall in
groups of equal ops); the groups and the GM hazard check as pure functions over tapes; what runs
block by block (an op without a batched form, operands not affine in the block, a hazard)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from xdsl.dialects import memref

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import batch_groups, batch_run
from ascendir.interpreter.exec.batch_groups import _shared, coded_hazard, form_span, runs
from ascendir.interpreter.exec.pointer import byte_span, data_pointer
from ascendir.interpreter.exec.tape import Tape

from test_flash_attention import attention_ir, compile_attention, random_inputs

HW = load_target("ascend910b2")


def _walks(monkeypatch, module, feeds):
    """(batched run, plain run, groups the batched run computed batched)."""
    batched = []
    orig = batch_run._batched

    def spy(tapes):
        batched.append(len(tapes))
        return orig(tapes)

    monkeypatch.setattr(batch_run, "_batched", spy)
    monkeypatch.setattr(batch_run, "MIN_OPS", 1)
    new = simulate(module, None, feeds, HW)
    monkeypatch.setattr(batch_run, "batchable", lambda ops: False)
    old = simulate(module, None, feeds, HW)
    return new, old, batched


@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_batched_is_the_plain_walk(monkeypatch, causal):
    b, hq, hkv, sq, skv, d, dv = 1, 4, 4, 256, 256, 64, 64
    module = compile_attention(attention_ir(b, hq, hkv, sq, skv, d, dv, causal), "ascend910b2")
    feeds = random_inputs([(b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, dv)], "f32")
    new, old, batched = _walks(monkeypatch, module, feeds)
    assert batched and max(batched) > 1, batched
    assert new.report == old.report
    (name,) = new.outputs
    assert new.outputs[name].tobytes() == old.outputs[name].tobytes()


def test_flash_attention_f16_batched_is_the_plain_walk(monkeypatch):
    """fp16 operands: GM reads into L1 through the fp32 copies (wide.py `wide_each`), FixPipe
    narrowing, fp16 vector ops."""
    b, hq, hkv, sq, skv, d, dv = 1, 4, 2, 256, 384, 128, 128
    module = compile_attention(attention_ir(b, hq, hkv, sq, skv, d, dv, True, dt="f16"), "ascend910b2")
    feeds = random_inputs([(b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, dv)], "f16")
    new, old, batched = _walks(monkeypatch, module, feeds)
    assert batched, batched
    assert new.report == old.report
    (name,) = new.outputs
    assert new.outputs[name].tobytes() == old.outputs[name].tobytes()


# -- groups and hazards over synthetic tapes ------------------------------------------------
def _facts(gm: tuple, sem=None, bsem=None, layout=False):
    return (sem, bsem, layout, gm)


W, R = _facts(((0, True),)), _facts(((0, False),))


def _slices(blocks: int, key: int, shape: tuple, dtype) -> list[np.ndarray]:
    """Each block's array of alloc `key` from one tape's arena (addresses affine in the block)."""
    t = Tape(blocks)
    out = []
    for k in range(blocks):
        t.begin(k)
        out.append(t.zeros(key, shape, np.dtype(dtype)))
    return out


def _coded(tapes) -> bool:
    """coded_hazard of `tapes` on the addresses and forms phase B reads of their operands."""
    flats = [[v for e in t for v in e[1]] for t in tapes]
    forms: dict = {}
    F = np.array([[forms.setdefault((v.shape, v.strides, v.dtype), len(forms)) for v in fl] for fl in flats])
    P = np.array([[data_pointer(v) for v in fl] for fl in flats], np.int64)
    spans = np.array([form_span(s, st, d.itemsize) for s, st, d in forms], np.int64)
    gm, pos = [], 0
    for facts, vals in tapes[0]:
        gm += [(pos + j, w) for j, w in facts[3]]
        pos += len(vals)
    return coded_hazard(flats, gm, P, F, spans)


def gm_hazard(tapes: list[list]) -> bool:
    """The reference hazard check, a Python loop per GM view: whether a block of `tapes` (a group's
    tapes, in block order, of equal ops: `runs`) writes a GM byte that another reads or writes, or that cannot be told (GM arrays that are no plain numpy buffers, or
    distinct buffers sharing memory). The GM operands of an op are its facts' [3]: (operand
    position, written)."""
    bufs: dict[int, tuple] = {}  # id(buffer) -> (buffer, [(block mark, written view)], [(mark, read view)])
    at = [(n, j, w) for n, (facts, _) in enumerate(tapes[0]) for j, w in facts[3]]  # (the group's ops are equal)
    for k, tape in enumerate(tapes):
        views = {}  # (id(view), written) -> view: each once
        for n, j, w in at:
            v = tape[n][1][j]
            views[id(v), w] = v
        for (_, w), v in views.items():
            root = v.base if v.base is not None else v
            got = bufs.get(id(root))
            if got is None:
                got = bufs[id(root)] = (root, [], [])
            (got[1] if w else got[2]).append((k + 1, v))
    written = [g for g in bufs.values() if g[1]]
    if not written:
        return False
    for g in bufs.values():
        if type(g[0]) is not np.ndarray or not g[0].flags.c_contiguous:
            return True
    spans = sorted(byte_span(g[0]) for g in bufs.values())
    if any(b[0] <= a[1] for a, b in zip(spans, spans[1:])):
        return True
    for root, writes, reads in written:
        if not _apart(writes + reads) and _shared(root, writes, reads):
            return True
    return False



def _apart(views: list[tuple[int, np.ndarray]]) -> bool:
    """Whether the byte ranges from the first to the last byte of the (block mark, view) pairs
    `views` of each block are apart from those of every other block (then no byte is shared)."""
    hull: dict[int, list[int]] = {}
    for k, v in views:
        lo, hi = byte_span(v)
        h = hull.get(k)
        if h is None:
            hull[k] = [lo, hi]
        else:
            if lo < h[0]:
                h[0] = lo
            if hi > h[1]:
                h[1] = hi
    spans = sorted(hull.values())
    return all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def _hazard(tapes) -> bool:
    """gm_hazard of `tapes`, checked equal to coded_hazard's answer (phase B's)."""
    got = gm_hazard(tapes)
    assert _coded(tapes) == got
    return got


def test_runs_are_consecutive_blocks_of_equal_ops_capped():
    """Equal ops: equal facts (the same semantics functions: one op, or two no-op copies)."""
    a, b = _facts((), print), _facts((), repr)
    x = np.zeros(4)
    blocks = [[(a, (x,)), (b, (x,))]] * 3 + [[(a, (x,))]] + [[(a, (x,)), (b, (x,))]] * 2 + [[(b, (x,)), (a, (x,))]]
    assert runs(blocks) == [(0, 3), (3, 4), (4, 6), (6, 7)]
    assert runs(blocks[:3], cap=2) == [(0, 2), (2, 3)]


def test_interleaved_tiles_are_no_hazard():
    """Each block writes its own column tile of the same rows (hulls overlap, bytes do not), and
    reads a tile it wrote itself."""
    gm = np.zeros((64, 512), np.float16)
    tapes = [[(W, (gm[:, 128 * k: 128 * (k + 1)],)), (R, (gm[:32, 128 * k: 128 * k + 64],))] for k in range(4)]
    assert not _hazard(tapes)


@pytest.mark.parametrize("case", ["read after write", "write after read", "same bytes written", "one byte"])
def test_a_byte_of_another_blocks_write_is_a_hazard(case):
    gm = np.zeros((64, 512), np.float16)
    tile = [gm[:, 128 * k: 128 * (k + 1)] for k in range(4)]
    tapes = [[(W, (tile[k],)), (R, (tile[k],))] for k in range(4)]
    if case == "read after write":
        tapes[2][1] = (R, (tile[1],))
    elif case == "write after read":
        tapes[0][1] = (R, (tile[3],))
    elif case == "same bytes written":
        tapes[3][0] = (W, (tile[0],))
    else:  # the last byte of block 1's tile, read by block 2 as its first element's second byte
        tapes[2][1] = (R, (gm.view(np.uint8)[:1, 255:256],))
    assert _hazard(tapes)


def test_reads_of_one_tile_by_every_block_are_no_hazard():
    gm = np.zeros((64, 512), np.float32)
    out = np.zeros((4, 64, 128), np.float32)
    tapes = [[(R, (gm[:, :128],)), (W, (out[k],))] for k in range(4)]
    assert not _hazard(tapes)


@pytest.mark.parametrize("case", ["apart", "touching", "overlapping", "strided interleaved", "strided shared",
                                  "empty", "reversed", "two buffers", "shared read"])
def test_the_coded_check_answers_as_the_per_view_check(case):
    """coded_hazard (hulls over the coded addresses, per-byte marks where they meet) gives
    gm_hazard's answer, hazard or not."""
    gm = np.zeros((16, 256), np.float16)
    out = np.zeros(4096, np.float32)
    rows = [gm[2 * k: 2 * k + 2] for k in range(4)]
    if case == "touching":  # (block 1 writes the first byte of block 2's rows)
        rows[1] = gm.view(np.uint8).reshape(-1)[1024: 2049]
    elif case == "overlapping":
        rows[3] = gm[5:7]
    elif case == "strided interleaved":
        rows = [gm[:, k::4] for k in range(4)]
    elif case == "strided shared":
        rows = [gm[:, k::3] for k in range(4)]
    elif case == "empty":
        rows = [gm[k, 3:3] for k in range(4)]
    elif case == "reversed":
        rows = [gm[2 * k: 2 * k + 2, ::-1] for k in range(4)][::-1]
    w = _facts(((0, True), (1, False)))
    tapes = [[(w, (rows[k], out[k: k + 8] if case == "two buffers" else out[8 * k: 8 * k + 8]))] for k in range(4)]
    if case == "shared read":  # (each block reads one row no block writes)
        tapes = [t + [(R, (gm[15],))] for t in tapes]
    want = case in ("touching", "overlapping", "strided shared")
    if case == "two buffers":  # (reads that meet, of a buffer no block writes)
        want = False
    assert _hazard(tapes) is want


def test_a_hazard_runs_the_group_block_by_block(monkeypatch):
    """Block k adds 1 to an accumulator tile and block k + 1 reads it: batched, every block
    would read the first value."""
    acc = np.zeros((1, 8), np.float32)
    ran = []

    def add(a):
        a += 1.0
        ran.append(a.shape)

    facts = _facts(((0, True),), add, add)
    blocks = [[(facts, (acc,))] for _ in range(4)]
    monkeypatch.setattr(batch_run, "MIN_OPS", 1)
    batch_run.run(blocks)
    assert (acc == 4).all() and ran == [(1, 8)] * 4


def test_ops_without_batched_form_or_affine_operands_run_per_block(monkeypatch):
    """One buffer per block from the tape's arena (affine): batched; an op without a batched
    form, and one whose operands are not affine in the block: block by block, op-major."""
    monkeypatch.setattr(batch_run, "MIN_OPS", 1)
    spread = np.zeros((10, 2, 3), np.float32)
    loose = [spread[i] for i in (0, 1, 3, 4)]  # (at offsets not affine in the block)
    bufs = _slices(4, 7, (2, 3), np.float32)
    seen = []

    def sem(x, s):
        seen.append(("block", x.shape))
        x += s

    def bsem(x, s):
        seen.append(("batch", x.shape))
        x += s

    batched, plain = _facts((), sem, bsem), _facts((), sem, None)
    blocks = [[(batched, (bufs[k], 1.0)), (plain, (bufs[k], 2.0)), (batched, (loose[k], 3.0))] for k in range(4)]
    batch_run.run(blocks)
    assert seen == [("batch", (4, 2, 3))] + [("block", (2, 3))] * 8
    assert all((b == 3).all() for b in bufs) and all((x == 3).all() for x in loose)


def test_a_scalar_that_differs_runs_per_block(monkeypatch):
    monkeypatch.setattr(batch_run, "MIN_OPS", 1)
    bufs = _slices(2, 0, (3,), np.float32)

    def fill(x, s):
        x[...] = s

    f = _facts((), fill, fill)
    batch_run.run([[(f, (bufs[0], 0.0))], [(f, (bufs[1], -0.0))]])
    assert not np.signbit(bufs[0]).any() and np.signbit(bufs[1]).all()


def test_a_batched_error_is_the_first_failing_blocks(monkeypatch):
    monkeypatch.setattr(batch_run, "MIN_OPS", 1)
    bufs = _slices(3, 0, (2,), np.int64)
    bufs[1][0] = 5
    bufs[2][0] = 6

    def check(x):
        if x[0] > 0:
            raise ValueError(f"bad value {x[0]}")

    def batched_check(x):
        raise ValueError("batched")

    f = _facts((), check, batched_check)
    with pytest.raises(ValueError, match="bad value 5"):
        batch_run.run([[(f, (b,))] for b in bufs])


def test_an_alloc_run_again_in_a_block_gets_fresh_zeros():
    t = Tape(2)
    t.begin(0)
    a = t.zeros(3, (4,), np.dtype(np.float32))
    a[...] = 1
    b = t.zeros(3, (4,), np.dtype(np.float32))
    assert (b == 0).all() and not np.shares_memory(a, b)
    t.begin(1)
    c = t.zeros(3, (4,), np.dtype(np.float32))
    assert (c == 0).all() and c.base is a.base


def test_a_window_taken_leaves_its_slices_zeroed_for_the_next():
    """Blocks recorded a window at a time: the next window's blocks take the same slices, zeroed
    again (the plain walk's fresh zeros)."""
    t = Tape(2)
    got = []
    for b in range(4):
        t.begin(b)
        a = t.zeros(5, (3,), np.dtype(np.float32))
        assert (a == 0).all()
        a[...] = b + 1
        got.append(a)
        if t.full():
            assert len(t.take()) == 2 and not t.blocks
    assert np.shares_memory(got[0], got[2]) and not np.shares_memory(got[0], got[1])


def test_kernels_reading_data_outside_tile_ops_are_not_batched():
    assert batch_run.batchable([SimpleNamespace()])
    assert not batch_run.batchable([memref.StoreOp.__new__(memref.StoreOp)])
    assert not batch_run.batchable([memref.LoadOp.__new__(memref.LoadOp)])
    assert batch_groups.MAX_BATCH >= 2


def test_operands_of_other_ranks_run_per_block(monkeypatch):
    """A row added to each row of a tile (numpy broadcasting a lower-rank operand): batched,
    the batch axis of the row would line up with the tile's rows."""
    monkeypatch.setattr(batch_run, "MIN_OPS", 1)
    t = Tape(2)
    rows, tiles = [], []
    for k in range(2):
        t.begin(k)
        rows.append(t.zeros(0, (3,), np.dtype(np.float32)))
        rows[-1][...] = [1 + k, 2 + k, 3 + k]
        tiles.append(t.zeros(1, (2, 3), np.dtype(np.float32)))

    def add(a, d):
        np.add(d, a, out=d)

    f = _facts((), add, add)
    batch_run.run([[(f, (rows[k], tiles[k]))] for k in range(2)])
    assert all((tiles[k] == rows[k]).all() for k in range(2))
