"""The weight-only quantized matmul op family: `nn.weight_quant_matmul` as one antiquant mix
kernel (templates/antiquant.py: int8 / int4 weights dequantised on the AIV, multiplied on the
AIC). No tiled site: its tiles come from the antiquant heuristic."""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.template import TemplateBase
from ascendir.conversion.nn_to_ascend.templates.antiquant import emit_antiquant
from ascendir.dialects import nn


class AntiquantTemplate(TemplateBase):
    """nn.weight_quant_matmul: one antiquant kernel."""

    kind = "weight_quant_matmul"
    ops = (nn.WeightQuantMatmulOp,)

    def plan(self, op: nn.WeightQuantMatmulOp) -> nn.WeightQuantMatmulOp:
        return op

    def emit(self, ctx: LoweringContext, plan: nn.WeightQuantMatmulOp, operands: list[SSAValue]) -> list[SSAValue]:
        x, w, scale = operands[:3]
        offset = operands[3] if len(operands) > 3 else None
        res = plan.result
        return [emit_antiquant(ctx, x, w, scale, offset, plan.group_size.value.data, shape(res), elem(res))]


ANTIQUANT = AntiquantTemplate()
