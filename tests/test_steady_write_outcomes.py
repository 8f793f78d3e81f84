"""A write's L2 outcome (l2.py: the rewrite of a tile still dirty runs at the L2 write rate and
counts as l2_write, a first write at the DDR rate against HBM) depends on the tiles written
before, by this loop or by other blocks. The speed-ups that skip or apply iterations without
running them must check it like a read's: here blocks' grid-stride loops write z rows t / 2
(two iterations per row, the rows of one block overlapping the next blocks'), so a skipped
period's first write of a row is fresh or a rewrite depending on the blocks before. Each report
(cycles, per-pipe busy, bytes, L2 counters) equals the walk of every op's (`Accel.none()`);
the speed-up under test must have fired (iterations extrapolated), or the test proves nothing.
(Before the checks: the steady jump gave 21380 cycles for the first launch, the walk 21483;
the loop memo, 48557 against 48049 for the second.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.interpreter.testing import parse

HW = load_target("ascend910b2")
GM = "memref<4096x64xf16, #ascend<space gm>>"


def _launch(body: str, block_dim: int, w: int) -> str:
    """A kernel of `block_dim` AIV blocks running `body` (x read, z written, UB tiles %a, %b of
    1 x `w`), and its host @main."""
    UB = f"memref<1x{w}xf16, #ascend<space ub>>"
    return f"""builtin.module {{
  ascend.kernel @k(%x: {GM}, %z: {GM}) attributes {{block_dim = {block_dim} : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {UB}
    %b = ascend.alloc : {UB}
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c7 = arith.constant 7 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %c40 = arith.constant 40 : index
    %c200 = arith.constant 200 : index
    %bid = ascend.block_idx : index
    ascend.set_flag V -> MTE2, 0
{body}
    ascend.wait_flag V -> MTE2, 0
    ascend.return
  }}
  func.func @main(%x: {GM} {{onnx.name = "x"}}) -> ({GM} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {GM}
    ascend.launch @k(%x, %z) : {GM}, {GM}
    func.return %z : {GM}
  }}
}}"""


def _step(x: str, z: str, w: int) -> str:
    """Read x at `x`, add into %b, write %b to z at `z` (1 x `w` tiles, flag-ordered)."""
    UB = f"memref<1x{w}xf16, #ascend<space ub>>"
    SV = f"memref<1x{w}xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"
    return f"""        %xs = memref.subview %x[{x}] [1, {w}] [1, 1] : {GM} to {SV}
        ascend.wait_flag V -> MTE2, 0
        ascend.copy %xs, %a : {SV}, {UB}
        ascend.set_flag MTE2 -> V, 0
        ascend.wait_flag MTE2 -> V, 0
        ascend.vmul %a, %b, %b : {UB}, {UB}, {UB}
        ascend.vadd %a, %b, %b : {UB}, {UB}, {UB}
        ascend.set_flag V -> MTE2, 0
        ascend.set_flag V -> MTE3, 0
        ascend.wait_flag V -> MTE3, 0
        %zs = memref.subview %z[{z}] [1, {w}] [1, 1] : {GM} to {SV}
        ascend.copy %b, %zs : {UB}, {SV}
        ascend.set_flag MTE3 -> V, 1
        ascend.wait_flag MTE3 -> V, 1"""


# the steady jump: block b runs t = b .. min(7b + 32, 200) unless b % 3 == 1, writing row t / 2
# (blocks 0, 2, 3 run; block 3's rows 1 .. 16 were written by blocks 0 and 2, its later ones not)
JUMP = _launch(f"""    %ub0 = arith.muli %bid, %c7 : index
    %ub1 = arith.addi %ub0, %c32 : index
    %ub = arith.minui %ub1, %c200 : index
    %r = arith.remui %bid, %c3 : index
    %runs = arith.cmpi ne, %r, %c1 : index
    scf.if %runs {{
      scf.for %t = %bid to %ub step %c1 {{
        %r2 = arith.divui %t, %c2 : index
{_step("%t, 0", "%r2, 0", 64)}
      }}
    }}""", 4, 64)

# the loop memo: an inner loop over 8 column tiles, its execution stored at t = 2k (first writes
# of row k) and entered again at t = 2k + 1 with the same control values and state (the reads
# all hit row 0): its writes are rewrites there
MEMO = _launch(f"""    scf.for %t = %bid to %c40 step %c1 {{
      %r2 = arith.divui %t, %c2 : index
      scf.for %j = %c0 to %c8 step %c1 {{
        %cj = arith.muli %j, %c8 : index
{_step("%c0, %cj", "%r2, %cj", 8)}
      }}
    }}""", 2, 8)


def _report(text: str, accel: Accel) -> tuple[dict, tuple, int]:
    """(the timing-only report without extrapolated_iterations, the L2 hit and miss counters,
    the iterations the speed-ups skipped)."""
    prog = compile_module(parse(text), HW, None, timing_only=True, accel=accel)
    _, recs = prog.run({})
    rep = build_report(recs, HW)
    skipped = 0
    for k in rep["kernels"]:
        skipped += k.pop("extrapolated_iterations")
    return rep, (prog.l2.hits, prog.l2.misses), skipped


@pytest.mark.parametrize("text, accel", [(JUMP, Accel(loop_memo=False, remap=False, xblock=False)), (JUMP, Accel()),
                                         (MEMO, Accel()), (MEMO, replace(Accel(), xblock=False))],
                         ids=["jump", "jump-all", "memo", "memo-no-xblock"])
def test_skipped_writes_keep_their_outcomes(text: str, accel: Accel) -> None:
    ref, l2_ref, _ = _report(text, Accel.none())
    got, l2, skipped = _report(text, accel)
    assert skipped > 0  # the speed-ups fired
    assert got["total_cycles"] == ref["total_cycles"]
    assert [k["pipe_busy"] for k in got["kernels"]] == [k["pipe_busy"] for k in ref["kernels"]]
    assert got == ref
    assert l2 == l2_ref
