"""fuse-moe-experts and the moe_experts template (ops-transformer's MoeInitRouting + GroupedMatmul):
the experts of hand-built gathered-weight blocks against the nn reference over routings with
empty, skewed and large groups (f32, f16); the MoE models of tests/data at -O2 through the grouped
kernels; cycles that follow the routing, timing-only and with numerics alike; the expert-weight
bytes the grouped MatMuls read against the report's moe section."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ascendir.api.moe_report import moe_section
from ascendir.conversion.nn_to_ascend.templates import moe_experts
from ascendir.conversion.nn_to_ascend.templates.grouped_matmul import row_tile
from ascendir.costmodel.moe_routing import init_routing, make_routing, RoutingSpec, tokens_per_expert
from ascendir.dialects import nn
from ascendir.driver import compile_model, lower, parse_pipeline, run_passes
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.patterns import top_level_ops
from ascendir.weights import WeightStore
from lowering_harness import parse
from sampling import first_then_sampled

DATA = Path(__file__).parent / "data"
HW = load_target("ascend910b2")
MOE_MODELS = ["mixtral_moe_block_small", "qwen2_moe_block_small", "qwen2_moe_block_small_dynamo",
              "deepseek_v3_moe_block_small", "deepseek_v3_moe_block_small_dynamo"]

EXPERTS = """
func.func @main(%x: tensor<{r}x{h}x1x{t}> {{onnx.name = "x"}}, %ids: tensor<{r}xi64> {{onnx.name = "ids"}}) -> (tensor<{r}x{h}x1x{t}> {{onnx.name = "y"}}) {{
  %wgu = nn.weight @gate_up : tensor<{e}x{i2}x{h}x{t}>
  %gu = nn.gather %wgu, %ids {{axis = 0 : i64}} : (tensor<{e}x{i2}x{h}x{t}>, tensor<{r}xi64>) -> tensor<{r}x{i2}x{h}x{t}>
  %wd = nn.weight @down : tensor<{e}x{h}x{i}x{t}>
  %d = nn.gather %wd, %ids {{axis = 0 : i64}} : (tensor<{e}x{h}x{i}x{t}>, tensor<{r}xi64>) -> tensor<{r}x{h}x{i}x{t}>
  %a = nn.matmul %gu, %x : (tensor<{r}x{i2}x{h}x{t}>, tensor<{r}x{h}x1x{t}>) -> tensor<{r}x{i2}x1x{t}>
  %hh = nn.reshape %a : (tensor<{r}x{i2}x1x{t}>) -> tensor<{r}x{i2}x{t}>
  %g = nn.slice %hh {{starts = array<i64: 0, {g0}>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}x{t}>) -> tensor<{r}x{i}x{t}>
  %u = nn.slice %hh {{starts = array<i64: 0, {u0}>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}x{t}>) -> tensor<{r}x{i}x{t}>
  %s = nn.silu %g : (tensor<{r}x{i}x{t}>) -> tensor<{r}x{i}x{t}>
  %m = nn.mul %s, %u : (tensor<{r}x{i}x{t}>, tensor<{r}x{i}x{t}>) -> tensor<{r}x{i}x{t}>
  %mr = nn.reshape %m : (tensor<{r}x{i}x{t}>) -> tensor<{r}x{i}x1x{t}>
  %y = nn.matmul %d, %mr : (tensor<{r}x{h}x{i}x{t}>, tensor<{r}x{i}x1x{t}>) -> tensor<{r}x{h}x1x{t}>
  func.return %y : tensor<{r}x{h}x1x{t}>
}}
"""
DT = {"f32": np.float32, "f16": np.float16}


def _grouped(text: str, store: WeightStore):
    """`text` through fuse-ffn, its experts wrapped by moe_experts (as fuse-moe-experts does for
    a recognised block, here named "blk"), lowered for 910B2."""
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-ffn", "O0", HW.name, None), store)
    ffn = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == "ffn"]
    ops = moe_experts.match(ffn[0])
    assert ops is not None
    moe_experts.fuse(ops, "blk")
    lower(module, store, HW.name)
    return module


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("t", ["f32", "f16"])
@pytest.mark.parametrize("r,e,h,i,routing,gate_first", first_then_sampled([
    (24, 8, 32, 48, "skew=1.5", True),      # small groups, some experts idle
    (40, 4, 64, 32, "one", False),          # every row to expert 2 (others empty), up half first
    (300, 4, 48, 32, "uniform", True),      # groups larger than the row tile: several row tiles
    (24, 4, 2100, 32, "uniform", True),     # K of 3 steps (a ping-pong pair, an odd tail, a partial one)
    (24, 4, 2048, 32, "skew=1.5", True),    # K of 2 steps (one pair)
]))
def test_grouped_experts_match_reference(r, e, h, i, routing, gate_first, t, fuse, monkeypatch):
    # fuse: the SwiGLU epilogue wherever it fits, whatever the cost model would choose
    monkeypatch.setattr(moe_experts, "FUSE_SWIGLU", "always" if fuse else "never")
    rng = np.random.default_rng(r + e)
    store = WeightStore()
    store._arrays["gate_up"] = (rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(DT[t])
    store._arrays["down"] = (rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(DT[t])
    ids = np.full(r, 2) if routing == "one" else make_routing(RoutingSpec("skew" if "skew" in routing else "uniform",
                                                                           alpha=1.5), r, 1, e).reshape(-1)
    g0, u0 = (0, i) if gate_first else (i, 0)
    text = EXPERTS.format(r=r, h=h, i=i, i2=2 * i, e=e, t=t, g0=g0, u0=u0)
    feeds = {"x": rng.standard_normal((r, h, 1)).astype(DT[t]), "ids": ids.astype(np.int64)}
    ref = run_nn(parse(text), store, feeds)["y"]
    module = _grouped(text, store)
    names = [op.sym_name.data for op in module.ops if hasattr(op, "sym_name")]
    assert any(n.startswith("grouped_matmul") for n in names) and any(n.startswith("moe_init_routing") for n in names)
    # fused: SwiGLU on the gate/up GroupedMatmul's AIVs (a mix kernel), no SwiGLU kernel of its own
    assert any(n.startswith("swiglu") for n in names) != fuse
    cores = [op.core_type.data for op in module.ops if hasattr(op, "sym_name") and op.sym_name.data.startswith("grouped_matmul")]
    assert cores == (["mix", "aic"] if fuse else ["aic", "aic"])
    out = simulate(module, store, feeds, HW).outputs["y"]
    tol = dict(rtol=1e-4, atol=1e-5) if t == "f32" else dict(rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), **tol)


def test_init_routing_outputs():
    """numpy's MoeInitRouting (what a timing-only run writes) is a stable sort by expert."""
    ids = np.array([[3, 1], [1, 0], [3, 2]])
    rows, dest, groups = init_routing(ids, 5)
    assert rows.tolist() == [3, 1, 2, 5, 0, 4]
    assert groups.tolist() == [0, 1, 3, 4, 6, 6]
    assert (rows[dest] == np.arange(6)).all()
    assert (np.diff(groups) == tokens_per_expert(ids, 5)).all()


@pytest.fixture(scope="module")
def mixtral():
    path = DATA / "mixtral_moe_block_small" / "model.onnx"
    with np.load(DATA / "mixtral_moe_block_small" / "reference.npz") as ref:
        feeds = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
    module, weights = compile_model(path, HW.name, opt_level="O2")
    nn_module, nn_weights = compile_model(path, emit="nn", opt_level="O0")
    return module, weights, feeds, nn_module, nn_weights


def _grouped_kernels(report: dict) -> list[dict]:
    return [k for k in report["kernels"] if k["name"].startswith("grouped_matmul")]


def test_cycles_follow_the_routing(mixtral):
    """Timing-only runs given two routings time the grouped MatMuls differently; given the routing
    of the inputs they time what the numerics run on those inputs does, cycle for cycle."""
    module, weights, feeds, nn_module, nn_weights = mixtral
    (section, routed), = [moe_section(nn_module, nn_weights, feeds, "reference.npz", None)]
    block = section[0]["block"]
    numerics = simulate(module, weights, feeds, HW).report
    given = simulate(module, weights, {}, HW, timing_only=True, moe_routing=routed).report
    assert given["total_cycles"] == numerics["total_cycles"]
    assert [k["cycles"] for k in _grouped_kernels(given)] == [k["cycles"] for k in _grouped_kernels(numerics)]
    skewed = {block: np.tile(np.array([[0, 1]]), (64, 1))}  # every token to experts 0 and 1
    other = simulate(module, weights, {}, HW, timing_only=True, moe_routing=skewed).report
    assert sum(k["cycles"] for k in _grouped_kernels(other)) != sum(k["cycles"] for k in _grouped_kernels(given))
    assert not any("MoE block" in a for a in given["assumptions"] + other["assumptions"])
    # without a routing the run says what it assumed
    bare = simulate(module, weights, {}, HW, timing_only=True).report
    assert any(f"MoE block {block}" in a and "uniform" in a for a in bare["assumptions"])


@pytest.mark.parametrize("routing", ["inputs", "skew=2"])
def test_weight_bytes_match_the_report(mixtral, routing):
    """GM bytes the two grouped MatMuls read = the moe section's grouped expert-weight bytes +
    their activation rows (each row tile read once per N tile; in the kernel with the fused
    SwiGLU once per I tile, for its gate and up blocks) + what that kernel's AIV reads back of
    the workspace (per row tile and I tile a gate and an up tile [bm, bn])."""
    module, weights, feeds, nn_module, nn_weights = mixtral
    spec = None if routing == "inputs" else RoutingSpec("skew", alpha=2.0)
    section, routed = moe_section(nn_module, nn_weights, feeds if spec is None else None, "reference.npz", spec)
    rep = simulate(module, weights, {}, HW, timing_only=True, moe_routing=routed).report
    m = section[0]
    rows, es = m["tokens"] * m["top_k"], 4
    kernels = {op.sym_name.data: op for op in module.ops if hasattr(op, "sym_name") and op.sym_name.data.startswith("grouped")}
    activations = workspace = 0
    row_tiles = m["expert_weight_bytes"]["grouped"] // m["expert_weight_bytes"]["per_expert"]
    for k in kernels.values():
        kdim = k.body.block.args[1].type.get_shape()[2]
        fused = k.core_type.data == "mix"
        activations += rows * kdim * es * _n_tiles(k)
        if fused:
            bn = k.body.block.args[4].type.get_shape()[1] // 4
            workspace += row_tiles * _n_tiles(k) * 2 * row_tile(rows, m["experts"]) * bn * es
    assert sum(k.core_type.data == "mix" for k in kernels.values()) == 1
    read = sum(k["bytes"]["gm_read"] for k in _grouped_kernels(rep))
    assert read == m["expert_weight_bytes"]["grouped"] + activations + workspace
    counts = np.array(m["tokens_per_expert"])
    assert m["expert_weight_bytes"]["grouped"] == int((-(-counts // row_tile(rows, m["experts"]))).sum()) * m["expert_weight_bytes"]["per_expert"]


def _n_tiles(kernel) -> int:
    """The N tiles of a grouped MatMul kernel: the trip count of its block-cyclic tile loop (which
    starts at this block's place in the deal: block_idx less the tiles dealt before, mod block_dim)."""
    from xdsl.dialects import arith, scf

    for op in kernel.walk():
        if isinstance(op, scf.ForOp) and isinstance(op.lb.owner, arith.RemUIOp) and isinstance(op.ub.owner, arith.ConstantOp):
            return op.ub.owner.value.value.data
    raise AssertionError("no tile loop")


@pytest.mark.sampled
@pytest.mark.parametrize("model", MOE_MODELS)
def test_moe_models_lower_to_grouped_kernels(model):
    """-O2 takes every corpus MoE block's experts into the grouped kernels (numerics against
    onnxruntime: test_models_e2e)."""
    module, _ = compile_model(DATA / model / "model.onnx", HW.name, opt_level="O2")
    names = [op.sym_name.data for op in module.ops if hasattr(op, "sym_name")]
    assert sum(n.startswith("grouped_matmul") for n in names) == 2
    assert sum(n.startswith("moe_init_routing") for n in names) == 1


def test_init_routing_on_many_cores():
    """Routed pairs beyond one AIV's UB (8,200 pairs: 3 arrays of 64 KiB) sort on many AIVs (a
    histogram launch, then the placing launch): the block's output equals the nn reference, and
    a timing-only run given the same routing takes the same cycles."""
    r, e, h, i = 8200, 4, 16, 16
    rng = np.random.default_rng(7)
    store = WeightStore()
    store._arrays["gate_up"] = (rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(np.float32)
    store._arrays["down"] = (rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(np.float32)
    ids = make_routing(RoutingSpec("skew", alpha=1.5), r, 1, e).reshape(-1)
    text = EXPERTS.format(r=r, h=h, i=i, i2=2 * i, e=e, t="f32", g0=0, u0=i)
    feeds = {"x": rng.standard_normal((r, h, 1)).astype(np.float32), "ids": ids.astype(np.int64)}
    ref = run_nn(parse(text), store, feeds)["y"]
    module = _grouped(text, store)
    kernels = {op.sym_name.data: op for op in module.ops if hasattr(op, "sym_name")}
    hist = [k for n, k in kernels.items() if n.startswith("moe_init_routing_hist")]
    assert len(hist) == 1 and hist[0].block_dim.value.data > 1
    run = simulate(module, store, feeds, HW)
    np.testing.assert_allclose(run.outputs["y"], ref, rtol=1e-4, atol=1e-5)
    timed = simulate(module, store, {}, HW, timing_only=True, moe_routing={"blk": ids.reshape(r, 1)}).report
    assert timed["total_cycles"] == run.report["total_cycles"]


def test_routing_beyond_ub_lowers_gathered():
    """MoeInitRouting holds its arrays in UB: a block whose per-core histograms do not fit even
    spread over the AIVs (4,096 experts) is declined (with the reason) and lowers op by op, the
    gathered form."""
    from ascendir.session import Session

    r, e, h, i = 8200, 4096, 16, 16
    text = EXPERTS.format(r=r, h=h, i=i, i2=2 * i, e=e, t="f32", g0=0, u0=i)
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-ffn", "O0", HW.name, None), None)
    ffn = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == "ffn"]
    moe_experts.fuse(moe_experts.match(ffn[0]), "blk")
    session = Session()
    lower(module, None, HW.name, session)
    reasons = [d.reason for d in session.declined if d.kind == "moe_experts"]
    assert len(reasons) == 1 and "UB" in reasons[0]
    assert not any(getattr(op, "sym_name", None) and op.sym_name.data.startswith("grouped") for op in module.ops)


@pytest.mark.sampled
@pytest.mark.parametrize("model", MOE_MODELS)
def test_fused_swiglu_equals_unfused(model, monkeypatch):
    """SwiGLU fused into the gate/up GroupedMatmul gives the unfused pipeline's output bit for
    bit (the same vector ops on the same rounded h tiles) on the corpus MoE models, on their
    reference inputs (onnxruntime's outputs: test_models_e2e), and both follow the same routing."""
    path = DATA / model / "model.onnx"
    with np.load(DATA / model / "reference.npz") as ref:
        feeds = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        want = [ref[k] for k in ref.files if k.startswith("output:")]
    outs = {}
    for fuse in (False, True):
        monkeypatch.setattr(moe_experts, "FUSE_SWIGLU", "always" if fuse else "never")
        module, weights = compile_model(path, HW.name, opt_level="O2")
        names = [op.sym_name.data for op in module.ops if hasattr(op, "sym_name")]
        assert any(n.startswith("swiglu") for n in names) != fuse
        outs[fuse] = list(simulate(module, weights, feeds, HW).outputs.values())
    assert len(outs[True]) == len(want) == 1
    np.testing.assert_array_equal(outs[True][0], outs[False][0])
    np.testing.assert_allclose(outs[True][0], want[0], rtol=1e-3, atol=1e-4)


def test_fused_swiglu_choice():
    """The cost model's choice (grouped_matmul.prefer_fused_swiglu), against simulation: the
    corpus-sized blocks (K = H = 128: one chunk per item) take the fused SwiGLU (simulated
    mixtral_moe_block_small 29,266 -> 28,696 cycles, qwen2 49,063 -> 46,952, deepseek 69,848 ->
    68,533); the Mixtral-8x7B and DeepSeek-V3 decode layers keep the two kernels (each K chunk of
    the fused kernel loads two weight blocks, one more nd2nz start-up; simulated decode 1, fused
    forced: Mixtral 1,107,704 vs 1,087,980, DeepSeek 1,136,348 vs 1,117,009); a coupled core
    (910A: no separate AIV to run the epilogue) never fuses."""
    from xdsl.ir import Block
    from xdsl.dialects.builtin import f16, f32

    from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
    from ascendir.conversion.nn_to_ascend.templates.grouped_matmul import fused_swiglu_fits, prefer_fused_swiglu

    ctx = LoweringContext(HW, Block())
    assert prefer_fused_swiglu(ctx, 128, 8, 128, 128, f32)  # mixtral_moe_block_small
    assert prefer_fused_swiglu(ctx, 256, 16, 64, 128, f32)  # qwen2 / deepseek small
    for tokens in (1, 16, 64):
        assert fused_swiglu_fits(ctx, tokens * 2, 8, 14336, 4096, f16)
        assert not prefer_fused_swiglu(ctx, tokens * 2, 8, 14336, 4096, f16)
        assert not prefer_fused_swiglu(ctx, tokens * 8, 256, 2048, 7168, f16)
    assert not fused_swiglu_fits(LoweringContext(load_target("ascend910a"), Block()), 128, 8, 128, 128, f32)
