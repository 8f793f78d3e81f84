"""CumSum: the prefix sum along one axis, as log2(n) shifted adds (Hillis and Steele's scan).

Step s adds to every element the partial sum s positions before it (y + shift(y, s), the
vacated positions taking 0): after the steps 1, 2, 4, ... < n every element holds the sum of
all elements up to it. Exclusive sums shift the input by one first; reverse sums shift
towards the other end. Only slices, concatenations with zero blocks and adds: exact for
integers, and it runs on the vector unit like any elementwise chain.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value


@converts("CumSum")
def convert_cumsum(node: NodeContext) -> list[Value]:
    """CumSum(x, axis) with a constant axis → ceil(log2 n) (+1 when exclusive) nn.slice /
    nn.concat / nn.add steps (`exclusive`, `reverse` attributes as ONNX)."""
    shape = node.shape(0)
    rank = len(shape)
    if rank == 0:
        raise node.error("expects a tensor of rank >= 1")
    axis = node.axis(int(node.require_scalar(1, "axis")), rank)
    reverse = bool(node.attr("reverse", 0))
    n = shape[axis]
    y = node.value(0)
    if n == 0:
        return [node.input(0)]
    zero = node.constant(np.zeros([1] * rank, node.dtype(0)), "zero")
    if node.attr("exclusive", 0):
        y = _shifted(node, y, axis, 1, reverse, zero)
    step = 1
    while step < n:
        y = node.emit(nn.AddOp(y, _shifted(node, y, axis, step, reverse, zero)))
        step *= 2
    return [y]


def _shifted(node: NodeContext, y: SSAValue, axis: int, s: int, reverse: bool, zero: SSAValue) -> SSAValue:
    """y moved s positions along `axis` (towards the end, or the start when `reverse`), the
    vacated positions 0."""
    shape = list(nn.shape_of(y))
    n = shape[axis]
    if s >= n:
        return node.emit(nn.ExpandOp(zero, shape))
    kept = list(shape)
    kept[axis] = n - s
    starts = [0] * len(shape)
    starts[axis] = s if reverse else 0
    part = node.emit(nn.SliceOp(y, starts, [1] * len(shape), kept))
    block = list(shape)
    block[axis] = s
    zeros = node.emit(nn.ExpandOp(zero, block))
    return node.emit(nn.ConcatOp([part, zeros] if reverse else [zeros, part], axis))
