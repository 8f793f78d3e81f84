"""The moe_finalize_routing template (protocol side): plan = templates/moe_finalize.parse of the
region; emit = templates/moe_finalize.emit_moe_finalize (one vector kernel, ops-transformer's
MoeFinalizeRouting; the expert outputs read through the inverse permutation when moe_experts left
them expert-major, LoweringContext.row_order). No tiled sites: its tile is chosen at emit time from the UB budget."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase, gm_args
from ascendir.conversion.nn_to_ascend.templates.moe_finalize import KIND, MoeFinalize, emit_moe_finalize, parse
from ascendir.dialects import nn


@dataclass(frozen=True)
class MoeFinalizePlan:
    region: nn.FusedOp
    parsed: MoeFinalize


class MoeFinalizeTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> MoeFinalizePlan | Declined:
        parsed = parse(region)
        if parsed is None:
            return Declined("the body is not nn.mul of expert outputs [T*k, H] by weights [T*k, 1], reshaped to "
                            "[T, k, H] and summed over k [, plus a shared output of the same shape]")
        return MoeFinalizePlan(region, parsed)

    def emit(self, ctx: LoweringContext, plan: MoeFinalizePlan, operands: list[SSAValue]) -> list[SSAValue]:
        args, p = gm_args(plan.region, operands), plan.parsed
        shared = args[p.shared] if p.shared is not None else None
        y = args[p.y]
        return emit_moe_finalize(ctx, y, args[p.w], p.tokens, p.k, shared, p.out_shape, ctx.permuted_rows(y))


MOE_FINALIZE = MoeFinalizeTemplate()
