"""The elementwise template (protocol side): plan = each body op's vector recipe
(templates/elementwise.vector_map_of) and one output shape; emit =
templates/fused_elementwise.lower_fused_elementwise (one vector kernel). No tiled sites: the
vector tile is chosen at emit time (elementwise.choose_tile)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, shape
from ascendir.conversion.nn_to_ascend.template import TemplateBase, body_of
from ascendir.conversion.nn_to_ascend.templates.elementwise import vector_map_of
from ascendir.conversion.nn_to_ascend.templates.fused_elementwise import KIND, lower_fused_elementwise
from ascendir.dialects import nn


@dataclass(frozen=True)
class ElementwisePlan:
    region: nn.FusedOp


class ElementwiseTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> ElementwisePlan | Declined:
        block = region.body.block
        body = body_of(region)
        recipes = [vector_map_of(o) for o in body]
        term = block.last_op
        if any(r is None for r in recipes) or not isinstance(term, nn.YieldOp):
            bad = next((o.name for o, r in zip(body, recipes) if r is None), "the terminator")
            return Declined(f"{bad} has no vector recipe")
        out_shape = shape(region.outputs[0])
        if any(shape(o) != out_shape for o in region.outputs) or any(v.owner not in body for v in term.values):
            return Declined("the outputs differ in shape, or one is not computed in the region")
        return ElementwisePlan(region)

    def emit(self, ctx: LoweringContext, plan: ElementwisePlan, operands: list[SSAValue]) -> list[SSAValue] | Declined:
        return lower_fused_elementwise(ctx, plan.region, operands)


ELEMENTWISE = ElementwiseTemplate()
