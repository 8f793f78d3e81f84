"""fuse-moe-finalize-routing and its template (ops-transformer's MoeFinalizeRouting): the regions
it builds on the MoE models, and the fused kernel against the unfused mul, reduce_sum and add
kernels bit for bit (f32, f16, bf16), and against the nn reference."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ascendir.dialects import nn
from ascendir.driver import compile_model, lower, parse_pipeline, run_passes
from ascendir.frontends.onnx import import_onnx
from ascendir.interpreter import simulate
from ascendir.pipelines import PASSES
from ascendir.session import Session
from lowering_harness import parse, run_both
from sampling import first_then_sampled

DATA = Path(__file__).parent / "data"

COMBINE = """
func.func @main(%y: tensor<{n}x{h}x{t}>, %w: tensor<{n}x1x{t}>{shared_arg}) -> tensor<{out}x{t}> {{
  %p = nn.mul %y, %w : (tensor<{n}x{h}x{t}>, tensor<{n}x1x{t}>) -> tensor<{n}x{h}x{t}>
  %q = nn.reshape %p : (tensor<{n}x{h}x{t}>) -> tensor<{tok}x{k}x{h}x{t}>
  %s = nn.reduce_sum %q {{axes = array<i64: 1>, keepdims = false}} : (tensor<{tok}x{k}x{h}x{t}>) -> tensor<{tok}x{h}x{t}>
{tail}
}}
"""
TAIL_PLAIN = "  func.return %s : tensor<{tok}x{h}x{t}>"
TAIL_SHARED = """  %r = nn.reshape %s : (tensor<{tok}x{h}x{t}>) -> tensor<1x{tok}x{h}x{t}>
  %o = nn.add %r, %sh : (tensor<1x{tok}x{h}x{t}>, tensor<1x{tok}x{h}x{t}>) -> tensor<1x{tok}x{h}x{t}>
  func.return %o : tensor<1x{tok}x{h}x{t}>"""
DT = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def test_pass_is_registered() -> None:
    assert "fuse-moe-finalize-routing" in PASSES


@pytest.mark.parametrize("t", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("tok,k,h,shared", first_then_sampled([
    (64, 2, 128, False),    # Mixtral block
    (37, 4, 96, True),      # odd token count, shared expert added
    (3, 8, 9000, True),     # rows too wide for UB: column chunks
]))
def test_fused_equals_unfused_bit_for_bit(tok: int, k: int, h: int, shared: bool, t: str) -> None:
    n = tok * k
    fmt = dict(n=n, h=h, t=t, tok=tok, k=k)
    tail = (TAIL_SHARED if shared else TAIL_PLAIN).format(**fmt)
    text = COMBINE.format(**fmt, tail=tail, out=f"1x{tok}x{h}" if shared else f"{tok}x{h}",
                          shared_arg=f", %sh: tensor<1x{tok}x{h}x{t}>" if shared else "")
    rng = np.random.default_rng(h + k)
    inputs = {"arg0": rng.standard_normal((n, h)).astype(DT[t]), "arg1": rng.random((n, 1)).astype(DT[t])}
    if shared:
        inputs["arg2"] = rng.standard_normal((1, tok, h)).astype(DT[t])
    ref, unfused, _ = run_both(text, inputs)
    fused_module = parse(text)
    run_passes(fused_module, parse_pipeline("fuse-moe-finalize-routing", "O0", "ascend910b2", None), None)
    assert [o.kind.data for o in fused_module.walk() if isinstance(o, nn.FusedOp)] == ["moe_finalize_routing"]
    lower(fused_module, None, "ascend910b2")
    fused = simulate(fused_module, None, inputs, "ascend910b2")
    assert [k_["name"] for k_ in fused.report["kernels"]] == ["moe_finalize_0"]
    (name,) = unfused
    np.testing.assert_array_equal(fused.outputs[name], unfused[name])
    tol = {"f32": 1e-5, "f16": 2e-2, "bf16": 1e-1}[t]
    (r,) = ref.values()
    np.testing.assert_allclose(fused.outputs[name].astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)


PIPELINE = ("fold-batchnorm,recompose-nn,fuse-attention,fuse-ffn,fuse-moe-gating,fuse-moe-finalize-routing,"
            "fuse-norm-matmul,fuse-matmul-epilogue,fuse-conv-activation,fuse-elementwise,choose-tiling")
# model: whether the shared expert's output is added inside the region
SHARED = {"mixtral_moe_block_small": False, "qwen2_moe_block_small": True, "qwen2_moe_block_small_dynamo": True,
          "deepseek_v3_moe_block_small": True, "deepseek_v3_moe_block_small_dynamo": True}


@pytest.mark.parametrize("name", sorted(SHARED))
def test_models_finalize_regions_and_outputs(name: str) -> None:
    session = Session()
    module, weights = compile_model(DATA / name / "model.onnx", "ascend910b2", pipeline=PIPELINE, session=session)
    assert all(d.kind not in ("moe_gating", "moe_finalize_routing") for d in session.declined)
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    result = simulate(module, weights, inputs, "ascend910b2")
    assert sum(k["name"].startswith("moe_finalize") for k in result.report["kernels"]) == 1
    nn_module, nn_weights = import_onnx(DATA / name / "model.onnx")
    run_passes(nn_module, parse_pipeline(PIPELINE, "O2", "ascend910b2", None), nn_weights)
    (region,) = [o for o in nn_module.walk() if isinstance(o, nn.FusedOp) and o.kind.data == "moe_finalize_routing"]
    assert any(isinstance(o, nn.AddOp) for o in region.body.block.ops) == SHARED[name]
    for k, want in expected.items():
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-3, atol=1e-4, err_msg=k)
