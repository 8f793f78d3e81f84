"""The KV cache in place: `nn.cache_append`.

    %present = nn.cache_append %cache, %new {axis = 2 : i64, offset = 6 : i64}
                 : (tensor<1x2x7x16xf32>, tensor<1x2x1x16xf32>) -> tensor<1x2x7x16xf32>

The result is `cache` with positions [offset, offset + new's size) along `axis` replaced by
`new`; the other positions are `cache`'s (the past). It is what `Concat(past, new)` computes
when `cache` holds the past in its first `offset` positions, with one difference of cost: lowered
in place (the result is `cache`'s own buffer), it writes only `new`'s rows, while the concat
copies the whole past into a fresh buffer every step. The cache-append pass introduces it for the
past/present pairs of a KV-cache decoder (transforms/nn/cache_append.py).

The paged layout (vLLM's PagedAttention; CANN IncreFlashAttention's `blockTable` / `blockSize`
with a BNBD cache) keeps the cache as a pool of fixed-size blocks, `pool` [num_blocks, kv_heads,
block_size, head_dim], and a block table [batch, max_blocks] (i32) mapping a sequence's logical
block n (positions n·block_size ..) to a physical block of the pool:

    %pool2 = nn.paged_cache_append %pool, %new, %table {offset = 40 : i64}
    %k = nn.paged_kv %pool2, %table {length = 41 : i64}   // [batch, kv_heads, 41, head_dim]

`nn.paged_cache_append` writes new [batch, kv_heads, rows, head_dim] at positions [offset,
offset + rows) of each sequence, in place; `nn.paged_kv` is the logical cache a reader sees (its
first `length` positions, gathered through the table). The page-kv-cache pass introduces both
(transforms/nn/page_kv_cache.py); the attention reads the pool through the table block by block
(templates/flash_attention.py), never a gathered copy.
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


def _paged(pool_t, table_t, batch: int, heads: int, dim: int, where: str) -> None:
    pool, table = list(pool_t.get_shape()), list(table_t.get_shape())
    if len(pool) != 4 or len(table) != 2:
        raise VerifyException(f"{where}: pool [num_blocks, kv_heads, block_size, head_dim] and table [batch, max_blocks], "
                              f"got {pool} and {table}")
    if str(table_t.element_type) != "i32":
        raise VerifyException(f"{where}: the block table holds i32, got {table_t.element_type}")
    if table[0] != batch or pool[1] != heads or pool[3] != dim:
        raise VerifyException(f"{where}: pool {pool} and table {table} do not match [batch {batch}, kv_heads {heads}, head_dim {dim}]")


@irdl_op_definition
class PagedCacheAppendOp(NNOp):
    """`pool` with new [B, Hkv, rows, D] written at positions [offset, offset + rows) of each
    sequence b, position p in block table[b, p // block_size], row p % block_size (in place)."""

    name = "nn.paged_cache_append"
    pool = operand_def(TensorType)
    new = operand_def(TensorType)
    table = operand_def(TensorType)
    result = result_def(TensorType)
    offset = prop_def(IntegerAttr)

    def __init__(self, pool: SSAValue, new: SSAValue, table: SSAValue, offset: int):
        super().__init__(operands=[pool, new, table], result_types=[pool.type], properties={"offset": IntegerAttr(offset, i64)})

    def verify_semantics(self) -> None:
        new = shape_of(self.new)
        if len(new) != 4:
            raise VerifyException(f"nn.paged_cache_append: new rows [batch, kv_heads, rows, head_dim], got {list(new)}")
        _paged(self.pool.type, self.table.type, new[0], new[1], new[3], "nn.paged_cache_append")
        if self.pool.type != self.result.type or self.new.type.element_type != self.pool.type.element_type:
            raise VerifyException("nn.paged_cache_append: the result has the pool's type, new rows its element type")
        offset, blocks, bs = self.offset.value.data, shape_of(self.table)[1], shape_of(self.pool)[2]
        if offset < 0 or offset + new[2] > blocks * bs:
            raise VerifyException(f"nn.paged_cache_append: positions [{offset}, {offset + new[2]}) outside the "
                                  f"{blocks} x {bs} a table row addresses")


@irdl_op_definition
class PagedKVOp(NNOp):
    """The first `length` positions of each sequence's cache, [B, Hkv, length, D], read through
    the block table: result[b, h, p] = pool[table[b, p // block_size], h, p % block_size]."""

    name = "nn.paged_kv"
    pool = operand_def(TensorType)
    table = operand_def(TensorType)
    result = result_def(TensorType)
    length = prop_def(IntegerAttr)

    def __init__(self, pool: SSAValue, table: SSAValue, length: int):
        nb, h, bs, d = shape_of(pool)
        b = shape_of(table)[0]
        super().__init__(operands=[pool, table], result_types=[TensorType(pool.type.element_type, [b, h, length, d])],
                         properties={"length": IntegerAttr(length, i64)})

    def verify_semantics(self) -> None:
        out = shape_of(self.result)
        _paged(self.pool.type, self.table.type, out[0], out[1], out[3], "nn.paged_kv")
        blocks, bs = shape_of(self.table)[1], shape_of(self.pool)[2]
        if out[2] != self.length.value.data or not 0 < out[2] <= blocks * bs:
            raise VerifyException(f"nn.paged_kv: length {self.length.value.data} (result {list(out)}) outside the "
                                  f"{blocks} x {bs} a table row addresses")
