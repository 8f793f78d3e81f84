"""Bad inputs to the ONNX frontend: each raises one AscendirError with a one-line message naming
the file, input, node or op and the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from ascendir.interpreter.exec.nn_reference import run_nn
from onnx_builders import make_model

DATA = Path(__file__).parent / "data"


def import_error(model, **kwargs) -> str:
    with pytest.raises(AscendirError) as info:
        import_onnx(model, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_protobuf(tmp_path: Path, keep: float) -> None:
    data = (DATA / "mlp_small" / "model.onnx").read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * keep)])
    message = import_error(path)
    assert str(path) in message


def test_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"this is not an onnx model at all")
    assert str(path) in import_error(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.onnx"
    assert str(path) in import_error(path)


def test_unsupported_ops_are_listed_together() -> None:
    x = np.zeros((2, 3), np.float32)
    nodes = [
        helper.make_node("FooOp", ["x"], ["a"], name="node_12"),
        helper.make_node("Relu", ["a"], ["b"], name="relu_after_foo"),  # downstream: skipped, not reported
        helper.make_node("FooOp", ["b"], ["c"], name="node_13"),
        helper.make_node("BarOp", ["x"], ["d"], name="/x/Bar"),
        helper.make_node("FooOp", ["d"], ["e"], name="node_14"),
        helper.make_node("Add", ["c", "e"], ["y"]),
    ]
    message = import_error(make_model(nodes, {"x": x}, ["y"]))
    assert message == "unsupported ONNX ops: FooOp (3 nodes, first 'node_12'), BarOp (1 node, first '/x/Bar')"


def test_non_default_domain_is_never_mapped_to_the_default_op() -> None:
    x = np.zeros((2, 3), np.float32)
    nodes = [helper.make_node("Gelu", ["x"], ["y"], name="ms_gelu", domain="com.microsoft")]
    model = make_model(nodes, {"x": x}, ["y"], extra_opsets={"com.microsoft": 1})
    assert import_error(model) == "unsupported ONNX ops: com.microsoft.Gelu (1 node, first 'ms_gelu')"


def _dynamic_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["input_ids"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, [1, "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_dynamic_dim_without_pin_names_input_and_dim() -> None:
    message = import_error(_dynamic_model())
    assert "input 'input_ids'" in message and "dim 1 ('seq')" in message
    assert "--input-shape input_ids=1x<seq>" in message


def test_dynamic_dim_with_pin_imports() -> None:
    module, weights = import_onnx(_dynamic_model(), input_shapes={"input_ids": (1, 8)})
    module.verify()
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    np.testing.assert_array_equal(run_nn(module, weights, {"input_ids": x})["y"], np.maximum(x, 0))


def test_pin_of_unknown_input() -> None:
    message = import_error(_dynamic_model(), input_shapes={"input_ids": (1, 8), "tokens": (1, 8)})
    assert "'tokens'" in message and "input_ids" in message


def test_pin_contradicting_a_static_dim() -> None:
    message = import_error(_dynamic_model(), input_shapes={"input_ids": (2, 8)})
    assert "input 'input_ids' dim 0" in message


def test_pin_with_wrong_rank() -> None:
    assert "rank" in import_error(_dynamic_model(), input_shapes={"input_ids": (8,)})


def test_runtime_dependent_shape_names_the_node() -> None:
    x, s = np.zeros((2, 3), np.float32), np.array([3, 2], np.int64)
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape_by_input")]
    message = import_error(make_model(nodes, {"x": x, "s": s}, ["y"]))
    assert message.startswith("Reshape 'reshape_by_input': shape (input 1, 's') depends on runtime values")


def test_bad_operand_shapes_name_the_node() -> None:
    a, b = np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], {"a": a, "b": b}, ["y"])
    assert import_error(model).startswith("MatMul 'mm': ")


def test_undefined_node_input() -> None:
    x = np.zeros((2, 3), np.float32)
    model = make_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")], {"x": x}, ["y"])
    assert import_error(model) == "Add 'add': input 'ghost' is not produced by any node (truncated file?)"


def test_run_nn_rejects_wrong_inputs() -> None:
    module, weights = import_onnx(_dynamic_model(), input_shapes={"input_ids": (1, 4)})
    with pytest.raises(AscendirError, match="missing input 'input_ids'"):
        run_nn(module, weights, {})
    with pytest.raises(AscendirError, match="expected float32"):
        run_nn(module, weights, {"input_ids": np.zeros((1, 4), np.int64)})


def test_unknown_op_on_constants_is_reported_not_evaluated() -> None:
    x = np.zeros((2, 3), np.float32)
    nodes = [
        helper.make_node("FooOp", ["w"], ["f"], name="foo_on_weight"),
        helper.make_node("Add", ["x", "f"], ["y"], name="add"),
    ]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"w": np.ones((2, 3), np.float32)})
    assert import_error(model) == "unsupported ONNX ops: FooOp (1 node, first 'foo_on_weight')"


def test_fold_only_op_on_runtime_values() -> None:
    n = np.array([4], np.int64)
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["y"], name="cos")]
    message = import_error(make_model(nodes, {"n": n}, ["y"]))
    assert message.startswith("ConstantOfShape 'cos': its output depends on runtime values")
