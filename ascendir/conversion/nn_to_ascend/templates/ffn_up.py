"""`ffn_up`, the first kernel of the two-kernel FFN (templates/ffn.py, path B):
h [m, n] = act(x·Wg [+ b1]) [* x·Wu], per output tile [bm, bn] of h (tiles block-cyclic over the
cores).

* AIC: the K loop over H loads each x tile into L1 / L0A once and multiplies it by the Wg and
  the Wu tile, loaded side by side into one [k, 2·bn] L1 / L0B tile, into one [bm, 2·bn] L0C
  accumulator (gate and up share every A load and every mmad; ping-pong L1 / L0 slots as in
  matmul.py).
* hand-off to the vector unit: on a split AIC / AIV chip (dav-c220) through FixPipe into a
  per-core GM workspace ([bm, nacc·bn] fp32, in L2) that the AIV reads back (MTE2); on a coupled
  core (dav-c100) L0C -> UB directly on the vector pipe.
* AIV: [bias,] act [and the product with up] in fp32, cast to the input dtype, stored (MTE3).
* L2 prefetch (dav-c220, more than one row of tiles re-reading long weight panels, `prefetches`):
  the group's AIVs read each weight chunk GM -> UB before the AIC loads it (at most
  PREFETCH_TILES tiles ahead, each chunk signalled), so the AIC's weight loads hit L2
  (110 B/cycle, S1) instead of paying the first read of each panel at its 32 B/cycle DDR path.
  Only the first row of tiles is prefetched when the later rows' re-reads of the panels hit
  L2 anyway (`first_row`, from tiling.estimate): a prefetch of a panel already in L2 only adds
  L2 traffic (LLaMA-7B prefill-512: 1.85 -> 1.31 GB of GM reads, 610,827 -> 570,847 cycles).
  AIV 1, otherwise idle, reads Wg; AIV 0 reads Wu (gated) one tile ahead of its epilogue in
  program order (the next tile's chunks, then this tile's epilogue), each AIV on its own DDR
  path. AIV 0's epilogue then runs in row pieces (`epilogue_rows`) so that its UB also holds
  the prefetch's scratch chunk.

The tile comes from `up_tiling` (or a forced tiling of the region's gate / up matmuls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.flash_attention import _Q, _Sync
from ascendir.conversion.nn_to_ascend.templates.elementwise import MIN_SPLIT_BYTES
from ascendir.conversion.nn_to_ascend.tiling import Problem, Tiling, estimate
from ascendir.conversion.nn_to_ascend.templates.matmul import DOUBLE_BUFFER, _by_parity, _mmad, heuristic_tiling
from ascendir.dialects import ascend
from ascendir.hardware.align import aligned_bytes
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.errors import AscendirError


def up_tiling(ctx: LoweringContext, m: int, n: int, k: int, el: Attribute, nacc: int, bias: bool,
              act: str = "vsilu", b_nz: bool = False) -> tuple[int, int, int, int]:
    """(bm, bn, bk, kl1) of ffn_up: matmul.heuristic_tiling's tiles, shrunk until `nacc` fp32
    accumulators fit L0C, nacc B slots per ping-pong slot fit L0B and L1, and the vector side
    ([bm, bn] fp32 per accumulator + the h tile + a bias row) fits UB; the L1 chunk depth kl1 /
    bk the one tiling.estimate scores fastest (`act`: the activation's vector op, for its cost;
    `b_nz`: the weights stored in NZ fractals).

    Raises:
        AscendirError: no tile fits."""
    t = ctx.target
    base = heuristic_tiling(ctx, m, n, k, el)
    bm, bn, bk = base.m, base.n, base.k
    es = itemsize(el)
    nb = DOUBLE_BUFFER

    def ub_bytes(bm: int, bn: int) -> int:
        return nacc * round_up(bm * bn * 4, 32) + round_up(bm * bn * es, 32) + (2 * round_up(bn * 4, 32) if bias else 0)

    while nacc * bm * bn * 4 > t.capacity("l0c") or ub_bytes(bm, bn) > t.capacity("ub"):
        if bn >= bm and bn > 16:
            bn = round_up(bn // 2, 16)
        elif bm > 16:
            bm = round_up(bm // 2, 16)
        else:
            raise ctx.error(f"ffn: no {nacc}-accumulator tile fits {t.name}")
    # heuristic_tiling spreads small problems by the A / B bytes a tile loads, which halve in 16
    # bits; the AIV epilogue works on the f32 accumulators whatever the input type, so spread by
    # that work too (the vector templates' rule: tiles of at least MIN_SPLIT_BYTES each)
    while ceil_div(m, bm) * ceil_div(n, bn) < t.num_aic and nacc * bm * bn * 4 >= 2 * MIN_SPLIT_BYTES and max(bm, bn) > 16:
        if bn >= bm:
            bn = round_up(bn // 2, 16)
        else:
            bm = round_up(bm // 2, 16)
    ka = max(1, 32 // es)
    while nb * (bm * bk * es) > t.capacity("l0a") or nb * nacc * bk * bn * es > t.capacity("l0b"):
        if bk <= ka:
            raise ctx.error(f"ffn: a {bm}x{bk} tile does not fit L0A/L0B of {t.name}")
        bk = round_up(bk // 2, ka)
    if nb * (bm + nacc * bn) * bk * es > t.capacity("l1"):
        raise ctx.error(f"ffn: tiles do not fit L1 of {t.name}")
    # the L1 depth (K steps per L1 chunk): from the heuristic's up to what L1 holds, the one
    # tiling.estimate scores fastest (each chunk costs 1 + nacc ND->NZ start-ups, S4: deeper
    # chunks pay fewer of them; LLaMA-7B prefill ffn_up, 910B2: 4 -> 5, 618,877 -> 610,827 cycles)
    steps = [d for d in range(1, ceil_div(k, bk) + 1) if nb * (bm + nacc * bn) * d * bk * es <= t.capacity("l1")]
    first = min(max(1, base.k_l1 // max(base.k, 1)), max(steps))
    # deeper only while the prefetch decision stays the heuristic depth's (a chunk count below
    # MIN_PREFETCH_CHUNKS turns it off, which the estimate ranks too well on small FFNs: 160 x
    # 2048 x 256, kl1 704 without it 16,925 simulated cycles, kl1 256 with it 14,961)
    pf_first = prefetches(ctx, m, k, bm, bn, first * bk, el, nacc)
    steps = [d for d in steps if d >= first and prefetches(ctx, m, k, bm, bn, d * bk, el, nacc) == pf_first] or [first]
    # the kernel's L1 and L0 ping-pong parity restarts with every tile and every chunk, so an odd
    # count of chunks per tile or of L0 steps per chunk reuses the slot just filled (MTE2 / MTE1
    # wait for M): keep even counts where there are some (LLaMA-7B prefill, 910B2: kl1 320, 13
    # chunks of 5 steps, 600,013 simulated cycles; kl1 256, 16 of 4, 570,847)
    steps = [d for d in steps if d % 2 == 0 and ceil_div(k, d * bk) % 2 == 0] or steps
    if len(steps) == 1 or not ctx.target.cube.k_per_cycle.get(str(el)):
        return bm, bn, bk, steps[0] * bk
    p = Problem(1, m, nacc * n, k, str(el), es, es if bias else 0, True, act=act, ffn_up=nacc, b_nz=b_nz)

    def cost(d: int) -> float:
        pf = prefetches(ctx, m, k, bm, bn, d * bk, el, nacc)
        if pf and ctx.target.arch.split_cores:
            try:
                epilogue_rows(ctx, bm, bn, d * bk, el, nacc, bias, prefetchers(ctx, nacc == 2) == 2)
            except AscendirError:
                return math.inf
        return estimate(p, Tiling(bm, nacc * bn, bk, d, prefetch=int(pf)), t).cycles

    best = min(steps, key=lambda d: (cost(d), d))
    return bm, bn, bk, best * bk


# Tiles AIV 1 may prefetch ahead of the AIC (cross-core flags count up to 16 pending sets, S2
# CrossCoreSetFlag): two keeps the next tile's weights arriving while the AIC works on this one.
PREFETCH_TILES = 2
# K chunks a tile needs for the prefetch to pay for its per-tile hand-off: measured on the
# simulator, the corpus FFNs (K <= 512: 1-2 chunks of 256) ran 0.4-0.8 % slower with it, the
# LLaMA-7B prefill FFN (K = 4096: 16 chunks) 9 % faster.
MIN_PREFETCH_CHUNKS = 8


def prefetches(ctx: LoweringContext, m: int, k: int, bm: int, bn: int, kl1: int, el: Attribute, nacc: int) -> bool:
    """Whether ffn_up prefetches the weights on AIV 1: a split-core chip (910B: the AIVs exist
    and AIV 1 is idle), more than one row of tiles (each weight panel is read ceil(m / bm) times,
    the first read at the AIC's 32 B/cycle DDR path [S1]; with one row every read is a first
    read, and one AIV streams HBM no faster than the AIC), a K loop of at least
    MIN_PREFETCH_CHUNKS chunks, and nacc chunks [kl1, bn] in its UB."""
    t = ctx.target
    return (t.arch.split_cores and ceil_div(m, bm) > 1 and ceil_div(k, kl1) >= MIN_PREFETCH_CHUNKS
            and aligned_bytes(t, "ub", kl1 * bn * itemsize(el)) <= t.capacity("ub"))


def prefetchers(ctx: LoweringContext, gated: bool) -> int:
    """AIVs of a group that prefetch ffn_up's weights when `prefetches` holds: AIV 1 reads Wg,
    and AIV 0 Wu when the FFN is gated (1 or 2; each reads one weight, on its own DDR path)."""
    return 2 if gated and ctx.target.aiv_per_aic >= 2 else 1


def epilogue_rows(ctx: LoweringContext, bm: int, bn: int, kl1: int, el: Attribute, nacc: int, bias: bool,
                  prefetch: bool) -> int:
    """Rows of a tile AIV 0 activates per step: all bm when its UB holds the nacc fp32 tiles
    [bm, bn], the h tile and the bias rows, else (AIV 0 prefetching Wu: its [kl1, bn] scratch
    chunk is in the same UB) the largest bm / 2^j, a multiple of 16, that fits beside it.

    Raises:
        AscendirError: not even 16 rows fit."""
    t, es = ctx.target, itemsize(el)
    scratch = aligned_bytes(t, "ub", kl1 * bn * es) if prefetch else 0
    rows = bm
    while True:
        need = (nacc * aligned_bytes(t, "ub", rows * bn * 4) + aligned_bytes(t, "ub", rows * bn * es)
                + (2 * aligned_bytes(t, "ub", bn * 4) if bias else 0) + scratch)
        if need <= t.capacity("ub"):
            return rows
        if rows % 32 or rows <= 16:
            raise ctx.error(f"ffn: no epilogue piece of a {bm}x{bn} tile fits UB of {t.name} beside the prefetch")
        rows //= 2


def emit_up(ctx: LoweringContext, x: SSAValue, wg: SSAValue, wu: SSAValue | None, b1: SSAValue | None, act: str,
            m: int, k: int, n: int, el: Attribute, tiles: tuple[int, int, int, int], b_nz: bool = False,
            first_row: bool = False) -> SSAValue:
    """Launch ffn_up over x [m, k], Wg / Wu [k, n] and the optional b1 row [n] (GM buffers of
    element type `el`; `act` a vector op name) with `tiles` = (bm, bn, bk, kl1) from up_tiling;
    `b_nz`: Wg / Wu are stored in NZ fractals (whole-fractal loads, tiling.nz_weight);
    `first_row`: the prefetch (if any) covers the first row of tiles only (tiling.estimate's
    part "first_row": the later rows' re-reads hit L2); returns the GM buffer of h [m, n]."""
    kernel = _UpKernel(ctx, x, wg, wu, b1, act, m, k, n, el, tiles)
    kernel.w_layout = "nz" if b_nz else "nd2nz"
    kernel.first_row = first_row
    return kernel.emit()


@dataclass
class _Prefetcher:
    """One AIV's L2 prefetch of one weight (`_UpKernel._prefetch_tile`): its UB scratch chunk
    and flags: `q_pf` AIV -> AIC per chunk "in L2" (raw, no slots: the AIC waits for each),
    `q_tile` AIC -> AIV per tile "the AIC has loaded a tile" (PREFETCH_TILES slots: the AIV runs
    at most that many tiles ahead), `q_in` tile granted -> copies and `q_done` copy completed ->
    signal, within the AIV."""

    sub: int
    weight: SSAValue
    ub: SSAValue
    q_pf: _Q
    q_tile: _Q
    q_in: _Q
    q_done: _Q


class _UpKernel:
    """Builds one ffn_up kernel; see the module docstring for the structure."""

    def __init__(self, ctx: LoweringContext, x: SSAValue, wg: SSAValue, wu: SSAValue | None, b1: SSAValue | None,
                 act: str, m: int, k: int, n: int, el: Attribute, tiles: tuple[int, int, int, int]):
        self.ctx, self.act, self.m, self.k, self.n, self.el = ctx, act, m, k, n, el
        self.h = ctx.buffer([m, n], el)
        self.gated = wu is not None
        self.biased = b1 is not None
        self.nacc = 2 if self.gated else 1
        self.bm, self.bn, self.bk, self.kl1 = tiles  # up_tiling's, as choose_plan scored them
        self.ntiles = ceil_div(m, self.bm) * ceil_div(n, self.bn)
        self.block_dim = min(ctx.target.num_aic, self.ntiles)
        self.split_cores = ctx.target.arch.split_cores  # AIC -> AIV through a GM workspace
        self.prefetch = prefetches(ctx, m, k, self.bm, self.bn, self.kl1, el, self.nacc)
        # AIV 1 prefetches Wg and (gated) AIV 0 Wu: each weight's first read of a panel on its
        # own AIV DDR path (32 B/cycle each, S1 ddr_read_rate), the AIC's loads all hit L2
        self.aivs = prefetchers(ctx, self.gated) if self.prefetch else 0
        self.er = self.bm
        if self.split_cores:
            try:
                self.er = epilogue_rows(ctx, self.bm, self.bn, self.kl1, el, self.nacc, self.biased, self.aivs == 2)
            except AscendirError:  # no epilogue piece fits beside the Wu chunk: AIV 1's Wg prefetch only
                self.aivs = min(self.aivs, 1)
                self.er = epilogue_rows(ctx, self.bm, self.bn, self.kl1, el, self.nacc, self.biased, False)
        args = [x, wg, *([wu] if self.gated else []), *([ctx.view(b1, [1, n])] if b1 is not None else []), self.h]
        if self.split_cores:
            args.append(ctx.buffer([self.block_dim * self.bm, self.nacc * self.bn], f32))
        self.args = args
        self.w_layout = "nd2nz"  # "nz": the weights are stored in NZ fractals (emit_up's b_nz)
        self.first_row = False  # prefetch the first row of tiles only (emit_up's first_row)

    # ------------------------------------------------------------------------------------------
    def emit(self) -> SSAValue:
        ctx = self.ctx
        core = CoreType.MIX if self.split_cores else CoreType.AIC
        kb = KernelBuilder(ctx, ctx.name("ffn_up"), [a.type for a in self.args], core, self.block_dim, ctx.current)
        self.kb = kb
        it = iter(kb.args)
        self.gx, gwg = next(it), next(it)
        gwu = next(it) if self.gated else None
        self.gb = next(it) if self.biased else None
        self.gh = next(it)
        self.ws = next(it) if self.split_cores else None
        self.weights = [gwg] + ([gwu] if self.gated else [])
        self._buffers()
        self._queues()
        ahead = [pf for pf in self.pf if pf.sub == 0]  # AIV 0: the next tile, before this one's epilogue
        if ahead:
            self._if_prefetched(kb.block_idx, lambda: [self._prefetch_tile(pf, kb.block_idx) for pf in ahead])
        with kb.tiles(self.ntiles) as t:
            (m0, n0), (msz, nsz) = kb.grid(t, [self.m, self.n], [self.bm, self.bn])
            for pf in self.pf:
                if pf.sub == 1:
                    self._if_prefetched(t, lambda pf=pf: self._prefetch_tile(pf, t))
            self._if_prefetched(t, lambda: self._accumulate(m0, n0, msz, nsz, bool(self.pf)),
                                lambda: self._accumulate(m0, n0, msz, nsz, False))
            if ahead:
                nxt = kb.add(t, self.block_dim)
                self._if_prefetched(nxt, lambda: [self._prefetch_tile(pf, nxt) for pf in ahead])
            if self.split_cores:
                self._epilogue_through_workspace(m0, n0, msz, nsz)
            else:
                self._to_vector_in_core(n0, nsz)
                self._activate_and_store(m0, n0, msz, nsz)
        self.sync.drain()
        ctx.launch(kb.finish(), self.args)
        return self.h

    def _buffers(self) -> None:
        kb, el, bm, bn, bk, kl1, nb, er = self.kb, self.el, self.bm, self.bn, self.bk, self.kl1, DOUBLE_BUFFER, self.er
        L1, L0A, L0B, L0C, UB = MemSpace.L1, MemSpace.L0A, MemSpace.L0B, MemSpace.L0C, MemSpace.UB
        self.l1a = [kb.alloc([bm, kl1], el, L1) for _ in range(nb)]
        # the nacc weight tiles side by side ([Wg | Wu] columns, as CANN's FFN takes W1 with
        # N1 = 2·K2): one L1 -> L0B copy and one mmad of [bm, nacc·bn] per L0 step, one FixPipe
        # copy per tile
        w = self.nacc * bn
        self.l1b = [kb.alloc([kl1, w], el, L1) for _ in range(nb)]
        self.l0a = [kb.alloc([bm, bk], el, L0A) for _ in range(nb)]
        self.l0b = [kb.alloc([bk, w], el, L0B) for _ in range(nb)]
        self.acc = kb.alloc([bm, w], f32, L0C)
        self.ub_acc = [kb.alloc([er, bn], f32, UB) for _ in self.weights]
        self.ub_h = kb.alloc([er, bn], el, UB)
        self.ub_b = self.ub_b32 = None
        if self.gb is not None:
            self.ub_b = kb.alloc([1, bn], elem(self.gb), UB)
            self.ub_b32 = kb.alloc([1, bn], f32, UB) if elem(self.gb) != f32 else self.ub_b

    def _queues(self) -> None:
        s = self.sync = _Sync(self.kb, self.split_cores)
        AIC, AIV, nb = "aic->aic", "aiv->aiv", DOUBLE_BUFFER
        self.q_l1 = [s.queue(Pipe.MTE2, Pipe.MTE1, AIC) for _ in range(nb)]
        self.q_l0 = [s.queue(Pipe.MTE1, Pipe.M, AIC) for _ in range(nb)]
        self.q_in = s.queue(Pipe.MTE2, Pipe.V, AIV)  # workspace tiles (910B) and the bias row
        if self.split_cores:
            self.q_c = s.queue(Pipe.M, Pipe.FIX, AIC)
            self.q_ws = s.queue(Pipe.FIX, Pipe.MTE2, "aic->aiv")
        else:
            self.q_c = s.queue(Pipe.M, Pipe.V, AIC)
        self.q_out = s.queue(Pipe.V, Pipe.MTE3, AIV)
        self.pf: list[_Prefetcher] = []
        for sub, w in zip((1, 0), self.weights[: self.aivs]):
            name = "aiv1" if sub else "aiv"
            with self.kb.on_subblock(sub):
                ub = self.kb.alloc([self.kl1, self.bn], self.el, MemSpace.UB)
                self.pf.append(_Prefetcher(
                    sub, w, ub,
                    s.queue(Pipe.MTE3, Pipe.MTE2, f"{name}->aic"),
                    s.queue(Pipe.MTE3, Pipe.MTE2, f"{name}->aic", PREFETCH_TILES),
                    s.queue(Pipe.MTE3, Pipe.MTE2, f"{name}->{name}"),
                    s.queue(Pipe.MTE2, Pipe.MTE3, f"{name}->{name}"),
                ))

    # ------------------------------------------------------------------------------------------
    def _if_prefetched(self, t: Index, then, otherwise=lambda: None) -> None:
        """then() for a tile whose weight chunks the AIVs prefetch, else otherwise(): every tile
        below ntiles, or with `first_row` (emit_up) only the first row of tiles (n fastest:
        t < tiles per row), whose chunks are the weights' first reads; the later rows re-read
        the panels from L2 without a prefetch (tiling.estimate decides that they hit)."""
        kb = self.kb
        if not self.pf:
            otherwise()
            return
        bound = ceil_div(self.n, self.bn) if self.first_row else self.ntiles
        if isinstance(t, int) and t < bound:
            then()
            return
        kb.if_else(kb.emit(arith.CmpiOp(kb.idx(t), kb.idx(bound), "slt")).results[0], then, otherwise)

    def _accumulate(self, m0: Index, n0: Index, msz: Index, nsz: Index, prefetched: bool) -> None:
        """AIC: gate (and up) accumulated over H, sharing every A tile (`prefetched`: a tile of
        the first row, whose weight chunks the AIVs bring into L2 first)."""
        kb = self.kb
        pfs = self.pf if prefetched else []
        self.q_c.acquire()
        with kb.range(0, self.k, self.kl1) as k1:
            for pf in pfs:  # the AIVs have brought this chunk of the weights into L2
                pf.q_pf.deque()
            _by_parity(kb, k1, self.kl1, DOUBLE_BUFFER, lambda p: self._l1_step(p, k1, m0, n0, msz, nsz))
        for pf in pfs:
            pf.q_tile.release()
        self.q_c.enque()

    def _l1_step(self, p: int, k1: Index, m0: Index, n0: Index, msz: Index, nsz: Index) -> None:
        kb, q = self.kb, self.q_l1[p]
        ksz = kb.boundary(self.kl1, self.k, k1)
        q.acquire()
        kb.copy(kb.subview(self.gx, [m0, k1], [msz, ksz]), self.l1a[p], layout="nd2nz")
        for i, w in enumerate(self.weights):
            kb.copy(kb.subview(w, [k1, n0], [ksz, nsz]), kb.subview(self.l1b[p], [0, i * self.bn], [self.kl1, self.bn]), layout=self.w_layout)
        q.handoff()
        with kb.range(0, ksz, self.bk) as kk:
            _by_parity(kb, kk, self.bk, DOUBLE_BUFFER, lambda s: self._l0_step(p, s, k1, kk))
        q.release()

    def _l0_step(self, p: int, s: int, k1: Index, kk: Index) -> None:
        kb, q = self.kb, self.q_l0[s]
        q.acquire()
        kb.copy(kb.subview(self.l1a[p], [0, kk], [self.bm, self.bk]), self.l0a[s])
        kb.copy(kb.subview(self.l1b[p], [kk, 0], [self.bk, self.nacc * self.bn]), self.l0b[s])
        q.handoff()
        _mmad(kb, self.l0a[s], self.l0b[s], self.acc, kb.add(k1, kk), None)
        q.release()

    # ------------------------------------------------------------------------------------------
    def _prefetch_tile(self, pf: _Prefetcher, t: Index) -> None:
        """AIV `pf.sub`, for tile `t` (AIV 1: the tile the AIC is about to load, in the same loop
        iteration; AIV 0: the next one, before this tile's epilogue): once the AIC has loaded the
        tile PREFETCH_TILES back, each chunk of `pf.weight` read GM -> UB (a scratch tile nobody
        reads: the read leaves it in L2), then handed to the AIC chunk by chunk."""
        kb = self.kb
        with kb.on_subblock(pf.sub):
            (_, n0), (_, nsz) = kb.grid(t, [self.m, self.n], [self.bm, self.bn])
            pf.q_tile.acquire()
            pf.q_in.handoff()
            with kb.range(0, self.k, self.kl1) as k1:
                ksz = kb.boundary(self.kl1, self.k, k1)
                kb.copy(kb.subview(pf.weight, [k1, n0], [ksz, nsz]), pf.ub)
                pf.q_done.handoff()
                pf.q_pf.enque()

    def _epilogue_through_workspace(self, m0: Index, n0: Index, msz: Index, nsz: Index) -> None:
        """Split cores: FixPipe writes the accumulators to this core's workspace rows; AIV 0
        reads them back (L2) with the bias row, `er` rows at a time, and activates and stores
        each piece."""
        kb, bm, bn, er = self.kb, self.bm, self.bn, self.er
        self.q_c.deque()
        row = kb.mul(kb.block_idx, bm)
        self.q_ws.acquire()
        kb.copy(self.acc, kb.subview(self.ws, [row, 0], [bm, self.nacc * bn]), layout="nz2nd")
        self.q_c.release()
        self.q_ws.enque()
        self.q_ws.deque()
        with kb.range(0, msz, er) as r0:
            self.q_in.acquire()
            for i, u in enumerate(self.ub_acc):
                kb.copy(kb.subview(self.ws, [kb.add(row, r0), i * bn], [er, bn]), u)
            if self.gb is not None:
                kb.copy(kb.subview(self.gb, [0, n0], [1, nsz]), self.ub_b)
            self.q_in.handoff()
            rows = er if isinstance(msz, int) and msz % er == 0 else kb.min(er, kb.sub(msz, r0))
            self._activate_and_store(kb.add(m0, r0), n0, rows, nsz)
        self.q_ws.release()

    def _to_vector_in_core(self, n0: Index, nsz: Index) -> None:
        """Coupled core: the bias row loads while the cube works; L0C -> UB on the vector pipe."""
        kb = self.kb
        self.q_in.acquire()
        if self.gb is not None:
            kb.copy(kb.subview(self.gb, [0, n0], [1, nsz]), self.ub_b)
        self.q_in.handoff()
        self.q_c.deque()
        for i, u in enumerate(self.ub_acc):
            kb.copy(kb.subview(self.acc, [0, i * self.bn], [self.bm, self.bn]), u)
        self.q_c.release()

    def _activate_and_store(self, m0: Index, n0: Index, msz: Index, nsz: Index) -> None:
        """AIV: [+ b1,] act [* up] in fp32, cast to the input dtype, store the h tile."""
        kb, g = self.kb, self.ub_acc[0]
        if self.gb is not None:
            if self.ub_b32 is not self.ub_b:
                kb.emit(ascend.VcastOp(self.ub_b, self.ub_b32))
            kb.emit(ascend.vector_op("vadd")(g, self.ub_b32, g))
        kb.emit(ascend.vector_op(self.act)(g, g))
        if self.gated:
            kb.emit(ascend.vector_op("vmul")(g, self.ub_acc[1], g))
        self.q_out.acquire()
        kb.emit(ascend.VcastOp(g, self.ub_h) if self.el != f32 else ascend.vector_op("vcopy")(g, self.ub_h))
        self.q_in.release()
        self.q_out.handoff()
        kb.copy(self.ub_h, kb.subview(self.gh, [m0, n0], [msz, nsz]))
        self.q_out.release()
