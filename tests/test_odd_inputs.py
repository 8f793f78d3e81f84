"""Odd inputs end to end through `ascendir run` against onnxruntime: pinned dynamic dims (and the
error without a pin), ops of other domains, empty and rank-0 tensors, negative Gather indices,
rank-mismatched broadcasting, and opset < 13 models (upgraded to 13 with a note on stderr)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from cli_helpers import run_cli as _run

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(tmp: Path, nodes, inputs, outputs, inits=(), opset: int = 17, extra_opsets=()) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    path = tmp / "model.onnx"
    onnx.save(model, str(path))
    return path



def _run_vs_ort(tmp: Path, path: Path, feeds: dict[str, np.ndarray], *extra: str, rtol=1e-5, atol=1e-6) -> object:
    """`ascendir run` on `feeds`; every output equals onnxruntime's (same shape and dtype)."""
    np.savez(tmp / "in.npz", **feeds)
    r = _run("run", path, "--inputs", tmp / "in.npz", "--outputs", tmp / "out.npz", *extra)
    assert r.exit_code == 0, r.output
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    with np.load(tmp / "out.npz") as got:
        assert set(got.files) == set(want)
        for k, w in want.items():
            assert got[k].shape == w.shape and got[k].dtype == w.dtype, (k, got[k].shape, w.shape, got[k].dtype)
            np.testing.assert_allclose(got[k], w, rtol=rtol, atol=atol, err_msg=k)
    return r


def test_input_shape_pins_and_error_names_input_and_dim(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32), "w")
    path = _model(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"])],
                  [helper.make_tensor_value_info("x", F, ["batch", "seq", 8])],
                  [helper.make_tensor_value_info("y", F, ["batch", "seq", 16])], [w])
    r = _run("run", path, "--timing-only")
    assert r.exit_code == 2
    assert "input 'x' has dynamic dims 0 ('batch'), 1 ('seq')" in r.output and "--input-shape x=" in r.output, r.output
    r = _run("run", path, "--timing-only", "--input-shape", "x=2x3x9")
    assert r.exit_code == 2 and "input 'x' dim 2 is 8 in the model but pinned to 9" in r.output, r.output
    x = np.random.default_rng(1).standard_normal((2, 5, 8)).astype(np.float32)
    _run_vs_ort(tmp_path, path, {"x": x}, "--input-shape", "x=2x5x8", rtol=1e-4, atol=1e-5)


def test_op_of_another_domain_is_unsupported_not_the_default_op(tmp_path: Path) -> None:
    # com.microsoft has its own "Gelu"/"Relu"-named ops; they must never be taken for ai.onnx's
    nodes = [helper.make_node("Relu", ["x"], ["r"], domain="com.example"),
             helper.make_node("Gelu", ["r"], ["y"], domain="com.microsoft")]
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("x", F, [4])], [helper.make_tensor_value_info("y", F, [4])],
                  extra_opsets=[helper.make_opsetid("com.example", 1), helper.make_opsetid("com.microsoft", 1)])
    r = _run("run", path, "--timing-only")
    assert r.exit_code == 2, r.output
    assert "unsupported ONNX ops: com.example.Relu" in r.output and "com.microsoft.Gelu" in r.output, r.output


def test_empty_tensors(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"]),
             helper.make_node("ReduceSum", ["x", "axes"], ["z"], keepdims=0)]
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "b"), numpy_helper.from_array(np.array([0], np.int64), "axes")]
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("x", F, [0, 4])],
                  [helper.make_tensor_value_info("y", F, [0, 4]), helper.make_tensor_value_info("z", F, [4])], inits)
    _run_vs_ort(tmp_path, path, {"x": np.zeros((0, 4), np.float32)})


def test_rank0_tensors(tmp_path: Path) -> None:
    nodes = [helper.make_node("Mul", ["s", "v"], ["y"]), helper.make_node("Add", ["s", "s"], ["t"])]
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("s", F, []), helper.make_tensor_value_info("v", F, [3])],
                  [helper.make_tensor_value_info("y", F, [3]), helper.make_tensor_value_info("t", F, [])])
    _run_vs_ort(tmp_path, path, {"s": np.array(2.5, np.float32), "v": np.array([1, -2, 3], np.float32)})


def test_gather_negative_int64_indices_at_runtime(tmp_path: Path) -> None:
    table = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "table")
    nodes = [helper.make_node("Gather", ["table", "idx"], ["y"], axis=0),
             helper.make_node("Gather", ["x", "idx"], ["z"], axis=1)]
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("idx", I64, [2, 3]), helper.make_tensor_value_info("x", F, [2, 5])],
                  [helper.make_tensor_value_info("y", F, [2, 3, 4]), helper.make_tensor_value_info("z", F, [2, 2, 3])], [table])
    idx = np.array([[-1, 0, -5], [4, -2, 2]], np.int64)
    _run_vs_ort(tmp_path, path, {"idx": idx, "x": np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)})


def test_broadcasting_rank_mismatched_operands(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"]),
             helper.make_node("Where", ["m", "c", "b"], ["w"])]
    ins = [helper.make_tensor_value_info("a", F, [2, 3, 4]), helper.make_tensor_value_info("b", F, [4]),
           helper.make_tensor_value_info("c", F, [3, 1]), helper.make_tensor_value_info("m", TensorProto.BOOL, [1, 1, 3, 1])]
    path = _model(tmp_path, nodes, ins, [helper.make_tensor_value_info("y", F, [2, 3, 4]), helper.make_tensor_value_info("w", F, [1, 1, 3, 4])])
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((2, 3, 4)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32),
             "c": rng.standard_normal((3, 1)).astype(np.float32), "m": np.array([True, False, True]).reshape(1, 1, 3, 1)}
    _run_vs_ort(tmp_path, path, feeds)


def test_opset11_model_is_upgraded_to_13_with_a_note(tmp_path: Path) -> None:
    # opset-11 forms converters do not take: axes as attributes (Unsqueeze, ReduceSum, Squeeze),
    # Split's `split` attribute
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
        helper.make_node("ReduceSum", ["u"], ["r"], axes=[2], keepdims=1),
        helper.make_node("Squeeze", ["r"], ["s"], axes=[0, 2]),
        helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[3, 5]),
        helper.make_node("ReduceSum", ["b"], ["bs"], axes=[1], keepdims=0),
        helper.make_node("Add", ["s", "bs"], ["y"]),
    ]
    path = _model(tmp_path, nodes, [helper.make_tensor_value_info("x", F, [4, 8])],
                  [helper.make_tensor_value_info("y", F, [4]), helper.make_tensor_value_info("a", F, [4, 3])], opset=11)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    r = _run_vs_ort(tmp_path, path, {"x": x}, rtol=1e-5, atol=1e-5)
    notes = [line for line in r.output.splitlines() if line.startswith("note:")]
    assert notes == ["note: model uses opset 11; converted to opset 13 with onnx.version_converter"], r.output
