"""Row-wise vector templates: reduce_*, softmax, layer_norm, rms_norm.

Every op is brought to the form [outer, C, inner] where C is the reduced (or normalized) extent.

* inner == 1 ("rows"): tiles of `tr` whole rows [tr, C] in UB:

      prime V->MTE2, MTE3->V (per slot);   (params: GM->UB [1, C] once, MTE2->V hand-off)
      scf.for %t = %block_idx to ceil(outer/tr) step block_dim
        p = (t / block_dim) mod 2  (scf.if, one copy of the body per slot; p = 0 single-buffered)
        wait V->MTE2[p];  GM->UB x[p] = x[r0:r0+tr, :] (MTE2);  set/wait MTE2->V[p];  wait MTE3->V[p]
        vector ops on [tr, C] (statistics [tr, 1]; f16 inputs computed in f32);  set V->MTE2[p]
        set/wait V->MTE3[p];  UB->GM out[r0:, :] = out[p] (MTE3);  set MTE3->V[p]

  Ping-pong (Ascend C BUFFER_NUM = 2, S2 InitBuffer): when a core runs more than one tile and UB
  holds a second x / out slot next to the single temporaries and parameters, MTE2 loads tile k+1
  into slot p^1 while V computes tile k and MTE3 stores tile k-1; otherwise one slot.

* inner > 1 ("columns", e.g. softmax over axis 1 of [B, H, S], reduce_sum over a middle axis):
  tiles [1, C, ti] are loaded as they lie in GM, turned into rows with `ascend.vtranspose` in UB
  ([1, ti, C]), computed like rows, transposed back and stored.

Reductions over several non-adjacent axes first transpose (a data-movement kernel) the reduced
axes to the end. Whole rows must fit UB; otherwise an AscendirError names the op and the bytes
needed vs available (chunked rows with running statistics are a later improvement).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import bf16, f16, f32
from xdsl.ir import Attribute, Operation, SSAValue

from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize, to_numpy_dtype
from ascendir.conversion.nn_to_ascend.templates.elementwise import MIN_SPLIT_BYTES, UB_FRACTION, emit_fill, vector_cores
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.matmul import DOUBLE_BUFFER, _by_parity

# compute(kb, x tile, param tiles, output tiles, temporaries)
RowCompute = Callable[[KernelBuilder, SSAValue, list[SSAValue], list[SSAValue], list[SSAValue]], None]


@dataclass
class RowSpec:
    """A computation over rows of C elements.

    Attributes:
        compute: emits the vector ops for one tile (rows are the last dim of every tile).
        outs: per output, (full_row, element type): full_row outputs have C columns, others 1.
        temps: per temporary, (full_row, element type).
        params: GM buffers of C (or 1) elements broadcast to every row (scale, bias), loaded
            once per core before the tile loop; `param_temps` gives each an f32 copy if needed.
    """

    compute: RowCompute
    outs: Sequence[tuple[bool, Attribute]]
    temps: Sequence[tuple[bool, Attribute]] = ()
    params: Sequence[SSAValue] = ()
    param_elems: Sequence[Attribute] = field(default_factory=list)


def _v(name: str) -> type:
    return ascend.vector_op(name)


def emit_row_kernel(
    ctx: LoweringContext,
    base: str,
    x: SSAValue,
    outer: int,
    c: int,
    inner: int,
    spec: RowSpec,
    out_shapes: Sequence[Sequence[int]],
) -> list[SSAValue]:
    """Launch one vector kernel applying `spec` to the rows of `x` viewed as [outer, C, inner];
    returns the GM outputs, created with `out_shapes` (element counts outer·C·inner or
    outer·inner).

    Raises:
        AscendirError: when one row (or one 32-byte column group) does not fit UB.
    """
    el = elem(x)
    results = [ctx.buffer(s, e) for s, (_, e) in zip(out_shapes, spec.outs)]
    if outer * c * inner == 0:
        return results
    columns = inner > 1
    ub_cap = ctx.target.capacity("ub")
    cores = vector_cores(ctx)

    # bytes of UB for `n` rows (rows layout) or `n` columns of inner (columns layout)
    row_bufs = [(True, el)] + list(spec.outs) + list(spec.temps)
    if columns:
        row_bufs += [(True, el)] + list(spec.outs)  # transposed copies

    def nbytes(n: int) -> int:
        total = sum(round_up(n * (c if full else 1) * itemsize(e), 32) for full, e in row_bufs)
        total += sum(round_up(math.prod(shape(p)) * itemsize(e), 32) for p, e in zip(spec.params, spec.param_elems))
        total += sum(round_up(math.prod(shape(p)) * itemsize(elem(p)), 32) for p in spec.params)
        return total

    unit = 32 // itemsize(el) if columns else 1  # columns tile in 32-byte groups of inner
    extent = inner if columns else outer
    if nbytes(unit) > ub_cap:
        raise ctx.error(
            f"one {'column group' if columns else 'row'} of {c} elements needs {nbytes(unit)} bytes of UB, "
            f"{ctx.target.name} has {ub_cap} (chunked rows are not implemented yet)"
        )
    budget = max(int(ub_cap * UB_FRACTION), nbytes(unit))
    lo, hi = 1, max(1, ceil_div(extent, unit))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if nbytes(mid * unit) <= budget:
            lo = mid
        else:
            hi = mid - 1
    tn = min(extent, lo * unit)
    groups = outer if columns else 1
    # the split threshold counts the bytes the vector ops work on: a 16-bit row computed in f32
    # costs the vector units what an f32 row does, so it splits over as many cores
    work = max(itemsize(e) for full, e in row_bufs if full)
    while groups * ceil_div(extent, tn) < cores and tn * c * work >= 2 * MIN_SPLIT_BYTES and tn > unit:
        tn = max(unit, round_up(ceil_div(tn, 2), unit))
    tn = min(tn, round_up(ceil_div(extent, ceil_div(extent, tn)), unit))  # even tiles
    ntiles = groups * ceil_div(extent, tn)
    block_dim = min(cores, ntiles)

    x_view = ctx.view(x, [outer, c, inner] if columns else [outer, c])
    out_views = [
        ctx.view(r, ([outer, c if full else 1, inner] if columns else [outer, c if full else 1]))
        for r, (full, _) in zip(results, spec.outs)
    ]
    param_views = [ctx.view(p, [1, math.prod(shape(p))]) for p in spec.params]
    args = [x_view, *param_views, *out_views]
    kb = KernelBuilder(ctx, ctx.name(base), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gm_x = kb.args[0]
    gm_params = kb.args[1 : 1 + len(param_views)]
    gm_outs = kb.args[1 + len(param_views) :]

    lead = [1, tn] if columns else [tn]

    def cols(full: bool) -> int:
        return c if full else 1

    # Ping-pong (S2 InitBuffer BUFFER_NUM = 2) where UB holds a second slot of the buffers the
    # MTE pipes touch (the loaded tile, the stored outputs): MTE2 fills slot p^1 while V works on
    # slot p and MTE3 drains slot p^1's previous tile. The V-only buffers (temporaries, transposed
    # copies, parameters) stay single. A core running one tile keeps one slot.
    slot_bytes = round_up(tn * c * itemsize(el), 32) + sum(round_up(tn * cols(f) * itemsize(e), 32) for f, e in spec.outs)
    nb = DOUBLE_BUFFER if ntiles > block_dim and nbytes(tn) + slot_bytes <= ub_cap else 1

    ub_x = [kb.alloc([1, c, tn] if columns else [tn, c], el, MemSpace.UB) for _ in range(nb)]
    ub_outs_t = [[kb.alloc([1, cols(f), tn] if columns else [*lead, cols(f)], e, MemSpace.UB) for f, e in spec.outs]
                 for _ in range(nb)]
    ub_xt = kb.alloc([*lead, c], el, MemSpace.UB) if columns else None
    ub_outs = [kb.alloc([*lead, cols(f)], e, MemSpace.UB) for f, e in spec.outs] if columns else None
    temps = [kb.alloc([*lead, cols(f)], e, MemSpace.UB) for f, e in spec.temps]

    params: list[SSAValue] = []
    if spec.params:
        raw = [kb.alloc([1, math.prod(shape(p))], elem(p), MemSpace.UB) for p in gm_params]
        for src, dst in zip(gm_params, raw):
            kb.copy(src, dst)
        kb.handoff(Pipe.MTE2, Pipe.V)
        for r, e in zip(raw, spec.param_elems):
            if elem(r) == e:
                params.append(r)
            else:
                wide = kb.alloc(r.type.get_shape(), e, MemSpace.UB)
                kb.emit(ascend.VcastOp(r, wide))
                params.append(wide)
        assert not columns, "row parameters are only used by the rows layout (norms)"

    q_in = [kb.queue(Pipe.MTE2, Pipe.V) for _ in range(nb)]
    q_out = [kb.queue(Pipe.V, Pipe.MTE3) for _ in range(nb)]
    with kb.tiles(ntiles) as t:
        if columns:
            (o, _, i0), (_, _, isz) = kb.grid(t, [outer, c, inner], [1, c, tn])
            src = kb.subview(gm_x, [o, 0, i0], [1, c, isz])
            dsts = [kb.subview(gm, [o, 0, i0], [1, cols(full), isz]) for (full, _), gm in zip(spec.outs, gm_outs)]
        else:
            (r0, _), (rsz, _) = kb.grid(t, [outer, c], [tn, c])
            src = kb.subview(gm_x, [r0, 0], [rsz, c])
            dsts = [kb.subview(gm, [r0, 0], [rsz, cols(full)]) for (full, _), gm in zip(spec.outs, gm_outs)]

        def tile(p: int) -> None:
            x_p, outs_p = ub_x[p], ub_outs_t[p]
            q_in[p].acquire()
            kb.copy(src, x_p)
            q_in[p].handoff()
            q_out[p].acquire()
            if columns:
                kb.emit(ascend.VtransposeOp(x_p, ub_xt, [0, 2, 1]))
                spec.compute(kb, ub_xt, params, ub_outs, temps)
                for a, b in zip(ub_outs, outs_p):
                    kb.emit(ascend.VtransposeOp(a, b, [0, 2, 1]))
            else:
                spec.compute(kb, x_p, params, outs_p, temps)
            q_in[p].release()
            q_out[p].handoff()
            for ub, dst in zip(outs_p, dsts):
                kb.copy(ub, dst)
            q_out[p].release()

        # the slot of the core's k-th tile t = block_idx + k * block_dim is k mod nb
        _by_parity(kb, t, block_dim, nb, tile)
    ctx.launch(kb.finish(), args)
    return results


# ----------------------------------------------------------------------------------------------
# shapes
# ----------------------------------------------------------------------------------------------
def split_axes(shp: Sequence[int], first: int, last: int) -> tuple[int, int, int]:
    """(outer, C, inner) for the contiguous axes first..last of `shp`."""
    return math.prod(shp[:first]), math.prod(shp[first : last + 1]), math.prod(shp[last + 1 :])


def _wide(el: Attribute) -> Attribute:
    """Statistics type: f32 for 16-bit floats (as CANN's norm kernels), else the input type."""
    return f32 if el in (f16, bf16) else el


# ----------------------------------------------------------------------------------------------
# reductions
# ----------------------------------------------------------------------------------------------
_REDUCE = {
    nn.ReduceSumOp: "vreduce_sum",
    nn.ReduceMeanOp: "vreduce_sum",
    nn.ReduceMaxOp: "vreduce_max",
    nn.ReduceMinOp: "vreduce_min",
    nn.ReduceProdOp: "vreduce_prod",
}


def _empty_reduction(kind: type[Operation], dt: np.dtype) -> float:
    """What ONNX reduces an empty set to: the identity of the reduction (sum 0, prod 1, max the
    lowest value: -inf / the integer minimum / false, min the highest), and NaN (0 / 0) for mean."""
    if kind in (nn.ReduceMaxOp, nn.ReduceMinOp):
        if dt == np.bool_:
            lo, hi = 0.0, 1.0
        elif dt.kind in "iu":
            lo, hi = float(np.iinfo(dt).min), float(np.iinfo(dt).max)
        else:
            lo, hi = -math.inf, math.inf
        return lo if kind is nn.ReduceMaxOp else hi
    return {nn.ReduceSumOp: 0.0, nn.ReduceProdOp: 1.0, nn.ReduceMeanOp: math.nan}[kind]


def lower_reduce(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.reduce_* → a row (or column) reduction kernel; non-adjacent axes transpose first."""
    from ascendir.conversion.nn_to_ascend.templates.data_movement import emit_transpose

    x = operands[0]
    res = op.results[0]
    shp = shape(x)
    axes = sorted(op.axes.get_values())
    if not axes:
        return [ctx.view(x, shape(res))]
    if axes != list(range(axes[0], axes[-1] + 1)):
        kept = [d for d in range(len(shp)) if d not in axes]
        x = emit_transpose(ctx, x, kept + axes)
        shp = shape(x)
        axes = list(range(len(kept), len(shp)))
    outer, c, inner = split_axes(shp, axes[0], axes[-1])
    el = elem(x)
    if c == 0:
        return [emit_fill(ctx, "reduce_empty", shape(res), el, _empty_reduction(type(op), to_numpy_dtype(el)))]
    wide = _wide(el) if type(op) in (nn.ReduceSumOp, nn.ReduceMeanOp) else el
    vop = _REDUCE[type(op)]
    mean = isinstance(op, nn.ReduceMeanOp)

    def compute(kb, xt, params, outs, temps):
        src = xt
        if wide != el:
            kb.emit(ascend.VcastOp(xt, temps[0]))
            src = temps[0]
        acc = temps[-1] if wide != el else outs[0]
        kb.emit(_v(vop)(src, acc))
        if mean:
            kb.emit(_v("vmuls")(acc, acc, 1.0 / c))
        if acc is not outs[0]:
            kb.emit(ascend.VcastOp(acc, outs[0]))

    temps = [(True, wide), (False, wide)] if wide != el else []
    spec = RowSpec(compute, outs=[(False, el)], temps=temps)
    base = op.name.split(".", 1)[1]
    return emit_row_kernel(ctx, base, x, outer, c, inner, spec, [shape(res)])


# ----------------------------------------------------------------------------------------------
# softmax
# ----------------------------------------------------------------------------------------------
def lower_softmax(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.softmax: max, subtract, exp, sum, divide over the axis (f16 computed in f32)."""
    x = operands[0]
    shp = shape(x)
    axis = op.axis.value.data % max(len(shp), 1)
    outer, c, inner = split_axes(shp, axis, axis) if shp else (1, 1, 1)
    el = elem(x)
    wide = _wide(el)

    def compute(kb, xt, params, outs, temps):
        mx, s = temps[0], temps[1]
        if wide != el:
            work = temps[2]
            kb.emit(ascend.VcastOp(xt, work))
            src = work
        else:
            work, src = outs[0], xt
        kb.emit(_v("vreduce_max")(src, mx))
        kb.emit(_v("vsub")(src, mx, work))
        kb.emit(_v("vexp")(work, work))
        kb.emit(_v("vreduce_sum")(work, s))
        kb.emit(_v("vdiv")(work, s, work))
        if work is not outs[0]:
            kb.emit(ascend.VcastOp(work, outs[0]))

    temps = [(False, wide), (False, wide)] + ([(True, wide)] if wide != el else [])
    spec = RowSpec(compute, outs=[(True, el)], temps=temps)
    return emit_row_kernel(ctx, "softmax", x, outer, c, inner, spec, [shp])


# ----------------------------------------------------------------------------------------------
# normalization
# ----------------------------------------------------------------------------------------------
def _param(ctx: LoweringContext, p: SSAValue, c: int, what: str) -> SSAValue:
    n = math.prod(shape(p))
    if n not in (1, c):
        raise ctx.error(f"{what} of {n} elements does not match the normalized size {c}")
    return p


def normalize(
    ctx: LoweringContext,
    op: Operation,
    x: SSAValue,
    scale: SSAValue,
    bias: SSAValue | None = None,
    *,
    rms: bool,
    base: str | None = None,
) -> list[SSAValue]:
    """One AIV row kernel (named `base`, default rms_norm / layer_norm) normalizing GM `x` as
    nn.rms_norm / nn.layer_norm `op` does (its axis and epsilon; fp32 statistics for 16-bit
    inputs); returns the new GM buffer of x's shape and type, then, when `op` is a layer_norm
    with the statistics results, the mean and inv_std_dev buffers ([rows, 1] in the kernel).

    Raises:
        AscendirError: a scale / bias whose size is neither 1 nor the normalized size, or a row
            that does not fit UB.
    """
    shp = shape(x)
    axis = op.axis.value.data % max(len(shp), 1)
    outer, c, _ = split_axes(shp, axis, len(shp) - 1)
    eps = op.epsilon.value.data
    el = elem(x)
    wide = _wide(el)
    params = [_param(ctx, scale, c, "scale")] + ([_param(ctx, bias, c, "bias")] if bias is not None else [])
    # layer_norm's optional Mean / InvStdDev results: the [rows, 1] statistics go to GM too.
    stats = list(getattr(op, "stats", ()))

    def compute(kb, xt, prm, outs, temps):
        stat, sq = temps[0], temps[1]
        mean, inv_std = (outs[1], outs[2]) if stats else (stat, stat)
        if wide != el:
            work = temps[2]
            kb.emit(ascend.VcastOp(xt, work))
        else:
            work = xt  # the input tile is ours until q_in.release: normalize it in place
        if not rms:
            kb.emit(_v("vreduce_sum")(work, mean))
            kb.emit(_v("vmuls")(mean, mean, 1.0 / c))
            kb.emit(_v("vsub")(work, mean, work))
        kb.emit(_v("vmul")(work, work, sq))
        kb.emit(_v("vreduce_sum")(sq, inv_std))
        kb.emit(_v("vmuls")(inv_std, inv_std, 1.0 / c))
        kb.emit(_v("vadds")(inv_std, inv_std, eps))
        kb.emit(_v("vrsqrt")(inv_std, inv_std))
        kb.emit(_v("vmul")(work, inv_std, work))
        last = outs[0] if wide == el and len(prm) == 1 else work
        kb.emit(_v("vmul")(work, prm[0], last))
        if len(prm) == 2:
            kb.emit(_v("vadd")(work, prm[1], outs[0] if wide == el else work))
        if wide != el:
            kb.emit(ascend.VcastOp(work, outs[0]))

    temps = [(False, wide), (True, wide)] + ([(True, wide)] if wide != el else [])
    outs = [(True, el)] + [(False, wide)] * len(stats)
    spec = RowSpec(compute, outs=outs, temps=temps, params=params, param_elems=[wide] * len(params))
    base = base or ("rms_norm" if rms else "layer_norm")
    return emit_row_kernel(ctx, base, x, outer, c, 1, spec, [shp] + [shape(r) for r in stats])


def lower_layer_norm(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.layer_norm over axes [axis, rank): statistics in f32 (f64 for f64), written to GM
    as the mean and inv_std_dev results when the op has them."""
    bias = operands[2] if len(operands) > 2 else None
    return normalize(ctx, op, operands[0], operands[1], bias, rms=False)


def lower_rms_norm(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.rms_norm over axes [axis, rank): statistics in f32."""
    return normalize(ctx, op, operands[0], operands[1], rms=True)
