"""nn.topk on the vector unit: k rounds of (max, first index of the max, knock it out).

For the small k of MoE routing (Mixtral: k = 2 of 8 experts) k arg-max rounds over whole rows
in UB are cheaper than a full sort (Ascend's Sort32 + MrgSort, which a large-k template would
use). Each round, on a tile of rows [tr, C] held in fp32:

    vreduce_max(work) -> m [tr, 1]
    vcmp eq(work, m) -> mask;  vsel(mask, rank, C) -> cand;  vreduce_min(cand) -> i [tr, 1]
    values[:, j] = m;  indices[:, j] = i (vcast to i64)
    vcmp eq(iota, i) -> mask;  vsel(mask, C, rank) -> rank;  vsel(mask, -inf, work) -> work

The smallest index among equal maxima is taken first: ONNX TopK's tie rule. `largest = false`
runs on -x. The iota row [1, C] is built in UB by log2(C) doubling vadds; rank [tr, C] is iota
with the removed elements set to 3C, so a removed element is never taken again even when every
element left is -inf as it is (a row of -inf gave index 0 twice and the value lowest-finite).

NaN ranks above every number, as onnxruntime orders it (first among the largest, last among the
smallest; ties by index): a NaN is replaced by +inf (largest) or -inf (smallest, on -x) and its
rank offset by -C (taken before a true +inf) or +C (after a true -inf); a taken rank outside
[0, C) is a NaN: its index is the rank minus the offset and its value NaN. (A NaN used to make
every round's max NaN, no element equal to it, and index C come out.) Ranks pass through fp32,
exact for 3C <= 2^24.

The axis is moved last by a transpose kernel when it is not (and the results moved back).

Kernel (AIV, block-cyclic over row tiles, single buffered):

    build iota (V); prime V->MTE2, MTE3->V
    scf.for %t = %block_idx to ceil(rows/tr) step block_dim
      wait V->MTE2;  GM->UB x rows (MTE2);  set/wait MTE2->V;  wait MTE3->V
      k rounds (V);  set V->MTE2;  set/wait V->MTE3
      UB->GM values, indices (MTE3);  set MTE3->V
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import f32, i1, i64
from xdsl.ir import Operation, SSAValue

from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.conversion.nn_to_ascend.templates.elementwise import ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up


def _v(name: str) -> type:
    return ascend.vector_op(name)


def emit_topk_rows(ctx: LoweringContext, x: SSAValue, k: int, largest: bool) -> tuple[SSAValue, SSAValue]:
    """Top-k along the last dim of GM x [..., C]: new GM (values [..., k] of x's type,
    indices [..., k] i64).

    Raises:
        AscendirError: when one row does not fit UB.
    """
    shp = shape(x)
    el = elem(x)
    c = shp[-1]
    rows = math.prod(shp[:-1])
    out_shape = [*shp[:-1], k]
    values, indices = ctx.buffer(out_shape, el), ctx.buffer(out_shape, i64)
    if rows * k == 0:
        return values, indices

    def nbytes(tr: int) -> int:
        per = [(tr * c, el), (tr * c, f32), (tr * c, f32), (tr * c, f32), (tr * c, i1), (tr, f32), (tr, f32), (tr, f32),
               (tr, i1), (tr * k, el), (tr * k, i64)]
        return sum(round_up(n * itemsize(e), 32) for n, e in per) + 2 * round_up(c * 4, 32) + 6 * 32

    budget = ub_budget(ctx)
    if nbytes(1) > budget:
        raise ctx.error(f"topk: a row of {c} elements needs {nbytes(1)} bytes of UB, the budget is {budget}")
    tr = 1
    while tr < rows and nbytes(tr * 2) <= budget:
        tr *= 2
    tr = min(tr, rows)
    cores = vector_cores(ctx)
    while ceil_div(rows, tr) < cores and tr > 8:  # spread small problems over the AIVs
        tr = ceil_div(tr, 2)
    ntiles = ceil_div(rows, tr)
    block_dim = min(cores, ntiles)

    args = [ctx.view(x, [rows, c]), ctx.view(values, [rows, k]), ctx.view(indices, [rows, k])]
    kb = KernelBuilder(ctx, ctx.name("topk"), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gm_x, gm_v, gm_i = kb.args
    ub_x = kb.alloc([tr, c], el, MemSpace.UB)
    work = kb.alloc([tr, c], f32, MemSpace.UB)
    cand = kb.alloc([tr, c], f32, MemSpace.UB)
    mask = kb.alloc([tr, c], i1, MemSpace.UB)
    mx = kb.alloc([tr, 1], f32, MemSpace.UB)
    arg = kb.alloc([tr, 1], f32, MemSpace.UB)
    ub_v = kb.alloc([tr, k], el, MemSpace.UB)
    ub_i = kb.alloc([tr, k], i64, MemSpace.UB)
    iota = kb.alloc([1, c], f32, MemSpace.UB)
    nan_rank = kb.alloc([1, c], f32, MemSpace.UB)
    rank = kb.alloc([tr, c], f32, MemSpace.UB)
    width = kb.alloc([1, 1], f32, MemSpace.UB)
    floor = kb.alloc([1, 1], f32, MemSpace.UB)
    nan_fill = kb.alloc([1, 1], f32, MemSpace.UB)
    nan = kb.alloc([1, 1], f32, MemSpace.UB)
    raw = kb.alloc([tr, 1], f32, MemSpace.UB)
    picked_nan = kb.alloc([tr, 1], i1, MemSpace.UB)
    bound = kb.alloc([1, 1], f32, MemSpace.UB)  # ranks below 0 (largest) or from C on (smallest) are NaNs
    offset = -float(c) if largest else float(c)  # a NaN's rank: before (largest) or after (smallest) every number

    # iota[0, j] = j by doubling: [0] -> [0, 1] -> [0..3] -> ...
    kb.emit(ascend.VdupOp(kb.subview(iota, [0, 0], [1, 1]), 0.0))
    p = 1
    while p < c:
        n = min(p, c - p)
        kb.emit(_v("vadds")(kb.subview(iota, [0, 0], [1, n]), kb.subview(iota, [0, p], [1, n]), float(p)))
        p += n
    kb.emit(_v("vadds")(iota, nan_rank, offset))
    kb.emit(ascend.VdupOp(width, float(3 * c)))
    kb.emit(ascend.VdupOp(floor, float("-inf")))
    kb.emit(ascend.VdupOp(nan_fill, float("inf") if largest else float("-inf")))
    kb.emit(ascend.VdupOp(nan, float("nan")))
    kb.emit(ascend.VdupOp(bound, 0.0 if largest else float(c)))

    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        (r0, _), (rsz, _) = kb.grid(t, [rows, c], [tr, c])
        q_in.acquire()
        kb.copy(kb.subview(gm_x, [r0, 0], [rsz, c]), ub_x)
        q_in.handoff()
        q_out.acquire()
        if el == f32:
            kb.emit(_v("vcopy" if largest else "vneg")(ub_x, work))
        else:
            kb.emit(ascend.VcastOp(ub_x, work))
            if not largest:
                kb.emit(_v("vneg")(work, work))
        q_in.release()
        kb.emit(ascend.VcmpOp("ne", work, work, mask))  # NaN
        kb.emit(ascend.VselOp(mask, nan_rank, iota, rank))
        kb.emit(ascend.VselOp(mask, nan_fill, work, work))
        for j in range(k):
            kb.emit(_v("vreduce_max")(work, mx))
            kb.emit(ascend.VcmpOp("eq", work, mx, mask))
            kb.emit(ascend.VselOp(mask, rank, width, cand))
            kb.emit(_v("vreduce_min")(cand, raw))
            kb.emit(ascend.VcmpOp("lt" if largest else "ge", raw, bound, picked_nan))
            kb.emit(_v("vadds")(raw, arg, -offset))
            kb.emit(ascend.VselOp(picked_nan, arg, raw, arg))
            if not largest:
                kb.emit(_v("vneg")(mx, mx))
            kb.emit(ascend.VselOp(picked_nan, nan, mx, mx))
            v_j = kb.subview(ub_v, [0, j], [tr, 1])
            kb.emit(_v("vcopy")(mx, v_j) if el == f32 else ascend.VcastOp(mx, v_j))
            kb.emit(ascend.VcastOp(arg, kb.subview(ub_i, [0, j], [tr, 1])))
            if j + 1 < k:
                kb.emit(ascend.VcmpOp("eq", rank, raw, mask))
                kb.emit(ascend.VselOp(mask, width, rank, rank))
                kb.emit(ascend.VselOp(mask, floor, work, work))
        q_out.handoff()
        kb.copy(ub_v, kb.subview(gm_v, [r0, 0], [rsz, k]))
        kb.copy(ub_i, kb.subview(gm_i, [r0, 0], [rsz, k]))
        q_out.release()
    ctx.launch(kb.finish(), args)
    return values, indices


def lower_topk(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.topk → (transpose the axis last) + the top-k row kernel (+ transpose back)."""
    from ascendir.conversion.nn_to_ascend.templates.data_movement import emit_transpose

    assert isinstance(op, nn.TopKOp)
    x = operands[0]
    rank = len(shape(x))
    axis, k, largest = op.axis.value.data, op.k.value.data, op.largest.value.data
    if axis == rank - 1:
        return list(emit_topk_rows(ctx, x, k, largest))
    perm = [d for d in range(rank) if d != axis] + [axis]
    back = [perm.index(d) for d in range(rank)]
    vals, idx = emit_topk_rows(ctx, emit_transpose(ctx, x, perm), k, largest)
    return [emit_transpose(ctx, vals, back), emit_transpose(ctx, idx, back)]
