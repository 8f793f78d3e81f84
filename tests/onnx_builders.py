"""Tiny ONNX models built with onnx.helper, and the check every frontend op test makes: the
imported nn module run by `run_nn` equals onnxruntime on the same inputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from xdsl.dialects.builtin import ModuleOp

from ascendir.dialects import nn
from ascendir.frontends.onnx import import_onnx
from ascendir.interpreter.exec.nn_reference import run_nn


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, np.ndarray],
    outputs: Iterable[str],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    extra_opsets: Mapping[str, int] | None = None,
) -> onnx.ModelProto:
    """A one-graph model; `inputs` gives example arrays (their dtype and shape become the input
    types); output types come from ONNX shape inference (left empty where it cannot infer)."""
    graph = helper.make_graph(
        list(nodes),
        "test",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for name, a in inputs.items()
        ],
        [onnx.ValueInfoProto(name=name) for name in outputs],
        initializer=[numpy_helper.from_array(np.asarray(a), name) for name, a in (initializers or {}).items()],
    )
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10  # onnxruntime reads IR ≤ 11; helper writes the newest
    return onnx.shape_inference.infer_shapes(model)


def run_onnxruntime(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, dict(feeds))))


def compute_ops(module: ModuleOp) -> list[str]:
    """Names of the nn ops that compute (everything but nn.constant / nn.weight)."""
    return [
        op.name for op in module.walk()
        if op.name.startswith("nn.") and not isinstance(op, (nn.ConstantOp, nn.WeightOp))
    ]


def check_against_onnxruntime(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    exact: bool = False,
    expect_ops: Iterable[str] = (),
) -> ModuleOp:
    """Import `model`, run it with `run_nn` and compare every output with onnxruntime.

    `exact` compares bit for bit (integer, boolean and data-movement results); `expect_ops` are nn
    op names the module must contain (the node was converted, not folded or dropped).
    """
    onnx.checker.check_model(model)
    expected = run_onnxruntime(model, feeds)
    module, weights = import_onnx(model)
    module.verify()
    got = run_nn(module, weights, feeds)
    assert set(got) == set(expected)
    for name, want in expected.items():
        assert got[name].dtype == want.dtype, f"{name}: {got[name].dtype} != {want.dtype}"
        assert got[name].shape == want.shape, f"{name}: {got[name].shape} != {want.shape}"
        if exact:
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], want, rtol=rtol, atol=atol, err_msg=name)
    ops = compute_ops(module)
    for op_name in expect_ops:
        assert op_name in ops, f"{op_name} missing from {ops}"
    return module
