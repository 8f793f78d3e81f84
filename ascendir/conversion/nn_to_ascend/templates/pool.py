"""nn.pool2d (MaxPool / AveragePool, incl. ceil_mode and count_include_pad) on the vector unit,
through the window kernel of `window_vector.py`. GlobalAveragePool imports as nn.reduce_mean
and goes through the reduction template."""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from ascendir.dialects import nn
from ascendir.conversion.nn_to_ascend.templates.conv import window_of
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.templates.window_vector import emit_window_vector


def lower_pool2d(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.pool2d → one vector window kernel (max, with or without indices, or avg)."""
    assert isinstance(op, nn.Pool2dOp)
    out = shape(op.result)
    el = elem(op.result)
    if math.prod(out) == 0:
        return [ctx.buffer(shape(r), elem(r)) for r in op.results]
    win = window_of(op, shape(operands[0]), out, op.kernel.get_values())
    storage_order = op.storage_order.value.data if op.storage_order is not None else None
    return emit_window_vector(
        ctx, f"{op.kind.data}pool", operands[0], win, el, op.kind.data,
        count_include_pad=op.count_include_pad.value.data, storage_order=storage_order,
    )
