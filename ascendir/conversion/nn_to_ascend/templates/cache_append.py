"""nn.cache_append lowered in place: the result is the cache's own GM buffer, and one DMA kernel
writes the new rows into it (GM -> UB by MTE2, UB -> GM by MTE3, block-cyclic over the tiles
of new's [outer, rows · inner] view, as the concat kernel copies one of its inputs). What a
decode step moves for its cache is then new's bytes twice (read, write), not the whole past.

nn.paged_cache_append (a pool of blocks and a block table, transforms/nn/page_kv_cache.py) is
the same kernel per piece of a block: an item is (sequence, K/V head, logical block touched); it
reads the table entry of that block (`ascend.get_value`) and copies its rows of new into the
pool block, GM -> UB -> GM. A decode step touches one block per sequence and head (one row).
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div
from ascendir.conversion.nn_to_ascend.templates.elementwise import choose_tile, ub_budget, vector_cores
from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize


def lower_cache_append(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.cache_append → a DMA kernel writing `new` at `offset` along `axis` of `cache`; returns
    [cache's buffer] (in place)."""
    cache, new = operands
    axis, offset = op.axis.value.data, op.offset.value.data
    cshape, nshape = shape(cache), shape(new)
    el = elem(new)
    outer, inner = math.prod(cshape[:axis]), math.prod(cshape[axis + 1:])
    width, total, col = nshape[axis] * inner, cshape[axis] * inner, offset * inner
    if width == 0 or outer == 0:
        return [cache]
    tile = choose_tile([outer, width], [], [], el, [], ub_budget(ctx), vector_cores(ctx))
    count = ceil_div(outer, tile[0]) * ceil_div(width, tile[1])
    args = [ctx.view(new, [outer, width]), ctx.view(cache, [outer, total])]
    kb = KernelBuilder(ctx, ctx.name("cache_append"), [a.type for a in args], CoreType.AIV, min(vector_cores(ctx), count), ctx.current)
    gin, gout = kb.args
    ub = kb.alloc(tile, el, MemSpace.UB)
    q = kb.queue(Pipe.MTE2, Pipe.MTE3)
    with kb.tiles(count) as t:
        (r0, c0), (rsz, csz) = kb.grid(t, [outer, width], tile)
        q.acquire()
        kb.copy(kb.subview(gin, [r0, c0], [rsz, csz]), ub)
        q.handoff()
        kb.copy(ub, kb.subview(gout, [r0, kb.add(c0, col)], [rsz, csz]))
        q.release()
    ctx.launch(kb.finish(), args)
    return [cache]


def lower_paged_cache_append(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.paged_cache_append → a DMA kernel writing new [B, Hkv, S, D] at positions [offset,
    offset + S) of each sequence into the pool [blocks, Hkv, block_size, D] through the table
    [B, max_blocks]; returns [pool's buffer] (in place).

    Raises:
        AscendirError: a block of block_size x D elements that does not fit the UB budget."""
    pool, new, table = operands
    b, h, rows, d = shape(new)
    bs = shape(pool)[2]
    el = elem(new)
    offset = op.offset.value.data
    if bs * d * itemsize(el) > ub_budget(ctx):
        raise ctx.error(f"a KV block of {bs} positions x {d} ({bs * d * itemsize(el)} bytes) does not fit the "
                        f"{ub_budget(ctx)} bytes of UB the copy may use: take a smaller --kv-block-size")
    if rows == 0 or b == 0:
        return [pool]
    c0, c1 = offset // bs, (offset + rows - 1) // bs  # logical blocks touched
    nblk = c1 - c0 + 1
    count = b * h * nblk
    args = [ctx.view(new, [b * h * rows, d]), ctx.view(pool, [shape(pool)[0] * h * bs, d]), table]
    kb = KernelBuilder(ctx, ctx.name("paged_cache_append"), [a.type for a in args], CoreType.AIV,
                       min(vector_cores(ctx), count), ctx.current)
    gin, gout, gtab = kb.args
    ub = kb.alloc([min(bs, rows), d], el, MemSpace.UB)
    q = kb.queue(Pipe.MTE2, Pipe.MTE3)
    with kb.tiles(count) as t:
        (bb, hh, c), _ = kb.grid(t, [b, h, nblk], [1, 1, 1])
        c = kb.add(c, c0)
        # positions [p0, p1) of block c: new's rows from offset on, the block's from c·bs on
        p0 = kb.emit(arith.MaxSIOp(kb.idx(offset), kb.idx(kb.mul(c, bs)))).results[0] if nblk > 1 else offset
        n = kb.sub(kb.min(offset + rows, kb.mul(kb.add(c, 1), bs)), p0) if nblk > 1 else rows
        phys = kb.emit(ascend.GetValueOp(gtab, [kb.idx(bb), kb.idx(c)])).result
        src = kb.add(kb.mul(kb.add(kb.mul(bb, h), hh), rows), kb.sub(p0, offset))
        dst = kb.add(kb.mul(kb.add(kb.mul(phys, h), hh), bs), kb.rem(p0, bs))
        q.acquire()
        kb.copy(kb.subview(gin, [src, 0], [n, d]), ub)
        q.handoff()
        kb.copy(ub, kb.subview(gout, [dst, 0], [n, d]))
        q.release()
    ctx.launch(kb.finish(), args)
    return [pool]
