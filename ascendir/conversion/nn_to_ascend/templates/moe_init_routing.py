"""ops-transformer's MoeInitRouting: the (token, k) pairs of a MoE layer sorted by expert.

    ids [R] i64 (R = tokens·k, each pair's expert, in (token, k) order)
      -> sorted_rows [R] i64   pair of sorted position j (stable: pairs of one expert keep their order)
         dest [R] i64          sorted position of pair p (ops-transformer's expanded_row_idx)
         group_list [E+1] i64  offsets: expert e's pairs are sorted positions group_list[e] .. group_list[e+1]-1

A counting sort by the scalar unit on one AIV, the arrays in UB:

    GM->UB ids (MTE2);  MTE2->S
    offs[0 .. E] = 0;  for p: offs[ids[p] + 1] += 1;  for e: offs[e + 1] += offs[e]     (S)
    cur[e] = offs[e];  for p: j = cur[ids[p]]; cur[ids[p]] = j + 1; sorted[j] = p; dest[p] = j
    S->MTE3;  UB->GM sorted_rows, dest, group_list (MTE3)

Scalar reads are `ascend.get_value` (UB), writes `memref.store`. Approximation: ops-transformer
sorts with the vector unit's sort instructions over many cores; a scalar counting sort on one
core costs ~R·10 scalar cycles, more than the vector sort at prefill sizes.

When the arrays do not fit one AIV's UB (DeepSeek-V3 prefill: 16,384 pairs), the sort runs on C
AIVs in two launches (the launch boundary is the all-core barrier between them), core c on the
pairs c·S .. (c+1)·S - 1:

    moe_init_routing_hist:  GM->UB ids slice;  cnt[e] = pairs of the slice to e (S);  UB->GM hist[c, :]
    moe_init_routing:       GM->UB ids slice, hist [C, E];
                            offs[e+1] = offs[e] + sum_c hist[c, e];  cur[e] = offs[e] + sum_{c' < c} hist[c', e]
                            per pair p of the slice: j = cur[ids[p]]++;  dest[p] = j;  sorted_rows[j] = p (a
                            scalar store to GM);  UB->GM dest slice;  core 0: UB->GM group_list

Same outputs as the one-core sort (stable: slice c's pairs of expert e follow those of slices
before it). Approximation: the scattered sorted_rows stores are costed as scalar stores (ops-
transformer scatters with MTE3).

With the tokens x [T, H] (T = R / k, each token's k pairs consecutive: (token, k) order), the
kernels also write the expert-major rows expanded_x [R, H], each row gathered from x straight
away (ops-transformer's MoeInitRoutingV2 / V3: expanded_x[j] = x[sorted_rows[j] / k], the
"scatter mode" of cann-samples' MoeInitRoutingV3 write-up, Samples/2_Performance/
moe_init_routing_story; the tokens repeated k times never exist in GM). An AIV moves a run of sorted positions j in chunks: src = sorted_rows[j] / k (S, into a
small UB array), x rows src GM->UB (MTE2, ascend.gather_rows), UB->GM expanded_x (MTE3):

    one launch on C AIVs (C = min(AIVs, R)): every AIV sorts all pairs as above (the same
      scalar work the one-AIV sort does, so no all-core barrier is needed), AIV 0 writes
      sorted_rows, dest, group_list, and AIV c moves positions c·Rc .. (c+1)·Rc - 1;
    the multi-core sort: a third launch (moe_init_routing_rows) reads sorted_rows back from GM
      and moves the rows. The launch boundaries stand for the all-core barriers (SyncAll)
      between MoeInitRoutingV2's sort, SrcToDst and scatter phases.

Scatter mode (rows read by source, written contiguously) rather than gather mode (each token
read once, written to its k positions): the cost of a row gather does not depend on which rows
it reads, so a timing-only run, whose sort sees no ids, times what the run with data does.

In a timing-only run no data moves, so the kernel's outputs would be zeros (every pair to
expert 0): its launch carries `moe_block` (the block's TopK node), and the interpreter fills the
outputs from the run's routing for that block (sim/chip.py), so the grouped MatMul after it
reads the routing of the run's inputs or of --moe-routing.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import StringAttr, i64
from xdsl.ir import Attribute, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, round_up
from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dialects.ascend.ops_scalar import MOE_BLOCK_ATTR
from ascendir.dtypes import itemsize

KIND = "moe_init_routing"
ALIGN_SLACK = 8 * 32  # UB bytes lost to the 32-byte alignment of the kernel's (at most 8) buffers


def ub_bytes(rows: int, experts: int) -> int:
    """UB bytes the kernel needs for `rows` routed pairs over `experts` (ids, sorted rows and
    their positions [rows], the offsets [E+1] and cursors [E], i64)."""
    return (3 * rows + 2 * experts + 1) * 8


def row_reserve(hidden: int, el: Attribute | None) -> int:
    """UB bytes kept for the rows of x in the one-launch kernel (one row, or 4 KiB of it when it
    is longer, its index array, the buffers' alignment): 0 without x."""
    return 0 if el is None else round_up(min(hidden * itemsize(el), 4096), 32) + 64 + ALIGN_SLACK


def split(rows: int, experts: int, cores: int, ub: int) -> tuple[int, int]:
    """(C, S) of the multi-core sort: C cores with S pairs each (the last fewer), S a multiple of
    4 (32 B of i64, the GM alignment of each core's dest slice).

    A core's scalar work is ~S pair placements plus ~E·C offset sums, so C ~ sqrt(R / E)
    balances the two (16,384 pairs over 256 experts: 8 cores); more when the slices would not fit
    UB (`ub` bytes), at most `cores`."""
    c = max(1, min(cores, round(math.sqrt(rows / max(experts, 1)))))
    while c < cores and _ub(rows, experts, c) > ub:
        c += 1
    return _cores_slice(rows, c)


def _cores_slice(rows: int, c: int) -> tuple[int, int]:
    s = -(-rows // c)
    s = -(-s // 4) * 4
    return -(-rows // s), s


def _ub(rows: int, experts: int, c: int) -> int:
    c, s = _cores_slice(rows, c)
    return (2 * s + c * experts + 2 * experts + 1) * 8


def multi_ub_bytes(rows: int, experts: int, cores: int, ub: int) -> int:
    """UB bytes one AIV of the multi-core sort needs (ids and dest slices [S], hist [C, E], the
    offsets [E+1] and cursors [E], i64)."""
    return _ub(rows, experts, split(rows, experts, cores, ub)[0])


def fits(rows: int, experts: int, ub: int, cores: int, reserve: int = 0) -> bool:
    """Whether MoeInitRouting of `rows` pairs over `experts` runs: in one launch or on `cores`
    (`reserve`: UB bytes its rows of x need in the one launch, row_reserve; 0 without x)."""
    return (ub_bytes(rows, experts) + reserve <= ub
            or multi_ub_bytes(rows, experts, cores, ub) <= ub)


def emit_moe_init_routing(ctx: LoweringContext, ids: SSAValue, experts: int, block: str,
                          last_unused: bool = False) -> tuple[SSAValue, SSAValue, SSAValue]:
    """Launch the kernel(s) of the module docstring on GM ids (R i64 expert ids, any shape):
    one AIV when its arrays fit its UB, else the two multi-core launches; returns (sorted_rows
    [R], dest [R], group_list [E+1]), new GM i64 buffers. With `last_unused` (expert-parallel
    receive buffers: id E-1 marks an unused row) the group list stops before that expert: [E]
    entries, its rows sorted last and left out of every group.

    Raises: AscendirError when not even the multi-core sort's arrays fit one AIV's UB."""
    return _emit(ctx, ids, experts, block, last_unused, None, 1)[:3]


def emit_moe_init_routing_x(ctx: LoweringContext, ids: SSAValue, x: SSAValue, top_k: int, experts: int, block: str,
                            last_unused: bool = False) -> tuple[SSAValue, SSAValue, SSAValue]:
    """MoeInitRouting with its expanded_x (module docstring) on GM ids [R] i64 ((token, k) order)
    and the tokens x [T, H] (T = R / top_k, any element type); returns (expanded_x [R, H] of x's
    type, dest [R], group_list [E+1] or [E] with `last_unused`, as emit_moe_init_routing): row
    dest[p] of expanded_x is row p / top_k of x. One launch on min(AIVs, R) AIVs when the arrays
    and a row of x (4 KiB of it at most) fit a UB, else the multi-core launches and the gather.

    Raises: AscendirError when not even the multi-core sort's arrays fit one AIV's UB."""
    _, dest, group_list, xs = _emit(ctx, ids, experts, block, last_unused, x, top_k)
    return xs, dest, group_list


def _emit(ctx: LoweringContext, ids: SSAValue, experts: int, block: str, last_unused: bool, x: SSAValue | None,
          top_k: int) -> tuple[SSAValue, SSAValue, SSAValue, SSAValue | None]:
    rows = 1
    for d in shape(ids):
        rows *= d
    reserve = row_reserve(shape(x)[1], elem(x)) if x is not None else 0
    need, budget = ub_bytes(rows, experts) + reserve, ctx.target.capacity("ub")
    if need > budget:
        return _emit_multi_core(ctx, ids, rows, experts, block, last_unused, x, top_k)
    cores = 1 if x is None else max(1, min(ctx.target.num_aiv, rows))
    per = -(-rows // cores)
    cores = -(-rows // per) if rows else 1
    groups = experts + 1 - last_unused
    sorted_rows, dest, group_list = ctx.buffer([rows], i64), ctx.buffer([rows], i64), ctx.buffer([groups], i64)
    args = [ctx.view(ids, [rows]), sorted_rows, dest, group_list]
    xs = None
    if x is not None:
        xs = ctx.buffer([rows, shape(x)[1]], elem(x))
        args += [x, xs]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIV, cores, ctx.current)
    g_ids, g_sorted, g_dest, g_offs = kb.args[:4]
    u_ids, u_sorted, u_dest = (kb.alloc([rows], i64, MemSpace.UB) for _ in range(3))
    u_offs, u_cur = kb.alloc([experts + 1], i64, MemSpace.UB), kb.alloc([experts], i64, MemSpace.UB)
    rows_out = _RowsOut(kb, *kb.args[4:], top_k, budget - need + reserve - ALIGN_SLACK, per) if x is not None else None

    load, store = _scalar(kb)

    kb.copy(g_ids, u_ids)
    kb.handoff(Pipe.MTE2, Pipe.S)
    with kb.loop(0, experts + 1, 1) as e:
        store(0, u_offs, e)
    with kb.loop(0, rows, 1) as p:
        slot = kb.add(load(u_ids, p), 1)
        store(kb.add(load(u_offs, slot), 1), u_offs, slot)
    with kb.loop(0, experts, 1) as e:
        nxt = kb.add(e, 1)
        store(kb.add(load(u_offs, nxt), load(u_offs, e)), u_offs, nxt)
        store(load(u_offs, e), u_cur, e)
    with kb.loop(0, rows, 1) as p:
        ex = load(u_ids, p)
        j = load(u_cur, ex)
        store(kb.add(j, 1), u_cur, ex)
        store(p, u_sorted, j)
        store(j, u_dest, p)
    kb.handoff(Pipe.S, Pipe.MTE3)

    def outputs() -> None:
        for u, g in ((u_sorted, g_sorted), (u_dest, g_dest), (kb.subview(u_offs, [0], [groups]) if last_unused else u_offs, g_offs)):
            kb.copy(u, g)

    if cores > 1:  # every AIV sorted; one writes the outputs
        kb.if_else(kb.eq(kb.block_idx, 0), outputs, lambda: None)
    else:
        outputs()
    if rows_out is not None:
        j0 = kb.mul(kb.block_idx, per)
        rows_out.emit(u_sorted, j0, j0, kb.min(per, kb.sub(rows, j0)))
    kernel = kb.finish()
    kernel.attributes[MOE_BLOCK_ATTR] = StringAttr(block)
    ctx.launch(kernel, args)
    return sorted_rows, dest, group_list, xs


class _RowsOut:
    """Rows j of expanded_x = x[sorted_rows[j] / k] on one AIV (module docstring): chunks of `tr`
    rows of up to `hs` elements; per chunk the scalar unit writes the source rows into a UB index
    array (queue S -> MTE2), MTE2 gathers them (ascend.gather_rows), MTE3 writes them out (queue
    MTE2 -> MTE3).

    g_x [T, H], g_xs [R, H] (kernel arguments); `budget`: UB bytes left for the row buffer and
    the index array; `most`: the most rows one AIV takes."""

    def __init__(self, kb: KernelBuilder, g_x: SSAValue, g_xs: SSAValue, top_k: int, budget: int, most: int):
        hidden, el = g_x.type.get_shape()[1], g_x.type.element_type
        isz = itemsize(el)
        unit = max(1, 32 // isz)
        hs = hidden
        while round_up(hs * isz, 32) + 64 > budget and hs > unit:
            hs = max(unit, round_up(hs // 2, unit))
        row = round_up(hs * isz, 32) + 8  # a row and its index
        if row + 56 > budget:
            raise kb.ctx.error(f"moe_init_routing: {unit} elements of a row of x need {row + 56} bytes of UB, {budget} are left")
        self.kb, self.g_x, self.g_xs, self.k, self.hidden, self.hs = kb, g_x, g_xs, top_k, hidden, hs
        self.tr = max(1, min(most, (budget - 56) // row))
        self.ub = kb.alloc([self.tr, hs], el, MemSpace.UB)
        self.idx = kb.alloc([self.tr, 1], i64, MemSpace.UB)
        self.q_idx, self.q = kb.queue(Pipe.S, Pipe.MTE2), kb.queue(Pipe.MTE2, Pipe.MTE3)

    def emit(self, u_sorted: SSAValue, at: Index, j0: Index, count: Index) -> None:
        """Positions j0 .. j0+count-1, whose sorted_rows entries u_sorted (UB) holds from index
        `at` on."""
        kb, hs, tr = self.kb, self.hs, self.tr
        load, store = _scalar(kb)
        tokens = self.g_x.type.get_shape()[0]
        with kb.range(0, self.hidden, hs) as h0:
            hsz = kb.boundary(hs, self.hidden, h0)
            with kb.loop(0, count, tr) as i0:
                m = kb.min(tr, kb.sub(count, i0))
                self.q_idx.acquire()
                with kb.loop(0, m, 1) as i:
                    store(kb.div(load(u_sorted, kb.add(kb.add(at, i0), i)), self.k), self.idx, i, 0)
                self.q_idx.handoff()
                self.q.acquire()
                kb.emit(ascend.GatherRowsOp(kb.subview(self.g_x, [0, h0], [tokens, hsz]), kb.subview(self.idx, [0, 0], [m, 1]),
                                            kb.subview(self.ub, [0, 0], [m, hsz])))
                self.q_idx.release()
                self.q.handoff()
                kb.copy(kb.subview(self.ub, [0, 0], [m, hsz]), kb.subview(self.g_xs, [kb.add(j0, i0), h0], [m, hsz]))
                self.q.release()


def _emit_rows(ctx: LoweringContext, sorted_rows: SSAValue, x: SSAValue, top_k: int) -> SSAValue:
    """moe_init_routing_rows (module docstring): expanded_x [R, H] from GM sorted_rows [R] and
    x [T, H], on min(AIVs, R) AIVs, each a run of positions."""
    rows, (_, hidden) = shape(sorted_rows)[0], shape(x)
    cores = max(1, min(ctx.target.num_aiv, rows))
    per = -(-rows // cores)
    cores = -(-rows // per)
    xs = ctx.buffer([rows, hidden], elem(x))
    args = [sorted_rows, x, xs]
    kb = KernelBuilder(ctx, ctx.name(KIND + "_rows"), [a.type for a in args], CoreType.AIV, cores, ctx.current)
    g_sorted = kb.args[0]
    u_sorted = kb.alloc([per], i64, MemSpace.UB)
    budget = ctx.target.capacity("ub") - per * 8 - ALIGN_SLACK
    rows_out = _RowsOut(kb, kb.args[1], kb.args[2], top_k, budget, per)
    j0 = kb.mul(kb.block_idx, per)
    n = kb.min(per, kb.sub(rows, j0))
    kb.copy(kb.subview(g_sorted, [j0], [n]), kb.subview(u_sorted, [0], [n]))
    kb.handoff(Pipe.MTE2, Pipe.S)
    rows_out.emit(u_sorted, 0, j0, n)
    ctx.launch(kb.finish(), args)
    return xs


def _scalar(kb: KernelBuilder):
    """(load, store) of one i64 element by the scalar unit: ascend.get_value, memref.store."""

    def load(buf: SSAValue, *i) -> SSAValue:
        return kb.emit(ascend.GetValueOp(buf, [kb.idx(x) for x in i])).result

    def store(v, buf: SSAValue, *i) -> None:
        val = kb.emit(arith.IndexCastOp(kb.idx(v), i64)).result
        kb.emit(memref.StoreOp.get(val, buf, [kb.idx(x) for x in i]))

    return load, store


def _emit_multi_core(ctx: LoweringContext, ids: SSAValue, rows: int, experts: int, block: str,
                     last_unused: bool, x: SSAValue | None = None,
                     top_k: int = 1) -> tuple[SSAValue, SSAValue, SSAValue, SSAValue | None]:
    """The launches of the module docstring's multi-core sort (with x, the row gather after
    them)."""
    budget = ctx.target.capacity("ub")
    cores, sl = split(rows, experts, max(1, ctx.target.num_aiv), budget)
    need = _ub(rows, experts, cores)
    if need > budget:
        raise ctx.error(f"moe_init_routing: {rows} routed rows over {experts} experts need {need} bytes of UB on each of "
                        f"{cores} AIVs, one AIV has {budget}")
    flat = ctx.view(ids, [rows])
    hist = ctx.buffer([cores, experts], i64)

    def slice_of(kb: KernelBuilder):
        p0 = kb.mul(kb.block_idx, sl)
        return p0, kb.min(sl, kb.sub(rows, p0))

    # launch 1: per-core histograms
    args = [flat, hist]
    kb = KernelBuilder(ctx, ctx.name(KIND + "_hist"), [a.type for a in args], CoreType.AIV, cores, ctx.current)
    g_ids, g_hist = kb.args
    u_ids, u_cnt = kb.alloc([sl], i64, MemSpace.UB), kb.alloc([experts], i64, MemSpace.UB)
    load, store = _scalar(kb)
    p0, n = slice_of(kb)
    kb.copy(kb.subview(g_ids, [p0], [n]), kb.subview(u_ids, [0], [n]))
    kb.handoff(Pipe.MTE2, Pipe.S)
    with kb.loop(0, experts, 1) as e:
        store(0, u_cnt, e)
    with kb.loop(0, n, 1) as i:
        e = load(u_ids, i)
        store(kb.add(load(u_cnt, e), 1), u_cnt, e)
    kb.handoff(Pipe.S, Pipe.MTE3)
    kb.copy(u_cnt, kb.subview_keep(g_hist, [kb.block_idx, 0], [1, experts], [1]))
    ctx.launch(kb.finish(), args)

    # launch 2: offsets, then each core places its slice
    groups = experts + 1 - last_unused
    sorted_rows, dest, group_list = ctx.buffer([rows], i64), ctx.buffer([rows], i64), ctx.buffer([groups], i64)
    args = [flat, sorted_rows, dest, group_list, hist]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIV, cores, ctx.current)
    g_ids, g_sorted, g_dest, g_offs, g_hist = kb.args
    u_ids, u_dest = kb.alloc([sl], i64, MemSpace.UB), kb.alloc([sl], i64, MemSpace.UB)
    u_hist = kb.alloc([cores, experts], i64, MemSpace.UB)
    u_offs, u_cur = kb.alloc([experts + 1], i64, MemSpace.UB), kb.alloc([experts], i64, MemSpace.UB)
    load, store = _scalar(kb)
    p0, n = slice_of(kb)
    kb.copy(kb.subview(g_ids, [p0], [n]), kb.subview(u_ids, [0], [n]))
    kb.copy(g_hist, u_hist)
    kb.handoff(Pipe.MTE2, Pipe.S)
    store(0, u_offs, 0)
    with kb.loop(0, experts, 1) as e:  # one pass over hist[:, e]: the cores before this one, then the rest
        nxt = kb.add(e, 1)
        store(load(u_offs, e), u_offs, nxt)
        with kb.loop(0, kb.block_idx, 1) as c:
            store(kb.add(load(u_offs, nxt), load(u_hist, c, e)), u_offs, nxt)
        store(load(u_offs, nxt), u_cur, e)
        with kb.loop(kb.block_idx, cores, 1) as c:
            store(kb.add(load(u_offs, nxt), load(u_hist, c, e)), u_offs, nxt)
    with kb.loop(0, n, 1) as i:
        ex = load(u_ids, i)
        j = load(u_cur, ex)
        store(kb.add(j, 1), u_cur, ex)
        store(j, u_dest, i)
        store(kb.add(p0, i), g_sorted, j)
    kb.handoff(Pipe.S, Pipe.MTE3)
    kb.copy(kb.subview(u_dest, [0], [n]), kb.subview(g_dest, [p0], [n]))
    offs_out = kb.subview(u_offs, [0], [groups]) if last_unused else u_offs
    kb.if_else(kb.eq(kb.block_idx, 0), lambda: kb.copy(offs_out, g_offs), lambda: None)
    kernel = kb.finish()
    kernel.attributes[MOE_BLOCK_ATTR] = StringAttr(block)
    ctx.launch(kernel, args)
    xs = _emit_rows(ctx, sorted_rows, x, top_k) if x is not None else None
    return sorted_rows, dest, group_list, xs
