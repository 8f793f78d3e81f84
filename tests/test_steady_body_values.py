"""A loop's checked values (steady.uniform_loop) that read a value its body computes from outside
values only (`off = f(u)` in the body of a loop over k, u the outer iv, then `r0 = off + 16·k`).

Such a value is invariant in the loop but lives in a slot its body writes: before this
execution's body runs, the slot holds the previous execution's value. The checked values are
evaluated out of place and memoised per the outside values they read
(loop_driver.CheckedValues.table, keyed at the loop's entry), so with `off` read from its slot
an execution whose previous `off` equals an earlier execution's would take that execution's
step scan: here u = 2 has full tiles and u = 3 (both entered with the `off` of 0 before them)
has a partial last tile, which the jump would then skip as a full one. `off` and what it is
computed from are checked values themselves (steady._with_body_operands); a checked op reading
a body value that is no loop-level scalar op (an scf.if result) makes the loop plain."""

from __future__ import annotations

from dataclasses import replace

import pytest
from xdsl.dialects import scf

from ascendir.hardware import load_target
from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.interpreter.accel.steady import uniform_loop
from ascendir.interpreter.testing import parse

HW = load_target("ascend910b2")
ROWS, COLS, TILE, TRIPS = 272, 256, 16, 16
GM = f"memref<{ROWS}x{COLS}xf16, #ascend<space gm>>"
UB = f"memref<{TILE}x{COLS}xf16, #ascend<space ub>>"
SV = f"memref<?x{COLS}xf16, strided<[{COLS}, 1], offset: ?>, #ascend<space gm>>"

# off = (1 - (u·u mod 3)) · 24 for u = 0..3: 24, 0, 0, 24; rows off .. off + 256 of 272, so 24 makes
# the last tile 8 rows (every intermediate value computed in the inner loop's body)
SCALAR = """
        %uu = arith.muli %u, %u : index
        %p = arith.remui %uu, %c3 : index
        %q = arith.subi %c1, %p : index"""
# the same q as an scf.if result (p is 0 or 1)
BRANCH = """
        %uu = arith.muli %u, %u : index
        %p = arith.remui %uu, %c3 : index
        %z = arith.cmpi eq, %p, %c0 : index
        %q = scf.if %z -> (index) {
          scf.yield %c1 : index
        } else {
          scf.yield %c0 : index
        }"""


def _kernel(q_ops: str) -> str:
    """One AIV block: for u in 0..3, for k in 0..15: copy rows off + 16·k .. (16 rows, fewer at
    the end) of x to z through UB, `q_ops` computing %q (then off = q · 24) in the inner body."""
    return f"""builtin.module {{
  ascend.kernel @k(%x: {GM}, %y: {GM}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c24 = arith.constant 24 : index
    %cN = arith.constant {TRIPS} : index
    %cR = arith.constant {ROWS} : index
    %cT = arith.constant {TILE} : index
    %b = ascend.alloc : {UB}
    ascend.set_flag MTE3 -> MTE2, 0
    scf.for %u = %c0 to %c4 step %c1 {{
      scf.for %k = %c0 to %cN step %c1 {{
        %kk = arith.muli %k, %cT : index{q_ops}
        %off = arith.muli %q, %c24 : index
        %r0 = arith.addi %off, %kk : index
        %rem = arith.subi %cR, %r0 : index
        %rs = arith.minsi %rem, %cT : index
        ascend.wait_flag MTE3 -> MTE2, 0
        %xs = memref.subview %x[%r0, 0] [%rs, {COLS}] [1, 1] : {GM} to {SV}
        ascend.copy %xs, %b : {SV}, {UB}
        ascend.set_flag MTE2 -> MTE3, 0
        ascend.wait_flag MTE2 -> MTE3, 0
        %ys = memref.subview %y[%r0, 0] [%rs, {COLS}] [1, 1] : {GM} to {SV}
        ascend.copy %b, %ys : {UB}, {SV}
        ascend.set_flag MTE3 -> MTE2, 0
      }}
    }}
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.return
  }}
  func.func @main(%x: {GM} {{onnx.name = "x"}}) -> ({GM} {{onnx.name = "y"}}) {{
    %y = ascend.alloc : {GM}
    ascend.launch @k(%x, %y) : {GM}, {GM}
    func.return %y : {GM}
  }}
}}"""


def _run(text: str, accel: Accel) -> tuple[dict, tuple, int]:
    """(report without the skipped-iteration counts, L2 hits and misses, iterations skipped) of
    a timing-only run."""
    prog = compile_module(parse(text), HW, None, timing_only=True, accel=accel)
    _, recs = prog.run({})
    rep = build_report(recs, HW)
    skipped = sum(k.pop("extrapolated_iterations") for k in rep["kernels"])
    return rep, (prog.l2.hits, prog.l2.misses), skipped


def _inner(module) -> scf.ForOp:
    return [op for op in module.walk() if type(op) is scf.ForOp][1]


def test_body_values_read_by_checked_ops_are_checked():
    loop = _inner(parse(_kernel(SCALAR)))
    names = [op.results[0].name_hint for op in uniform_loop(loop)]
    assert names == ["kk", "uu", "p", "q", "off", "r0", "rem", "rs"]


@pytest.mark.parametrize("switch", [None, "loop_memo", "remap", "xblock", "launch_memo"])
def test_partial_tile_after_a_repeated_body_value_is_exact(switch):
    accel = Accel() if switch is None else replace(Accel(), **{switch: False})
    rep, l2, skipped = _run(_kernel(SCALAR), accel)
    bare, l2_bare, _ = _run(_kernel(SCALAR), Accel.none())
    assert skipped > 0  # the inner loops jumped
    assert rep["total_cycles"] == bare["total_cycles"]
    assert rep == bare and l2 == l2_bare


def test_branch_result_read_by_a_checked_op_runs_plainly():
    assert uniform_loop(_inner(parse(_kernel(BRANCH)))) is None
    rep, l2, skipped = _run(_kernel(BRANCH), Accel())
    bare, l2_bare, _ = _run(_kernel(BRANCH), Accel.none())
    assert skipped == 0
    assert rep == bare and l2 == l2_bare
