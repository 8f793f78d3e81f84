"""Which template lowers which nn op (TEMPLATES, by op class) and which fused kind (FUSED_TEMPLATES,
by `nn.fused` kind). convert-nn-to-ascend dispatches through these tables; decompose-attention
asks them whether an attention region has a template."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.conversion.nn_to_ascend.templates import (
    conv, data_movement, elementwise, ffn, flash_attention, fused_elementwise, matmul, matmul_epilogue, norm_matmul, pool,
    reduction, topk,
)
from ascendir.dialects import nn

Template = Callable[[LoweringContext, Operation, list[SSAValue]], list[SSAValue]]


def _templates() -> dict[type[Operation], Template]:
    table: dict[type[Operation], Template] = {}
    for cls in elementwise.ELEMENTWISE:
        table[cls] = elementwise.lower_elementwise
    table[nn.MatmulOp] = matmul.lower_matmul
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
FUSED_TEMPLATES: dict[str, Template] = {"matmul_epilogue": matmul_epilogue.lower_matmul_epilogue}
FUSED_TEMPLATES["ffn"] = ffn.lower_ffn
FUSED_TEMPLATES["flash_attention"] = flash_attention.lower_flash_attention
FUSED_TEMPLATES["norm_matmul"] = norm_matmul.lower_norm_matmul
FUSED_TEMPLATES["elementwise"] = fused_elementwise.lower_fused_elementwise
FUSED_TEMPLATES["conv_activation"] = conv.lower_conv_activation