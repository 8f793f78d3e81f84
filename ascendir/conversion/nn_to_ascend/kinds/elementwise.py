"""The elementwise template (protocol side): plan = templates/fused_elementwise.parse of the
region (each body op's vector recipe, where each value lives in UB, one output shape); emit =
templates/fused_elementwise.emit_fused_elementwise (one vector kernel). No tiled sites: the
vector tile is chosen at emit time (elementwise.choose_tile)."""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase
from ascendir.conversion.nn_to_ascend.templates.fused_elementwise import (
    KIND, FusedElementwise, emit_fused_elementwise, parse,
)
from ascendir.dialects import nn


class ElementwiseTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> FusedElementwise | Declined:
        return parse(region)

    def emit(self, ctx: LoweringContext, plan: FusedElementwise, operands: list[SSAValue]) -> list[SSAValue]:
        return emit_fused_elementwise(ctx, plan, operands)


ELEMENTWISE = ElementwiseTemplate()
