"""The conv2d op family: nn.conv2d as img2col + one cube matmul (depthwise: the vector window
kernel), templates/conv.py. plan = the op; emit = templates/conv.lower_conv2d. No tiled sites:
the conv picks its tiles at emit time."""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase
from ascendir.conversion.nn_to_ascend.templates.conv import lower_conv2d
from ascendir.dialects import nn


class Conv2dOps(TemplateBase):
    kind = "conv2d"
    ops = (nn.Conv2dOp,)

    def plan(self, op: nn.Conv2dOp) -> nn.Conv2dOp:
        return op

    def emit(self, ctx: LoweringContext, plan: nn.Conv2dOp, operands: list[SSAValue]) -> list[SSAValue]:
        return lower_conv2d(ctx, plan, operands)


CONV2D = Conv2dOps()
