"""The add_rms_norm template (protocol side): plan = templates/add_rms_norm.parse of the region;
emit = templates/add_rms_norm.emit_add_rms_norm (one vector kernel). No tiled sites: its row
tile is chosen at emit time from the UB budget, as the unfused norm kernel's is."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase, gm_args
from ascendir.conversion.nn_to_ascend.templates.add_rms_norm import KIND, AddRmsNorm, emit_add_rms_norm, parse
from ascendir.dialects import nn


@dataclass(frozen=True)
class AddRmsNormPlan:
    region: nn.FusedOp
    parsed: AddRmsNorm


class AddRmsNormTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> AddRmsNormPlan | Declined:
        parsed = parse(region)
        if parsed is None:
            return Declined("the body is not nn.add of two same-shape tensors and nn.rms_norm of the sum over the "
                            "last axis, yielding the norm [and the sum]")
        return AddRmsNormPlan(region, parsed)

    def emit(self, ctx: LoweringContext, plan: AddRmsNormPlan, operands: list[SSAValue]) -> list[SSAValue]:
        args, p = gm_args(plan.region, operands), plan.parsed
        return emit_add_rms_norm(ctx, args[p.x], args[p.r], args[p.gamma], p.epsilon, p.yields_sum)


ADD_RMS_NORM = AddRmsNormTemplate()
