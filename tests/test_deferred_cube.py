"""Deferred cube data of numerics data walks (interpreter/exec/deferred.py): a GEMM's L0C tiles
computed as one matmul per K-contiguous run of GM slices. Outputs equal the op-by-op execution
(Accel.none(): one walk running every op as written) within the fp32 accumulation-order bound
the module states, reports identical, races still caught."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.exec import deferred, kblock
from ascendir.interpreter.testing import matmul_ir, parse
from tests.blas_order import assert_same_sums

HW = load_target("ascend910b2")
U = 2.0**-24  # fp32 unit roundoff


def _timing(report: dict) -> dict:
    """`report` without `extrapolated_iterations`, the one figure the speed-ups may change
    (`Accel`: it counts the steady-state jumps taken, which Accel.none() takes none of)."""
    return {**report, "kernels": [{k: v for k, v in kern.items() if k != "extrapolated_iterations"} for kern in report["kernels"]]}


def _counting(monkeypatch) -> dict:
    """Counts of L0C sums materialised and of the K (columns of A) their terms covered (the
    K-loop memo joins the terms of consecutive K slices: data_loop_memo.py)."""
    n = {"sums": 0, "k": 0}
    orig = deferred.CubeDeferral._sum

    def counted(self, acc, c, terms):
        n["sums"] += 1
        n["k"] += sum(t[0].shape[1] for t in terms)
        return orig(self, acc, c, terms)

    monkeypatch.setattr(deferred.CubeDeferral, "_sum", counted)
    return n


@pytest.mark.parametrize("m, n, k, nbuf", [(512, 384, 1024, 1), (300, 200, 520, 1), (256, 640, 1000, 2)])
def test_gemm_equals_op_by_op_within_the_accumulation_bound(monkeypatch, m, n, k, nbuf):
    # edge tiles in M, N and K (300, 200, 520, 1000 are not multiples of the 128 tiles): zero
    # padding in L1 / L0 and short K steps; nbuf = 2: double-buffered L1 / L0
    module = parse(matmul_ir(m, n, k, tm=128, tn=128, tk=128, block_dim=24, nbuf=nbuf))
    rng = np.random.default_rng(k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    counts = _counting(monkeypatch)
    new = simulate(module, None, {"a": a, "b": b}, HW)
    assert counts["sums"] > 0 and counts["k"] == counts["sums"] * k, counts
    old = simulate(module, None, {"a": a, "b": b}, HW, accel=Accel.none())
    assert _timing(new.report) == _timing(old.report)
    got, ref = new.outputs["c"].astype(np.float64), old.outputs["c"].astype(np.float64)
    gamma = k * U / (1 - k * U)
    bound = 2 * gamma * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert (np.abs(got - ref) <= bound).all()
    assert not np.array_equal(got, ref)  # one matmul over K, not the mmads' order: the test sees the path


def test_column_half_steps_materialise_no_overwritten_copy(monkeypatch):
    # a GEMM run by L0C column halves (templates/matmul.py `_tile_halves`): its L0B double buffer
    # takes a 32 x 64 box, then the whole 32 x 128 region over it, then the box again: every copy is
    # read by its mmads as recorded, so none is ever materialised (each was when the next overlapped
    # it, converting weight tiles no op read). Values as op by op within the bound, same report
    from lowering_harness import lower_text, rand
    from test_lowering_matmul import _tiled, matmul_text

    m, k, n = 320, 288, 640  # three L1 chunks of 96: the first and the last by column halves, the middle whole
    module = lower_text(_tiled(matmul_text((m, k), (k, n), (m, n), "f16"), "m=64,n=128,k=32,l1_depth=3,split_k=1,swizzle=1"))
    a, b = rand((m, k), np.float16), rand((k, n), np.float16, seed=1)
    counts = _counting(monkeypatch)
    flushed = []
    orig = deferred.CubeDeferral._flush_copies
    monkeypatch.setattr(deferred.CubeDeferral, "_flush_copies", lambda self, root: (flushed.append(root), orig(self, root))[1])
    new = simulate(module, None, {"a": a, "b": b}, HW)
    assert counts["sums"] > 0 and not flushed
    monkeypatch.setattr(deferred.CubeDeferral, "_flush_copies", orig)
    old = simulate(module, None, {"a": a, "b": b}, HW, accel=Accel.none())
    assert _timing(new.report) == _timing(old.report)
    (name,) = new.outputs
    got, ref = new.outputs[name].astype(np.float64), old.outputs[name].astype(np.float64)
    bound = 2 * k * U / (1 - k * U) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert (np.abs(got - ref) <= bound + np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)).all()


def test_an_overwritten_copy_is_dropped_or_materialised_before_the_one_over_it():
    # CubeDeferral._put: a region a later copy covers is dropped; one it covers in part stays
    # (stale: read by no op as recorded) and is written first when the buffer is materialised
    cube = deferred.CubeDeferral([])
    buf = np.zeros((4, 8), np.float32)
    written = []

    def put(c0: int, w: int, value: float) -> None:
        d = buf[:, c0: c0 + w]
        cube._put(("l0b", c0, (8, 1)), d, lambda v, d: (written.append(v), d.fill(v)), value, ((0, w, None, None),))

    def stale() -> list[bool]:
        return [e[3] is None for e in cube.copies["l0b"].values()]

    put(0, 8, 1.0)
    put(0, 4, 2.0)  # the left half of the first
    assert stale() == [True, False]
    put(0, 4, 3.0)  # the same box again: recorded after the stale region, which it still overwrites in part
    assert stale() == [True, False]
    put(2, 4, 4.0)  # across the box: stale too
    assert stale() == [True, True, False]
    cube._flush_copies("l0b")
    assert written == [1.0, 3.0, 4.0]
    np.testing.assert_array_equal(buf[0], [3, 3, 4, 4, 4, 4, 1, 1])
    put(0, 4, 5.0)
    put(0, 8, 6.0)  # covers the box: dropped, never written
    assert stale() == [False]
    written.clear()
    cube._flush_copies("l0b")
    assert written == [6.0] and (buf == 6).all()


def test_race_still_caught_with_deferred_cube_data(monkeypatch):
    # the mmad no longer waits for the MTE1 copy into L0A: the data walk checks every op's
    # accesses before recording it (tile_ops.py `_data_tile`), deferred or not
    from test_interpreter_race import _drop

    text = _drop(matmul_ir(256, 256, 512, block_dim=2), "ascend.wait_flag MTE1 -> M, 0")
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((256, 512)).astype(np.float16), "b": rng.standard_normal((512, 256)).astype(np.float16)}
    counts = _counting(monkeypatch)
    simulate(parse(matmul_ir(256, 256, 512, block_dim=2)), None, feeds, HW)
    assert counts["sums"] > 0  # the intact kernel defers its cube data
    with pytest.raises(AscendirError, match=r"race in kernel @matmul .*l0a buffer .*ascend.copy on MTE1 and ascend.mmad on M"):
        simulate(parse(text), None, feeds, HW)


def test_kernels_with_scalar_data_access_are_not_deferred():
    # memref.load / memref.store read or write data outside the tile ops: no proof, no deferral
    from xdsl.dialects import memref

    from ascendir.interpreter.exec import registry

    kernel = next(o for o in parse(matmul_ir(256, 256, 512, block_dim=2)).walk() if o.name == "ascend.kernel")
    body = list(kernel.walk())[1:]
    assert deferred.eligible(body, registry.SEMANTICS)
    load = memref.LoadOp.get(kernel.body.block.args[0], [])
    assert not deferred.eligible([*body, load], registry.SEMANTICS)


@pytest.mark.sampled
def test_small_decoder_layer_defers_its_gemms_and_matches_op_by_op(monkeypatch):
    # benchmarks/fusion.py's decoder layer at small sizes, lowered at -O2: fused norm + QKV, the
    # attention, O with its epilogue, the fused gate / up GEMM (both weights side by side in one
    # L1 buffer: B's pieces), down. Reports identical; outputs as the single walk's up to the sums'
    # addition order: within an fp16 ulp of the largest output (2^-10 of it), where a wrong
    # provenance moves outputs by their own size (A's K slices read from a wrong column: as large as the largest)
    from lowering_harness import decoder_layer

    module, weights, x = decoder_layer(monkeypatch, HW, 64, h=256, heads=2, d=128, mlp=512)
    for name in list(weights):  # std 0.2 (not 0.02): the GEMMs' share of the output is not lost behind the residuals
        weights.convert(name, lambda w: (w.astype(np.float32) * 10).astype(np.float16))
    counts = {}
    orig = deferred.CubeDeferral._sum
    from ascendir.interpreter.sim import kernel

    walk = kernel.KernelProgram._data_walk
    running = [None]

    def data_walk(self, *a):
        running[0] = self.name
        return walk(self, *a)

    def counted(self, acc, c, terms):
        counts[running[0]] = counts.get(running[0], 0) + 1
        return orig(self, acc, c, terms)

    monkeypatch.setattr(kernel.KernelProgram, "_data_walk", data_walk)
    monkeypatch.setattr(deferred.CubeDeferral, "_sum", counted)
    new = simulate(module, weights, {"arg0": x}, HW)
    assert {"norm_matmul_0", "matmul_epilogue_0", "ffn_up_0", "ffn_down_0"} <= set(counts), counts
    old = simulate(module, weights, {"arg0": x}, HW, accel=Accel.none())
    assert _timing(new.report) == _timing(old.report)
    got, ref = new.outputs["out0"].astype(np.float64), old.outputs["out0"].astype(np.float64)
    assert np.abs(got - ref).max() <= 2.0**-10 * np.abs(ref).max()


def test_a_gm_write_over_a_recorded_load_materialises_it_first(monkeypatch):
    # test_interpreter_wide's round trip, with the second mmad reading the L1 copy of the GM
    # workspace %w made *before* FixPipe rewrote %w (instead of loading it again): the recorded
    # load must give the old values, so the write materialises what is recorded first
    from test_interpreter_wide import ROUND_TRIP, _gm, _sp

    reload = f"    ascend.copy %w, %l1a : {_gm((32, 32), 'f16')}, {_sp('l1', 'f16')}\n"
    second = f"    ascend.copy %l1a, %l0a : {_sp('l1', 'f16')}, {_sp('l0a', 'f16')}\n    ascend.set_flag MTE1 -> M, 1"
    assert reload in ROUND_TRIP and second in ROUND_TRIP
    text = ROUND_TRIP.replace(reload, "").replace(second, second.replace("%l1a", "%l1w"))
    rng = np.random.default_rng(6)
    a, b, w = (rng.standard_normal((32, 32)).astype(np.float16) for _ in range(3))
    flushes = []
    orig = deferred.CubeDeferral.flush
    monkeypatch.setattr(deferred.CubeDeferral, "flush", lambda self: (flushes.append(1), orig(self))[1])
    # (its 32 x 32 x 32 mmads would each be computed alone: deferred all the same, `_joins`)
    monkeypatch.setattr(deferred, "_joins", lambda op: True)
    out = simulate(parse(text), None, {"arg0": a, "arg1": b, "arg2": w}, HW).outputs["out0"]
    assert flushes  # the FixPipe write into %w
    np.testing.assert_array_equal(out, w.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("m, n, k, supers", [(512, deferred.GRID_COLS + 256, 512, 2), (300, 1100, 520, 1), (1100, 300, 520, 2)])
def test_super_tiles_give_the_lone_tiles_bits(monkeypatch, m, n, k, supers):
    # a GEMM's tiles read as blocks of super-tile products (512 rows x GRID_COLS columns: 256
    # columns more leave a second, narrower one; 300 rows take one band of 300; 1100 rows two bands
    # of 512 and the small rest; the edge tiles of 76 rows or columns are small
    # (deferred.BLOCKED_MNK): alone, so 300 x 1100 makes one): bit for bit what each tile's own
    # product gives, same report
    module = parse(matmul_ir(m, n, k, tm=128, tn=128, tk=128, block_dim=24))
    rng = np.random.default_rng(m + n)
    feeds = {"a": rng.standard_normal((m, k)).astype(np.float16), "b": rng.standard_normal((k, n)).astype(np.float16)}
    rows = []
    once = deferred.CubeDeferral._once
    monkeypatch.setattr(deferred.CubeDeferral, "_once", lambda self, a, b: (rows.append(a.shape[0]), once(self, a, b))[1])
    new = simulate(module, None, feeds, HW)
    assert rows.count(min(m, deferred.GRID_ROWS)) == supers  # one per band and GRID_COLS columns, after the GEMM's first tile alone
    monkeypatch.setattr(deferred, "_super", lambda ga, gb: None)
    rows.clear()
    old = simulate(module, None, feeds, HW)
    assert rows and max(rows) <= 128  # every tile alone
    assert _timing(new.report) == _timing(old.report)
    assert_same_sums(new.outputs["c"], old.outputs["c"], feeds["a"], feeds["b"])


def test_a_tail_split_gemm_converts_its_weight_once_and_computes_little_waste(monkeypatch):
    # 512 x 4096 x 1024 in 128 x 128 tiles on 24 AICs: a whole wave of 24 whole-K tiles, then the
    # 8 tiles of rows 384-511 in 3 K ranges (templates/matmul.py tail split). The whole-K tiles
    # read one super-tile of all 512 rows and 1024 columns, so B's whole-K slice is converted once
    # (256-row bands converted it twice); the K ranges, asked for by the tail rows only, read
    # super-tiles of 256 rows (512 computed every range's product for 512 rows: 2.03 times the
    # GEMM's flops against 1.53). Bit for bit what each tile's own product gives, same report.
    # (B converted whole into the work buffer: where the BLAS's K blocks are not known, kblock.py;
    # tests/test_kblock.py runs a tail split by K blocks)
    from lowering_harness import lower_text, rand
    from test_choose_tiling import with_tiling
    from test_lowering_matmul import matmul_text

    from ascendir.interpreter.exec.wide import GmShadows

    m, k, n = 512, 4096, 1024
    module = lower_text(with_tiling(matmul_text((m, k), (k, n), (m, n), "f16"), "m=128,n=128,k=64,l1_depth=2,tail_split=3"))
    feeds = {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16, seed=1)}
    monkeypatch.setattr(kblock, "_lib", lambda: None)
    flops, widened = [], []
    once, widen = deferred.CubeDeferral._once, GmShadows.widened
    monkeypatch.setattr(deferred.CubeDeferral, "_once", lambda self, a, b: (flops.append(2 * a.shape[0] * a.shape[1] * b.shape[1]), once(self, a, b))[1])
    monkeypatch.setattr(GmShadows, "widened", lambda self, v, slot: (widened.append(v.shape), widen(self, v, slot))[1])
    new = simulate(module, None, feeds, HW)
    assert widened.count((k, n)) == 1
    assert sum(flops) <= 1.6 * 2 * m * n * k
    monkeypatch.setattr(deferred, "_super", lambda ga, gb: None)
    old = simulate(module, None, feeds, HW)
    assert _timing(new.report) == _timing(old.report)
    (name,) = new.outputs
    assert_same_sums(new.outputs[name], old.outputs[name], feeds["a"], feeds["b"])


def test_a_tail_split_gemms_k_pieces_read_the_weight_its_super_tile_converted(monkeypatch):
    # 512 x 4096 x 1024 in 128 x 128 tiles on 24 AICs, the 8 tiles of rows 384-511 in 3 K ranges
    # (templates/matmul.py tail split): each range's super-tile (and its first tile alone) reads
    # rows of the whole-K super-tile's B slice, which the work buffer still holds (wide.py
    # `GmShadows.widened`): B's elements are converted once, besides the GEMM's first tile (a
    # column half, converted before any super-tile); twice that when each range converts its
    # own. Bit for bit what each tile's own product gives, same report. (Where the BLAS's K
    # blocks are known, B is converted by K blocks instead and nothing is held: kblock.py)
    from lowering_harness import lower_text, rand
    from test_choose_tiling import with_tiling
    from test_lowering_matmul import matmul_text

    from ascendir.interpreter.exec import wide

    m, k, n = 512, 4096, 1024
    module = lower_text(with_tiling(matmul_text((m, k), (k, n), (m, n), "f16"), "m=128,n=128,k=64,l1_depth=2,tail_split=3"))
    feeds = {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16, seed=1)}
    monkeypatch.setattr(kblock, "_lib", lambda: None)
    converted = []
    into = wide.widen_into
    monkeypatch.setattr(wide, "widen_into", lambda d, s: (converted.append(s.shape), into(d, s))[1])
    new = simulate(module, None, feeds, HW)
    assert [s for s in converted if len(s) == 2] == [(k, 64), (k, n)]  # (1-D: A's launch copy, by chunks)
    monkeypatch.setattr(deferred, "_super", lambda ga, gb: None)
    old = simulate(module, None, feeds, HW)
    assert _timing(new.report) == _timing(old.report)
    (name,) = new.outputs
    assert_same_sums(new.outputs[name], old.outputs[name], feeds["a"], feeds["b"])


def test_a_gm_write_forgets_the_super_tiles_it_meets():
    from ascendir.interpreter.exec.wide import GmShadows

    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 512)).astype(np.float16)  # tiles of 128 x 512 x 128: past deferred.BLOCKED_MNK
    b = rng.standard_normal((512, 512)).astype(np.float16)
    cube = deferred.CubeDeferral([])
    cube.reset(GmShadows())

    def tile(j: int) -> np.ndarray:
        return cube._product(a[:128], b[:, j: j + 128])

    def ref() -> np.ndarray:
        return a.astype(np.float32) @ b.astype(np.float32)

    assert_same_sums(tile(0), ref()[:128, :128], a[:128], b[:, :128])  # a first tile: alone
    assert not cube.grids
    assert_same_sums(tile(128), ref()[:128, 128:256], a[:128], b[:, 128:256])  # a second: the super-tile
    assert len(cube.grids) == 1
    elsewhere = np.zeros((4, 4), np.float16)
    cube._written(elsewhere)
    assert len(cube.grids) == 1
    b[5, 200] = 1000  # a write into B under the super-tile
    cube._written(b[5:6, 200:201])
    assert not cube.grids
    assert_same_sums(tile(128), ref()[:128, 128:256], a[:128], b[:, 128:256])


def test_a_gemm_computes_one_tile_alone_then_super_tiles_at_their_first_tile(monkeypatch):
    # 512 x 3 GRID_COLS: three super-tiles of 512 x GRID_COLS; the blocks start on tiles of more
    # than one, so asking two tiles of each super-tile first would take tiles alone besides; the
    # GEMM's first tile alone is enough, the same bits as every tile alone, same report
    c = deferred.GRID_COLS
    module = parse(matmul_ir(512, 3 * c, 512, tm=128, tn=128, tk=128, block_dim=24))
    rng = np.random.default_rng(5)
    feeds = {"a": rng.standard_normal((512, 512)).astype(np.float16), "b": rng.standard_normal((512, 3 * c)).astype(np.float16)}
    shapes = []
    once = deferred.CubeDeferral._once
    monkeypatch.setattr(deferred.CubeDeferral, "_once", lambda self, a, b: (shapes.append((a.shape[0], b.shape[1])), once(self, a, b))[1])
    new = simulate(module, None, feeds, HW)
    assert sorted(shapes) == [(128, 128)] + [(512, c)] * 3
    monkeypatch.setattr(deferred, "_super", lambda ga, gb: None)
    old = simulate(module, None, feeds, HW)
    assert _timing(new.report) == _timing(old.report)
    assert_same_sums(new.outputs["c"], old.outputs["c"], feeds["a"], feeds["b"])


def test_a_gm_write_under_a_gemm_makes_its_next_first_tile_alone_again():
    from ascendir.interpreter.exec.wide import GmShadows

    rng = np.random.default_rng(8)
    a = rng.standard_normal((256, 512)).astype(np.float16)
    c = deferred.GRID_COLS
    b = rng.standard_normal((512, 2 * c)).astype(np.float16)  # two super-tiles of GRID_COLS columns
    cube = deferred.CubeDeferral([])
    cube.reset(GmShadows())

    def tile(j: int) -> np.ndarray:
        return cube._product(a[:128], b[:, j: j + 128])

    ref = a.astype(np.float32) @ b.astype(np.float32)
    assert_same_sums(tile(0), ref[:128, :128], a[:128], b[:, :128])  # the GEMM's first tile: alone
    assert not cube.grids
    b[3, 5] = 7  # a P rewritten before each read (here B): the GEMM starts over
    cube._written(b[3:4, 5:6])
    ref = a.astype(np.float32) @ b.astype(np.float32)
    assert_same_sums(tile(c), ref[:128, c: c + 128], a[:128], b[:, c: c + 128])  # alone again
    assert not cube.grids
    assert_same_sums(tile(0), ref[:128, :128], a[:128], b[:, :128])  # another super-tile's first tile: its super-tile
    assert len(cube.grids) == 1
