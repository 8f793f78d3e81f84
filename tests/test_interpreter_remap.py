"""Remapped address values (interpreter/accel/remap.py): a tile loop whose addresses are not affine in
its iv (t / n, t % n) extrapolates on its timing's period, with every skipped access at its own
iteration's address, and matches the full simulation exactly; skipped writes whose remapped
tiles were written before get their own L2 outcome, not the sampled period's."""

from __future__ import annotations

import pytest
from xdsl.dialects import scf

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.accel import steady
from ascendir.interpreter.accel.remap import address_plan
from ascendir.interpreter.testing import matmul_ir, parse
from test_interpreter_steady import full_and_fast

HW = load_target("ascend910b2")


def _loops(module):
    return [op for op in module.walk() if isinstance(op, scf.ForOp)]


def test_address_plan_of_the_matmul_tile_loop():
    module = parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24))
    tile_loop, k_loop = _loops(module)[:2]
    checked = steady.uniform_loop(tile_loop)
    plan = address_plan(tile_loop, checked)
    names = [op.results[0].name_hint for op in checked]
    # m0 = (t / 32)·128 and n0 = (t % 32)·128 only offset GM subviews; the tile sizes min(M - m0, 128)
    # are still compared; t / 32 and t % 32 act through them
    assert [names[i] for i in plan.addr] == ["m0", "n0"]
    assert [names[i] for i in plan.control] == ["ms", "ns"]
    assert len(plan.copies) == 5  # A and B in both ping-pong branches, the C write
    # the K loop's addresses are affine in its iv: nothing to remap
    assert address_plan(k_loop, steady.uniform_loop(k_loop)) is None


def test_recording_pass_jumps_every_iteration_exactly(monkeypatch):
    # 24 cores over 16 tile columns: the addresses repeat their step every 2 tile-loop iterations,
    # the timing of the recording pass (every read hits) every iteration
    module = parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24))
    periods = []
    jump = steady.SteadyLoop.jump

    def spy(self, P, *a):
        if self.gen is not None:  # the tile loop (the K loop has no plan)
            periods.append(P)
        return jump(self, P, *a)

    monkeypatch.setattr(steady.SteadyLoop, "jump", spy)
    (full, h0, m0), (fast, h1, m1) = full_and_fast(module)
    assert periods and set(periods) == {1}  # (only the recording pass remaps: reads there all hit)
    assert (h1, m1) == (h0, m0) and m0 > 0
    assert fast["total_cycles"] == full["total_cycles"]
    assert fast["tile_ops"] == full["tile_ops"]


def _rewrites(period: int):
    """One core writes tile (t % period) of z every iteration: the first `period` writes go to HBM,
    later ones rewrite tiles still dirty in L2 (cheaper). No GM reads, so the timed pass remaps."""
    ub = "memref<16x256xf16, #ascend<space ub>>"
    gm = "memref<4096x256xf16, #ascend<space gm>>"
    sv = "memref<16x256xf16, strided<[256, 1], offset: ?>, #ascend<space gm>>"
    return parse(f"""builtin.module {{
  ascend.kernel @w(%z: {gm}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cP = arith.constant {period} : index
    %c16 = arith.constant 16 : index
    %c256 = arith.constant 256 : index
    %u = ascend.alloc : {ub}
    ascend.set_flag MTE3 -> V, 0
    scf.for %t = %c0 to %c256 step %c1 {{
      %q = arith.remui %t, %cP : index
      %r = arith.muli %q, %c16 : index
      ascend.wait_flag MTE3 -> V, 0
      ascend.vadd %u, %u, %u : {ub}, {ub}, {ub}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      %zs = memref.subview %z[%r, 0] [16, 256] [1, 1] : {gm} to {sv}
      ascend.copy %u, %zs : {ub}, {sv}
      ascend.set_flag MTE3 -> V, 0
    }}
    ascend.wait_flag MTE3 -> V, 0
    ascend.return
  }}
  func.func @main() -> ({gm} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {gm}
    ascend.launch @w(%z) : {gm}
    func.return %z : {gm}
  }}
}}""")


@pytest.mark.parametrize("period", [16, 40])
def test_remapped_writes_get_their_own_outcomes(period, monkeypatch):
    module = _rewrites(period)
    full = simulate(module, None, {}, HW, timing_only=True, extrapolate=False).report
    fast = simulate(module, None, {}, HW, timing_only=True).report
    assert sum(k["extrapolated_iterations"] for k in fast["kernels"]) > 0
    assert fast["total_cycles"] == full["total_cycles"]
    assert fast["bytes"] == full["bytes"] and full["bytes"]["l2_write"] > 0
    # the check is what makes it exact: taking the sampled period's write outcomes for the
    # skipped iterations (all first writes) gets both the bytes and the cycles wrong
    monkeypatch.setattr(steady, "first_write_change", lambda F, keys, times, expect: len(keys))
    blind = simulate(module, None, {}, HW, timing_only=True).report
    assert blind["bytes"] != full["bytes"] and blind["total_cycles"] != full["total_cycles"]
