"""Template of `nn.fused {kind = #nn.fused_kind<add_rms_norm>}` (built by fuse-add-rms-norm): a residual add
and the RMSNorm of its sum, ops-transformer's AddRmsNorm:

    %y   = nn.add %x, %r                       x, r [..., C], same shape and element type
    %out = nn.rms_norm %y, %gamma {axis = rank - 1}
    nn.yield %out[, %y]                        y when something after the region reads it
                                               (the next residual add of a transformer layer)

One AIV kernel over tiles of tr whole rows [tr, C] (reduction.py's rows layout):

    prime V->MTE2, MTE3->V;  gamma GM->UB [1, C] once (f32 copy for 16-bit inputs)
    scf.for %t = %block_idx to ceil(rows/tr) step block_dim
      wait V->MTE2;  GM->UB x[r0:, :], r[r0:, :] (MTE2);  set/wait MTE2->V;  wait MTE3->V
      vadd x, r -> y;  y² summed per row, / C, + eps, rsqrt (f32 statistics);  y · rstd · gamma -> out
      set V->MTE2;  set/wait V->MTE3;  UB->GM y[r0:, :] (if yielded), out[r0:, :] (MTE3);  set MTE3->V

What it saves over the unfused pair (an add kernel, then the rms_norm kernel): one launch and
one GM round trip of y (written by the add, read back by the norm: 2·rows·C·size bytes), the
same as CANN's fused kernel. The vector ops and their order are those of the two unfused
kernels (elementwise vadd, reduction.normalize), so the outputs are bit-identical to them.

`match` (what the fusion pass wraps) and `parse` (what the template reads back) live here, so
what is fused is what lowers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.elementwise import MIN_SPLIT_BYTES, UB_FRACTION, vector_cores
from ascendir.conversion.nn_to_ascend.templates.reduction import _wide
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.patterns import fuse_ops

KIND = "add_rms_norm"


def match(add: Operation) -> list[Operation] | None:
    """[add, rms_norm] when `add` sums two tensors of the same shape and element type (no
    broadcast: the residual connection) and an nn.rms_norm over the last axis reads the sum,
    else None. The sum may have other users (it becomes the region's second output)."""
    if not isinstance(add, nn.AddOp) or add.lhs == add.rhs:
        return None
    s = nn.shape_of(add.result)
    if not s or nn.shape_of(add.lhs) != s or nn.shape_of(add.rhs) != s or elem(add.lhs) != elem(add.rhs):
        return None
    norms = [u.operation for u in add.result.uses if isinstance(u.operation, nn.RmsNormOp)]
    norms = [n for n in norms if n.input == add.result and n.parent is add.parent and n.axis.value.data % len(s) == len(s) - 1]
    if len(norms) != 1 or add.result in (norms[0].scale,):
        return None
    return [add, norms[0]]


def fuse(ops: list[Operation]) -> nn.FusedOp:
    """Wrap `match`'s [add, rms_norm] in a region yielding the norm, then the sum when it is read
    after the region."""
    add, norm = ops
    outputs = [norm.results[0]]
    if any(u.operation is not norm for u in add.result.uses):
        outputs.append(add.result)
    return fuse_ops(KIND, ops, outputs)


@dataclass(frozen=True)
class AddRmsNorm:
    """A parsed region over its own values: the two addends, gamma, epsilon, and whether the sum
    is yielded (second output)."""

    x: SSAValue
    r: SSAValue
    gamma: SSAValue
    epsilon: float
    yields_sum: bool


def parse(region: nn.FusedOp) -> AddRmsNorm | None:
    """The AddRmsNorm of a region `fuse` built, or None for another body."""
    block = region.body.block
    ops = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    if len(ops) != 2 or not isinstance(ops[0], nn.AddOp) or not isinstance(ops[1], nn.RmsNormOp):
        return None
    add, norm = ops
    if match(add) != [add, norm] or any(v not in block.args for v in (add.lhs, add.rhs, norm.scale)):
        return None
    ys = list(block.last_op.values)
    if ys not in ([norm.result], [norm.result, add.result]):
        return None
    return AddRmsNorm(add.lhs, add.rhs, norm.scale, norm.epsilon.value.data, len(ys) == 2)


def emit_add_rms_norm(ctx: LoweringContext, x: SSAValue, r: SSAValue, gamma: SSAValue, epsilon: float,
                      yields_sum: bool) -> list[SSAValue]:
    """Launch the kernel of the module docstring on GM buffers x, r [..., C] and gamma (C or 1
    elements); returns [out] or [out, y] (new GM buffers of x's shape and type).

    Raises:
        AscendirError: gamma of another size, or one row that does not fit UB."""
    shp, el = shape(x), elem(x)
    c = shp[-1]
    rows = math.prod(shp) // max(c, 1)
    wide = _wide(el)
    if math.prod(shape(gamma)) not in (1, c):
        raise ctx.error(f"scale of {math.prod(shape(gamma))} elements does not match the normalized size {c}")
    results = [ctx.buffer(shp, el) for _ in range(2 if yields_sum else 1)]
    if rows * c == 0:
        return results

    # UB per tile of n rows: x, r, y, out [n, C] in el; sq [n, C] and stat [n, 1] in wide (+ y in
    # wide for 16-bit inputs); gamma once, raw and (16-bit) widened.
    def nbytes(n: int) -> int:
        full = 4 * round_up(n * c * itemsize(el), 32) + round_up(n * c * itemsize(wide), 32)
        full += round_up(n * itemsize(wide), 32) + (round_up(n * c * itemsize(wide), 32) if wide != el else 0)
        g = math.prod(shape(gamma))
        return full + round_up(g * itemsize(elem(gamma)), 32) + round_up(g * itemsize(wide), 32)

    cap = ctx.target.capacity("ub")
    if nbytes(1) > cap:
        raise ctx.error(f"one row of {c} elements needs {nbytes(1)} bytes of UB, {ctx.target.name} has {cap}")
    budget = max(int(cap * UB_FRACTION), nbytes(1))
    lo, hi = 1, rows
    while lo < hi:  # the most rows per tile within the budget
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if nbytes(mid) <= budget else (lo, mid - 1)
    tn, cores = lo, vector_cores(ctx)
    # the threshold counts the bytes the vector ops work on (16-bit rows are computed in `wide`)
    while ceil_div(rows, tn) < cores and tn * c * itemsize(wide) >= 2 * MIN_SPLIT_BYTES and tn > 1:
        tn = ceil_div(tn, 2)  # enough tiles for every vector core while tiles stay large
    tn = min(tn, ceil_div(rows, ceil_div(rows, tn)))  # even tiles
    ntiles = ceil_div(rows, tn)

    views = [ctx.view(v, [rows, c]) for v in (x, r)] + [ctx.view(gamma, [1, math.prod(shape(gamma))])]
    views += [ctx.view(v, [rows, c]) for v in results]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in views], CoreType.AIV, min(cores, ntiles), ctx.current)
    gm_x, gm_r, gm_g, *gm_outs = kb.args
    ub_x, ub_r, ub_y, ub_out = (kb.alloc([tn, c], el, MemSpace.UB) for _ in range(4))
    sq = kb.alloc([tn, c], wide, MemSpace.UB)
    stat = kb.alloc([tn, 1], wide, MemSpace.UB)
    work = kb.alloc([tn, c], wide, MemSpace.UB) if wide != el else ub_y
    g_raw = kb.alloc(shape(gm_g), elem(gamma), MemSpace.UB)
    kb.copy(gm_g, g_raw)
    kb.handoff(Pipe.MTE2, Pipe.V)
    g = g_raw
    if elem(gamma) != wide:
        g = kb.alloc(shape(gm_g), wide, MemSpace.UB)
        kb.emit(ascend.VcastOp(g_raw, g))

    def v(name: str, *args) -> None:
        kb.emit(ascend.vector_op(name)(*args))

    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        (r0, _), (rsz, _) = kb.grid(t, [rows, c], [tn, c])
        q_in.acquire()
        kb.copy(kb.subview(gm_x, [r0, 0], [rsz, c]), ub_x)
        kb.copy(kb.subview(gm_r, [r0, 0], [rsz, c]), ub_r)
        q_in.handoff()
        q_out.acquire()
        v("vadd", ub_x, ub_r, ub_y)  # y = x + r in the input type, as the unfused add kernel
        if wide != el:
            kb.emit(ascend.VcastOp(ub_y, work))
        # reduction.normalize's rms steps on y (y itself is kept for its store)
        v("vmul", work, work, sq)
        v("vreduce_sum", sq, stat)
        v("vmuls", stat, stat, 1.0 / c)
        v("vadds", stat, stat, epsilon)
        v("vrsqrt", stat, stat)
        if wide == el:
            v("vmul", work, stat, ub_out)
            v("vmul", ub_out, g, ub_out)
        else:
            v("vmul", work, stat, work)
            v("vmul", work, g, work)
            kb.emit(ascend.VcastOp(work, ub_out))
        q_in.release()
        q_out.handoff()
        kb.copy(ub_out, kb.subview(gm_outs[0], [r0, 0], [rsz, c]))
        if yields_sum:
            kb.copy(ub_y, kb.subview(gm_outs[1], [r0, 0], [rsz, c]))
        q_out.release()
    ctx.launch(kb.finish(), views)
    return results
