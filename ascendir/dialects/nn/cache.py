"""The KV cache in place: `nn.cache_append`.

    %present = nn.cache_append %cache, %new {axis = 2 : i64, offset = 6 : i64}
                 : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>

The result is `cache` with positions [offset, offset + new's size) along `axis` replaced by
`new`; the other positions are `cache`'s (the past). It is what `Concat(past, new)` computes
when `cache` holds the past in its first `offset` positions, with one difference of cost: lowered
in place (the result is `cache`'s own buffer), it writes only `new`'s rows, while the concat
copies the whole past into a fresh buffer every step. The cache-append pass introduces it for the
past/present pairs of a KV-cache decoder (transforms/nn/cache_append.py).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.nn.ops import NNOp, shape_of


@irdl_op_definition
class CacheAppendOp(NNOp):
    """`cache` with `new` written at `offset` along `axis` (see the module docstring)."""

    name = "nn.cache_append"
    cache = operand_def(TensorType)
    new = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    offset = prop_def(IntegerAttr)

    def __init__(self, cache: SSAValue, new: SSAValue, axis: int, offset: int):
        super().__init__(operands=[cache, new], result_types=[cache.type],
                         properties={"axis": IntegerAttr(axis, i64), "offset": IntegerAttr(offset, i64)})

    def verify_semantics(self) -> None:
        cache, new = shape_of(self.cache), shape_of(self.new)
        axis, offset = self.axis.value.data, self.offset.value.data
        if self.cache.type != self.result.type:
            raise VerifyException("nn.cache_append: the result has the cache's type")
        if self.new.type.element_type != self.cache.type.element_type:
            raise VerifyException("nn.cache_append: new rows and cache differ in element type")
        if len(new) != len(cache) or not 0 <= axis < len(cache):
            raise VerifyException(f"nn.cache_append: axis {axis} and ranks {len(cache)}, {len(new)} do not match")
        if any(a != b for i, (a, b) in enumerate(zip(cache, new)) if i != axis):
            raise VerifyException(f"nn.cache_append: new {list(new)} does not match cache {list(cache)} outside axis {axis}")
        if offset < 0 or offset + new[axis] > cache[axis]:
            raise VerifyException(f"nn.cache_append: positions [{offset}, {offset + new[axis]}) outside the cache's {cache[axis]}")
