"""The moe_gating template (protocol side): plan = templates/moe_gating.parse of the region;
emit = templates/moe_gating.emit_moe_gating (one vector kernel, ops-transformer's
MoeGatingTopKSoftmax, or MoeGatingTopK with groups for a group-limited router). No tiled sites: its row tile is chosen at emit time from the UB budget,
as the unfused topk kernel's is."""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase, gm_args
from ascendir.conversion.nn_to_ascend.templates.moe_gating import KIND, MoeGating, emit_moe_gating, parse
from ascendir.dialects import nn


@dataclass(frozen=True)
class MoeGatingPlan:
    region: nn.FusedOp
    parsed: MoeGating


class MoeGatingTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> MoeGatingPlan | Declined:
        parsed = parse(region)
        if parsed is None:
            return Declined("the body is not softmax / sigmoid over the last axis of [T, E], nn.topk (largest, last "
                            "axis) of it [and the top-k values divided by their sum], or a group-limited router "
                            "(templates/moe_gating.match_grouped), yielding the weights and the ids")
        return MoeGatingPlan(region, parsed)

    def emit(self, ctx: LoweringContext, plan: MoeGatingPlan, operands: list[SSAValue]) -> list[SSAValue]:
        args, p = gm_args(plan.region, operands), plan.parsed
        g = p.group
        group = None if g is None else replace(
            g, bias=args.get(g.bias), fill=args[g.fill], eps=args.get(g.eps), scale=args.get(g.scale))
        return emit_moe_gating(ctx, args[p.logits], p.scoring, p.k, p.renorm, group)


MOE_GATING = MoeGatingTemplate()
