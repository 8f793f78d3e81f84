"""fold-batchnorm: Conv + BatchNormalization folded into the conv's weights, verified
numerically (nn reference before/after, lowered + simulated vs onnxruntime)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from ascendir.session import Session, make_context
from ascendir.driver import compile_model, lower
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.transforms.nn.fold_batchnorm import FoldBatchNorm
from onnx_builders import make_model, run_onnxruntime

DATA = Path(__file__).parent / "data"


def _conv_bn_model(conv_bias: bool, extra_use: bool = False, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    init = {
        "w": rng.standard_normal((6, 3, 3, 3)).astype(np.float32),
        "scale": rng.uniform(0.5, 2.0, 6).astype(np.float32),
        "B": rng.standard_normal(6).astype(np.float32),
        "mean": rng.standard_normal(6).astype(np.float32),
        "var": rng.uniform(0.1, 3.0, 6).astype(np.float32),
    }
    conv_in = ["x", "w"]
    if conv_bias:
        init["b"] = rng.standard_normal(6).astype(np.float32)
        conv_in.append("b")
    nodes = [
        helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "B", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    outputs = ["y"]
    if extra_use:  # the conv output is also a graph output: folding would compute it twice
        outputs.append("c")
    return make_model(nodes, {"x": x}, outputs, init), x


def _fold(module, weights) -> None:
    FoldBatchNorm().apply(make_context(Session(weights=weights)), module)
    module.verify()


def _counts(module) -> Counter:
    return Counter(op.name for op in module.walk())


@pytest.mark.parametrize("conv_bias", [False, True])
def test_fold_removes_the_batchnorm_and_keeps_the_numbers(conv_bias: bool) -> None:
    model, x = _conv_bn_model(conv_bias)
    module, weights = import_onnx(model)
    before = run_nn(module, weights, {"x": x})
    assert _counts(module)["nn.mul"] == 1 and _counts(module)["nn.add"] == 1
    _fold(module, weights)
    counts = _counts(module)
    assert counts["nn.mul"] == 0 and counts["nn.add"] == 0 and counts["nn.conv2d"] == 1
    after = run_nn(module, weights, {"x": x})
    np.testing.assert_allclose(after["y"], before["y"], rtol=1e-5, atol=1e-5)
    # and through the whole compiler, against onnxruntime
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, {"x": x}, load_target("ascend910b2")).outputs["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})["y"], rtol=1e-3, atol=1e-4)


def test_no_fold_when_the_conv_output_has_another_user() -> None:
    model, _ = _conv_bn_model(False, extra_use=True)
    module, weights = import_onnx(model)
    _fold(module, weights)
    assert _counts(module)["nn.mul"] == 1


def test_no_fold_without_a_visible_weight_store() -> None:
    model, _ = _conv_bn_model(False)
    module, _ = import_onnx(model)
    FoldBatchNorm().apply(make_context(), module)
    assert _counts(module)["nn.mul"] == 1


def test_resnet_small_batchnorms_fold_at_O2() -> None:
    module, _ = compile_model(DATA / "resnet_small" / "model.onnx", emit="nn", opt_level="O2")
    counts = _counts(module)
    assert counts["nn.conv2d"] == 12 and counts["nn.mul"] == 0, counts
