"""Template of `nn.fused {kind = #nn.fused_kind<moe_experts>}` (built by fuse-moe-experts): a MoE
block's routed experts as ops-transformer runs them, instead of HF's batched-expert export
(every routed (token, k) pair's expert weights gathered, then batched MatMuls).

The region, as fuse-ffn leaves the export (R = tokens·k routed pairs in (token, k) order):

    %gu = nn.gather %w_gu, %ids {axis = 0}        w_gu [E, 2I, H] -> [R, 2I, H]
    %d  = nn.gather %w_d, %ids' {axis = 0}        w_d [E, H, I]   -> [R, H, I]   (ids' computes ids again)
    %y  = nn.fused<ffn>(%gu, %x, %d)              x [R, H, 1]: h = gu · x; act = silu(gate half) * up half;
                                                  y = d · act  -> [R, H, 1]
    nn.yield %y

The exporters compute x as the tokens [T, H] repeated k times in (token, k) order (ONNX Tile or
Expand, then reshapes: `expansion`); fuse takes that expand into the region, whose input is then
the tokens (`MoeExperts.top_k` = k; 1 where x comes in expanded, e.g. shard-expert-parallel's
received rows). The region lowers to (the experts' weights read once per touched expert, not
once per routed pair):

1.-2. moe_init_routing (templates/moe_init_routing.py): pairs sorted by expert, inverse
   permutation, group list [E+1], and the rows in that order gathered straight from the tokens,
   expanded_x [R, H] (MoeInitRoutingV2's expanded_x: no expanded copy of the tokens in GM);
3. grouped_matmul (templates/grouped_matmul.py) with w_gu and SwiGLU fused on its AIVs:
   silu(gate) * up [R, I] (ops-transformer's GroupedMatmul with its SwiGLU epilogue; computed in
   f32 from the h tiles rounded to the input type, stored in the input type);
4. grouped_matmul with w_d: [R, H];
5. a row gather by the inverse permutation: back to (token, k) order [R, H, 1] (what
   moe_finalize_routing takes). Where every reader of the region's result is a
   moe_finalize_routing region's expert outputs (`expert_major_readers`: -O2's single-device
   pipeline), this step is left out as ops-transformer leaves it out: the result buffer keeps the
   grouped MatMul's expert-major rows, registered with the inverse permutation
   (LoweringContext.row_order; MoeInitRouting's expanded_row_idx), and the finalize kernel reads
   each (token, k) row through it (templates/moe_finalize.py). Under expert parallelism the
   combine reads the result: the gather stays.

Where the epilogue does not fit (a coupled core such as 910A, one L0C accumulator, UB), is
estimated slower (`grouped_matmul.prefer_fused_swiglu`: the Mixtral-8x7B and DeepSeek-V3 decode
layers, where each weight chunk's two nd2nz loads cost more than the SwiGLU kernel) or FUSE_SWIGLU is
"never", step 3 is two kernels: grouped_matmul with w_gu [R, 2I], then SwiGLU as an AIV
kernel of its own (`emit_swiglu`; one more launch and the GM round trip of [R, 2I] in and [R, I]
out). The outputs are bit-identical either way.
The gather of step 5 is ascendir's row gather (templates/data_movement.py), standing in for
MoeFinalizeRouting's un-permute where it is needed.

`match` (what the fusion pass wraps) and `parse` (what the template reads back) live here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import StringAttr, f32
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.data_movement import emit_gather_rows
from ascendir.conversion.nn_to_ascend.templates.elementwise import ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.templates.grouped_matmul import (emit_grouped_matmul, fused_swiglu_fits,
                                                                         prefer_fused_swiglu)
from ascendir.conversion.nn_to_ascend.templates import moe_finalize
from ascendir.conversion.nn_to_ascend.templates.mc2 import rows_of
from ascendir.conversion.nn_to_ascend.templates.moe_init_routing import emit_moe_init_routing_x
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.patterns import erase_dead, fuse_ops, program_order, single_use

KIND = "moe_experts"
# SwiGLU in the gate/up GroupedMatmul: "auto" (the cost model's choice), "always" (wherever it
# fits) or "never" (its own kernel); the tests and benchmarks/moe.py --fused-swiglu compare them
FUSE_SWIGLU = "auto"
BLOCK_ATTR = "moe_block"  # the MoE block's TopK node (api/moe_report.py's block name)
UNUSED_EXPERT_ATTR = "moe_unused_expert"
EP_ATTR = "moe_ep"  # shard-expert-parallel's device count on its regions
"""On a region of shard-expert-parallel: the last expert of the stacks, a zero expert that only the
unused rows of the dispatch's fixed-capacity buffer are routed to; its rows are neither read nor
computed (their output rows are never read: the combine sends back used rows only)."""


def _body(region: Operation) -> list[Operation]:
    return [o for o in region.body.block.ops if not isinstance(o, nn.YieldOp)]


def _same(a: SSAValue, b: SSAValue, depth: int = 16) -> bool:
    """Whether `a` and `b` are computed alike from the same values (the exporters compute a
    block's expert ids once per gathered weight): same op, attributes but the ONNX node name,
    operands alike, regions with the same ops."""
    if a == b:
        return True
    oa, ob = a.owner, b.owner
    if depth == 0 or not isinstance(oa, Operation) or not isinstance(ob, Operation) or oa.name != ob.name:
        return False
    if a.type != b.type or list(oa.results).index(a) != list(ob.results).index(b) or oa.properties != ob.properties:
        return False
    if {k: v for k, v in oa.attributes.items() if k != "onnx.node"} != {k: v for k, v in ob.attributes.items() if k != "onnx.node"}:
        return False
    if len(oa.operands) != len(ob.operands) or not all(_same(x, y, depth - 1) for x, y in zip(oa.operands, ob.operands)):
        return False
    ra, rb = [o for r in oa.regions for o in r.walk()], [o for r in ob.regions for o in r.walk()]
    return [(o.name, o.properties) for o in ra] == [(o.name, o.properties) for o in rb]


@dataclass(frozen=True)
class Swiglu:
    """The ffn region's activation: act = silu(h[:, gate0 : gate0 + I]) * h[:, up0 : up0 + I]."""

    inter: int
    gate0: int
    up0: int


def _slice_cols(op: Operation, h: SSAValue, rows: int, inter: int) -> int | None:
    """The first column of a unit-step nn.slice of h [R, 2I] to [R, I] along the columns, or None."""
    if not isinstance(op, nn.SliceOp) or op.input != h or nn.shape_of(op.result) != (rows, inter):
        return None
    starts, steps = list(op.starts.get_values()), list(op.steps.get_values()) if op.steps is not None else [1, 1]
    if len(starts) != 2 or starts[0] != 0 or any(s != 1 for s in steps):
        return None
    return starts[1]


def _swiglu(ffn: nn.FusedOp) -> tuple[Swiglu, SSAValue, SSAValue, SSAValue] | None:
    """(activation, gathered w_gu, x, gathered w_d) of an ffn region over batched (gathered)
    experts: matmul [R,2I,H]·[R,H,1], reshape [R,2I], two column slices, silu·mul (ops or an
    elementwise region), reshape [R,I,1], matmul [R,H,I]·[R,I,1] yielded; else None."""
    ops = _body(ffn)
    if len(ops) != 7 or list(ffn.body.block.last_op.operands) != [ops[6].results[0]]:
        return None
    mm1, r1, s1, s2, act, r2, mm2 = ops
    if not (isinstance(mm1, nn.MatmulOp) and isinstance(r1, nn.ReshapeOp) and isinstance(r2, nn.ReshapeOp)
            and isinstance(mm2, nn.MatmulOp)):
        return None
    wg, x = mm1.lhs, mm1.rhs
    sg = nn.shape_of(wg)
    if len(sg) != 3 or nn.shape_of(x) != (sg[0], sg[2], 1) or sg[1] % 2:
        return None
    rows, inter = sg[0], sg[1] // 2
    if r1.input != mm1.result or nn.shape_of(r1.result) != (rows, 2 * inter):
        return None
    c1, c2 = _slice_cols(s1, r1.result, rows, inter), _slice_cols(s2, r1.result, rows, inter)
    if c1 is None or c2 is None or {c1, c2} != {0, inter}:
        return None
    # the activation: silu(a) * b over the two slices, as ops of an elementwise region
    if not isinstance(act, nn.FusedOp) or act.kind.data != "elementwise" or sorted(map(id, act.operands)) != sorted(
            map(id, [s1.result, s2.result])):
        return None
    inner = _body(act)
    if len(inner) != 2 or not isinstance(inner[0], nn.SiluOp) or not isinstance(inner[1], nn.MulOp):
        return None
    silu, mul = inner
    if silu.input not in act.body.block.args or {mul.lhs, mul.rhs} != {silu.result, *[a for a in act.body.block.args if a != silu.input]}:
        return None
    if list(act.body.block.last_op.operands) != [mul.result]:
        return None
    gate_val = act.operands[list(act.body.block.args).index(silu.input)]
    gate0 = c1 if gate_val == s1.result else c2
    if r2.input != act.results[0] or nn.shape_of(r2.result) != (rows, inter, 1) or mm2.rhs != r2.result:
        return None
    wd = mm2.lhs
    if nn.shape_of(wd)[:2] != (rows, sg[2]) or len(nn.shape_of(wd)) != 3 or nn.shape_of(wd)[2] != inter:
        return None
    return Swiglu(inter, gate0, inter - gate0), wg, x, wd


def _gathered(v: SSAValue) -> nn.GatherOp | None:
    """The axis-0 nn.gather of an [E, a, b] nn.weight (or, in a built region, of a region input)
    producing `v`, or None."""
    g = v.owner
    if not isinstance(g, nn.GatherOp) or g.axis.value.data != 0:
        return None
    if not isinstance(g.input.owner, nn.WeightOp) and not (isinstance(g.parent_op(), nn.FusedOp) and g.input in g.parent.args):
        return None
    return g if len(nn.shape_of(g.input)) == 3 and len(nn.shape_of(g.indices)) == 1 else None


def match(ffn: Operation) -> list[Operation] | None:
    """[gather w_gu, gather w_d, ffn region] when `ffn` is an ffn region over two gathered
    expert weights (module docstring) whose ids are computed alike, each gather read only by
    it, the two weights with the same expert count; else None."""
    if not isinstance(ffn, nn.FusedOp) or ffn.kind.data != "ffn":
        return None
    parsed = _swiglu(ffn)
    if parsed is None:
        return None
    args = list(ffn.body.block.args)
    _, wg, _, wd = parsed
    if wg not in args or wd not in args:
        return None
    g1, g2 = _gathered(ffn.operands[args.index(wg)]), _gathered(ffn.operands[args.index(wd)])
    if g1 is None or g2 is None or g1 is g2 or nn.shape_of(g1.input)[0] != nn.shape_of(g2.input)[0]:
        return None
    if any(single_use(g.result) is not ffn or g.parent is not ffn.parent for g in (g1, g2)):
        return None
    if not _same(g1.indices, g2.indices):
        return None
    return sorted([g1, g2], key=lambda o: o.parent.get_operation_index(o)) + [ffn]


def expansion(x: SSAValue, rows: int, hidden: int) -> tuple[list[Operation], int] | None:
    """(ops, k) when x [R, H, 1] (R = `rows`, H = `hidden`) is the tokens' rows repeated k times in
    (token, k) order: an nn.expand whose one broadcast axis (1 -> k) has the H row elements after
    it, then nn.reshape ops, each result read only by the next op of the chain (`ops`: the expand
    first, x's producer last); None when x is computed otherwise (or k is 1)."""
    chain: list[Operation] = []
    v = x
    while isinstance(v.owner, nn.ReshapeOp):
        chain.append(v.owner)
        v = v.owner.input
        if single_use(v) is not chain[-1]:
            return None
    ex = v.owner
    if not isinstance(ex, nn.ExpandOp):
        return None
    a, b = nn.shape_of(ex.input), nn.shape_of(ex.result)
    axes = [d for d in range(len(b)) if len(a) == len(b) and a[d] != b[d]]
    if len(axes) != 1 or a[axes[0]] != 1:
        return None
    d, k = axes[0], b[axes[0]]
    if math.prod(b[d + 1 :]) != hidden or math.prod(b[:d]) * k != rows:
        return None
    return [ex, *reversed(chain)], k


def fuse(ops: list[Operation], block_name: str) -> nn.FusedOp:
    """Wrap `match`'s ops in a region yielding the ffn's output, naming the MoE block. The
    second gather takes the first one's ids (`match` found them computed alike; what computed
    them again is erased when nothing else reads it). Where the ffn's rows are the tokens
    repeated top-k times (`expansion`, read by the ffn only), the expand and its reshapes go
    into the region too: its input is then the tokens, and the lowering gathers each
    expert-major row from them (MoeInitRouting's expanded_x), no expanded copy in GM."""
    g1, g2 = ops[0], ops[1]
    if g2.indices != g1.indices:
        old = g2.indices.owner
        g2.operands[1] = g1.indices
        if isinstance(old, Operation):
            erase_dead([old])
    ffn = ops[-1]
    _, _, x, _ = _swiglu(ffn)
    xo = ffn.operands[list(ffn.body.block.args).index(x)]
    rows, hidden = nn.shape_of(xo)[:2]
    found = expansion(xo, rows, hidden) if single_use(xo) is ffn else None
    if found is not None:
        ops = program_order([*found[0], *ops])
    region = fuse_ops(KIND, ops, [ops[-1].results[0]])
    region.attributes[BLOCK_ATTR] = StringAttr(block_name)
    return region


@dataclass(frozen=True)
class MoeExperts:
    """A parsed region over its own values: w_gu [E, 2I, H], w_d [E, H, I], x [R, H, 1], ids [R]
    (i64), the activation, the block name and the yielded shape."""

    w_gu: SSAValue
    w_d: SSAValue
    x: SSAValue
    ids: SSAValue
    act: Swiglu
    block: str
    out_shape: tuple[int, ...]
    unused_expert: bool = False
    ep: int = 1
    top_k: int = 1
    """x holds the tokens [T, ..] (T = R / top_k) the region's expand repeats top_k times; 1: x is
    the rows [R, H, 1] themselves (an expert-parallel receive buffer, or an export without the
    expand in front)."""


def parse(region: nn.FusedOp) -> MoeExperts | None:
    """The MoeExperts of a region `fuse` built, or None for another body."""
    ops = _body(region)
    core = match(ops[-1]) if ops else None
    if core is None or BLOCK_ATTR not in region.attributes:
        return None
    act, wg, x, wd = _swiglu(ops[-1])
    ffn_args = dict(zip(ops[-1].body.block.args, ops[-1].operands))
    g_gu, g_d = ffn_args[wg].owner, ffn_args[wd].owner
    args = region.body.block.args
    w_gu, w_d, xv, ids = g_gu.input, g_d.input, ffn_args[x], g_gu.indices
    top_k, rest = 1, [o for o in ops if o not in core]
    if rest:
        found = expansion(xv, *nn.shape_of(xv)[:2])
        if found is None or set(found[0]) != set(rest):
            return None
        xv, top_k = found[0][0].input, found[1]
    if any(v not in args for v in (w_gu, w_d, xv, ids)) or elem(ids).bitwidth != 64:
        return None
    if elem(w_gu) != elem(xv) or elem(w_d) != elem(xv):
        return None
    unused = UNUSED_EXPERT_ATTR in region.attributes
    if unused and region.attributes[UNUSED_EXPERT_ATTR].value.data != nn.shape_of(w_gu)[0] - 1:
        return None
    ep = region.attributes[EP_ATTR].value.data if EP_ATTR in region.attributes else 1
    return MoeExperts(w_gu, w_d, xv, ids, act, region.attributes[BLOCK_ATTR].data, nn.shape_of(ops[-1].results[0]),
                      unused, ep, top_k)


def drop_expansion(region: nn.FusedOp) -> SSAValue:
    """Take the expand (and its reshapes) out of a parsed region's body: its tokens argument
    becomes an argument of the expanded rows [R, H, 1], returned; the caller gives the region its
    operand (shard-expert-parallel: the dispatched rows). A region without it is left as it is."""
    me = parse(region)
    if me.top_k == 1:
        return me.x
    ffn = _body(region)[-1]
    rows_val = ffn.operands[list(ffn.body.block.args).index(_swiglu(ffn)[2])]
    chain = expansion(rows_val, *nn.shape_of(rows_val)[:2])[0]
    arg = Rewriter.replace_value_with_new_type(me.x, rows_val.type)
    rows_val.replace_all_uses_with(arg)
    for op in reversed(chain):
        op.detach()
        op.erase()
    return arg


def expert_major_readers(region: Operation) -> bool:
    """Whether every reader of `region`'s (first) result (through nn.reshape, at its level) takes
    it as the expert outputs y of a moe_finalize_routing region (which can read them in
    expert-major order through the inverse permutation); False for a result read by nothing or by
    anything else (a return, shard-expert-parallel's combine). `region` is a moe_experts region or
    an nn.moe_distribute_combine (templates/moe_distribute.py)."""
    frontier, readers = [region.results[0]], 0
    while frontier:
        v = frontier.pop()
        for use in v.uses:
            op = use.operation
            if isinstance(op, nn.ReshapeOp) and op.parent is region.parent:
                frontier.append(op.result)
                continue
            fin = moe_finalize.parse(op) if isinstance(op, nn.FusedOp) and op.kind.data == moe_finalize.KIND else None
            if fin is None or op.parent is not region.parent or op.body.block.args[use.index] != fin.y:
                return False
            readers += 1
    return readers > 0


def emit_swiglu(ctx: LoweringContext, h: SSAValue, act: Swiglu) -> SSAValue:
    """out [R, I] = silu(h[:, gate0:gate0+I]) * h[:, up0:up0+I] for GM h [R, 2I]; one AIV kernel
    over tiles [tr, tc] (f32 in UB for 16-bit inputs), new GM buffer of h's type.

    Raises: AscendirError when one 32-byte column group does not fit UB."""
    rows, _ = shape(h)
    inter, el = act.inter, elem(h)
    out = ctx.buffer([rows, inter], el)
    if rows * inter == 0:
        return out
    wide = el != f32

    def nbytes(tr: int, tc: int) -> int:
        n = tr * tc
        return 3 * round_up(n * itemsize(el), 32) + (3 * round_up(n * 4, 32) if wide else 0)

    unit, budget = max(1, 32 // itemsize(el)), ub_budget(ctx)
    tc = inter
    while nbytes(1, tc) > budget and tc > unit:
        tc = max(unit, round_up(tc // 2, unit))
    if nbytes(1, tc) > budget:
        raise ctx.error(f"swiglu: {unit} columns need {nbytes(1, unit)} bytes of UB, the budget is {budget}")
    tr = 1
    while tr < rows and nbytes(tr * 2, tc) <= budget:
        tr *= 2
    tr = min(tr, rows)
    cores = vector_cores(ctx)
    while ceil_div(rows, tr) * ceil_div(inter, tc) < cores and tr > 1:
        tr = ceil_div(tr, 2)
    ntiles = ceil_div(rows, tr) * ceil_div(inter, tc)
    args = [h, out]
    kb = KernelBuilder(ctx, ctx.name("swiglu"), [a.type for a in args], CoreType.AIV, min(cores, ntiles), ctx.current)
    gh, go = kb.args
    ub_g, ub_u, ub_o = (kb.alloc([tr, tc], el, MemSpace.UB) for _ in range(3))
    if wide:
        wg, wu, wo = (kb.alloc([tr, tc], f32, MemSpace.UB) for _ in range(3))
    else:
        wg, wu, wo = ub_g, ub_u, ub_o
    q_in, q_out = kb.queue(Pipe.MTE2, Pipe.V), kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        (r0, c0), (rsz, csz) = kb.grid(t, [rows, inter], [tr, tc])
        q_in.acquire()
        kb.copy(kb.subview(gh, [r0, kb.add(c0, act.gate0)], [rsz, csz]), ub_g)
        kb.copy(kb.subview(gh, [r0, kb.add(c0, act.up0)], [rsz, csz]), ub_u)
        q_in.handoff()
        q_out.acquire()
        if wide:
            kb.emit(ascend.VcastOp(ub_g, wg))
            kb.emit(ascend.VcastOp(ub_u, wu))
        kb.emit(ascend.vector_op("vsilu")(wg, wo))
        kb.emit(ascend.vector_op("vmul")(wo, wu, wo))
        if wide:
            kb.emit(ascend.VcastOp(wo, ub_o))
        q_in.release()
        q_out.handoff()
        kb.copy(ub_o, kb.subview(go, [r0, c0], [rsz, csz]))
        q_out.release()
    ctx.launch(kb.finish(), args)
    return out


def _leading(ctx: LoweringContext, buf: SSAValue, count: int) -> SSAValue:
    """The first `count` entries along dim 0 of GM buffer `buf` (contiguous: a free view)."""
    dims = list(shape(buf))
    rest = 1
    for d in dims[1:]:
        rest *= d
    return ctx.view(rows_of(ctx, ctx.view(buf, [dims[0], rest]), 0, count), [count, *dims[1:]])


def emit_moe_experts(ctx: LoweringContext, w_gu: SSAValue, w_d: SSAValue, x: SSAValue, ids: SSAValue, act: Swiglu,
                     block: str, out_shape: tuple[int, ...], unused_expert: bool = False,
                     expert_major: bool = False, top_k: int = 1) -> list[SSAValue]:
    """Launch the kernels of the module docstring on GM w_gu [E, 2I, H], w_d [E, H, I], the
    tokens x (T·H elements, T = R / top_k: each row the rows of its top_k pairs take) and ids [R]
    i64; returns [y] (GM, `out_shape` = [R, H, 1], x's type). With `unused_expert`
    (UNUSED_EXPERT_ATTR) the grouped MatMuls take experts 0 .. E-2 only: the last expert's rows of
    y are left unwritten (`block` then names the expert-parallel role of its MoeInitRouting
    launch, costmodel.moe_routing.ep_block). With `expert_major` (only where expert_major_readers
    holds) y's rows stay in expert order, y registered in ctx.row_order with the inverse
    permutation.

    Raises: AscendirError from the kernels (UB, cube buffers, a chip without FixPipe)."""
    experts, _, hidden = shape(w_gu)
    rows = shape(ids)[0]
    xs, dest, group_list = emit_moe_init_routing_x(ctx, ids, ctx.view(x, [rows // top_k, hidden]), top_k, experts,
                                                    block, unused_expert)
    if unused_expert:
        experts -= 1
        w_gu, w_d = _leading(ctx, w_gu, experts), _leading(ctx, w_d, experts)
    fuse = {"auto": prefer_fused_swiglu, "always": fused_swiglu_fits}.get(FUSE_SWIGLU)
    if fuse is not None and fuse(ctx, rows, experts, act.inter, hidden, elem(xs)):
        a = emit_grouped_matmul(ctx, xs, w_gu, group_list, (act.inter, act.gate0, act.up0))
    else:
        a = emit_swiglu(ctx, emit_grouped_matmul(ctx, xs, w_gu, group_list), act)
    ys = emit_grouped_matmul(ctx, a, w_d, group_list)
    if expert_major:
        ctx.row_order[ys] = dest
        return [ctx.view(ys, list(out_shape))]
    y = emit_gather_rows(ctx, ys, dest)
    return [ctx.view(y, list(out_shape))]
