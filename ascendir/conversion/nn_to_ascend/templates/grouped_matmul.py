"""ops-transformer's GroupedMatmul on a MoE layer's experts: one cube kernel over all experts,
expert e's rows (the tokens MoeInitRouting sorted to it) one GEMM with its own weight.

    y[lo_e:hi_e, :] = x[lo_e:hi_e, :] · w[e]ᵀ      x [R, K] rows sorted by expert, w [E, N, K]
                                                  (HF's batched experts: F.linear per expert),
                                                  group list g [E+1] i64: lo_e = g[e], hi_e = g[e+1]

The group list is data: the kernel reads it with `ascend.get_value` (the scalar unit, from GM)
into the bounds of its row loop, so an expert that got no rows costs two scalar reads and its
weights are never read. One AIC kernel (910B: FixPipe out; the template declines a chip without
it), the N tiles of each group dealt block-cyclic over the AICs:

    scf.for %e = 0 to E
      %lo = ascend.get_value %g[%e];  %hi = ascend.get_value %g[%e + 1]
      scf.for %m0 = %lo to %hi step bm                     rows of group e (none: no weight read)
        scf.for %t = %block_idx to ceil(N/bn) step block_dim
          wait FIX->M
          scf.for %k0 = 0 to K step 2·bk                   K steps in pairs on ping-pong slots p = 0, 1
            (slot p, k0 + p·bk:)
            wait MTE1->MTE2 [p];  GM->L1 x [msz, ksz], w[e] [nsz, ksz] (nd2nz, MTE2);  MTE2->MTE1 [p]
            wait M->MTE1 [p];  L1->L0A, L1->L0B transposed (MTE1);  MTE1->M [p];  set MTE1->MTE2 [p]
            mmad (init at k0 = 0);  set M->MTE1 [p]
          [an odd last K step on slot 0]
          M->FIX;  L0C->GM y [msz, nsz] (FixPipe, f32 -> the input type);  set FIX->M

Approximations: one L0C accumulator (the FixPipe out of one tile and the mmads of the next
alternate); every group's tiles the same (bm, bn, bk), bm sized for twice the mean group
(`row_tile`); the group list read once per expert from GM (no DCache hits).
"""

from __future__ import annotations

from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.matmul import BASE_MN, BASE_N, k_align
from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize

KIND = "grouped_matmul"


def row_tile(rows: int, experts: int) -> int:
    """bm of a grouped MatMul over `rows` routed rows and `experts` groups (`tiles`): twice the
    mean group, rounded up to 16, at most matmul.py's base 128. Target-independent, so the run
    report can say how often each touched expert's weights are read: ceil(rows of e / bm)."""
    return min(BASE_MN, round_up(max(1, -(-2 * rows // max(experts, 1))), 16), round_up(max(rows, 1), 16))


def tiles(ctx: LoweringContext, rows: int, experts: int, n: int, k: int, el) -> tuple[int, int, int]:
    """(bm, bn, bk) of a grouped MatMul: L0C holding one f32 [bm, bn] accumulator, L1 and L0A /
    L0B two [bm, bk] / [bk, bn] slots each (ping-pong over K steps), K in steps of 32 B.

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
    bk = round_up(k, ka)
    while bk > ka and (2 * bm * bk * es > t.capacity("l0a") or 2 * bk * bn * es > t.capacity("l0b")
                       or 2 * (bm + bn) * bk * es > t.capacity("l1")):
        bk = round_up(bk // 2, ka)
    if bm * bn * 4 > t.capacity("l0c") or 2 * bm * bk * es > t.capacity("l0a") or 2 * bk * bn * es > t.capacity("l0b"):
        raise ctx.error(f"grouped_matmul: no [{bm}, {bn}, {bk}] tile fits the cube buffers of {t.name}")
    return bm, bn, bk


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
    bm, bn, bk = tiles(ctx, rows, e, n, k, el)
    nt, nk = ceil_div(n, bn), ceil_div(k, bk)
    args = [x, w, group_list, y]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIC, min(ctx.target.num_aic, nt), ctx.current)
    gx, gw, gg, gy = kb.args
    slots = [(kb.alloc([bm, bk], el, MemSpace.L1), kb.alloc([bn, bk], el, MemSpace.L1),
              kb.alloc([bm, bk], el, MemSpace.L0A), kb.alloc([bk, bn], el, MemSpace.L0B),
              kb.queue(Pipe.MTE2, Pipe.MTE1), kb.queue(Pipe.MTE1, Pipe.M)) for _ in range(2)]
    l0c = kb.alloc([bm, bn], f32, MemSpace.L0C)
    q_c = kb.queue(Pipe.M, Pipe.FIX)

    def step(p: int, ei: Index, m0: Index, msz: Index, n0: Index, nsz: Index, k0: Index, first: bool | None) -> None:
        """K step k0 on ping-pong slot p (first: k0 = 0 known statically; None: test it)."""
        l1a, l1b, l0a, l0b, q_l1, q_l0 = slots[p]
        ksz = kb.boundary(bk, k, k0)
        q_l1.acquire()
        kb.copy(kb.subview(gx, [m0, k0], [msz, ksz]), l1a, layout="nd2nz")
        kb.copy(kb.subview_keep(gw, [ei, n0, k0], [1, nsz, ksz], [1, 2]), l1b, layout="nd2nz")
        q_l1.handoff()
        q_l0.acquire()
        kb.copy(l1a, l0a)
        kb.emit(ascend.CopyOp(l1b, l0b, transpose=True))
        q_l0.handoff()
        q_l1.release()
        if first is None:
            kb.if_else(kb.eq(k0, 0), lambda: kb.emit(ascend.MmadOp(l0a, l0b, l0c, True)),
                       lambda: kb.emit(ascend.MmadOp(l0a, l0b, l0c, False)))
        else:
            kb.emit(ascend.MmadOp(l0a, l0b, l0c, first))
        q_l0.release()

    with kb.loop(0, e, 1) as ei:
        lo = kb.emit(ascend.GetValueOp(gg, [ei])).result
        hi = kb.emit(ascend.GetValueOp(gg, [kb.add(ei, 1)])).result
        with kb.loop(lo, hi, bm) as m0:
            msz = kb.min(bm, kb.sub(hi, m0))
            with kb.tiles(nt) as t:
                n0 = kb.mul(t, bn)
                nsz = kb.boundary(bn, n, n0)
                q_c.acquire()
                if nk >= 2:
                    with kb.range(0, (nk // 2) * 2 * bk, 2 * bk) as k0:  # K steps in pairs: slot 0, slot 1
                        step(0, ei, m0, msz, n0, nsz, k0, True if k0 == 0 else None)
                        step(1, ei, m0, msz, n0, nsz, kb.add(k0, bk), False)
                if nk % 2:
                    step(0, ei, m0, msz, n0, nsz, (nk - 1) * bk, nk == 1)
                q_c.handoff()
                kb.copy(l0c, kb.subview(gy, [m0, n0], [msz, nsz]), layout="nz2nd")
                q_c.release()
    ctx.launch(kb.finish(), args)
    return y

