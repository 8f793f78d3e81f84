"""Fused regions of the `nn` dialect: `nn.fused` (IsolatedFromAbove, one template per kind) and
its terminator `nn.yield`."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsolatedFromAbove, IsTerminator
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from ascendir.dialects.enum_attr import AngleEnum


class FusedKind(StrEnum):
    """The template that lowers an `nn.fused` region, one per fusion pass."""

    MATMUL_EPILOGUE = "matmul_epilogue"  # matmul + bias / residual add + activation
    FFN = "ffn"  # up (and gate) matmul, activation, down matmul
    FLASH_ATTENTION = "flash_attention"  # nn.attention, tiled online softmax
    NORM_MATMUL = "norm_matmul"  # layer / RMS norm feeding matmuls
    CONV_ACTIVATION = "conv_activation"  # conv2d + activation
    ELEMENTWISE = "elementwise"  # a chain of elementwise ops
    ADD_RMS_NORM = "add_rms_norm"  # residual add + RMS norm of the sum
    MOE_GATING = "moe_gating"  # MoE router: softmax / sigmoid + top-k [+ renormalisation]
    MOE_FINALIZE_ROUTING = "moe_finalize_routing"  # MoE weighted combine of the k expert outputs [+ shared]
    MATMUL_ALL_REDUCE = "matmul_all_reduce"  # MC2: row-parallel matmul [+ bias] + all_reduce [+ residual]
    MATMUL_REDUCE_SCATTER = "matmul_reduce_scatter"  # MC2: row-parallel matmul [+ bias] + reduce_scatter of its rows
    ALL_GATHER_MATMUL = "all_gather_matmul"  # MC2: all_gather of row shards + matmul [+ bias]
    MOE_EXPERTS = "moe_experts"  # MoE routed experts: init-routing, grouped MatMul, SwiGLU, grouped MatMul


@irdl_attr_definition
class FusedKindAttr(AngleEnum, EnumAttribute[FusedKind]):
    """`#nn.fused_kind<ffn>`."""

    name = "nn.fused_kind"


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of an `nn.fused` body: the fused op's results."""

    name = "nn.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator())
    assembly_format = "$values attr-dict `:` type($values)"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class FusedOp(IRDLOperation):
    """A group of nn ops lowered by one template: `kind` (#nn.fused_kind<ffn>) names the
    template. Its meaning is its body (block arguments = operands).

        %y = nn.fused(%x, %w) {kind = #nn.fused_kind<matmul_epilogue>} : (...) -> ... {
        ^bb0(%a: tensor<...>, %b: tensor<...>):
          ...
          nn.yield %r : tensor<...>
        }

    Raises (verify): block argument types that differ from the operand types, a body not ending
    in nn.yield of the result types."""

    name = "nn.fused"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    kind = prop_def(FusedKindAttr)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"

    def __init__(self, kind: str | FusedKind, inputs: Sequence[SSAValue], result_types: Sequence[Attribute], body: Region):
        super().__init__(
            operands=[list(inputs)], result_types=[list(result_types)], properties={"kind": FusedKindAttr(FusedKind(kind))}, regions=[body]
        )

    def verify_(self) -> None:
        block = self.body.block
        if tuple(block.arg_types) != tuple(v.type for v in self.inputs):
            raise VerifyException("nn.fused: block argument types must equal the operand types")
        term = block.last_op
        if not isinstance(term, YieldOp) or tuple(v.type for v in term.values) != tuple(r.type for r in self.outputs):
            raise VerifyException("nn.fused: body must end in nn.yield of the result types")
