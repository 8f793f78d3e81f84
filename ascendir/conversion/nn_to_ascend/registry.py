"""Which template lowers which nn op (TEMPLATES, by op class: plain functions) and which fused
kind (FUSED_KINDS, by `nn.fused` kind: a `Template`, template.py). convert-nn-to-ascend
dispatches through these tables; choose-tiling asks FUSED_KINDS and OP_TEMPLATES (the plain ops
it tiles) for their tiled sites; decompose-attention asks whether an attention region has a
template."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.conversion.nn_to_ascend.kinds.add_rms_norm import ADD_RMS_NORM
from ascendir.conversion.nn_to_ascend.kinds.conv_activation import CONV_ACTIVATION
from ascendir.conversion.nn_to_ascend.kinds.elementwise import ELEMENTWISE
from ascendir.conversion.nn_to_ascend.kinds.ffn import FFN
from ascendir.conversion.nn_to_ascend.kinds.flash_attention import FLASH_ATTENTION
from ascendir.conversion.nn_to_ascend.kinds.matmul_epilogue import MATMUL_EPILOGUE
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MATMUL
from ascendir.conversion.nn_to_ascend.kinds.norm_matmul import NORM_MATMUL
from ascendir.conversion.nn_to_ascend.template import Template as FusedTemplate
from ascendir.conversion.nn_to_ascend.templates import conv, data_movement, elementwise, pool, reduction, topk
from ascendir.dialects import nn

Template = Callable[[LoweringContext, Operation, list[SSAValue]], list[SSAValue]]


def _templates() -> dict[type[Operation], Template]:
    table: dict[type[Operation], Template] = {}
    for cls in elementwise.ELEMENTWISE:
        table[cls] = elementwise.lower_elementwise
    table[nn.MatmulOp] = lambda ctx, op, operands: MATMUL.emit(ctx, MATMUL.plan(op), operands)
    for cls in (nn.ReduceSumOp, nn.ReduceMeanOp, nn.ReduceMaxOp, nn.ReduceMinOp, nn.ReduceProdOp):
        table[cls] = reduction.lower_reduce
    table[nn.SoftmaxOp] = reduction.lower_softmax
    table[nn.LayerNormOp] = reduction.lower_layer_norm
    table[nn.RmsNormOp] = reduction.lower_rms_norm
    table[nn.ReshapeOp] = data_movement.lower_reshape
    table[nn.IdentityOp] = data_movement.lower_identity
    table[nn.TransposeOp] = data_movement.lower_transpose
    table[nn.SliceOp] = data_movement.lower_slice
    table[nn.ConcatOp] = data_movement.lower_concat
    table[nn.ExpandOp] = data_movement.lower_expand
    table[nn.GatherOp] = data_movement.lower_gather
    table[nn.Conv2dOp] = conv.lower_conv2d
    table[nn.Pool2dOp] = pool.lower_pool2d
    table[nn.TopKOp] = topk.lower_topk
    return table


TEMPLATES = _templates()
# every kind an nn.fused region may have a template for; one the table lacks lowers op by op
FUSED_KINDS: dict[str, FusedTemplate] = {
    t.kind: t for t in (MATMUL_EPILOGUE, FFN, FLASH_ATTENTION, NORM_MATMUL, ELEMENTWISE, CONV_ACTIVATION, ADD_RMS_NORM)
}
# the plain ops choose-tiling tiles, by op class
OP_TEMPLATES: dict[type[Operation], FusedTemplate] = {nn.MatmulOp: MATMUL}
