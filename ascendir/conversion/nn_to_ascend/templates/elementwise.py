"""Elementwise template: unary, broadcasting binary, where, cast, comparisons, composite
activations, on the vector cores (AIV on 910B; the AI cores on coupled chips).

Structure of one kernel (single buffered; a double-buffer pass can split every UB buffer and its
queue into ping-pong halves, which is why tiles use at most half of UB):

    prime V->MTE2, MTE3->V
    scf.for %t = %block_idx to ntiles step block_dim        // tiles of [1.., rows, cols]
      wait V->MTE2;  GM->UB (MTE2) each operand's real extent;  set MTE2->V
      wait MTE2->V;  wait MTE3->V
      vector op(s) in UB (V), size-1 operand dims broadcast;    set V->MTE2
      set V->MTE3;   wait V->MTE3
      UB->GM (MTE3) the valid part of the tile;                 set MTE3->V
    drain MTE3->V, V->MTE2

Shapes are canonicalized first: the operands are padded to the result rank and adjacent dims
with the same broadcast pattern are merged (e.g. [B,S,H] + [H] becomes [B*S, H] + [1, H]), so
every kernel sees a low-rank problem; the reshapes are free `ascend.view`s of the GM buffers.
Partial tiles (odd shapes) load zero-padded UB tiles and store only their valid part.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import i1
from xdsl.ir import Attribute, Operation, SSAValue

from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dialects.cast_mode import cast_mode_of
from ascendir.dtypes import itemsize
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div, round_up

# Use at most this fraction of UB per kernel so every buffer can later become a ping-pong pair
# (Ascend C BUFFER_NUM = 2, S2 InitBuffer page).
UB_FRACTION = 0.5
# Split small tensors across more cores only while each tile still moves at least this much: below
# it, per-call DMA start-up (~27 cycles per MTE2 call, S4) and per-core fixed costs dominate.
# Large tensors keep big tiles anyway (the UB budget decides), as S2 recommends GM transfers of
# at least 16 KB. A heuristic until a cost-model tiling pass (choose-tiling) replaces it.
MIN_SPLIT_BYTES = 4 * 1024

# compute(kb, input tiles, output tile, temporaries): emits the vector ops of one tile.
Compute = Callable[[KernelBuilder, list[SSAValue], SSAValue, list[SSAValue]], None]


@dataclass
class VectorMap:
    """An elementwise computation over UB tiles.

    Attributes:
        compute: emits the vector ops for one tile.
        temps: element types of full-tile temporaries `compute` needs.
        small_temps: (shape, element type) of small fixed temporaries (e.g. a [1, 1] zero).
    """

    compute: Compute
    temps: Sequence[Attribute] = ()
    small_temps: Sequence[tuple[tuple[int, ...], Attribute]] = field(default_factory=tuple)


def vector_cores(ctx: LoweringContext) -> int:
    """Cores that run vector kernels: the AIVs on 910B (S1 vector_core_cnt), the AI cores on
    coupled chips (num_aiv equals num_aic there)."""
    return max(1, ctx.target.num_aiv)


def ub_budget(ctx: LoweringContext) -> int:
    return int(ctx.target.capacity("ub") * UB_FRACTION)


# ----------------------------------------------------------------------------------------------
# shape canonicalization and tile choice
# ----------------------------------------------------------------------------------------------
def collapse_broadcast(out: Sequence[int], ins: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent dims with the same broadcast pattern and drop unit result dims.

    Returns the result shape and each operand's shape (size 1 where it broadcasts), both of
    rank ≥ 2 (leading 1s are added), with equal ranks.
    """
    rank = len(out)
    padded = [[1] * (rank - len(s)) + list(s) for s in ins]
    dims = [d for d in range(rank) if out[d] != 1]
    groups: list[list[int]] = []
    for d in dims:
        pattern = tuple(p[d] == 1 for p in padded)
        if groups and tuple(p[groups[-1][-1]] == 1 for p in padded) == pattern:
            groups[-1].append(d)
        else:
            groups.append([d])
    out_c = [math.prod(out[d] for d in g) for g in groups]
    ins_c = [[math.prod(p[d] for d in g) for g in groups] for p in padded]
    while len(out_c) < 2:
        out_c.insert(0, 1)
        for s in ins_c:
            s.insert(0, 1)
    return out_c, ins_c


def choose_tile(
    out: Sequence[int],
    ins: Sequence[Sequence[int]],
    in_elems: Sequence[Attribute],
    out_elem: Attribute,
    temps: Sequence[Attribute],
    budget: int,
    cores: int,
    fixed_bytes: int = 0,
) -> list[int]:
    """Tile [1, ..., rows, cols] of the result such that every operand tile (its real extent),
    the result tile and the temporaries fit `budget` bytes of UB, split further while fewer
    tiles than `cores` exist and each would still move ≥ MIN_SPLIT_BYTES.

    Raises:
        ValueError: when not even one aligned column group fits.
    """
    rows, cols = out[-2], out[-1]
    bufs: list[tuple[int, bool, bool]] = []  # (bytes per element, real rows, real cols)
    for s, e in zip(ins, in_elems):
        bufs.append((itemsize(e), s[-2] != 1, s[-1] != 1))
    for e in (out_elem, *temps):
        bufs.append((itemsize(e), True, True))

    def nbytes(tr: int, tc: int) -> int:
        return fixed_bytes + sum(
            round_up(b * (tr if r else 1) * (tc if c else 1), 32) for b, r, c in bufs
        )

    col_align = max(32 // b for b, _, c in bufs if c) if any(c for _, _, c in bufs) else 1
    tc = cols
    if nbytes(1, tc) > budget:
        per_col = sum(b for b, _, c in bufs if c)
        tc = (budget - nbytes(1, 0)) // per_col // col_align * col_align
        if tc <= 0:
            raise ValueError(f"a {col_align}-column tile needs more than {budget} bytes of UB")
        while tc > col_align and nbytes(1, tc) > budget:
            tc -= col_align
    lo, hi = 1, rows
    while lo < hi:  # largest tr with nbytes(tr, tc) <= budget
        mid = (lo + hi + 1) // 2
        if nbytes(mid, tc) <= budget:
            lo = mid
        else:
            hi = mid - 1
    tr = lo

    outer = math.prod(out[:-2])
    out_bytes = itemsize(out_elem)
    while outer * ceil_div(rows, tr) * ceil_div(cols, tc) < cores and tr * tc * out_bytes >= 2 * MIN_SPLIT_BYTES:
        if tr > 1:
            tr = ceil_div(tr, 2)
        elif tc > col_align:
            tc = max(col_align, round_up(ceil_div(tc, 2), col_align))
        else:
            break
    # Even out the tiles: the same number of tiles, none much smaller than the others.
    tr = ceil_div(rows, ceil_div(rows, tr))
    tc = min(tc, round_up(ceil_div(cols, ceil_div(cols, tc)), col_align))
    return [1] * (len(out) - 2) + [tr, tc]


# ----------------------------------------------------------------------------------------------
# the generic kernel
# ----------------------------------------------------------------------------------------------
def emit_vector_map(
    ctx: LoweringContext,
    base: str,
    inputs: Sequence[SSAValue],
    out_shape: Sequence[int],
    out_elem: Attribute,
    vmap: VectorMap,
) -> SSAValue:
    """Launch one vector kernel computing `vmap` elementwise (with broadcasting) over GM
    `inputs`; returns the new GM result buffer of `out_shape` × `out_elem`.

    Raises:
        AscendirError: when no tile fits UB.
    """

    def compute(kb: KernelBuilder, ins: list[SSAValue], outs: list[SSAValue], temps: list[SSAValue]) -> None:
        vmap.compute(kb, ins, outs[0], temps)

    return emit_vector_kernel(ctx, base, inputs, out_shape, [out_elem], compute, vmap.temps, vmap.small_temps)[0]


def emit_vector_kernel(
    ctx: LoweringContext,
    base: str,
    inputs: Sequence[SSAValue],
    out_shape: Sequence[int],
    out_elems: Sequence[Attribute],
    compute: Callable[[KernelBuilder, list[SSAValue], list[SSAValue], list[SSAValue]], None],
    temps: Sequence[Attribute] = (),
    small_temps: Sequence[tuple[tuple[int, ...], Attribute]] = (),
) -> list[SSAValue]:
    """Launch one vector kernel over tiles of `out_shape`: each tile of every GM input is loaded
    into UB once (MTE2), `compute(kb, input tiles, output tiles, temporaries)` emits the vector
    ops, and each output tile (one per element type of `out_elems`, all of `out_shape`) is
    stored once (MTE3). Returns the new GM result buffers.

    Raises:
        AscendirError: when no tile fits UB.
    """
    results = [ctx.buffer(out_shape, e) for e in out_elems]
    if math.prod(out_shape) == 0:
        return results
    unique: list[SSAValue] = []
    for v in inputs:
        if v not in unique:
            unique.append(v)
    out_c, ins_c = collapse_broadcast(out_shape, [shape(v) for v in unique])
    small = sum(round_up(math.prod(s) * itemsize(e), 32) for s, e in small_temps)
    try:
        tile = choose_tile(
            out_c, ins_c, [elem(v) for v in unique], out_elems[0], [*out_elems[1:], *temps], ub_budget(ctx),
            vector_cores(ctx), small,
        )
    except ValueError as e:
        raise ctx.error(str(e)) from None
    ntiles = math.prod(ceil_div(s, t) for s, t in zip(out_c, tile))
    block_dim = min(vector_cores(ctx), ntiles)

    args = [ctx.view(v, s) for v, s in zip(unique, ins_c)] + [ctx.view(r, out_c) for r in results]
    kb = KernelBuilder(ctx, ctx.name(base), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gm_ins, gm_outs = kb.args[: len(unique)], kb.args[len(unique):]
    ub_ins = [
        kb.alloc([t if s != 1 else 1 for s, t in zip(s_in, tile)], elem(v), MemSpace.UB)
        for s_in, v in zip(ins_c, unique)
    ]
    ub_outs = [kb.alloc(tile, e, MemSpace.UB) for e in out_elems]
    ub_temps = [kb.alloc(tile, e, MemSpace.UB) for e in temps]
    ub_temps += [kb.alloc(s, e, MemSpace.UB) for s, e in small_temps]
    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        offsets, sizes = kb.grid(t, out_c, tile)
        q_in.acquire()
        for src, s_in, dst in zip(gm_ins, ins_c, ub_ins):
            off = [o if d != 1 else 0 for o, d in zip(offsets, s_in)]
            size = [z if d != 1 else 1 for z, d in zip(sizes, s_in)]
            kb.copy(kb.subview(src, off, size), dst)
        q_in.handoff()
        q_out.acquire()
        compute(kb, [ub_ins[unique.index(v)] for v in inputs], ub_outs, ub_temps)
        q_in.release()
        q_out.handoff()
        for ub, gm in zip(ub_outs, gm_outs):
            kb.copy(ub, kb.subview(gm, offsets, sizes))
        q_out.release()
    ctx.launch(kb.finish(), args)
    return results


def emit_fill(ctx: LoweringContext, base: str, out_shape: Sequence[int], out_elem: Attribute, value: float) -> SSAValue:
    """Launch a vector kernel that fills a new GM buffer of `out_shape` × `out_elem` with `value`
    (vdup per UB tile, then MTE3); returns the buffer."""

    def compute(kb: KernelBuilder, ins: list[SSAValue], out: SSAValue, temps: list[SSAValue]) -> None:
        kb.emit(ascend.VdupOp(out, value))

    return emit_vector_map(ctx, base, [], out_shape, out_elem, VectorMap(compute))


# ----------------------------------------------------------------------------------------------
# nn op → vector recipe
# ----------------------------------------------------------------------------------------------
UNARY = {
    nn.ReluOp: "vrelu", nn.SigmoidOp: "vsigmoid", nn.SiluOp: "vsilu", nn.TanhOp: "vtanh", nn.ExpOp: "vexp",
    nn.LogOp: "vln", nn.SqrtOp: "vsqrt", nn.RsqrtOp: "vrsqrt", nn.ReciprocalOp: "vrec", nn.NegOp: "vneg",
    nn.AbsOp: "vabs", nn.ErfOp: "verf", nn.SinOp: "vsin", nn.CosOp: "vcos", nn.FloorOp: "vfloor",
    nn.CeilOp: "vceil", nn.NotOp: "vnot",
}
BINARY = {
    nn.AddOp: "vadd", nn.SubOp: "vsub", nn.MulOp: "vmul", nn.DivOp: "vdiv", nn.PowOp: "vpow", nn.MaxOp: "vmax",
    nn.MinOp: "vmin", nn.ModOp: "vmod", nn.FmodOp: "vfmod", nn.AndOp: "vand", nn.OrOp: "vor",
}
COMPARE = {nn.EqualOp: "eq", nn.LessOp: "lt", nn.LessEqualOp: "le", nn.GreaterOp: "gt", nn.GreaterEqualOp: "ge"}
# Every nn op with a vector recipe (`vector_map_of`): what one vector kernel can compute.
ELEMENTWISE: tuple[type[Operation], ...] = (
    *UNARY, *BINARY, *COMPARE, nn.GeluOp, nn.LeakyReluOp, nn.ClipOp, nn.WhereOp, nn.CastOp,
)
ACTIVATIONS = {nn.ReluOp: "vrelu", nn.SiluOp: "vsilu", nn.SigmoidOp: "vsigmoid", nn.TanhOp: "vtanh"}


def activation_op(op: Operation) -> str:
    """Vector op name of an activation nn op (GELU picks the erf or tanh form)."""
    if isinstance(op, nn.GeluOp):
        return "vgelu_tanh" if op.approximate.data == "tanh" else "vgelu"
    return UNARY[type(op)]


def emit_activation(kb: KernelBuilder, act: str, src: SSAValue, dst: SSAValue) -> None:
    """dst = act(src) on UB tiles; `act` is a vector op name, or "vrelu6" (ReLU6 = ONNX Clip(x, 0,
    6): vmaxs then vmins)."""
    if act == "vrelu6":
        kb.emit(ascend.vector_op("vmaxs")(src, dst, 0.0))
        kb.emit(ascend.vector_op("vmins")(dst, dst, 6.0))
    else:
        kb.emit(ascend.vector_op(act)(src, dst))


def _unary(opname: str) -> VectorMap:
    def compute(kb: KernelBuilder, ins: list[SSAValue], out: SSAValue, temps: list[SSAValue]) -> None:
        kb.emit(ascend.vector_op(opname)(ins[0], out))

    return VectorMap(compute)


def _binary(opname: str) -> VectorMap:
    def compute(kb: KernelBuilder, ins: list[SSAValue], out: SSAValue, temps: list[SSAValue]) -> None:
        kb.emit(ascend.vector_op(opname)(ins[0], ins[1], out))

    return VectorMap(compute)


def _leaky_relu(alpha: float, dtype: Attribute) -> VectorMap:
    if 0.0 <= alpha <= 1.0:
        # max(x, alpha*x) for 0 <= alpha <= 1: two cheap ops instead of a compare + select.
        def compute(kb, ins, out, temps):
            kb.emit(ascend.vector_op("vmuls")(ins[0], temps[0], alpha))
            kb.emit(ascend.vector_op("vmax")(ins[0], temps[0], out))

        return VectorMap(compute, temps=[dtype])

    def compute_sel(kb, ins, out, temps):
        scaled, mask, zero = temps
        kb.emit(ascend.vector_op("vmuls")(ins[0], scaled, alpha))
        kb.emit(ascend.VdupOp(zero, 0.0))
        kb.emit(ascend.VcmpOp("ge", ins[0], zero, mask))
        kb.emit(ascend.VselOp(mask, ins[0], scaled, out))

    return VectorMap(compute_sel, temps=[dtype, i1], small_temps=[((1, 1), dtype)])


def _clip(lo: float | None, hi: float | None) -> VectorMap:
    def compute(kb, ins, out, temps):
        src = ins[0]
        if lo is None and hi is None:
            kb.emit(ascend.vector_op("vcopy")(src, out))
        if lo is not None:
            kb.emit(ascend.vector_op("vmaxs")(src, out, lo))
            src = out
        if hi is not None:
            kb.emit(ascend.vector_op("vmins")(src, out, hi))

    return VectorMap(compute)


def vector_map_of(op: Operation) -> VectorMap | None:
    """The recipe of an elementwise nn op, or None if `op` is not elementwise."""
    t = type(op)
    if isinstance(op, nn.GeluOp):
        return _unary(activation_op(op))
    if t in UNARY:
        return _unary(UNARY[t])
    if t in BINARY:
        return _binary(BINARY[t])
    if t in COMPARE:
        pred = COMPARE[t]

        def compute_cmp(kb, ins, out, temps):
            kb.emit(ascend.VcmpOp(pred, ins[0], ins[1], out))

        return VectorMap(compute_cmp)
    if isinstance(op, nn.WhereOp):

        def compute_sel(kb, ins, out, temps):
            kb.emit(ascend.VselOp(ins[0], ins[1], ins[2], out))

        return VectorMap(compute_sel)
    if isinstance(op, nn.CastOp):
        mode = cast_mode_of(op)

        def compute_cast(kb, ins, out, temps):
            kb.emit(ascend.VcastOp(ins[0], out, *mode))

        return VectorMap(compute_cast)
    if isinstance(op, nn.LeakyReluOp):
        return _leaky_relu(op.alpha.value.data, elem(op.input))
    if isinstance(op, nn.ClipOp):
        return _clip(
            op.min.value.data if op.min is not None else None, op.max.value.data if op.max is not None else None
        )
    return None


def emit_elementwise(ctx: LoweringContext, op: Operation, vmap: VectorMap, operands: list[SSAValue]) -> list[SSAValue]:
    """An elementwise nn op as one vector kernel running `vmap` (its `vector_map_of`); a cast to
    its own type is the operand itself."""
    res = op.results[0]
    base = op.name.split(".", 1)[1]
    if isinstance(op, nn.CastOp) and elem(op.input) == elem(res):
        return operands
    return [emit_vector_map(ctx, base, operands, shape(res), elem(res), vmap)]
