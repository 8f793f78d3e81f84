"""Weight-only quantized matmul of the `nn` dialect: `nn.weight_quant_matmul` (antiquant).

    %y = nn.weight_quant_matmul %x, %w, %scale, %offset {group_size = 32 : i64}
           : (tensor<1x4096xf16>, tensor<4096x11008xi4>, tensor<128x11008xf16>,
              tensor<128x11008xf16>) -> tensor<1x11008xf16>

y = x @ ((float(w) + offset) · scale), the scale and offset of group g applying to rows
[g · group_size, (g + 1) · group_size) of w (ops-transformer's WeightQuantBatchMatmulV2:
`antiquantScale`, `antiquantOffset`, `antiquantGroupSize`). The weight stays narrow (int8 or
packed int4) in GM, so only its narrow bytes cross HBM; the template dequantises it on chip
(kinds/ops/antiquant.py). Produced by the ONNX importer for com.microsoft MatMulNBits (4 / 8 bits)
and for a weight-only QDQ MatMul (DequantizeLinear of an int8 weight initializer, float
activations).

Operands: x [..., K] float (f16 / bf16 / f32); w [K, N] i8 or i4 (signed; unsigned weights are
shifted at import and the shift folded into the offset); scale [ceil(K / group_size), N] of x's
type; offset (optional) like scale. Result [..., N] of x's type. The dequantised weight is
computed in x's type: (w + offset) is an exact small integer whenever the offset is one (every
ONNX zero point), then one rounding of the product with the scale.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType, i8, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.nn.ops import NNOp, shape_of

I4 = IntegerType(4)


@irdl_op_definition
class WeightQuantMatmulOp(NNOp):
    """x [..., K] @ dequantise(w [K, N] i8/i4, scale, offset per group of `group_size` rows) ->
    [..., N] in x's type (see the module docstring)."""

    name = "nn.weight_quant_matmul"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    scale = operand_def(TensorType)
    offset = opt_operand_def(TensorType)
    result = result_def(TensorType)
    group_size = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, w: SSAValue, scale: SSAValue, offset: SSAValue | None, group_size: int):
        shape = [*shape_of(x)[:-1], shape_of(w)[1]]
        super().__init__(operands=[x, w, scale, offset], result_types=[TensorType(x.type.element_type, shape)],
                         properties={"group_size": IntegerAttr(group_size, i64)})

    @property
    def groups(self) -> int:
        return -(-shape_of(self.weight)[0] // self.group_size.value.data)

    def verify_semantics(self) -> None:
        x, w, s = shape_of(self.input), shape_of(self.weight), shape_of(self.scale)
        g = self.group_size.value.data
        if len(w) != 2 or not x or x[-1] != w[0]:
            raise VerifyException(f"nn.weight_quant_matmul: x {list(x)} and w {list(w)} are not [..., K] x [K, N]")
        if self.weight.type.element_type not in (i8, I4):
            raise VerifyException(f"nn.weight_quant_matmul: the weight must be i8 or i4, got {self.weight.type.element_type}")
        if g <= 0:
            raise VerifyException(f"nn.weight_quant_matmul: group_size {g} must be positive")
        el = self.input.type.element_type
        for what, v in (("scale", self.scale), ("offset", self.offset)):
            if v is None:
                continue
            if shape_of(v) != (self.groups, w[1]) or v.type.element_type != el:
                raise VerifyException(f"nn.weight_quant_matmul: {what} must be [{self.groups}, {w[1]}] of {el}, got {v.type}")
        if shape_of(self.result) != (*x[:-1], w[1]) or self.result.type.element_type != el:
            raise VerifyException("nn.weight_quant_matmul: the result is [..., N] of x's type")
        if 0 in x or 0 in w or 0 in s:
            raise VerifyException("nn.weight_quant_matmul: zero-size operands are not supported")
