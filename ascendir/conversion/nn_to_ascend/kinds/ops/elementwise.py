"""The elementwise op family: every nn op with a vector recipe (templates/elementwise.ELEMENTWISE:
unary, binary, compare, GELU, LeakyReLU, Clip, Where, Cast). plan = the op's recipe
(`vector_map_of`); emit = one vector kernel running it (`emit_elementwise`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase
from ascendir.conversion.nn_to_ascend.templates.elementwise import ELEMENTWISE, VectorMap, emit_elementwise, vector_map_of


@dataclass(frozen=True)
class ElementwiseOpPlan:
    op: Operation
    recipe: VectorMap


class ElementwiseOps(TemplateBase):
    kind = "elementwise_op"
    ops = ELEMENTWISE

    def plan(self, op: Operation) -> ElementwiseOpPlan | Declined:
        recipe = vector_map_of(op)
        if recipe is None:
            return Declined(f"{op.name} has no vector recipe")
        return ElementwiseOpPlan(op, recipe)

    def emit(self, ctx: LoweringContext, plan: ElementwiseOpPlan, operands: list[SSAValue]) -> list[SSAValue]:
        return emit_elementwise(ctx, plan.op, plan.recipe, operands)


ELEMENTWISE_OPS = ElementwiseOps()
