"""Element-wise indexing: GatherElements, ScatterElements, ScatterND, ReverseSequence, Compress.

All three become gathers over the flattened data: every output element reads one element of a
flat tensor, at a flat index ravel(coordinates). GatherElements takes the data element whose
coordinates are the output's with the `axis` one replaced by the index; with runtime indices
the flat index is computed by nn ops (idx + dim where negative, times the axis stride, plus the
constant flat offset of the other coordinates). The scatters with indices known at import:
each output element is then known to be either a data element or the last update written to
it (reduction none), or the data element combined with the updates written to it (add, mul,
max, min: one layer per repeat, applied in order), so they are gathers of the updates and an
nn.where with a constant mask. ScatterElements with runtime indices (DeepSeek-V3's group mask,
`mask.scatter_(1, top_groups, 1)`) writes the J updates along the axis one after another:
J rounds of nn.where(index == arange(dim), update, out), later writes winning as in
onnxruntime; J is the indices' extent along the axis (a handful of routing groups).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.dtypes import from_numpy_dtype
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

_REDUCTIONS = {"add": nn.AddOp, "mul": nn.MulOp, "max": nn.MaxOp, "min": nn.MinOp}


def _flat(node: NodeContext, i: int, shape: list[int]) -> SSAValue:
    """Input i reshaped to `shape` (materialized when constant)."""
    v = node.value(i)
    return v if tuple(shape) == nn.shape_of(v) else node.emit(nn.ReshapeOp(v, shape))


@converts("GatherElements")
def convert_gather_elements(node: NodeContext) -> list[Value]:
    """GatherElements(data, indices, axis) → nn.gather on the flattened data with flat indices
    of the indices' shape (constant, or computed by nn ops from runtime indices)."""
    shape, ishape = node.shape(0), node.shape(1)
    rank = len(shape)
    axis = node.axis(int(node.attr("axis", 0)), rank)
    if len(ishape) != rank or any(ishape[d] > shape[d] for d in range(rank) if d != axis):
        raise node.error(f"indices of shape {list(ishape)} do not index data of shape {list(shape)}")
    strides = [math.prod(shape[d + 1:]) for d in range(rank)]
    coords = np.indices(ishape, dtype=np.int64)
    # flat offset of every coordinate but `axis`'s
    base = sum(coords[d] * strides[d] for d in range(rank) if d != axis) if rank > 1 else np.zeros(ishape, np.int64)
    data = _flat(node, 0, [math.prod(shape)])
    idx = node.const(1)
    if idx is not None:
        idx = idx.astype(np.int64)
        if np.any(idx < -shape[axis]) or np.any(idx >= shape[axis]):
            raise node.error(f"indices out of range for dim {axis} of size {shape[axis]}")
        flat = base + np.where(idx < 0, idx + shape[axis], idx) * strides[axis]
        return [node.emit(nn.GatherOp(data, node.constant(flat, "flat_indices"), 0))]
    # runtime indices: flat = (idx < 0 ? idx + dim : idx) * stride + base, in the indices' type
    it = node.dtype(1)
    i = node.value(1)
    wrapped = node.emit(nn.AddOp(i, node.scalar(shape[axis], it)))
    i = node.emit(nn.WhereOp(node.emit(nn.LessOp(i, node.scalar(0, it))), wrapped, i))
    if strides[axis] != 1:
        i = node.emit(nn.MulOp(i, node.scalar(strides[axis], it)))
    if np.any(base):
        i = node.emit(nn.AddOp(i, node.constant(base.astype(it), "flat_base")))
    return [node.emit(nn.GatherOp(data, i, 0))]


@converts("ScatterElements", "ScatterND")
def convert_scatter(node: NodeContext) -> list[Value]:
    """ScatterElements / ScatterND with constant indices → gathers of the flattened updates and
    nn.where with constant masks (see the module docstring); reduction none / add / mul / max /
    min (opset 16 / 18)."""
    shape = node.shape(0)
    rank = len(shape)
    reduction = node.attr("reduction", "none")
    if reduction != "none" and reduction not in _REDUCTIONS:
        raise node.error(f"reduction='{reduction}' is not one of none, {', '.join(_REDUCTIONS)}")
    ushape = node.shape(2)
    node.same_dtype(0, 2)
    if node.const(1) is None:
        if node.op_type == "ScatterND":
            node.require_const(1, "indices")  # the one-line error for runtime ScatterND indices
        return _scatter_elements_runtime(node, shape, ushape, reduction)
    indices = node.require_const(1, "indices").astype(np.int64)
    if node.op_type == "ScatterND":
        k = indices.shape[-1] if indices.ndim else 0
        if indices.ndim == 0 or k > rank or tuple(ushape) != indices.shape[:-1] + tuple(shape[k:]):
            raise node.error(f"indices {list(indices.shape)} and updates {list(ushape)} do not fit data {list(shape)}")
        dims = np.array(shape[:k], np.int64)
        if np.any(indices < -dims) or np.any(indices >= dims):
            raise node.error("indices out of range")
        idx = np.where(indices < 0, indices + dims, indices)
        rows = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), shape[:k]).reshape(-1) if k else np.zeros(
            math.prod(indices.shape[:-1]), np.int64)
        inner = math.prod(shape[k:])
    else:
        axis = node.axis(int(node.attr("axis", 0)), rank)
        if indices.shape != tuple(ushape) or indices.ndim != rank or any(
                indices.shape[d] > shape[d] for d in range(rank) if d != axis):
            raise node.error(f"indices {list(indices.shape)} and updates {list(ushape)} do not fit data {list(shape)}")
        if np.any(indices < -shape[axis]) or np.any(indices >= shape[axis]):
            raise node.error(f"indices out of range for dim {axis} of size {shape[axis]}")
        coords = list(np.indices(indices.shape, dtype=np.int64))
        coords[axis] = np.where(indices < 0, indices + shape[axis], indices)
        rows = np.ravel_multi_index(tuple(coords), shape).reshape(-1) if indices.size else np.zeros(0, np.int64)
        inner = 1
    outer = math.prod(shape) // max(inner, 1) if inner else 0
    if rows.size == 0 or outer == 0:
        return [node.input(0)]
    # layer l holds, per data row, the update written to it the l-th time (in index order)
    layers: list[np.ndarray] = []
    for u, r in enumerate(rows):
        for layer in layers:
            if layer[r] < 0:
                layer[r] = u
                break
        else:
            layers.append(np.full(outer, -1, np.int64))
            layers[-1][r] = u
    if reduction == "none":  # the last write wins (onnxruntime's order)
        last = np.full(outer, -1, np.int64)
        last[rows] = np.arange(rows.size)
        layers = [last]
    out = _flat(node, 0, [outer, inner])
    updates = _flat(node, 2, [rows.size, inner])
    for layer in layers:
        hit = layer >= 0
        picked = node.emit(nn.GatherOp(updates, node.constant(np.maximum(layer, 0), "update_rows"), 0))
        if reduction != "none":
            picked = node.emit(_REDUCTIONS[reduction](out, picked))
        if hit.all():
            out = picked
        else:
            out = node.emit(nn.WhereOp(node.constant(hit.reshape(outer, 1), "scattered"), picked, out))
    return [node.emit(nn.ReshapeOp(out, list(shape)))]





# Rounds of where() a runtime-index scatter may take: one per update along the axis.
_MAX_RUNTIME_SCATTER_ROUNDS = 64


def _scatter_elements_runtime(node: NodeContext, shape: tuple[int, ...], ushape: tuple[int, ...],
                              reduction: str) -> list[Value]:
    """ScatterElements with runtime indices of the data's shape but along `axis` (J updates per
    line): J rounds of out = where(idx_j == arange(dim), [out (op)] update_j, out), in j order,
    so a later write to the same element wins (reduction none) or combines after the earlier
    ones, as onnxruntime applies them. Out-of-range indices write nowhere (onnxruntime
    rejects them). Raises the node's error when the indices' other dims differ from the
    data's, or J exceeds _MAX_RUNTIME_SCATTER_ROUNDS."""
    rank = len(shape)
    axis = node.axis(int(node.attr("axis", 0)), rank)
    ishape = node.shape(1)
    if ishape != ushape or len(ishape) != rank or any(ishape[d] != shape[d] for d in range(rank) if d != axis):
        raise node.error(f"runtime indices {list(ishape)} and updates {list(ushape)} must match data "
                         f"{list(shape)} on every dim but axis {axis}")
    rounds = ishape[axis]
    if rounds > _MAX_RUNTIME_SCATTER_ROUNDS:
        raise node.error(f"{rounds} runtime-index updates per line along axis {axis}; at most "
                         f"{_MAX_RUNTIME_SCATTER_ROUNDS} are supported")
    it = node.dtype(1)
    idx = node.value(1)
    wrapped = node.emit(nn.AddOp(idx, node.scalar(shape[axis], it)))
    idx = node.emit(nn.WhereOp(node.emit(nn.LessOp(idx, node.scalar(0, it))), wrapped, idx))
    positions = node.constant(
        np.arange(shape[axis], dtype=it).reshape([shape[axis] if d == axis else 1 for d in range(rank)]), "positions")
    out, updates = node.value(0), node.value(2)
    one = [1 if d == axis else ishape[d] for d in range(rank)]
    for j in range(rounds):
        start = [j if d == axis else 0 for d in range(rank)]
        idx_j = node.emit(nn.SliceOp(idx, start, [1] * rank, one))
        upd_j = node.emit(nn.SliceOp(updates, start, [1] * rank, one))
        hit = node.emit(nn.EqualOp(idx_j, positions))
        new = upd_j if reduction == "none" else node.emit(_REDUCTIONS[reduction](out, upd_j))
        out = node.emit(nn.WhereOp(hit, new, out))
    return [out]


@converts("OneHot")
def convert_one_hot(node: NodeContext) -> list[Value]:
    """OneHot(indices, depth, values) with a constant depth → where(indices (negative ones
    wrapped by depth) == arange(depth) along the new `axis`, on, off); other indices give off."""
    depth = int(node.require_scalar(1, "depth"))
    ishape = node.shape(0)
    rank = len(ishape) + 1
    axis = node.axis(int(node.attr("axis", -1)), rank)
    if depth < 1:
        raise node.error(f"depth {depth} must be >= 1")
    idx = node.value(0)
    if node.dtype(0) != np.int64:  # float or narrower integer indices: ONNX casts them
        idx = node.emit(nn.CastOp(idx, from_numpy_dtype(np.dtype(np.int64))))
    wrapped = node.emit(nn.AddOp(idx, node.scalar(depth, np.int64)))
    idx = node.emit(nn.WhereOp(node.emit(nn.LessOp(idx, node.scalar(0, np.int64))), wrapped, idx))
    idx = node.emit(nn.ReshapeOp(idx, [*ishape[:axis], 1, *ishape[axis:]]))
    positions = np.arange(depth, dtype=np.int64).reshape([depth if d == axis else 1 for d in range(rank)])
    hit = node.emit(nn.EqualOp(idx, node.constant(positions, "positions")))
    values = node.const(2)
    if values is not None:
        off, on = (node.constant(np.asarray(values.reshape(-1)[i]), f"value{i}") for i in (0, 1))
    else:
        v = node.value(2)
        off, on = (node.emit(nn.SliceOp(v, [i], [1], [1])) for i in (0, 1))
    return [node.emit(nn.WhereOp(hit, on, off))]


@converts("ReverseSequence")
def convert_reverse_sequence(node: NodeContext) -> list[Value]:
    """ReverseSequence(x, sequence_lens) → a gather of flattened x: along time_axis, the first
    lens[b] steps of batch row b reversed (j = lens[b] - 1 - t), the rest kept; flat indices
    constant when the lengths are, else computed by nn ops (i64)."""
    shape = node.shape(0)
    rank = len(shape)
    if rank < 2:
        raise node.error(f"expects a tensor of rank >= 2, got shape {list(shape)}")
    time_axis, batch_axis = int(node.attr("time_axis", 0)), int(node.attr("batch_axis", 1))
    if {time_axis, batch_axis} != {0, 1}:
        raise node.error(f"time_axis {time_axis} and batch_axis {batch_axis} must be 0 and 1, one each")
    if node.shape(1) != (shape[batch_axis],):
        raise node.error(f"sequence_lens of shape {list(node.shape(1))} for {shape[batch_axis]} batch rows")
    strides = [math.prod(shape[d + 1:]) for d in range(rank)]
    coords = np.indices(shape, dtype=np.int64)
    base = sum(coords[d] * strides[d] for d in range(rank) if d != time_axis)
    t = np.arange(shape[time_axis], dtype=np.int64).reshape([shape[time_axis] if d == time_axis else 1 for d in range(rank)])
    data = _flat(node, 0, [math.prod(shape)])
    lens = node.const(1)
    if lens is not None:
        lens = lens.astype(np.int64)
        if np.any(lens < 0) or np.any(lens > shape[time_axis]):
            raise node.error(f"sequence_lens {lens.tolist()} outside 0..{shape[time_axis]}")
        lb = lens.reshape([shape[batch_axis] if d == batch_axis else 1 for d in range(rank)])
        j = np.where(t < lb, lb - 1 - t, t)
        return [node.emit(nn.GatherOp(data, node.constant(base + j * strides[time_axis], "flat_indices"), 0))]
    lens = node.value(1)
    if node.dtype(1) != np.int64:
        lens = node.emit(nn.CastOp(lens, from_numpy_dtype(np.dtype(np.int64))))
    lb = node.emit(nn.ReshapeOp(lens, [shape[batch_axis] if d == batch_axis else 1 for d in range(rank)]))
    tc = node.constant(t, "steps")
    back = node.emit(nn.SubOp(node.emit(nn.SubOp(lb, node.scalar(1, np.int64))), tc))
    j = node.emit(nn.WhereOp(node.emit(nn.LessOp(tc, lb)), back, tc))
    if strides[time_axis] != 1:
        j = node.emit(nn.MulOp(j, node.scalar(strides[time_axis], np.int64)))
    return [node.emit(nn.GatherOp(data, node.emit(nn.AddOp(j, node.constant(base, "flat_base"))), 0))]


@converts("Compress")
def convert_compress(node: NodeContext) -> list[Value]:
    """Compress(x, condition) with a condition known at import → nn.gather of the selected
    slices along `axis` (or of the flattened x without one); a condition shorter than the axis
    drops the rest. A runtime condition would make the output shape depend on the data."""
    shape = node.shape(0)
    cond = node.require_const(1, "condition").reshape(-1).astype(bool)
    axis = node.attr("axis", None)
    if axis is None:
        data, n, axis = _flat(node, 0, [math.prod(shape)]), math.prod(shape), 0
    else:
        axis = node.axis(int(axis), len(shape))
        data, n = node.value(0), shape[axis]
    if cond.size > n:
        raise node.error(f"condition has {cond.size} entries for an axis of {n}")
    picked = np.flatnonzero(cond).astype(np.int64)
    if picked.size == 0:
        raise node.error("condition selects nothing: a zero-size output")
    return [node.emit(nn.GatherOp(data, node.constant(picked, "indices"), axis))]
