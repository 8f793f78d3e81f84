"""fuse-moe-gating and its template (ops-transformer's MoeGatingTopKSoftmax): the regions it
builds on the MoE models, and the fused kernel against the unfused softmax / sigmoid, topk,
reduce_sum and div kernels bit for bit (f32, f16, bf16; a bf16 softmax router, and an f16 one
in the vendor's Perf tiling, against the unfused f32 kernels on its logits widened, its weights
rounded once: the vendor kernel's f32 softmax and top-k), and against the nn reference."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ascendir.dialects import nn
from ascendir.driver import compile_model, lower, parse_pipeline, run_passes
from ascendir.interpreter import simulate
from ascendir.pipelines import PASSES
from ascendir.session import Session
from lowering_harness import parse, run_both
from sampling import first_then_sampled

DATA = Path(__file__).parent / "data"

RENORM = """
func.func @main(%x: tensor<{t_rows}x{e}x{t}>) -> (tensor<{t_rows}x{k}x{t}>, tensor<{t_rows}x{k}xi64>) {{
  %p = nn.{score} %x{axis} : (tensor<{t_rows}x{e}x{t}>) -> tensor<{t_rows}x{e}x{t}>
  %v, %i = nn.topk %p {{k = {k} : i64, axis = 1 : i64, largest = true}} : (tensor<{t_rows}x{e}x{t}>) -> (tensor<{t_rows}x{k}x{t}>, tensor<{t_rows}x{k}xi64>)
  %s = nn.reduce_sum %v {{axes = array<i64: 1>, keepdims = true}} : (tensor<{t_rows}x{k}x{t}>) -> tensor<{t_rows}x1x{t}>
  %w = nn.div %v, %s : (tensor<{t_rows}x{k}x{t}>, tensor<{t_rows}x1x{t}>) -> tensor<{t_rows}x{k}x{t}>
  func.return %w, %i : tensor<{t_rows}x{k}x{t}>, tensor<{t_rows}x{k}xi64>
}}
"""
PLAIN = """
func.func @main(%x: tensor<{t_rows}x{e}x{t}>) -> (tensor<{t_rows}x{k}x{t}>, tensor<{t_rows}x{k}xi64>) {{
  %p = nn.{score} %x{axis} : (tensor<{t_rows}x{e}x{t}>) -> tensor<{t_rows}x{e}x{t}>
  %v, %i = nn.topk %p {{k = {k} : i64, axis = 1 : i64, largest = true}} : (tensor<{t_rows}x{e}x{t}>) -> (tensor<{t_rows}x{k}x{t}>, tensor<{t_rows}x{k}xi64>)
  func.return %v, %i : tensor<{t_rows}x{k}x{t}>, tensor<{t_rows}x{k}xi64>
}}
"""
DT = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def test_pass_is_registered() -> None:
    assert "fuse-moe-gating" in PASSES


@pytest.mark.parametrize("t", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("score,renorm,e,k,t_rows", first_then_sampled([
    ("softmax", True, 8, 2, 64),     # Mixtral
    ("softmax", False, 60, 4, 37),   # Qwen2-MoE-shaped router, odd token count
    ("sigmoid", False, 16, 1, 200),
    ("sigmoid", True, 16, 4, 5),
], keep=2))
def test_fused_equals_unfused_bit_for_bit(score: str, renorm: bool, e: int, k: int, t_rows: int, t: str) -> None:
    text = (RENORM if renorm else PLAIN).format(
        t_rows=t_rows, e=e, k=k, t=t, score=score, axis=" {axis = 1 : i64}" if score == "softmax" else "")
    rng = np.random.default_rng(e + k)
    x = (3 * rng.standard_normal((t_rows, e))).astype(DT[t])
    x[1, :2] = x[1, 3]  # ties: the smallest index first, as the unfused topk
    inputs = {"arg0": x}
    ref, unfused, _ = run_both(text, inputs)
    # MoeGatingTopKSoftmax: softmax and top-k in f32, the weights rounded to t once, for bf16 and
    # for f16 in its Perf tiling (E % 8 == 0 here); f16 with E = 60 keeps the unfused steps
    if score == "softmax" and (t == "bf16" or (t == "f16" and e % 8 == 0)):
        f32_text = (RENORM if renorm else PLAIN).format(t_rows=t_rows, e=e, k=k, t="f32", score=score, axis=" {axis = 1 : i64}")
        _, wide, _ = run_both(f32_text, {"arg0": x.astype(np.float32)})
        unfused = {n: a.astype(DT[t]) if a.dtype.kind == "f" else a for n, a in wide.items()}
    fused_module = parse(text)
    run_passes(fused_module, parse_pipeline("fuse-moe-gating", "O0", "ascend910b2", None), None)
    assert [o.kind.data for o in fused_module.walk() if isinstance(o, nn.FusedOp)] == ["moe_gating"]
    lower(fused_module, None, "ascend910b2")
    fused = simulate(fused_module, None, inputs, "ascend910b2")
    assert [k_["name"] for k_ in fused.report["kernels"]] == ["moe_gating_0"]
    assert list(fused.outputs) == list(unfused)
    for name, r in zip(unfused, ref.values()):
        np.testing.assert_array_equal(fused.outputs[name], unfused[name], err_msg=name)
        if r.dtype.kind == "i":
            np.testing.assert_array_equal(fused.outputs[name], r, err_msg=name)
        else:
            tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 2e-2}[t]
            np.testing.assert_allclose(fused.outputs[name].astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)


# model: regions of fuse-moe-gating (DeepSeek-V3's group-limited router: test_moe_gating_groups.py)
REGIONS = {"mixtral_moe_block_small": 1, "qwen2_moe_block_small": 1, "qwen2_moe_block_small_dynamo": 1,
           "deepseek_v3_moe_block_small": 1, "deepseek_v3_moe_block_small_dynamo": 1}


@pytest.mark.parametrize("name", sorted(REGIONS))
def test_models_gating_regions_and_outputs(name: str) -> None:
    pipeline = ("fold-batchnorm,recompose-nn,fuse-attention,fuse-ffn,fuse-moe-gating,fuse-norm-matmul,"
                "fuse-matmul-epilogue,fuse-conv-activation,fuse-elementwise,choose-tiling")
    session = Session()
    module, weights = compile_model(DATA / name / "model.onnx", "ascend910b2", pipeline=pipeline, session=session)
    assert all(d.kind != "moe_gating" for d in session.declined)
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    result = simulate(module, weights, inputs, "ascend910b2")
    assert sum(k["name"].startswith("moe_gating") for k in result.report["kernels"]) == REGIONS[name]
    for k, want in expected.items():
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-3, atol=1e-4, err_msg=k)


def _router_logits(name: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(the router logits [tokens, E] of `name`'s MoE block imported under `dtype`, on its
    reference inputs (nn reference semantics), the block's TopK indices under fp32)."""
    from ascendir.api.moe_report import routed_indices
    from ascendir.conversion.nn_to_ascend.templates.moe_match import find_moe_blocks
    from ascendir.driver import io_names, main_func
    from ascendir.dtypes import to_numpy_dtype
    from ascendir.frontends.onnx import import_onnx
    from ascendir.interpreter.exec.nn_reference import evaluate_op

    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
    out = []
    for d in (dtype, "fp32"):
        module, weights = import_onnx(DATA / name / "model.onnx", dtype=d)
        fn = main_func(module)
        (block,) = find_moe_blocks(fn.body.block)
        feeds = {n: np.asarray(inputs[n]).astype(to_numpy_dtype(a.type.element_type))
                 for n, a in zip(io_names(fn, results=False), fn.body.block.args)}
        if d == "fp32":
            out.append(routed_indices(module, weights, feeds, [block])[block])
            break
        want = block.topk.input.owner.operands[0]  # the softmax's input
        env = {arg: feeds[n] for arg, n in zip(fn.body.block.args, io_names(fn, results=False))}
        for op in fn.body.block.ops:
            for r, v in zip(op.results, evaluate_op(op, [env[o] for o in op.operands], weights)):
                env[r] = v
            if want in env:
                break
        out.append(env[want])
    return out[0], out[1]


def test_bf16_router_routes_as_fp32_on_qwen2_moe() -> None:
    """qwen2_moe_block_small under bf16: token 58's fp32 scores 0.07250 / 0.07211 both round to
    0.07227 in bf16 (the unfused softmax's output type), which TopK's tie rule gives to the lower
    index; the fused kernel, as MoeGatingTopKSoftmax, takes the top-k of the f32 softmax of the
    bf16 logits, so every token gets its fp32 expert set."""
    logits, want = _router_logits("qwen2_moe_block_small", "bf16")
    t_rows, e = logits.shape
    k = want.shape[1]
    text = PLAIN.format(t_rows=t_rows, e=e, k=k, t="bf16", score="softmax", axis=" {axis = 1 : i64}")
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-moe-gating", "O0", "ascend910b2", None), None)
    lower(module, None, "ascend910b2")
    got = simulate(module, None, {"arg0": logits}, "ascend910b2").outputs
    ids = next(v for v in got.values() if v.dtype.kind == "i")
    ref = run_both(text, {"arg0": logits})[0]
    ref_ids = next(v for v in ref.values() if v.dtype.kind == "i")
    assert set(ref_ids[58].tolist()) != set(want[58].tolist())  # the case: bf16 scores tie at token 58
    # the expert sets (precision.py's routing): the bf16 logits themselves can tie two experts
    # exactly (token 43's 1 and 8), which both orders of the pair then rank alike
    np.testing.assert_array_equal(np.sort(ids, axis=1), np.sort(want, axis=1))
    np.testing.assert_array_equal(ids[58], want[58])
