"""A block's whole tile-loop execution reused by the next blocks (interpreter/accel/xblock.py): only
where the block index reaches the body through checked values (or moves GM offsets only:
tests/test_xblock_moves.py), and then the recording pass records exactly what running every
block records (the same designated misses, the same report); remapped writes that would get
other L2 outcomes than the stored ones are not reused."""

from __future__ import annotations

import pytest
from xdsl.dialects import scf

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.timing import l2
from ascendir.interpreter.accel import loop_memo, steady, xblock
from ascendir.interpreter.accel.remap import address_plan
from ascendir.interpreter.testing import matmul_ir, parse

HW = load_target("ascend910b2")


def _plan(module):
    loop = next(op for op in module.walk() if isinstance(op, scf.ForOp))
    checked = steady.uniform_loop(loop)
    ctrl, _addr, _copies = loop_memo.memo_inputs(loop)
    tree = steady.OpTree(loop)
    got = xblock.BlockMemo.plan(loop, checked, ctrl, address_plan(loop, checked, tree), tree)
    return loop, got[0] if got is not None else None


def test_plan_keys_the_tile_loop_without_the_block_index():
    module = parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24))
    loop, keyed = _plan(module)
    assert keyed is not None and loop.lb not in keyed and loop.ub in keyed and loop.step in keyed
    assert address_plan(loop, steady.uniform_loop(loop)) is not None


def _strided_writes(offset: str) -> str:
    """Blocks write 16-row tiles of z from a loop t = block .. 64 step 4; `offset`: the tile's
    row offset, as IR text of an index value computed from %t (`%r` must be defined)."""
    ub = "memref<16x256xf16, #ascend<space ub>>"
    gm = "memref<1024x256xf16, #ascend<space gm>>"
    sv = "memref<16x256xf16, strided<[256, 1], offset: ?>, #ascend<space gm>>"
    return f"""builtin.module {{
  ascend.kernel @w(%x: {gm}, %z: {gm}) attributes {{block_dim = 4 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %bid = ascend.block_idx : index
    %u = ascend.alloc : {ub}
    ascend.set_flag MTE3 -> MTE2, 0
    scf.for %t = %bid to %c64 step %c4 {{
{offset}
      %xs = memref.subview %x[%r, 0] [16, 256] [1, 1] : {gm} to {sv}
      ascend.wait_flag MTE3 -> MTE2, 0
      ascend.copy %xs, %u : {sv}, {ub}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.vadd %u, %u, %u : {ub}, {ub}, {ub}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      %zs = memref.subview %z[%r, 0] [16, 256] [1, 1] : {gm} to {sv}
      ascend.copy %u, %zs : {ub}, {sv}
      ascend.set_flag MTE3 -> MTE2, 0
    }}
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.return
  }}
  func.func @main(%x: {gm} {{onnx.name = "x"}}) -> ({gm} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {gm}
    ascend.launch @w(%x, %z) : {gm}, {gm}
    func.return %z : {gm}
  }}
}}"""


def test_plan_refuses_an_iv_used_outside_checked_ops():
    # the iv offsets the subviews directly (an affine use, not a checked op): another block's
    # offsets would not be this block's moved by its address values
    text = _strided_writes("      %r = arith.muli %t, %c16 : index")
    assert _plan(parse(text))[1] is not None
    direct = text.replace("%x[%r, 0]", "%x[%t, 0]")
    assert _plan(parse(direct))[1] is None


def _run(module, monkeypatch, enabled: bool, timed: list | None = None) -> tuple[dict, set, list[bool]]:
    """(report, designated misses, BlockMemo.reuse answers of the recording passes) of a
    timing-only run; `timed` gets the timed passes' answers."""
    designated: list[set] = []
    settle = l2.L2Pass.settle

    def spy_settle(self, l2=None):
        settle(self, l2)
        designated.append(set(self.misses))

    answers: list[bool] = []
    reuse = xblock.BlockMemo.reuse

    def spy_reuse(self, F, *a):
        got = reuse(self, F, *a) if enabled else False
        (answers if F.l2_pass.recording else timed if timed is not None else []).append(got)
        return got

    monkeypatch.setattr(l2.L2Pass, "settle", spy_settle)
    monkeypatch.setattr(xblock.BlockMemo, "reuse", spy_reuse)
    rep = simulate(module, None, {}, HW, timing_only=True).report
    monkeypatch.undo()
    return rep, set().union(*designated), answers


def _same(a: dict, b: dict) -> None:
    assert a["total_cycles"] == b["total_cycles"]
    assert a["tile_ops"] == b["tile_ops"] and a["bytes"] == b["bytes"]


def test_reused_blocks_record_what_running_them_records(monkeypatch):
    # 256 tiles over 24 cores: blocks 1-15 reuse block 0's 11-iteration tile loop, 17-23 block 16's
    module = parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24))
    on, des_on, answers = _run(module, monkeypatch, True)
    off, des_off, _ = _run(module, monkeypatch, False)
    assert answers.count(True) == 22
    assert des_on == des_off and des_on
    _same(on, off)
    full = simulate(module, None, {}, HW, timing_only=True, extrapolate=False).report
    assert on["total_cycles"] == full["total_cycles"] and on["tile_ops"] == full["tile_ops"]


@pytest.mark.parametrize("shared", [False, True])
def test_writes_with_other_outcomes_are_not_reused(shared, monkeypatch):
    # each block its own tiles (t·16): every block's writes are first writes, as block 0's; or
    # every block the same tiles ((t / 4)·16): block 1 rewrites what block 0 left dirty in L2 at
    # the same simulated times, so its write outcomes differ and it runs; blocks 2 and 3 rewrite
    # them too, as block 1 did, and reuse its execution
    offset = ("      %q = arith.divui %t, %c4 : index\n      %r = arith.muli %q, %c16 : index" if shared
              else "      %q = arith.remui %t, %c64 : index\n      %r = arith.muli %q, %c16 : index")
    module = parse(_strided_writes(offset))
    on, des_on, answers = _run(module, monkeypatch, True)
    off, des_off, _ = _run(module, monkeypatch, False)
    assert answers == ([False, False, True, True] if shared else [False, True, True, True])
    assert des_on == des_off
    _same(on, off)


def test_an_outside_offset_per_block_moves_the_stored_reads(monkeypatch):
    # each block also reads rows of x at an offset its block index gives outside the loop (an
    # address value of the loop: a subview offset only): block 1 reusing block 0's execution
    # records its reads there moved by the offsets' difference (a shift, xblock.Moves), as
    # running it records them (tests/test_xblock_moves.py has the other moves and fallbacks)
    offset = "      %q = arith.remui %t, %c64 : index\n      %r = arith.muli %q, %c16 : index"
    text = _strided_writes(offset).replace(
        "    scf.for %t = %bid to %c64 step %c4 {{".replace("{{", "{"),
        "    %o = arith.muli %bid, %c64 : index\n    %v = ascend.alloc : memref<16x256xf16, #ascend<space ub>>\n"
        "    scf.for %t = %bid to %c64 step %c4 {").replace(
        "      ascend.copy %xs, %u : ",
        "      %xo = memref.subview %x[%o, 0] [16, 256] [1, 1] : memref<1024x256xf16, #ascend<space gm>> to "
        "memref<16x256xf16, strided<[256, 1], offset: ?>, #ascend<space gm>>\n"
        "      ascend.copy %xo, %v : memref<16x256xf16, strided<[256, 1], offset: ?>, #ascend<space gm>>, "
        "memref<16x256xf16, #ascend<space ub>>\n      ascend.copy %xs, %u : ")
    assert "%xo" in text
    module = parse(text)
    on, des_on, answers = _run(module, monkeypatch, True)
    off, des_off, _ = _run(module, monkeypatch, False)
    assert des_on == des_off
    _same(on, off)
    assert answers == [False, True, True, True]


def test_timed_pass_reuses_blocks_with_the_same_outcomes(monkeypatch):
    # each block its own tiles, its reads designated misses at the same ordinals as block 0's
    # (l2.L2Pass.shares): the timed pass applies block 0's execution to blocks 1-3 too, and the
    # report is the one of running them (every figure, the extrapolated iterations included)
    from ascendir.interpreter import compile_module
    from ascendir.interpreter.report.report import build_report

    module = parse(_strided_writes("      %q = arith.remui %t, %c64 : index\n      %r = arith.muli %q, %c16 : index"))
    timed: list[bool] = []
    on, _, _ = _run(module, monkeypatch, True, timed)
    off, _, _ = _run(module, monkeypatch, False)
    assert timed == [False, True, True, True]
    assert on == off
    # what the run leaves behind is the same too: the chip L2 (latest accesses, dirty tiles,
    # counters) and the stored launch (its checks of first writes and designated reads)
    left = []
    for enabled in (True, False):
        if not enabled:
            monkeypatch.setattr(xblock.BlockMemo, "reuse", lambda *a: False)
        prog = compile_module(module, HW, None, timing_only=True)
        _, recs = prog.run({})
        prog.l2.commit()
        (launches,) = prog.memo.values()
        (m,) = launches.stored()
        left.append((build_report(recs, HW), prog.l2.last, prog.l2.dirty, prog.l2.hits, prog.l2.misses,
                     [a.tolist() for t in (m.checks, m.wchecks, m.touched, m.written) for a in (t.stream, t.off, t.rel)],
                     m.wchecks.out.tolist(), m.skipped))
    monkeypatch.undo()
    assert left[0] == left[1] and left[0][2] and left[0][6]
    full = simulate(module, None, {}, HW, timing_only=True, extrapolate=False).report
    assert on["total_cycles"] == full["total_cycles"] and on["tile_ops"] == full["tile_ops"] and on["bytes"] == full["bytes"]


def test_timed_reads_hold_only_with_the_same_outcomes():
    # xblock.BlockMemo._reads_hold: a stored read that missed must be a designated miss of this
    # block; a designated read hits exactly when an earlier kernel left its tile resident
    from types import SimpleNamespace

    import numpy as np

    cache = l2.L2Cache(HW)
    p = l2.L2Pass(cache.window)
    p.recording = False
    p.misses = {(3, 10), (3, 12), (5, 11)}
    p.ordinal = {3: 10, 5: 10}
    cache.last = {102: 0.0}  # tile 102 left by an earlier kernel (resident near t = 0)
    F = SimpleNamespace(block=3, l2=cache, kernel_start=0.0)
    keys, t = np.array([100, 101, 102], np.int64), np.array([5.0, 6.0, 7.0])
    hold = xblock.BlockMemo._reads_hold
    assert hold(F, p, keys, t, np.array([False, True, True]), [0])  # 100 misses, 102 resident: hits
    assert not hold(F, p, keys, t, np.array([False, True, False]), [0, 2])  # 102 would hit
    assert not hold(F, p, keys, t, np.array([True, True, True]), [])  # 100 would miss
    F.block = 5  # its only designated read is the second one
    assert not hold(F, p, keys, t, np.array([False, True, True]), [0])
    assert hold(F, p, keys, t, np.array([True, False, True]), [1])
    assert p.shares(3) is False and p.shares(4) is True
