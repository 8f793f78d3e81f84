"""Which template lowers which nn op or region: FUSED_KINDS by `nn.fused` kind, OP_TEMPLATES by
op class (each op family's template lists its classes in `ops`); every entry a `Template`
(template.py). convert-nn-to-ascend lowers every op and region through `template_of`;
choose-tiling asks the same templates for their tiled sites; decompose-attention asks whether
an attention region has a template."""

from __future__ import annotations

from xdsl.ir import Operation

from ascendir.conversion.nn_to_ascend.kinds.add_rms_norm import ADD_RMS_NORM
from ascendir.conversion.nn_to_ascend.kinds.all_gather_matmul import ALL_GATHER_MATMUL
from ascendir.conversion.nn_to_ascend.kinds.conv_activation import CONV_ACTIVATION
from ascendir.conversion.nn_to_ascend.kinds.elementwise import ELEMENTWISE
from ascendir.conversion.nn_to_ascend.kinds.ffn import FFN
from ascendir.conversion.nn_to_ascend.kinds.flash_attention import FLASH_ATTENTION
from ascendir.conversion.nn_to_ascend.kinds.matmul_all_reduce import MATMUL_ALL_REDUCE
from ascendir.conversion.nn_to_ascend.kinds.matmul_epilogue import MATMUL_EPILOGUE
from ascendir.conversion.nn_to_ascend.kinds.matmul_reduce_scatter import MATMUL_REDUCE_SCATTER
from ascendir.conversion.nn_to_ascend.kinds.moe_experts import MOE_EXPERTS
from ascendir.conversion.nn_to_ascend.kinds.moe_finalize import MOE_FINALIZE
from ascendir.conversion.nn_to_ascend.kinds.moe_gating import MOE_GATING
from ascendir.conversion.nn_to_ascend.kinds.norm_matmul import NORM_MATMUL
from ascendir.conversion.nn_to_ascend.kinds.ops.antiquant import ANTIQUANT
from ascendir.conversion.nn_to_ascend.kinds.ops.collectives import COLLECTIVES
from ascendir.conversion.nn_to_ascend.kinds.ops.conv import CONV2D
from ascendir.conversion.nn_to_ascend.kinds.ops.data_movement import DATA_MOVEMENT
from ascendir.conversion.nn_to_ascend.kinds.ops.elementwise import ELEMENTWISE_OPS
from ascendir.conversion.nn_to_ascend.kinds.ops.matmul import MATMUL
from ascendir.conversion.nn_to_ascend.kinds.ops.pool import POOL2D
from ascendir.conversion.nn_to_ascend.kinds.ops.reduction import REDUCTION
from ascendir.conversion.nn_to_ascend.kinds.ops.topk import TOPK
from ascendir.conversion.nn_to_ascend.template import Template
from ascendir.dialects import nn

# every kind an nn.fused region may have a template for; one the table lacks lowers op by op
FUSED_KINDS: dict[str, Template] = {
    t.kind: t for t in (
        MATMUL_EPILOGUE, FFN, FLASH_ATTENTION, NORM_MATMUL, ELEMENTWISE, CONV_ACTIVATION, ADD_RMS_NORM, MOE_GATING, MOE_FINALIZE,
        MATMUL_ALL_REDUCE, MATMUL_REDUCE_SCATTER, ALL_GATHER_MATMUL, MOE_EXPERTS,
    )
}
# the op families lowered op by op
OP_FAMILIES: tuple[Template, ...] = (ELEMENTWISE_OPS, MATMUL, REDUCTION, DATA_MOVEMENT, CONV2D, POOL2D, TOPK, COLLECTIVES, ANTIQUANT)
OP_TEMPLATES: dict[type[Operation], Template] = {cls: t for t in OP_FAMILIES for cls in t.ops}


def template_of(op: Operation) -> Template | None:
    """The template of an nn op or `nn.fused` region, or None (a region of a kind without one
    lowers op by op; an op without one cannot be lowered)."""
    if isinstance(op, nn.FusedOp):
        return FUSED_KINDS.get(op.kind.data)
    return OP_TEMPLATES.get(type(op))
