"""Pad: constant, reflect, edge and wrap padding (and negative pads, which crop).

Pads must be known at import (static shapes). Negative pads crop by an nn.slice first; then,
axis by axis, constant padding concatenates blocks of the fill value (an nn.expand of one
element) before and after, and the other modes gather along the axis with the index map
numpy.pad builds for the same mode (reflect without repeating the edge, edge repeating it,
wrap going round), which is the ONNX definition of each mode.
"""

from __future__ import annotations

import numpy as np

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

# ONNX mode → numpy.pad mode of the same index map
_GATHER_MODES = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}


@converts("Pad")
def convert_pad(node: NodeContext) -> list[Value]:
    """Pad → nn.slice (negative pads), then per padded axis nn.concat with nn.expand'ed fill
    blocks (mode constant) or nn.gather with a constant index map (reflect, edge, wrap).

    pads are input 1 (models older than opset 13 are upgraded at load), the fill the optional
    input 2 (a runtime value allowed); from opset 18 input 3 names the axes the pads apply to.
    wrap exists from opset 19.
    """
    shape = node.shape(0)
    rank = len(shape)
    mode = node.attr("mode", "constant")
    if mode != "constant" and mode not in _GATHER_MODES or (mode == "wrap" and node.opset < 19):
        raise node.error(f"mode '{mode}' is not a padding mode of opset {node.opset}")
    pads = [int(p) for p in node.require_const(1, "pads").reshape(-1)]
    axes = list(range(rank))
    if node.opset >= 18 and node.has_input(3):
        axes = [node.axis(int(a), rank) for a in node.require_const(3, "axes").reshape(-1)]
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes):
        raise node.error(f"pads {pads} do not give a begin and an end for each of the axes {axes}")
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[len(axes) + i]
    # each crop on its own: a crop of 1 from an empty axis is not undone by a pad of 3 after it
    if any(shape[a] + min(begin[a], 0) + min(end[a], 0) < 0 for a in range(rank)):
        raise node.error(f"pads {pads} remove more than the shape {list(shape)} holds")

    x = original = node.value(0)
    # negative pads crop
    starts = [max(0, -b) for b in begin]
    kept = [shape[a] - starts[a] - max(0, -end[a]) for a in range(rank)]
    if kept != list(shape):
        x = node.emit(nn.SliceOp(x, starts, [1] * rank, kept))
    begin, end = [max(0, b) for b in begin], [max(0, e) for e in end]
    if mode != "constant" and any(kept[a] == 0 and begin[a] + end[a] > 0 for a in range(rank)):
        raise node.error(f"mode '{mode}' cannot pad an empty axis")

    fill = _fill(node, rank) if mode == "constant" and any(begin[a] + end[a] for a in range(rank)) else None
    current = list(kept)
    for a in range(rank):
        if begin[a] == 0 and end[a] == 0:
            continue
        if mode == "constant":
            parts = []
            for size in (begin[a], None, end[a]):
                if size is None:
                    parts.append(x)
                elif size:
                    block = list(current)
                    block[a] = size
                    parts.append(node.emit(nn.ExpandOp(fill, block)))
            x = node.emit(nn.ConcatOp(parts, a))
        else:
            if mode == "reflect" and max(begin[a], end[a]) > current[a] - 1:
                raise node.error(f"mode 'reflect' pads axis {a} of size {current[a]} by {begin[a]}, {end[a]}: more than the size - 1")
            index = np.pad(np.arange(current[a], dtype=np.int64), (begin[a], end[a]), mode=_GATHER_MODES[mode])
            x = node.emit(nn.GatherOp(x, node.constant(index, f"pad_index{a}"), a))
        current[a] += begin[a] + end[a]
    return [node.input(0) if x is original else x]


def _fill(node: NodeContext, rank: int):
    """The fill value as an [1] * rank tensor of the input's dtype: input 2, 0 when absent."""
    dtype = node.dtype(0)
    ones = [1] * rank
    if not node.has_input(2):
        return node.constant(np.zeros(ones, dtype=dtype), "pad_value")
    known = node.const(2)
    if known is not None:
        if known.size != 1:
            raise node.error(f"constant_value has {known.size} elements, not one")
        return node.constant(np.full(ones, known.reshape(-1)[0], dtype=dtype), "pad_value")
    node.same_dtype(0, 2)
    return node.emit(nn.ReshapeOp(node.value(2), ones))
