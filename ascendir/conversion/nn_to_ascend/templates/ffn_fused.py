"""The single-kernel FFN of templates/ffn.py: the [M, I] intermediate h never exists in GM.

    y [M, Ho] = h · Wd (+ b2),  h = act(x · Wg [+ b1]) [* (x · Wu)],  x [M, H], Wg / Wu [H, I]

Work item = (row block of bm rows, I-split s: sw columns of I, in `per` chunks of bi). Items are
block-cyclic over the AICs with the row block fastest, so the items of one split that run at the
same time read the same weight panels (L2 hits after the first). Per item:

1. gate/up, chunk by chunk (c = i_lo, i_lo + bi, ...): the K loop over H loads each x tile into
   L1 / L0A once and multiplies it by the Wg (and Wu) tile into one (two) [bm, bi] fp32 L0C
   accumulators (ping-pong L1 / L0 slots as in matmul.py).
2. activation (· up), then h tile [bm, bi] into the item's L1-resident h [bm, >= per·bi]:
   * 910B (dav-c220): AIC and AIV share no buffer (S2 architecture page), so the accumulators go
     out through FixPipe into a per-core GM workspace ring of two slots (fp32 [bm, nacc·bi]), the
     AIV reads them (MTE2), computes h in UB and writes it into a second two-slot ring
     (f16 [bm, bi], MTE3); the AIC loads it back into L1 (MTE2, nd2nz). The rings are a few KiB
     per core, written and re-read within microseconds, so they stay in L2; the cross-unit flags
     count (CrossCoreSetFlag holds up to 16 pending sets, S2), so one flag pair guards both slots.
     Program order per chunk: gate/up(c), FixPipe(c), AIV(c), load h(c-1): the cube computes
     chunk c+1 while the vector unit works on chunk c.
   * 910A (dav-c100, coupled): L0C -> UB (vector pipe), act·mul in UB, UB -> L1 (MTE3, ub2l1, S1)
     straight into the resident h: nothing of h leaves the core.
3. down projection from L1: for every Ho tile of bn columns, L0C accumulates h[:, range] ·
   Wd[range, tile] over the item's I-range, Wd streamed kd rows at a time (the whole range when
   it fits) through the same two L1 slots the gate/up weights used (the phases never overlap,
   so one item's L1 holds x chunks, two slots and h), then FixPipe (910A: L0C -> UB -> MTE3)
   writes the fp32 partial into a workspace [nsplit·M, Ho].
4. a vector kernel adds the nsplit partials (the split-K reduction of matmul.py, one strided load
   of all splits per tile), adds b2 and casts: y. Not done: FixPipe's atomic add into GM
   (Ascend C SetAtomicAdd, documented for L0C -> GM on A2, S2 API reference) would drop the
   partial workspace, but still need a zeroed fp32 buffer and a cast pass, and the dialect has
   no atomic copy; at decode the reduction is 0.4 % of the kernel.

What crosses GM per item: x rows (re-read per chunk, bm·H), Wg / Wu [H, range], Wd [range, Ho]
(each weight byte once per row block), the partial [bm, Ho] fp32; on 910B also the chunk hand-offs
(nacc·bm·bi·4 bytes out and back, bm·bi·es in and back per chunk, L2-resident). Not h [M, I]: the
two-kernel path writes it once and reads it once per Ho tile of ffn_down.

L2 prefetch (910B, a gated FFN with a long H loop, `prefetches`): AIV 1, otherwise idle, reads
each up chunk and every other Wd tile GM -> UB just ahead of the AIC (PREFETCH_SLOTS tiles
ahead), so the AIC reads those from L2 while it streams the gate chunks and the other Wd tiles
itself: two DDR paths per core where there was one (decode: every weight byte is a first read).

Why h resident in L1 and not the down accumulators in L0C: [bm, Ho] fp32 is 256 KiB even at
bm = 16, Ho = 4096 (L0C 128 KiB on 910B, S1); h for an item is bm·per·bi·es (16 KiB at decode
with I split over 24 cores). The price is the partial workspace and its reduction: nsplit·M·Ho·4
bytes, tiny at decode (24 × 16 KiB), large at prefill (M = 512: 8 MiB per split), which is why
ffn.choose_plan scores this kernel (`estimate`, tiles from `choose`) against the two-kernel path
(ffn_up + ffn_down) with the same analytic cost pieces as choose-tiling and keeps the cheaper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.hardware.config import HardwareConfig
from ascendir.costmodel import CostEnv, bandwidth_bound_cycles, copy_startup, mmad_cycles, vector_cycles
from ascendir.conversion.nn_to_ascend.templates.flash_attention import _Sync
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, ceil_div, round_up
from ascendir.hardware.align import aligned_bytes
from ascendir.conversion.nn_to_ascend.templates.matmul import DOUBLE_BUFFER, _by_parity, _l0c_out, _mmad
from ascendir.conversion.nn_to_ascend.templates.ffn_up import MIN_PREFETCH_CHUNKS
from ascendir.conversion.nn_to_ascend.tiling import act_mul_cycles

# Candidate grids (elements): bm rows, bi I-columns per chunk, bn Ho-columns per down tile,
# K step in bytes (32 B = one fractal row of K, S3), L1 depth of the gate/up chunk of H.
BM_CHOICES = (16, 32, 64, 128)
BI_CHOICES = (64, 128, 256)
BN_CHOICES = (64, 128, 256)
BK_BYTES = (64, 128)
DEPTHS = (1, 2, 4, 6, 8, 12, 14, 16)
# fp32 elements per vector-kernel tile of the final reduction (16 KiB loads, S2: >= 16 KB for
# full GM bandwidth); smaller when that leaves AIVs idle, never below one 1-KiB row piece.
REDUCE_MAX, REDUCE_MIN = 4096, 256
# Workspace ring depth of the AIC <-> AIV hand-offs (910B): two lets the cube run one chunk ahead.
RING = 2
# Weight tiles AIV 1 may prefetch ahead of the AIC (`_Kernel._prefetch`): cross-core flags count
# pending sets (up to 16, S2 CrossCoreSetFlag); matmul.py's per-AIV figure.
PREFETCH_SLOTS = 4


@dataclass(frozen=True)
class FusedTiling:
    """Tiles of the fused FFN kernel (elements): L0A [bm, bk] (x and h tiles), L0B [bk, bi] per
    accumulator and [bk, bn]; L0C nacc·[bm, bi] + [bm, bn]; L1 x [bm, kl1], weights
    nacc·[kl1, bi], Wd [bi, bn] (two slots each), h [bm, per·bi]; nsplit I-ranges of sw columns
    (a multiple of 16, not of bi: the last chunk of a range may be partial, so the ranges can
    be even over the cores), per = ceil(sw / bi) chunks each."""

    bm: int
    bi: int
    bk: int
    kl1: int
    bn: int
    nsplit: int
    per: int
    sw: int
    kd: int = 0  # Wd rows per L1 load of the down projection (0: bi)

    @property
    def down_rows(self) -> int:
        return self.kd or self.bi

    def slot(self, nacc: int) -> tuple[int, int]:
        """Shape of one L1 weight slot: nacc gate/up tiles [kl1, bi] stacked, or one Wd tile
        [kd, bn]; both phases of an item use the same two slots (they never overlap in time)."""
        return max(nacc * self.kl1, self.down_rows), max(self.bi, self.bn)

    @property
    def h_cols(self) -> int:
        """Columns of the resident h: every chunk, and every down step's [bm, kd] read."""
        return max(self.per * self.bi, ceil_div(self.sw, self.down_rows) * self.down_rows)


@dataclass(frozen=True)
class Shape:
    """The FFN: m rows, h = H, i = I, ho = output columns; es / out_es: element sizes of x and y;
    nacc: accumulators (2 gated, 1 plain); b1 / b2: bias element sizes (0: none); b_nz: the
    weights are stored in NZ fractals (tiling.nz_weight), loaded with the plain MTE2 head."""

    m: int
    h: int
    i: int
    ho: int
    es: int
    out_es: int
    nacc: int
    b1: int = 0
    b2: int = 0
    act: str = "vsilu"
    b_nz: bool = False


def needs(s: Shape, t: FusedTiling, target: HardwareConfig) -> dict[str, int]:
    """Bytes per core of each on-chip space the kernel allocates for tiling `t` (each buffer
    aligned as kernel.py's capacity check counts it)."""
    es, nb = s.es, DOUBLE_BUFFER
    ub = s.nacc * aligned_bytes(target, "ub", t.bm * t.bi * 4) + aligned_bytes(target, "ub", t.bm * t.bi * es)
    if s.b1:
        ub += aligned_bytes(target, "ub", t.bi * s.b1) + (aligned_bytes(target, "ub", t.bi * 4) if s.b1 != 4 else 0)
    if not target.arch.fixpipe:  # 910A: the down tile leaves through UB too
        ub += aligned_bytes(target, "ub", t.bm * t.bn * 4)
    return {
        "l1": nb * (aligned_bytes(target, "l1", t.bm * t.kl1 * es) + aligned_bytes(target, "l1", math.prod(t.slot(s.nacc)) * es))
        + aligned_bytes(target, "l1", t.bm * t.h_cols * es),
        "l0a": nb * aligned_bytes(target, "l0a", t.bm * t.bk * es),
        "l0b": nb * (s.nacc * aligned_bytes(target, "l0b", t.bk * t.bi * es) + aligned_bytes(target, "l0b", t.bk * t.bn * es)),
        "l0c": s.nacc * aligned_bytes(target, "l0c", t.bm * t.bi * 4) + aligned_bytes(target, "l0c", t.bm * t.bn * 4),
        "ub": ub,
    }


def prefetches(s: Shape, t: FusedTiling, target: HardwareConfig) -> bool:
    """Whether AIV 1 (idle on a split chip: the act·mul runs on AIV 0) reads the up chunks and
    every other Wd tile into L2 ahead of the AIC, so that two 32 B/cycle DDR paths (S1
    ddr_read_rate) stream the weights of an item at once where the AIC's alone did: a gated FFN
    on a split chip whose gate/up K loop has at least ffn_up.MIN_PREFETCH_CHUNKS chunks (shorter
    ones do not pay for the hand-offs, as measured there) and whose scratch tile fits UB."""
    if not (target.arch.split_cores and s.nacc == 2 and ceil_div(s.h, t.kl1) >= MIN_PREFETCH_CHUNKS):
        return False
    return aligned_bytes(target, "ub", max(t.kl1, t.down_rows) * max(t.bi, t.bn) * s.es) <= target.capacity("ub")


def fits(s: Shape, t: FusedTiling, target: HardwareConfig) -> bool:
    return all(n <= target.capacity(space) for space, n in needs(s, t, target).items())


# ----------------------------------------------------------------------------------------------
# analytic cost (the interpreter's cost pieces, as tiling.estimate)
# ----------------------------------------------------------------------------------------------
def estimate(s: Shape, t: FusedTiling, target: HardwareConfig, dt: str) -> dict[str, float]:
    """Cycles of the fused kernel + its reduction for tiling `t` (parts in the dict; "cycles" is
    the total). Per item: gate/up chunks overlap the AIV work of the previous chunk (max of the
    pipes), then the down tiles (max of MTE2 and M + FIX); weights from HBM for the first row
    block of a split, from L2 for the others running beside it; h chunk hand-offs and partials
    at L2 rates. Kernel = max(core, bandwidth floor) + launch head."""
    es = s.es
    nrb = ceil_div(s.m, t.bm)
    items = nrb * t.nsplit
    bd = min(target.num_aic, items)
    env = CostEnv(target, target.hbm_bytes_per_cycle / bd)
    st = target.startup
    nd2nz = copy_startup(target, Pipe.MTE2, "nd2nz")
    w_head = copy_startup(target, Pipe.MTE2, "nz" if s.b_nz else "nd2nz")  # a weight load's head
    r_hit = env.gm_rate(target.rate("gm", "l1"), "gm", "l1", True)
    r_miss = env.gm_rate(target.rate("gm", "l1"), "gm", "l1", False)
    w_hit = (min(nrb, bd) - 1) / min(nrb, bd)  # concurrent row blocks of one split share panels
    r_w = 1 / (w_hit / r_hit + (1 - w_hit) / r_miss)
    rows = min(t.bm, s.m)
    n_l1, n_l0 = ceil_div(s.h, t.kl1), ceil_div(s.h, t.bk)
    fix_rate = env.gm_rate(target.rate("l0c", "gm"), "l0c", "gm") if target.arch.fixpipe else 0.0
    bi_avg = t.sw / t.per  # weight columns a chunk moves on average (the last one may be partial)
    # the set_flag that hands an L1 slot to MTE1 waits until the slot's loads are complete
    # (timeline.py: set_flag at max(free, done) of its pipe), so every L1 step also pays a read latency
    lat = env.gm_latency("gm", "l1", False)
    pf = prefetches(s, t, target)
    # AIV 1 (`prefetches`): per weight tile it takes, a copy start-up, the bytes at its GM -> UB
    # rate (L2 hit or HBM as the AIC's would be) and the completion latency before its signal
    u_hit = env.gm_rate(target.rate("gm", "ub"), "gm", "ub", True)
    u_miss = env.gm_rate(target.rate("gm", "ub"), "gm", "ub", False)
    u_w = 1 / (w_hit / u_hit + (1 - w_hit) / u_miss)

    def aiv1(nbytes: float) -> float:
        return copy_startup(target, Pipe.MTE2, None) + nbytes / u_w + env.gm_latency("gm", "ub", False)

    # gate/up of one chunk (with the prefetch the up chunk hits L2)
    w_chunk = t.kl1 * bi_avg * es
    mte2 = n_l1 * (nd2nz + s.nacc * w_head + lat + rows * t.kl1 * es / r_hit
                   + (s.nacc - pf) * w_chunk / r_w + pf * w_chunk / r_hit)
    mmad = n_l0 * s.nacc * mmad_cycles(target, dt, t.bm, t.bi, t.bk)
    mte1 = n_l0 * ((1 + s.nacc) * st["mte1"] + t.bm * t.bk * es / target.rate("l1", "l0a")
                   + s.nacc * t.bk * t.bi * es / target.rate("l1", "l0b"))
    n = t.bm * t.bi
    vec = act_mul_cycles(target, s.act, s.nacc, n, bool(s.b1))
    if target.arch.split_cores:  # accumulators -> GM (FixPipe) -> AIV -> h back to L1
        fix = copy_startup(target, Pipe.FIX, None) + s.nacc * n * 4 / fix_rate
        r_ub = env.gm_rate(target.rate("gm", "ub"), "gm", "ub", True)
        aiv = (2 * st["mte2"] + s.nacc * n * 4 / r_ub + vec + st["mte3"]
               + n * es / env.gm_rate(target.rate("ub", "gm"), "ub", "gm"))
        h_load = nd2nz + n * es / r_hit  # h back into L1
        mte2 += h_load
        chunk = max(mte2, mmad + fix, mte1, aiv, n_l1 * aiv1(w_chunk) if pf else 0.0)
        # the first chunk's hand-off is not hidden: FixPipe write, AIV read, h write, h read
        exposed = (fix + aiv + h_load + env.gm_latency("l0c", "gm") + env.gm_latency("gm", "ub", True)
                   + env.gm_latency("ub", "gm") + env.gm_latency("gm", "l1", True))
    else:
        vec += n * 4 / target.rate("l0c", "ub") + st["vector"]
        to_l1 = vec + st["mte3"] + n * es / target.rate("ub", "l1")
        chunk = max(mte2, mmad, mte1, to_l1)
        exposed = to_l1
    # down projection of one item: per Ho tile, nkd Wd loads [kd, bn]
    tn = ceil_div(s.ho, t.bn)
    cols = min(t.bn, s.ho)
    nkd = ceil_div(t.sw, t.down_rows)
    # (with the prefetch every other Wd tile hits L2, AIV 1 having read it)
    d_mte2 = nkd * (w_head + lat) + t.sw * cols * es * ((0.5 / r_w + 0.5 / r_hit) if pf else 1 / r_w)
    d_steps = nkd * ceil_div(t.down_rows, t.bk)
    d_mmad = d_steps * mmad_cycles(target, dt, t.bm, t.bn, t.bk)
    d_mte1 = d_steps * (2 * st["mte1"] + t.bm * t.bk * es / target.rate("l1", "l0a") + t.bk * t.bn * es / target.rate("l1", "l0b"))
    d_fix = (copy_startup(target, Pipe.FIX, None) + rows * cols * 4 / fix_rate) if target.arch.fixpipe else (
        rows * cols * 4 / target.rate("l0c", "ub") + st["mte3"] + rows * cols * 4 / env.gm_rate(target.rate("ub", "gm"), "ub", "gm"))
    down = tn * max(d_mte2, d_mmad + d_fix, d_mte1, nkd / 2 * aiv1(t.down_rows * cols * es) if pf else 0.0)
    # ... nor are the first Wd load (queued behind the h loads on MTE2) and the last FixPipe
    item = t.per * chunk + exposed + down + env.gm_latency("gm", "l1", False) + env.gm_latency("l0c", "gm")
    fill = nd2nz + s.nacc * w_head + (rows + s.nacc * t.bi) * t.kl1 * es / r_miss + env.gm_latency("gm", "l1", False)
    core = ceil_div(items, bd) * item + fill + env.gm_latency("l0c", "gm")
    w_bytes = (s.nacc * s.h + s.ho) * s.i * es
    gm_read = nrb * w_bytes + t.nsplit * t.per * s.m * s.h * es
    l2_hit = (nrb - 1) * w_bytes * (1 if nrb <= bd else 0)
    gm_write = t.nsplit * s.m * s.ho * 4
    if target.arch.split_cores:  # AIC <-> AIV chunk hand-offs (L2 resident)
        hand = items * t.per * (s.nacc * n * 4 + n * es)
        gm_read += hand
        l2_hit += hand
        gm_write += hand
    if pf:  # AIV 1 reads the up weights and half of Wd once more; the AIC's reads of them hit
        again = nrb * (s.h + s.ho / 2) * s.i * es
        gm_read += again
        l2_hit += again
    floor = bandwidth_bound_cycles(gm_read, gm_write, target, l2_hit)
    kernel = max(core, floor) + target.kernel_launch_cycles
    red = reduce_cycles(s, t.nsplit, target)
    return {"cycles": kernel + red, "kernel": kernel, "reduce": red, "core": core, "floor": floor, "item": item,
            "chunk": chunk, "down": down, "block_dim": bd}


def _reduce_tile(m: int, ho: int, nsplit: int, target: HardwareConfig) -> int:
    """fp32 elements per reduction tile (a piece of one row): spread the rows over the AIVs, and
    keep the nsplit partial pieces + bias + result within half of UB."""
    per_row = max(1, ceil_div(max(1, target.num_aiv), m))
    e = max(min(REDUCE_MIN, ho), min(ho, REDUCE_MAX, round_up(ceil_div(ho, per_row), 64)))
    cap = target.capacity("ub") // 2 // (4 * (nsplit + 3))
    return max(16, min(e, cap - cap % 16)) if e > cap else e


def reduce_cycles(s: Shape, nsplit: int, target: HardwareConfig) -> float:
    """The reduction kernel (`_emit_reduce`): per tile one strided load of the nsplit partial
    pieces (L2 hits: written just before) and the b2 piece, a halving tree of vadds (the upper
    half of the rows onto the lower each time), bias, cast, one store whose completion the next
    tile's cast waits for (one result slot)."""
    e = _reduce_tile(s.m, s.ho, nsplit, target)
    tiles = s.m * ceil_div(s.ho, e)
    bd = min(max(1, target.num_aiv), tiles)
    env = CostEnv(target, target.hbm_bytes_per_cycle / bd)
    st = target.startup
    rate = env.gm_rate(target.rate("gm", "ub"), "gm", "ub", True)
    load = st["mte2"] + nsplit * e * 4 / rate + env.gm_latency("gm", "ub", True)
    if s.b2:
        load += st["mte2"] + e * s.b2 / rate
    vec, n = 0.0, nsplit
    while n > 1:
        vec, n = vec + vector_cycles(target, "vadd", (n // 2) * e, 4), n - n // 2
    if s.b2:
        vec += vector_cycles(target, "vadd", e, 4) + (vector_cycles(target, "vcast", e, 4) if s.b2 != 4 else 0.0)
    vec += vector_cycles(target, "vcast", e, 4)
    store = st["mte3"] + e * s.out_es / env.gm_rate(target.rate("ub", "gm"), "ub", "gm") + env.gm_latency("ub", "gm")
    per_tile = load + vec + store  # one slot per stage: the tile's steps follow each other
    core = ceil_div(tiles, bd) * per_tile
    total = s.m * s.ho
    floor = bandwidth_bound_cycles(total * 4 * nsplit, total * s.out_es, target, total * 4 * nsplit)
    return max(core, floor) + target.kernel_launch_cycles


def choose(s: Shape, target: HardwareConfig, dt: str) -> tuple[FusedTiling, dict[str, float]] | None:
    """The fitting tiling with the fewest estimated cycles (None when none fits)."""
    es = s.es
    ka = max(1, 32 // es)
    m16 = round_up(s.m, 16)
    best = None
    for bm in sorted({min(b, m16) for b in BM_CHOICES}):
        nrb = ceil_div(s.m, bm)
        for bi in sorted({min(b, round_up(s.i, 16)) for b in BI_CHOICES}):
            # I-range widths: every one that changes the split count, up to 4 waves of AICs
            sws = sorted({round_up(ceil_div(s.i, ns), 16) for ns in range(1, min(ceil_div(s.i, 16), 4 * target.num_aic) + 1)})
            for bk in sorted({max(ka, min(b // es, round_up(s.h, ka), bi)) for b in BK_BYTES}):
                if bi % bk:
                    continue
                for bn in sorted({min(b, round_up(s.ho, 16)) for b in BN_CHOICES}):
                    if bn % 16:
                        continue
                    for depth in DEPTHS:
                        kl1 = bk * depth
                        if depth > 1 and kl1 > round_up(s.h, bk) * 2:
                            continue
                        for sw in sws:
                            nsplit = ceil_div(s.i, sw)
                            # Wd rows per down load: the whole range when the slot holds it
                            kd = min(round_up(sw, bk), s.nacc * kl1 if bn <= bi else kl1)
                            t = FusedTiling(bm, bi, bk, kl1, bn, nsplit, ceil_div(sw, bi), sw, kd)
                            if nrb * nsplit < min(target.num_aic, nrb * ceil_div(s.i, 16)) // 2 or not fits(s, t, target):
                                continue
                            e = estimate(s, t, target, dt)
                            key = (round(e["cycles"]), nsplit, -bm)
                            if best is None or key < best[0]:
                                best = (key, t, e)
    return (best[1], best[2]) if best is not None else None


# ----------------------------------------------------------------------------------------------
# the kernel
# ----------------------------------------------------------------------------------------------
def emit(
    ctx: LoweringContext,
    x: SSAValue,
    wg: SSAValue,
    wu: SSAValue | None,
    b1: SSAValue | None,
    act: str,
    wd: SSAValue,
    b2: SSAValue | None,
    out: SSAValue,
    s: Shape,
    t: FusedTiling,
) -> None:
    """Launch the fused kernel and the reduction: out [M, Ho] (GM, y's element type) = the FFN
    of x [M, H] (see the module docstring). b1 / b2: [1, I] / [1, Ho] views or None."""
    el = elem(x)
    gated = wu is not None
    nacc = 2 if gated else 1
    arch = ctx.target.arch
    nrb = ceil_div(s.m, t.bm)
    items = nrb * t.nsplit
    block_dim = min(ctx.target.num_aic, items)
    part = ctx.buffer([t.nsplit * s.m, s.ho], f32)
    args = [x, wg, *([wu] if gated else []), *([b1] if b1 is not None else []), wd, part]
    if arch.split_cores:
        args += [ctx.buffer([block_dim * RING * t.bm, nacc * t.bi], f32), ctx.buffer([block_dim * RING * t.bm, t.bi], el)]
    kb = KernelBuilder(ctx, ctx.name("ffn_fused"), [a.type for a in args], CoreType.MIX if arch.split_cores else CoreType.AIC, block_dim, ctx.current)
    it = iter(kb.args)
    gx, gwg = next(it), next(it)
    gwu = next(it) if gated else None
    gb = next(it) if b1 is not None else None
    gwd, gpart = next(it), next(it)
    ws_acc, ws_h = (next(it), next(it)) if arch.split_cores else (None, None)
    _Kernel(kb, s, t, el, act, arch, gx, [gwg] + ([gwu] if gated else []), gb, gwd, gpart, ws_acc, ws_h).emit(items, nrb)
    ctx.launch(kb.finish(), args)
    _emit_reduce(ctx, part, b2, out, t.nsplit, s)


class _Kernel:
    """Buffers, queues and the emission of one ffn_fused kernel (see the module docstring)."""

    def __init__(self, kb, s: Shape, t: FusedTiling, el, act, arch, gx, weights, gb, gwd, gpart, ws_acc, ws_h):
        self.kb, self.s, self.t, self.el, self.act, self.arch = kb, s, t, el, act, arch
        self.gx, self.weights, self.gb, self.gwd, self.gpart, self.ws_acc, self.ws_h = gx, weights, gb, gwd, gpart, ws_acc, ws_h
        nb = DOUBLE_BUFFER
        L1, L0A, L0B, L0C, UB = MemSpace.L1, MemSpace.L0A, MemSpace.L0B, MemSpace.L0C, MemSpace.UB
        bm, bi, bk, kl1, bn = t.bm, t.bi, t.bk, t.kl1, t.bn
        self.l1x = [kb.alloc([bm, kl1], el, L1) for _ in range(nb)]
        self.l1s = [kb.alloc(list(t.slot(len(weights))), el, L1) for _ in range(nb)]
        self.l1w = [[kb.subview(sl, [i * kl1, 0], [kl1, bi]) for i in range(len(weights))] for sl in self.l1s]
        self.l1d = [kb.subview(sl, [0, 0], [t.down_rows, bn]) for sl in self.l1s]
        self.h_l1 = kb.alloc([bm, t.h_cols], el, L1)
        self.l0a = [kb.alloc([bm, bk], el, L0A) for _ in range(nb)]
        self.l0b = [[kb.alloc([bk, bi], el, L0B) for _ in weights] for _ in range(nb)]
        self.l0bd = [kb.alloc([bk, bn], el, L0B) for _ in range(nb)]
        self.acc = [kb.alloc([bm, bi], f32, L0C) for _ in weights]
        self.acc_d = kb.alloc([bm, bn], f32, L0C)
        self.ub_acc = [kb.alloc([bm, bi], f32, UB) for _ in weights]
        self.ub_h = kb.alloc([bm, bi], el, UB)
        if gb is not None:
            self.ub_b = kb.alloc([1, bi], elem(gb), UB)
            self.ub_b32 = kb.alloc([1, bi], f32, UB) if elem(gb) != f32 else self.ub_b
        self.ub_o = None
        if not arch.fixpipe:  # the down tile leaves L0C through UB
            self.ub_o = kb.alloc([bm, bn], f32, UB)
        self.prefetch = prefetches(s, t, kb.target)
        self.w_layout = "nz" if s.b_nz else "nd2nz"  # weights stored NZ: whole-fractal loads

        sy = self.sync = _Sync(kb, arch.split_cores)
        AIC, AIV = "aic->aic", "aiv->aiv"
        M2, M1, M, FIX, V, M3 = Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX, Pipe.V, Pipe.MTE3
        self.q_l1 = [sy.queue(M2, M1, AIC) for _ in range(nb)]
        self.q_l0 = [sy.queue(M1, M, AIC) for _ in range(nb)]
        self.q_in = sy.queue(M2, V, AIV)
        self.q_out = sy.queue(V, M3, AIV)
        self.q_o = None  # the 910A down tile's UB -> GM queue
        if arch.split_cores:
            self.q_c = sy.queue(M, FIX, AIC)
            self.q_dc = sy.queue(M, FIX, AIC)
            self.q_hres = sy.queue(M2, M1, AIC)  # the resident h: loaded by MTE2, read by MTE1
            self.q_ws = sy.queue(FIX, M2, "aic->aiv", RING)
            self.q_hws = sy.queue(M3, M2, "aiv->aic", RING)
            if self.prefetch:  # `_prefetch`: AIV 1 -> AIC per weight tile, PREFETCH_SLOTS ahead
                with kb.on_subblock(1):
                    self.pf_ub = kb.alloc([max(kl1, t.down_rows), max(bi, bn)], el, UB)
                    self.q_pf = sy.queue(M3, M2, "aiv1->aic", PREFETCH_SLOTS)
                    self.q_pf_in = sy.queue(M3, M2, "aiv1->aiv1")  # slot granted -> the copy
                    self.q_pf_done = sy.queue(M2, M3, "aiv1->aiv1")  # the copy has completed
        else:
            self.q_c = sy.queue(M, V, AIC)
            self.q_dc = sy.queue(M, V, AIC)
            self.q_hres = sy.queue(M3, M1, AIC)  # the resident h: written by MTE3 (UB -> L1)
            self.q_o = sy.queue(V, M3, AIV)

    # ------------------------------------------------------------------------------------------
    def emit(self, items: int, nrb: int) -> None:
        kb, t, s = self.kb, self.t, self.s
        with kb.tiles(items) as w:
            (sp, rb), _ = kb.grid(w, [t.nsplit, nrb], [1, 1])  # row block fastest (module docstring)
            self.m0 = kb.mul(rb, t.bm)
            self.msz = kb.boundary(t.bm, s.m, self.m0)
            self.sp = sp
            i_lo = kb.mul(sp, t.sw)
            self.i_lo = i_lo
            self.i_hi = kb.add(i_lo, t.sw) if s.i % t.sw == 0 else kb.min(kb.add(i_lo, t.sw), s.i)
            if s.i % t.sw == 0:
                nch: Index = t.per
            else:
                nch = kb.div(kb.add(kb.sub(self.i_hi, i_lo), t.bi - 1), t.bi)
            self.ws_row = kb.mul(kb.block_idx, RING * t.bm)
            self.q_hres.acquire()
            self._gate_up(0)
            if not (isinstance(nch, int) and nch <= 1):
                with kb.range(1, nch, 1) as j:
                    self._gate_up(j)
                    if self.arch.split_cores:
                        self._load_h(kb.sub(j, 1))
            if self.arch.split_cores:
                self._load_h(kb.sub(nch, 1))
            self.q_hres.handoff()
            self._down()
            self.q_hres.release()
        self.sync.drain()

    def _range_left(self, c0: Index, size: int) -> Index:
        """Valid columns of a piece of `size` at c0: min(size, end of the item's range - c0)."""
        t = self.t
        if t.sw % size == 0 and self.s.i % t.sw == 0:
            return size
        return self.kb.min(size, self.kb.sub(self.i_hi, c0))

    def _slot_row(self, j: Index) -> Index:
        """GM row of ring slot j mod RING of this core."""
        kb = self.kb
        return kb.add(self.ws_row, kb.mul(kb.rem(j, RING), self.t.bm))

    def _gate_up(self, j: Index) -> None:
        """Chunk j of the item: gate/up accumulators over H, then act·mul into h."""
        kb, t, s = self.kb, self.t, self.s
        c0 = kb.add(self.i_lo, kb.mul(j, t.bi))
        csz = self._range_left(c0, t.bi)
        n_l1 = ceil_div(s.h, t.kl1)
        steps = t.kl1 // t.bk
        l1_base = kb.mul(j, n_l1) if n_l1 % 2 else 0

        def l0_step(p: int, q: int, k1: Index, kk: Index) -> None:
            self.q_l0[q].acquire()
            kb.copy(kb.subview(self.l1x[p], [0, kk], [t.bm, t.bk]), self.l0a[q])
            for src, dst in zip(self.l1w[p], self.l0b[q]):
                kb.copy(kb.subview(src, [kk, 0], [t.bk, t.bi]), dst)
            self.q_l0[q].handoff()
            for b, c in zip(self.l0b[q], self.acc):
                _mmad(kb, self.l0a[q], b, c, kb.add(k1, kk), None)
            self.q_l0[q].release()

        def l1_step(p: int, k1: Index) -> None:
            ksz = kb.boundary(t.kl1, s.h, k1)
            last = self.weights[-1]
            if self.prefetch:  # AIV 1 brings the up chunk into L2; the AIC reads the gate one itself
                self._prefetch(kb.subview(last, [k1, c0], [ksz, csz]), [t.kl1, t.bi])
            self.q_l1[p].acquire()
            kb.copy(kb.subview(self.gx, [self.m0, k1], [self.msz, ksz]), self.l1x[p], layout="nd2nz")
            for w, dst in zip(self.weights, self.l1w[p]):
                if self.prefetch and w is last:
                    self.q_pf.deque()
                kb.copy(kb.subview(w, [k1, c0], [ksz, csz]), dst, layout=self.w_layout)
                if self.prefetch and w is last:
                    self.q_pf.release()
            self.q_l1[p].handoff()
            l0_base = kb.mul(kb.add(l1_base, kb.div(k1, t.kl1)), steps) if steps % 2 else 0
            with kb.range(0, ksz, t.bk) as kk:
                _by_parity(kb, kk, t.bk, DOUBLE_BUFFER, lambda q: l0_step(p, q, k1, kk), l0_base)
            self.q_l1[p].release()

        self.q_c.acquire()
        with kb.range(0, s.h, t.kl1) as k1:
            _by_parity(kb, k1, t.kl1, DOUBLE_BUFFER, lambda p: l1_step(p, k1), l1_base)
        self.q_c.enque()
        if self.arch.split_cores:
            row = self._slot_row(j)
            self.q_c.deque()
            self.q_ws.acquire()
            for i, c in enumerate(self.acc):
                kb.copy(c, kb.subview(self.ws_acc, [row, i * t.bi], [t.bm, t.bi]), layout="nz2nd")
            self.q_c.release()
            self.q_ws.enque()
            # AIV: the accumulators back from the ring (L2)
            self.q_ws.deque()
            self.q_in.acquire()
            for i, u in enumerate(self.ub_acc):
                kb.copy(kb.subview(self.ws_acc, [row, i * t.bi], [t.bm, t.bi]), u)
            if self.gb is not None:
                kb.copy(kb.subview(self.gb, [0, c0], [1, csz]), self.ub_b)
            self.q_ws.release()
            self.q_in.handoff()
        else:
            self.q_in.acquire()
            if self.gb is not None:
                kb.copy(kb.subview(self.gb, [0, c0], [1, csz]), self.ub_b)
            self.q_in.handoff()
            self.q_c.deque()
            for c, u in zip(self.acc, self.ub_acc):
                kb.copy(c, u)  # L0C -> UB on the vector pipe (coupled core)
            self.q_c.release()
        g = self.ub_acc[0]
        if self.gb is not None:
            if self.ub_b32 is not self.ub_b:
                kb.emit(ascend.VcastOp(self.ub_b, self.ub_b32))
            kb.emit(ascend.vector_op("vadd")(g, self.ub_b32, g))
        kb.emit(ascend.vector_op(self.act)(g, g))
        if len(self.acc) == 2:
            kb.emit(ascend.vector_op("vmul")(g, self.ub_acc[1], g))
        self.q_out.acquire()
        kb.emit(ascend.VcastOp(g, self.ub_h) if self.el != f32 else ascend.vector_op("vcopy")(g, self.ub_h))
        self.q_in.release()
        self.q_out.handoff()
        if self.arch.split_cores:
            self.q_hws.acquire()
            kb.copy(self.ub_h, kb.subview(self.ws_h, [self._slot_row(j), 0], [t.bm, t.bi]))
            self.q_hws.enque()
        else:  # UB -> L1 (MTE3, coupled core): straight into the resident h
            kb.copy(self.ub_h, kb.subview(self.h_l1, [0, kb.mul(j, t.bi)], [t.bm, t.bi]))
        self.q_out.release()

    def _prefetch(self, src: SSAValue, shape: list[int]) -> None:
        """AIV 1, ahead of the AIC's load of weight tile `src` in program order: once a slot is
        free (the AIC has loaded the tile PREFETCH_SLOTS back), read it GM -> UB (a scratch tile
        nobody reads: the read leaves it in L2) and signal the AIC when the copy has completed."""
        kb = self.kb
        with kb.on_subblock(1):
            self.q_pf.acquire()
            self.q_pf_in.handoff()
            kb.copy(src, kb.subview(self.pf_ub, [0, 0], shape))
            self.q_pf_done.handoff()
            self.q_pf.enque()

    def _load_h(self, j: Index) -> None:
        """AIC: h chunk j from its ring slot into the resident h (910B)."""
        kb, t = self.kb, self.t
        self.q_hws.deque()
        kb.copy(kb.subview(self.ws_h, [self._slot_row(j), 0], [t.bm, t.bi]),
                kb.subview(self.h_l1, [0, kb.mul(j, t.bi)], [t.bm, t.bi]), layout="nd2nz")
        self.q_hws.release()

    def _down(self) -> None:
        """y partial [bm, Ho] of the item = h (resident) · Wd[item range, :], per Ho tile, Wd
        through the gate/up L1 slots kd rows at a time."""
        kb, t, s = self.kb, self.t, self.s
        kd = t.down_rows
        steps = kd // t.bk
        nkd_max = ceil_div(t.sw, kd)
        if s.i % t.sw == 0:
            nkd: Index = nkd_max
        else:
            nkd = kb.div(kb.add(kb.sub(self.i_hi, self.i_lo), kd - 1), kd)
        prow = kb.add(kb.mul(self.sp, s.m), self.m0)
        with kb.range(0, s.ho, t.bn) as n0:
            nsz = kb.boundary(t.bn, s.ho, n0)
            tile_base = kb.mul(kb.div(n0, t.bn), nkd_max) if nkd_max % 2 else 0

            def l0_step(p: int, q: int, jd: Index, kk: Index) -> None:
                self.q_l0[q].acquire()
                kb.copy(kb.subview(self.h_l1, [0, kb.add(kb.mul(jd, kd), kk)], [t.bm, t.bk]), self.l0a[q])
                kb.copy(kb.subview(self.l1d[p], [kk, 0], [t.bk, t.bn]), self.l0bd[q])
                self.q_l0[q].handoff()
                _mmad(kb, self.l0a[q], self.l0bd[q], self.acc_d, kb.add(kb.mul(jd, kd), kk), None)
                self.q_l0[q].release()

            def load(p: int, jd: Index) -> None:
                r0 = kb.add(self.i_lo, kb.mul(jd, kd))
                rsz = self._range_left(r0, kd)
                mine = self.prefetch and p == 1  # AIV 1 brings every other Wd tile into L2
                if mine:
                    self._prefetch(kb.subview(self.gwd, [r0, n0], [rsz, nsz]), [kd, t.bn])
                self.q_l1[p].acquire()
                if mine:
                    self.q_pf.deque()
                kb.copy(kb.subview(self.gwd, [r0, n0], [rsz, nsz]), self.l1d[p], layout=self.w_layout)
                if mine:
                    self.q_pf.release()
                self.q_l1[p].handoff()
                l0_base = kb.mul(kb.add(tile_base, jd), steps) if steps % 2 else 0
                with kb.range(0, kd, t.bk) as kk:
                    _by_parity(kb, kk, t.bk, DOUBLE_BUFFER, lambda q: l0_step(p, q, jd, kk), l0_base)
                self.q_l1[p].release()

            self.q_dc.acquire()
            with kb.range(0, nkd, 1) as jd:
                _by_parity(kb, jd, 1, DOUBLE_BUFFER, lambda p: load(p, jd), tile_base)
            self.q_dc.handoff()
            dst = kb.subview(self.gpart, [prow, n0], [self.msz, nsz])
            _l0c_out(kb, self.arch.fixpipe, self.acc_d, dst, self.q_dc, self.q_o, self.ub_o)


def _emit_reduce(ctx: LoweringContext, part: SSAValue, b2: SSAValue | None, out: SSAValue, nsplit: int, s: Shape) -> None:
    """Vector kernel: out [M, Ho] = cast(sum of the nsplit fp32 partials [nsplit·M, Ho] (+ b2)).
    Tiles of one row piece [1, e]: one strided load brings the piece of every split ([nsplit, e],
    rows M apart in GM: one DMA start-up and one latency instead of nsplit), then vadds of
    halves fold it to one row."""
    m, ho = s.m, s.ho
    e = _reduce_tile(m, ho, nsplit, ctx.target)
    ntiles = m * ceil_div(ho, e)
    block_dim = min(max(1, ctx.target.num_aiv), ntiles)
    out_el = elem(out)
    args = [part, *([b2] if b2 is not None else []), ctx.view(out, [m, ho])]
    kb = KernelBuilder(ctx, ctx.name("ffn_reduce"), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    it = iter(kb.args)
    gpart = next(it)
    gb = next(it) if b2 is not None else None
    gout = next(it)
    UB = MemSpace.UB
    parts = kb.alloc([nsplit, e], f32, UB)
    acc = kb.subview(parts, [0, 0], [1, e])
    res = kb.alloc([1, e], out_el, UB)
    if gb is not None:
        ub_b = kb.alloc([1, e], elem(gb), UB)
        ub_b32 = kb.alloc([1, e], f32, UB) if elem(gb) != f32 else ub_b
    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as w:
        (r, c), (_, csz) = kb.grid(w, [m, ho], [1, e])
        q_in.acquire()
        src = kb.subview(gpart, [r, c], [nsplit, csz], [m, 1]) if nsplit > 1 else kb.subview(gpart, [r, c], [1, csz])
        kb.copy(src, parts)
        if gb is not None:
            kb.copy(kb.subview(gb, [0, c], [1, csz]), ub_b)
        q_in.handoff()
        n = nsplit
        while n > 1:  # rows [0, n) hold the partial sums; fold the upper half onto the lower
            h, lo = n // 2, n - n // 2
            a = kb.subview(parts, [0, 0], [h, e])
            kb.emit(ascend.vector_op("vadd")(a, kb.subview(parts, [lo, 0], [h, e]), a))
            n = lo
        if gb is not None:
            if ub_b32 is not ub_b:
                kb.emit(ascend.VcastOp(ub_b, ub_b32))
            kb.emit(ascend.vector_op("vadd")(acc, ub_b32, acc))
        q_out.acquire()
        kb.emit(ascend.VcastOp(acc, res) if out_el != f32 else ascend.vector_op("vcopy")(acc, res))
        q_in.release()
        q_out.handoff()
        kb.copy(res, kb.subview(gout, [r, c], [1, csz]))
        q_out.release()
    ctx.launch(kb.finish(), args)


def dtype_name(el: Attribute) -> str:
    """The cube dtype key ("f16", "bf16", "f32") of an element type."""
    return {"f16": "f16", "bf16": "bf16", "f32": "f32"}.get(str(el), str(el))


def shape_of(m: int, hdim: int, idim: int, ho: int, el: Attribute, out_el: Attribute, gated: bool,
             b1: SSAValue | None, b2: SSAValue | None, act: str, b_nz: bool = False) -> Shape:
    """The Shape of an FFN (element sizes from the types, bias sizes 0 when absent)."""
    return Shape(m, hdim, idim, ho, itemsize(el), itemsize(out_el), 2 if gated else 1,
                 itemsize(elem(b1)) if b1 is not None else 0, itemsize(elem(b2)) if b2 is not None else 0, act, b_nz)
