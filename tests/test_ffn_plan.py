"""templates/ffn.py `choose_plan` against the simulator: on SwiGLU FFNs (f16, 910B2, -O2,
timing-only) the plan it picks is the one that simulates faster, and the estimates it compares
follow the kernels (within 10 % of their simulated cycles at the prefill shape, where the
two-kernel estimate was 38 % high: ffn_up's Wg prefetch and ffn_down's own tiling were left out,
so B re-reads were charged as L2 misses)."""

from __future__ import annotations

import re

import pytest
from xdsl.parser import Parser

import ascendir.conversion.nn_to_ascend.templates.ffn as ffn
from ascendir.dialects import ascend
from ascendir.driver import lower, parse_pipeline, run_passes
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.session import make_context
from ascendir.weights import WeightStore


def _t(*d: int) -> str:
    return f"tensor<{'x'.join(map(str, d))}xf16>"


def swiglu(m: int, h: int, i: int) -> str:
    x, g = _t(1, m, h), _t(1, m, i)
    return f"""builtin.module {{
func.func @main(%x: {x}) -> {x} {{
  %wg = nn.weight @wg : {_t(h, i)}
  %wu = nn.weight @wu : {_t(h, i)}
  %wd = nn.weight @wd : {_t(i, h)}
  %gt = nn.matmul %x, %wg : ({x}, {_t(h, i)}) -> {g}
  %a = nn.silu %gt : ({g}) -> {g}
  %u = nn.matmul %x, %wu : ({x}, {_t(h, i)}) -> {g}
  %m = nn.mul %a, %u : ({g}, {g}) -> {g}
  %y = nn.matmul %m, %wd : ({g}, {_t(i, h)}) -> {x}
  func.return %y : {x}
}}
}}"""


CHOOSE_PLAN = ffn.choose_plan  # before any test patches it


def _force_plan(force: str | None, monkeypatch) -> None:
    """Make ffn.choose_plan return the chooser's plan, or one `force`d to "fused" /
    "two-kernel" (keeping the chooser's estimates in the plan either way)."""

    def forced(target, s, dt, *tilings):
        p = CHOOSE_PLAN(target, s, dt, *tilings)
        if force == "two-kernel":
            return ffn.Plan(None, p.fused_cycles, p.two_kernel_cycles)
        if force == "fused":
            t, e = ffn.ffn_fused.choose(s, target, dt)
            return ffn.Plan(t, e["cycles"], p.two_kernel_cycles)
        return p

    monkeypatch.setattr(ffn, "choose_plan", forced)


def _simulate(m: int, h: int, i: int, force: str | None, monkeypatch) -> tuple[float, str]:
    """(simulated cycles, the kernels' ffn_plan text) with the chooser's plan, or `force`d to
    "fused" / "two-kernel" (the estimates in the text are the chooser's either way)."""
    _force_plan(force, monkeypatch)
    module = Parser(make_context(), swiglu(m, h, i)).parse_module()
    run_passes(module, parse_pipeline("O2"))
    lower(module, WeightStore(), "ascend910b2")
    (plan,) = {op.attributes[ffn.PLAN_ATTR].data for op in module.ops if isinstance(op, ascend.KernelOp)}
    cycles = simulate(module, WeightStore(), {}, load_target("ascend910b2"), timing_only=True).report["total_cycles"]
    return cycles, plan


# (rows, hidden, intermediate): a 70B-shaped prefill block (H 8192) at 512 tokens with I = 10240,
# on which the chooser once picked ffn_fused (3.25 M simulated cycles) over ffn_up + ffn_down (2.45 M);
# a smaller prefill; decode rows of the 7B and 70B shapes at TP8 (I 1376 / 3584).
# The 7B TP8 decode row was a near tie (fused 57.4 K, two kernels 58.7 K simulated) that the
# chooser lost on ffn_fused's estimate being 16.6 % high; with the weights stored NZ the fused
# kernel simulates 47.4 K against 56.1 K and is picked, though its estimate is still 18 % high.
@pytest.mark.sampled
@pytest.mark.parametrize("m, h, i", [(512, 8192, 10240), (512, 4096, 2752), (1, 4096, 1376), (32, 8192, 3584)])
def test_plan_is_the_faster_in_simulation(m: int, h: int, i: int, monkeypatch) -> None:
    sim = {kind: _simulate(m, h, i, kind, monkeypatch)[0] for kind in ("fused", "two-kernel")}
    _, plan = _simulate(m, h, i, None, monkeypatch)
    faster = min(sim, key=sim.get)
    assert plan.startswith(faster + ":"), (plan, sim)
    if m >= 512:  # prefill: both estimates follow their kernels
        est = {"fused": float(re.search(r"est fused (\d+)", plan).group(1)),
               "two-kernel": float(re.search(r"vs two-kernel (\d+)", plan).group(1))}
        for kind in sim:
            assert abs(est[kind] - sim[kind]) / sim[kind] < 0.10, (kind, est, sim)


@pytest.mark.sampled
@pytest.mark.parametrize("name", ["bert_small", "llama_small"])
def test_corpus_ffn_plan_is_the_faster_in_simulation(name: str, monkeypatch) -> None:
    """The corpus' small FFNs (fp32, 910B2, timing-only, the whole model): the chooser's plan
    simulates no slower than the other. It picked ffn_fused, slower, while the weights were
    loaded ND (bert_small 82,979 against 78,875 cycles with two kernels, llama_small 84,889
    against 83,841; issue 17's closing note): with them stored NZ (tiling.nz_weight) two
    kernels are picked and faster (bert_small 77,741 against 80,914 fused, llama_small 83,247
    against 83,840)."""
    from pathlib import Path

    from ascendir.driver import compile_model

    model = Path(__file__).parent / "data" / name / "model.onnx"
    cycles = {}
    for force in ("fused", "two-kernel", None):
        _force_plan(force, monkeypatch)
        ffn._PLANS.clear()
        module, weights = compile_model(model, "ascend910b2", opt_level="O2")
        cycles[force] = simulate(module, weights, {}, load_target("ascend910b2"), timing_only=True).report["total_cycles"]
    assert cycles[None] == min(cycles["fused"], cycles["two-kernel"]), cycles
