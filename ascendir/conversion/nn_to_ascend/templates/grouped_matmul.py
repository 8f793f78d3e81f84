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

With the SwiGLU epilogue (`swiglu`, moe_experts' gate/up GroupedMatmul on a split-core chip) the
kernel is a mix kernel: an item is the gate and the up tile of one I tile (both L0C
accumulators, one K loop sharing each row chunk), FixPipe'd to this core's workspace slot; AIV 0 reads the slot back
(MTE2), computes silu(gate) * up in f32 and stores the [msz, nsz] tile of the activation. Both
units run the group loop (each reads the group list itself: its own scalar unit).

Why this shape: at decode a group is a few rows, so the kernel is a GEMV over the touched
experts' weights and its time is the weights' MTE2 time: each weight chunk is one nd2nz load of
up to CHUNK_BYTES (the ~210-cycle nd2nz start-up, S4, against ~8192 cycles of data at the AIC's
32 B/cycle GM path, S1), several L0 K steps per L1 chunk, and two L0C accumulators (where they
fit) let the FixPipe out of one tile run under the next tile's mmads. The row block x travels
with each weight chunk ([bm, kl1], a few KiB at decode; keeping x [bm, K] in L1 for all N tiles
of a row tile was tried: its reload waits for the last chunk of the row tile to clear MTE1, and
the smaller weight chunks it leaves room for cost more than the x loads it saves). Approximations:
every group's tiles the same (bm, bn, bk, kl1), bm sized for twice the mean group (`row_tile`);
the group list is read from GM by the scalar unit (through its DCache: one line holds 8 i64 entries).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, f32
from xdsl.ir import Block, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.flash_attention import _Sync
from ascendir.conversion.nn_to_ascend.templates.matmul import BASE_MN, BASE_N, k_align
from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.errors import AscendirError

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


def tiles(ctx: LoweringContext, rows: int, experts: int, n: int, k: int, el, weights: int = 1) -> GroupedTiles:
    """The tiles of a grouped MatMul: L0C one or two f32 [bm, bn] accumulators, L0A / L0B two
    [bm, bk] / `weights` x [bk, bn] slots each, L1 two chunks of `weights` weight blocks
    [bn, kl1] (CHUNK_BYTES at most each) and rows [bm, kl1]; K in steps of 32 B. `weights` = 2:
    the gate and the up block of the fused SwiGLU share each row chunk.

    The groups are known only when the kernel runs, so bm is sized for twice the mean group
    (rows / experts: a group beyond it takes more row tiles, a smaller one pads the cube's M
    with zeros), at most matmul.py's base 128; bn starts from matmul.py's base and is halved
    (down to 16) until every AIC has an N tile, as the matmul template spreads decode shapes.

    Raises: AscendirError when not even 16 x 16 x (32 B) tiles fit."""
    t, es, ka = ctx.target, itemsize(el), k_align(el)
    bm = row_tile(rows, experts)
    # bn as for N = weights·n, then split over the weight blocks: an item of the fused SwiGLU
    # covers the weight rows of one tile of the AIC-only kernel over 2I (same L1 chunks, same
    # spread over the AICs)
    bn = min(BASE_N, round_up(weights * n, 16))
    while bn > 16 and (bm * bn * 4 > t.capacity("l0c") or ceil_div(weights * n, bn) < t.num_aic):
        bn = round_up(bn // 2, 16)
    bn = max(16, round_up(bn // weights, 16))
    kp = round_up(k, ka)
    bk = kp
    wb = weights * bn
    while bk > ka and (2 * bm * bk * es > t.capacity("l0a") or 2 * bk * wb * es > t.capacity("l0b")):
        bk = round_up(bk // 2, ka)
    if bm * bn * 4 > t.capacity("l0c") or 2 * bm * bk * es > t.capacity("l0a") or 2 * bk * wb * es > t.capacity("l0b"):
        raise ctx.error(f"grouped_matmul: no [{bm}, {bn}, {bk}] tile fits the cube buffers of {t.name}")
    steps = max(1, min(ceil_div(kp, bk), CHUNK_BYTES // (bn * bk * es)))
    l1 = t.capacity("l1")
    while steps > 1 and 2 * (wb + bm) * steps * bk * es > l1:
        steps -= 1
    kl1 = steps * bk
    if 2 * (wb + bm) * kl1 * es > l1:
        raise ctx.error(f"grouped_matmul: no [{bm}, {bn}, {kl1}] L1 chunk fits the L1 of {t.name}")
    return GroupedTiles(bm, bn, bk, kl1, 2 if 2 * bm * bn * 4 <= t.capacity("l0c") else 1)


def swiglu_ub_bytes(bm: int, bn: int, el) -> int:
    """UB bytes of the SwiGLU epilogue's tiles (`emit_grouped_matmul` with `swiglu`): per each of
    the two slots gate, up and out [bm, bn] in the input type, and three f32 [bm, bn] shared by
    the slots when that is 16-bit."""
    n = bm * bn
    return 2 * 3 * round_up(n * itemsize(el), 32) + (3 * round_up(n * 4, 32) if el != f32 else 0)


def fused_swiglu_fits(ctx: LoweringContext, rows: int, experts: int, inter: int, k: int, el) -> bool:
    """Whether the gate/up GroupedMatmul can carry the SwiGLU epilogue on this chip: split AIC /
    AIV cores (the AIV computes it from a GM workspace the FixPipe fills, as ffn_up does), two
    L0C accumulators (the gate and the up tile of one item) and the epilogue's tiles in UB."""
    if not (ctx.target.arch.split_cores and ctx.target.arch.fixpipe):
        return False
    try:
        g = tiles(ctx, rows, experts, inter, k, el, 2)
    except AscendirError:
        return False
    return g.acc == 2 and swiglu_ub_bytes(g.bm, g.bn, el) <= ctx.target.capacity("ub")


def _stream_cycles(ctx: LoweringContext, rows: int, experts: int, n: int, k: int, el, weights: int) -> float:
    """Estimated cycles of the busiest AIC of a grouped MatMul over N = n whose items each load
    `weights` [bn] blocks of weight rows per row chunk (1: the AIC-only kernel, 2: gate and up of
    the fused SwiGLU): per K chunk an nd2nz start-up per load (startup.mte2_nd2nz, S4) and the
    chunk's weight and row bytes at the AIC's GM rate (rates.gm_to_l1, S1 ddr_read_rate), per
    item ceil(k / kl1) chunks, items dealt over the AICs. The groups are known only when the kernel
    runs: max(ceil(rows / bm), min(rows, experts)) row tiles (every touched expert at least one;
    at most `experts` touched). Decode GEMVs are this streaming; the cube's time hides under it."""
    t = ctx.target
    g = tiles(ctx, rows, experts, n, k, el, weights)
    row_tiles = max(ceil_div(rows, g.bm), min(rows, experts))
    items = ceil_div(row_tiles * ceil_div(n, g.bn), t.num_aic)
    loads = ceil_div(k, g.kl1) * (weights + 1)
    return items * (loads * t.startup["mte2_nd2nz"] + (weights * g.bn + g.bm) * k * itemsize(el) / t.rate("gm", "l1"))


def prefer_fused_swiglu(ctx: LoweringContext, rows: int, experts: int, inter: int, k: int, el) -> bool:
    """Whether moe_experts takes the gate/up GroupedMatmul with the SwiGLU epilogue: it fits
    (`fused_swiglu_fits`) and its estimated streaming (`_stream_cycles`: items of I tiles, each
    chunk loading a gate and an up weight block) is at most the AIC-only kernel's over 2I plus
    the SwiGLU kernel it saves (a launch, kernel_launch_cycles S4, and its [R, 2I] in / [R, I]
    out at the sustained HBM bandwidth). An item covers the weight rows of one tile of the AIC-only kernel,
    but in two nd2nz loads (gate and up rows are I apart in w): one more start-up per chunk.
    Measured (910B2, simulated): the corpus blocks (one chunk per item) gain with the fusion,
    mixtral_moe_block_small 29,266 -> 28,696 cycles; the Mixtral-8x7B / DeepSeek-V3 decode
    layers lose (decode 1: 1,107,704 vs 1,087,980 and 1,136,348 vs 1,117,009), and the estimate
    keeps them unfused."""
    if not fused_swiglu_fits(ctx, rows, experts, inter, k, el):
        return False
    t = ctx.target
    swiglu = t.kernel_launch_cycles + 3 * rows * inter * itemsize(el) / t.hbm_sustained_bytes_per_cycle
    fused = _stream_cycles(ctx, rows, experts, inter, k, el, 2)
    return fused <= _stream_cycles(ctx, rows, experts, 2 * inter, k, el, 1) + swiglu


def emit_grouped_matmul(ctx: LoweringContext, x: SSAValue, w: SSAValue, group_list: SSAValue,
                        swiglu: tuple[int, int, int] | None = None) -> SSAValue:
    """Launch the kernel of the module docstring; returns y [R, N] (a new GM buffer, x's type).

    x: GM [R, K] (rows sorted by expert); w: GM [E, N, K] (the weight, same type as x);
    group_list: GM [E+1] i64, non-decreasing offsets from 0 to R (MoeInitRouting's cumulative
    counts). swiglu = (I, gate0, up0): w holds gate and up rows (N = 2I) and the kernel returns
    silu(h[:, gate0 : gate0 + I]) * h[:, up0 : up0 + I] [R, I] instead of h (ops-transformer's
    GroupedMatmul with its SwiGLU epilogue): a mix kernel whose items are (row tile, I tile)
    pairs, the gate and the up tile on the two L0C accumulators (one K loop: each row chunk
    loaded once for both), FixPipe'd (rounded to x's type, as the unfused h is) into this core's rows of a GM workspace,
    which AIV 0 reads back, and activates as moe_experts.emit_swiglu does (same vector ops, same
    rounding: bit-identical). Workspace and UB tiles have two slots, items t and t + block_dim
    of a row tile on slot 0 and 1 (as the AIC-only kernel pairs its accumulators), so the AIC
    writes one slot while AIV 0 still activates the other. Needs `fused_swiglu_fits`.

    Raises: AscendirError when the chip has no FixPipe, or no tile fits."""
    rows, k = shape(x)
    e, n, k2 = shape(w)
    el = elem(x)
    if k2 != k or elem(w) != el or shape(group_list) != (e + 1,):
        raise ctx.error(f"grouped_matmul: x {list(shape(x))}, w {list(shape(w))}, group list {list(shape(group_list))} do not fit")
    if not ctx.target.arch.fixpipe:
        raise ctx.error(f"grouped_matmul: {ctx.target.name} has no FixPipe (L0C -> GM); the experts stay op by op there")
    n_out = n if swiglu is None else swiglu[0]
    if swiglu is not None and (2 * n_out != n or not fused_swiglu_fits(ctx, rows, e, n_out, k, el)):
        raise ctx.error(f"grouped_matmul: the SwiGLU epilogue of w {list(shape(w))} does not fit {ctx.target.name}")
    y = ctx.buffer([rows, n_out], el)
    if rows * n * k == 0:
        return y
    nw = 1 if swiglu is None else 2  # weight blocks per item: gate and up share each row chunk
    g = tiles(ctx, rows, e, n_out, k, el, nw)
    bm, bn, bk, kl1 = g.bm, g.bn, g.bk, g.kl1
    nt = ceil_div(n_out, bn)
    # at most ceil(R / bm) + E row tiles, each of nt N tiles
    bd = min(ctx.target.num_aic, nt * (ceil_div(rows, bm) + e))
    args = [x, w, group_list, y]
    if swiglu is not None:  # the FixPipe -> AIV hand-off: per core and slot a gate and an up tile
        args.append(ctx.buffer([bd * bm, 4 * bn], el))
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIC if swiglu is None else CoreType.MIX,
                       bd, ctx.current)
    gx, gw, gg, gy = kb.args[:4]
    sync = _Sync(kb, True) if swiglu is not None else None

    def queue(producer: Pipe, consumer: Pipe, units: str = "aic->aic"):
        """A hand-off queue: the builder's on an AIC kernel, one naming its units on a mix one."""
        return kb.queue(producer, consumer) if sync is None else sync.queue(producer, consumer, units)

    chunks = [([kb.alloc([bn, kl1], el, MemSpace.L1) for _ in range(nw)], kb.alloc([bm, kl1], el, MemSpace.L1),
               queue(Pipe.MTE2, Pipe.MTE1)) for _ in range(2)]
    l0 = [(kb.alloc([bm, bk], el, MemSpace.L0A), [kb.alloc([bk, bn], el, MemSpace.L0B) for _ in range(nw)],
           queue(Pipe.MTE1, Pipe.M)) for _ in range(2)]
    acc = [(kb.alloc([bm, bn], f32, MemSpace.L0C), queue(Pipe.M, Pipe.FIX)) for _ in range(g.acc)]
    acc *= 2 // g.acc  # one accumulator: both tiles of a pair on it, in turn

    def chunk(p: int, ei: Index, m0: Index, msz: Index, n0s: list[Index], nsz: Index, cs: list[int], k1: Index,
              ksz: int) -> None:
        """K chunk k1 .. k1 + ksz (ksz static: kl1, or the K tail) on L1 slot p: weight rows
        n0s[i] .. + nsz into accumulator cs[i], the row chunk loaded once for all."""
        l1ws, l1xc, q_l1 = chunks[p]
        q_l1.acquire()
        for n0, l1w in zip(n0s, l1ws):
            kb.copy(kb.subview_keep(gw, [ei, n0, k1], [1, nsz, ksz], [1, 2]), l1w, layout="nd2nz")
        kb.copy(kb.subview(gx, [m0, k1], [msz, ksz]), l1xc, layout="nd2nz")
        q_l1.handoff()
        for s in range(ceil_div(ksz, bk)):
            l0a, l0bs, q_l0 = l0[s % 2]
            q_l0.acquire()
            kb.copy(kb.subview(l1xc, [0, s * bk], [bm, bk]), l0a)
            for l1w, l0b in zip(l1ws, l0bs):
                kb.emit(ascend.CopyOp(kb.subview(l1w, [0, s * bk], [bn, bk]), l0b, transpose=True))
            q_l0.handoff()
            for c, l0b in zip(cs, l0bs):
                l0c = acc[c][0]
                if isinstance(k1, int) or s > 0:
                    kb.emit(ascend.MmadOp(l0a, l0b, l0c, k1 == 0 and s == 0))
                else:
                    kb.if_else(kb.eq(k1, 0), lambda l0b=l0b, l0c=l0c: kb.emit(ascend.MmadOp(l0a, l0b, l0c, True)),
                               lambda l0b=l0b, l0c=l0c: kb.emit(ascend.MmadOp(l0a, l0b, l0c, False)))
            q_l0.release()
        q_l1.release()

    nf, kr = k // kl1, k % kl1

    def accumulate(ei: Index, m0: Index, msz: Index, n0s: list[Index], nsz: Index, cs: list[int]) -> None:
        """Rows n0s[i] .. + nsz of w[ei] times row tile (ei, m0) into accumulator cs[i]
        (acquired, handed to the FixPipe)."""
        for c in cs:
            acc[c][1].acquire()
        if nf >= 2:
            with kb.range(0, (nf // 2) * 2 * kl1, 2 * kl1) as k1:  # full chunks in pairs: slot 0, slot 1
                chunk(0, ei, m0, msz, n0s, nsz, cs, k1, kl1)
                chunk(1, ei, m0, msz, n0s, nsz, cs, kb.add(k1, kl1), kl1)
        if nf % 2:
            chunk(0, ei, m0, msz, n0s, nsz, cs, (nf - 1) * kl1, kl1)
        if kr:
            chunk(nf % 2, ei, m0, msz, n0s, nsz, cs, nf * kl1, kr)
        for c in cs:
            acc[c][1].handoff()

    def tile(ei: Index, m0: Index, msz: Index, t: Index, c: int) -> None:
        """N tile t of row tile (ei, m0) into accumulator c, then FixPipe out."""
        l0c, q_c = acc[c]
        n0 = kb.mul(t, bn)
        nsz = kb.boundary(bn, n, n0)
        accumulate(ei, m0, msz, [n0], nsz, [c])
        kb.copy(l0c, kb.subview(gy, [m0, n0], [msz, nsz]), layout="nz2nd")
        q_c.release()

    if swiglu is not None:
        _inter, gate0, up0 = swiglu
        gws = kb.args[4]
        wide = el != f32
        # per slot: gate and up in, out (the input type); the f32 tiles are shared (the V pipe
        # runs the slots' vector ops in order)
        ub_in = [[kb.alloc([bm, bn], el, MemSpace.UB) for _ in range(2)] for _ in range(2)]
        ub_out = [kb.alloc([bm, bn], el, MemSpace.UB) for _ in range(2)]
        w32 = [kb.alloc([bm, bn], f32, MemSpace.UB) for _ in range(3)] if wide else None
        q_ws = [queue(Pipe.FIX, Pipe.MTE2, "aic->aiv") for _ in range(2)]
        q_in = [queue(Pipe.MTE2, Pipe.V, "aiv->aiv") for _ in range(2)]
        q_out = [queue(Pipe.V, Pipe.MTE3, "aiv->aiv") for _ in range(2)]

        def swiglu_tile(ei: Index, m0: Index, msz: Index, t: Index, s: int) -> None:
            """I tile t of row tile (ei, m0) on slot s: the gate and the up tile on the AIC, each
            out to this core's workspace rows when done; SwiGLU on AIV 0 (emit_swiglu's ops)."""
            n0 = kb.mul(t, bn)
            nsz = kb.boundary(bn, n_out, n0)
            row = kb.mul(kb.block_idx, bm)
            accumulate(ei, m0, msz, [kb.add(n0, gate0), kb.add(n0, up0)], nsz, [0, 1])
            q_ws[s].acquire()
            for c in range(2):
                l0c, q_c = acc[c]
                kb.copy(l0c, kb.subview(gws, [row, (2 * s + c) * bn], [bm, bn]), layout="nz2nd")
                q_c.release()
            q_ws[s].enque()
            q_ws[s].deque()
            q_in[s].acquire()
            for c in range(2):
                kb.copy(kb.subview(gws, [row, (2 * s + c) * bn], [bm, bn]), ub_in[s][c])
            q_ws[s].release()
            q_in[s].handoff()
            q_out[s].acquire()
            if wide:
                wg, wu, wo = w32
                kb.emit(ascend.VcastOp(ub_in[s][0], wg))
                kb.emit(ascend.VcastOp(ub_in[s][1], wu))
            else:
                (wg, wu), wo = ub_in[s], ub_out[s]
            kb.emit(ascend.vector_op("vsilu")(wg, wo))
            kb.emit(ascend.vector_op("vmul")(wo, wu, wo))
            if wide:
                kb.emit(ascend.VcastOp(wo, ub_out[s]))
            q_in[s].release()
            q_out[s].handoff()
            kb.copy(ub_out[s], kb.subview(gy, [m0, n0], [msz, nsz]))
            q_out[s].release()

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
        item = tile if swiglu is None else (lambda ei, m0, msz, t, s: swiglu_tile(ei, m0, msz, t, s))
        with kb.loop(first, nt, 2 * bd) as t:
            item(ei, m0, msz, t, 0)
            t2 = kb.add(t, bd)
            kb.if_else(kb.emit(arith.CmpiOp(kb.idx(t2), kb.idx(nt), "slt")).results[0],
                       lambda: item(ei, m0, msz, t2, 1), lambda: None)
    body.add_op(scf.YieldOp(hi))
    kb._block = outer
    if sync is not None:
        sync.drain()
    ctx.launch(kb.finish(), args)
    return y
