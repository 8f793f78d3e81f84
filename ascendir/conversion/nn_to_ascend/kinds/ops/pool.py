"""The pool2d op family: MaxPool / AveragePool on the vector unit through the window kernel
(templates/pool.py, templates/window_vector.py). plan = the op; emit = templates/pool.lower_pool2d."""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase
from ascendir.conversion.nn_to_ascend.templates.pool import lower_pool2d
from ascendir.dialects import nn


class Pool2dOps(TemplateBase):
    kind = "pool2d"
    ops = (nn.Pool2dOp,)

    def plan(self, op: nn.Pool2dOp) -> nn.Pool2dOp:
        return op

    def emit(self, ctx: LoweringContext, plan: nn.Pool2dOp, operands: list[SSAValue]) -> list[SSAValue]:
        return lower_pool2d(ctx, plan, operands)


POOL2D = Pool2dOps()
