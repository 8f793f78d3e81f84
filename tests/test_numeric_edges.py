"""Edge values (NaN, ±inf, huge and negative arguments) through the ONNX decompositions,
lowered and simulated, against onnxruntime; plus the ordinary range of the same ops."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ascendir.driver import lower
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from onnx_builders import make_model, run_onnxruntime


def _both(node, feeds: dict[str, np.ndarray], outputs: list[str], inits=None) -> tuple[dict, dict]:
    model = make_model([node], feeds, outputs, inits, opset=18)
    want = run_onnxruntime(model, feeds)
    module, weights = import_onnx(model)
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, feeds, load_target("ascend910b2")).outputs
    return got, want


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_max_min_skip_nan_like_onnxruntime(op) -> None:
    # was 5 (the axis size, out of range) for both; onnxruntime skips the NaN: 4 and 3
    x = np.array([[1.0, 2.0, np.nan, 0.5, 3.0], [np.nan] * 5], np.float32)
    got, want = _both(helper.make_node(op, ["x"], ["y"], axis=1), {"x": x}, ["y"])
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_max_min_ordinary_range(op) -> None:
    x = np.random.default_rng(3).standard_normal((6, 9)).astype(np.float32)
    got, want = _both(helper.make_node(op, ["x"], ["y"], axis=1, select_last_index=1), {"x": x}, ["y"])
    np.testing.assert_array_equal(got["y"], want["y"])


def test_sign_keeps_nan() -> None:
    # Sign(NaN) was 0
    x = np.array([np.nan, -0.0, 2.0, -3.0, np.inf, -np.inf], np.float32)
    got, want = _both(helper.make_node("Sign", ["x"], ["y"]), {"x": x}, ["y"])
    np.testing.assert_array_equal(got["y"], want["y"])


def test_reduce_log_sum_exp_of_all_ninf_is_ninf() -> None:
    # was NaN (-inf - -inf in the max shift)
    x = np.array([[-np.inf, -np.inf], [1.0, 2.0], [-np.inf, 3.0]], np.float32)
    node = helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0)
    got, want = _both(node, {"x": x}, ["y"], {"axes": np.array([1], np.int64)})
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    assert got["y"][0] == -np.inf


def test_asinh_negative_and_huge() -> None:
    # -1e4 was -inf and -1e3 off by 3e-3 (x + sqrt(x² + 1) cancels); 1e20 overflowed x²
    x = np.array([-10.0, -100.0, -1e3, -1e4, -1e20, 1e20, 3e38, -3e38, np.nan], np.float32)
    got, want = _both(helper.make_node("Asinh", ["x"], ["y"]), {"x": x}, ["y"])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)


def test_acosh_huge() -> None:
    # 1e20 and 3e38 were inf (x² overflows past 1.8e19)
    x = np.array([1e10, 1e20, 3e38, 1.0, 1.0001, 0.5], np.float32)
    got, want = _both(helper.make_node("Acosh", ["x"], ["y"]), {"x": x}, ["y"])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Asinh", "Acosh"])
def test_asinh_acosh_ordinary_range(op) -> None:
    x = np.random.default_rng(5).uniform(-20, 20, (8, 16)).astype(np.float32)
    if op == "Acosh":
        x = np.abs(x) + 1
    got, want = _both(helper.make_node(op, ["x"], ["y"]), {"x": x}, ["y"])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op, fn", [("Asinh", np.arcsinh), ("Atanh", np.arctanh)])
def test_asinh_atanh_keep_relative_precision(op: str, fn):
    """Within 4 f32 ulps of the float64 function over tiny, random and (Asinh) huge inputs,
    lowered and simulated. log(|x| + sqrt(x² + 1)) lost all digits below 1e-7 (asinh(1e-8) was 0)
    and log((1 + x) / (1 - x)) likewise: both go through log1p now."""
    rng = np.random.default_rng(1)
    x = np.concatenate([np.array([1e-30, -1e-20, 1e-8, -3e-7, 2e-4], np.float32),
                        rng.uniform(-0.9999, 0.9999, 500).astype(np.float32)])
    if op == "Asinh":
        x = np.concatenate([x, (10.0 ** rng.uniform(-38, 38, 300) * rng.choice([-1, 1], 300)).astype(np.float32)])
    module, weights = import_onnx(make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"]))
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, {"x": x}, "ascend910b2").outputs["y"].astype(np.float64)
    want = fn(x.astype(np.float64))
    assert np.max(np.abs(got - want) / np.abs(want)) <= 4 * np.finfo(np.float32).eps
