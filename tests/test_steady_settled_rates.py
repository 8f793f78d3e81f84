"""A steady-state jump is taken only once every moving clock but the S clocks advances at one rate
(or an S clock's): steady.SteadyLoop._settled_rates. Found by differential testing at LLaMA-sized
shapes (diff33): the down projection of a SwiGLU FFN with hidden 3000 (512 x 8000 x 3000), and the
plain matmul below, lowered with AIVs that prefetch B for the AIC, ran 10 % fast with the speed-ups:
two periods of the K loop showed equal deltas while the AIC's M (4256 cycles per period) still drew
away from its MTE2 (4149), a transient no overtaking test sees (the faster clock is ahead)."""

from __future__ import annotations

from xdsl.parser import Parser

from ascendir.driver import lower, parse_pipeline, run_passes
from ascendir.hardware import load_target
from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.session import make_context
from ascendir.weights import WeightStore

HW = load_target("ascend910b2")


def _report(m: int, k: int, n: int, accel: Accel) -> dict:
    x, w, y = f"tensor<1x{m}x{k}xf16>", f"tensor<{k}x{n}xf16>", f"tensor<1x{m}x{n}xf16>"
    text = f"""builtin.module {{
func.func @main(%x: {x}) -> {y} {{
  %w = nn.weight @w : {w}
  %y = nn.matmul %x, %w : ({x}, {w}) -> {y}
  func.return %y : {y}
}}
}}"""
    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline(None, "O2", HW.name))
    lower(module, WeightStore(), HW.name)
    prog = compile_module(module, HW, None, timing_only=True, accel=accel)
    _, recs = prog.run({})
    rep = build_report(recs, HW)
    for kr in rep["kernels"]:
        del kr["extrapolated_iterations"]  # what was skipped: differs by design
    return {"report": rep, "l2": (prog.l2.hits, prog.l2.misses)}


def test_jump_waits_for_one_rate_on_an_aiv_prefetched_matmul():
    fast, plain = _report(448, 8000, 3000, Accel()), _report(448, 8000, 3000, Accel.none())
    assert fast["report"]["total_cycles"] == plain["report"]["total_cycles"]  # (was 233,531 vs 258,804)
    assert fast == plain


def test_settled_rates_takes_the_front_rate_and_s_rates_only():
    """Two units of 7 pipes (S first), 2 counters, 2 pending flag times: a clock moves at the
    fastest clock's rate, at an S clock's, or not at all; a third rate is a transient."""
    from types import SimpleNamespace

    from ascendir.interpreter.accel.steady import SteadyLoop

    ns, na = 14, 2
    F = SimpleNamespace(core=SimpleNamespace(free=[0.0] * ns), acct=[0.0] * na)
    sl = SteadyLoop(F, 32, None, None, 7)

    def delta(free, done, busy=0.0, flags=(0.0, 0.0)):
        return [*free, *done, *[busy] * ns, *[5.0] * na, *flags]

    s0, s1 = 3.0, 0.5  # the two units' S clocks
    front = [s0, 0.0, 8.0, 8.0, 8.0, 0.0, 8.0, s1, s1, 0.0, 0.0, 8.0, 8.0, 0.0]
    assert sl._settled_rates(delta(front, front, busy=2.0, flags=(8.0, 0.0)))  # (busy times and counters do not count)
    assert sl._settled_rates(delta([s0, s0, *front[2:]], front))  # a pipe dragged by the AIC's S
    assert sl._settled_rates(delta([s0, 0.0, 8.0, 8.0, 8.0, s1, *front[6:]], front))  # by the other unit's S
    assert sl._settled_rates(delta([9.0] + [0.0] * 13, [0.0] * ns))  # S clocks alone
    assert not sl._settled_rates(delta([s0, 0.0, 8.0, 8.0, 7.5, *front[5:]], front))  # MTE2 behind M's rate
    assert not sl._settled_rates(delta(front, front, flags=(8.0, 7.5)))  # a pending set at a third rate
