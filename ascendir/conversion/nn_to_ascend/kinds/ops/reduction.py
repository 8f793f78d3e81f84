"""The reduction op family (templates/reduction.py): reduce_sum / mean / max / min / prod as row
or column reduction kernels, softmax, layer_norm and rms_norm as row kernels (statistics in
fp32). plan = the op; emit = its kernel, by op class."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase
from ascendir.conversion.nn_to_ascend.templates import reduction
from ascendir.dialects import nn

_EMIT = {
    **{cls: reduction.lower_reduce for cls in (nn.ReduceSumOp, nn.ReduceMeanOp, nn.ReduceMaxOp, nn.ReduceMinOp, nn.ReduceProdOp)},
    nn.SoftmaxOp: reduction.lower_softmax,
    nn.LayerNormOp: reduction.lower_layer_norm,
    nn.RmsNormOp: reduction.lower_rms_norm,
}


class ReductionOps(TemplateBase):
    kind = "reduction"
    ops = tuple(_EMIT)

    def plan(self, op: Operation) -> Operation:
        return op

    def emit(self, ctx: LoweringContext, plan: Operation, operands: list[SSAValue]) -> list[SSAValue]:
        return _EMIT[type(plan)](ctx, plan, operands)


REDUCTION = ReductionOps()
