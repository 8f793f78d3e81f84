"""Data-movement templates: reshape and layout-preserving expand (free views), transpose, slice,
concat, expand, gather.

* reshape / identity / expand that keeps the element count: `ascend.view` of the GM buffer, no
  kernel.
* DMA kernels (GM -> UB by MTE2, UB -> GM by MTE3, one MTE2 -> MTE3 queue, no vector work):
  slice (strided GM subviews), concat (one block-cyclic loop per input into its column range of
  the output), transposes that keep the last dim when rows are ≥ 512 B ([t, C] slabs through
  rank-reducing subviews: the permutation is in the DMA addresses), gather
  (`ascend.gather_rows` with the index tile loaded into UB first; same MTE2 pipe, in order):

      prime MTE3->MTE2
      scf.for %t = %block_idx to ntiles step block_dim
        wait MTE3->MTE2;  GM->UB (MTE2);  set/wait MTE2->MTE3;  UB->GM (MTE3);  set MTE3->MTE2
      drain MTE3->MTE2

* other transposes: tiles of the input loaded as they lie, permuted in UB by `ascend.vtranspose`
  (V; vnchwconv-based), stored as tiles of the output (MTE2 -> V -> MTE3 queues, like
  elementwise.py).
* expand that replicates data: the elementwise template with `vcopy` (vector ops broadcast the
  size-1 dims of the loaded real extent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import memref
from xdsl.ir import Operation, SSAValue

from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.conversion.nn_to_ascend.templates.elementwise import MIN_SPLIT_BYTES, VectorMap, choose_tile, emit_vector_map, ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div

# Rows shorter than this go through vtranspose instead of one DMA per row (S2: GM transactions
# are split into 128/256/512 B; shorter bursts waste bandwidth).
MIN_DMA_ROW_BYTES = 512


# ----------------------------------------------------------------------------------------------
# views
# ----------------------------------------------------------------------------------------------
def lower_reshape(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.reshape → ascend.view (free)."""
    return [ctx.view(operands[0], shape(op.results[0]))]


def lower_identity(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.identity → the operand's buffer."""
    return [operands[0]]


def lower_expand(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.expand: a view when no element is replicated, else a broadcasting vcopy kernel."""
    x, res = operands[0], op.results[0]
    if math.prod(shape(x)) == math.prod(shape(res)):
        return [ctx.view(x, shape(res))]

    def compute(kb, ins, out, temps):
        kb.emit(ascend.vector_op("vcopy")(ins[0], out))

    return [emit_vector_map(ctx, "expand", [x], shape(res), elem(res), VectorMap(compute))]


# ----------------------------------------------------------------------------------------------
# transpose
# ----------------------------------------------------------------------------------------------
def collapse_perm(shp: Sequence[int], perm: Sequence[int]) -> tuple[list[int], list[int]]:
    """Drop unit dims and merge input dims that stay adjacent and in order under `perm`.

    Returns (collapsed input shape, collapsed perm); an identity perm collapses to rank ≤ 1.
    """
    keep = [d for d in range(len(shp)) if shp[d] != 1]
    p = [d for d in perm if shp[d] != 1]
    groups: list[list[int]] = []  # runs of input dims, in output order
    for d in p:
        if groups and groups[-1][-1] + 1 == d:
            groups[-1].append(d)
        else:
            groups.append([d])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])  # groups in input order
    new_shape = [math.prod(shp[d] for d in groups[g]) for g in order]
    pos = {g: i for i, g in enumerate(order)}
    new_perm = [pos[g] for g in range(len(groups))]
    assert len(keep) == sum(len(g) for g in groups)
    return new_shape, new_perm


def emit_transpose(ctx: LoweringContext, x: SSAValue, perm: Sequence[int]) -> SSAValue:
    """Launch a transpose kernel (or a view if the permutation does not move data); returns the
    new GM buffer of shape [shape(x)[p] for p in perm]."""
    shp = shape(x)
    out_shape = [shp[p] for p in perm]
    cshape, cperm = collapse_perm(shp, perm)
    if cperm == list(range(len(cperm))):
        return ctx.view(x, out_shape)
    el = elem(x)
    result = ctx.buffer(out_shape, el)
    rank = len(cshape)
    cout = [cshape[p] for p in cperm]
    xin, xout = ctx.view(x, cshape), ctx.view(result, cout)
    cores = vector_cores(ctx)
    budget = ub_budget(ctx)
    es = itemsize(el)
    dma_rows = cperm[-1] == rank - 1 and cshape[-1] * es >= MIN_DMA_ROW_BYTES

    if dma_rows:
        # [t, C] slabs along the longest moving dim j: contiguous rows in GM on both sides, only
        # the row stride differs, so the permutation is in the DMA addresses (no vector work)
        j = max(range(rank - 1), key=lambda d: cshape[d])
        align = max(1, 32 // es)
        tc = min(cshape[-1], max(align, budget // es // align * align))
        tile = [1] * rank
        tile[-1], tile[j] = tc, max(1, min(cshape[j], budget // (tc * es)))
        while (
            math.prod(ceil_div(s, t) for s, t in zip(cshape, tile)) < cores
            and tile[j] > 1
            and tile[j] * tc * es >= 2 * MIN_SPLIT_BYTES
        ):
            tile[j] = ceil_div(tile[j], 2)
        tile[j] = ceil_div(cshape[j], ceil_div(cshape[j], tile[j]))  # even tiles
    else:
        tile = list(cshape)
        bufs = 2
        while math.prod(tile) * es * bufs > budget and max(tile) > 1:  # (a UB under 2 elements: the fit check says so)
            d = max(range(rank), key=lambda i: tile[i])
            tile[d] = ceil_div(tile[d], 2)
        while (
            math.prod(ceil_div(s, t) for s, t in zip(cshape, tile)) < cores
            and math.prod(tile) * es >= 2 * MIN_SPLIT_BYTES
        ):
            d = max(range(rank), key=lambda i: tile[i])
            tile[d] = ceil_div(tile[d], 2)
    ntiles = math.prod(ceil_div(s, t) for s, t in zip(cshape, tile))
    block_dim = min(cores, ntiles)
    kb = KernelBuilder(ctx, ctx.name("transpose"), [xin.type, xout.type], CoreType.AIV, block_dim, ctx.current)
    gin, gout = kb.args
    if dma_rows:
        ub = kb.alloc([tile[j], tile[-1]], el, MemSpace.UB)
        j_out = cperm.index(j)
        q = kb.queue(Pipe.MTE2, Pipe.MTE3)
        with kb.tiles(ntiles) as t:
            offs, sizes = kb.grid(t, cshape, tile)
            q.acquire()
            kb.copy(kb.subview_keep(gin, offs, sizes, [j, rank - 1]), ub)
            q.handoff()
            out_offs, out_sizes = [offs[p] for p in cperm], [sizes[p] for p in cperm]
            kb.copy(ub, kb.subview_keep(gout, out_offs, out_sizes, [j_out, rank - 1]))
            q.release()
    else:
        ub_in = kb.alloc(tile, el, MemSpace.UB)
        ub_out = kb.alloc([tile[p] for p in cperm], el, MemSpace.UB)
        q_in = kb.queue(Pipe.MTE2, Pipe.V)
        q_out = kb.queue(Pipe.V, Pipe.MTE3)
        with kb.tiles(ntiles) as t:
            offs, sizes = kb.grid(t, cshape, tile)
            q_in.acquire()
            kb.copy(kb.subview(gin, offs, sizes), ub_in)
            q_in.handoff()
            q_out.acquire()
            kb.emit(ascend.VtransposeOp(ub_in, ub_out, cperm))
            q_in.release()
            q_out.handoff()
            kb.copy(ub_out, kb.subview(gout, [offs[p] for p in cperm], [sizes[p] for p in cperm]))
            q_out.release()
    ctx.launch(kb.finish(), [xin, xout])
    return result


def lower_transpose(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.transpose → a DMA or vtranspose kernel (a view when only unit dims move)."""
    return [emit_transpose(ctx, operands[0], list(op.perm.get_values()))]


# ----------------------------------------------------------------------------------------------
# DMA copy kernels: slice, concat
# ----------------------------------------------------------------------------------------------
def _dma_tile(ctx: LoweringContext, out_shape: Sequence[int], el) -> list[int]:
    return choose_tile(out_shape, [], [], el, [], ub_budget(ctx), vector_cores(ctx))


def contiguous_window(in_shape: Sequence[int], out_shape: Sequence[int], starts: Sequence[int],
                      steps: Sequence[int]) -> tuple[int, int] | None:
    """(offset, count) in elements when the slice of a row-major [in_shape] tensor is one
    contiguous run of it, else None. It is when every dim outside the innermost one the slice
    cuts is of size 1 in the result (the dims inside it are whole; unit steps only)."""
    if any(st != 1 for st in steps) or math.prod(out_shape) == 0:
        return None
    cuts = [i for i, (a, b) in enumerate(zip(in_shape, out_shape)) if a != b]
    if not cuts:
        return 0, math.prod(in_shape)
    if any(b != 1 for b in out_shape[:cuts[-1]]):
        return None
    strides = [math.prod(in_shape[i + 1:]) for i in range(len(in_shape))]
    return sum(s * st for s, st in zip(starts, strides)), math.prod(out_shape)


def _has_in_place_writes(op: Operation) -> bool:
    # A view reads its source when its consumers run, not where the slice stands: a kernel that
    # writes a buffer in place between the two (nn.cache_append) would change what they read.
    block = op.parent_block()
    return block is None or any(isinstance(o, (nn.CacheAppendOp, nn.PagedCacheAppendOp)) for o in block.walk())


def _window_view(ctx: LoweringContext, x: SSAValue, in_shape: Sequence[int], out_shape: Sequence[int],
                 offset: int, count: int) -> SSAValue:
    """Elements [offset, offset + count) of the GM buffer `x`, viewed as [out_shape]: a host
    memref.subview of its flat view, no kernel (a DMA launch of a contiguous slice costs a
    launch for bytes the consumer can read in place)."""
    flat = ctx.view(x, [math.prod(in_shape)])
    if count == math.prod(in_shape):
        return ctx.view(flat, out_shape)
    rtype = memref.SubviewOp.infer_result_type(flat.type, [offset], [count], [1])
    sub = ctx.emit(memref.SubviewOp.get(flat, [offset], [count], [1], rtype)).results[0]
    return ctx.view(sub, out_shape)


def lower_slice(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.slice (static starts, positive steps) → a free view when the slice is one contiguous run
    of its input (`contiguous_window`), else strided GM→UB→GM copies.

    Raises:
        AscendirError: for negative steps (reversal is not implemented yet).
    """
    x, res = operands[0], op.results[0]
    starts, steps = list(op.starts.get_values()), list(op.steps.get_values())
    out_shape = list(shape(res))
    el = elem(res)
    if any(s < 0 for s in steps):
        raise ctx.error(f"negative slice steps {steps} are not supported yet")
    in_shape = list(shape(x))
    window = contiguous_window(in_shape, out_shape, starts, steps)
    if window is not None and not _has_in_place_writes(op):
        return [_window_view(ctx, operands[0], in_shape, out_shape, *window)]
    result = ctx.buffer(out_shape, el)
    if math.prod(out_shape) == 0:
        return [result]
    pad = max(0, 2 - len(out_shape))
    in_shape, out_c = [1] * pad + in_shape, [1] * pad + out_shape
    starts, steps = [0] * pad + starts, [1] * pad + steps
    tile = _dma_tile(ctx, out_c, el)
    ntiles = math.prod(ceil_div(s, t) for s, t in zip(out_c, tile))
    block_dim = min(vector_cores(ctx), ntiles)
    xin, xout = ctx.view(x, in_shape), ctx.view(result, out_c)
    kb = KernelBuilder(ctx, ctx.name("slice"), [xin.type, xout.type], CoreType.AIV, block_dim, ctx.current)
    gin, gout = kb.args
    ub = kb.alloc(tile, el, MemSpace.UB)
    q = kb.queue(Pipe.MTE2, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        offs, sizes = kb.grid(t, out_c, tile)
        src_offs = [kb.add(s, kb.mul(o, st)) for s, o, st in zip(starts, offs, steps)]
        q.acquire()
        kb.copy(kb.subview(gin, src_offs, sizes, steps), ub)
        q.handoff()
        kb.copy(ub, kb.subview(gout, offs, sizes))
        q.release()
    ctx.launch(kb.finish(), [xin, xout])
    return [result]


def lower_concat(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.concat → one DMA kernel: per input, a block-cyclic loop copying it into its column
    range of the output viewed as [outer, A·inner]."""
    res = op.results[0]
    axis = op.axis.value.data
    out_shape = list(shape(res))
    el = elem(res)
    result = ctx.buffer(out_shape, el)
    outer, inner = math.prod(out_shape[:axis]), math.prod(out_shape[axis + 1 :])
    parts, col = [], 0  # (input, width, first output column)
    for x in operands:
        w = shape(x)[axis] * inner
        if w > 0 and outer > 0:
            parts.append((x, w, col))
        col += w
    if not parts:
        return [result]
    total = col
    tiles = [_dma_tile(ctx, [outer, w], el) for _, w, _ in parts]
    if max(t[0] for t in tiles) * max(t[1] for t in tiles) * itemsize(el) > ub_budget(ctx):
        # one UB buffer holds every part's tile: with the fewest rows of any tile, the widest
        # tile still fits (it had at least that many rows)
        rows = min(t[0] for t in tiles)
        tiles = [[rows, t[1]] for t in tiles]
    counts = [ceil_div(outer, t[0]) * ceil_div(w, t[1]) for (_, w, _), t in zip(parts, tiles)]
    block_dim = min(vector_cores(ctx), max(counts))
    ub_shape = [max(t[0] for t in tiles), max(t[1] for t in tiles)]
    args = [ctx.view(x, [outer, w]) for x, w, _ in parts] + [ctx.view(result, [outer, total])]
    kb = KernelBuilder(ctx, ctx.name("concat"), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gout = kb.args[-1]
    ub = kb.alloc(ub_shape, el, MemSpace.UB)
    q = kb.queue(Pipe.MTE2, Pipe.MTE3)
    for gin, (_, w, col), tile, n in zip(kb.args, parts, tiles, counts):
        ub_tile = kb.subview(ub, [0, 0], tile)
        with kb.tiles(n) as t:
            (r0, c0), (rsz, csz) = kb.grid(t, [outer, w], tile)
            q.acquire()
            kb.copy(kb.subview(gin, [r0, c0], [rsz, csz]), ub_tile)
            q.handoff()
            kb.copy(ub_tile, kb.subview(gout, [r0, kb.add(c0, col)], [rsz, csz]))
            q.release()
    ctx.launch(kb.finish(), args)
    return [result]


# ----------------------------------------------------------------------------------------------
# gather
# ----------------------------------------------------------------------------------------------
def emit_gather_rows(ctx: LoweringContext, table: SSAValue, indices: SSAValue) -> SSAValue:
    """out[i, :] = table[indices[i], :] for table [V, D] and n indices; returns GM [n, D]."""
    v, d = shape(table)
    n = math.prod(shape(indices))
    el, iel = elem(table), elem(indices)
    result = ctx.buffer([n, d], el)
    if n * d == 0:
        return result
    budget = ub_budget(ctx)
    tile = choose_tile([n, d], [[n, 1]], [iel], el, [], budget, vector_cores(ctx))
    tr, tc = tile
    ntiles = ceil_div(n, tr) * ceil_div(d, tc)
    block_dim = min(vector_cores(ctx), ntiles)
    args = [table, ctx.view(indices, [n, 1]), result]
    kb = KernelBuilder(ctx, ctx.name("gather"), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gtab, gidx, gout = kb.args
    ub_idx = kb.alloc([tr, 1], iel, MemSpace.UB)
    ub_rows = kb.alloc([tr, tc], el, MemSpace.UB)
    q = kb.queue(Pipe.MTE2, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        (r0, c0), (rsz, csz) = kb.grid(t, [n, d], [tr, tc])
        q.acquire()
        # indices and rows both move on MTE2, in order: the row DMA sees the loaded indices
        kb.copy(kb.subview(gidx, [r0, 0], [rsz, 1]), ub_idx)
        kb.emit(ascend.GatherRowsOp(kb.subview(gtab, [0, c0], [v, csz]), ub_idx, ub_rows))
        q.handoff()
        kb.copy(ub_rows, kb.subview(gout, [r0, c0], [rsz, csz]))
        q.release()
    ctx.launch(kb.finish(), args)
    return result


def lower_gather(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.gather: row gather along axis 0 of the table viewed as [V, D]; other axes move the
    gathered axis to the front with transpose kernels first (and back after)."""
    x, idx = operands
    res = op.results[0]
    shp = list(shape(x))
    axis = op.axis.value.data
    outer, v, inner = math.prod(shp[:axis]), shp[axis], math.prod(shp[axis + 1 :])
    n = math.prod(shape(idx))
    if outer == 1:
        rows = emit_gather_rows(ctx, ctx.view(x, [v, inner]), idx)
        return [ctx.view(rows, shape(res))]
    xt = emit_transpose(ctx, ctx.view(x, [outer, v, inner]), [1, 0, 2])
    rows = emit_gather_rows(ctx, ctx.view(xt, [v, outer * inner]), idx)
    back = emit_transpose(ctx, ctx.view(rows, [n, outer, inner]), [1, 0, 2])
    return [ctx.view(back, shape(res))]
