"""Template of `nn.fused {kind = #nn.fused_kind<moe_finalize_routing>}` (built by
fuse-moe-finalize-routing): the weighted combine of each token's k expert outputs and the
shared expert's output added, ops-transformer's MoeFinalizeRouting:

    %p = nn.mul %y, %w                 y [T·k, H] expert outputs (rows in (token, k) order),
                                       w [T·k, 1] routing weights
    %q = nn.reshape %p                 [T, k, H]
    %s = nn.reduce_sum %q {axes = [1], keepdims = false}          [T, H]
    [%r = nn.reshape %s  (row-keeping, e.g. [1, T, H]);  %o = nn.add %r, %shared]
    nn.yield %o | %s

y's rows are in (token, k) order, as the region says, unless the moe_experts kernels that made
them left them expert-major (templates/moe_experts.py: the grouped MatMul's output, registered in
LoweringContext.row_order with MoeInitRouting's inverse permutation dest): then, as
MoeFinalizeRouting reads expanded_x through expanded_row_idx, the tile's dest entries are loaded
and each token's k rows are gathered by them (ascend.gather_rows, MTE2), and no un-permute kernel
runs before this one.

One AIV kernel over tiles of tt tokens x hc hidden columns:

    prime V->MTE2, MTE3->V
    scf.for %t = %block_idx to ceil(T/tt)·ceil(H/hc) step block_dim
      wait V->MTE2;  GM->UB y [tt, k, hc] (or its tt·k rows through dest), w [tt, k, 1]
                     [, shared [tt, 1, hc]] (MTE2);  MTE2->V
      wait MTE3->V;  vmul (el);  [vcast f32];  vtranspose -> [tt, hc, k];  vreduce_sum;  [vcast el]
      vtranspose -> [tt, 1, hc];  [vadd shared (el)];  set V->MTE2;  set/wait V->MTE3
      UB->GM out [tt, 1, hc] (MTE3);  set MTE3->V

What it saves over the unfused ops (mul kernel, the reduce_sum column kernel, [add kernel]):
1-2 launches and the GM round trips of the product [T·k, H] (and of the sum). The vector ops,
their order and their rounding to the input type are the unfused kernels' (the elementwise
vmul / vadd in the input type, reduction.lower_reduce's column layout: transpose, f32 sum for
16-bit inputs, transpose back), so the outputs are bit-identical to the unfused lowering.

`match` (what the fusion pass wraps) and `parse` (what the template reads back) live here.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.elementwise import ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.templates.reduction import _wide
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.patterns import fuse_ops, single_use

KIND = "moe_finalize_routing"


def _combine(s: nn.ReduceSumOp) -> tuple[nn.MulOp, nn.ReshapeOp, SSAValue, SSAValue] | None:
    """(mul, reshape, y, w) when `s` sums axis 1 of [T, k, H] = reshape(mul(y [T·k, H], w [T·k, 1])),
    the product and its reshape read only by the next op, else None."""
    if not isinstance(s, nn.ReduceSumOp) or s.keepdims.value.data:
        return None
    shp = nn.shape_of(s.input)
    if len(shp) != 3 or [a % 3 for a in s.axes.get_values()] != [1]:
        return None
    t, k, h = shp
    r = s.input.owner
    if not isinstance(r, nn.ReshapeOp) or single_use(r.result) is not s:
        return None
    m = r.input.owner
    if not isinstance(m, nn.MulOp) or single_use(m.result) is not r or nn.shape_of(m.result) != (t * k, h):
        return None
    for y, w in ((m.lhs, m.rhs), (m.rhs, m.lhs)):
        if nn.shape_of(y) == (t * k, h) and nn.shape_of(w) == (t * k, 1) and y != w:
            return m, r, y, w
    return None


def _shared_add(s: nn.ReduceSumOp) -> list[Operation]:
    """[row-keeping reshapes..., add] when the sum (through reshapes that only add unit leading
    dims) is added to a tensor of the same shape and type, else []."""
    chain: list[Operation] = []
    v = s.result
    while True:
        user = single_use(v)
        if isinstance(user, nn.ReshapeOp) and [d for d in nn.shape_of(user.result) if d != 1] == [
                d for d in nn.shape_of(v) if d != 1] and nn.shape_of(user.result)[-2:] == nn.shape_of(s.result):
            chain.append(user)
            v = user.result
            continue
        if isinstance(user, nn.AddOp) and nn.shape_of(user.lhs) == nn.shape_of(user.rhs) and user.lhs != user.rhs:
            other = user.rhs if user.lhs == v else user.lhs
            if elem(other) == elem(v) and other.owner not in chain:
                return [*chain, user]
        return []


def match(s: Operation) -> list[Operation] | None:
    """[mul, reshape, reduce_sum(, reshapes, add)] of the module docstring, or None."""
    c = _combine(s) if isinstance(s, nn.ReduceSumOp) else None
    if c is None:
        return None
    m, r, _, _ = c
    if any(o.parent is not s.parent for o in (m, r)):
        return None
    return [m, r, s, *_shared_add(s)]


def fuse(ops: list[Operation]) -> nn.FusedOp:
    """Wrap `match`'s ops in a region yielding the combined output."""
    return fuse_ops(KIND, ops, [ops[-1].results[0]])


@dataclass(frozen=True)
class MoeFinalize:
    """A parsed region over its own values: expert outputs y [T·k, H], weights w [T·k, 1],
    tokens T, k, shared [T·H elements] or None, and the yielded shape."""

    y: SSAValue
    w: SSAValue
    tokens: int
    k: int
    shared: SSAValue | None
    out_shape: tuple[int, ...]


def parse(region: nn.FusedOp) -> MoeFinalize | None:
    """The MoeFinalize of a region `fuse` built, or None for another body."""
    block = region.body.block
    ops = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    if len(ops) < 3 or match(ops[2]) != ops:
        return None
    _, _, y, w = _combine(ops[2])
    shared = None
    if len(ops) > 3:
        add, prev = ops[-1], ops[-2].results[0]
        shared = add.rhs if add.lhs == prev else add.lhs
        if shared not in block.args:
            return None
    if y not in block.args or w not in block.args or list(block.last_op.operands) != [ops[-1].results[0]]:
        return None
    t, k, _ = nn.shape_of(ops[2].input)
    return MoeFinalize(y, w, t, k, shared, nn.shape_of(ops[-1].results[0]))


def emit_moe_finalize(ctx: LoweringContext, y: SSAValue, w: SSAValue, tokens: int, k: int, shared: SSAValue | None,
                      out_shape: tuple[int, ...], dest: SSAValue | None = None) -> list[SSAValue]:
    """Launch the kernel of the module docstring on GM y [T·k, H], w [T·k, 1] (and shared, T·H
    elements); returns [out] (a new GM buffer of `out_shape`, y's type). With `dest` (GM [T·k]
    i64), the (token, k) row i of the expert outputs is row dest[i] of y.

    Raises:
        AscendirError: when one token's k rows of 16 columns do not fit UB."""
    h = shape(y)[-1]
    el = elem(y)
    wide = _wide(el)
    out = ctx.buffer(list(out_shape), el)
    if tokens * h == 0 or k == 0:
        return [out]

    def nbytes(tt: int, hc: int) -> int:
        per = [(tt * k * hc, el), (tt * k, el), (tt * k * hc, el), (tt * hc * k, wide), (tt * hc, wide), (tt * hc, el),
               (tt * hc, el), (tt * hc, el)]
        if wide != el:
            per.append((tt * k * hc, wide))
        if dest is not None:
            per.append((tt * k, elem(dest)))
        return sum(round_up(n * itemsize(e), 32) for n, e in per)

    budget = ub_budget(ctx)
    unit = max(1, 32 // itemsize(el))
    if nbytes(1, min(h, unit)) > budget:
        raise ctx.error(f"moe_finalize_routing: {k} rows of {unit} columns need {nbytes(1, unit)} bytes of UB, "
                        f"the budget is {budget}")
    hc = h
    while nbytes(1, hc) > budget:  # whole rows when they fit, else 32-byte column groups
        hc = max(unit, round_up(hc // 2, unit))
    tt = 1
    while tt < tokens and nbytes(tt * 2, hc) <= budget:
        tt *= 2
    tt = min(tt, tokens)
    cores = vector_cores(ctx)
    while ceil_div(tokens, tt) * ceil_div(h, hc) < cores and tt > 1:  # spread small problems over the AIVs
        tt = ceil_div(tt, 2)
    ntiles = ceil_div(tokens, tt) * ceil_div(h, hc)

    args = [ctx.view(y, [tokens, k, h] if dest is None else [tokens * k, h]), ctx.view(w, [tokens, k, 1])]
    if shared is not None:
        args.append(ctx.view(shared, [tokens, 1, h]))
    if dest is not None:
        args.append(ctx.view(dest, [tokens * k, 1]))
    args.append(ctx.view(out, [tokens, 1, h]))
    kb = KernelBuilder(ctx, ctx.name("moe_finalize"), [a.type for a in args], CoreType.AIV, min(cores, ntiles), ctx.current)
    gm_y, gm_w = kb.args[0], kb.args[1]
    gm_sh = kb.args[2] if shared is not None else None
    gm_dest = kb.args[-2] if dest is not None else None
    gm_out = kb.args[-1]
    alloc = kb.alloc
    ub_y = alloc([tt, k, hc], el, MemSpace.UB)
    ub_w = alloc([tt, k, 1], el, MemSpace.UB)
    ub_d = alloc([tt * k, 1], elem(dest), MemSpace.UB) if dest is not None else None
    prod = alloc([tt, k, hc], el, MemSpace.UB)
    prod_w = alloc([tt, k, hc], wide, MemSpace.UB) if wide != el else prod
    tr = alloc([tt, hc, k], wide, MemSpace.UB)
    acc = alloc([tt, hc, 1], wide, MemSpace.UB)
    s_el = alloc([tt, hc, 1], el, MemSpace.UB) if wide != el else acc
    s_t = alloc([tt, 1, hc], el, MemSpace.UB)
    ub_sh = alloc([tt, 1, hc], el, MemSpace.UB) if shared is not None else None
    ub_o = alloc([tt, 1, hc], el, MemSpace.UB) if shared is not None else s_t

    def v(name: str, *a) -> None:
        kb.emit(ascend.vector_op(name)(*a))

    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        (r0, h0), (rsz, hsz) = kb.grid(t, [tokens, h], [tt, hc])
        q_in.acquire()
        if gm_dest is None:
            kb.copy(kb.subview(gm_y, [r0, 0, h0], [rsz, k, hsz]), ub_y)
        else:  # MoeFinalizeRouting: the tile's dest entries, then each token's k rows gathered by them
            # (index and row DMAs all on MTE2, in order, as the row gather kernel's)
            kb.copy(kb.subview(gm_dest, [kb.mul(r0, k), 0], [kb.mul(rsz, k), 1]), kb.subview(ub_d, [0, 0], [kb.mul(rsz, k), 1]))
            with kb.loop(0, rsz, 1) as i:
                kb.emit(ascend.GatherRowsOp(kb.subview(gm_y, [0, h0], [tokens * k, hsz]), kb.subview(ub_d, [kb.mul(i, k), 0], [k, 1]),
                                            kb.subview_keep(ub_y, [i, 0, 0], [1, k, hsz], [1, 2])))
        kb.copy(kb.subview(gm_w, [r0, 0, 0], [rsz, k, 1]), ub_w)
        if gm_sh is not None:
            kb.copy(kb.subview(gm_sh, [r0, 0, h0], [rsz, 1, hsz]), ub_sh)
        q_in.handoff()
        q_out.acquire()
        v("vmul", ub_y, ub_w, prod)  # the elementwise mul in the input type
        if wide != el:  # reduction.lower_reduce: 16-bit sums in f32
            kb.emit(ascend.VcastOp(prod, prod_w))
        kb.emit(ascend.VtransposeOp(prod_w, tr, [0, 2, 1]))
        v("vreduce_sum", tr, acc)
        if wide != el:
            kb.emit(ascend.VcastOp(acc, s_el))
        kb.emit(ascend.VtransposeOp(s_el, s_t, [0, 2, 1]))
        if ub_sh is not None:
            v("vadd", s_t, ub_sh, ub_o)  # the elementwise add in the input type
        q_in.release()
        q_out.handoff()
        kb.copy(ub_o, kb.subview(gm_out, [r0, 0, h0], [rsz, 1, hsz]))
        q_out.release()
    ctx.launch(kb.finish(), args)
    return [out]

