"""MoeInitRouting gathers the expert-major rows from the tokens (issue 18 part 2, ops-transformer's
MoeInitRoutingV2 / V3 expanded_x[j] = x[sorted_row_idx[j] / k]): the exporters' expand of the
tokens to (token, k) rows goes into the moe_experts region and no expanded copy, expand kernel or
row-gather kernel is left before the grouped MatMuls. The corpus MoE models equal onnxruntime
(fp32, fp16 where the model allows it, one device and EP 2); the multi-core sort's row launch
equals the nn reference; a timing-only run given the routing times the same cycles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ascendir.conversion.nn_to_ascend.templates import moe_experts
from ascendir.costmodel.moe_routing import RoutingSpec, make_routing
from ascendir.dialects import ascend, nn
from ascendir.driver import lower, parse_pipeline, run_passes
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.patterns import top_level_ops
from ascendir.weights import WeightStore
from cli_helpers import run_cli
from lowering_harness import parse

DATA = Path(__file__).parent / "data"
HW = load_target("ascend910b2")
MOE_MODELS = ["mixtral_moe_block_small", "qwen2_moe_block_small", "qwen2_moe_block_small_dynamo",
              "deepseek_v3_moe_block_small", "deepseek_v3_moe_block_small_dynamo"]
# DeepSeek's group-limited router casts scores to i1: the model runs in float32 only (driver)
CASES = ([(m, "fp32", 1) for m in MOE_MODELS] + [(m, "fp32", 2) for m in MOE_MODELS]
         + [(m, "fp16", ep) for m in MOE_MODELS if "deepseek" not in m for ep in (1, 2)])


@pytest.mark.sampled
@pytest.mark.parametrize("model,dtype,ep", CASES)
def test_corpus_rows_come_from_the_tokens(model: str, dtype: str, ep: int, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    args = ["run", DATA / model / "model.onnx", "--inputs", DATA / model / "reference.npz", "--check-ort",
            "--dtype", dtype, "--report", report] + (["--ep", ep] if ep > 1 else [])
    res = run_cli(*args)
    assert res.exit_code == 0, res.output
    rep = json.loads(report.read_text())
    assert rep["verdict"]["status"] == "pass"
    names = [k["name"] for k in rep["kernels"]]
    assert not any(n.startswith("expand") for n in names)  # the tokens are never repeated in GM
    # the experts' MoeInitRouting (under EP the receive side's, after the dispatch's) hands its
    # expanded_x straight to the grouped MatMul: no row gather in between
    last = max(i for i, n in enumerate(names) if n.startswith("moe_init_routing"))
    assert names[last + 1].startswith("grouped_matmul")
    if ep == 1:  # (under EP the dispatch's send side still gathers its rows: templates/moe_distribute.py)
        assert not any(n.startswith("gather") for n in names)


LAYER = """
func.func @main(%x: tensor<{t}x{h}xf32> {{onnx.name = "x"}}, %ids: tensor<{r}xi64> {{onnx.name = "ids"}}) -> (tensor<{r}x{h}x1xf32> {{onnx.name = "y"}}) {{
  %xr = nn.reshape %x : (tensor<{t}x{h}xf32>) -> tensor<{t}x1x{h}xf32>
  %xx = nn.expand %xr : (tensor<{t}x1x{h}xf32>) -> tensor<{t}x{k}x{h}xf32>
  %xe = nn.reshape %xx : (tensor<{t}x{k}x{h}xf32>) -> tensor<{r}x{h}x1xf32>
  %wgu = nn.weight @gate_up : tensor<{e}x{i2}x{h}xf32>
  %gu = nn.gather %wgu, %ids {{axis = 0 : i64}} : (tensor<{e}x{i2}x{h}xf32>, tensor<{r}xi64>) -> tensor<{r}x{i2}x{h}xf32>
  %wd = nn.weight @down : tensor<{e}x{h}x{i}xf32>
  %d = nn.gather %wd, %ids {{axis = 0 : i64}} : (tensor<{e}x{h}x{i}xf32>, tensor<{r}xi64>) -> tensor<{r}x{h}x{i}xf32>
  %a = nn.matmul %gu, %xe : (tensor<{r}x{i2}x{h}xf32>, tensor<{r}x{h}x1xf32>) -> tensor<{r}x{i2}x1xf32>
  %hh = nn.reshape %a : (tensor<{r}x{i2}x1xf32>) -> tensor<{r}x{i2}xf32>
  %g = nn.slice %hh {{starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}xf32>) -> tensor<{r}x{i}xf32>
  %u = nn.slice %hh {{starts = array<i64: 0, {i}>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}xf32>) -> tensor<{r}x{i}xf32>
  %s = nn.silu %g : (tensor<{r}x{i}xf32>) -> tensor<{r}x{i}xf32>
  %m = nn.mul %s, %u : (tensor<{r}x{i}xf32>, tensor<{r}x{i}xf32>) -> tensor<{r}x{i}xf32>
  %mr = nn.reshape %m : (tensor<{r}x{i}xf32>) -> tensor<{r}x{i}x1xf32>
  %y = nn.matmul %d, %mr : (tensor<{r}x{h}x{i}xf32>, tensor<{r}x{i}x1xf32>) -> tensor<{r}x{h}x1xf32>
  func.return %y : tensor<{r}x{h}x1xf32>
}}
"""


def _layer(t: int, k: int, h: int, i: int, e: int, seed: int):
    """(text, store, feeds, nn reference y) of one MoE layer over t tokens, top-k, skewed routing."""
    r = t * k
    text = LAYER.format(t=t, k=k, r=r, h=h, i=i, i2=2 * i, e=e)
    rng = np.random.default_rng(seed)
    store = WeightStore()
    store._arrays["gate_up"] = (rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(np.float32)
    store._arrays["down"] = (rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(np.float32)
    ids = make_routing(RoutingSpec("skew", alpha=1.5), t, k, e)
    feeds = {"x": rng.standard_normal((t, h)).astype(np.float32), "ids": ids.reshape(-1).astype(np.int64)}
    return text, store, feeds, ids, run_nn(parse(text), store, feeds)["y"]


@pytest.mark.parametrize("t,k,h,e,many", [
    (48, 2, 40, 4, False),     # one launch: every AIV sorts, each moves a run of rows
    (1, 8, 24, 16, False),     # decode of one token: its 8 rows from one row of x
    (4100, 2, 16, 4, True),    # 8,200 pairs beyond one UB: the multi-core sort, then the rows launch
])
def test_rows_from_tokens_equal_the_reference(t: int, k: int, h: int, e: int, many: bool) -> None:
    text, store, feeds, ids, ref = _layer(t, k, h, 16, e, seed=t + k)
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-ffn", "O0", HW.name, None), store)
    ffn = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == "ffn"]
    region = moe_experts.fuse(moe_experts.match(ffn[0]), "blk")
    parsed = moe_experts.parse(region)
    assert parsed.top_k == k and nn.shape_of(parsed.x)[0] == t  # the region takes the tokens
    assert not list(top_level_ops(module, nn.ExpandOp))  # only inside the region
    lower(module, store, HW.name)
    launched = [op.callee.root_reference.data for op in module.walk() if isinstance(op, ascend.LaunchOp)]
    assert not any(n.startswith("expand") for n in launched)
    assert [n for n in launched if n.startswith("gather")] == [launched[-1]]  # the un-permute of y only
    assert any(n.startswith("moe_init_routing_rows") for n in launched) == many
    run = simulate(module, store, feeds, HW)
    np.testing.assert_allclose(run.outputs["y"], ref, rtol=1e-4, atol=1e-5)
    timed = simulate(module, store, {}, HW, timing_only=True, moe_routing={"blk": ids}).report
    assert timed["total_cycles"] == run.report["total_cycles"]


def test_expand_read_elsewhere_stays_outside() -> None:
    """An expand whose rows something else reads too stays outside the region (nothing computed
    twice): the region takes the expanded rows, as before, and lowers with top_k 1."""
    t, k, h = 16, 2, 32
    text, store, feeds, _, _ = _layer(t, k, h, 16, 4, seed=5)
    text = text.replace("-> (tensor<{r}x{h}x1xf32> {{onnx.name = \"y\"}})".format(r=t * k, h=h),
                        f"-> (tensor<{t * k}x{h}x1xf32> {{onnx.name = \"y\"}}, tensor<{t * k}x{h}x1xf32> {{onnx.name = \"xe\"}})")
    text = text.replace(f"func.return %y : tensor<{t * k}x{h}x1xf32>",
                        f"func.return %y, %xe : tensor<{t * k}x{h}x1xf32>, tensor<{t * k}x{h}x1xf32>")
    ref = run_nn(parse(text), store, feeds)
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-ffn", "O0", HW.name, None), store)
    ffn = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == "ffn"]
    parsed = moe_experts.parse(moe_experts.fuse(moe_experts.match(ffn[0]), "blk"))
    assert parsed.top_k == 1 and nn.shape_of(parsed.x) == (t * k, h, 1)
    lower(module, store, HW.name)
    out = simulate(module, store, feeds, HW).outputs
    for name in ("y", "xe"):
        np.testing.assert_allclose(out[name], ref[name], rtol=1e-4, atol=1e-5)
