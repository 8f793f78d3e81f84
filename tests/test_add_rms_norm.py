"""fuse-add-rms-norm and its template (the worked example of docs/adding-a-template.md): the
regions it builds on a real model, the fused kernel's outputs against the nn reference and
onnxruntime, and against the unfused add + rms_norm kernels bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ascendir.dialects import nn
from ascendir.driver import compile_model, parse_pipeline, run_passes
from ascendir.frontends.onnx import import_onnx
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.pipelines import PIPELINES
from ascendir.session import Session
from ascendir.transforms.nn.fuse_add_rms_norm import ADD_RMS_NORM_O2
from lowering_harness import run_both

LLAMA = Path(__file__).parent / "data" / "llama_small"


def test_pass_is_registered_but_not_in_o1_o2():
    from ascendir.pipelines import PASSES

    assert "fuse-add-rms-norm" in PASSES
    assert all("fuse-add-rms-norm" not in PIPELINES[level] for level in ("O1", "O2"))
    # the O2 passes, with the new one after fuse-ffn and before the passes that would take its ops
    assert ADD_RMS_NORM_O2.replace("fuse-add-rms-norm,", "") == PIPELINES["O2"]


def test_llama_small_regions_and_outputs():
    """llama_small: every residual add feeding an RMSNorm (2 per layer, and the final norm) becomes
    one region; the simulated logits match the nn reference of the imported module and the
    shipped onnxruntime outputs (fp32: rtol 1e-3, atol 1e-4, as test_models_e2e)."""
    ref = np.load(LLAMA / "reference.npz")
    inputs = {k[len("input:"):]: ref[k] for k in ref.files if k.startswith("input:")}

    module, weights = import_onnx(LLAMA / "model.onnx", None)
    nn_ref = run_nn(module, weights, inputs)
    run_passes(module, parse_pipeline(ADD_RMS_NORM_O2, "O2", "ascend910b2", None), weights)
    regions = [o for o in module.walk() if isinstance(o, nn.FusedOp) and o.kind.data == "add_rms_norm"]
    assert len(regions) == 4
    assert sorted(len(r.outputs) for r in regions) == [1, 2, 2, 2]  # the last sum is read by nothing else

    session = Session()
    lowered, w = compile_model(LLAMA / "model.onnx", "ascend910b2", pipeline=ADD_RMS_NORM_O2, session=session)
    assert session.declined == []
    result = simulate(lowered, w, inputs, "ascend910b2")
    names = [k["name"] for k in result.report["kernels"]]
    assert sum(n.startswith("add_rms_norm") for n in names) == 4
    assert not any(n.startswith("rms_norm") for n in names)
    for k, want in nn_ref.items():
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-3, atol=1e-4, err_msg=f"nn reference {k}")
        np.testing.assert_allclose(result.outputs[k], ref[f"output:{k}"], rtol=1e-3, atol=1e-4, err_msg=f"onnxruntime {k}")


SUM_KEPT = """
func.func @main(%x: tensor<3x40x96x{t}>, %r: tensor<3x40x96x{t}>, %g: tensor<96x{t}>) -> (tensor<3x40x96x{t}>, tensor<3x40x96x{t}>) {{
  %y = nn.add %x, %r : (tensor<3x40x96x{t}>, tensor<3x40x96x{t}>) -> tensor<3x40x96x{t}>
  %n = nn.rms_norm %y, %g {{axis = 2 : i64, epsilon = 1.0e-6 : f32}} : (tensor<3x40x96x{t}>, tensor<96x{t}>) -> tensor<3x40x96x{t}>
  %z = nn.mul %y, %y : (tensor<3x40x96x{t}>, tensor<3x40x96x{t}>) -> tensor<3x40x96x{t}>
  func.return %n, %z : tensor<3x40x96x{t}>, tensor<3x40x96x{t}>
}}
"""


@pytest.mark.parametrize("t", ["f32", "f16"])
def test_fused_equals_unfused_bit_for_bit(t):
    """The fused kernel runs the unfused kernels' vector ops in their order: the same outputs,
    bit for bit, with one launch and one GM round trip of the sum fewer."""
    from ascendir.driver import lower
    from lowering_harness import parse

    dt = np.float32 if t == "f32" else np.float16
    rng = np.random.default_rng(0)
    inputs = {"arg0": rng.standard_normal((3, 40, 96)).astype(dt), "arg1": rng.standard_normal((3, 40, 96)).astype(dt),
              "arg2": rng.standard_normal(96).astype(dt)}
    text = SUM_KEPT.format(t=t)
    ref, unfused, _ = run_both(text, inputs)
    fused_module = parse(text)
    run_passes(fused_module, parse_pipeline("fuse-add-rms-norm", "O0", "ascend910b2", None), None)
    assert [o.kind.data for o in fused_module.walk() if isinstance(o, nn.FusedOp)] == ["add_rms_norm"]
    lower(fused_module, None, "ascend910b2")
    fused = simulate(fused_module, None, inputs, "ascend910b2")
    assert [k["name"] for k in fused.report["kernels"]] == ["add_rms_norm_0", "mul_0"]
    assert list(fused.outputs) == list(unfused) and len(ref) == len(unfused) == 2  # out0, out1 (result0, result1 in run_nn)
    tol = 1e-3 if t == "f32" else 2e-2
    for k, r in zip(unfused, ref.values()):
        np.testing.assert_array_equal(fused.outputs[k], unfused[k], err_msg=k)
        np.testing.assert_allclose(fused.outputs[k].astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol, err_msg=k)
