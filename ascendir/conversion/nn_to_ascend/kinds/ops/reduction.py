"""The reduction op family (templates/reduction.py): reduce_sum / mean / max / min / prod as row
or column reduction kernels, softmax, layer_norm and rms_norm as row kernels (statistics in
fp32). plan = the op; emit = its kernel, by op class."""

from __future__ import annotations

from ascendir.conversion.nn_to_ascend.templates import reduction
from ascendir.conversion.nn_to_ascend.kinds.ops.emitters import EmitterFamily
from ascendir.dialects import nn

REDUCTION = EmitterFamily("reduction", {
    **{cls: reduction.lower_reduce for cls in (nn.ReduceSumOp, nn.ReduceMeanOp, nn.ReduceMaxOp, nn.ReduceMinOp, nn.ReduceProdOp)},
    nn.SoftmaxOp: reduction.lower_softmax,
    nn.LayerNormOp: reduction.lower_layer_norm,
    nn.RmsNormOp: reduction.lower_rms_norm,
})
