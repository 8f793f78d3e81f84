"""The ffn template (templates/ffn.py): fuse-ffn regions become `ffn_up` (gate and up sharing
each A tile, activation [and product] on the vector unit, h written once) + `ffn_down`, and
compute what the body means (run_nn), on 910B (mix kernel) and 910A (coupled core, f16)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

from ascendir.session import make_context
from ascendir.dialects import ascend
from ascendir.driver import lower, parse_pipeline, run_passes
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.weights import WeightStore


def _t(dt, *d):
    return f"tensor<{'x'.join(map(str, d))}x{dt}>"


def gated_ir(s, h, i, dt="f32", act="nn.silu") -> str:
    x, g = _t(dt, 1, s, h), _t(dt, 1, s, i)
    return f"""builtin.module {{
func.func @main(%x: {x}, %wg: {_t(dt, h, i)}, %wu: {_t(dt, h, i)}, %wd: {_t(dt, i, h)}) -> {x} {{
  %gt = nn.matmul %x, %wg : ({x}, {_t(dt, h, i)}) -> {g}
  %a = {act} %gt : ({g}) -> {g}
  %u = nn.matmul %x, %wu : ({x}, {_t(dt, h, i)}) -> {g}
  %m = nn.mul %u, %a : ({g}, {g}) -> {g}
  %y = nn.matmul %m, %wd : ({g}, {_t(dt, i, h)}) -> {x}
  func.return %y : {x}
}}
}}"""


def plain_ir(s, h, i, dt="f32", act="nn.gelu") -> str:
    x, g = _t(dt, s, h), _t(dt, s, i)
    return f"""builtin.module {{
func.func @main(%x: {x}, %w1: {_t(dt, h, i)}, %b1: {_t(dt, i)}, %w2: {_t(dt, i, h)}, %b2: {_t(dt, h)}) -> {x} {{
  %h = nn.matmul %x, %w1 : ({x}, {_t(dt, h, i)}) -> {g}
  %hb = nn.add %b1, %h : ({_t(dt, i)}, {g}) -> {g}
  %a = {act} %hb : ({g}) -> {g}
  %y = nn.matmul %a, %w2 : ({g}, {_t(dt, i, h)}) -> {x}
  %yb = nn.add %y, %b2 : ({x}, {_t(dt, h)}) -> {x}
  func.return %yb : {x}
}}
}}"""


def _feeds(shapes, dt, seed=0):
    rng = np.random.default_rng(seed)
    npdt = np.float16 if dt == "f16" else np.float32
    # weights scaled by 1/sqrt(fan-in) so activations stay O(1)
    return {f"arg{n}": (rng.standard_normal(s) / (np.sqrt(s[0]) if n and len(s) == 2 else 1)).astype(npdt)
            for n, s in enumerate(shapes)}


@pytest.fixture(params=["fused", "two-kernel"])
def plan(request, monkeypatch):
    """Force one FFN lowering (the cost model picks per shape; both must compute the same)."""
    import ascendir.conversion.nn_to_ascend.templates.ffn as ffn

    choose = ffn.choose_plan

    def forced(target, s, dt, *tilings):
        p = choose(target, s, dt, *tilings)
        if request.param == "two-kernel":
            return ffn.Plan(None, p.fused_cycles, p.two_kernel_cycles)
        t, e = ffn.ffn_fused.choose(s, target, dt)
        return ffn.Plan(t, e["cycles"], p.two_kernel_cycles)

    monkeypatch.setattr(ffn, "choose_plan", forced)
    return request.param


KERNELS = {"fused": ["ffn_fused", "ffn_reduce"], "two-kernel": ["ffn_up", "ffn_down"]}


def _run(text, feeds, target):
    ref = run_nn(Parser(make_context(), text).parse_module(), WeightStore(), feeds)
    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline("fuse-ffn"))
    lower(module, WeightStore(), target)
    names = [op.sym_name.data for op in module.ops if isinstance(op, ascend.KernelOp)]
    out = simulate(module, WeightStore(), feeds, load_target(target)).outputs
    (want,), (got,) = ref.values(), out.values()
    return want, got, names, module


CASES = {
    # id: (form, tokens, hidden, intermediate, act)
    "swiglu_odd": ("gated", 40, 64, 200, "nn.silu"),
    "geglu": ("gated", 24, 96, 160, "nn.gelu"),
    "swiglu_decode": ("gated", 1, 256, 700, "nn.silu"),
    "swiglu_multi_tile": ("gated", 300, 128, 400, "nn.silu"),
    "gelu_bias": ("plain", 33, 48, 96, "nn.gelu"),
    "relu_bias": ("plain", 70, 64, 300, "nn.relu"),
    "silu_bias": ("plain", 17, 32, 80, "nn.silu"),
}


def _case(case, dt):
    form, s, h, i, act = CASES[case]
    if form == "gated":
        return gated_ir(s, h, i, dt, act), [(1, s, h), (h, i), (h, i), (i, h)]
    return plain_ir(s, h, i, dt, act), [(s, h), (h, i), (i,), (i, h), (h,)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_ffn_template_matches_run_nn_910b(case: str, plan: str) -> None:
    text, shapes = _case(case, "f32")
    want, got, names, module = _run(text, _feeds(shapes, "f32"), "ascend910b2")
    assert [n.rsplit("_", 1)[0] for n in names] == KERNELS[plan], names
    assert any(k.core_type.data == "mix" for k in module.ops if isinstance(k, ascend.KernelOp))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(np.abs(want).max()))  # f32: only the K order differs


@pytest.mark.parametrize("case", ["swiglu_odd", "gelu_bias", "swiglu_decode"])
def test_ffn_template_matches_run_nn_910a_f16(case: str, plan: str) -> None:
    """Coupled core (L0C -> UB -> L1, no workspace); f16 tolerance (driver.TOLERANCES)."""
    text, shapes = _case(case, "f16")
    want, got, names, module = _run(text, _feeds(shapes, "f16"), "ascend910a")
    assert [n.rsplit("_", 1)[0] for n in names] == KERNELS[plan], names
    scale = max(1.0, float(np.abs(want.astype(np.float32)).max()))
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-3 * scale)


@pytest.mark.parametrize("plan", ["two-kernel"], indirect=True)
def test_gate_and_up_share_each_a_tile(plan: str) -> None:
    """ffn_up moves x into L1 once per output tile for both projections: its L1 bytes are x
    tiles + two weight tiles, and its GM writes are just h (plus the workspace on 910B)."""
    s, h, i = 128, 256, 512
    text = gated_ir(s, h, i, "f16")
    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline("fuse-ffn"))
    lower(module, WeightStore(), "ascend910a")  # no workspace: GM writes of ffn_up are h only
    rep = simulate(module, WeightStore(), {}, load_target("ascend910a"), timing_only=True).report
    up = next(k for k in rep["kernels"] if k["name"].startswith("ffn_up"))
    assert up["bytes"]["gm_write"] == s * i * 2
    # each output tile reads its x rows once and both weight columns: x·(i/bn) + 2·W
    from ascendir.conversion.nn_to_ascend.templates.ffn_up import up_tiling
    from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
    from xdsl.dialects.builtin import f16
    from xdsl.ir import Block

    bm, bn, bk, kl1 = up_tiling(LoweringContext(load_target("ascend910a"), Block()), s, i, h, f16, 2, False)
    ntile_n = -(-i // bn)
    assert up["bytes"]["l1"] == (s * h * ntile_n + 2 * h * i * -(-s // bm)) * 2


def test_unmatched_body_falls_back_per_projection() -> None:
    """An ffn region whose body is not one of the two forms (here: a tanh the template does not
    know, wrapped by hand) is lowered op by op."""
    dt = "f32"
    x, g = _t(dt, 8, 16), _t(dt, 8, 32)
    text = f"""builtin.module {{
func.func @main(%x: {x}, %w1: {_t(dt, 16, 32)}, %w2: {_t(dt, 32, 16)}) -> {x} {{
  %y = nn.fused(%x, %w1, %w2) {{kind = #nn.fused_kind<ffn>}} : ({x}, {_t(dt, 16, 32)}, {_t(dt, 32, 16)}) -> {x} {{
  ^bb0(%a: {x}, %b: {_t(dt, 16, 32)}, %c: {_t(dt, 32, 16)}):
    %h = nn.matmul %a, %b : ({x}, {_t(dt, 16, 32)}) -> {g}
    %t = nn.tanh %h : ({g}) -> {g}
    %o = nn.matmul %t, %c : ({g}, {_t(dt, 32, 16)}) -> {x}
    nn.yield %o : {x}
  }}
  func.return %y : {x}
}}
}}"""
    feeds = _feeds([(8, 16), (16, 32), (32, 16)], dt)
    want, got, names, _ = _run(text, feeds, "ascend910b2")
    assert not any(n.startswith("ffn_") for n in names), names
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("target", ["ascend910b2", "ascend910a"])
@pytest.mark.parametrize("case", ["swiglu_multi_tile", "relu_bias"])
def test_ffn_kernels_pair_their_flags(case: str, target: str, plan: str) -> None:
    """The static flag discipline of test_lowering_structure: every wait has an earlier set and
    every loop body / if branch is flag-neutral."""
    from collections import Counter

    from test_lowering_structure import check_flags

    text, _ = _case(case, "f16")
    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline("fuse-ffn"))
    lower(module, WeightStore(), target)
    for kernel in (op for op in module.ops if isinstance(op, ascend.KernelOp)):
        assert +check_flags(kernel.body.block, Counter()) == Counter(), kernel.sym_name.data


# Forced fused tilings that walk every edge of the kernel: several row blocks (the last one
# short), I-ranges whose last chunk is partial (sw not a multiple of bi) and a last range that is
# shorter still, an odd number of L1 chunks of H (and of L0 steps per chunk: ping-pong parity
# carried across chunks), Ho tiles with a partial last one, Wd loads of kd rows that do not
# divide the range (96 of 144) or exceed it (160), or of one chunk (kd = 0: bi).
FORCED = {
    "swiglu_multi_tile": dict(bm=32, bi=64, bk=16, kl1=48, bn=48, nsplit=3, per=3, sw=144, kd=96),
    "gelu_bias": dict(bm=16, bi=32, bk=16, kl1=32, bn=32, nsplit=2, per=2, sw=48),
    "swiglu_decode": dict(bm=16, bi=64, bk=16, kl1=80, bn=96, nsplit=5, per=3, sw=144, kd=160),
}


@pytest.mark.parametrize("target", ["ascend910b2", "ascend910a"])
@pytest.mark.parametrize("case", sorted(FORCED))
def test_fused_kernel_edges_match_run_nn(case: str, target: str, monkeypatch) -> None:
    import ascendir.conversion.nn_to_ascend.templates.ffn as ffn

    tiling = ffn.ffn_fused.FusedTiling(**FORCED[case])
    seen = []

    def forced(hw, s, dt, *tilings):
        assert ffn.ffn_fused.fits(s, tiling, hw), ffn.ffn_fused.needs(s, tiling, hw)
        seen.append(s)
        return ffn.Plan(tiling, None, None)

    monkeypatch.setattr(ffn, "choose_plan", forced)
    dt = "f32" if target == "ascend910b2" else "f16"
    text, shapes = _case(case, dt)
    want, got, names, module = _run(text, _feeds(shapes, dt), target)
    assert seen and [n.rsplit("_", 1)[0] for n in names] == ["ffn_fused", "ffn_reduce"], names
    want, got = want.astype(np.float32), got.astype(np.float32)
    scale = max(1.0, float(np.abs(want).max()))
    if dt == "f32":
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * scale)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3 * scale)


def _model_outputs(root, name, opt_level):
    from ascendir.driver import compile_model

    module, weights = compile_model(root / name / "model.onnx", "ascend910b2", opt_level=opt_level)
    with np.load(root / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    kernels = [op.sym_name.data for op in module.walk() if isinstance(op, ascend.KernelOp)]
    return simulate(module, weights, inputs, load_target("ascend910b2")).outputs, expected, kernels


def _check_model_fused(root, name) -> None:
    """-O2 with every ffn region forced onto the fused kernel vs onnxruntime (fp32 tolerance of
    test_models_e2e) and vs -O0 (no fusion at all)."""
    got, expected, kernels = _model_outputs(root, name, "O2")
    assert any(k.startswith("ffn_fused") for k in kernels), kernels
    o0, _, _ = _model_outputs(root, name, "O0")
    for k, want in expected.items():
        np.testing.assert_allclose(got[k], want, rtol=1e-3, atol=1e-4, err_msg=f"{name} {k} vs onnxruntime")
        np.testing.assert_allclose(got[k], o0[k], rtol=1e-3, atol=1e-4, err_msg=f"{name} {k} vs -O0")


@pytest.mark.sampled
@pytest.mark.parametrize("plan", ["fused"], indirect=True)
@pytest.mark.parametrize("name", ["llama_small", "gpt2_small", "mlp_small"])
def test_fused_ffn_on_small_models(name: str, plan: str) -> None:
    """SwiGLU (LLaMA), GELU + biases (GPT-2's Conv1D MLP), ReLU MLP through the fused kernel."""
    from pathlib import Path

    _check_model_fused(Path(__file__).parent / "data", name)


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["fused"], indirect=True)
def test_fused_ffn_on_llama_realistic(plan: str) -> None:
    import os
    from pathlib import Path

    root = Path(os.environ.get("ASCENDIR_CORPUS", "/work/corpus"))
    if not (root / "llama_realistic" / "model.onnx").exists():
        pytest.skip(f"llama_realistic not in {root}")
    _check_model_fused(root, "llama_realistic")


def _llama7b_ffn(tokens: int) -> str:
    h, i = 4096, 11008
    x, g = _t("f16", 1, tokens, h), _t("f16", 1, tokens, i)
    return f"""builtin.module {{
func.func @main(%x: {x}) -> {x} {{
  %wg = nn.weight @wg : {_t("f16", h, i)}
  %wu = nn.weight @wu : {_t("f16", h, i)}
  %wd = nn.weight @wd : {_t("f16", i, h)}
  %gt = nn.matmul %x, %wg : ({x}, {_t("f16", h, i)}) -> {g}
  %a = nn.silu %gt : ({g}) -> {g}
  %u = nn.matmul %x, %wu : ({x}, {_t("f16", h, i)}) -> {g}
  %m = nn.mul %a, %u : ({g}, {g}) -> {g}
  %y = nn.matmul %m, %wd : ({g}, {_t("f16", i, h)}) -> {x}
  func.return %y : {x}
}}
}}"""


@pytest.mark.parametrize("tokens, kind", [(1, "fused"), (512, "two-kernel")])
def test_plan_at_llama7b_shapes(tokens: int, kind: str) -> None:
    """The cost model's choice at LLaMA-2-7B sizes on 910B2 (O2: choose-tiling first), recorded
    on the kernels; at decode the fused estimate is within 10 % of the simulated cycles."""
    import re

    module = Parser(make_context(), _llama7b_ffn(tokens)).parse_module()
    run_passes(module, parse_pipeline("O2"))
    lower(module, WeightStore(), "ascend910b2")
    plans = {op.attributes["ffn_plan"].data for op in module.ops if isinstance(op, ascend.KernelOp)}
    assert len(plans) == 1 and next(iter(plans)).startswith(kind + ":"), plans
    if kind == "fused":
        est = float(re.search(r"est fused (\d+)", next(iter(plans))).group(1))
        sim = simulate(module, WeightStore(), {}, load_target("ascend910b2"), timing_only=True).report["total_cycles"]
        assert abs(est - sim) / sim < 0.10, (est, sim)


def test_ffn_up_spreads_16_bit_like_32_bit(monkeypatch) -> None:
    """ffn_up's AIV epilogue works on f32 accumulators whatever the input type, so a small 16-bit
    FFN is spread over as many AICs as the f32 one (it used one quarter of them: swin and
    convnext ran slower in fp16 than in fp32), and computes the same."""
    import ascendir.conversion.nn_to_ascend.templates.ffn as ffn

    choose = ffn.choose_plan
    monkeypatch.setattr(ffn, "choose_plan", lambda *a: ffn.Plan(None, choose(*a).fused_cycles, choose(*a).two_kernel_cycles))
    block_dims = {}
    for dt in ("f32", "f16"):
        text, shapes = plain_ir(256, 16, 64, dt), [(256, 16), (16, 64), (64,), (64, 16), (16,)]
        want, got, names, module = _run(text, _feeds(shapes, dt), "ascend910b2")
        scale = max(1.0, float(np.abs(want.astype(np.float32)).max()))
        tol = (1e-2, 1e-3 * scale) if dt == "f16" else (1e-5, 1e-5)  # driver.TOLERANCES, as above
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol[0], atol=tol[1])
        (up,) = [k for k in module.ops if isinstance(k, ascend.KernelOp) and k.sym_name.data.startswith("ffn_up")]
        block_dims[dt] = up.block_dim.value.data
    assert block_dims["f16"] == block_dims["f32"] > 4


def test_ffn_up_cube_is_fed_at_llama7b_prefill() -> None:
    """LLaMA-2-7B ffn_up at 512 tokens (f16, 910B2, timing-only): both AIVs read the weights
    into L2 ahead of the AIC (AIV 1 Wg, AIV 0 Wu, each on its own DDR path) and gate and up
    share one mmad per step, so the cube runs at >= 75 % of its peak (65.1 % when the AIC read
    Wu's first pass itself at 32 B/cycle and issued two mmads per step: 721,595 cycles; now
    610,827). Both AIVs copy weight chunks; one mmad per L0 step."""
    module = Parser(make_context(), _llama7b_ffn(512)).parse_module()
    run_passes(module, parse_pipeline("O2"))
    lower(module, WeightStore(), "ascend910b2")
    (up,) = [k for k in module.ops if isinstance(k, ascend.KernelOp) and k.sym_name.data.startswith("ffn_up")]
    subs = {ascend.subblock(op) for op in up.walk() if isinstance(op, ascend.CopyOp)
            and ascend.space_of(op.source).value == "gm" and ascend.space_of(op.dest).value == "ub"}
    assert subs == {0, 1}  # AIV 0 (epilogue + Wu prefetch) and AIV 1 (Wg prefetch) read GM
    mmads = [op for op in up.walk() if isinstance(op, ascend.MmadOp)]
    assert {tuple(op.b.type.get_shape()) for op in mmads} == {(64, 256)}  # [bk, Wg | Wu] in one L0B tile
    rep = simulate(module, WeightStore(), {}, load_target("ascend910b2"), timing_only=True).report
    k = next(k for k in rep["kernels"] if k["name"].startswith("ffn_up"))
    assert k["cube_peak_fraction"] >= 0.75, k["cycles"]


@pytest.mark.parametrize("plan", ["two-kernel"], indirect=True)
def test_ffn_down_without_bias_takes_a_tail_split(plan: str) -> None:
    """The down matmul of an FFN without a b2 row runs as a plain matmul kernel (ffn_problems:
    no epilogue), so a tail_split of its partial wave (here all 16 tiles of 64 x 128, each in 2
    K ranges on 24 AICs) is lowered, with its reduction kernel, and computes the same FFN."""
    s, h, i = 256, 512, 256
    spec = "m = 64 : i64, n = 128 : i64, k = 32 : i64, l1_depth = 2 : i64, split_k = 1 : i64, swizzle = 1 : i64, tail_split = 2 : i64"
    text = gated_ir(s, h, i).replace("%y = nn.matmul %m, %wd :", f"%y = nn.matmul %m, %wd {{ascend.tiling = #ascend.tiling<{{{spec}}}>}} :")
    assert "tail_split = 2" in text
    want, got, names, _ = _run(text, _feeds([(1, s, h), (h, i), (h, i), (i, h)], "f32"), "ascend910b2")
    assert [n.rsplit("_", 1)[0] for n in names] == ["ffn_up", "ffn_down", "matmul_tail_reduce"], names
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(np.abs(want).max()))  # f32: only the K order differs
