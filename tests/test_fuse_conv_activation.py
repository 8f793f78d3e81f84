"""fuse-conv-activation + the conv template's epilogue: Conv (+ bias) + ReLU / ReLU6 / SiLU
against onnxruntime, one conv kernel fewer vector kernels than unfused, on 910B (AIC + AIV mix
kernel) and 910A (L0C -> UB on the vector pipe); Clip with other bounds is not fused."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ascendir.dialects import ascend, nn
from ascendir.driver import lower, parse_pipeline, run_passes
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from onnx_builders import make_model, run_onnxruntime

ACTS = {
    "relu": [helper.make_node("Relu", ["y"], ["z"])],
    "relu6": [helper.make_node("Clip", ["y", "lo", "hi"], ["z"])],
    "silu": [helper.make_node("Sigmoid", ["y"], ["s"]), helper.make_node("Mul", ["y", "s"], ["z"])],
    "clip_0_inf": [helper.make_node("Clip", ["y", "lo"], ["z"])],
}
CONVS = {
    # name: (x shape, w shape, attrs, bias)
    "3x3_bias": ((2, 4, 9, 9), (8, 4, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "pointwise_nobias": ((1, 16, 6, 6), (24, 16, 1, 1), {}, False),
    "depthwise": ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}, True),
    "groups2": ((1, 8, 7, 7), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, True),
}


def _model(conv: str, act: str, dtype=np.float32, lo: float = 0.0, hi: float = 6.0):
    """Conv + activation with values representable in fp16 (so fp32 and fp16 models agree)."""
    xs, ws, attrs, with_bias = CONVS[conv]
    rng = np.random.default_rng(len(conv) + len(act))

    def values(shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float16).astype(dtype)

    x = values(xs, 2.0)
    init = {"w": values(ws), "lo": np.array(lo, dtype), "hi": np.array(hi, dtype)}
    ins = ["x", "w"]
    if with_bias:
        init["b"] = values(ws[0])
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["y"], **attrs), *ACTS[act]]
    return make_model(nodes, {"x": x}, ["z"], init), {"x": x}


def _compile(model, passes: str, target: str):
    module, weights = import_onnx(model)
    run_passes(module, parse_pipeline(passes), weights)
    fused = [op.kind.data for op in module.walk() if isinstance(op, nn.FusedOp)]
    lower(module, weights, target)
    kernels = [op for op in module.ops if isinstance(op, ascend.KernelOp)]
    return module, weights, fused, kernels


@pytest.mark.parametrize("act", ["relu", "relu6", "silu", "clip_0_inf"])
@pytest.mark.parametrize("conv", sorted(CONVS))
def test_conv_activation_matches_onnxruntime(conv: str, act: str) -> None:
    model, feeds = _model(conv, act)
    want = run_onnxruntime(model, feeds)["z"]
    _, _, _, plain = _compile(model, "recompose-nn", "ascend910b2")
    module, weights, fused, kernels = _compile(model, "recompose-nn,fuse-conv-activation", "ascend910b2")
    assert fused == ["conv_activation"]
    got = simulate(module, weights, feeds, load_target("ascend910b2")).outputs["z"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    assert len(kernels) == len(plain) - 1  # the activation's own kernel is gone
    if conv != "groups2":  # grouped: bias and activation in one vector kernel after the matmul
        assert not any(k.sym_name.data.startswith(("relu", "clip", "silu", "conv_epilogue")) for k in kernels)


@pytest.mark.parametrize("conv", ["3x3_bias", "depthwise"])
def test_conv_relu6_910a_fp16(conv: str) -> None:
    model, feeds = _model(conv, "relu6", np.float16)
    ref_model, ref_feeds = _model(conv, "relu6", np.float32)
    want = run_onnxruntime(ref_model, ref_feeds)["z"]
    module, weights, fused, _ = _compile(model, "fuse-conv-activation", "ascend910a")
    assert fused == ["conv_activation"]
    got = simulate(module, weights, feeds, load_target("ascend910a")).outputs["z"].astype(np.float32)
    # test_precision's bound: 8 units of fp16 roundoff relative to the largest output
    assert np.max(np.abs(got - want)) <= 8 * 2.0**-11 * np.max(np.abs(want))


def test_other_clip_bounds_not_fused() -> None:
    model, _ = _model("3x3_bias", "relu6", lo=0.0, hi=4.0)
    module, weights = import_onnx(model)
    run_passes(module, parse_pipeline("fuse-conv-activation"), weights)
    assert not any(isinstance(op, nn.FusedOp) for op in module.walk())
