"""A launch whose blocks' grid-stride loop (t = 16·block .. 400 step 50) reads a GM row band past
the buffer's end: the error raised names the same out-of-bounds subview whether a block's loop
execution is reused for the next blocks (interpreter/accel/xblock.py) or not, the one the walk of
every op raises (block 0's, at t = 300: the steady jump stops short of it, steady.py), and a
timing-only run of such a launch still raises. (A reuse of loops with affine addresses, tried and
not landed, moved a stored execution to the next blocks without their accesses' bounds: it named
another offset, or ran the timing-only launch to its end.)"""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.testing import parse

HW = load_target("ascend910b2")
GM = "memref<4096x64xf16, #ascend<space gm>>"
UB = "memref<16x16xf16, #ascend<space ub>>"
SV = "memref<16x16xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"

def _ir(block_dim: int = 50, step: int = 50, ub: int = 400, rows: int = 16, base: int = 32) -> str:
    """The launch: `block_dim` blocks, each t = 16·block .. `ub` step `step`, reading x rows
    t·`rows` + `base` .. +16 and writing z rows t·`rows` .. +16."""
    return f"""builtin.module {{
  ascend.kernel @k(%x: {GM}, %z: {GM}) attributes {{block_dim = {block_dim} : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {UB}
    %c16 = arith.constant 16 : index
    %crows = arith.constant {rows} : index
    %c32 = arith.constant {base} : index
    %c50 = arith.constant {step} : index
    %c400 = arith.constant {ub} : index
    %bid = ascend.block_idx : index
    %lb = arith.muli %bid, %c16 : index
    scf.for %t = %lb to %c400 step %c50 {{
      %r0 = arith.muli %t, %crows : index
      %r1 = arith.addi %r0, %c32 : index
      %xs = memref.subview %x[%r1, 0] [16, 16] [1, 1] : {GM} to {SV}
      ascend.copy %xs, %a : {SV}, {UB}
      ascend.set_flag MTE2 -> MTE3, 0
      ascend.wait_flag MTE2 -> MTE3, 0
      %zs = memref.subview %z[%r0, 0] [16, 16] [1, 1] : {GM} to {SV}
      ascend.copy %a, %zs : {UB}, {SV}
      ascend.set_flag MTE3 -> MTE2, 1
      ascend.wait_flag MTE3 -> MTE2, 1
    }}
    ascend.return
  }}
  func.func @main(%x: {GM} {{onnx.name = "x"}}) -> ({GM} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {GM}
    ascend.launch @k(%x, %z) : {GM}, {GM}
    func.return %z : {GM}
  }}
}}"""


IR = _ir()


def _error(ir: str = IR, **kw) -> str:
    x = np.zeros((4096, 64), np.float16)
    with pytest.raises(AscendirError, match="out of bounds") as e:
        simulate(parse(ir), None, {"x": x}, HW, **kw)
    return str(e.value)


@pytest.mark.parametrize("timing_only", [False, True])
def test_out_of_bounds_error_does_not_depend_on_block_reuse(timing_only):
    got = _error(timing_only=timing_only)
    assert got == _error(timing_only=timing_only, accel=Accel(xblock=False))
    assert got == _error(timing_only=timing_only, accel=Accel.none())


def test_out_of_bounds_read_is_still_found_in_a_timing_only_run():
    # (24 blocks, t = 16·block .. 257 step 24: the timed walk raises for x rows 4196..)
    ir = _ir(block_dim=24, step=24, ub=257, rows=16, base=100)
    got = _error(ir, timing_only=True)
    assert got == _error(ir, timing_only=True, accel=Accel(xblock=False))
    assert "offset 4196," in got
