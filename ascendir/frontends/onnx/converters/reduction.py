"""Reductions (ReduceMean/Sum/Max/Min/Prod, global pooling) and TopK."""

from __future__ import annotations

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

_REDUCE = {
    "ReduceMean": nn.ReduceMeanOp, "ReduceSum": nn.ReduceSumOp, "ReduceMax": nn.ReduceMaxOp,
    "ReduceMin": nn.ReduceMinOp, "ReduceProd": nn.ReduceProdOp,
}
# The opset from which `axes` is an input instead of an attribute.
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_AXES_INPUT_SINCE_DEFAULT = 18


@converts(*_REDUCE)
def convert_reduce(node: NodeContext) -> list[Value]:
    """Reduce* → nn.reduce_* with sorted non-negative axes; no axes reduces all dims, or
    forwards the input if noop_with_empty_axes. Axes are an input from opset 13 (ReduceSum) /
    18 (the others), an attribute before."""
    rank = len(node.shape(0))
    noop_with_empty_axes = False
    if node.opset >= _AXES_INPUT_SINCE.get(node.op_type, _AXES_INPUT_SINCE_DEFAULT):
        axes = node.require_const(1, "axes").tolist() if node.has_input(1) else []
        noop_with_empty_axes = bool(node.attr("noop_with_empty_axes", 0))
    else:
        axes = list(node.attr("axes", []))
    if not axes:
        if noop_with_empty_axes:
            return [node.input(0)]
        axes = list(range(rank))
    keepdims = bool(node.attr("keepdims", 1))
    return [node.emit(_REDUCE[node.op_type](node.value(0), node.axes(axes, rank), keepdims))]


@converts("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(node: NodeContext) -> list[Value]:
    """GlobalAveragePool/GlobalMaxPool → nn.reduce_mean/max over the spatial dims, kept."""
    rank = len(node.shape(0))
    if rank < 3:
        raise node.error(f"expects an N x C x spatial... input, got shape {list(node.shape(0))}")
    op = nn.ReduceMeanOp if node.op_type == "GlobalAveragePool" else nn.ReduceMaxOp
    return [node.emit(op(node.value(0), list(range(2, rank)), True))]


@converts("TopK")
def convert_topk(node: NodeContext) -> list[Value]:
    """TopK with constant k → nn.topk (values, i64 indices), sorted."""
    shape = node.shape(0)
    axis = node.axis(node.attr("axis", -1), len(shape))
    # `sorted=0` leaves the order unspecified, so sorted is valid.
    k = int(node.require_const(1, "k").reshape(-1)[0])
    if not 0 <= k <= shape[axis]:
        raise node.error(f"k={k} is out of range for dim {axis} of shape {list(shape)}")
    op = nn.TopKOp(node.value(0), k, axis, bool(node.attr("largest", 1)))
    node.state.emit(op)
    return [op.values, op.indices]
