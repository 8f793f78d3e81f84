"""Reductions (ReduceMean/Sum/Max/Min/Prod, L1/L2/SumSquare/LogSum/LogSumExp, global pooling),
TopK and ArgMax / ArgMin."""

from __future__ import annotations

import numpy as np

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


def _reduce_axes(node: NodeContext) -> tuple[list[int] | None, bool]:
    """(sorted non-negative axes, keepdims) of a Reduce* node; axes None when the node is the
    identity (no axes and noop_with_empty_axes). Axes are an input from opset 13 (ReduceSum) /
    18 (the others), an attribute before; no axes reduces every dim."""
    rank = len(node.shape(0))
    noop_with_empty_axes = False
    if node.opset >= _AXES_INPUT_SINCE.get(node.op_type, _AXES_INPUT_SINCE_DEFAULT):
        arr = node.require_const(1, "axes") if node.has_input(1) else np.zeros(0, np.int64)
        if arr.ndim == 0:  # a 0-d axes input: its 0 would read as "no axes" below
            raise node.error(f"axes must be a 1-D list of integers, got the scalar {arr.item()!r}")
        if arr.ndim != 1:  # (a zero-size 4-D one listed 33 empty lists)
            raise node.error(f"axes must be a 1-D list of integers, got shape {list(arr.shape)}")
        axes = arr.tolist()
        noop_with_empty_axes = bool(node.attr("noop_with_empty_axes", 0))
    else:
        axes = list(node.attr("axes", []))
    keepdims = bool(node.attr("keepdims", 1))
    if not axes:
        return (None if noop_with_empty_axes else list(range(rank))), keepdims
    return node.axes(axes, rank), keepdims


# The value of a reduction over an empty set, as onnxruntime gives it (ReduceMean of nothing is
# 0 there, not NaN); Max / Min of an integer type take the type's lowest / highest value.
_EMPTY_REDUCTION = {
    "ReduceMean": 0.0, "ReduceSum": 0.0, "ReduceProd": 1.0, "ReduceMax": -np.inf, "ReduceMin": np.inf,
    "ReduceL1": 0.0, "ReduceL2": 0.0, "ReduceSumSquare": 0.0, "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf,
}


def _empty_reduction(node: NodeContext, axes: list[int], keepdims: bool) -> Value:
    """The result of reducing a zero-size input over `axes`, known at import: a constant of the
    reduced shape filled with `_EMPTY_REDUCTION` (an empty array when a kept dim is 0), so no
    kernel divides by a count or tile of 0."""
    shape = node.shape(0)
    out = [1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes]
    dtype = node.dtype(0)
    fill = _EMPTY_REDUCTION[node.op_type]
    if dtype.kind in "iub" and not np.isfinite(fill):
        info = np.iinfo(dtype) if dtype.kind != "b" else None
        fill = (info.min if fill < 0 else info.max) if info else fill > 0
    return node.constant(np.full(out, fill, dtype), "empty_reduction")


@converts(*_REDUCE)
def convert_reduce(node: NodeContext) -> list[Value]:
    """Reduce* → nn.reduce_* with sorted non-negative axes (`_reduce_axes`); no axes with
    noop_with_empty_axes forwards the input; a zero-size input gives a constant
    (`_empty_reduction`)."""
    axes, keepdims = _reduce_axes(node)
    if axes is None:
        return [node.input(0)]
    if 0 in node.shape(0):
        return [_empty_reduction(node, axes, keepdims)]
    return [node.emit(_REDUCE[node.op_type](node.value(0), axes, keepdims))]


@converts("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def convert_reduce_composite(node: NodeContext) -> list[Value]:
    """The reductions ONNX defines as functions of ReduceSum, in their definitions' terms:
    ReduceL1 = sum |x|, ReduceL2 = sqrt(sum x²), ReduceSumSquare = sum x², ReduceLogSum =
    log(sum x), ReduceLogSumExp = log(sum exp(x - m)) + m with m the max (the usual shift,
    so large x do not overflow; an empty reduction or a row of all -inf gives -inf as
    onnxruntime: the shift is 0 where the max is -inf).
    With noop_with_empty_axes and no axes only the elementwise part is applied."""
    axes, keepdims = _reduce_axes(node)
    x = node.value(0)
    op = node.op_type
    if axes is None:  # the identity reduction: the elementwise part only
        if op in ("ReduceL2", "ReduceSumSquare"):
            sq = node.emit(nn.MulOp(x, x))
            return [node.emit(nn.SqrtOp(sq)) if op == "ReduceL2" else sq]
        return [node.emit({"ReduceL1": nn.AbsOp, "ReduceLogSum": nn.LogOp}[op](x)) if op != "ReduceLogSumExp" else x]
    if 0 in node.shape(0):
        return [_empty_reduction(node, axes, keepdims)]
    if op == "ReduceLogSumExp":
        m = node.emit(nn.ReduceMaxOp(x, axes, True))
        # A row of all -inf: -inf - -inf is NaN, so shift by 0 there (exp(-inf) = 0, log 0 = -inf).
        finite = node.emit(nn.GreaterOp(m, node.scalar(-np.inf, node.dtype(0))))
        m = node.emit(nn.WhereOp(finite, m, node.scalar(0.0, node.dtype(0))))
        s = node.emit(nn.ReduceSumOp(node.emit(nn.ExpOp(node.emit(nn.SubOp(x, m)))), axes, True))
        y = node.emit(nn.AddOp(node.emit(nn.LogOp(s)), m))
        if not keepdims:
            y = node.emit(nn.ReshapeOp(y, [d for i, d in enumerate(node.shape(0)) if i not in axes]))
        return [y]
    if op == "ReduceL1":
        x = node.emit(nn.AbsOp(x))
    elif op in ("ReduceL2", "ReduceSumSquare"):
        x = node.emit(nn.MulOp(x, x))
    y = node.emit(nn.ReduceSumOp(x, axes, keepdims))
    if op == "ReduceL2":
        y = node.emit(nn.SqrtOp(y))
    elif op == "ReduceLogSum":
        y = node.emit(nn.LogOp(y))
    return [y]


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
    k = int(node.require_scalar(1, "k"))
    if not 0 <= k <= shape[axis]:
        raise node.error(f"k={k} is out of range for dim {axis} of shape {list(shape)}")
    op = nn.TopKOp(node.value(0), k, axis, bool(node.attr("largest", 1)))
    node.state.emit(op)
    return [op.values, op.indices]


@converts("ArgMax", "ArgMin")
def convert_arg_max(node: NodeContext) -> list[Value]:
    """ArgMax / ArgMin → the i64 indices of nn.topk with k = 1 (TopK's tie rule is the lowest
    index, ArgMax's default); select_last_index=1 reverses the axis first and maps the index
    back (n - 1 - i); keepdims=0 drops the axis. NaN is skipped as onnxruntime does (ArgMax of
    [1, nan, 3] is 2): a float NaN becomes -inf for ArgMax, +inf for ArgMin, so the index stays
    in range (an all-NaN row gives 0)."""
    shape = node.shape(0)
    rank = len(shape)
    if rank == 0:
        raise node.error("expects a tensor of rank >= 1, got a scalar")
    axis = node.axis(int(node.attr("axis", 0)), rank)
    n = shape[axis]
    if n == 0:
        raise node.error(f"cannot take the arg{'max' if node.op_type == 'ArgMax' else 'min'} of an empty dim {axis}")
    x = node.value(0)
    dtype = node.dtype(0)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        skip = node.scalar(-np.inf if node.op_type == "ArgMax" else np.inf, dtype)
        x = node.emit(nn.WhereOp(node.emit(nn.EqualOp(x, x)), x, skip))
    last = bool(node.attr("select_last_index", 0))
    if last:
        backwards = np.arange(n - 1, -1, -1, dtype=np.int64)
        x = node.emit(nn.GatherOp(x, node.constant(backwards, "reverse"), axis))
    op = nn.TopKOp(x, 1, axis, node.op_type == "ArgMax")
    node.state.emit(op)
    idx = op.indices
    if last:
        idx = node.emit(nn.SubOp(node.constant(np.array(n - 1, np.int64), "last"), idx))
    if not node.attr("keepdims", 1):
        idx = node.emit(nn.ReshapeOp(idx, [d for i, d in enumerate(shape) if i != axis]))
    return [idx]


@converts("Hardmax")
def convert_hardmax(node: NodeContext) -> list[Value]:
    """Hardmax along `axis` (default -1, opset 13) → 1 where nn.topk's k = 1 index (the first
    maximum, ONNX's tie rule) equals the position along the axis, else 0, in x's type."""
    shape = node.shape(0)
    dtype = node.dtype(0)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise node.error(f"expects a float tensor, got {dtype}")
    if not shape:
        raise node.error("expects a tensor of rank >= 1, got a scalar")
    axis = node.axis(int(node.attr("axis", -1)), len(shape))
    op = nn.TopKOp(node.value(0), 1, axis, True)
    node.state.emit(op)
    positions = np.arange(shape[axis], dtype=np.int64).reshape([shape[axis] if d == axis else 1 for d in range(len(shape))])
    hit = node.emit(nn.EqualOp(op.indices, node.constant(positions, "positions")))
    return [node.emit(nn.WhereOp(hit, node.scalar(1.0, dtype), node.scalar(0.0, dtype)))]
