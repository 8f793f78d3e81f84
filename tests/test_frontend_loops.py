"""Loop and Scan unrolled at import (frontends/onnx/converters/control_flow.py) against
onnxruntime: loop-carried values, scan outputs, a condition the body computes, scan directions
and axes, runtime tensors flowing through the body; and the one-line errors of loops whose
iterations are not known at import."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from tests.onnx_builders import check_against_onnxruntime, make_model

F = TensorProto.FLOAT


def _loop_body(with_cond_from_counter: bool) -> onnx.GraphProto:
    """(i, cond, acc) -> (cond', acc @ w + x * i, acc as scan output); cond' = i < 2 or cond."""
    nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=F),
        helper.make_node("MatMul", ["acc", "w"], ["mm"]),
        helper.make_node("Mul", ["x", "i_f"], ["xi"]),
        helper.make_node("Add", ["mm", "xi"], ["acc_out"]),
        helper.make_node("Identity", ["acc"], ["scan_out"]),
    ]
    if with_cond_from_counter:
        nodes.append(helper.make_node("Less", ["i", "two"], ["cond_out"]))
    else:
        nodes.append(helper.make_node("Identity", ["cond"], ["cond_out"]))
    return helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", F, [2, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", F, [2, 4]),
         helper.make_tensor_value_info("scan_out", F, [2, 4])],
        initializer=[helper.make_tensor("two", TensorProto.INT64, [], [2])],
    )


def _type_outputs(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> None:
    """Give the graph outputs the types ONNX shape inference leaves open for a Loop."""
    del model.graph.output[:]
    model.graph.output.extend(helper.make_tensor_value_info(n, F, s) for n, s in shapes.items())


@pytest.mark.parametrize("counter_cond", [False, True])
def test_loop_carried_and_scan_outputs(counter_cond: bool):
    """Four iterations (trip count 4), or three (the body's `i < 2` ends it): the runtime input x
    and the weight w are read by the body from the outer graph."""
    rng = np.random.default_rng(0)
    loop = helper.make_node("Loop", ["M", "c", "acc0"], ["acc_final", "accs"], body=_loop_body(counter_cond))
    model = make_model([loop], {"x": rng.standard_normal((2, 4)).astype(np.float32),
                                "acc0": rng.standard_normal((2, 4)).astype(np.float32)},
                       ["acc_final", "accs"], initializers={"M": np.array(4, np.int64), "c": np.array(True),
                                                          "w": (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)})
    _type_outputs(model, {"acc_final": [2, 4], "accs": [3 if counter_cond else 4, 2, 4]})
    feeds = {"x": rng.standard_normal((2, 4)).astype(np.float32), "acc0": rng.standard_normal((2, 4)).astype(np.float32)}
    module = check_against_onnxruntime(model, feeds, rtol=1e-5, atol=1e-5)
    assert sum(op.name == "nn.matmul" for op in module.walk()) == (3 if counter_cond else 4)


def _scan_model(directions_in, directions_out, axes_in, axes_out):
    """state s [3]; scan input x [5, 3] (or [3, 5] with axis 1): s' = s + x_t, y_t = s' * x_t."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xt"], ["s_out"]), helper.make_node("Mul", ["s_out", "xt"], ["yt"])],
        "scan_body",
        [helper.make_tensor_value_info("s", F, [3]), helper.make_tensor_value_info("xt", F, [3])],
        [helper.make_tensor_value_info("s_out", F, [3]), helper.make_tensor_value_info("yt", F, [3])],
    )
    scan = helper.make_node("Scan", ["s0", "x"], ["s_final", "y"], body=body, num_scan_inputs=1,
                            scan_input_directions=directions_in, scan_output_directions=directions_out,
                            scan_input_axes=axes_in, scan_output_axes=axes_out)
    x = np.arange(15, dtype=np.float32).reshape((5, 3) if axes_in == [0] else (3, 5)) / 7
    return make_model([scan], {"s0": np.zeros(3, np.float32), "x": x}, ["s_final", "y"]), {"s0": np.ones(3, np.float32), "x": x}


@pytest.mark.parametrize("din, dout, ain, aout", [([0], [0], [0], [0]), ([1], [0], [0], [1]), ([0], [1], [1], [0]),
                                                  ([1], [1], [1], [-1])])
def test_scan_directions_and_axes(din, dout, ain, aout):
    model, feeds = _scan_model(din, dout, ain, aout)
    check_against_onnxruntime(model, feeds, rtol=1e-6, atol=1e-6)


def test_runtime_trip_count_names_the_input():
    loop = helper.make_node("Loop", ["M", "", "acc0"], ["acc_final", "accs"], body=_loop_body(False))
    model = make_model([loop], {"M": np.array(3, np.int64), "x": np.ones((2, 4), np.float32), "acc0": np.ones((2, 4), np.float32)},
                       ["acc_final"], initializers={"w": np.eye(4, dtype=np.float32)})
    with pytest.raises(AscendirError, match=r"^Loop .*the trip count \(input 0, 'M'\) depends on runtime values"):
        import_onnx(model)


def test_unbounded_loop_is_refused(monkeypatch):
    from ascendir.frontends.onnx.converters import control_flow

    monkeypatch.setattr(control_flow, "MAX_UNROLL", 16)
    loop = helper.make_node("Loop", ["M", "", "acc0"], ["acc_final", "accs"], body=_loop_body(False))
    model = make_model([loop], {"x": np.ones((2, 4), np.float32), "acc0": np.ones((2, 4), np.float32)}, ["acc_final"],
                       initializers={"M": np.array(10**9, np.int64), "w": np.eye(4, dtype=np.float32)})
    with pytest.raises(AscendirError, match=r"runs more than 16 iterations"):
        import_onnx(model)
