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
elementwise vdiv). Their precision, `scores_in_f32`:

* softmax scoring without groups, as MoeGatingTopKSoftmax on the 910B (ops-transformer
  moe/moe_gating_top_k_softmax, op_kernel): bf16 logits are cast to f32 and the softmax and
  the top-k run in f32, only the k weights cast back (CAST_ROUND) in every tiling
  (moe_gating_top_k_softmax_perf.h `Compute`: `Cast(tmpTensorLocal, gatingLocal, CAST_NONE)`,
  `SoftmaxFP32Perf`, `TopKFP32PerfPhase1/2`, then `Cast(.., CAST_ROUND)`; the E-K / K full-load
  kernels' `CastComputeAlignmentBefore` / `ComputeBF16`). f16 logits take the same f32 path in
  the Perf tiling (its `else` branch casts every non-f32 type; the weights cast back
  CAST_NONE), which the tiling picks first (priority 1000) when E <= 1024, E % 8 == 0 and
  k <= 8, or E < 8 (moe_gating_top_k_softmax_tiling_perf.cpp `IsCapable`); other f16 shapes
  run the full-load kernels, whose SoftMax<half> / TopK<half> keep the scores in f16 (here: the
  f32 softmax rounded to f16 before the top-k, the unfused kernels' steps). So a 16-bit router
  does not tie two scores that differ in f32 (Qwen2-MoE's 0.07250 / 0.07211, one bf16 value).
  The renormalisation (MoeGatingTopKSoftmaxV2's renorm) sums and divides the f32 top-k values.
  Cost: one cast of the [tr, E] logits in (V) and of the [tr, k] weights out; the unfused
  kernels' two casts of the scores between softmax and top-k are gone.
* sigmoid and group-limited scoring (MoeGatingTopK, whose precision is not modelled here) and
  f32 logits: each unfused kernel's rounding to the input type between the steps, so the
  outputs are bit-identical to the unfused lowering.

Group-limited mode (DeepSeek-V3's noaux_tc router, ops-transformer's MoeGatingTopK with
groupCount > 1; the region `fuse_grouped` builds, see match_grouped): the same kernel and row
tiles, the bias (and the fill, eps and scale values) loaded into UB once before the row loop;
per tile, after the scores:

    biased = scores + bias (V, el: the unfused add)
    per group g (columns g·m .. g·m + m - 1, m = E / G): its score, the sum of its top 2 (max, first
      index of the max knocked out, max again: topk k = 2 + reduce_sum, rounded to el) or its max
    `keep` arg-max rounds over the [tr, G] group scores (a taken group's rank set to E)
    per group g: vsel(taken[:, g], biased, fill) on its columns
    k arg-max rounds over the masked scores; each round's one-hot picks the un-biased score
      (vsel + vreduce_max: the GatherElements of the graph, exact)
    [sum (wide for 16-bit), + eps, divide (el)] [times scale (el)]

ops-transformer's kernel sorts each group (Sort32), takes the top 2 with GatherMask and
PairReduceSum, sorts the group scores and merge-sorts the kept groups (MrgSort); the arg-max rounds
here are the unfused topk kernels' own and keep their tie rule (the smallest index first, as ONNX
TopK: equal group scores keep the lower group, a group's two equal maxima both count), so the
outputs are bit-identical to the unfused lowering of the router (tests/test_moe_gating_groups.py).
Its vector work grows with G (one top-2 per group) and with keep and k (one round each).

`match` (what the fusion pass wraps) and `parse` (what the template reads back) live here.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from xdsl.dialects.builtin import f16, f32, i1, i64
from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.elementwise import ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.templates.reduction import _wide
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.patterns import fuse_ops, other_operand, program_order, single_use

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
class GroupedGating:
    """Group-limited routing (DeepSeek-V3's noaux_tc; MoeGatingTopK with groupCount > 1): the
    E experts in `groups` groups of E / groups, each group scored by the sum of its top 2
    (`select = "top2_sum"`, group_select_mode 1) or its largest (`"max"`, mode 0) biased score,
    only the best `keep` groups' experts eligible (the others' biased scores set to `fill`
    before the top-k). The top-k weights are the un-biased scores at the chosen experts,
    [divided by their sum (+ `eps`)] [times `scale`] (routed_scaling_factor); `bias`, `fill`,
    `eps` and `scale` are values (one element; [E] or [1, E] for the bias): the region's in a
    plan, their GM buffers for emit_moe_gating, which reads them as the unfused elementwise
    kernels do."""

    groups: int
    keep: int
    select: str
    bias: SSAValue | None
    fill: SSAValue
    eps: SSAValue | None
    scale: SSAValue | None


@dataclass(frozen=True)
class MoeGating:
    """A parsed region over its own values: logits [T, E], scoring, k, renormalised, and the
    group limit (None: plain top-k of the scores, weights the top-k values)."""

    logits: SSAValue
    scoring: str
    k: int
    renorm: bool
    group: GroupedGating | None = None


def parse(region: nn.FusedOp) -> MoeGating | None:
    """The MoeGating of a region `fuse` or `fuse_grouped` built, or None for another body."""
    block = region.body.block
    ops = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    topks = [o for o in ops if isinstance(o, nn.TopKOp)]
    if topks and isinstance(topks[-1].input.owner, nn.WhereOp):  # the group-limited mode
        found = match_grouped(topks[-1], None)
        if found is None or found[0] != ops or list(block.last_op.operands) != found[1]:
            return None
        gating, g = found[2], found[2].group
        values = [gating.logits, g.fill] + [v for v in (g.bias, g.eps, g.scale) if v is not None]
        return gating if all(v in block.args for v in values) else None
    if len(ops) not in (2, 4) or not isinstance(ops[1], nn.TopKOp) or match(ops[1]) != ops:
        return None
    score, topk = ops[0], ops[1]
    if score.operands[0] not in block.args:
        return None
    weights = ops[-1].results[0] if len(ops) == 4 else topk.values
    if list(block.last_op.operands) != [weights, topk.indices]:
        return None
    return MoeGating(score.operands[0], SCORING[type(score)], topk.k.value.data, len(ops) == 4)


# ----------------------------------------------------------------------------------------------
# group-limited routing, as the exporters write DeepSeek-V3's router (HF DeepseekV3TopkRouter):
#
#   %p  = nn.sigmoid %logits                                   [T, E]   (or softmax)
#   %b  = nn.add %p, %bias                                     e_score_correction_bias [E]
#   %r  = nn.reshape %b -> [T, G, E/G];  %tv, _ = nn.topk %r {k = 2, axis = -1}
#   %gs = nn.reduce_sum %tv {axes = [-1]}                      [T, G]  (or nn.reduce_max %r)
#   _, %gi = nn.topk %gs {k = topk_group, axis = -1}
#   %gm = ScatterElements(zeros [T, G], %gi, ones, axis 1) as the importer writes it: per column
#         j, nn.where(nn.equal(slice(%gi')[:, j], iota [1, G]), ones[:, j], acc); %gi' is %gi or
#         its negative-index fix nn.where(nn.less(%gi, 0), nn.add(%gi, G), %gi)
#   %m  = reshape(expand(reshape(%gm -> [T, G, 1]) -> [T, G, E/G]) -> [T, E])
#   %s  = nn.where(nn.not(nn.cast %m to i1), %fill, %b)        (or where(cast, %b, %fill))
#   _, %ids = nn.topk %s {k, axis = -1}
#   %w  = GatherElements(%p, %ids, axis 1): nn.gather(reshape(%p -> [T*E]), %ids' + row offsets)
#   [%w = nn.div %w, (nn.reduce_sum %w {axes = [-1], keepdims} [+ %eps])]  [%w = nn.mul %w, %scale]
#
# match_grouped reads it from the last TopK; with a Constants it also checks the index constants
# (iota, zeros, ones, row offsets, the negative-index fixes): the template trusts the region's
# structure from there, as the fusion pass only wraps what it checked.


def _is(v: SSAValue | None, cls: type[Operation] | tuple[type[Operation], ...]) -> Operation | None:
    return v.owner if v is not None and isinstance(v.owner, cls) else None


def _check(consts, v: SSAValue, want) -> bool:
    """Whether constant `v` equals `want` (an array or a predicate over the array); always
    true without `consts` (the template re-reading a region the pass checked)."""
    if consts is None:
        return True
    a = consts.array(v)
    if a is None:
        return False
    if callable(want):
        return bool(want(a))
    return a.shape == np.shape(want) and bool(np.all(a == want))


def _index_fix(v: SSAValue, src: SSAValue, n: int, consts) -> list[Operation] | None:
    """[] when v is src; the ops of the importers' negative-index fix where(less(src, 0),
    add(src, n), src) when v is that; else None."""
    if v == src:
        return []
    w = _is(v, nn.WhereOp)
    less = _is(w.cond, nn.LessOp) if w else None
    add = _is(w.lhs, nn.AddOp) if w else None
    if not (w and less and add and w.rhs == src and less.lhs == src and add.lhs == src):
        return None
    if not (_check(consts, less.rhs, lambda a: a.size == 1 and a.reshape(-1)[0] == 0)
            and _check(consts, add.rhs, lambda a: a.size == 1 and a.reshape(-1)[0] == n)):
        return None
    return [less, add, w]


def _scalar_shaped(v: SSAValue) -> bool:
    return all(d == 1 for d in nn.shape_of(v))


def _group_mask(m: SSAValue, t_rows: int, e: int, consts) -> tuple[list[Operation], nn.TopKOp, int] | None:
    """(ops, the TopK over group scores, G) when m [T, E] is the experts' 0/1 group mask."""
    r1 = _is(m, nn.ReshapeOp)
    ex = _is(r1.input, nn.ExpandOp) if r1 else None
    r0 = _is(ex.input, nn.ReshapeOp) if ex else None
    if not (r1 and ex and r0) or len(nn.shape_of(r0.input)) != 2:
        return None
    g = nn.shape_of(r0.input)[1]
    if g <= 1 or e % g or nn.shape_of(r0.result) != (t_rows, g, 1) or nn.shape_of(ex.result) != (t_rows, g, e // g):
        return None
    ops: list[Operation] = [r0, ex, r1]
    acc, cols, src = r0.input, set(), None
    while (w := _is(acc, nn.WhereOp)) is not None:
        eq = _is(w.cond, nn.EqualOp)
        if eq is None:
            return None
        col, iota = (eq.lhs, eq.rhs) if nn.shape_of(eq.rhs) == (1, g) else (eq.rhs, eq.lhs)
        sl = _is(col, nn.SliceOp)
        if (sl is None or nn.shape_of(iota) != (1, g) or nn.shape_of(col) != (t_rows, 1)
                or list(sl.steps.get_values()) != [1, 1] or sl.starts.get_values()[0] != 0
                or not _check(consts, iota, np.arange(g).reshape(1, g))):
            return None
        if src is not None and sl.input != src:
            return None
        src = sl.input
        cols.add(sl.starts.get_values()[1])
        ops += [sl, eq, w]
        upd = w.lhs
        if (usl := _is(upd, nn.SliceOp)) is not None:
            ops.append(usl)
            upd = usl.input
        if not _check(consts, upd, lambda a: a.size > 0 and bool(np.all(a != 0))):
            return None
        acc = w.rhs
    if src is None or nn.shape_of(acc) != (t_rows, g) or not _check(consts, acc, lambda a: a.size > 0 and not a.any()):
        return None
    raw = src.owner.rhs if isinstance(src.owner, nn.WhereOp) else src  # before the negative-index fix
    gt = _is(raw, nn.TopKOp)
    if gt is None or raw != gt.indices:
        return None
    fix = _index_fix(src, gt.indices, g, consts)
    k_g = gt.k.value.data
    if fix is None or cols != set(range(k_g)) or nn.shape_of(src) != (t_rows, k_g):
        return None
    return fix + ops, gt, g


def match_grouped(topk: Operation, consts) -> tuple[list[Operation], list[SSAValue], MoeGating] | None:
    """(the ops in program order, the outputs [weights [T, k], ids [T, k]], the MoeGating) when
    `topk` is the expert TopK of a group-limited router written as the comment above shows, else
    None. `consts` (patterns.Constants) checks the index constants; None skips that (parse)."""
    if not isinstance(topk, nn.TopKOp) or not topk.largest.value.data or topk.values.uses:
        return None
    shp = nn.shape_of(topk.input)
    if len(shp) != 2 or not _last(topk.axis.value.data, 2):
        return None
    t_rows, e = shp
    w = _is(topk.input, nn.WhereOp)
    if w is None:
        return None
    ops: list[Operation] = [w]
    if (neg := _is(w.cond, nn.NotOp)) is not None:
        cast, fill, b = _is(neg.input, nn.CastOp), w.lhs, w.rhs
        ops.append(neg)
    else:
        cast, fill, b = _is(w.cond, nn.CastOp), w.rhs, w.lhs
    if cast is None or cast.result.type.element_type != i1 or not _scalar_shaped(fill) or nn.shape_of(b) != shp:
        return None
    ops.append(cast)
    gm = _group_mask(cast.input, t_rows, e, consts)
    if gm is None:
        return None
    mask_ops, gt, g = gm
    ops += mask_ops + [gt]
    # group scores: reduce_sum(topk(r, 2).values) or reduce_max(r), r = reshape(b -> [T, G, E/G])
    red = gt.input.owner
    if (not isinstance(red, (nn.ReduceSumOp, nn.ReduceMaxOp)) or red.keepdims.value.data
            or [a % 3 for a in red.axes.get_values()] != [2] or not _last(gt.axis.value.data, 2) or not gt.largest.value.data):
        return None
    ops.append(red)
    src = red.input
    select = "max"
    if isinstance(red, nn.ReduceSumOp):
        t2 = _is(src, nn.TopKOp)
        if t2 is None or src != t2.values or t2.k.value.data != 2 or not t2.largest.value.data or t2.axis.value.data % 3 != 2:
            return None
        ops.append(t2)
        src, select = t2.input, "top2_sum"
    r = _is(src, nn.ReshapeOp)
    if r is None or r.input != b or nn.shape_of(r.result) != (t_rows, g, e // g):
        return None
    ops.append(r)
    # biased scores b = p [+ bias], p = sigmoid / softmax(logits)
    bias, p = None, b
    if (add := _is(b, nn.AddOp)) is not None:
        p, bias = (add.lhs, add.rhs) if type(add.lhs.owner) in SCORING else (add.rhs, add.lhs)
        if nn.shape_of(bias) not in ((e,), (1, e)):
            return None
        ops.append(add)
    score = p.owner
    if type(score) not in SCORING or nn.shape_of(p) != shp:
        return None
    if isinstance(score, nn.SoftmaxOp) and not _last(score.axis.value.data, 2):
        return None
    ops.append(score)
    # the weights: the un-biased scores at the ids (GatherElements), renormalised, scaled
    flat = [u.operation for u in p.uses if isinstance(u.operation, nn.ReshapeOp) and nn.shape_of(u.operation.result) == (t_rows * e,)]
    gathers = [u.operation for f in flat for u in f.result.uses if isinstance(u.operation, nn.GatherOp)]
    if len(gathers) != 1 or gathers[0].axis.value.data != 0 or nn.shape_of(gathers[0].result) != (t_rows, topk.k.value.data):
        return None
    gather = gathers[0]
    ops += [gather.input.owner, gather]
    off = _is(gather.indices, nn.AddOp)
    if off is None:
        return None
    k = topk.k.value.data
    rows = np.arange(t_rows, dtype=np.int64).reshape(t_rows, 1) * e
    for ids, offsets in ((off.lhs, off.rhs), (off.rhs, off.lhs)):
        fix = _index_fix(ids, topk.indices, e, consts)
        if fix is not None and nn.shape_of(offsets) == (t_rows, k) and _check(consts, offsets, np.broadcast_to(rows, (t_rows, k))):
            ops += fix + [off]
            break
    else:
        return None
    weights = gather.result
    renorm, eps, scale = False, None, None
    users = {u.operation for u in weights.uses}
    red = next((o for o in users if isinstance(o, nn.ReduceSumOp)), None)
    div = next((o for o in users if isinstance(o, nn.DivOp)), None)
    if red is not None and div is not None and len(users) == 2 and div.lhs == weights:
        if [a % 2 for a in red.axes.get_values()] != [1] or not red.keepdims.value.data:
            return None
        den = div.rhs
        if den != red.result:
            add = _is(den, nn.AddOp)
            if add is None or red.result not in (add.lhs, add.rhs):
                return None
            eps = other_operand(add, red.result)
            if not _scalar_shaped(eps):
                return None
            ops.append(add)
        ops += [red, div]
        renorm, weights = True, div.result
    users = [u.operation for u in weights.uses]
    if len(users) == 1 and isinstance(users[0], nn.MulOp):
        scale = other_operand(users[0], weights)
        if _scalar_shaped(scale):
            ops.append(users[0])
            weights = users[0].result
        else:
            scale = None
    ops.append(topk)
    logits = score.operands[0]
    group = GroupedGating(g, gt.k.value.data, select, bias, fill, eps, scale)
    return program_order(ops), [weights, topk.indices], MoeGating(logits, SCORING[type(score)], k, renorm, group)


def fuse_grouped(topk: Operation, consts) -> nn.FusedOp | None:
    """Wrap the group-limited router of `topk` (match_grouped) in a moe_gating region yielding
    the weights and the ids; None (nothing changed) when it does not match, or when a value it
    computes is used outside it or an outside user of its outputs comes before its last op."""
    found = match_grouped(topk, consts)
    if found is None:
        return None
    ops, outputs, _ = found
    inside = set(ops)
    if any(u.operation not in inside for op in ops for r in op.results if r not in outputs for u in r.uses):
        return None
    last = ops[-1]
    block = last.parent_block()
    pos = {op: i for i, op in enumerate(block.ops)}
    for o in outputs:
        for u in o.uses:
            user = u.operation
            while user.parent_block() is not block:  # a use inside a region: the region's position
                user = user.parent_op()
            if user not in inside and pos[user] < pos[last]:
                return None
    return fuse_ops(KIND, ops, outputs)


def scores_in_f32(scoring: str, el, e: int, k: int, grouped: bool) -> bool:
    """Whether the kernel computes a router's softmax, top-k and renormalisation in f32 for
    logits of type `el` ([T, e], top `k`), the weights rounded to el once at the end:
    MoeGatingTopKSoftmax's precision (module docstring) for a softmax router without a group
    limit, f32 / bf16 logits always, f16 in the shapes of its Perf tiling. False: the unfused
    kernels' steps, each rounding to el (f16 outside the Perf tiling; sigmoid and group-limited
    scoring, MoeGatingTopK's, whose precision is not modelled here)."""
    if scoring != "softmax" or grouped:
        return False
    return el != f16 or (e <= 1024 and e % 8 == 0 and k <= 8) or e < 8


def emit_moe_gating(ctx: LoweringContext, logits: SSAValue, scoring: str, k: int, renorm: bool,
                    group: GroupedGating | None = None) -> list[SSAValue]:
    """Launch the kernel of the module docstring on GM logits [T, E]; returns [weights [T, k] in
    the logits' type, ids [T, k] i64] (new GM buffers). With `group`, the group-limited mode
    (module docstring; its values GM buffers): the weights are the scores at the ids,
    renormalised when `renorm`.

    Raises:
        AscendirError: when one row does not fit UB."""
    t_rows, e = shape(logits)
    el = elem(logits)
    wide = _wide(el)
    weights, ids = ctx.buffer([t_rows, k], el), ctx.buffer([t_rows, k], i64)
    if t_rows * k == 0:
        return [weights, ids]
    g = group.groups if group else 1
    f32_scores = scores_in_f32(scoring, el, e, k, group is not None)

    def nbytes(tr: int) -> int:
        # logits, scores (f32), scores in el (not in the f32 softmax), candidates, ranks, mask, ...
        per = [(tr * e, el), (tr * e, f32), (tr * e * (not f32_scores), el), (tr * e, f32), (tr * e * (k > 1), f32), (tr * e, i1),
               (tr, f32), (tr, f32), (tr, f32), (tr * k, el), (tr * k, i64), (tr * k, el), (tr * k, f32), (tr, f32), (tr, el)]
        if group:  # rank (k = 1 too), biased scores, scores widened, group scores / ranks / mask, weights, scalars
            per += [(tr * e * (k == 1), f32), (tr * e, el), (tr * e, f32), (tr * g, f32), (tr * g, f32), (tr * g, f32),
                    (tr * g, el), (tr * g, i1), (tr, f32), (tr * k, f32), (e, el), (1, el), (1, el), (1, el), (1, f32)]
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

    extra = [] if group is None else [v for v in (group.bias, group.fill, group.eps, group.scale) if v is not None]
    args = [logits, weights, ids, *(ctx.view(v, [1, math.prod(shape(v))]) for v in extra)]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIV, min(cores, ntiles), ctx.current)
    gm_x, gm_w, gm_i = kb.args[:3]
    gm_extra = dict(zip([id(v) for v in extra], kb.args[3:]))
    alloc = kb.alloc
    ub_x = alloc([tr, e], el, MemSpace.UB)
    work = alloc([tr, e], f32, MemSpace.UB)
    ub_p = alloc([tr, e], el, MemSpace.UB) if el != f32 and not f32_scores else work  # the scores rounded to el, as stored
    cand = alloc([tr, e], f32, MemSpace.UB)
    mask = alloc([tr, e], i1, MemSpace.UB)
    mx = alloc([tr, 1], f32, MemSpace.UB)
    s = alloc([tr, 1], f32, MemSpace.UB)
    arg = alloc([tr, 1], f32, MemSpace.UB)
    ub_v = alloc([tr, k], el, MemSpace.UB)
    ub_i = alloc([tr, k], i64, MemSpace.UB)
    iota = alloc([1, e], f32, MemSpace.UB)
    rank = alloc([tr, e], f32, MemSpace.UB) if k > 1 or group else iota
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
    if group:
        gb = _GroupBuffers(kb, group, gm_extra, tr, e, k, el)

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
            if el != f32 and not f32_scores:  # the softmax kernel stores el; topk widens it again
                kb.emit(ascend.VcastOp(work, ub_p))
                kb.emit(ascend.VcastOp(ub_p, work))
        else:  # the elementwise vsigmoid in the input type, widened by topk
            v("vsigmoid", ub_x, ub_p)
            if el != f32:
                kb.emit(ascend.VcastOp(ub_p, work))
        q_in.release()
        if group:
            gb.select_groups(ub_p, work, mx, arg, cand, mask, iota, width, floor)
            kb.emit(ascend.vector_op("vcopy")(iota, rank))
        for j in range(k):  # topk.emit_topk_rows' rounds
            r_j = rank if group else (iota if j == 0 else rank)
            v("vreduce_max", work, mx)
            kb.emit(ascend.VcmpOp("eq", work, mx, mask))
            kb.emit(ascend.VselOp(mask, r_j, width, cand))
            v("vreduce_min", cand, arg)
            if group:  # the weight: the un-biased score at the id (exact: one element is picked)
                kb.emit(ascend.VcmpOp("eq", iota, arg, mask))
                kb.emit(ascend.VselOp(mask, gb.pf, floor, cand))
                v("vreduce_max", cand, kb.subview(gb.wv, [0, j], [tr, 1]))
            elif f32_scores and renorm:  # the top-k values kept in f32 for the renormalisation
                v("vcopy", mx, kb.subview(vw, [0, j], [tr, 1]))
            else:
                v_j = kb.subview(ub_v, [0, j], [tr, 1])
                kb.emit(ascend.vector_op("vcopy")(mx, v_j) if el == f32 else ascend.VcastOp(mx, v_j))
            kb.emit(ascend.VcastOp(arg, kb.subview(ub_i, [0, j], [tr, 1])))
            if j + 1 < k:
                if not group:
                    kb.emit(ascend.VcmpOp("eq", iota, arg, mask))
                kb.emit(ascend.VselOp(mask, width, r_j, rank))
                kb.emit(ascend.VselOp(mask, floor, work, work))
        if group:  # the gathered scores in el, as the unfused gather stores them
            kb.emit(ascend.vector_op("vcopy")(gb.wv, ub_v) if el == f32 else ascend.VcastOp(gb.wv, ub_v))
        out = ub_v
        if f32_scores and renorm:  # sum and divide in f32, the weights cast to el (vw is ub_v for f32)
            v("vreduce_sum", vw, vs)
            v("vdiv", vw, vs, ub_w if el == f32 else vw)
            if el != f32:
                kb.emit(ascend.VcastOp(vw, ub_w))
            out = ub_w
        elif renorm:  # reduction.lower_reduce's sum (wide for 16-bit), then the elementwise vdiv in el
            if wide != el:
                kb.emit(ascend.VcastOp(ub_v, vw))
            v("vreduce_sum", vw, vs)
            if wide != el:
                kb.emit(ascend.VcastOp(vs, vsum))
            if group and group.eps is not None:
                v("vadd", vsum, gb.eps, vsum)
            v("vdiv", ub_v, vsum, ub_w)
            out = ub_w
        if group and group.scale is not None:
            v("vmul", out, gb.scale, out)
        q_out.handoff()
        kb.copy(out, kb.subview(gm_w, [r0, 0], [rsz, k]))
        kb.copy(ub_i, kb.subview(gm_i, [r0, 0], [rsz, k]))
        q_out.release()
    ctx.launch(kb.finish(), args)
    return [weights, ids]


class _GroupBuffers:
    """The group-limited mode's UB buffers and steps (MoeGatingTopK with groupCount > 1: the
    group scores, the best `keep` groups, the other groups' experts set to `fill`)."""

    def __init__(self, kb: KernelBuilder, group: GroupedGating, gm: dict[int, SSAValue], tr: int, e: int, k: int, el) -> None:
        self.kb, self.group, self.tr, self.e, self.el = kb, group, tr, e, el
        g = group.groups
        alloc = kb.alloc
        self.ub_b = alloc([tr, e], el, MemSpace.UB)  # the biased scores, in el as the unfused add stores them
        self.pf = alloc([tr, e], f32, MemSpace.UB)  # the scores widened (work becomes the masked biased scores)
        self.gs = alloc([tr, g], f32, MemSpace.UB)
        self.grank = alloc([tr, g], f32, MemSpace.UB)
        self.gcand = alloc([tr, g], f32, MemSpace.UB)
        self.gs_el = alloc([tr, g], el, MemSpace.UB) if el != f32 else None
        self.gmask = alloc([tr, g], i1, MemSpace.UB)
        self.m2 = alloc([tr, 1], f32, MemSpace.UB)
        self.wv = alloc([tr, k], f32, MemSpace.UB)
        self.fill = alloc([1, 1], f32, MemSpace.UB)

        def load(v: SSAValue | None, n: int) -> SSAValue | None:
            if v is None:
                return None
            ub = alloc([1, n], el, MemSpace.UB)
            kb.copy(gm[id(v)], ub)
            return ub

        # loaded once, before the row loop (the kernel's own MTE2 -> V hand-off)
        self.bias = load(group.bias, e)
        fill_el = load(group.fill, 1)
        self.eps = load(group.eps, 1)
        self.scale = load(group.scale, 1)
        kb.handoff(Pipe.MTE2, Pipe.V)
        kb.emit(ascend.VcastOp(fill_el, self.fill) if el != f32 else ascend.vector_op("vcopy")(fill_el, self.fill))

    def select_groups(self, ub_p, work, mx, arg, cand, mask, iota, width, floor) -> None:
        """From the scores (ub_p in el; work: them widened) to work = the biased scores with the
        unselected groups' experts at `fill`, in f32; pf = the un-biased scores in f32."""
        kb, group, e, el = self.kb, self.group, self.e, self.el
        tr, g = self.tr, group.groups
        m = e // g

        def v(name: str, *a) -> None:
            kb.emit(ascend.vector_op(name)(*a))

        if el == f32:
            v("vcopy", work, self.pf)
        else:
            kb.emit(ascend.VcastOp(ub_p, self.pf))
        if self.bias is not None:  # the elementwise add in el, widened by the topk after it
            v("vadd", ub_p, self.bias, self.ub_b)
            kb.emit(ascend.VcastOp(self.ub_b, work) if el != f32 else ascend.vector_op("vcopy")(self.ub_b, work))
        sub = lambda buf, c0, w: kb.subview(buf, [0, c0], [tr, w])  # noqa: E731
        for j in range(g):  # each group's score: its largest, or the sum of its top 2 (topk k = 2)
            wg, cg, mg, col = sub(work, j * m, m), sub(cand, j * m, m), sub(mask, j * m, m), sub(self.gs, j, 1)
            if group.select == "max":
                v("vreduce_max", wg, col)
                continue
            v("vreduce_max", wg, mx)
            kb.emit(ascend.VcmpOp("eq", wg, mx, mg))
            kb.emit(ascend.VselOp(mg, kb.subview(iota, [0, 0], [1, m]), width, cg))
            v("vreduce_min", cg, arg)
            kb.emit(ascend.VcmpOp("eq", kb.subview(iota, [0, 0], [1, m]), arg, mg))
            kb.emit(ascend.VselOp(mg, floor, wg, cg))
            v("vreduce_max", cg, self.m2)
            v("vadd", mx, self.m2, col)
        if el != f32 and group.select != "max":  # the reduce_sum kernel stores el; the group topk widens it
            kb.emit(ascend.VcastOp(self.gs, self.gs_el))
            kb.emit(ascend.VcastOp(self.gs_el, self.gs))
        giota = kb.subview(iota, [0, 0], [1, g])
        kb.emit(ascend.vector_op("vcopy")(giota, self.grank))
        for _ in range(group.keep):  # the best `keep` groups (topk rounds; a taken group's rank becomes E)
            v("vreduce_max", self.gs, mx)
            kb.emit(ascend.VcmpOp("eq", self.gs, mx, self.gmask))
            kb.emit(ascend.VselOp(self.gmask, self.grank, width, self.gcand))
            v("vreduce_min", self.gcand, arg)
            kb.emit(ascend.VcmpOp("eq", giota, arg, self.gmask))
            kb.emit(ascend.VselOp(self.gmask, width, self.grank, self.grank))
            kb.emit(ascend.VselOp(self.gmask, floor, self.gs, self.gs))
        kb.emit(ascend.VcmpOp("eq", self.grank, width, self.gmask))  # the taken groups
        for j in range(g):
            wg = sub(work, j * m, m)
            kb.emit(ascend.VselOp(kb.subview(self.gmask, [0, j], [tr, 1]), wg, self.fill, wg))
