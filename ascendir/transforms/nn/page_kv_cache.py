"""`page-kv-cache{block_size=.. blocks=.. pool=..}`: the in-place KV cache in blocks (paged).

After cache-append (transforms/nn/cache_append.py) and fuse-attention, each layer's K and V cache
is an @main argument [batch, kv_heads, length, head_dim] written by `nn.cache_append` (axis 2)
and read by a flash_attention region. This pass gives it the paged layout of vLLM's
PagedAttention and CANN's IncreFlashAttention / PagedAttention (`blockTable`, `blockSize`):

* the argument becomes a pool of `pool` blocks [pool, kv_heads, block_size, head_dim]
  (CANN IFA's BNBD cache layout: one block of one K/V head is block_size contiguous rows, so
  the attention, which works one K/V head per item, loads a block with one DMA; vLLM's
  [blocks, block_size, heads, dim] would make it a strided one);
* one new @main argument `block_table` [batch, blocks] (i32, shared by every layer, as vLLM's
  block tables are): logical block n of sequence b is pool block table[b, n]; the host (api/
  generate.py) allocates blocks as the sequences grow and fills it;
* nn.cache_append becomes nn.paged_cache_append (the new rows written through the table, in
  place), and the region reads nn.paged_kv(pool, table) inside itself, so its template gathers
  the blocks through the table while it streams them (templates/flash_attention.py) and no
  gathered copy of the cache exists. The attention's recorded tile is dropped: its KV tile must
  now hold whole blocks or lie inside one (choose-tiling searches again).

A prefill step (an empty past: the graph returns the new K/V as the present, and its attention
reads them directly, as vLLM's prefill does) gets the same pools: each pair of `presents`
("past=present,..", @main's onnx names) whose past has no positions becomes a pool the present
is written into (nn.paged_cache_append at offset 0) and returned instead.

The present outputs become the pools (the next step's inputs). Like cache-append it changes
@main's signature, so only `ascendir generate --kv-block-size` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, ModuleOp, StringAttr, TensorType, i32
from xdsl.ir import Block, BlockArgument
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from ascendir.dialects import nn
from ascendir.dialects.ascend.attrs import TILING_ATTR
from ascendir.dialects.ascend.ops_scalar import ADDRESS_DATA_ATTR
from ascendir.errors import AscendirError

TABLE_NAME = "block_table"  # onnx.name of the block table argument (generate feeds it)
# a block size is a multiple of 16: CANN's PagedAttention "due to hardware restrictions,
# block_size % 16 == 0; 128 recommended" (docs/hardware-reference.md, paged KV cache; a block
# lands on the 16-row NZ fractal of L1). At most the flash template's widest KV tile (BC_CANDIDATES).
MIN_BLOCK = 16


def check_block_size(block_size: int) -> None:
    """Raises AscendirError unless `block_size` is a multiple of 16 (CANN PagedAttention's
    hardware restriction, a block loaded at a row of the 16-row NZ fractal) in 16 .. the flash
    template's widest KV tile (512)."""
    from ascendir.conversion.nn_to_ascend.templates.flash_attention import BC_CANDIDATES

    top = max(BC_CANDIDATES)
    if block_size % MIN_BLOCK or not MIN_BLOCK <= block_size <= top:
        raise AscendirError(f"--kv-block-size {block_size}: must be a multiple of {MIN_BLOCK} in {MIN_BLOCK}..{top} "
                            f"(CANN PagedAttention: block_size % 16 == 0; at most the widest KV tile, {top})")


@dataclass(frozen=True)
class PageKVCache(ModulePass):
    """Rewrite the in-place caches of @main into pools of blocks read through one block table."""

    name = "page-kv-cache"
    block_size: int = 16
    blocks: int = 1  # table width: blocks one sequence may hold
    pool: int = 1  # blocks in each pool
    presents: str = ""  # "past=present,..": the cache pairs by @main's onnx names (prefill)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_block_size(self.block_size)
        main = next((f for f in op.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"), None)
        if main is None or not main.body.blocks:
            return
        block = main.body.block
        ret = block.last_op
        appends = [o for o in block.ops if isinstance(o, nn.CacheAppendOp) and isinstance(o.cache, BlockArgument)]
        args = {n: a for n, a in zip(_names(main.arg_attrs), block.args) if n}
        results = {n: i for i, n in enumerate(_names(main.res_attrs)) if n}
        fresh = []  # (past argument, index of the present among the returned values): a prefill's empty caches
        for pair in filter(None, self.presents.split(",")):
            past, present = pair.split("=")
            arg = args.get(past)
            if arg is not None and present in results and len(nn.shape_of(arg)) == 4 and nn.shape_of(arg)[2] == 0 \
                    and not any(isinstance(u.operation, nn.CacheAppendOp) for u in arg.uses):
                fresh.append((arg, results[present]))
        if not appends and not fresh:
            raise AscendirError("page-kv-cache: no KV cache written in place (run cache-append first)")
        batch = nn.shape_of(appends[0].cache if appends else fresh[0][0])[0]
        table = block.insert_arg(TensorType(i32, [batch, self.blocks]), len(block.args))
        attrs = list(main.arg_attrs.data) if main.arg_attrs is not None else [DictionaryAttr({}) for _ in block.args[:-1]]
        attrs.append(DictionaryAttr({"onnx.name": StringAttr(TABLE_NAME), ADDRESS_DATA_ATTR: StringAttr("kv block table")}))
        for app in appends:
            self._page(app, table)
        for arg, i in fresh:
            new = ret.operands[i]
            _, h, _, d = nn.shape_of(new)
            pool = Rewriter.replace_value_with_new_type(arg, TensorType(new.type.element_type, [self.pool, h, self.block_size, d]))
            write = nn.PagedCacheAppendOp(pool, new, table, 0)
            Rewriter.insert_op(write, InsertPoint.before(ret))
            ret.operands = [*ret.operands[:i], write.result, *ret.operands[i + 1:]]
        main.arg_attrs = ArrayAttr(attrs)
        main.function_type = FunctionType.from_lists([a.type for a in block.args], [v.type for v in ret.operands])

    def _page(self, app: nn.CacheAppendOp, table: BlockArgument) -> None:
        b, h, length, d = nn.shape_of(app.cache)
        if app.axis.value.data != 2 or len(nn.shape_of(app.cache)) != 4:
            raise AscendirError(f"page-kv-cache: cache {list(nn.shape_of(app.cache))} appended along axis {app.axis.value.data}; "
                                "the paged layout needs [batch, kv_heads, positions, head_dim]")
        if length > self.blocks * self.block_size:
            raise AscendirError(f"page-kv-cache: {length} positions do not fit {self.blocks} blocks of {self.block_size}")
        readers = [u.operation for u in app.result.uses]
        for r in readers:
            if not (isinstance(r, func.ReturnOp) or (isinstance(r, nn.FusedOp) and r.kind.data.value == "flash_attention")):
                raise AscendirError(f"page-kv-cache: the cache of {app.name} is read by {r.name}, not by a flash attention: "
                                    "a paged cache is read only through its block table")
        pool_t = TensorType(app.cache.type.element_type, [self.pool, h, self.block_size, d])
        pool = Rewriter.replace_value_with_new_type(app.cache, pool_t)
        paged = nn.PagedCacheAppendOp(pool, app.new, table, app.offset.value.data)
        Rewriter.replace_op(app, paged)
        for r in {id(r): r for r in readers}.values():
            if isinstance(r, nn.FusedOp):
                _read_paged(r, paged.result, table, length)


def _names(attrs) -> list[str | None]:
    """The onnx.name of each argument or result (None where absent)."""
    if attrs is None:
        return []
    return [d.data["onnx.name"].data if "onnx.name" in d.data else None for d in attrs.data]


def _read_paged(region: nn.FusedOp, pool, table: BlockArgument, length: int) -> None:
    """Region operands that are `pool` get the pool's type, and the body reads them as
    nn.paged_kv(pool, table) (the table an operand of the region too)."""
    body: Block = region.body.block
    inputs = list(region.inputs)
    if table in inputs:
        t_arg = body.args[inputs.index(table)]
    else:
        region.operands = [*inputs, table]
        t_arg = body.insert_arg(table.type, len(body.args))
    for i, v in enumerate(list(region.inputs)):
        if v is not pool:
            continue
        arg = Rewriter.replace_value_with_new_type(body.args[i], pool.type)
        view = nn.PagedKVOp(arg, t_arg, length)
        Rewriter.insert_op(view, InsertPoint.at_start(body))
        arg.replace_uses_with_if(view.result, lambda use: use.operation is not view)
    for o in body.ops:
        if isinstance(o, nn.AttentionOp) and TILING_ATTR in o.attributes:
            del o.attributes[TILING_ATTR]  # searched again: its KV tile must hold whole blocks
