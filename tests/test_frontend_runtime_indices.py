"""ScatterElements and GatherND with indices known only at run time (the MoE routers' forms:
DeepSeek-V3's group mask, the dynamo export's gather of each routed token's expert weights),
against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnx_builders import check_against_onnxruntime, make_model


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_scatter_elements_runtime_indices(axis: int, reduction: str) -> None:
    rng = np.random.default_rng(3)
    data = rng.standard_normal((4, 6)).astype(np.float32)
    ishape = (4, 3) if axis != 0 else (3, 6)
    dim = data.shape[axis]
    # duplicates and negative indices: later writes must win / combine in order
    idx = rng.integers(-dim, dim, size=ishape).astype(np.int64)
    idx.flat[1] = idx.flat[0]
    upd = rng.standard_normal(ishape).astype(np.float32)
    model = make_model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=axis, reduction=reduction)],
                       {"d": data, "i": idx, "u": upd}, ["y"], opset=18)
    check_against_onnxruntime(model, {"d": data, "i": idx, "u": upd}, exact=reduction != "add",
                              expect_ops=["nn.where"])


def test_scatter_elements_group_mask() -> None:
    """DeepSeek-V3's `zeros_like(group_scores).scatter_(1, group_idx, 1)` from a TopK."""
    rng = np.random.default_rng(5)
    scores = rng.standard_normal((8, 4)).astype(np.float32)
    nodes = [
        helper.make_node("TopK", ["s", "k"], ["v", "i"], axis=1),
        helper.make_node("ConstantOfShape", ["shape"], ["z"], value=helper.make_tensor("", 1, [1], [0.0])),
        helper.make_node("Expand", ["one", "shape_i"], ["ones"]),
        helper.make_node("ScatterElements", ["z", "i", "ones"], ["y"], axis=1),
    ]
    model = make_model(nodes, {"s": scores}, ["y"], initializers={
        "k": np.array([2], np.int64), "shape": np.array([8, 4], np.int64),
        "one": np.array([1.0], np.float32), "shape_i": np.array([8, 2], np.int64)})
    check_against_onnxruntime(model, {"s": scores}, exact=True)


@pytest.mark.parametrize("k", [1, 2])
def test_gather_nd_runtime_indices(k: int) -> None:
    rng = np.random.default_rng(7)
    data = rng.standard_normal((5, 4, 3)).astype(np.float32)
    dims = np.array(data.shape[:k])
    idx = np.stack([rng.integers(-d, d, size=(6,)) for d in dims], axis=-1).astype(np.int64)
    model = make_model([helper.make_node("GatherND", ["d", "i"], ["y"])], {"d": data, "i": idx}, ["y"])
    check_against_onnxruntime(model, {"d": data, "i": idx}, exact=True, expect_ops=["nn.gather"])
