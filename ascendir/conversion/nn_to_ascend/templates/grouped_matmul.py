"""ops-transformer's GroupedMatmul on a MoE layer's experts: one cube kernel over all experts,
expert e's rows (the tokens MoeInitRouting sorted to it) one GEMM with its own weight.

    y[lo_e:hi_e, :] = x[lo_e:hi_e, :] · w[e]ᵀ      x [R, K] rows sorted by expert, w [E, N, K]
                                                  (HF's batched experts: F.linear per expert),
                                                  group list g [E+1] i64: lo_e = g[e], hi_e = g[e+1]

The group list is data: the kernel reads it with `ascend.get_value` (the scalar unit, from GM)
into the bounds of its row loop (each entry once: the loop carries lo_e = hi_e-1), so an expert
that got no rows costs one scalar read and its weights are never read. One AIC kernel (910B: FixPipe out; the template declines a chip without
it). Work items are (row tile, N tile) pairs; the N tiles of row tile j are dealt block-cyclic
over the AICs starting where row tile j - 1 left off (j counted from the group list, see the
comment at `first`), so a group whose N tiles do not divide evenly over the AICs does not load the same
cores every time:

    scf.for %e = 0 to E iter_args(%lo = ascend.get_value %g[0])
      %hi = ascend.get_value %g[%e + 1]                    (yielded as the next %lo)
      scf.for %m0 = %lo to %hi step bm                     rows of group e (none: no weight read)
        scf.for %t = first(e, m0) to ceil(N/bn) step block_dim, two tiles at a time on L0C slots c = 0, 1
          wait FIX->M [c]
          K in L1 chunks of kl1 on ping-pong slots p = 0, 1 (pairs, then a full and a partial tail):
            wait MTE1->MTE2 [p];  GM->L1 w[e] [nsz, kl1], x [msz, kl1] (nd2nz, MTE2);  MTE2->MTE1 [p]
            per bk step of the chunk, L0 ping-pong slot q:
              wait M->MTE1 [q];  L1->L0A x, L1->L0B w transposed (MTE1);  MTE1->M [q]
              mmad (init on K step 0);  set M->MTE1 [q]
            set MTE1->MTE2 [p]
          M->FIX [c];  L0C[c]->GM y [msz, nsz] (FixPipe, f32 -> the input type);  set FIX->M [c]

Why this shape: at decode a group is a few rows, so the kernel is a GEMV over the touched
experts' weights and its time is the weights' MTE2 time: each weight chunk is one nd2nz load of
up to CHUNK_BYTES (the ~210-cycle nd2nz start-up, S4, against ~8192 cycles of data at the AIC's
32 B/cycle GM path, S1), several L0 K steps per L1 chunk, and two L0C accumulators (where they
fit) let the FixPipe out of one tile run under the next tile's mmads. The row block x travels
with each weight chunk ([bm, kl1], a few KiB at decode; keeping x [bm, K] in L1 for all N tiles
of a row tile was tried: its reload waits for the last chunk of the row tile to clear MTE1, and
the smaller weight chunks it leaves room for cost more than the x loads it saves). Approximations:
every group's tiles the same (bm, bn, bk, kl1), bm sized for twice the mean group (`row_tile`);
every group-list entry read from GM (no DCache hits).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, f32
from xdsl.ir import Block, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.matmul import BASE_MN, BASE_N, k_align
from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize

KIND = "grouped_matmul"
# Most bytes of one weight chunk's nd2nz load: ~8192 cycles of data at the AIC's 32 B/cycle GM
# path (S1) against the ~210-cycle nd2nz start-up (S4). Measured on the Mixtral-8x7B gate/up
# at decode 16 (benchmarks/moe.py shapes): 64 KiB chunks 3.13 M cycles, 128 KiB 2.81 M, 256 KiB
# (L1 caps it at 7 K steps) 2.69 M, dense GEMV 2.77 M.
CHUNK_BYTES = 256 * 1024


def row_tile(rows: int, experts: int) -> int:
    """bm of a grouped MatMul over `rows` routed rows and `experts` groups (`tiles`): twice the
    mean group, rounded up to 16, at most matmul.py's base 128. Target-independent, so the run
    report can say how often each touched expert's weights are read: ceil(rows of e / bm)."""
    return min(BASE_MN, round_up(max(1, -(-2 * rows // max(experts, 1))), 16), round_up(max(rows, 1), 16))


@dataclass(frozen=True)
class GroupedTiles:
    """Tiles of a grouped MatMul (elements): row tile bm, N tile bn, L0 K step bk, L1 K chunk kl1
    (a multiple of bk), and acc: L0C accumulators (2: ping-pong over N tiles, 1 when two do
    not fit)."""

    bm: int
    bn: int
    bk: int
    kl1: int
    acc: int


def tiles(ctx: LoweringContext, rows: int, experts: int, n: int, k: int, el) -> GroupedTiles:
    """The tiles of a grouped MatMul: L0C one or two f32 [bm, bn] accumulators, L0A / L0B two
    [bm, bk] / [bk, bn] slots each, L1 two chunks of weight [bn, kl1] (CHUNK_BYTES at most) and
    rows [bm, kl1]; K in steps of 32 B.

    The groups are known only when the kernel runs, so bm is sized for twice the mean group
    (rows / experts: a group beyond it takes more row tiles, a smaller one pads the cube's M
    with zeros), at most matmul.py's base 128; bn starts from matmul.py's base and is halved
    (down to 16) until every AIC has an N tile, as the matmul template spreads decode shapes.

    Raises: AscendirError when not even 16 x 16 x (32 B) tiles fit."""
    t, es, ka = ctx.target, itemsize(el), k_align(el)
    bm = row_tile(rows, experts)
    bn = min(BASE_N, round_up(n, 16))
    while bn > 16 and (bm * bn * 4 > t.capacity("l0c") or ceil_div(n, bn) < t.num_aic):
        bn = round_up(bn // 2, 16)
    kp = round_up(k, ka)
    bk = kp
    while bk > ka and (2 * bm * bk * es > t.capacity("l0a") or 2 * bk * bn * es > t.capacity("l0b")):
        bk = round_up(bk // 2, ka)
    if bm * bn * 4 > t.capacity("l0c") or 2 * bm * bk * es > t.capacity("l0a") or 2 * bk * bn * es > t.capacity("l0b"):
        raise ctx.error(f"grouped_matmul: no [{bm}, {bn}, {bk}] tile fits the cube buffers of {t.name}")
    steps = max(1, min(ceil_div(kp, bk), CHUNK_BYTES // (bn * bk * es)))
    l1 = t.capacity("l1")
    while steps > 1 and 2 * (bn + bm) * steps * bk * es > l1:
        steps -= 1
    kl1 = steps * bk
    if 2 * (bn + bm) * kl1 * es > l1:
        raise ctx.error(f"grouped_matmul: no [{bm}, {bn}, {kl1}] L1 chunk fits the L1 of {t.name}")
    return GroupedTiles(bm, bn, bk, kl1, 2 if 2 * bm * bn * 4 <= t.capacity("l0c") else 1)


def emit_grouped_matmul(ctx: LoweringContext, x: SSAValue, w: SSAValue, group_list: SSAValue) -> SSAValue:
    """Launch the kernel of the module docstring; returns y [R, N] (a new GM buffer, x's type).

    x: GM [R, K] (rows sorted by expert); w: GM [E, N, K] (the weight, same type as x);
    group_list: GM [E+1] i64, non-decreasing offsets from 0 to R (MoeInitRouting's cumulative
    counts).

    Raises: AscendirError when the chip has no FixPipe, or no tile fits."""
    rows, k = shape(x)
    e, n, k2 = shape(w)
    el = elem(x)
    if k2 != k or elem(w) != el or shape(group_list) != (e + 1,):
        raise ctx.error(f"grouped_matmul: x {list(shape(x))}, w {list(shape(w))}, group list {list(shape(group_list))} do not fit")
    if not ctx.target.arch.fixpipe:
        raise ctx.error(f"grouped_matmul: {ctx.target.name} has no FixPipe (L0C -> GM); the experts stay op by op there")
    y = ctx.buffer([rows, n], el)
    if rows * n * k == 0:
        return y
    g = tiles(ctx, rows, e, n, k, el)
    bm, bn, bk, kl1 = g.bm, g.bn, g.bk, g.kl1
    nt = ceil_div(n, bn)
    # at most ceil(R / bm) + E row tiles, each of nt N tiles
    bd = min(ctx.target.num_aic, nt * (ceil_div(rows, bm) + e))
    args = [x, w, group_list, y]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIC, bd, ctx.current)
    gx, gw, gg, gy = kb.args
    chunks = [(kb.alloc([bn, kl1], el, MemSpace.L1), kb.alloc([bm, kl1], el, MemSpace.L1), kb.queue(Pipe.MTE2, Pipe.MTE1))
              for _ in range(2)]
    l0 = [(kb.alloc([bm, bk], el, MemSpace.L0A), kb.alloc([bk, bn], el, MemSpace.L0B), kb.queue(Pipe.MTE1, Pipe.M))
          for _ in range(2)]
    acc = [(kb.alloc([bm, bn], f32, MemSpace.L0C), kb.queue(Pipe.M, Pipe.FIX)) for _ in range(g.acc)]
    acc *= 2 // g.acc  # one accumulator: both tiles of a pair on it, in turn

    def chunk(p: int, ei: Index, m0: Index, msz: Index, n0: Index, nsz: Index, c: int, k1: Index, ksz: int) -> None:
        """K chunk k1 .. k1 + ksz (ksz static: kl1, or the K tail) on L1 slot p into accumulator c."""
        l1w, l1xc, q_l1 = chunks[p]
        l0c = acc[c][0]
        q_l1.acquire()
        kb.copy(kb.subview_keep(gw, [ei, n0, k1], [1, nsz, ksz], [1, 2]), l1w, layout="nd2nz")
        kb.copy(kb.subview(gx, [m0, k1], [msz, ksz]), l1xc, layout="nd2nz")
        q_l1.handoff()
        for s in range(ceil_div(ksz, bk)):
            l0a, l0b, q_l0 = l0[s % 2]
            q_l0.acquire()
            kb.copy(kb.subview(l1xc, [0, s * bk], [bm, bk]), l0a)
            kb.emit(ascend.CopyOp(kb.subview(l1w, [0, s * bk], [bn, bk]), l0b, transpose=True))
            q_l0.handoff()
            if isinstance(k1, int) or s > 0:
                kb.emit(ascend.MmadOp(l0a, l0b, l0c, k1 == 0 and s == 0))
            else:
                kb.if_else(kb.eq(k1, 0), lambda: kb.emit(ascend.MmadOp(l0a, l0b, l0c, True)),
                           lambda: kb.emit(ascend.MmadOp(l0a, l0b, l0c, False)))
            q_l0.release()
        q_l1.release()

    nf, kr = k // kl1, k % kl1

    def tile(ei: Index, m0: Index, msz: Index, t: Index, c: int) -> None:
        """N tile t of row tile (ei, m0) into accumulator c, then FixPipe out."""
        l0c, q_c = acc[c]
        n0 = kb.mul(t, bn)
        nsz = kb.boundary(bn, n, n0)
        q_c.acquire()
        if nf >= 2:
            with kb.range(0, (nf // 2) * 2 * kl1, 2 * kl1) as k1:  # full chunks in pairs: slot 0, slot 1
                chunk(0, ei, m0, msz, n0, nsz, c, k1, kl1)
                chunk(1, ei, m0, msz, n0, nsz, c, kb.add(k1, kl1), kl1)
        if nf % 2:
            chunk(0, ei, m0, msz, n0, nsz, c, (nf - 1) * kl1, kl1)
        if kr:
            chunk(nf % 2, ei, m0, msz, n0, nsz, c, nf * kl1, kr)
        q_c.handoff()
        kb.copy(l0c, kb.subview(gy, [m0, n0], [msz, nsz]), layout="nz2nd")
        q_c.release()

    # scf.for %e iter_args(%lo = g[0]): each group-list entry read once (a scalar GM read, S5
    # DDR latency, stalls the scalar unit: at decode most of the E groups are empty)
    body = Block(arg_types=[IndexType(), IndexType()])
    kb.emit(scf.ForOp(kb.idx(0), kb.idx(e), kb.idx(1), [kb.emit(ascend.GetValueOp(gg, [kb.idx(0)])).result], body))
    outer, kb._block = kb._block, body
    ei, lo = body.args
    hi = kb.emit(ascend.GetValueOp(gg, [kb.add(ei, 1)])).result
    with kb.loop(lo, hi, bm) as m0:
        msz = kb.min(bm, kb.sub(hi, m0))
        # Row tile j = floor(lo / bm) + e + (m0 - lo) / bm: distinct and increasing over the
        # kernel's row tiles (a group of c rows has ceil(c / bm) <= floor(c / bm) + 1 of them),
        # so the N tiles of consecutive row tiles continue the block-cyclic deal.
        j = kb.add(kb.add(kb.div(lo, bm), ei), kb.div(kb.sub(m0, lo), bm))
        first = kb.rem(kb.sub(kb.add(kb.block_idx, bd), kb.rem(kb.mul(j, nt), bd)), bd)
        with kb.loop(first, nt, 2 * bd) as t:
            tile(ei, m0, msz, t, 0)
            t2 = kb.add(t, bd)
            kb.if_else(kb.emit(arith.CmpiOp(kb.idx(t2), kb.idx(nt), "slt")).results[0],
                       lambda: tile(ei, m0, msz, t2, 1), lambda: None)
    body.add_op(scf.YieldOp(hi))
    kb._block = outer
    ctx.launch(kb.finish(), args)
    return y
