"""TopK lowered to the vector unit (k arg-max rounds), simulated, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ascendir.driver import lower
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from onnx_builders import make_model, run_onnxruntime


def _topk_model(x: np.ndarray, k: int, axis: int = -1, largest: int = 1):
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    return make_model([node], {"x": x}, ["v", "i"], {"k": np.array([k], np.int64)})


@pytest.mark.parametrize(
    "shape,k,axis,largest",
    [
        ((16, 8), 2, -1, 1),      # Mixtral routing
        ((3, 5, 40), 7, -1, 1),
        ((4, 9), 3, -1, 0),       # smallest
        ((6, 10, 3), 4, 1, 1),    # middle axis: transposed there and back
        ((130, 8), 8, -1, 1),     # k = C, more rows than one tile
    ],
)
def test_topk_matches_onnxruntime(shape, k, axis, largest) -> None:
    x = np.random.default_rng(sum(shape) + k).standard_normal(shape).astype(np.float32)
    model = _topk_model(x, k, axis, largest)
    want = run_onnxruntime(model, {"x": x})
    module, weights = import_onnx(model)
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, {"x": x}, load_target("ascend910b2")).outputs
    np.testing.assert_array_equal(got["v"], want["v"])
    np.testing.assert_array_equal(got["i"], want["i"])
    assert got["i"].dtype == np.int64


def test_topk_ties_take_the_lower_index_first() -> None:
    x = np.array([[1, 3, 3, 2, 3], [0, 0, 0, 0, 0]], np.float32)
    model = _topk_model(x, 3)
    module, weights = import_onnx(model)
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, {"x": x}, load_target("ascend910b2")).outputs
    np.testing.assert_array_equal(got["i"], [[1, 2, 4], [0, 1, 2]])
    np.testing.assert_array_equal(got["v"], [[3, 3, 3], [0, 0, 0]])


def test_topk_row_of_ninf_matches_onnxruntime() -> None:
    # was indices [0 0] and values [-inf, -3.4e38]: a removed element (set to lowest-finite)
    # outranked the -inf ones left
    x = np.array([[-np.inf] * 4, [1.0, -np.inf, -np.inf, 2.0]], np.float32)
    model = _topk_model(x, 3)
    want = run_onnxruntime(model, {"x": x})
    module, weights = import_onnx(model)
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, {"x": x}, load_target("ascend910b2")).outputs
    np.testing.assert_array_equal(got["v"], want["v"])
    np.testing.assert_array_equal(got["i"], want["i"])


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_topk_nan_ranks_above_every_number(largest: int, dtype) -> None:
    """onnxruntime's order: NaN before +inf among the largest, after every number among the
    smallest, ties by index. A NaN used to make every value NaN and every index C (out of range)."""
    x = np.array([[1.0, np.nan, 3.0, -np.inf, 2.0, np.nan, 0.5, np.inf],
                  [np.nan] * 8,
                  [np.inf, np.nan, -np.inf, np.nan, 0.0, np.inf, -np.inf, 1.0]], dtype)
    model = _topk_model(x, 6, largest=largest)
    want = run_onnxruntime(model, {"x": x})
    module, weights = import_onnx(model)
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, {"x": x}, load_target("ascend910b2")).outputs
    np.testing.assert_array_equal(got["i"], want["i"])
    np.testing.assert_array_equal(got["v"], want["v"])  # NaN where NaN
