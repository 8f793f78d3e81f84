"""If: folded when its condition is known at import, both branches and an nn.where otherwise;
an unsupported op inside a branch is reported by its own name (issue 19: the If alone was)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from onnx_builders import check_against_onnxruntime, compute_ops, make_model


def _branch(op: str, out: str, **attrs):
    y = helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 3])
    return helper.make_graph([helper.make_node(op, ["x", "x"] if op in ("Add", "Mul") else ["x"], [out], **attrs)],
                             f"{op}_branch", [], [y])


def _if_model(cond_input: bool, else_op: str = "Mul"):
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    node = helper.make_node("If", ["c"], ["y"], then_branch=_branch("Add", "t"), else_branch=_branch(else_op, "e"))
    inputs = {"x": x, "c": np.array(True)} if cond_input else {"x": x}
    inits = None if cond_input else {"c": np.array(False)}
    return make_model([node], inputs, ["y"], inits, opset=19), inputs


def test_known_condition_imports_the_selected_branch_only() -> None:
    model, feeds = _if_model(cond_input=False)
    module = check_against_onnxruntime(model, feeds)
    assert compute_ops(module) == ["nn.mul"]


@pytest.mark.parametrize("cond", [True, False])
def test_runtime_condition_selects_with_where(cond: bool) -> None:
    model, feeds = _if_model(cond_input=True)
    module = check_against_onnxruntime(model, {**feeds, "c": np.array(cond)})
    assert sorted(compute_ops(module)) == ["nn.add", "nn.mul", "nn.where"]


def test_unsupported_op_inside_a_branch_is_named() -> None:
    model, _ = _if_model(cond_input=True, else_op="Bernoulli")  # a valid node no converter takes
    with pytest.raises(AscendirError, match=r"unsupported ONNX ops: Bernoulli \(1 node"):
        import_onnx(model)
