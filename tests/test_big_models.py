"""Big models: ONNX external data is memory-mapped, never copied whole; `--shape-only` compiles
and simulates timing-only without reading a weight byte (a truncated or sparse data file is
fine); wrong external data fails with one line naming the initializer and the file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from ascendir.api.cli import main
from ascendir.driver import compile_model
from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate


def _mlp_with_external_data(folder: Path, hidden: int = 64, inner: int = 128) -> tuple[Path, Path]:
    """x[2, hidden] @ w1[hidden, inner] -> Relu -> @ w2[inner, hidden]; w1/w2 in `weights.bin`."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((hidden, inner)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((inner, hidden)).astype(np.float32), "w2")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, hidden])],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "model.onnx"
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    return path, folder / "weights.bin"


def test_external_data_is_memory_mapped_and_matches_onnxruntime(tmp_path: Path) -> None:
    path, _ = _mlp_with_external_data(tmp_path)
    module, weights = compile_model(path, "ascend910b2")
    names = list(weights)
    assert len(names) == 2
    for n in names:  # both read in place, at their own offsets: no private copy
        arr = weights[n]
        assert isinstance(arr, np.memmap) or isinstance(arr.base, np.memmap), type(arr)
        assert not arr.flags.writeable
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = simulate(module, weights, {"x": x}, load_target("ascend910b2")).outputs["y"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_truncated_external_data_fails_naming_initializer_and_file(tmp_path: Path) -> None:
    path, data = _mlp_with_external_data(tmp_path)
    os.truncate(data, 100)
    module, weights = compile_model(path, "ascend910b2")  # compiling reads no weight
    with pytest.raises(AscendirError, match=r"initializer 'w\d'.*'weights.bin'.*truncated"):
        simulate(module, weights, {"x": np.zeros((2, 64), np.float32)}, load_target("ascend910b2"))


def test_shape_only_compiles_and_runs_with_truncated_data(tmp_path: Path) -> None:
    path, data = _mlp_with_external_data(tmp_path)
    full = simulate(*compile_model(path, "ascend910b2"), {}, load_target("ascend910b2"), timing_only=True)
    os.truncate(data, 0)
    out = tmp_path / "out.mlir"
    r = CliRunner().invoke(main, ["compile", str(path), "--shape-only", "-o", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "ascend.mmad" in out.read_text()
    assert not (tmp_path / "out.weights.npz").exists()
    report = tmp_path / "report.json"
    r = CliRunner().invoke(main, ["run", str(path), "--shape-only", "--report", str(report)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    import json

    assert json.loads(report.read_text())["total_cycles"] == full.report["total_cycles"]
    # without --shape-only the missing bytes are an error, not zeros
    r = CliRunner().invoke(main, ["run", str(path)], catch_exceptions=False)
    assert r.exit_code == 2 and "truncated" in r.output, r.output


def test_shape_only_needs_no_data_file_and_sparse_file_costs_no_disk(tmp_path: Path) -> None:
    path, data = _mlp_with_external_data(tmp_path)
    data.unlink()
    module, weights = import_onnx(path, shape_only=True)
    assert all(weights[n].strides == (0, 0) for n in weights)
    with pytest.raises(AscendirError, match="no such file"):
        import_onnx(path)[1][next(iter(import_onnx(path)[1]))]
    # a sparse file (holes, as benchmarks/llama7b_shape_only.py writes) maps without reading
    with open(data, "wb") as f:
        f.truncate(64 * 128 * 4 * 2)
    w = import_onnx(path)[1]
    assert all(float(np.abs(w[n]).max()) == 0.0 for n in w)


def test_shape_only_reads_small_integer_initializers(tmp_path: Path) -> None:
    """A Reshape target shape stored as external data is still read: import needs it."""
    shape = numpy_helper.from_array(np.array([4, 32], np.int64), "shape")
    w = numpy_helper.from_array(np.ones((32, 8), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [shape, w],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path),
              save_as_external_data=True, location="d.bin", size_threshold=0)
    module, weights = compile_model(path, "ascend910b2", shape_only=True)
    assert "4x32" in str(module)


def _weights_computed_at_import(folder: Path) -> Path:
    """x[2, 32] @ Transpose(wt[16, 32]) (a fold at import) and Gemm(transB=1, beta=0.5) over
    external weights: the importer computes a transposed and a scaled copy of weights."""
    rng = np.random.default_rng(3)
    wt = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "wt")
    b = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "b")
    c = numpy_helper.from_array(rng.standard_normal((2, 8)).astype(np.float32), "c")
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["wt"], ["w"], perm=[1, 0]), helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Gemm", ["h", "b", "c"], ["y"], transB=1, beta=0.5)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [wt, b, c],
    )
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path),
              save_as_external_data=True, location="d.bin", size_threshold=0)
    return path


def test_shape_only_reads_no_weight_the_importer_computes_on(tmp_path: Path) -> None:
    path = _weights_computed_at_import(tmp_path)
    (tmp_path / "d.bin").unlink()  # any read would fail with "no such file"
    module, weights = compile_model(path, "ascend910b2", shape_only=True)
    assert len(weights) == 3
    for n in weights:  # the transposed and scaled copies are zero-stride zeros too
        assert not any(weights[n].strides), (n, weights[n].strides)


def test_weights_computed_at_import_are_lazy_and_exact(tmp_path: Path) -> None:
    path = _weights_computed_at_import(tmp_path)
    module, weights = compile_model(path, "ascend910b2")
    data = tmp_path / "d.bin"
    onnx.save(onnx.load(str(path)), str(tmp_path / "inline.onnx"))  # the weights, inline
    original = data.read_bytes()
    os.truncate(data, 0)  # nothing was read while compiling: reading now fails
    with pytest.raises(AscendirError, match="truncated"):
        weights[next(iter(weights))]
    data.write_bytes(original)
    x = np.random.default_rng(4).standard_normal((2, 32)).astype(np.float32)
    want = ort.InferenceSession(str(tmp_path / "inline.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = simulate(module, weights, {"x": x}, load_target("ascend910b2")).outputs["y"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
