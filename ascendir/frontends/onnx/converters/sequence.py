"""Sequence ops, resolved at import: a sequence is a Python tuple of its elements
(values.TensorSequence), so SequenceConstruct / Empty / Insert / Erase / At / Length only
rearrange values, SplitToSequence is slices and ConcatFromSequence one nn.concat. Positions and
split sizes must be known at import (a static-shape compiler knows every length then)."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.dtypes import to_numpy_dtype
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Constant, TensorSequence, Value


def _sequence(node: NodeContext, i: int) -> TensorSequence:
    v = node.input(i)
    if not isinstance(v, TensorSequence):
        raise node.error(f"input {i} ('{node.node.input[i]}') is a tensor; {node.op_type} takes a sequence")
    return v


def _position(node: NodeContext, i: int, n: int, default: int, inclusive: bool) -> int:
    """Input i's position in [-n, n - 1] (or [-n, n] when `inclusive`, an insertion point),
    made non-negative; `default` when the input is omitted."""
    if not node.has_input(i):
        return default
    p = int(node.require_scalar(i, "position"))
    hi = n if inclusive else n - 1
    if not -n <= p <= hi:
        raise node.error(f"position {p} is outside [{-n}, {hi}] for a sequence of {n}")
    return p + n if p < 0 else p


def _element_dtype(node: NodeContext, v: Value) -> np.dtype:
    return v.dtype if isinstance(v, Constant) else to_numpy_dtype(v.type.element_type)


@converts("SequenceConstruct")
def convert_sequence_construct(node: NodeContext) -> list[Value]:
    """SequenceConstruct(t0, t1, ...) → the sequence of its inputs (one element type)."""
    if node.num_inputs == 0:
        raise node.error("needs at least one input")
    node.same_dtype(*range(node.num_inputs))
    return [TensorSequence(tuple(node.input(i) for i in range(node.num_inputs)), node.dtype(0))]


@converts("SequenceEmpty")
def convert_sequence_empty(node: NodeContext) -> list[Value]:
    """SequenceEmpty → an empty sequence of `dtype` (default float32)."""
    dtype = node.onnx_dtype(int(node.attr("dtype", 1)))
    return [TensorSequence((), dtype)]


@converts("SequenceInsert")
def convert_sequence_insert(node: NodeContext) -> list[Value]:
    """SequenceInsert(seq, tensor, position = end) → a new sequence with the tensor inserted."""
    seq = _sequence(node, 0)
    t = node.input(1)
    if isinstance(t, TensorSequence):
        raise node.error("input 1 is a sequence; SequenceInsert inserts a tensor")
    if _element_dtype(node, t) != seq.dtype:
        raise node.error(f"inserts {_element_dtype(node, t)} into a sequence of {seq.dtype}")
    p = _position(node, 2, len(seq.items), len(seq.items), inclusive=True)
    return [TensorSequence(seq.items[:p] + (t,) + seq.items[p:], seq.dtype)]


@converts("SequenceErase")
def convert_sequence_erase(node: NodeContext) -> list[Value]:
    """SequenceErase(seq, position = last) → the sequence without that element."""
    seq = _sequence(node, 0)
    if not seq.items:
        raise node.error("erases from an empty sequence")
    p = _position(node, 1, len(seq.items), len(seq.items) - 1, inclusive=False)
    return [TensorSequence(seq.items[:p] + seq.items[p + 1:], seq.dtype)]


@converts("SequenceAt")
def convert_sequence_at(node: NodeContext) -> list[Value]:
    """SequenceAt(seq, position) → that element (the same value: no copy)."""
    seq = _sequence(node, 0)
    if not seq.items:
        raise node.error("reads from an empty sequence")
    return [seq.items[_position(node, 1, len(seq.items), 0, inclusive=False)]]


@converts("SequenceLength")
def convert_sequence_length(node: NodeContext) -> list[Value]:
    """SequenceLength → its length, an int64 scalar known at import."""
    return [Constant(node.node.output[0], np.array(len(_sequence(node, 0).items), np.int64))]


@converts("ConcatFromSequence")
def convert_concat_from_sequence(node: NodeContext) -> list[Value]:
    """ConcatFromSequence(seq, axis, new_axis = 0) → nn.concat of the elements along `axis`
    (each first given a new dim there when new_axis = 1)."""
    seq = _sequence(node, 0)
    if not seq.items:
        raise node.error("concatenates an empty sequence")
    vals = [node.state.materialize(v) if isinstance(v, Constant) else v for v in seq.items]
    shape = nn.shape_of(vals[0])
    new_axis = bool(node.attr("new_axis", 0))
    rank = len(shape) + (1 if new_axis else 0)
    axis = node.axis(int(node.attr("axis", 0)), rank) if rank else 0
    if new_axis:
        vals = [node.emit(nn.ReshapeOp(v, [*nn.shape_of(v)[:axis], 1, *nn.shape_of(v)[axis:]])) for v in vals]
    for v in vals[1:]:
        other = nn.shape_of(v)
        if len(other) != rank or any(a != b for d, (a, b) in enumerate(zip(nn.shape_of(vals[0]), other)) if d != axis):
            raise node.error(f"elements of shapes {list(nn.shape_of(vals[0]))} and {list(other)} do not concatenate on axis {axis}")
    if len(vals) == 1:
        return [vals[0]]
    return [node.emit(nn.ConcatOp(vals, axis))]


@converts("SplitToSequence")
def convert_split_to_sequence(node: NodeContext) -> list[Value]:
    """SplitToSequence(x, split) along `axis` → the sequence of slices: sizes from a 1-D split,
    chunks of a scalar split (the last one shorter), or size-1 slices without one (their axis
    dropped when keepdims = 0)."""
    shape = node.shape(0)
    if not shape:
        raise node.error("splits a scalar")
    axis = node.axis(int(node.attr("axis", 0)), len(shape))
    n = shape[axis]
    keep = True
    if not node.has_input(1):
        sizes = [1] * n
        keep = bool(node.attr("keepdims", 1))
    else:
        split = node.require_const(1, "split").astype(np.int64)
        if split.ndim == 0:
            if split <= 0:
                raise node.error(f"split {int(split)} must be positive")
            sizes = [int(split)] * (n // int(split)) + ([n % int(split)] if n % int(split) else [])
        else:
            sizes = [int(s) for s in split.reshape(-1)]
            if any(s <= 0 for s in sizes) or sum(sizes) != n:
                raise node.error(f"split {sizes} does not cut dim {axis} of size {n} into non-empty parts")
    x: SSAValue = node.value(0)
    items, start = [], 0
    for size in sizes:
        starts = [start if d == axis else 0 for d in range(len(shape))]
        part = node.emit(nn.SliceOp(x, starts, [1] * len(shape), [size if d == axis else s for d, s in enumerate(shape)]))
        if not keep:
            part = node.emit(nn.ReshapeOp(part, [s for d, s in enumerate(shape) if d != axis]))
        items.append(part)
        start += size
    return [TensorSequence(tuple(items), node.dtype(0))]
