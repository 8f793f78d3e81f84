"""The conv_activation template (protocol side): plan = the region's conv2d and the activation
its epilogue applies (templates/conv.conv_activation_of); emit = templates/conv.emit_conv2d with
that activation. No tiled sites: the conv picks its tiles at emit time."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase, body_of, gm_args
from ascendir.conversion.nn_to_ascend.templates.conv import conv_activation_of, emit_conv2d
from ascendir.dialects import nn

KIND = "conv_activation"


@dataclass(frozen=True)
class ConvActivationPlan:
    region: nn.FusedOp
    conv: nn.Conv2dOp
    activation: str


class ConvActivationTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> ConvActivationPlan | Declined:
        body = body_of(region)
        if len(body) != 2 or not isinstance(body[0], nn.Conv2dOp) or len(region.outputs) != 1:
            return Declined("the body is not one nn.conv2d and one activation with one output")
        conv, a = body
        act = conv_activation_of(a)
        args = region.body.block.args
        if act is None or a.operands[0] != conv.result or any(v not in args for v in conv.operands):
            return Declined(f"{a.name} after the conv is not an activation its epilogue applies to the conv's result")
        return ConvActivationPlan(region, conv, act)

    def emit(self, ctx: LoweringContext, plan: ConvActivationPlan, operands: list[SSAValue]) -> list[SSAValue]:
        args = gm_args(plan.region, operands)
        return [emit_conv2d(ctx, plan.conv, [args[v] for v in plan.conv.operands], plan.activation)]


CONV_ACTIVATION = ConvActivationTemplate()
