"""Template of `nn.fused {kind = #nn.fused_kind<moe_gating>}` (built by fuse-moe-gating): a MoE
router's scoring and top-k in one vector kernel, ops-transformer's MoeGatingTopKSoftmax (with
its renorm option) and MoeGatingTopK's sigmoid scoring without groups:

    %p       = nn.softmax %logits {axis = -1}   |   nn.sigmoid %logits      logits [T, E]
    %v, %i   = nn.topk %p {k, axis = -1, largest = true}
    [%s      = nn.reduce_sum %v {axes = [-1], keepdims = true}              renormalised top-k
     %w      = nn.div %v, %s]                                               (Mixtral)
    nn.yield %w | %v, %i                                                    weights [T, k], ids i64

One AIV kernel over tiles of tr whole rows [tr, E] (topk.py's layout):

    build iota (V); prime V->MTE2, MTE3->V
    scf.for %t = %block_idx to ceil(T/tr) step block_dim
      wait V->MTE2;  GM->UB logits rows (MTE2);  set/wait MTE2->V;  wait MTE3->V
      scores (V);  k arg-max rounds (V);  [sum, divide (V)];  set V->MTE2;  set/wait V->MTE3
      UB->GM weights, ids (MTE3);  set MTE3->V

What it saves over the unfused ops (softmax or sigmoid kernel, topk kernel, [reduce_sum and div
kernels]): 1 to 3 launches and the GM round trips of the scores [T, E] and the top-k values.
The vector ops and their order are those of the unfused kernels (reduction.lower_softmax or the
elementwise vsigmoid in the input type, topk.emit_topk_rows, reduction.lower_reduce, the
elementwise vdiv), including each kernel's rounding to the input type between them, so the
outputs are bit-identical to the unfused lowering. Group-limited routing (DeepSeek-V3:
MoeGatingTopK with groups) is not taken: those routers stay op by op.

`match` (what the fusion pass wraps) and `parse` (what the template reads back) live here.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import f32, i1, i64
from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.elementwise import ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.templates.reduction import _wide
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.patterns import fuse_ops, single_use

KIND = "moe_gating"
SCORING = {nn.SoftmaxOp: "softmax", nn.SigmoidOp: "sigmoid"}


def _last(axis: int, rank: int) -> bool:
    return rank > 0 and axis % rank == rank - 1


def _renorm(topk: nn.TopKOp) -> list[Operation]:
    """[reduce_sum, div] when the top-k values are only divided by their keepdims sum over the
    last axis, else []."""
    uses = {u.operation for u in topk.values.uses}
    red = [o for o in uses if isinstance(o, nn.ReduceSumOp)]
    div = [o for o in uses if isinstance(o, nn.DivOp)]
    if len(uses) != 2 or len(red) != 1 or len(div) != 1:
        return []
    red, div = red[0], div[0]
    rank = len(nn.shape_of(topk.values))
    axes = [a % rank for a in red.axes.get_values()]
    if (axes != [rank - 1] or not red.keepdims.value.data or div.lhs != topk.values or div.rhs != red.result
            or single_use(red.result) is not div or red.parent is not topk.parent or div.parent is not topk.parent):
        return []
    return [red, div]


def match(topk: Operation) -> list[Operation] | None:
    """[score, topk(, reduce_sum, div)] when `topk` takes the largest k along the last axis of a
    softmax (last axis) or sigmoid of a 2-D tensor that nothing else reads, else None."""
    if not isinstance(topk, nn.TopKOp) or not topk.largest.value.data:
        return None
    score = topk.input.owner
    shp = nn.shape_of(topk.input)
    if type(score) not in SCORING or len(shp) != 2 or not _last(topk.axis.value.data, 2):
        return None
    if isinstance(score, nn.SoftmaxOp) and not _last(score.axis.value.data, 2):
        return None
    if single_use(score.results[0]) is not topk or score.parent is not topk.parent:
        return None
    return [score, topk, *_renorm(topk)]


def fuse(ops: list[Operation]) -> nn.FusedOp:
    """Wrap `match`'s ops in a region yielding the weights (the division, or the top-k values)
    and the expert ids."""
    topk = ops[1]
    return fuse_ops(KIND, ops, [ops[-1].results[0] if len(ops) == 4 else topk.values, topk.indices])


@dataclass(frozen=True)
class MoeGating:
    """A parsed region over its own values: logits [T, E], scoring, k, renormalised."""

    logits: SSAValue
    scoring: str
    k: int
    renorm: bool


def parse(region: nn.FusedOp) -> MoeGating | None:
    """The MoeGating of a region `fuse` built, or None for another body."""
    block = region.body.block
    ops = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    if len(ops) not in (2, 4) or not isinstance(ops[1], nn.TopKOp) or match(ops[1]) != ops:
        return None
    score, topk = ops[0], ops[1]
    if score.operands[0] not in block.args:
        return None
    weights = ops[-1].results[0] if len(ops) == 4 else topk.values
    if list(block.last_op.operands) != [weights, topk.indices]:
        return None
    return MoeGating(score.operands[0], SCORING[type(score)], topk.k.value.data, len(ops) == 4)


def emit_moe_gating(ctx: LoweringContext, logits: SSAValue, scoring: str, k: int, renorm: bool) -> list[SSAValue]:
    """Launch the kernel of the module docstring on GM logits [T, E]; returns [weights [T, k] in
    the logits' type, ids [T, k] i64] (new GM buffers).

    Raises:
        AscendirError: when one row does not fit UB."""
    t_rows, e = shape(logits)
    el = elem(logits)
    wide = _wide(el)
    weights, ids = ctx.buffer([t_rows, k], el), ctx.buffer([t_rows, k], i64)
    if t_rows * k == 0:
        return [weights, ids]

    def nbytes(tr: int) -> int:
        per = [(tr * e, el), (tr * e, f32), (tr * e, el), (tr * e, f32), (tr * e * (k > 1), f32), (tr * e, i1),
               (tr, f32), (tr, f32), (tr, f32), (tr * k, el), (tr * k, i64), (tr * k, el), (tr * k, f32), (tr, f32), (tr, el)]
        return sum(round_up(n * itemsize(t), 32) for n, t in per) + round_up(e * 4, 32) + 64

    budget = ub_budget(ctx)
    if nbytes(1) > budget:
        raise ctx.error(f"moe_gating: a row of {e} experts needs {nbytes(1)} bytes of UB, the budget is {budget}")
    tr = 1
    while tr < t_rows and nbytes(tr * 2) <= budget:
        tr *= 2
    tr = min(tr, t_rows)
    cores = vector_cores(ctx)
    while ceil_div(t_rows, tr) < cores and tr > 8:  # spread small problems over the AIVs
        tr = ceil_div(tr, 2)
    ntiles = ceil_div(t_rows, tr)

    args = [logits, weights, ids]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIV, min(cores, ntiles), ctx.current)
    gm_x, gm_w, gm_i = kb.args
    alloc = kb.alloc
    ub_x = alloc([tr, e], el, MemSpace.UB)
    work = alloc([tr, e], f32, MemSpace.UB)
    ub_p = alloc([tr, e], el, MemSpace.UB) if el != f32 else work  # the scores rounded to el, as stored
    cand = alloc([tr, e], f32, MemSpace.UB)
    mask = alloc([tr, e], i1, MemSpace.UB)
    mx = alloc([tr, 1], f32, MemSpace.UB)
    s = alloc([tr, 1], f32, MemSpace.UB)
    arg = alloc([tr, 1], f32, MemSpace.UB)
    ub_v = alloc([tr, k], el, MemSpace.UB)
    ub_i = alloc([tr, k], i64, MemSpace.UB)
    iota = alloc([1, e], f32, MemSpace.UB)
    rank = alloc([tr, e], f32, MemSpace.UB) if k > 1 else iota
    width = alloc([1, 1], f32, MemSpace.UB)
    floor = alloc([1, 1], f32, MemSpace.UB)
    if renorm:
        ub_w = alloc([tr, k], el, MemSpace.UB)
        vsum = alloc([tr, 1], el, MemSpace.UB)
        vw = alloc([tr, k], wide, MemSpace.UB) if wide != el else ub_v
        vs = alloc([tr, 1], wide, MemSpace.UB) if wide != el else vsum

    def v(name: str, *a) -> None:
        kb.emit(ascend.vector_op(name)(*a))

    kb.emit(ascend.VdupOp(kb.subview(iota, [0, 0], [1, 1]), 0.0))  # iota by doubling (topk.py)
    p = 1
    while p < e:
        n = min(p, e - p)
        v("vadds", kb.subview(iota, [0, 0], [1, n]), kb.subview(iota, [0, p], [1, n]), float(p))
        p += n
    kb.emit(ascend.VdupOp(width, float(e)))
    kb.emit(ascend.VdupOp(floor, float("-inf")))

    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        (r0, _), (rsz, _) = kb.grid(t, [t_rows, e], [tr, e])
        q_in.acquire()
        kb.copy(kb.subview(gm_x, [r0, 0], [rsz, e]), ub_x)
        q_in.handoff()
        q_out.acquire()
        if scoring == "softmax":  # reduction.lower_softmax's steps, in f32
            src = ub_x
            if el != f32:
                kb.emit(ascend.VcastOp(ub_x, work))
                src = work
            v("vreduce_max", src, mx)
            v("vsub", src, mx, work)
            v("vexp", work, work)
            v("vreduce_sum", work, s)
            v("vdiv", work, s, work)
            if el != f32:  # the softmax kernel stores el; topk widens it again
                kb.emit(ascend.VcastOp(work, ub_p))
                kb.emit(ascend.VcastOp(ub_p, work))
        else:  # the elementwise vsigmoid in the input type, widened by topk
            v("vsigmoid", ub_x, ub_p)
            if el != f32:
                kb.emit(ascend.VcastOp(ub_p, work))
        q_in.release()
        for j in range(k):  # topk.emit_topk_rows' rounds
            v("vreduce_max", work, mx)
            kb.emit(ascend.VcmpOp("eq", work, mx, mask))
            kb.emit(ascend.VselOp(mask, iota if j == 0 else rank, width, cand))
            v("vreduce_min", cand, arg)
            v_j = kb.subview(ub_v, [0, j], [tr, 1])
            kb.emit(ascend.vector_op("vcopy")(mx, v_j) if el == f32 else ascend.VcastOp(mx, v_j))
            kb.emit(ascend.VcastOp(arg, kb.subview(ub_i, [0, j], [tr, 1])))
            if j + 1 < k:
                kb.emit(ascend.VcmpOp("eq", iota, arg, mask))
                kb.emit(ascend.VselOp(mask, width, iota if j == 0 else rank, rank))
                kb.emit(ascend.VselOp(mask, floor, work, work))
        out = ub_v
        if renorm:  # reduction.lower_reduce's sum (wide for 16-bit), then the elementwise vdiv in el
            if wide != el:
                kb.emit(ascend.VcastOp(ub_v, vw))
            v("vreduce_sum", vw, vs)
            if wide != el:
                kb.emit(ascend.VcastOp(vs, vsum))
            v("vdiv", ub_v, vsum, ub_w)
            out = ub_w
        q_out.handoff()
        kb.copy(out, kb.subview(gm_w, [r0, 0], [rsz, k]))
        kb.copy(ub_i, kb.subview(gm_i, [r0, 0], [rsz, k]))
        q_out.release()
    ctx.launch(kb.finish(), args)
    return [weights, ids]

