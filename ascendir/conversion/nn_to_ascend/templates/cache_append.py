"""nn.cache_append lowered in place: the result is the cache's own GM buffer, and one DMA kernel
writes the new rows into it (GM -> UB by MTE2, UB -> GM by MTE3, block-cyclic over the tiles
of new's [outer, rows · inner] view, as the concat kernel copies one of its inputs). What a
decode step moves for its cache is then new's bytes twice (read, write), not the whole past.
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div
from ascendir.conversion.nn_to_ascend.templates.elementwise import choose_tile, ub_budget, vector_cores
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe


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
