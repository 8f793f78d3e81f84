"""A timing-only run raises a user's out-of-bounds subview even where the steady jump
(interpreter/accel/steady.py) would skip the iteration that holds it: the jump stops short of it
(scf_ops.in_bounds), the iteration runs and raises the error of the walk of every op
(`Accel.none()`). Before: a one-block grid-stride loop reading x rows 16·t + 32 .. +16 for t up
to 399 ran to its end with the speed-ups (the rows past 4096 were in skipped iterations), and
raised with Accel.none() (offset 4832)."""

from __future__ import annotations

import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.testing import parse
from test_xblock_oob_error import GM, SV, UB, _error as _launch_error, _ir

HW = load_target("ascend910b2")


def _error(ir: str, accel: Accel) -> str:
    """The out-of-bounds error a timing-only run of `ir` with the speed-ups `accel` raises."""
    return _launch_error(ir, timing_only=True, accel=accel)


@pytest.mark.parametrize("step, ub, base", [(1, 400, 32), (3, 300, 0), (2, 257, 100)])
def test_out_of_bounds_in_a_skipped_iteration_still_raises(step, ub, base):
    ir = _ir(block_dim=1, step=step, ub=ub, rows=16, base=base)
    assert _error(ir, Accel()) == _error(ir, Accel.none())


# one block, t = 0 .. 254, x rows 16·t + 32 (out of bounds at t = 254 only, the last), an odd t
# exponentiating: period 2, so the last iteration is the one a jump's tail (`SteadyLoop._tail`,
# the iterations after its whole periods) skips
PARITY = f"""builtin.module {{
  ascend.kernel @k(%x: {GM}, %z: {GM}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {UB}
    %b = ascend.alloc : {UB}
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %cn = arith.constant 255 : index
    ascend.set_flag V -> MTE2, 0
    scf.for %t = %c0 to %cn step %c1 {{
      %r0 = arith.muli %t, %c16 : index
      %r1 = arith.addi %r0, %c32 : index
      %xs = memref.subview %x[%r1, 0] [16, 16] [1, 1] : {GM} to {SV}
      ascend.wait_flag V -> MTE2, 0
      ascend.copy %xs, %a : {SV}, {UB}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      %par = arith.remui %t, %c2 : index
      %odd = arith.cmpi eq, %par, %c1 : index
      scf.if %odd {{
        ascend.vexp %a, %a : {UB}, {UB}
      }}
      ascend.vadd %a, %b, %b : {UB}, {UB}, {UB}
      ascend.set_flag V -> MTE2, 0
    }}
    ascend.wait_flag V -> MTE2, 0
    ascend.return
  }}
  func.func @main(%x: {GM} {{onnx.name = "x"}}) -> ({GM} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {GM}
    ascend.launch @k(%x, %z) : {GM}, {GM}
    func.return %z : {GM}
  }}
}}"""


def test_out_of_bounds_in_a_skipped_tail_still_raises():
    got = _error(PARITY, Accel())
    assert got == _error(PARITY, Accel.none())
    assert "offset 4096," in got


def test_in_bounds_loop_still_jumps():
    # the check must not stop the jumps of a loop whose subviews stay in bounds
    ir = _ir(block_dim=1, step=1, ub=250, rows=16, base=0)
    r = simulate(parse(ir), None, {}, HW, timing_only=True)
    assert sum(k["extrapolated_iterations"] for k in r.report["kernels"]) > 0
    ref = simulate(parse(ir), None, {}, HW, timing_only=True, accel=Accel.none())
    assert r.report["total_cycles"] == ref.report["total_cycles"]


# one block, t = 0 .. 39, an inner loop reading x row 110·t (past 4096 from t = 38): the bounds
# check covers loop-level subviews only, so the outer loop's jump skips t = 38 with its inner loop
NESTED = """builtin.module {
  ascend.kernel @k(%x: memref<4096x64xf16, #ascend<space gm>>, %z: memref<4096x64xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<1x8xf16, #ascend<space ub>>
    %b = ascend.alloc : memref<1x8xf16, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %cn = arith.constant 40 : index
    %c110 = arith.constant 110 : index
    %bid = ascend.block_idx : index
    ascend.set_flag V -> MTE2, 0
    scf.for %t = %bid to %cn step %c1 {
      %r2 = arith.divui %t, %c2 : index
      %rx = arith.muli %t, %c110 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %cj = arith.muli %j, %c8 : index
        %xs = memref.subview %x[%rx, %cj] [1, 8] [1, 1] : memref<4096x64xf16, #ascend<space gm>> to memref<1x8xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>
        ascend.wait_flag V -> MTE2, 0
        ascend.copy %xs, %a : memref<1x8xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>, memref<1x8xf16, #ascend<space ub>>
        ascend.set_flag MTE2 -> V, 0
        ascend.wait_flag MTE2 -> V, 0
        ascend.vadd %a, %b, %b : memref<1x8xf16, #ascend<space ub>>, memref<1x8xf16, #ascend<space ub>>, memref<1x8xf16, #ascend<space ub>>
        ascend.set_flag V -> MTE2, 0
        ascend.set_flag V -> MTE3, 0
        ascend.wait_flag V -> MTE3, 0
        %zs = memref.subview %z[%r2, %cj] [1, 8] [1, 1] : memref<4096x64xf16, #ascend<space gm>> to memref<1x8xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>
        ascend.copy %b, %zs : memref<1x8xf16, #ascend<space ub>>, memref<1x8xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>
        ascend.set_flag MTE3 -> V, 1
        ascend.wait_flag MTE3 -> V, 1
      }
    }
    ascend.wait_flag V -> MTE2, 0
    ascend.return
  }
  func.func @main(%x: memref<4096x64xf16, #ascend<space gm>> {onnx.name = "x"}) -> (memref<4096x64xf16, #ascend<space gm>> {onnx.name = "z"}) {
    %z = ascend.alloc : memref<4096x64xf16, #ascend<space gm>>
    ascend.launch @k(%x, %z) : memref<4096x64xf16, #ascend<space gm>>, memref<4096x64xf16, #ascend<space gm>>
    func.return %z : memref<4096x64xf16, #ascend<space gm>>
  }
}
"""


@pytest.mark.xfail(strict=True, reason="known gap (steady.py's module doc): a subview inside an inner loop of a skipped "
                   "iteration is not bounds-checked; the speed-ups run this launch to its end")
def test_out_of_bounds_in_an_inner_loop_of_a_skipped_iteration_still_raises():
    assert _error(NESTED, Accel()) == _error(NESTED, Accel.none())
