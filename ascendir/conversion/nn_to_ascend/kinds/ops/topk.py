"""The topk op family: k arg-max rounds over rows in UB (templates/topk.py). plan = the op;
emit = templates/topk.lower_topk."""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase
from ascendir.conversion.nn_to_ascend.templates.topk import lower_topk
from ascendir.dialects import nn


class TopKOps(TemplateBase):
    kind = "topk"
    ops = (nn.TopKOp,)

    def plan(self, op: nn.TopKOp) -> nn.TopKOp:
        return op

    def emit(self, ctx: LoweringContext, plan: nn.TopKOp, operands: list[SSAValue]) -> list[SSAValue]:
        return lower_topk(ctx, plan, operands)


TOPK = TopKOps()
