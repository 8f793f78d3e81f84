"""Weight-only quantized matmul (antiquant): `nn.weight_quant_matmul`, y [M, N] = x [M, K] @
((w + offset) · scale), w int8 / int4 [K, N] in GM, scale / offset per group of rows.

The weight crosses HBM narrow (1 or 0.5 byte per element) and is dequantised on chip, as
ops-transformer's WeightQuantBatchMatmulV2 does on Atlas A2. One mix kernel, output tiles
[bm, bn] block-cyclic over the AIC groups; per tile the K loop in chunks of kl1 rows:

* AIV: the int8 / int4 chunk w[k1 : k1 + kl1, n0 : n0 + bn] GM -> UB (MTE2) with its scale (and
  offset) rows, vcast to x's type, + offset and · scale per group (one row broadcast over the
  group's rows), UB -> a per-core GM workspace slot (MTE3, two slots: the AIV dequantises chunk
  i + 1 while the AIC multiplies chunk i).
* AIC: x chunk and the dequantised chunk GM -> L1 (nd2nz; the workspace slot stays in L2, S1),
  L1 -> L0A / L0B, mmad into L0C; after the K loop L0C -> GM through FixPipe (nz2nd, cast).

On dav-c220 (910B) the AIV and AIC share no on-chip buffer (S2), so the dequantised tiles reach
the cube through GM / L2 as in the vendor's kernel (its GM workspace); what crosses HBM is the
narrow weight, x and y (and the workspace's first writes). Both AIVs of a group take half of
each chunk when K is a multiple of kl1 (else AIV 0 alone), each with two UB buffer sets so its
load, dequantisation and store of consecutive chunks overlap. On a coupled core (910A: no
FixPipe, one vector unit) the same kernel runs on the AIC core type, the output leaving L0C
through UB.

What bounds it: every dequantised byte is written to and read back from L2 (2 x the fp16 weight
bytes at L2 bandwidth), so at decode it runs at that floor rather than at the narrow weight's
HBM time; at prefill each row block of x dequantises the weight again.

Numerics: (w + offset) is an exact small integer in x's type for every ONNX zero point; the
product with the scale is one rounding, as onnxruntime's dequantised weight; the product on the
cube as nn.matmul's.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import f32
from xdsl.ir import Attribute, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.flash_attention import _Sync
from ascendir.conversion.nn_to_ascend.templates.matmul import DOUBLE_BUFFER, _by_parity, _l0c_out, _mmad, heuristic_tiling
from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize, packed_nbytes, to_numpy_dtype
from ascendir.hardware.align import aligned_bytes

# Fraction of UB the AIV's chunk buffers (narrow weight, dequantised weight, scale / offset rows)
# may take; the rest is headroom for alignment (as matmul.BUFFER_FRACTION for L1 / L0).
UB_FRACTION = 0.9
WORKSPACE_SLOTS = 2


def antiquant_tiling(ctx: LoweringContext, m: int, n: int, k: int, el: Attribute, wel: Attribute, group: int,
                     offset: bool) -> tuple[int, int, int, int, int, int]:
    """(bm, bn, bk, kl1, subs, kv): matmul.heuristic_tiling's tiles with kl1 (a multiple of bk) a
    multiple or a divisor of the group size, the number of AIVs that share each chunk (2 on a
    split-core chip when K is a multiple of kl1 and each half holds whole groups or lies in one,
    else 1), and kv, the rows an AIV dequantises per pass (its kl1 / subs rows in passes of kv).
    kv halves until an AIV's WORKSPACE_SLOTS buffer sets of kv rows fit UB, so the AIC's L1 chunk
    keeps matmul's size (each chunk costs the cube two nd2nz start-ups, S4), where M spans several
    row blocks and K is a multiple of kl1; otherwise (one pass per chunk) kl1 / bn shrink instead.

    Raises:
        AscendirError: no chunk fits UB, or the group size is no multiple of the K alignment."""
    t = ctx.target
    base = heuristic_tiling(ctx, m, n, k, el)
    bm, bn, bk = base.m, base.n, base.k
    kl1 = max(bk, base.k_l1)
    if group < kl1:
        kl1 = max(group, kl1 // group * group)
    elif group % kl1:
        kl1 = math.gcd(group, kl1)
    if kl1 % bk:
        bk = math.gcd(bk, kl1)
    if bk * itemsize(el) % 32:
        raise ctx.error(f"nn.weight_quant_matmul: group_size {group} is no multiple of {32 // itemsize(el)} (the K alignment)")
    cap = t.capacity("ub") * UB_FRACTION

    def subs_of(kl1: int) -> int:
        h = kl1 // 2
        ok = t.arch.split_cores and kl1 % 2 == 0 and k % kl1 == 0 and (h % group == 0 or group % h == 0)
        return 2 if ok else 1

    def ub(kv: int, bn: int) -> int:
        rows = ceil_div(kv, group)
        one = (aligned_bytes(t, "ub", packed_nbytes(to_numpy_dtype(wel), kv * bn)) + aligned_bytes(t, "ub", kv * bn * itemsize(el))
               + (2 if offset else 1) * aligned_bytes(t, "ub", rows * bn * itemsize(el)))
        return WORKSPACE_SLOTS * one

    def halves(rows: int, align: int) -> bool:  # rows // 2: aligned, whole groups or within one
        h = rows // 2
        return rows % 2 == 0 and h % align == 0 and (h >= group and h % group == 0 or group % h == 0)

    # Several passes per chunk only where the cube bounds the kernel (several row blocks: each
    # chunk's two nd2nz start-ups are cube-side time); with one row block (decode) the AIVs and
    # the workspace's L2 round trip bound it, and a larger chunk only grows the workspace.
    passes_ok = ceil_div(m, bm) > 1 and k % kl1 == 0
    kv = kl1 // subs_of(kl1)
    while ub(kv, bn) > cap:
        if passes_ok and halves(kv, 16):
            kv //= 2
        elif not passes_ok and kl1 > bk and halves(kl1, bk):
            kl1 //= 2
            kv = kl1 // subs_of(kl1)
        elif bn > 16:
            bn = round_up(bn // 2, 16)
        else:
            raise ctx.error(f"nn.weight_quant_matmul: a {kv}x{bn} weight chunk does not fit UB of {t.name}")
    return bm, bn, bk, kl1, subs_of(kl1), kv


def emit_antiquant(ctx: LoweringContext, x: SSAValue, w: SSAValue, scale: SSAValue, offset: SSAValue | None, group: int,
                   out_shape: tuple[int, ...], out_elem: Attribute) -> SSAValue:
    """Launch the antiquant kernel over GM buffers x [..., K], w [K, N] (i8 / i4), scale / offset
    [ceil(K / group), N] of x's type; returns the output buffer [..., N] of `out_elem`.

    Raises:
        AscendirError: a dtype without mmad on the chip's cube, tiles that do not fit."""
    t = ctx.target
    el = elem(x)
    if no_mmad := t.arch.no_mmad(str(el)):
        raise ctx.error(f"{t.name} ({t.arch}) {no_mmad}; cast the model to float16 (ascendir --dtype fp16)")
    k, n = shape(w)
    m = math.prod(shape(x)) // k
    return _Kernel(ctx, ctx.view(x, [m, k]), w, scale, offset, group, m, k, n, el, out_shape, out_elem).emit()


class _Kernel:
    """Builds one antiquant kernel; see the module docstring for the structure."""

    def __init__(self, ctx: LoweringContext, x: SSAValue, w: SSAValue, scale: SSAValue, offset: SSAValue | None, group: int,
                 m: int, k: int, n: int, el: Attribute, out_shape: tuple[int, ...], out_elem: Attribute):
        self.ctx, self.m, self.k, self.n, self.el, self.group, self.out_elem = ctx, m, k, n, el, group, out_elem
        self.wel = elem(w)
        self.bm, self.bn, self.bk, self.kl1, self.subs, self.kv = antiquant_tiling(ctx, m, n, k, el, self.wel, group, offset is not None)
        self.y = ctx.buffer(list(out_shape), out_elem)
        self.ntiles = ceil_div(m, self.bm) * ceil_div(n, self.bn)
        self.block_dim = min(ctx.target.num_aic, self.ntiles)
        self.split_cores = ctx.target.arch.split_cores
        self.offset = offset is not None
        ws = ctx.buffer([self.block_dim * WORKSPACE_SLOTS * self.kl1, self.bn], el)
        self.args = [x, w, scale, *([offset] if offset is not None else []), ctx.view(self.y, [m, n]), ws]

    def emit(self) -> SSAValue:
        ctx = self.ctx
        core = CoreType.MIX if self.split_cores else CoreType.AIC
        kb = self.kb = KernelBuilder(ctx, ctx.name("weight_quant_matmul"), [a.type for a in self.args], core, self.block_dim, ctx.current)
        it = iter(kb.args)
        self.gx, self.gw, self.gs = next(it), next(it), next(it)
        self.go = next(it) if self.offset else None
        self.gy, self.ws = next(it), next(it)
        self._buffers()
        self._queues()
        with kb.tiles(self.ntiles) as t:
            (m0, n0), (msz, nsz) = kb.grid(t, [self.m, self.n], [self.bm, self.bn])
            self.q_c.acquire()
            with kb.range(0, self.k, self.kl1) as k1:
                _by_parity(kb, k1, self.kl1, WORKSPACE_SLOTS, lambda p: self._chunk(p, k1, m0, n0, msz, nsz))
            self._store(kb.subview(self.gy, [m0, n0], [msz, nsz]))
        self.sync.drain()
        ctx.launch(kb.finish(), self.args)
        return self.y

    def _buffers(self) -> None:
        kb, el, bm, bn, bk, kl1, nb = self.kb, self.el, self.bm, self.bn, self.bk, self.kl1, DOUBLE_BUFFER
        L1, L0A, L0B, L0C, UB = MemSpace.L1, MemSpace.L0A, MemSpace.L0B, MemSpace.L0C, MemSpace.UB
        self.l1a = [kb.alloc([bm, kl1], el, L1) for _ in range(WORKSPACE_SLOTS)]
        self.l1b = [kb.alloc([kl1, bn], el, L1) for _ in range(WORKSPACE_SLOTS)]
        self.l0a = [kb.alloc([bm, bk], el, L0A) for _ in range(nb)]
        self.l0b = [kb.alloc([bk, bn], el, L0B) for _ in range(nb)]
        self.acc = kb.alloc([bm, bn], f32, L0C)
        # per AIV (subs of them share a chunk, `half` rows each, dequantised kv rows a pass) and
        # per UB buffer set
        self.half = kl1 // self.subs
        self.passes = self.half // self.kv
        self.rows = ceil_div(self.kv, self.group)
        self.ub_q, self.ub_w, self.ub_s, self.ub_o = [], [], [], []
        for sub in range(self.subs):
            with kb.on_subblock(sub):
                self.ub_q.append([kb.alloc([self.kv, bn], self.wel, UB) for _ in range(WORKSPACE_SLOTS)])
                self.ub_w.append([kb.alloc([self.kv, bn], el, UB) for _ in range(WORKSPACE_SLOTS)])
                self.ub_s.append([kb.alloc([self.rows, bn], el, UB) for _ in range(WORKSPACE_SLOTS)])
                self.ub_o.append([kb.alloc([self.rows, bn], el, UB) if self.offset else None for _ in range(WORKSPACE_SLOTS)])

    def _queues(self) -> None:
        s = self.sync = _Sync(self.kb, self.split_cores)
        AIC = "aic->aic"
        self.q_l1 = [s.queue(Pipe.MTE2, Pipe.MTE1, AIC) for _ in range(WORKSPACE_SLOTS)]
        self.q_l0 = [s.queue(Pipe.MTE1, Pipe.M, AIC) for _ in range(DOUBLE_BUFFER)]
        fixpipe = self.ctx.target.arch.fixpipe
        self.q_c = s.queue(Pipe.M, Pipe.FIX if fixpipe else Pipe.V, AIC)
        self.ub_c = self.q_y = None
        if not fixpipe:  # 910A: L0C -> UB on the vector pipe, UB -> GM (as matmul._OutputStage)
            self.ub_c = self.kb.alloc([self.bm, self.bn], self.out_elem, MemSpace.UB)
            self.q_y = s.queue(Pipe.V, Pipe.MTE3, AIC)
        self.q_in, self.q_out, self.q_ws = [], [], []
        for sub in range(self.subs):
            aiv = "aiv1" if sub else "aiv"
            with self.kb.on_subblock(sub):
                self.q_in.append([s.queue(Pipe.MTE2, Pipe.V, f"{aiv}->{aiv}") for _ in range(WORKSPACE_SLOTS)])
                self.q_out.append([s.queue(Pipe.V, Pipe.MTE3, f"{aiv}->{aiv}") for _ in range(WORKSPACE_SLOTS)])
                self.q_ws.append([s.queue(Pipe.MTE3, Pipe.MTE2, f"{aiv}->aic") for _ in range(WORKSPACE_SLOTS)])

    def _store(self, dst: SSAValue) -> None:
        """L0C -> the output tile: FixPipe (nz2nd, cast) where the chip has one, else through UB."""
        self.q_c.handoff()
        _l0c_out(self.kb, self.ctx.target.arch.fixpipe, self.acc, dst, self.q_c, self.q_y, self.ub_c)

    def _chunk(self, p: int, k1: Index, m0: Index, n0: Index, msz: Index, nsz: Index) -> None:
        kb, kl1, bn = self.kb, self.kl1, self.bn
        ksz = kb.boundary(kl1, self.k, k1)
        slot = kb.subview(self.ws, [kb.mul(kb.add(kb.mul(kb.block_idx, WORKSPACE_SLOTS), p), kl1), 0], [kl1, bn])
        for sub in range(self.subs):
            with kb.on_subblock(sub):
                self._dequantise(sub, p, k1, n0, nsz, ksz, slot)
        # AIC: x chunk and the dequantised chunk into L1, then the L0 steps
        q = self.q_l1[p]
        q.acquire()
        for sub in range(self.subs):
            self.q_ws[sub][p].deque()
        kb.copy(kb.subview(self.gx, [m0, k1], [msz, ksz]), self.l1a[p], layout="nd2nz")
        kb.copy(kb.subview(slot, [0, 0], [ksz, nsz]), self.l1b[p], layout="nd2nz")
        for sub in range(self.subs):
            self.q_ws[sub][p].release()
        q.handoff()
        with kb.range(0, ksz, self.bk) as kk:
            _by_parity(kb, kk, self.bk, DOUBLE_BUFFER, lambda s: self._l0_step(p, s, k1, kk))
        q.release()

    def _dequantise(self, sub: int, p: int, k1: Index, n0: Index, nsz: Index, ksz: Index, slot: SSAValue) -> None:
        """AIV `sub`: its rows of the narrow chunk, kv at a time, and their group rows in (UB
        sets alternating over passes), vcast, + offset and · scale per group, out to its rows of
        workspace slot p; the AIC is told once the last pass is out."""
        kb, h, kv, bn = self.kb, self.half, self.kv, self.bn
        q_ws = self.q_ws[sub][p]
        for j in range(self.passes):
            u = (p * self.passes + j) % WORKSPACE_SLOTS  # consecutive passes, also across chunks, alternate
            q_in, q_out = self.q_in[sub][u], self.q_out[sub][u]
            ub_q, ub_w, ub_s, ub_o = self.ub_q[sub][u], self.ub_w[sub][u], self.ub_s[sub][u], self.ub_o[sub][u]
            off = sub * h + j * kv
            r0 = kb.add(k1, off) if off else k1
            rsz = ksz if self.subs == 1 and self.passes == 1 else kv  # several passes only when K is a multiple of kl1
            q_in.acquire()
            kb.copy(kb.subview(self.gw, [r0, n0], [rsz, nsz]), ub_q)
            g0 = kb.div(r0, self.group)
            grows = kb.boundary(self.rows, ceil_div(self.k, self.group), g0) if self.rows > 1 else 1
            kb.copy(kb.subview(self.gs, [g0, n0], [grows, nsz]), ub_s)
            if ub_o is not None:
                kb.copy(kb.subview(self.go, [g0, n0], [grows, nsz]), ub_o)
            q_in.handoff()
            q_out.acquire()
            kb.emit(ascend.VcastOp(ub_q, ub_w))
            per = min(self.group, kv)
            for r in range(self.rows):
                part = kb.subview(ub_w, [r * per, 0], [per, bn]) if self.rows > 1 else ub_w
                if ub_o is not None:
                    kb.emit(ascend.vector_op("vadd")(part, kb.subview(ub_o, [r, 0], [1, bn]), part))
                kb.emit(ascend.vector_op("vmul")(part, kb.subview(ub_s, [r, 0], [1, bn]), part))
            q_in.release()
            q_out.handoff()
            if j == 0:
                q_ws.acquire()
            kb.copy(ub_w, kb.subview(slot, [off, 0], [kv, bn]) if self.subs > 1 or self.passes > 1 else slot)
            q_out.release()
        q_ws.enque()

    def _l0_step(self, p: int, s: int, k1: Index, kk: Index) -> None:
        kb, q = self.kb, self.q_l0[s]
        q.acquire()
        kb.copy(kb.subview(self.l1a[p], [0, kk], [self.bm, self.bk]), self.l0a[s])
        kb.copy(kb.subview(self.l1b[p], [kk, 0], [self.bk, self.bn]), self.l0b[s])
        q.handoff()
        _mmad(kb, self.l0a[s], self.l0b[s], self.acc, kb.add(k1, kk), None)
        q.release()
