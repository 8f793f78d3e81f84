"""MatMul on the Cube: batched, broadcasting `nn.matmul` (and its fused epilogue stages).

One kernel, `block_dim = min(num_aic, #output tiles)`; output tiles (batch, mTile, nTile) are
assigned block-cyclically. Per tile, single buffered (each queue is an Ascend C TQue with one
slot; a double-buffer pass can give L1/L0 two slots and a second event-id pair):

    prime MTE1->MTE2 (L1 free), M->MTE1 (L0A/L0B free), FIX->M (L0C free)
    scf.for %t = %block_idx to ntiles step block_dim
      wait FIX->M                                           // L0C may be overwritten
      scf.for %k1 = 0 to K step kL1                         // L1 holds kL1 of K
        wait MTE1->MTE2;  GM->L1 A[baseM, kL1], B[kL1, baseN] (MTE2, nd2nz, zero-padded)
        set/wait MTE2->MTE1
        scf.for %kk = 0 to min(kL1, K-k1) step baseK
          wait M->MTE1;  L1->L0A, L1->L0B (MTE1);  set/wait MTE1->M
          mmad L0A x L0B -> L0C (M), init on the first k     // scf.if (k1+kk == 0)
          set M->MTE1
        set MTE1->MTE2
      set/wait M->FIX;  L0C->GM (FIX, nz2nd, f32->f16, optional relu);  set FIX->M
    drain the three WAR flags

FixPipe overlap (`_CubeKernel._tile_halves`, where `tiling.fixpipe_halves` allows: FixPipe, no
split-K, bn % 32 == 0, N a multiple of bn, no bias row, and the FixPipe time it hides exceeds the
extra mmad start-ups): the single L0C accumulator would make
every tile's FixPipe copy stall the cube. Instead the first and the last L1 chunk of a tile run
their L0 steps on the left column half of L0C, then on the right one, each half with its own
M <-> FIX event pair: the left half leaves while the cube computes the right one, and the next
tile starts on the left half while FixPipe drains the right one (catlass MmadAtlasA2Pingpong gets
this overlap from the unit flag; the interpreter models no unit flag, the halves reach it with
plain flags). Each element accumulates the same K sequence: numerics unchanged.

Output path by architecture: FixPipe on dav-c220 (910B); on dav-c100 (910A, no FixPipe)
L0C->UB by the vector pipe (V), then UB->GM by MTE3, with M->V / V->M and V->MTE3 / MTE3->V.

Tiles: base tiles are multiples of 16 (M, N) and of 32 B / element size (K: 16 for f16, 8 for
f32) (S3 alignment table), defaulting to baseM = baseN = 128 and baseK = 128 (f16) / 64 (f32),
shrunk until A, B, C tiles take at most half of L0A / L0B / L0C and the L1 chunks half of L1
(the other halves are for ping-pong). Odd shapes are padded: GM subviews have boundary sizes
`min(tile, dim - off)`, the on-chip tiles stay full size and `ascend.copy` zero-fills them, and
mmad always runs on the full static tile.

Tiling from choose-tiling (conversion/nn_to_ascend/tiling.py, searched by transforms/nn/choose_tiling.py): an `ascend.tiling` attribute on the
nn.matmul (set by the pass, IR text, or `--tiling`) replaces the heuristic above: base m/n/k,
l1_depth (k_l1 = l1_depth * k), split_k (work items = splits x output tiles, split outermost; each
writes its f32 partial [M, N] into a GM workspace [splits*M, N], and `_emit_split_k_reduce` adds
them on the AIVs and casts) and swizzle (`_tile_coords`: groups of `swizzle` tile rows visited
column by column, so concurrently running blocks share B panels in L2). Ping-pong slots follow the
parity of the core's running L1-chunk (L0-step) count, not of the loop index alone, whenever a
tile has an odd number of chunks (steps).

Tail split (tiling field tail_split = f, tiling.tail_geometry / tail_misfit; catlass
TailSplitK): the work list is the whole-K tiles of the full waves, then the tiles of the last,
partial wave each as f K ranges of whole L1 chunks (split-major, so a core's ranges differ in
length as little as whole chunks allow). A range's f32 partial leaves L0C through FixPipe in
`tiling.tail_piece` pieces (by column halves where `_tile_halves` runs, `_tail_item`) into a GM
workspace; `_emit_tail_reduce` then sums each tail tile's ranges on the AIVs, reading every
piece exactly as it was written (L2 hits), and casts it into C. tiling.estimate scores it (the
whole waves, then each core's ranges, the pieces' FixPipe start-ups, the reduction kernel) and
the search offers it on prefetching tilings without the A warm-up (tiling.TAIL_SPLIT_CHOICES:
where first-read misses of the cores that start tile rows, not the partial wave, set the
kernel's end, splitting the wave gains nothing).

L2 prefetch (tiling field prefetch = 1, chosen by choose-tiling's cost model where the AICs would
stream B from HBM at their 32 B/cycle DDR path, S1: decode GEMVs, prefill projections): the kernel
becomes a mix kernel whose two AIVs read each B chunk GM -> UB just ahead of the AIC (`_Prefetch`),
so the AIC's nd2nz load of it hits L2 (110 B/cycle, S1) -- the in-kernel form of the vendor's
weight prefetch (torch_npu.npu_prefetch; vllm-ascend weight_prefetch). Numerics are unchanged.

A warm-up (with prefetch, where tiling._warm_a_cycles puts it in: items that do not make whole
waves, a core's items within the L2 residency window, the A chunk in UB beside the B chunk):
the activations A are read first by whichever AIC gets there first, at the 32 B/cycle DDR path,
so the few cores that start a tile row pay every first read of it and end last (910B2
512x4096x4096 fp16: 3-tile cores ended 59.2-64.2 us apart by 5 us; every read an L2 hit: 106.8 K
cycles instead of 115.6 K). The cores with one item fewer have an item of slack: their AIVs
read every A chunk once at the kernel's start (`_Prefetch.warm_a`), the AICs of the other cores
read B before A (so their first A read comes after the warm-up's, while the slack cores' AICs
read A first and take the kernel's first miss), and every AIC reads its first B chunk itself
(`_Prefetch.first`). Numerics are unchanged (scratch reads; the load order within a chunk).

Weights in NZ (`b_nz`, tiling.nz_weight): a B that is a constant weight only matmuls read is
stored in NZ fractals in GM, converted once at compile time as CANN converts constant weights to
FRACTAL_NZ (TransData folded into the constant at graph build; torch_npu.npu_format_cast), so its
GM -> L1 loads are plain DMAs of whole fractals (`#ascend.layout<nz>`: the plain MTE2 head, not
the 210-cycle nd2nz one, S4). Arrays stay logical in the interpreter: numerics are unchanged.

Batch: when B has no batch dims (weights), the batch is folded into M ([..., M, K] viewed as
[prod*M, K]), as CANN's MatMul does; otherwise each output batch maps to its A and B batch by
the broadcast rule, computed with index arithmetic in the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, f32, i8, i32
from xdsl.ir import Attribute, Operation, SSAValue

from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import FLAG_UNITS_ATTR, CoreType, FlagUnitsAttr, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.conversion.nn_to_ascend.templates.elementwise import MIN_SPLIT_BYTES, emit_activation
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, Queue, ceil_div, round_up
from ascendir.conversion.nn_to_ascend.templates.matmul_layout import MatmulLayout, matmul_layout
from ascendir.conversion.nn_to_ascend.templates.epilogue import Epilogue
from ascendir.conversion.nn_to_ascend.tiling import (
    REDUCE_TILE, TILING_ATTR, Problem, Tiling, fixpipe_halves, misfit, prefetch_fits, tail_geometry, tail_misfit, tail_piece,
    tiling_for_op, warms_a,
)

# Default base tile (Ascend C Tiling's usual baseM = baseN = 128, baseK = 64 KiB / ...).
BASE_MN = 128
# baseN of 256 halves the A bytes loaded per flop (the kernel is GM/L2-bound at 128 x 128: each
# 128 x 128 x 64 f16 step moves 32 KiB through MTE2 for 256 mmad cycles, S1 rates); 128 x 256 f32
# fills L0C (128 KiB, S1), which holds one accumulator (L0C is not ping-ponged; its column halves
# overlap FixPipe with the cube, `_tile_halves`).
BASE_N = 256
BASE_K_BYTES = 128  # baseK * element size: 64 for f16 (L0B slot 64 x 256 x 2 = 32 KiB = half of L0B)
L0C_FRACTION = 1.0  # one L0C accumulator per core
MAX_STEP_K = 4  # baseK blocks per L1 load (amortizes the ~210-cycle nd2nz start-up, S4)
# L1 and L0A/L0B slots per queue: 2 = ping-pong (S2 InitBuffer BUFFER_NUM = 2); heuristic_tiling keeps
# each slot within BUFFER_FRACTION of its buffer so both fit.
DOUBLE_BUFFER = 2
# Splitting tiles to feed idle AICs stops at one fractal (16 rows / columns, S1 DtypeMKN): small-M
# products are GM-bound, and every extra AIC brings its own 32 B/cycle GM->L1 path (S1 ini).
MIN_SPLIT_MN = 16
# Fraction of each on-chip buffer one tile may use (the rest is for ping-pong, S2 InitBuffer).
BUFFER_FRACTION = 0.5
ACTIVATIONS = ("vrelu", "vrelu6", "vgelu", "vgelu_tanh", "vsilu")
# L2 prefetch of B (`_Prefetch`): B chunks each AIV may read ahead of the AIC's loads. Cross-core
# flags count pending sets (up to 16, S2 CrossCoreSetFlag); 4 per AIV keeps 8 chunks (< 2 MiB)
# in flight, far inside the L2 residency window (interpreter/timing/l2.py).
PREFETCH_SLOTS = 4


def k_align(el: Attribute) -> int:
    """K alignment in elements: 32 B / element size (S3)."""
    return max(1, 32 // itemsize(el))


def heuristic_tiling(
    ctx: LoweringContext, m: int, n: int, k: int, el: Attribute, bias_el: Attribute | None = None, batch: int = 1,
    out_elem: Attribute | None = None, epilogue: Epilogue | None = None,
) -> Tiling:
    """Base tiles for `batch` [m, k] x [k, n] products of element type `el` on ctx.target (with
    room in L1 for a bias row of `bias_el` when given). With `out_elem`, the output stage's
    buffers (the bias row in BT, the epilogue's UB tiles for `epilogue`: tiling.buffer_needs)
    must fit too: the output tile shrinks (the larger of baseM / baseN first) until they do.

    When there are fewer output tiles than AICs (small M, as in decoding), the larger of baseM /
    baseN is halved (down to MIN_SPLIT_MN) to spread the work, as long as each tile still moves at least
    MIN_SPLIT_BYTES of A and B from GM.

    Raises:
        AscendirError: when not even 16 x 16 x k_align tiles fit the target's buffers.
    """
    t = ctx.target
    es, ka = itemsize(el), k_align(el)
    bm = min(BASE_MN, round_up(m, 16))
    bn = min(BASE_N, round_up(n, 16))
    bk = min(BASE_K_BYTES // es, round_up(k, ka))

    def fits(cap: str, nbytes: int) -> bool:
        return nbytes <= t.capacity(cap) * BUFFER_FRACTION

    while bm * bn * 4 > t.capacity("l0c") * L0C_FRACTION:
        if bm >= bn and bm > 16:
            bm = round_up(bm // 2, 16)
        elif bn > 16:
            bn = round_up(bn // 2, 16)
        else:
            raise ctx.error(f"a 16x16 fp32 tile does not fit L0C of {t.name}")
    while not (fits("l0a", bm * bk * es) and fits("l0b", bk * bn * es)):
        if bk > ka:
            bk = round_up(bk // 2, ka)
        else:
            raise ctx.error(f"a {bm}x{bk} tile does not fit L0A/L0B of {t.name}")
    while batch * ceil_div(m, bm) * ceil_div(n, bn) < t.num_aic:
        d = "n" if bn >= bm else "m"
        size = bn if d == "n" else bm
        if size <= MIN_SPLIT_MN or (bm + bn - size // 2) * k * es < MIN_SPLIT_BYTES:
            break
        if d == "n":
            bn = round_up(bn // 2, 16)
        else:
            bm = round_up(bm // 2, 16)
    bias_bytes = bn * itemsize(bias_el) if bias_el is not None else 0
    step = min(MAX_STEP_K, ceil_div(k, bk))
    while step > 1 and not fits("l1", (bm + bn) * step * bk * es + bias_bytes):
        step -= 1
    if not fits("l1", (bm + bn) * bk * es + bias_bytes):
        raise ctx.error(f"matmul tiles {bm}x{bk} and {bk}x{bn} do not fit L1 of {t.name}")
    if out_elem is None:
        return Tiling(bm, bn, bk, step)
    e = epilogue or Epilogue()
    p = Problem(
        batch, m, n, k, str(el), itemsize(out_elem), itemsize(bias_el) if bias_el is not None else 0, e != Epilogue(),
        act=e.activation, residual=e.residual is not None,
        channel_bias=itemsize(elem(e.channel_bias)) if e.channel_bias is not None else 0,
    )
    # the output stage's buffers grow with the output tile only: shrinking it keeps L0/L1 fitting
    while (bad := misfit(p, Tiling(bm, bn, bk, step), t)) is not None:
        if bm <= 16 and bn <= 16:
            space, need, cap = bad
            raise ctx.error(f"a 16x16 output tile needs {need} bytes of {space.upper()}, {t.name} has {cap}")
        if bn >= bm and bn > 16 or bm <= 16:
            bn = round_up(bn // 2, 16)
        else:
            bm = round_up(bm // 2, 16)
    return Tiling(bm, bn, bk, step)


def _batch_index(kb: KernelBuilder, b: Index, out_b: Sequence[int], in_b: Sequence[int]) -> Index:
    """Flat batch index of an operand whose batch shape `in_b` broadcasts to `out_b` (both
    collapsed to the same rank), for flat output batch `b`."""
    idx: Index = 0
    stride = 1
    rest = b
    for d in reversed(range(len(out_b))):
        i_d = kb.rem(rest, out_b[d]) if d > 0 else rest
        rest = kb.div(rest, out_b[d]) if d > 0 else 0
        if in_b[d] != 1:
            idx = kb.add(idx, kb.mul(i_d, stride))
            stride *= in_b[d]
    return idx


def emit_matmul(
    ctx: LoweringContext,
    a: SSAValue,
    b: SSAValue,
    out_shape: Sequence[int],
    out_elem: Attribute,
    epilogue: Epilogue = Epilogue(),
    base: str = "matmul",
    tiling: Tiling | None = None,
    b_nz: bool = False,
) -> SSAValue:
    """Launch the cube kernel for `a @ b` (numpy matmul rule) with an optional epilogue;
    returns the new GM result buffer.

    Args:
        a: GM buffer [..., M, K] (or [K]); b: GM buffer [..., K, N] (or [K]); f16, bf16 or f32.
        out_shape, out_elem: the nn result type.
        epilogue: bias row, activation and residual applied before the tile leaves the core.
        tiling: the tiling to use (from choose-tiling's `ascend.tiling`, checked to fit by the
            caller); None: the `heuristic_tiling`.
        b_nz: b is a constant weight stored in NZ fractals (tiling.nz_weight, the caller's
            Problem.b_nz): its GM -> L1 loads are plain DMAs of fractals (`#ascend.layout<nz>`).

    Raises:
        AscendirError: integer or mixed operand types, fp32 or bf16 on a cube without them
            (910A), tiles that do not fit the target, or split-K with an epilogue.
    """
    return emit_matmuls(ctx, a, [Product(b, tuple(out_shape), out_elem, epilogue)], base, tiling, b_nz)[0]


@dataclass(frozen=True)
class Product:
    """One `a @ b` of a (grouped) matmul kernel: b, the nn result type and the epilogue."""

    b: SSAValue
    out_shape: tuple[int, ...]
    out_elem: Attribute
    epilogue: Epilogue = Epilogue()


def emit_matmuls(
    ctx: LoweringContext,
    a: SSAValue,
    products: Sequence[Product],
    base: str = "matmul",
    tiling: Tiling | None = None,
    b_nz: bool = False,
) -> list[SSAValue]:
    """Launch ONE cube kernel computing `a @ p.b` for every product p (see emit_matmul); returns
    their new GM result buffers.

    With several products (the projections of one activation: Q/K/V, gate/up), their output
    tiles form a single block-cyclic work list, so no core idles at the end of one projection
    while another still has tiles, and there is one launch instead of len(products). Several
    products must each have a 2-D b with the same K, one output type, and at most a bias row
    as epilogue (all biases of one type).

    `b_nz`: every product's b is stored in NZ fractals (see emit_matmul).

    Raises:
        AscendirError: as emit_matmul; a grouped product outside the restrictions above.
    """
    el, lay, ns = _check_products(ctx, a, products)
    grouped = len(products) > 1
    results = [ctx.buffer(p.out_shape, p.out_elem) for p in products]
    if any(math.prod(p.out_shape) == 0 for p in products):
        if grouped:
            raise ctx.error("a grouped matmul needs non-empty products")
        return results
    bias_el = next((elem(p.epilogue.bias) for p in products if p.epilogue.bias is not None), None)
    if tiling is None:
        tiling = heuristic_tiling(
            ctx, lay.m_rows, max(ns), lay.k, el, bias_el, lay.batch * len(products), products[0].out_elem, products[0].epilogue
        )
    g = _Geometry.of(ctx, tiling, lay, ns, grouped or products[0].epilogue != Epilogue(), el, products[0].out_elem)
    if g.splits > 1 and el == i8:  # the split-K workspace and its reduce are f32
        raise ctx.error(f"tiling {tiling.text()}: an int8 matmul cannot split K")
    outs = list(results)
    if g.splits > 1:  # partial sums: f32 workspace [splits * batch * M, N] in GM
        outs = [ctx.buffer([g.splits * lay.batch * lay.m_rows, ns[0]], f32)]
    # tail_split: the f32 partial tile of tail item u at rows [u * bm, (u + 1) * bm)
    ws = ctx.buffer([g.tail * g.tail_f * g.bm, g.bn], f32) if g.tail else None
    kernel = _CubeKernel(ctx, a, products, outs, lay, ns, g, base, ws)
    kernel.b_layout = "nz" if b_nz else "nd2nz"
    if tiling.prefetch:  # choose-tiling checked it for the site's problem; the kernel must agree
        p = Problem(lay.batch, lay.m_rows, sum(ns), lay.k, str(el), itemsize(kernel.out_elem))
        if not prefetch_fits(p, tiling, ctx.target):
            raise ctx.error(f"tiling {tiling.text()}: this matmul cannot prefetch B on the AIVs (the B chunk overflows UB)")
        kernel.prefetch = True
        # the warm-up of A on the idle cores' AIVs, as the cost model decides it for this matmul
        ep = products[0].epilogue
        kernel.warm_a = warms_a(
            Problem(lay.batch, lay.m_rows, sum(ns), lay.k, str(el), itemsize(kernel.out_elem),
                    itemsize(elem(ep.bias)) if ep.bias is not None else 0, ep != Epilogue(), math.prod(lay.a_batch),
                    math.prod(lay.b_batch), ep.activation, ep.residual is not None, b_nz=b_nz), tiling, ctx.target)
    kernel.emit()
    if g.splits > 1:
        _emit_split_k_reduce(ctx, outs[0], results[0], g.splits, lay.batch * lay.m_rows * ns[0], products[0].out_elem)
    if ws is not None:
        _emit_tail_reduce(ctx, ws, results[0], g, lay.m_rows, ns[0], tiling)
    return results


def _check_products(ctx: LoweringContext, a: SSAValue, products: Sequence[Product]) -> tuple[Attribute, MatmulLayout, list[int]]:
    """(operand element type, the layout of a @ products[0].b, N of each product) after checking
    the operand types, the cube's dtypes and a group's restrictions (see emit_matmuls).

    Raises:
        AscendirError: integer or mixed operand types, a dtype the cube has no mmad for, a group
            outside the restrictions."""
    el = elem(a)
    integer = el == i8 and all(p.out_elem == i32 and p.epilogue == Epilogue() for p in products)
    if any(elem(p.b) != el for p in products) or not (isinstance(el, AnyFloat) or integer):
        raise ctx.error(
            f"cube matmul needs two float operands of one type, or int8 x int8 -> int32 without epilogue, "
            f"got {el} x {elem(products[0].b)}"
        )
    if no_mmad := ctx.target.arch.no_mmad(str(el)):  # e.g. f32 on 910A (S1 mmad map)
        raise ctx.error(
            f"{ctx.target.name} ({ctx.target.arch}) {no_mmad}; "
            "cast the model to float16 (ascendir --dtype fp16)"
        )
    grouped = len(products) > 1
    lay = matmul_layout(shape(a), shape(products[0].b))
    if grouped and any(
        len(shape(p.b)) != 2 or shape(p.b)[0] != lay.k or p.out_elem != products[0].out_elem
        or p.epilogue.activation is not None or p.epilogue.residual is not None or p.epilogue.channel_bias is not None
        or (p.epilogue.bias is not None and elem(p.epilogue.bias) != elem(products[0].epilogue.bias or p.epilogue.bias))
        for p in products
    ):
        raise ctx.error("a grouped matmul needs [K, N_i] weights of one K, one output type and bias-only epilogues")
    return el, lay, [shape(p.b)[1] for p in products] if grouped else [lay.n]


@dataclass(frozen=True)
class _Geometry:
    """How a (grouped) matmul's work splits: the tiles (bm, bn, bk, kl1), the K range per split
    (k_split, in whole L1 chunks so the ping-pong parity and the k-loop bounds stay multiples of
    kl1) and the number of splits (may come out below split_k for small K), the swizzle group
    height, the work items per product (counts) and in all (ntiles), the cores used."""

    bm: int
    bn: int
    bk: int
    kl1: int
    k_split: int
    splits: int
    swizzle: int
    counts: tuple[int, ...]
    ntiles: int
    block_dim: int
    normal: int = 0  # tail_split: work items with the whole K (whole waves), then
    tail: int = 0  # the tiles of the partial wave,
    tail_f: int = 1  # each run as tail_f K ranges of whole L1 chunks (tiling.tail_geometry)

    @staticmethod
    def of(ctx: LoweringContext, t: Tiling, lay: MatmulLayout, ns: list[int], epilogue: bool, el: Attribute = f32,
           out_elem: Attribute = f32) -> _Geometry:
        """Raises AscendirError: split-K with an epilogue (or a group); a tail_split the matmul
        cannot take (tiling.tail_misfit)."""
        k_split = round_up(ceil_div(lay.k, max(1, t.split_k)), t.k_l1)
        splits = ceil_div(lay.k, k_split)
        if splits > 1 and epilogue:
            raise ctx.error("split-K tiling (split_k > 1) needs a plain matmul: the epilogue must follow the reduction")
        tm_count = ceil_div(lay.m_rows, t.m)
        counts = tuple(splits * lay.batch * tm_count * ceil_div(n, t.n) for n in ns)
        ntiles = sum(counts)
        swizzle = min(max(1, t.swizzle), tm_count)
        if t.tail_split > 1:
            p = Problem(lay.batch, lay.m_rows, sum(ns), lay.k, str(el), itemsize(out_elem), epilogue=epilogue or len(ns) > 1)
            if (why := tail_misfit(p, t, ctx.target)) is not None:
                raise ctx.error(f"tiling {t.text()} {why}")
            tail, f = tail_geometry(p, t, ctx.target)
            normal = ntiles - tail
            items = normal + tail * f
            return _Geometry(t.m, t.n, t.k, t.k_l1, k_split, splits, swizzle, (items,), items,
                             min(ctx.target.num_aic, items), normal, tail, f)
        return _Geometry(t.m, t.n, t.k, t.k_l1, k_split, splits, swizzle, counts, ntiles, min(ctx.target.num_aic, ntiles))


class _CubeKernel:
    """One cube (or mix) kernel of emit_matmuls: its GM arguments, on-chip buffers and queues,
    the walk of the joint work list and the per-tile L1 / L0 pipeline (see the module
    docstring)."""

    def __init__(self, ctx: LoweringContext, a: SSAValue, products: Sequence[Product], outs: list[SSAValue],
                 lay: MatmulLayout, ns: list[int], g: _Geometry, base: str, ws: SSAValue | None = None):
        self.ctx, self.products, self.lay, self.ns, self.g, self.base = ctx, products, lay, ns, g, base
        self.ws = ws  # tail_split's f32 partials (`_tail_item`)
        self.el = elem(a)
        self.out_elem = f32 if g.splits > 1 else products[0].out_elem
        epilogue = products[0].epilogue
        self.arch = ctx.target.arch
        self.act = epilogue.activation
        assert self.act in (None, *ACTIVATIONS)
        # GELU/SiLU/ReLU6, the residual add and a column bias need the AIV on 910B (FixPipe only
        # does ReLU, the bias table BT holds a row)
        self.mix = self.arch.split_cores and (
            self.act not in (None, "vrelu") or epilogue.residual is not None or epilogue.channel_bias is not None
        )
        self.fix_relu = self.arch.fixpipe and self.act == "vrelu" and epilogue.channel_bias is None  # else ReLU must follow the bias add
        self.prefetch = False  # B prefetched into L2 by the AIVs (`_Prefetch`; emit_matmuls decides)
        self.warm_a = False  # and A warmed into L2 by the idle cores' AIVs (`_Prefetch.warm_a`; emit_matmuls decides)
        self.item_t: Index | None = None  # the work item `_tile` runs (`_Prefetch.first`)
        self.pf: _Prefetch | None = None
        self.b_layout = "nd2nz"  # "nz": B stored in NZ fractals (emit_matmuls' b_nz)
        self.args = self._args(a, outs)

    def _args(self, a: SSAValue, outs: list[SSAValue]) -> list[SSAValue]:
        """The kernel's GM arguments as 2-D views: a, then b and c of each product, the bias rows,
        the residual, the column bias.

        Raises:
            AscendirError: a bias that is not a row of N, a residual that is not the output, a
                column bias that is not a column of M."""
        ctx, lay, ns, g, products = self.ctx, self.lay, self.ns, self.g, self.products
        m_rows, k, batch = lay.m_rows, lay.k, lay.batch
        epilogue = products[0].epilogue
        residual, cbias = epilogue.residual, epilogue.channel_bias
        args = [ctx.view(a, [math.prod(lay.a_batch) * m_rows, k])]
        for p, n, out in zip(products, ns, outs):
            args += [ctx.view(p.b, [math.prod(lay.b_batch) * k, n]), ctx.view(out, [g.splits * batch * m_rows, n])]
        for p, n in zip(products, ns):
            bias = p.epilogue.bias
            if bias is not None:
                if math.prod(shape(bias)) != n:
                    raise ctx.error(f"bias {list(shape(bias))} is not a row of {n} elements")
                args.append(ctx.view(bias, [1, n]))
        if residual is not None:
            if shape(residual) != tuple(products[0].out_shape) or elem(residual) != self.out_elem:
                raise ctx.error(
                    f"residual {list(shape(residual))} {elem(residual)} is not the output {list(products[0].out_shape)} {self.out_elem}"
                )
            args.append(ctx.view(residual, [batch * m_rows, ns[0]]))
        if cbias is not None:
            if math.prod(shape(cbias)) != m_rows:
                raise ctx.error(f"channel bias {list(shape(cbias))} is not a column of {m_rows} elements")
            args.append(ctx.view(cbias, [m_rows, 1]))
        if self.ws is not None:
            args.append(ctx.view(self.ws, [g.tail * g.tail_f * g.bm, g.bn]))
        return args

    # ------------------------------------------------------------------------------------------
    def emit(self) -> None:
        ctx, g, products = self.ctx, self.g, self.products
        core = CoreType.MIX if self.mix or self.prefetch else CoreType.AIC
        kb = self.kb = KernelBuilder(ctx, ctx.name(self.base), [x.type for x in self.args], core, g.block_dim, ctx.current)
        n = len(products)
        self.gm_a = kb.args[0]
        self.gm_bs, self.gm_cs = kb.args[1 : 1 + 2 * n : 2], kb.args[2 : 2 + 2 * n : 2]
        it = iter(kb.args[1 + 2 * n :])
        self.gm_biases = [next(it) if p.epilogue.bias is not None else None for p in products]
        gm_res = next(it) if products[0].epilogue.residual is not None else None
        gm_cbias = next(it) if products[0].epilogue.channel_bias is not None else None
        self.gm_ws = next(it) if self.ws is not None else None
        if self.warm_a:  # the AIVs' A warm-up first in program order: before the queues' primes, whose MTE2 end
            # goes to the unit of the next MTE2 op (flag_placement.flag_units), the AIC's first load
            for s in dict.fromkeys(_Prefetch.aivs(self.mix)):
                with kb.on_subblock(s):
                    _Prefetch.warm_a(self, s)
        self._buffers(gm_res, gm_cbias)
        if self.warm_a:  # a core of the last wave (one item more than the cores that warm A)
            self.long_core = kb.emit(arith.CmpiOp(kb.idx(kb.block_idx), kb.idx(g.ntiles % g.block_dim), "ult")).results[0]
        with kb.tiles(g.ntiles) as t:
            if g.tail:  # whole-K tiles first, then the tail's K ranges (`_tail_item`)
                kb.if_else(kb.emit(arith.CmpiOp(kb.idx(t), kb.idx(g.normal), "ult")).results[0],
                           lambda: self._tile(t, 0, 0), lambda: self._tail_item(t))
            else:
                self._dispatch(t, 0, 0, self._tile)
        if self.mix:
            vec_act = None if self.fix_relu else self.act  # FixPipe applied ReLU on the way out
            lay = self.lay
            _emit_aiv_epilogue(
                kb, self.gm_cs[0], self.out_stage.fix_to_aiv, vec_act, gm_res, g.ntiles, [lay.batch, lay.m_rows, self.ns[0]],
                [g.bm, g.bn], self.out_elem, g.swizzle, gm_cbias,
            )
        # the AIVs' prefetch runs inside the AIC's walk (`_Prefetch.fill`), so the AIC's FIX -> MTE2
        # flag (no units attribute) goes to the next MTE2 op in program order (flag_placement.flag_units),
        # AIV 0's epilogue load
        if self.pf is not None:
            self.pf.drain()
        ctx.launch(kb.finish(), self.args)

    def _buffers(self, gm_res: SSAValue | None, gm_cbias: SSAValue | None) -> None:
        """Ping-pong (S2 InitBuffer BUFFER_NUM = 2): slot p of each level has its own buffers and
        event-id pair, so MTE2 fills L1 slot p^1 while MTE1/M work on slot p; one L0C
        accumulator; the bias and output stages."""
        kb, g, el, arch, nb = self.kb, self.g, self.el, self.arch, DOUBLE_BUFFER
        self.l1a = [kb.alloc([g.bm, g.kl1], el, MemSpace.L1) for _ in range(nb)]
        self.l1b = [kb.alloc([g.kl1, g.bn], el, MemSpace.L1) for _ in range(nb)]
        self.l0a = [kb.alloc([g.bm, g.bk], el, MemSpace.L0A) for _ in range(nb)]
        self.l0b = [kb.alloc([g.bk, g.bn], el, MemSpace.L0B) for _ in range(nb)]
        # the s8 mmad accumulates in int32 (S1 mmad map: L0C s32 for s8 operands)
        self.l0c = kb.alloc([g.bm, g.bn], i32 if el == i8 else f32, MemSpace.L0C)
        self.q_l1 = [kb.queue(Pipe.MTE2, Pipe.MTE1) for _ in range(nb)]
        self.q_l0 = [kb.queue(Pipe.MTE1, Pipe.M) for _ in range(nb)]
        self.q_c = kb.queue(Pipe.M, Pipe.FIX if arch.fixpipe else Pipe.V)
        self.halves = fixpipe_halves(self.ctx.target, str(el), Tiling(g.bm, g.bn, g.bk, g.kl1 // g.bk), g.splits, self.ns,
                                     self.lay.k, itemsize(self.out_elem), any(b is not None for b in self.gm_biases),
                                     ceil_div(g.ntiles, g.block_dim))
        if self.halves:  # one M <-> FIX event pair per column half of L0C (see `_tile_halves`)
            hb = g.bn // 2
            self.q_half = [kb.queue(Pipe.M, Pipe.FIX) for _ in range(2)]
            self.l0c_half = [kb.subview(self.l0c, [0, h * hb], [g.bm, hb]) for h in range(2)]
            self.l0b_half = [kb.subview(self.l0b[q], [0, 0], [g.bk, hb]) for q in range(nb)]
        first_bias = next((b for b in self.gm_biases if b is not None), None)
        self.bias_stage = _BiasStage(kb, first_bias, g.bn, arch.bias_table) if first_bias is not None else None
        self.cbias_stage = _BiasStage(kb, gm_cbias, g.bm, False, column=True) if gm_cbias is not None and not arch.fixpipe else None
        stage_act = None if arch.fixpipe and not self.fix_relu else self.act  # FixPipe applies no other activation
        self.out_stage = _OutputStage(kb, self.l0c, self.q_c, g.bm, g.bn, self.out_elem, stage_act, arch.fixpipe, self.mix,
                                      self.bias_stage, gm_res, self.cbias_stage)
        if self.prefetch:
            self.pf = _Prefetch(kb, g, el, beside_epilogue=self.mix)
        # Ping-pong slots alternate over the whole sequence a core runs: with an odd number of
        # L1 chunks per item (or L0 steps per chunk) a slot index restarting at 0 would reuse
        # the slot just filled and stall MTE2 (MTE1) until M releases it.
        self.chunks = ceil_div(g.k_split, g.kl1)

    def _dispatch(self, t: Index, i: int, start: int, body) -> None:
        """body(t, start, i) for tile t of the joint work list: product i owns [start, start + counts[i])."""
        kb = self.kb
        if i == len(self.products) - 1:
            body(t, start, i)
            return
        end = start + self.g.counts[i]
        kb.if_else(
            kb.emit(arith.CmpiOp(kb.idx(t), kb.idx(end), "ult")).results[0],
            lambda: body(t, start, i),
            lambda: self._dispatch(t, i + 1, end, body),
        )

    def tail_k(self, t: Index) -> tuple[Index, Index, Index, Index, Index, Index]:
        """(m0, n0, K range lo / hi, L1 chunks the core ran before, workspace row) of tail item
        t >= g.normal (`_tail_item`). Split-major order
        (catlass TailSplitkGemmIdentityBlockSwizzle's K slices): u = t - normal is K range
        s = u / tail of tail tile j = u mod tail, so the block-cyclic walk gives a core ranges
        of different s. A tile's C L1 chunks split as evenly as whole chunks allow: range s
        has C / f chunks, one more for s < C mod f. Its partial goes to workspace rows
        [(j·f + s)·bm, +bm)."""
        kb, g, lay = self.kb, self.g, self.lay
        u = kb.sub(t, g.normal)
        s, j = kb.div(u, g.tail), kb.rem(u, g.tail)
        _, _, m0, n0, _, _ = _tile_coords(kb, kb.add(j, g.normal), 1, 1, lay.m_rows, self.ns[0], g.bm, g.bn, g.swizzle)
        chunks = ceil_div(lay.k, g.kl1)
        base, extra = chunks // g.tail_f, chunks % g.tail_f
        c_lo = kb.add(kb.mul(s, base), kb.min(s, extra)) if extra else kb.mul(s, base)
        k_lo = kb.mul(c_lo, g.kl1)
        if extra:
            longer = kb.emit(arith.CmpiOp(kb.idx(s), kb.idx(extra), "ult")).results[0]
            size = kb.emit(arith.SelectOp(longer, kb.idx(base + 1), kb.idx(base))).results[0]
        else:
            size = base
        k_hi = kb.min(kb.add(k_lo, kb.mul(size, g.kl1)), lay.k)
        normal_here = g.normal // g.block_dim
        i = kb.div(kb.sub(t, kb.block_idx), g.block_dim)
        # (+ c_lo: the slot parity is taken of base + k1 / kl1 with the absolute k1; 2·c_lo is even)
        before = kb.add(kb.add(normal_here * self.chunks, kb.mul(kb.sub(i, normal_here), base)), c_lo)
        row0 = kb.mul(kb.add(kb.mul(j, g.tail_f), s), g.bm)
        return m0, n0, k_lo, k_hi, before, row0

    def l1_base_of(self, t: Index) -> Index:
        """L1 chunks the core ran before work item t (ping-pong parity across items)."""
        kb, g = self.kb, self.g
        item = kb.div(kb.sub(t, kb.block_idx), g.block_dim) if self.chunks % 2 and g.ntiles > g.block_dim else 0
        return kb.mul(item, self.chunks)

    # ------------------------------------------------------------------------------------------
    def _tile(self, t: Index, start: int, i: int) -> None:
        """One output tile of product i: its K range through L1 and L0 into L0C, then the
        output stage."""
        kb, g, lay, arch = self.kb, self.g, self.lay, self.arch
        gm_bias = self.gm_biases[i]
        m_rows = lay.m_rows
        si, ib, m0, n0, msz, nsz = _tile_coords(kb, kb.sub(t, start), g.splits, lay.batch, m_rows, self.ns[i], g.bm, g.bn, g.swizzle)
        self.a_row = kb.add(kb.mul(_batch_index(kb, ib, lay.out_batch, lay.a_batch), m_rows), m0)
        self.b_row = kb.mul(_batch_index(kb, ib, lay.out_batch, lay.b_batch), lay.k)
        c_row = kb.add(kb.mul(kb.add(kb.mul(si, lay.batch), ib), m_rows), m0)
        self.k_lo = kb.mul(si, g.k_split)
        self.item_t = t
        k_hi = lay.k if g.splits == 1 else kb.min(kb.add(self.k_lo, g.k_split), lay.k)
        if self.halves:
            self.bt = None
            self._tile_halves(t, i, m0, n0, msz, c_row)
            return
        if gm_bias is not None:
            self.bias_stage.load(n0, nsz, gm_bias)
        if self.cbias_stage is not None:
            self.cbias_stage.load(m0, msz)
        self.q_c.acquire()
        if gm_bias is not None and arch.bias_table:
            self.bias_stage.q_bt.deque()
        self.bt = self.bias_stage.bt if gm_bias is not None and arch.bias_table else None
        self.l1_base = self.l1_base_of(t)
        gm_b = self.gm_bs[i]
        with kb.range(self.k_lo, k_hi, g.kl1) as k1:
            _by_parity(kb, k1, g.kl1, DOUBLE_BUFFER, lambda p: self._l1_step(p, k1, gm_b, m0, n0, msz, nsz), self.l1_base)
        if gm_bias is not None and arch.bias_table:
            self.bias_stage.q_bt.release()
        self.out_stage.bias = self.bias_stage if gm_bias is not None else None  # 910A adds it in UB
        self.out_stage.emit(self.gm_cs[i], c_row, n0, msz, nsz)

    def _tail_item(self, t: Index) -> None:
        """Work item t >= g.normal of a tail_split: one K range of a tile of the partial wave
        (`tail_k`). Its f32 partial leaves L0C through FixPipe in `tail_piece` pieces into its
        workspace rows, where `_emit_tail_reduce` sums a tile's ranges. With column halves
        (every range two chunks or more) the range's first and last chunk run by halves as in
        `_tile_halves`, so each half's FixPipe pieces overlap the cube; else the item holds the
        accumulator's queue(s) over its K range and hands L0C to FixPipe at its end."""
        kb, g = self.kb, self.g
        m0, n0, self.k_lo, k_hi, self.l1_base, row0 = self.tail_k(t)
        self.item_t = None  # (`_Prefetch.first`: a tail_split kernel's AIVs prefetch every chunk)
        self.a_row, self.b_row = m0, 0
        self.bt = None
        gm_b = self.gm_bs[0]
        rows, cols = tail_piece(Tiling(g.bm, g.bn, g.bk))
        chunks = ceil_div(self.lay.k, g.kl1)
        if self.halves and chunks // g.tail_f >= 2 and cols == g.bn // 2:
            steps = g.kl1 // g.bk
            l0_base = kb.mul(self.l1_base, steps) if steps % 2 else 0

            def halves(k1: Index, first: bool, last: bool) -> None:
                _by_parity(kb, k1, g.kl1, DOUBLE_BUFFER,
                           lambda p: self._l1_halves(p, k1, gm_b, self.gm_ws, m0, n0, g.bm, row0, first, last, steps, l0_base,
                                                     piece=rows), self.l1_base)

            last_k1 = kb.mul(kb.div(kb.sub(kb.sub(k_hi, 1), self.k_lo), g.kl1), g.kl1)
            last_k1 = kb.add(self.k_lo, last_k1)
            halves(self.k_lo, True, False)
            with kb.range(kb.add(self.k_lo, g.kl1), last_k1, g.kl1) as k1:
                _by_parity(kb, k1, g.kl1, DOUBLE_BUFFER, lambda p: self._l1_step(p, k1, gm_b, m0, n0, g.bm, g.bn), self.l1_base)
            halves(last_k1, False, True)
            return
        queues = self.q_half if self.halves else [self.q_c]
        for q in queues:
            q.acquire()
        with kb.range(self.k_lo, k_hi, g.kl1) as k1:
            _by_parity(kb, k1, g.kl1, DOUBLE_BUFFER, lambda p: self._l1_step(p, k1, gm_b, m0, n0, g.bm, g.bn), self.l1_base)
        per_q = g.bn // cols // len(queues)  # column pieces under each queue
        for qi, q in enumerate(queues):
            q.handoff()
            for c in range(qi * per_q, (qi + 1) * per_q):
                for r in range(g.bm // rows):
                    src = kb.subview(self.l0c, [r * rows, c * cols], [rows, cols])
                    kb.copy(src, kb.subview(self.gm_ws, [kb.add(row0, r * rows), c * cols], [rows, cols]), layout="nz2nd")
            q.release()

    def _tile_halves(self, t: Index, i: int, m0: Index, n0: Index, msz: Index, c_row: Index) -> None:
        """One output tile with FixPipe overlapping the cube (`fixpipe_halves`): the first and
        the last L1 chunk run their L0 steps on the left column half of L0C, then on the right
        one, each half with its own M <-> FIX event pair. The left half of the tile leaves
        through FixPipe while the cube computes the right half, and the next tile's first chunk
        starts on the left half while FixPipe drains the right one: the FixPipe time hides
        behind two half chunks of mmads instead of stalling the cube (catlass
        MmadAtlasA2Pingpong reaches the same overlap with the unit flag). Middle chunks run
        full-width mmads as `_l1_step`. Each L0C element accumulates the same K sequence in
        f32 as without halves, so the numerics are unchanged."""
        kb, g, lay = self.kb, self.g, self.lay
        gm_b, gm_c = self.gm_bs[i], self.gm_cs[i]
        chunks, kl1 = self.chunks, g.kl1
        last_k1 = (chunks - 1) * kl1
        s_full, s_last = ceil_div(kl1, g.bk), ceil_div(lay.k - last_k1, g.bk)
        # L0 ping-pong parity runs across the core's items: L0 steps per item (halves chunks twice)
        total = 2 * s_last if chunks == 1 else chunks * s_full + 2 * s_last
        item = kb.div(kb.sub(t, kb.block_idx), g.block_dim) if total % 2 and g.ntiles > g.block_dim else 0
        base = kb.mul(item, total)
        self.l1_base = self.l1_base_of(t)

        def halves(k1: int, first: bool, last: bool, steps: int, l0_base: Index) -> None:
            _by_parity(kb, k1, kl1, DOUBLE_BUFFER,
                       lambda p: self._l1_halves(p, k1, gm_b, gm_c, m0, n0, msz, c_row, first, last, steps, l0_base), self.l1_base)

        halves(0, True, chunks == 1, s_full if chunks > 1 else s_last, base)
        if chunks > 2:
            with kb.range(kl1, last_k1, kl1) as k1:
                l0_base = kb.add(base, kb.mul(kb.add(kb.div(k1, kl1), 1), s_full)) if s_full % 2 else base
                _by_parity(kb, k1, kl1, DOUBLE_BUFFER,
                           lambda p: self._l1_step(p, k1, gm_b, m0, n0, msz, g.bn, l0_base), self.l1_base)
        if chunks > 1:
            halves(last_k1, False, True, s_last, kb.add(base, chunks * s_full))
        if self.mix:  # after both halves' copies on FIX; at the end of the tile, as `_OutputStage.emit` sets it: the
            # flag without a units attribute goes to the next MTE2 op in program order, AIV 0's epilogue load
            kb.set_flag(Pipe.FIX, Pipe.MTE2, self.out_stage.fix_to_aiv)

    def _l1_halves(self, p: int, k1: int, gm_b: SSAValue, gm_c: SSAValue, m0: Index, n0: Index, msz: Index, c_row: Index,
                   first: bool, last: bool, steps: int, l0_base: Index, piece: int | None = None) -> None:
        """L1 chunk p (the first and / or the last of a tile) by column halves; after the last
        chunk's half h, that half of L0C to GM through FixPipe (see `_tile_halves`), in row
        blocks of `piece` rows when given (a tail_split partial, `_tail_item`)."""
        kb, g = self.kb, self.g
        hb = g.bn // 2
        ksz = self._l1_load(p, k1, gm_b, m0, n0, msz, g.bn)
        for h in range(2):
            if first:
                self.q_half[h].acquire()
            with kb.range(0, ksz, g.bk) as kk:
                _by_parity(kb, kk, g.bk, DOUBLE_BUFFER, lambda q: self._l0_step(p, q, k1, kk, h), kb.add(l0_base, h * steps))
            if h == 1:
                self.q_l1[p].release()
            if last:
                q = self.q_half[h]
                q.handoff()
                if piece is None:
                    dst = kb.subview(gm_c, [c_row, kb.add(n0, h * hb)], [msz, hb])
                    kb.copy(self.l0c_half[h], dst, layout="nz2nd", relu=self.out_stage.act == "vrelu")
                else:
                    for r in range(g.bm // piece):
                        src = kb.subview(self.l0c, [r * piece, h * hb], [piece, hb])
                        kb.copy(src, kb.subview(gm_c, [kb.add(c_row, r * piece), h * hb], [piece, hb]), layout="nz2nd")
                q.release()

    def _l1_load(self, p: int, k1: Index, gm_b: SSAValue, m0: Index, n0: Index, msz: Index, nsz: Index) -> Index:
        """GM -> L1 chunk p of A (nd2nz) and B (nd2nz, or whole fractals when B is stored NZ;
        after the prefetching AIV filled L2 with it); returns the chunk's K size."""
        kb, g = self.kb, self.g
        ksz = kb.boundary(g.kl1, self.lay.k, k1)
        self.q_l1[p].acquire()
        load_a = lambda: kb.copy(kb.subview(self.gm_a, [self.a_row, k1], [msz, ksz]), self.l1a[p], layout="nd2nz")  # noqa: E731
        # with the A warm-up the cores of the last wave read A before B, the others after it
        # (`_Prefetch.warm_a`): the kernel's first reads of A fall on cores with slack
        _unless(kb, self.warm_a and self.long_core, load_a)
        # the core's first B chunk: read directly (its AIV skips it, `_Prefetch.first`)
        first = self.pf.first(self, self.item_t, k1, self.k_lo) if self.pf is not None else False
        b = kb.subview(gm_b, [kb.add(self.b_row, k1), n0], [ksz, nsz])
        if self.pf is not None:  # AIV p brings this B chunk into L2 (`_Prefetch.fill`), then the AIC waits for it
            _unless(kb, first, lambda: (self.pf.fill(p, b), self.pf.wait_filled(p)))
        kb.copy(b, self.l1b[p], layout=self.b_layout)
        if self.warm_a:
            kb.if_else(self.long_core, load_a, lambda: None)
        self.q_l1[p].handoff()
        if self.pf is not None:
            _unless(kb, first, lambda: self.pf.free_slot(p))
        return ksz

    def _l1_step(self, p: int, k1: Index, gm_b: SSAValue, m0: Index, n0: Index, msz: Index, nsz: Index,
                 l0_base: Index | None = None) -> None:
        """GM -> L1 chunk p of A and B (nd2nz), then its L0 steps (L0 ping-pong parity from
        `l0_base`, default: `steps` L0 steps per L1 chunk the core ran)."""
        kb, g = self.kb, self.g
        ksz = self._l1_load(p, k1, gm_b, m0, n0, msz, nsz)
        with kb.range(0, ksz, g.bk) as kk:
            steps = g.kl1 // g.bk
            if l0_base is None:
                l0_base = kb.mul(kb.add(self.l1_base, kb.div(kb.sub(k1, self.k_lo), g.kl1)), steps) if steps % 2 else 0
            _by_parity(kb, kk, g.bk, DOUBLE_BUFFER, lambda q: self._l0_step(p, q, k1, kk), l0_base)
        self.q_l1[p].release()

    def _l0_step(self, p: int, q: int, k1: Index, kk: Index, half: int | None = None) -> None:
        """L1 -> L0A / L0B slot q, then the mmad into L0C (or into its column `half`, 0 / 1,
        with that half of the B tile: `_tile_halves`)."""
        kb, g = self.kb, self.g
        self.q_l0[q].acquire()
        kb.copy(kb.subview(self.l1a[p], [0, kk], [g.bm, g.bk]), self.l0a[q])
        if half is None:
            kb.copy(kb.subview(self.l1b[p], [kk, 0], [g.bk, g.bn]), self.l0b[q])
            b, c = self.l0b[q], self.l0c
        else:
            hb = g.bn // 2
            kb.copy(kb.subview(self.l1b[p], [kk, half * hb], [g.bk, hb]), self.l0b_half[q])
            b, c = self.l0b_half[q], self.l0c_half[half]
        self.q_l0[q].handoff()
        _mmad(kb, self.l0a[q], b, c, kb.add(kb.sub(k1, self.k_lo), kk), self.bt)
        self.q_l0[q].release()


class _Prefetch:
    """L2 prefetch of B by the group's AIVs (910B mix kernel), the in-kernel form of the
    vendor's weight prefetch (torch_npu.npu_prefetch, vllm-ascend weight_prefetch: weights moved
    into L2 ahead of the matmul so the cube's MTE2 reads them at the L2 rate).

    AIV p reads every B chunk of ping-pong parity p (the L1 slot the AIC loads it into) GM -> UB,
    a scratch tile nobody reads: the read leaves the lines in L2. Per chunk, on AIV p: wait for a
    free slot (AIC MTE2 -> AIV MTE3, PREFETCH_SLOTS primed), MTE3 -> MTE2, the copy, MTE2 -> MTE3
    (the copy has completed), then "filled" (AIV MTE3 -> AIC MTE2). The AIC waits for "filled"
    before its own load of the chunk, which then hits, and frees the slot after it. The data
    never changes (numerics are those without prefetch).

    Program order: the AIV's part of a chunk (`fill`) is emitted inside the AIC's walk, just
    before the AIC's wait for it, so every cross-core wait follows its set and no pipe is ever
    held (interpreter/timing/holds.py: a held pipe turns the steady-state extrapolation and the
    loop memos off, and costs a defer / replay per op). The AIC and the AIVs run separate
    instruction streams on the hardware (scalar_units.py), so the order between their ops in
    the one IR is the simulator's only. (Emitted as each AIV's own walk of the work list after
    the AIC's part, the AIV's scalar unit was charged the loop control of the AIC's whole walk
    before its first prefetch, and every AIC op queued behind the first held wait.)

    `beside_epilogue`: AIV 0 runs the kernel's epilogue (`_emit_aiv_epilogue`, whose tiles may
    fill its UB), so AIV 1 alone reads the chunks of both parities, in the AIC's order, into one
    scratch tile (tiling.prefetch_aivs; ffn_up's prefetch runs on AIV 1 for the same reason)."""

    def __init__(self, kb: KernelBuilder, g: _Geometry, el: Attribute, beside_epilogue: bool = False):
        self.kb, self.g = kb, g
        self.subs = self.aivs(beside_epilogue)
        self.units = tuple("aiv1" if s else "aiv" for s in self.subs)
        scratch = {}
        for s in dict.fromkeys(self.subs):
            with kb.on_subblock(s):
                scratch[s] = kb.alloc([g.kl1, g.bn], el, MemSpace.UB)
        self.ub = [scratch[s] for s in self.subs]
        m2, m3 = Pipe.MTE2, Pipe.MTE3
        self.filled = [kb.event(m3, m2) for _ in range(DOUBLE_BUFFER)]  # AIV p -> AIC
        self.go = [kb.event(m3, m2) for _ in range(DOUBLE_BUFFER)]  # AIV p: slot granted, MTE3 -> MTE2
        self.free = [kb.event(m2, m3) for _ in range(DOUBLE_BUFFER)]  # AIC -> AIV p
        self.done = [kb.event(m2, m3) for _ in range(DOUBLE_BUFFER)]  # AIV p: copy completed, MTE2 -> MTE3
        for p in range(DOUBLE_BUFFER):
            for _ in range(PREFETCH_SLOTS):
                self.free_slot(p)

    @staticmethod
    def aivs(beside_epilogue: bool) -> tuple[int, ...]:
        """The AIV (subblock) prefetching the chunks of each ping-pong parity."""
        return (1, 1) if beside_epilogue else tuple(range(DOUBLE_BUFFER))

    def _flag(self, wait: bool, src: Pipe, dst: Pipe, event: int, units: str) -> None:
        op = (ascend.WaitFlagOp if wait else ascend.SetFlagOp)(src, dst, event)
        op.attributes[FLAG_UNITS_ATTR] = FlagUnitsAttr(*units.split("->"))
        self.kb.emit(op)

    def wait_filled(self, p: int) -> None:
        """AIC, before loading a B chunk of parity p."""
        self._flag(True, Pipe.MTE3, Pipe.MTE2, self.filled[p], f"{self.units[p]}->aic")

    def free_slot(self, p: int) -> None:
        """AIC, after loading it (and at entry: the primed slots)."""
        self._flag(False, Pipe.MTE2, Pipe.MTE3, self.free[p], f"aic->{self.units[p]}")

    def fill(self, p: int, b: SSAValue) -> None:
        """AIV p's L2 prefetch of the B chunk `b` (GM view [kl1, bn]) of parity p, emitted just
        before the AIC's `wait_filled` of that chunk: wait for a free slot, read the chunk GM ->
        UB scratch, then "filled". Every cross-core wait thus follows its set in program order."""
        kb, u = self.kb, self.units[p]
        m2, m3 = Pipe.MTE2, Pipe.MTE3
        with kb.on_subblock(self.subs[p]):
            self._flag(True, m2, m3, self.free[p], f"aic->{u}")
            self._flag(False, m3, m2, self.go[p], f"{u}->{u}")
            self._flag(True, m3, m2, self.go[p], f"{u}->{u}")
            kb.copy(b, self.ub[p])
            self._flag(False, m2, m3, self.done[p], f"{u}->{u}")
            self._flag(True, m2, m3, self.done[p], f"{u}->{u}")
            self._flag(False, m3, m2, self.filled[p], f"{u}->aic")

    def drain(self) -> None:
        """Each prefetching AIV waits for the slots the AIC freed last (after the AIC's walk)."""
        for p in range(DOUBLE_BUFFER):
            with self.kb.on_subblock(self.subs[p]):
                for _ in range(PREFETCH_SLOTS):
                    self._flag(True, Pipe.MTE2, Pipe.MTE3, self.free[p], f"aic->{self.units[p]}")

    def first(self, k: _CubeKernel, t: Index | None, k1: Index, k_lo: Index) -> SSAValue | bool:
        """With the A warm-up (`warm_a`): whether chunk k1 of work item t is the first chunk the
        core runs (its first item, K from k_lo). The AIC reads that B chunk itself, straight from
        HBM, and its AIV skips it: through the AIV it would cost the AIV's start, its read at the
        miss rate and the cross-core flag before the AIC's own read; direct, the AIC's read at
        the miss rate, then its read of A, which the idle AIVs started warming meanwhile
        (tiling.estimate's fill). Without the warm-up the AICs' own first reads of A are the
        misses, and who pays them depends on the cores' start: 910B2 512x4096x11008 (no
        warm-up: its A chunk does not fit UB beside the B chunk) ran 3.5 % slower with a
        direct first chunk, its A misses gathered on 6 cores. False (every chunk prefetched)
        without the warm-up or for a tail_split item (t None)."""
        if t is None or not k.warm_a:
            return False
        kb = self.kb
        cond = kb.eq(t, kb.block_idx)
        if not (isinstance(k1, int) and isinstance(k_lo, int) and k1 == k_lo):
            cond = kb.emit(arith.AndIOp(cond, kb.eq(k1, k_lo))).results[0]
        return cond

    @staticmethod
    def warm_a(k: _CubeKernel, s: int) -> None:
        """Prefetching AIV s of a core of the partial last wave's complement (the blocks that run
        one item fewer, `ntiles mod block_dim` and up) reads A chunks [bm, kl1] GM -> UB into a
        scratch tile nobody reads, before its B prefetch: chunk q (tile row q / chunks, K chunk
        q mod chunks) on the a-th of the prefetching AIVs (a = (block - first idle block)·A + the
        index of s among the A prefetching AIVs, 2, or 1 beside an AIV epilogue), every
        A·(idle blocks) chunks. Each chunk
        is read as the AICs read it (same view: L2 keys on the tile), so their reads of A hit
        (tiling._warm_a_cycles says when the cost model puts it in: the idle cores have an item
        of slack). Numerics are unchanged: the data never changes."""
        kb, g, lay = k.kb, k.g, k.lay
        ub = kb.alloc([g.bm, g.kl1], k.el, MemSpace.UB)
        chunks = ceil_div(lay.k, g.kl1)
        first, idle = g.ntiles % g.block_dim, g.block_dim - g.ntiles % g.block_dim
        aivs = list(dict.fromkeys(_Prefetch.aivs(k.mix)))  # the prefetching AIVs (one beside an AIV epilogue)

        def warm() -> None:
            with kb.loop(kb.add(kb.mul(kb.sub(kb.block_idx, first), len(aivs)), aivs.index(s)), ceil_div(lay.m_rows, g.bm) * chunks,
                         len(aivs) * idle) as q:
                m0, k1 = kb.mul(kb.div(q, chunks), g.bm), kb.mul(kb.rem(q, chunks), g.kl1)
                kb.copy(kb.subview(k.gm_a, [m0, k1], [kb.boundary(g.bm, lay.m_rows, m0), kb.boundary(g.kl1, lay.k, k1)]), ub)

        kb.if_else(kb.emit(arith.CmpiOp(kb.idx(kb.block_idx), kb.idx(first), "uge")).results[0], warm, lambda: None)


def _tile_coords(
    kb: KernelBuilder, t: Index, splits: int, batch: int, rows: int, cols: int, bm: int, bn: int, swizzle: int
) -> tuple[Index, Index, Index, Index, Index, Index]:
    """(split, batch, m0, n0, msz, nsz) of work item `t`: split outermost, then batch, then the
    [rows, cols] grid of bm x bn tiles, row-major (n fastest) when swizzle = 1, else in groups of
    `swizzle` tile rows visited column by column (the last group may have fewer rows)."""
    tm, tn = ceil_div(rows, bm), ceil_div(cols, bn)
    if swizzle <= 1 or tm == 1:
        if splits == 1:
            (ib, m0, n0), (_, msz, nsz) = kb.grid(t, [batch, rows, cols], [1, bm, bn])
            return 0, ib, m0, n0, msz, nsz
        (si, ib, m0, n0), (_, _, msz, nsz) = kb.grid(t, [splits, batch, rows, cols], [1, 1, bm, bn])
        return si, ib, m0, n0, msz, nsz
    per_batch = tm * tn
    si = kb.div(t, batch * per_batch) if splits > 1 else 0
    r = kb.rem(t, batch * per_batch) if splits > 1 else t
    ib = kb.div(r, per_batch) if batch > 1 else 0
    r = kb.rem(r, per_batch) if batch > 1 else r
    group = swizzle * tn
    g = kb.div(r, group)
    w = kb.rem(r, group)
    g_m = kb.mul(g, swizzle)
    if tm % swizzle == 0:
        mi, ni = kb.add(g_m, kb.rem(w, swizzle)), kb.div(w, swizzle)
    else:  # rows in this group: min(swizzle, tm - g * swizzle), only known at run time
        height = kb.idx(kb.min(swizzle, kb.sub(tm, g_m)))
        wi = kb.idx(w)
        mi = kb.add(g_m, kb.emit(arith.RemUIOp(wi, height)).results[0])
        ni = kb.emit(arith.DivUIOp(wi, height)).results[0]
    m0, n0 = kb.mul(mi, bm), kb.mul(ni, bn)
    return si, ib, m0, n0, kb.boundary(bm, rows, m0), kb.boundary(bn, cols, n0)


def _emit_split_k_reduce(
    ctx: LoweringContext, ws: SSAValue, result: SSAValue, splits: int, total: int, out_elem: Attribute
) -> None:
    """Vector kernel: result (flat `total` elements of out_elem) = sum over `splits` f32 slices of
    the workspace `ws`. AIV tiles of REDUCE_TILE elements: `splits` loads (MTE2), splits-1 vadds
    and a vcast (V), one store (MTE3)."""

    e = min(REDUCE_TILE, total)
    ntiles = ceil_div(total, e)
    block_dim = min(max(1, ctx.target.num_aiv), ntiles)
    args = [ctx.view(ws, [splits, total]), ctx.view(result, [1, total])]
    kb = KernelBuilder(ctx, ctx.name("matmul_split_k_reduce"), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gm_ws, gm_out = kb.args
    parts = [kb.alloc([1, e], f32, MemSpace.UB) for _ in range(splits)]
    out = kb.alloc([1, e], out_elem, MemSpace.UB)
    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        off = kb.mul(t, e)
        size = kb.boundary(e, total, off)
        _sum_partials(kb, q_in, q_out, [kb.subview(gm_ws, [s, off], [1, size]) for s in range(splits)], parts, out,
                      kb.subview(gm_out, [0, off], [1, size]))
    ctx.launch(kb.finish(), args)


def _sum_partials(kb: KernelBuilder, q_in, q_out, srcs: list, parts: list, out, dst) -> None:
    """One step of a partials reduce on an AIV: load each f32 partial `srcs[i]` (GM views) into UB
    `parts[i]` (MTE2; at least two), sum them (V) into parts[0] and, with the last vadd of an f32
    result, into `out`, else cast the sum into `out`, store `out` to the GM view `dst` (MTE3); the
    two queues order MTE2 -> V -> MTE3. `out` is a buffer of its own, which MTE2 never writes:
    the next step's loads (ordered after this step's vector work only) would overwrite the
    partials while MTE3 still stores from them."""
    q_in.acquire()
    for src, buf in zip(srcs, parts):
        kb.copy(src, buf)
    q_in.handoff()
    q_out.acquire()
    f32_out = elem(out) == f32
    for i, buf in enumerate(parts[1:], start=2):
        kb.emit(ascend.vector_op("vadd")(parts[0], buf, out if f32_out and i == len(parts) else parts[0]))
    if not f32_out:
        kb.emit(ascend.VcastOp(parts[0], out))
    q_in.release()
    q_out.handoff()
    kb.copy(out, dst)
    q_out.release()


def _emit_tail_reduce(ctx: LoweringContext, ws: SSAValue, result: SSAValue, g: _Geometry, m: int, n: int, t: Tiling) -> None:
    """Vector kernel after a tail_split cube kernel: each tail tile of `result` ([m, n], its
    element type) = the sum of its g.tail_f f32 partials in the workspace `ws` (catlass
    StreamkReduceAdd / the split-K epilogue: AIV loads, vadds, a cast, a store). The AIVs walk
    the tail tiles' `tail_piece` pieces: per piece tail_f loads of exactly the piece FixPipe
    wrote (L2 hits), tail_f - 1 vadds and a vcast (V), one store (MTE3)."""
    rows, cols = tail_piece(t)
    per_tile = (g.bm // rows) * (g.bn // cols)
    pieces = g.tail * per_tile
    out_elem = elem(result)
    block_dim = min(max(1, ctx.target.num_aiv), pieces)
    args = [ctx.view(ws, [g.tail * g.tail_f * g.bm, g.bn]), ctx.view(result, [m, n])]
    kb = KernelBuilder(ctx, ctx.name("matmul_tail_reduce"), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gm_ws, gm_out = kb.args
    parts = [kb.alloc([rows, cols], f32, MemSpace.UB) for _ in range(g.tail_f)]
    out = kb.alloc([rows, cols], out_elem, MemSpace.UB)
    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(pieces) as q:
        j, w = kb.div(q, per_tile), kb.rem(q, per_tile)
        c, r = kb.div(w, g.bm // rows), kb.rem(w, g.bm // rows)
        _, _, m0, n0, _, _ = _tile_coords(kb, kb.add(j, g.normal), 1, 1, m, n, g.bm, g.bn, g.swizzle)
        row, col = kb.mul(r, rows), kb.mul(c, cols)
        first = kb.add(kb.mul(kb.mul(j, g.tail_f), g.bm), row)
        _sum_partials(kb, q_in, q_out, [kb.subview(gm_ws, [kb.add(first, s * g.bm), col], [rows, cols]) for s in range(g.tail_f)],
                      parts, out, kb.subview(gm_out, [kb.add(m0, row), kb.add(n0, col)], [rows, cols]))
    ctx.launch(kb.finish(), args)


def _by_parity(kb: KernelBuilder, iv: Index, step: int, nb: int, body, base: Index = 0) -> None:
    """Emit `body(slot)` for the ping-pong slot (base + iv / step) mod nb of a loop index: static
    when both are, else an `scf.if` on the parity (nb = 2) with one copy of the body per slot."""
    if nb == 1:
        body(0)
        return
    if isinstance(iv, int) and isinstance(base, int):
        body((base + iv // step) % nb)
        return
    parity = kb.rem(kb.add(base, kb.div(iv, step)), 2)
    kb.if_else(kb.eq(parity, 0), lambda: body(0), lambda: body(1))


def _unless(kb: KernelBuilder, cond: SSAValue | bool, body) -> None:
    """Emit body() under `scf.if not cond` (cond False: unconditionally)."""
    if cond is False:
        body()
    else:
        kb.if_else(cond, lambda: None, body)


def _mmad(kb: KernelBuilder, a: SSAValue, b: SSAValue, c: SSAValue, k_off: Index, bias: SSAValue | None) -> None:
    """mmad that initializes L0C (from the BT bias when given) at k offset 0 and accumulates
    otherwise (Ascend C `cmatrixInitVal = (k == 0)`)."""
    if isinstance(k_off, int):
        kb.emit(ascend.MmadOp(a, b, c, k_off == 0, bias if k_off == 0 else None))
        return
    kb.if_else(
        kb.eq(k_off, 0),
        lambda: kb.emit(ascend.MmadOp(a, b, c, True, bias)),
        lambda: kb.emit(ascend.MmadOp(a, b, c, False)),
    )


def _l0c_out(kb: KernelBuilder, fixpipe: bool, acc: SSAValue, dst: SSAValue, q_c, q_ub, ub: SSAValue | None) -> None:
    """The L0C tile `acc` (after its q_c hand-off) to GM `dst`: FixPipe (nz2nd, cast) where the
    chip has one, else L0C -> UB `ub` on the vector pipe and UB -> GM on MTE3 (910A), through
    the queue `q_ub`. Releases q_c once L0C is read."""
    if fixpipe:
        kb.copy(acc, dst, layout="nz2nd")
        q_c.release()
        return
    q_ub.acquire()
    kb.copy(acc, ub)
    q_c.release()
    q_ub.handoff()
    kb.copy(ub, dst)
    q_ub.release()


class _BiasStage:
    """Bias row of the current N tile.

    910B: GM -> L1 (MTE2) -> BT (MTE1), consumed by the first mmad (the bias table is the
    initial value of L0C; Ascend C Mmad with cmatrixSource = BT).
    910A: GM -> UB (MTE2), added to the f32 tile by the vector unit after L0C -> UB.
    column: a bias per output row instead (`size` = bm rows, GM [M, 1]; UB only: BT holds a row).
    """

    def __init__(self, kb: KernelBuilder, gm_bias: SSAValue, size: int, bias_table: bool, column: bool = False):
        self.kb, self.gm, self.bias_table, self.column = kb, gm_bias, bias_table, column
        el = elem(gm_bias)
        bn = size
        if column:
            assert not bias_table
            self.ub = kb.alloc([size, 1], el, MemSpace.UB)
            self.ub32 = kb.alloc([size, 1], f32, MemSpace.UB) if el != f32 else self.ub
            self.q_ub = kb.queue(Pipe.MTE2, Pipe.V)
        elif bias_table:
            self.l1 = kb.alloc([1, bn], el, MemSpace.L1)
            self.bt = kb.alloc([1, bn], el, MemSpace.BT)
            self.q_l1 = kb.queue(Pipe.MTE2, Pipe.MTE1)
            self.q_bt = kb.queue(Pipe.MTE1, Pipe.M)
        else:
            self.ub = kb.alloc([1, bn], el, MemSpace.UB)
            self.ub32 = kb.alloc([1, bn], f32, MemSpace.UB) if el != f32 else self.ub
            self.q_ub = kb.queue(Pipe.MTE2, Pipe.V)

    def load(self, n0: Index, nsz: Index, gm: SSAValue | None = None) -> None:
        """Start loading the bias row of the N tile at n0 (from `gm`, default: the stage's own
        row; a grouped matmul passes each product's); a column bias: the rows at n0."""
        kb = self.kb
        gm = gm if gm is not None else self.gm
        src = kb.subview(gm, [n0, 0], [nsz, 1]) if self.column else kb.subview(gm, [0, n0], [1, nsz])
        if self.bias_table:
            self.q_l1.acquire()
            kb.copy(src, self.l1)
            self.q_l1.handoff()
            self.q_bt.acquire()
            kb.copy(self.l1, self.bt)
            self.q_bt.enque()
            self.q_l1.release()
        else:
            self.q_ub.acquire()
            kb.copy(src, self.ub)
            self.q_ub.enque()

    def add_in_ub(self, tile: SSAValue) -> None:
        """910A: tile (f32, UB) += bias row."""
        kb = self.kb
        self.q_ub.deque()
        if self.ub32 is not self.ub:
            kb.emit(ascend.VcastOp(self.ub, self.ub32))
        kb.emit(ascend.vector_op("vadd")(tile, self.ub32, tile))
        self.q_ub.release()


class _OutputStage:
    """How an L0C tile reaches GM (see the module docstring and kinds/matmul_epilogue.py)."""

    def __init__(
        self,
        kb: KernelBuilder,
        l0c: SSAValue,
        q_c: Queue,
        bm: int,
        bn: int,
        out_elem: Attribute,
        act: str | None,
        fixpipe: bool,
        mix: bool,
        bias: _BiasStage | None,
        residual: SSAValue | None = None,
        channel_bias: _BiasStage | None = None,
    ):
        self.kb, self.l0c, self.q_c = kb, l0c, q_c
        self.out_elem, self.act, self.fixpipe, self.mix, self.bias = out_elem, act, fixpipe, mix, bias
        self.residual, self.channel_bias = residual, channel_bias
        if mix:
            # FIX (AIC) -> MTE2 (AIV): "this output tile holds its pre-activation value"
            self.fix_to_aiv = kb.event(Pipe.FIX, Pipe.MTE2)
        elif not fixpipe:
            wide = act is not None or bias is not None or residual is not None or channel_bias is not None
            self.ub_acc = kb.alloc([bm, bn], f32, MemSpace.UB) if wide else None
            self.ub_out = kb.alloc([bm, bn], out_elem, MemSpace.UB) if not wide or out_elem != f32 else self.ub_acc
            self.q_out = kb.queue(Pipe.V, Pipe.MTE3)
            if residual is not None:
                self.ub_res = kb.alloc([bm, bn], out_elem, MemSpace.UB)
                self.ub_res32 = kb.alloc([bm, bn], f32, MemSpace.UB) if out_elem != f32 else self.ub_res
                self.q_res = kb.queue(Pipe.MTE2, Pipe.V)

    def emit(self, gm_c: SSAValue, c_row: Index, n0: Index, msz: Index, nsz: Index) -> None:
        kb = self.kb
        self.q_c.handoff()
        dst = kb.subview(gm_c, [c_row, n0], [msz, nsz])
        if self.fixpipe:
            kb.copy(self.l0c, dst, layout="nz2nd", relu=self.act == "vrelu")
            self.q_c.release()
            if self.mix:
                kb.set_flag(Pipe.FIX, Pipe.MTE2, self.fix_to_aiv)
            return
        # 910A: L0C -> UB on the vector pipe, epilogue in f32, narrowing cast, UB -> GM.
        if self.residual is not None:
            self.q_res.acquire()
            kb.copy(kb.subview(self.residual, [c_row, n0], [msz, nsz]), self.ub_res)
            self.q_res.enque()
        self.q_out.acquire()
        if self.ub_acc is None:
            kb.copy(self.l0c, self.ub_out)
            self.q_c.release()
        else:
            kb.copy(self.l0c, self.ub_acc)
            self.q_c.release()
            for b in (self.bias, self.channel_bias):
                if b is not None:
                    b.add_in_ub(self.ub_acc)
            if self.act is not None:
                emit_activation(kb, self.act, self.ub_acc, self.ub_acc)
            if self.residual is not None:
                self.q_res.deque()
                if self.ub_res32 is not self.ub_res:
                    kb.emit(ascend.VcastOp(self.ub_res, self.ub_res32))
                kb.emit(ascend.vector_op("vadd")(self.ub_acc, self.ub_res32, self.ub_acc))
                self.q_res.release()
            if self.ub_out is not self.ub_acc:
                kb.emit(ascend.VcastOp(self.ub_acc, self.ub_out))
        self.q_out.handoff()
        kb.copy(self.ub_out, dst)
        self.q_out.release()


def _emit_aiv_epilogue(
    kb: KernelBuilder,
    gm_c: SSAValue,
    event: int,
    act: str | None,
    gm_res: SSAValue | None,
    ntiles: int,
    grid: Sequence[int],
    tile: Sequence[int],
    out_elem: Attribute,
    swizzle: int = 1,
    gm_cbias: SSAValue | None = None,
) -> None:
    """The AIV half of a mix kernel: for each tile the AIC finished (one FIX -> MTE2 flag per
    tile, in the same order), load it from GM (L2), add the column bias `gm_cbias` ([M, 1]),
    apply `act` and add the residual tile (each if any) in UB, and store it in place."""
    ub_in = kb.alloc(tile, out_elem, MemSpace.UB)
    ub_out = kb.alloc(tile, out_elem, MemSpace.UB)
    ub_res = kb.alloc(tile, out_elem, MemSpace.UB) if gm_res is not None else None
    ub_b = kb.alloc([tile[0], 1], elem(gm_cbias), MemSpace.UB) if gm_cbias is not None else None
    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(ntiles) as t:
        _, ib, m0, n0, msz, nsz = _tile_coords(kb, t, 1, grid[0], grid[1], grid[2], tile[0], tile[1], swizzle)  # the AIC loop's order
        rows = kb.add(kb.mul(ib, grid[1]), m0)
        part = kb.subview(gm_c, [rows, n0], [msz, nsz])
        kb.wait_flag(Pipe.FIX, Pipe.MTE2, event)
        q_in.acquire()
        kb.copy(part, ub_in)
        if ub_res is not None:
            kb.copy(kb.subview(gm_res, [rows, n0], [msz, nsz]), ub_res)
        if ub_b is not None:
            kb.copy(kb.subview(gm_cbias, [m0, 0], [msz, 1]), ub_b)
        q_in.handoff()
        q_out.acquire()
        src = ub_in
        if ub_b is not None:
            src = ub_in if act is not None or ub_res is not None else ub_out
            kb.emit(ascend.vector_op("vadd")(ub_in, ub_b, src))
        if act is not None:
            emit_activation(kb, act, src, ub_out)
            src = ub_out
        if ub_res is not None:
            kb.emit(ascend.vector_op("vadd")(src, ub_res, ub_out))
        q_in.release()
        q_out.handoff()
        kb.copy(ub_out, part)
        q_out.release()


def tiling_of(ctx: LoweringContext, mm: Operation, problem: Problem) -> Tiling | None:
    """The tiling an nn.matmul's `ascend.tiling` attribute (choose-tiling, or IR text) asks for,
    completed and checked against ctx.target for `problem` (the matmul as its template lays it
    out, from the template's plan); None without the attribute.

    Raises:
        AscendirError: a tiling that does not fit (buffer, bytes needed vs available, largest fit)."""
    if TILING_ATTR not in mm.attributes or not isinstance(mm, nn.MatmulOp):
        return None
    return tiling_for_op(mm, problem, ctx.target, ctx.current)
