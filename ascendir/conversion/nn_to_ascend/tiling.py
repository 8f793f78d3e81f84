"""The matmul tiling model: the matmul family's tiling type (`Tiling`, recorded on the op as the
declared `#ascend.tiling` attribute, as flash_attention.FlashTiling is for attentions; see
template.Tiling), the problem a matmul poses to its template (`problem_of`, with what the
template's plan puts around it), what a tiling puts in each buffer (`buffer_needs`, `misfit`, `largest_fit`), its analytic estimate in cycles
(`estimate`, through the interpreter's own cost formulas), the candidates and the search. The
templates obey what this model chooses; `choose-tiling` (transforms/nn/choose_tiling.py) runs
the search over a module and documents the fields.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from ascendir.hardware.align import aligned_bytes
from ascendir.conversion.nn_to_ascend.templates.matmul_layout import matmul_layout
from ascendir.dialects import nn
from ascendir.dialects.ascend import Pipe
from ascendir.dtypes import itemsize
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.costmodel import CostEnv, bandwidth_bound_cycles, copy_startup, mmad_cycles, vector_cycles
from ascendir.dialects.ascend import TILING_ATTR, TilingAttr

FIELDS = ("m", "n", "k", "l1_depth", "split_k", "swizzle", "prefetch", "tail_split")
# Fields a tiling may leave out (their default, 0, is then written nowhere: IR text and `text()`
# of a tiling without them stay as they were): prefetch = 1 prefetches B into L2 on the AIVs;
# tail_split = f >= 2 splits the K of each tile of the last, partial wave f ways (`tail_misfit`).
OPTIONAL_FIELDS = ("prefetch", "tail_split")
FLAG_FIELDS = ("prefetch",)  # 0 or 1
# Fields of an nn.attention's tiling (flash_attention template): query rows per head per item, keys per block.
ATTENTION_FIELDS = ("br", "bc")
# Candidate grids (elements for m / n; bytes for k, so f16 and f32 get the same K bytes).
M_CHOICES = (16, 32, 64, 128, 256)
N_CHOICES = (16, 32, 64, 128, 192, 256, 384)
K_BYTES_CHOICES = (32, 64, 128, 256)
DEPTH_CHOICES = (1, 2, 3, 4, 5, 6, 8)
SPLIT_K_CHOICES = (1, 2, 3, 4, 6, 8)
SWIZZLE_CHOICES = (1, 2, 4, 8, 16)
# tail_split factors the search offers (K ranges per tile of the partial last wave), on
# prefetching tilings only, and not beside the A warm-up (`warms_a`). The estimate balances the
# cores by their items alone; first reads from HBM (A's, and without the prefetch B's) go to the
# cores that get there first, and where they set the kernel's end the partial wave does not, so
# splitting it gains nothing the estimate can see: 910B2 fp16 4096^3 with a runtime B (no
# prefetch), 128x256, l1_depth 5: core ends 801-815 K cycles, the latest core 8, which runs one
# item fewer than cores 0-7; with tail_split 2 796-833 K (core 8 also runs a tail range):
# 815,413 -> 833,651 simulated (+ the reduction) while the estimate went 832,852 -> 817,877.
# The warm-up, which removes A's first-read misses using the partial wave's slack, is the
# better use of that slack: 512x4096x4096 weight, 256x128, l1_depth 4, prefetch: warm-up
# 106,861 estimated / 108,243 simulated, tail_split 3 105,740 / 110,366. With the B prefetch
# and no warm-up the partial wave sets the end (weights, 256x128, l1_depth 4, prefetch):
# 512x4096x11008 297,082 -> 270,033 (tail_split 3), 512x11008x4096 283,296 -> 265,002
# (tail_split 4).
TAIL_SPLIT_CHOICES = (2, 3, 4, 6)
# GM transactions are split into 128/256/512 B (S2 hardware constraints page): a tile row shorter
# than one 128-B transaction wastes most of every burst, which the copy cost (bytes / rate) does
# not see. So the search keeps each GM row of the A and B tiles >= 128 B unless the matrix row
# itself is shorter.
MIN_GM_ROW_BYTES = 128
# Ping-pong: two L1 / L0A / L0B slots (S2 InitBuffer BUFFER_NUM = 2), one L0C accumulator.
NBUF = 2
# A prefetching tiling of a B that is not a constant weight must save more than this fraction of
# the estimate to be ranked above a plain one. The AIV prefetch is the vendor's weight prefetch
# (torch_npu.npu_prefetch, vllm-ascend weight_prefetch); torch.matmul of two runtime tensors, which
# the GEMM calibration rows V2-V5 measure, does not prefetch, and without the margin ascendir's
# kernels for them prefetch (V2 +5.2 -> +7.6 %, V4 +4.8 -> +7.6 % against the measurement). For
# constant weights (Problem.b_nz) there is none: their prefetching kernels are estimated as
# closely as the plain ones and simulate faster (910B2 fp16 4096^3, 128x256, l1_depth 5: 763,956
# estimated / 765,502 simulated with prefetch, 780,331 / 802,543 without).
PREFETCH_MARGIN = 0.05
# Estimates closer than this fraction are not ordered by the search (`search` breaks the tie by
# the simpler, larger tiling): on 910B2 fp16 weight GEMMs the estimate is 0-5 % below the
# simulated kernel, by an amount that differs between tilings estimated within 0.2 % of each
# other (14336x4096x4096, 128x256: l1_depth 4 with prefetch 2,574,267 estimated / 2,728,479
# simulated, l1_depth 4 without 2,576,391 / 2,709 K, l1_depth 5 without 2,577,277 / 2,698,246;
# 4096^3 with prefetch, l1_depth 4 761,243 / 772,922, l1_depth 5 763,956 / 765,502).
ESTIMATE_RESOLUTION = 0.01
# Vector tile of the split-K reduction kernel (f32 elements per AIV call): 3 such f32 / f16
# buffers take < 1/4 of UB (192 KiB, S1) and each load moves 16 KiB, the transfer size S2 gives
# for full GM bandwidth.
REDUCE_TILE = 4096


@dataclass(frozen=True)
class Tiling:
    """One matmul tiling (see the module docstring for each field)."""

    m: int
    n: int
    k: int
    l1_depth: int = 1
    split_k: int = 1
    swizzle: int = 1
    prefetch: int = 0
    tail_split: int = 0

    @property
    def k_l1(self) -> int:
        return self.k * self.l1_depth

    def _shown(self) -> list[str]:
        return [f for f in FIELDS if f not in OPTIONAL_FIELDS or getattr(self, f)]

    def to_attr(self) -> TilingAttr:
        return TilingAttr({f: getattr(self, f) for f in self._shown()})

    def text(self) -> str:
        return ",".join(f"{f}={getattr(self, f)}" for f in self._shown())


@dataclass(frozen=True)
class Problem:
    """`batch` products [m, k] x [k, n] (batch folded into m when B has no batch dims).

    dtype: "f16" / "bf16" / "f32" operands; out_bytes: result element size; bias_bytes: bias row
    element size (0: none); epilogue: bias or activation present (no split-K then); a_batch /
    b_batch: how many distinct A / B matrices the batch reads (broadcast); act / residual: the
    matmul_epilogue's activation (matmul.py's name, e.g. "vsilu") and residual add, which decide
    the epilogue's UB tiles (epilogue_ub_bytes); ffn_up: for a gate/up matmul of an ffn region,
    the accumulators (1 plain, 2 gated) of the `ffn_up` kernel that runs it with an [m, n] tile
    per accumulator (templates/ffn_up.py), whose buffers it must fit (0: a matmul kernel);
    channel_bias: element size of a bias per output row (a conv's per-channel bias, added by the
    vector unit: templates/conv.py; 0: none); b_nz: B is a constant weight stored in NZ fractals
    (`nz_weight`), so its GM -> L1 loads pay the plain MTE2 head instead of the nd2nz one;
    l2_warm: A and B were just written by the kernel before and fit in L2 (write-allocate,
    interpreter/timing/l2.py), so their first reads hit it too."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str
    out_bytes: int
    bias_bytes: int = 0
    epilogue: bool = False
    a_batch: int = 1
    b_batch: int = 1
    act: str | None = None
    residual: bool = False
    ffn_up: int = 0
    channel_bias: int = 0
    b_nz: bool = False
    l2_warm: bool = False

    @property
    def es(self) -> int:
        return {"f16": 2, "bf16": 2, "f32": 4, "i8": 1}[self.dtype]


@dataclass
class Estimate:
    """Analytic cycles of one tiling (cycles of the AI Core clock) with its parts."""

    cycles: float
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class SearchResult:
    best: Tiling
    estimate: Estimate
    scored: int
    seconds: float


def _dtype_name(el: Attribute) -> str:
    s = str(el)
    return {"f16": "f16", "bf16": "bf16", "f32": "f32"}.get(s, s)


# Fused kinds whose templates load a weight read as matmul B in NZ fractals (`Problem.b_nz`):
# matmul_epilogue and norm_matmul through matmul.emit_matmul(s), ffn through ffn_up / ffn_down /
# ffn_fused. A weight another kind reads (MC2, grouped or antiquant MatMuls) stays ND.
NZ_KINDS = frozenset({nn.FusedKind.MATMUL_EPILOGUE, nn.FusedKind.NORM_MATMUL, nn.FusedKind.FFN})


def _outer(v: SSAValue) -> SSAValue:
    """`v`, or the value an nn.fused region takes as the block argument `v` (through nested regions)."""
    while isinstance(v, BlockArgument) and isinstance(parent := v.block.parent_op(), nn.FusedOp):
        v = parent.inputs[v.index]
    return v


def _read_as_b_only(v: SSAValue) -> bool:
    """Every op reading `v` reads it as an nn.matmul's B, directly or as the block argument of a
    region whose template loads such a B in NZ (NZ_KINDS)."""
    for u in v.uses:
        op = u.operation
        if isinstance(op, nn.MatmulOp) and u.index == 1:
            continue
        if isinstance(op, nn.FusedOp) and op.kind.data in NZ_KINDS and _read_as_b_only(op.body.block.args[u.index]):
            continue
        return False
    return True


def nz_weight(mm: nn.MatmulOp) -> bool:
    """Whether `mm`'s B can be stored in NZ fractals (FRACTAL_NZ) in GM: a 2-D constant weight
    (`nn.weight`, or the block argument of an nn.fused region that takes one) that every op
    reading it (every `nn.weight` op of its name in the module) reads as the B operand of an
    nn.matmul, directly or inside a region of NZ_KINDS. CANN converts such weights once, offline
    (TransData folded into the constant at graph build; torch_npu.npu_format_cast for eager
    weights), so the kernel loads whole fractals into L1 with no ND -> NZ conversion. The
    conversion is a layout of a constant, done at compile time: it costs the simulated device
    nothing, and numerics are unchanged (the interpreter keeps arrays logical)."""
    w = _outer(mm.rhs).owner
    if not isinstance(w, nn.WeightOp) or len(mm.rhs.type.get_shape()) != 2:
        return False
    top = w
    while top.parent_op() is not None:
        top = top.parent_op()
    return all(_read_as_b_only(op.result) for op in top.walk() if isinstance(op, nn.WeightOp) and op.weight_name == w.weight_name)


def problem_of(mm: nn.MatmulOp, *, bias_bytes: int = 0, epilogue: bool = False, act: str | None = None,
               residual: bool = False, ffn_up: int = 0, b_nz: bool = False) -> Problem:
    """The Problem of an nn.matmul, laid out as templates/matmul.py's emit_matmul lays it out
    (matmul_layout), with what its template puts around it (Problem's fields of those names):
    the template that plans the matmul's region says which (kinds/), this function reads
    nothing but the op's types."""
    lay = matmul_layout(mm.lhs.type.get_shape(), mm.rhs.type.get_shape())
    el = mm.lhs.type.element_type
    return Problem(
        lay.batch, lay.m_rows, lay.n, lay.k, _dtype_name(el), itemsize(mm.result.type.element_type), bias_bytes,
        epilogue, math.prod(lay.a_batch), math.prod(lay.b_batch), act, residual, ffn_up, b_nz=b_nz,
    )


# ----------------------------------------------------------------------------------------------
# fit
# ----------------------------------------------------------------------------------------------
# What the template keeps in each space (error messages name the buffer, not just the space).
BUFFERS = {
    "l1": "A and B chunks, 2 slots each",
    "l0a": "A tiles, 2 slots",
    "l0b": "B tiles, 2 slots",
    "l0c": "the f32 accumulator tiles",
    "ub": "the epilogue's output tiles",
    "bt": "the bias row of an N tile",
}


def epilogue_ub_bytes(p: Problem, t: Tiling, target: HardwareConfig) -> int:
    """UB bytes per core of the matmul kernel's output stage for an [m, n] tile, as
    templates/matmul.py allocates them (each rounded up to the UB alignment, as KernelBuilder.alloc
    counts them):

    * split AIC / AIV (910B): UB only in a mix kernel (an activation other than ReLU, a
      residual or a channel bias): `_emit_aiv_epilogue`'s input and output tiles (+ the residual
      tile), output type, and the channel bias column;
    * coupled (910A, L0C -> UB): `_OutputStage`'s f32 accumulator tile when there is any epilogue,
      the output-type tile (unless the f32 one is it), the residual tile (+ its f32 copy), and
      `_BiasStage`'s bias row (+ its f32 copy) and channel bias column (+ its f32 copy);
    * ffn_up (templates/ffn_up.py, both layouts): one f32 tile per accumulator, the h tile
      and the b1 row (+ its f32 copy)."""
    def al(nbytes: int) -> int:
        return aligned_bytes(target, "ub", nbytes)

    tile, ob = t.m * t.n, p.out_bytes
    if p.ffn_up:  # one f32 tile per accumulator, the h tile, the b1 row (+ its f32 copy)
        bias = al(t.n * p.bias_bytes) + (al(t.n * 4) if p.bias_bytes != 4 else 0) if p.bias_bytes else 0
        return p.ffn_up * al(tile * 4) + al(tile * p.es) + bias
    cb = p.channel_bias
    column = al(t.m * cb) if cb else 0
    if target.arch.split_cores:  # the epilogue, if any, runs on the AIVs
        mix = p.act not in (None, "vrelu") or p.residual or cb
        return (2 + int(p.residual)) * al(tile * ob) + column if mix else 0
    wide = p.act is not None or p.bias_bytes > 0 or p.residual or cb
    need = al(tile * 4) if wide else 0
    need += al(tile * ob) if not wide or ob != 4 else 0
    if p.residual:
        need += al(tile * ob) + (al(tile * 4) if ob != 4 else 0)
    if p.bias_bytes:
        need += al(t.n * p.bias_bytes) + (al(t.n * 4) if p.bias_bytes != 4 else 0)
    if cb:
        need += column + (al(t.m * 4) if cb != 4 else 0)
    return need


def buffer_needs(p: Problem, t: Tiling, target: HardwareConfig | None = None) -> dict[str, int]:
    """Bytes per core of each on-chip space the matmul template allocates for tiling `t` (UB:
    the output stage's tiles, epilogue_ub_bytes; only with `target`, whose core layout decides it)."""
    es = p.es
    if p.ffn_up:  # nacc B tiles per slot and nacc accumulators (templates/ffn_up.py)
        na = p.ffn_up
        needs = {
            "l1": NBUF * (t.m + na * t.n) * t.k_l1 * es,
            "l0a": NBUF * t.m * t.k * es,
            "l0b": NBUF * na * t.k * t.n * es,
            "l0c": na * t.m * t.n * 4,
        }
        if target is not None:
            needs["ub"] = epilogue_ub_bytes(p, t, target)
        return needs
    needs = {
        "l1": NBUF * (t.m + t.n) * t.k_l1 * es + (t.n * p.bias_bytes if p.bias_bytes else 0),
        "l0a": NBUF * t.m * t.k * es,
        "l0b": NBUF * t.k * t.n * es,
        "l0c": t.m * t.n * 4,
    }
    if target is not None:
        needs["ub"] = epilogue_ub_bytes(p, t, target)
        if t.prefetch:  # `_Prefetch`'s scratch B chunk in the UB of each prefetching AIV
            scratch = aligned_bytes(target, "ub", t.k_l1 * t.n * es)
            # beside an AIV epilogue the prefetch runs on the other AIV (its own UB)
            needs["ub"] = max(needs["ub"], scratch) if aiv_epilogue(p, target) else needs["ub"] + scratch
        if p.bias_bytes and target.arch.bias_table:  # `_BiasStage`: the bias row of an N tile in BT
            needs["bt"] = aligned_bytes(target, "bt", t.n * p.bias_bytes)
    return needs


def misfit(p: Problem, t: Tiling, target: HardwareConfig) -> tuple[str, int, int] | None:
    """(space, bytes needed, bytes available) of the first buffer `t` overflows, else None."""
    for space, need in buffer_needs(p, t, target).items():
        cap = target.capacity(space)
        if need > cap:
            return space, need, cap
    return None


def k_chunks(p: Problem, t: Tiling) -> int:
    """L1 chunks (k·l1_depth elements of K) the K loop has: the most K ranges split_k can make."""
    return -(-p.k // t.k_l1)


def _chunks(n: int) -> str:
    return "1 chunk" if n == 1 else f"{n} chunks"


def splits_of(p: Problem, t: Tiling) -> int:
    """K ranges the template actually makes for `t` (templates/matmul.py: each split takes whole
    L1 chunks, so a split_k that does not divide the chunks makes fewer)."""
    per = -(-(-(-p.k // max(1, t.split_k))) // t.k_l1) * t.k_l1
    return -(-p.k // per)


def reduce_ub_bytes(p: Problem, t: Tiling, target: HardwareConfig) -> int:
    """UB bytes of the split-K reduction kernel (`_emit_split_k_reduce`): one f32 tile of
    REDUCE_TILE elements per K range, plus the output tile (a buffer of its own for an f32
    result too: templates/matmul.py `_sum_partials`)."""
    splits = splits_of(p, t)
    if splits <= 1:
        return 0
    e = min(REDUCE_TILE, p.batch * p.m * p.n)
    return splits * aligned_bytes(target, "ub", e * 4) + aligned_bytes(target, "ub", e * p.out_bytes)


def split_misfit(p: Problem, t: Tiling, target: HardwareConfig) -> str | None:
    """Why `t`'s split_k cannot be lowered (an int8 matmul, an epilogue, more K ranges than L1
    chunks, or a reduction kernel whose partial tiles overflow UB), else None."""
    if t.split_k <= 1:
        return None
    if p.dtype == "i8":  # templates/matmul.py refuses it: the workspace and its reduction are f32
        return f"cannot split K of an int8 matmul (split_k = {t.split_k}): the split-K partials and their reduction are f32"
    if p.epilogue and splits_of(p, t) > 1:  # templates/matmul.py refuses it: the epilogue must follow the reduction
        return f"needs a plain matmul for split_k = {t.split_k} (this one has an epilogue, which must follow the split-K reduction)"
    chunks = k_chunks(p, t)
    if t.split_k > chunks:
        return f"cannot split K = {p.k} {t.split_k} ways: it has {_chunks(chunks)} of k·l1_depth = {t.k_l1}"
    need, cap = reduce_ub_bytes(p, t, target), target.capacity("ub")
    if need > cap:
        return (f"needs {need} bytes of UB for its split-K reduction ({splits_of(p, t)} f32 partial tiles), "
                f"{target.name} has {cap}")
    return None


def tail_piece(t: Tiling) -> tuple[int, int]:
    """(rows, columns) of the pieces a tail_split partial tile is written in (FixPipe, from L0C)
    and reduced in (AIV, UB): the L0C column half (the whole tile when its half is not whole
    fractals) cut into row blocks of at most REDUCE_TILE f32 elements. The reduction reads each
    piece exactly as it was written, so it finds it in L2 (interpreter/timing/l2.py keys tiles
    by their shape)."""
    cols = t.n // 2 if t.n % 32 == 0 else t.n
    rows = t.m
    while rows * cols > REDUCE_TILE and rows % 32 == 0:
        rows //= 2
    return rows, cols


def tail_geometry(p: Problem, t: Tiling, target: HardwareConfig) -> tuple[int, int] | None:
    """(tail tiles, K ranges per tail tile) of `t.tail_split` (catlass
    TailSplitkGemmIdentityBlockSwizzle): the tiles of the last, partial wave over the AICs
    (tiles mod num_aic) each run as that many K ranges of whole L1 chunks, as even as whole
    chunks allow (the first C mod f ranges one chunk longer), so the partial wave's work spreads
    over every AIC; None when t asks for none or the tiles make whole waves."""
    if t.tail_split < 2:
        return None
    tail = p.batch * -(-p.m // t.m) * -(-p.n // t.n) % target.num_aic
    f = min(t.tail_split, k_chunks(p, t))
    return (tail, f) if tail and f > 1 else None


def tail_misfit(p: Problem, t: Tiling, target: HardwareConfig) -> str | None:
    """Why `t`'s tail_split cannot be lowered, else None: it needs a 910B-style chip (FixPipe
    writes the f32 partials, the AIVs reduce them), a plain matmul of one batch without split_k,
    whole tiles (M, N multiples of m, n), a partial last wave, enough L1 chunks, and the reduction's
    pieces in UB."""
    if t.tail_split < 2:
        return None
    what = f"tail_split = {t.tail_split}"
    if not (target.arch.fixpipe and target.arch.split_cores):
        return f"cannot use {what} on {target.name} (FixPipe writes the f32 partials and the AIVs reduce them: a split-core chip)"
    if p.epilogue or p.ffn_up or p.batch > 1 or t.split_k > 1 or p.dtype == "i8":
        return f"needs a plain float matmul of one batch without split_k for {what}"
    if p.m % t.m or p.n % t.n:
        return f"needs whole tiles for {what} (M = {p.m} a multiple of m = {t.m}, N = {p.n} of n = {t.n})"
    tiles = -(-p.m // t.m) * -(-p.n // t.n)
    if tiles % target.num_aic == 0:
        return f"has no partial wave to split ({what}): {tiles} tiles on {target.num_aic} AICs"
    if k_chunks(p, t) < t.tail_split:
        return f"cannot split K = {p.k} {t.tail_split} ways: it has {_chunks(k_chunks(p, t))} of k·l1_depth = {t.k_l1}"
    rows, cols = tail_piece(t)
    f = tail_geometry(p, t, target)[1]
    need = f * aligned_bytes(target, "ub", rows * cols * 4) + aligned_bytes(target, "ub", rows * cols * p.out_bytes)
    if need > target.capacity("ub"):
        return f"needs {need} bytes of UB for its tail reduction ({f} f32 pieces of {rows}x{cols}), {target.name} has {target.capacity('ub')}"
    return None


def check_fits(p: Problem, t: Tiling, target: HardwareConfig, what: str = "matmul") -> None:
    """Raises AscendirError when tiling `t` does not fit `target`: names the buffer, the bytes
    needed vs available, and the largest tile that fits (`largest_fit`). Also rejects m / n not
    multiples of 16 and k not a multiple of 32 B / element size (S3), and a split_k with more K
    ranges than L1 chunks or whose reduction kernel overflows UB."""
    why = fit_error(p, t, target)
    if why is None:
        return
    if why.startswith("is not aligned"):
        raise AscendirError(f"{what}: tiling {t.text()} {why}")
    fit = largest_fit(p, t, target)
    hint = f"; largest tile that fits: {fit.text()}" if fit is not None else "; no tile fits"
    raise AscendirError(f"{what}: tiling {t.text()} {why}{hint}")


def fit_error(p: Problem, t: Tiling, target: HardwareConfig) -> str | None:
    """Why `t` cannot be lowered for `p` on `target` (check_fits' reason, without the op's name
    and the hint: misalignment, the first buffer that overflows with its bytes needed vs
    available, or split_misfit's reason), else None."""
    ka = max(1, 32 // p.es)
    if t.m % 16 or t.n % 16 or t.k % ka or min(t.m, t.n, t.k, t.l1_depth, t.split_k, t.swizzle) < 1:
        return f"is not aligned (m, n multiples of 16, k of {ka} for {p.dtype}; S3) or has a field < 1"
    bad = misfit(p, t, target)
    if bad is not None:
        space, need, cap = bad
        return f"needs {need} bytes of {space.upper()} ({BUFFERS[space]}), {target.name} has {cap}"
    if t.prefetch not in (0, 1):
        return f"has prefetch = {t.prefetch} (0 or 1)"
    if t.prefetch and not prefetch_fits(p, t, target):
        return (f"cannot prefetch B on {target.name}'s AIVs (needs a split-core chip, a plain matmul kernel (not "
                f"ffn_up), and a k·l1_depth x n chunk of {t.k_l1 * t.n * p.es} bytes within UB)")
    return split_misfit(p, t, target) or tail_misfit(p, t, target)


def largest_fit(p: Problem, t: Tiling, target: HardwareConfig, hold: frozenset[str] = frozenset()) -> Tiling | None:
    """The largest tiling no field of which exceeds `t`'s that fits `target` (every buffer, and
    split_k's checks): "largest" orders by the output tile m·n (its operand reuse), then k, then
    l1_depth, then split_k (one the template makes exactly: whole L1 chunks per K range), then
    the fewest fields changed from `t`, then the larger n; m and n are multiples of 16, k of
    32 B / element size; swizzle is kept, and so are the fields named in `hold` (complete: the
    forced ones). None when not even 16 x 16 x 32 B fits."""
    ka = max(1, 32 // p.es)
    cap = {s: target.capacity(s) for s in ("l1", "l0a", "l0b", "l0c")}
    best = None
    # no m (n) beyond what one L0C accumulator holds next to a 16-wide n (m): the loops stay short
    # whatever `t` asks for (m=4096 or m=10**9)
    top = max(16, cap["l0c"] // (16 * 4))
    ms = [t.m] if "m" in hold else range(max(16, min(t.m, top) - min(t.m, top) % 16), 15, -16)
    ns = [t.n] if "n" in hold else range(max(16, min(t.n, top) - min(t.n, top) % 16), 15, -16)
    for m in ms:
        for n in ns:
            if m * n * 4 > cap["l0c"]:
                continue
            b = n * p.bias_bytes if p.bias_bytes else 0
            # k: the largest that fits L0A, L0B and one L1 chunk; then the deepest L1 staging
            k = min(t.k, cap["l0a"] // (NBUF * m * p.es), cap["l0b"] // (NBUF * n * p.es),
                    (cap["l1"] - b) // (NBUF * (m + n) * p.es))
            k -= k % ka
            if "k" in hold:
                k = t.k if k >= t.k else 0
            if k < ka:
                continue
            depth = min(t.l1_depth, (cap["l1"] - b) // (NBUF * (m + n) * k * p.es))
            if "l1_depth" in hold and depth != t.l1_depth:
                continue
            c = Tiling(m, n, k, depth, 1, t.swizzle)
            if t.tail_split > 1:  # kept where this tile can take it; a forced one is never dropped
                if tail_misfit(p, replace(c, tail_split=t.tail_split), target) is None:
                    c = replace(c, tail_split=t.tail_split)
                elif "tail_split" in hold:
                    continue
            if t.prefetch and prefetch_fits(p, c, target):
                c = replace(c, prefetch=1)
            if "prefetch" in hold and c.prefetch != t.prefetch:
                continue
            # the largest split_k the template makes exactly (a larger one rounds to fewer ranges);
            # never more than the K chunks (split_misfit), so a forced split_k = 10^9 costs no 10^9 steps
            sk = min(t.split_k, k_chunks(p, c))
            if c.tail_split > 1:  # the two exclude each other (tail_misfit): the forced one, else tail_split
                if "split_k" not in hold:
                    sk = 1
                elif sk > 1 and "tail_split" in hold:
                    continue
                elif sk > 1:
                    c = replace(c, tail_split=0)
            while sk > 1 and (split_misfit(p, replace(c, split_k=sk), target) is not None or splits_of(p, replace(c, split_k=sk)) != sk):
                sk -= 1
            if "split_k" in hold and sk != t.split_k:
                continue
            c = replace(c, split_k=sk)
            if misfit(p, c, target) is not None:
                continue
            changed = sum(getattr(c, f) != getattr(t, f) for f in FIELDS)
            key = (m * n, k, depth, sk, -changed, n)
            if best is None or key > best[0]:
                best = (key, c)
    return best[1] if best else None


# ----------------------------------------------------------------------------------------------
# analytic cost (interpreter cost pieces, no simulation)
# ----------------------------------------------------------------------------------------------
class _Arr:
    """Shape / dtype stand-in for cost.mmad's operands (it reads only these)."""

    __slots__ = ("shape", "dtype", "itemsize")

    def __init__(self, shape, dtype, size):
        self.shape, self.dtype, self.itemsize = shape, dtype, size


def aiv_epilogue(p: Problem, target: HardwareConfig) -> bool:
    """Whether the matmul template runs `p`'s epilogue on the AIVs (templates/matmul.py
    `_CubeKernel.mix`): a split (910B) chip and an activation other than ReLU (FixPipe applies
    only ReLU), a residual or a channel bias (BT holds a row, not a column)."""
    return target.arch.split_cores and (p.act not in (None, "vrelu") or p.residual or bool(p.channel_bias))


def prefetch_aivs(p: Problem, target: HardwareConfig) -> int:
    """AIVs of a group that prefetch B (templates/matmul.py `_Prefetch`): both (AIC:AIV = 1:2, S1),
    taking alternate chunks, or only the second one beside an AIV epilogue, which runs on the
    first and fills its UB (as ffn_up's prefetch runs on the AIV its vector stage leaves idle)."""
    return 1 if aiv_epilogue(p, target) else 2


def prefetch_fits(p: Problem, t: Tiling, target: HardwareConfig) -> bool:
    """Whether the matmul template can prefetch B into L2 on the group's AIVs for tiling `t`
    (templates/matmul.py `_Prefetch`): a split (910B) chip, not an ffn_up kernel (it has its
    own prefetch), and one B chunk [k·l1_depth, n] fits an AIV's UB."""
    if not target.arch.split_cores or p.ffn_up:
        return False
    return aligned_bytes(target, "ub", t.k_l1 * t.n * p.es) <= target.capacity("ub")


def act_mul_cycles(target: HardwareConfig, act: str, nacc: int, n: int, bias: bool) -> float:
    """V-pipe cycles of an FFN's activation stage on n fp32 elements (ffn_up's and ffn_fused's
    AIV work per tile): [+ b1,] act, [* up (nacc = 2),] cast to the input dtype."""
    vec = vector_cycles(target, act, n, 4) + (nacc - 1) * vector_cycles(target, "vmul", n, 4) + vector_cycles(target, "vcast", n, 4)
    return vec + (vector_cycles(target, "vadd", n, 4) if bias else 0.0)


def fixpipe_halves(target: HardwareConfig, dtype: str, t: Tiling, splits: int, ns, k: int, out_bytes: int, bias: bool,
                   per_core: int) -> bool:
    """Whether the matmul kernel (templates/matmul.py `_CubeKernel._tile_halves`) runs its
    tiles by L0C column halves so that FixPipe overlaps the cube: a chip with FixPipe, one K
    range per tile (no split-K), halves of whole fractals (t.n a multiple of 32), every N in `ns`
    a multiple of t.n (full tiles: both halves always hold columns), no bias row (the bias
    table initialises the whole L0C tile), and it pays over the `per_core` tiles a core runs:
    the FixPipe cycles hidden (per tile followed by another one at most two half chunks of
    mmads; the core's last tile hides only its left half behind the right one) exceed the extra
    mmad start-ups of the half-width steps, and a core runs at least two tiles (with one, its
    extra copies and flags cost more than the left half's FixPipe time they hide: the corpus
    models' small projections ran 5-9 % slower)."""
    if not (target.arch.fixpipe and splits == 1 and t.n % 32 == 0 and all(n % t.n == 0 for n in ns) and not bias):
        return False
    if dtype not in target.cube.k_per_cycle or per_core < 2:  # one tile per core: little to hide, more ops to issue
        return False
    n_l0 = -(-k // t.k)
    half, whole = mmad_cycles(target, dtype, t.m, t.n // 2, t.k), mmad_cycles(target, dtype, t.m, t.n, t.k)
    per_chunk = min(t.l1_depth, n_l0)  # L0 steps of one L1 chunk
    extra = min(n_l0, 2 * per_chunk) * (2 * half - whole)  # the first and the last chunk (or the only one)
    fix = copy_startup(target, Pipe.FIX, None) + t.m * t.n * out_bytes / target.rate("l0c", "gm")
    hidden = (per_core - 1) * min(fix, 2 * per_chunk * half) + min(fix / 2, per_chunk * half)
    return hidden > per_core * extra


def estimate(p: Problem, t: Tiling, target: HardwareConfig) -> Estimate:
    """Cycles of the matmul template's kernel(s) for tiling `t` (see the module docstring).

    Per work item (one output tile over one K range): M = steps·mmad, MTE1 = steps·(2 start-ups
    + A/B bytes at l1_to_l0a/b), MTE2 = loads·(2 start-ups: A's nd2nz one, B's nd2nz one or, B
    stored NZ (`p.b_nz`), the plain MTE2 head; + bytes at the L2-hit or HBM
    rate of CostEnv.gm_rate with the launch's HBM share), FIX = L0C tile at l0c_to_gm (910A: L0C -> UB -> GM). Ping-pong
    overlaps MTE2 / MTE1 / M; the single L0C serialises M and FIX: item = max(MTE2, MTE1, M + FIX).
    With column halves (`fixpipe_halves`) the first and last L1 chunk run half-width mmads (one
    more mmad start-up per L0 step) and FixPipe hides behind two half chunks of them: M + FIX
    becomes M' + max(0, FIX - 2·(half-width mmads of one chunk)).
    A core runs ceil(items / block_dim) items after a fill (one load + its GM latency). The
    kernel is max(core, bandwidth floor) + launch head; split-K adds a vector reduction kernel.
    With `t.tail_split` (tail_geometry: the partial wave's tiles as K ranges) a core runs the
    whole waves' items, then its ranges (`range_chunks`, the longest core counts) as items of
    that many chunks whose f32 partial leaves in tail_piece pieces (`tail_cube`); the partials
    count as GM writes and the reduction kernel (`_reduce_cycles` over the pieces) follows.

    With `t.prefetch` (templates/matmul.py `_Prefetch`) the group's two AIVs read every B chunk
    GM -> UB before the AIC loads it, so the AIC's B reads all hit L2; the AIVs take turns (chunk
    parity), each paying a copy start-up, the bytes at its GM -> UB rate (L2 hit or HBM) and the
    completion latency before it signals the AIC: item = max(MTE2, MTE1, M + FIX, AIV / 2). Beside
    an AIV epilogue only the second AIV prefetches (prefetch_aivs): AIV / 1. The AIVs' reads count
    in the GM traffic and the bandwidth floor. With the A warm-up (`_warm_a_cycles`: the idle
    cores' AIVs read every A chunk once) every AIC read of A hits, the warm-up's reads count
    as the misses, and the fill is the AIC's own first B chunk from HBM and its A from L2.

    An ffn_up problem (`p.ffn_up` accumulators, `t.n` = their nacc·bn columns side by side) is
    scored as templates/ffn_up.py runs it: per L1 step one x and nacc weight loads into one
    [k, n] L1 tile, per L0 step one A and one B copy and one mmad of [m, n]; the accumulator
    leaves as fp32 in one FixPipe copy (910B: into the core's workspace, then AIV 0 reads it
    back, applies act_mul_cycles and stores the h tile, beside the next tile's K loop: item =
    max(..., AIV 0); 910A: L0C -> UB, the vector work and the store follow M). Its `t.prefetch`
    is ffn_up's own (ffn_up.prefetches): AIV 1 reads the Wg chunk and, gated, AIV 0 the Wu
    chunk (each 1 / nacc of each B chunk, at once on their own paths; AIV 0 after its
    epilogue), so the AIC's weight reads all hit L2; only for the first row of tiles when the
    later rows' re-reads hit anyway (parts["first_row"], which the kernel obeys): the items are
    then scored as 1 / tm prefetched (the AIVs' reads first reads), the rest reading B from L2.
    """
    es, dt = p.es, p.dtype
    prefetch = bool(t.prefetch)
    nacc = max(1, p.ffn_up)
    # ffn_up: each weight on its own AIV (AIV 1 Wg, AIV 0 Wu), 1 / nacc of every B chunk each
    pf_aivs = (nacc if p.ffn_up else prefetch_aivs(p, target)) if prefetch else 1
    pf_share = (1 if p.ffn_up else 1 / nacc) if prefetch else 0.0  # of each B chunk, the part the AIVs read first
    mm_, nn_ = min(t.m, p.m), min(t.n, p.n)  # valid rows / columns of a tile (copy bytes use them)
    tm, tn = -(-p.m // t.m), -(-p.n // t.n)
    ks = -(-p.k // t.split_k)
    ks = -(-ks // t.k_l1) * t.k_l1  # K per split, whole L1 chunks (the template's split grain)
    splits = -(-p.k // ks)
    items = p.batch * tm * tn * splits
    cores = target.num_aic
    # tail_split: the partial wave's `tail` tiles run as tail_f K ranges each (tail_geometry)
    tail, tail_f = (tail_geometry(p, t, target) if splits == 1 else None) or (0, 1)
    work = items - tail + tail * tail_f  # the kernel's work items
    bd = min(cores, work)
    share = target.hbm_bytes_per_cycle / bd
    env = CostEnv(target, share)
    k_item = p.k / splits
    n_l0 = math.ceil(k_item / t.k)
    n_l1 = math.ceil(k_item / t.k_l1)
    kc = min(t.k_l1, p.k)
    st = target.startup
    mmad = n_l0 * mmad_cycles(target, dt, t.m, t.n, t.k)
    mte1 = n_l0 * (2 * st["mte1"] + t.m * t.k * es / target.rate("l1", "l0a") + t.k * t.n * es / target.rate("l1", "l0b"))
    a_bytes = mm_ * kc * es  # per L1 load
    b_bytes = kc * nn_ * es
    out_bytes = 4 if splits > 1 or p.ffn_up else p.out_bytes
    aiv0 = 0.0  # ffn_up's vector stage per item on AIV 0 (split cores)
    if target.arch.fixpipe:
        fix = copy_startup(target, Pipe.FIX, None) + mm_ * nn_ * out_bytes / env.gm_rate(target.rate("l0c", "gm"), "l0c", "gm")
        if p.ffn_up:  # AIV 0: the accumulators back from the workspace (L2), act·mul, the h tile out
            aiv0 = (nacc * copy_startup(target, Pipe.MTE2, None) + mm_ * nn_ * 4 / env.gm_rate(target.rate("gm", "ub"), "gm", "ub", True)
                    + env.gm_latency("gm", "ub", True) + act_mul_cycles(target, p.act or "vsilu", nacc, t.m * t.n // nacc, bool(p.bias_bytes))
                    + copy_startup(target, Pipe.MTE3, None) + mm_ * nn_ // nacc * es / env.gm_rate(target.rate("ub", "gm"), "ub", "gm"))
    else:  # no FixPipe (910A, S1): L0C -> UB on the vector pipe, UB -> GM on MTE3
        vec = act_mul_cycles(target, p.act or "vsilu", nacc, t.m * t.n // nacc, bool(p.bias_bytes)) if p.ffn_up else 0.0
        stored = mm_ * nn_ * (es // nacc if p.ffn_up else out_bytes)
        fix = (copy_startup(target, Pipe.V, None) + t.m * t.n * 4 / target.rate("l0c", "ub") + vec + copy_startup(target, Pipe.MTE3, None)
               + stored / env.gm_rate(target.rate("ub", "gm"), "ub", "gm"))
    nd2nz = copy_startup(target, Pipe.MTE2, "nd2nz")
    b_head = copy_startup(target, Pipe.MTE2, "nz" if p.b_nz else "nd2nz")  # B weights stored NZ: no conversion
    r_hit = env.gm_rate(target.rate("gm", "l1"), "gm", "l1", True)
    r_miss = env.gm_rate(target.rate("gm", "l1"), "gm", "l1", False)

    u_hit = env.gm_rate(target.rate("gm", "ub"), "gm", "ub", True)
    u_miss = env.gm_rate(target.rate("gm", "ub"), "gm", "ub", False)
    if p.l2_warm:  # no read misses: a first read costs what a hit does
        r_miss, u_miss = r_hit, u_hit
    mte2_head = copy_startup(target, Pipe.MTE2, None)

    def aiv_cycles(hb: float) -> float:
        """One item's prefetch on the prefetching AIVs (two take alternate chunks; one takes all)."""
        lat = hb * env.gm_latency("gm", "ub", True) + (1 - hb) * env.gm_latency("gm", "ub", False)
        read = pf_share * b_bytes * (hb / u_hit + (1 - hb) / u_miss)
        if p.ffn_up:  # every AIV every chunk, its own weight's 1 / pf_aivs of it
            return n_l1 * (mte2_head + read / pf_aivs + lat)
        return n_l1 * (mte2_head + read + lat) / pf_aivs

    halves = not p.ffn_up and fixpipe_halves(target, dt, t, splits, [p.n], p.k, out_bytes, p.bias_bytes > 0, -(-work // bd))
    if halves:
        half, whole = mmad_cycles(target, dt, t.m, t.n // 2, t.k), mmad_cycles(target, dt, t.m, t.n, t.k)
        per_chunk = min(t.l1_depth, n_l0)  # L0 steps of one L1 chunk
        halved = min(n_l0, 2 * per_chunk)  # the first and the last chunk (or the only one)
        cube = mmad + halved * (2 * half - whole) + max(0.0, fix - 2 * per_chunk * half)
    else:
        cube = mmad + fix

    def item_cycles(ha: float, hb: float, vector: bool = True, pf_item: bool = prefetch, hb_pf: float | None = None,
                    chunks: int | None = None) -> tuple[float, float]:
        # the prefetched part of B hits L2; the AIC reads the rest as any re-read (hb); the
        # AIVs' own reads of a prefetched item hit at hb_pf (default hb). `chunks`: a tail
        # range's L1 chunks (its partial leaves as f32 pieces: tail_cube), else the whole K
        share = pf_share if pf_item else 0.0
        r = 1.0 if chunks is None else chunks / n_l1
        b_time = share / r_hit + (1 - share) * (hb / r_hit + (1 - hb) / r_miss)
        mte2 = r * n_l1 * (nd2nz + nacc * b_head + a_bytes * (ha / r_hit + (1 - ha) / r_miss) + b_bytes * b_time)
        pf = r * aiv_cycles(hb if hb_pf is None else hb_pf) if pf_item else 0.0
        # ffn_up's AIV 0 prefetches Wu beside its epilogue (gated): both on its MTE2, one after the other
        v0 = (aiv0 + (pf if p.ffn_up and pf_aivs == 2 else 0.0)) if vector else 0.0
        return max(mte2, r * mte1, cube if chunks is None else tail_cube(chunks), pf, v0), mte2

    def tail_cube(chunks: int) -> float:
        """M + FIX of a tail range of `chunks` L1 chunks (templates/matmul.py `_tail_item`): its
        mmads, its f32 partial out in tail_piece pieces (one FixPipe start-up each), behind two
        half chunks of mmads when the range runs by column halves (two chunks or more)."""
        rows, cols = tail_piece(t)
        steps = chunks * min(t.l1_depth, n_l0)
        fix_t = (t.m // rows) * (t.n // cols) * copy_startup(target, Pipe.FIX, None) + t.m * t.n * 4 / env.gm_rate(
            target.rate("l0c", "gm"), "l0c", "gm")
        if halves and chunks >= 2 and cols == t.n // 2:
            per = min(t.l1_depth, n_l0)
            return steps * whole + min(steps, 2 * per) * (2 * half - whole) + max(0.0, fix_t - 2 * per * half)
        return steps * mmad_cycles(target, dt, t.m, t.n, t.k) + fix_t

    # L2 (interpreter/l2.py): a re-read hits when the previous read of the same tile is at most
    # `window` cycles back. Items run in waves of bd; with swizzle s the A panel of a row is
    # re-read s items later, the B panel of a column at once by the other rows of the group and
    # s·tn items later by the next group (s = 1: row-major, B re-read tn items later).
    window = target.memory.l2_bytes / target.hbm_bytes_per_cycle
    s = min(t.swizzle, tm)
    t_item, _ = item_cycles(1.0, 1.0)
    # A B panel's first re-read comes after the first row group's items, which read their B
    # chunks from HBM (or wait for the AIVs' first reads of them): that distance is timed at
    # their speed. Timed at the speed of hits it passed where the simulator misses, and every
    # later re-read misses with it (70B TP2 prefill ffn_down 2048 x 8192 x 14336, B stored NZ:
    # estimated 2.74 M, simulated 6.34 M).
    t_first, _ = item_cycles(1.0, 0.0, hb_pf=0.0)

    def hits(distance_items: float, per_item: float = t_item) -> bool:
        return distance_items / bd * per_item <= window

    reads_a = tn  # reads of each A panel (per split, per batch)
    reads_b = tm
    hit_a = (reads_a - 1) if hits(s) else 0
    groups = -(-tm // s)
    # ffn_up prefetches the first row of tiles only (`first_row`, ffn_up.py `_first_row`) when
    # the later rows' re-reads of its weight panels hit (tn items later: ffn_up runs its tiles
    # row-major): their B reads need no prefetch. Otherwise the AIVs read every B chunk ahead
    # of the AIC, at least one wave (AIV 0: the next tile's Wu before this tile's epilogue),
    # which shortens the re-read distance by as much.
    first_row = bool(p.ffn_up and prefetch and groups > 1 and hits(s * tn, t_first))
    lead = bd if p.ffn_up and prefetch and not first_row else 0
    b_rehit = hits(s * tn - lead, t_first)
    hit_b = (reads_b - groups) + ((groups - 1) if b_rehit else 0)
    ha = 1.0 if p.l2_warm else hit_a / reads_a
    hb = 1.0 if p.l2_warm else hit_b / reads_b
    pf_frac = 1 / tm if first_row else 1.0  # of the items, those the AIVs prefetch

    def mixed(vector: bool = True) -> tuple[float, float]:
        """(item, MTE2) cycles averaged over the items: with `first_row`, the first row's items
        prefetched (the AIVs' reads are first reads: misses), the others reading B from L2."""
        if not first_row:
            return item_cycles(ha, hb, vector)
        a, b = item_cycles(ha, hb, vector, True, 0.0), item_cycles(ha, 1.0, vector, False)
        return pf_frac * a[0] + (1 - pf_frac) * b[0], pf_frac * a[1] + (1 - pf_frac) * b[1]

    t_item, mte2 = mixed()
    per_core = -(-work // bd)
    warm = _warm_a_cycles(p, t, target, items, bd, t_item, window, n_l1, mte2_head + a_bytes / u_miss + env.gm_latency("gm", "ub", False))
    if warm:  # every AIC read of A hits
        ha = 1.0
        t_item, mte2 = mixed()
    if warm:  # the AIC reads its first B chunk itself (HBM), then A, which the idle AIVs are warming (`_Prefetch.first`)
        fill = n_l1 and nd2nz + nacc * b_head + b_bytes / r_miss + a_bytes / r_hit + env.gm_latency("gm", "l1", False)
    elif prefetch:  # the first B chunk comes through an AIV, then the AIC reads it from L2
        fill = n_l1 and (nd2nz + nacc * b_head + a_bytes / r_miss + b_bytes * (pf_share / r_hit + (1 - pf_share) / r_miss)
                         + env.gm_latency("gm", "l1", False) + mte2_head + pf_share * b_bytes / (pf_aivs if p.ffn_up else 1) / u_miss
                         + env.gm_latency("gm", "ub", False))
    else:
        fill = n_l1 and (nd2nz + nacc * b_head + (a_bytes + b_bytes) / r_miss + env.gm_latency("gm", "l1", False))
    if tail:  # the whole waves, then the core's tail ranges (the longest core: range_chunks)
        longest = max(range_chunks(n_l1, tail, tail_f, bd))
        core = (items - tail) // bd * t_item + (item_cycles(ha, hb, chunks=longest)[0] if longest else 0.0)
        core += fill + env.gm_latency("l0c", "gm")
    else:
        core = per_core * t_item + fill + env.gm_latency("l0c", "gm")
    if aiv0:  # the first item does not wait for a vector stage, the last one's follows the cube
        core += aiv0 - (t_item - mixed(vector=False)[0])
    gm_read = items * n_l1 * (a_bytes + b_bytes) + (p.m * p.k * es if warm else 0)  # the warm-up's reads are the misses
    # (with `first_row` the AIC's B reads of the first row are prefetched, the rest hit: all hit)
    l2_hit = items * n_l1 * (a_bytes * ha + b_bytes * (pf_share + (1 - pf_share) * hb))
    if prefetch:  # the AIVs read the prefetched part of B once more (as any re-read); the AIC's reads of it hit
        gm_read += items * pf_frac * n_l1 * pf_share * b_bytes
        l2_hit += items * pf_frac * n_l1 * pf_share * b_bytes * (0.0 if first_row else hb)
    # (ffn_up's fp32 accumulators are rewritten in the L2-resident workspace: the h tile reaches HBM)
    gm_write = (p.batch * tm * tn * splits - tail) * mm_ * nn_ * (es / nacc if p.ffn_up else out_bytes)
    gm_write += tail * tail_f * t.m * t.n * 4  # the tail ranges' f32 partials
    floor = bandwidth_bound_cycles(gm_read, gm_write, target, l2_hit)
    body = max(core, floor)
    parts = {"prefetch": float(prefetch), "warm_a": warm, "first_row": float(first_row), "b_regroup_misses": float(groups > 1 and not b_rehit), "core": core, "floor": floor, "item": t_item, "mmad": mmad, "mte1": mte1, "mte2": mte2, "fix": fix,
             "block_dim": bd, "items_per_core": per_core, "l2_hit_rate": l2_hit / gm_read if gm_read else 0.0}
    total = body + target.kernel_launch_cycles
    if splits > 1:
        red = _reduce_cycles(p, splits, target)
        parts["reduce"] = red
        total += red
    if tail:
        rows, cols = tail_piece(t)
        red = _reduce_cycles(p, tail_f, target, tail * t.m * t.n, rows * cols)
        parts["reduce"] = red
        total += red
    return Estimate(total, parts)


def range_chunks(chunks: int, tail: int, f: int, bd: int) -> list[int]:
    """L1 chunks of tail ranges each of `bd` cores runs (templates/matmul.py `tail_k`): the
    `tail` tiles' f ranges, split-major after the whole waves (a multiple of bd items), item q
    on core q mod bd; range s of a tile has chunks // f chunks, one more for s < chunks mod f."""
    per = [0] * bd
    for q in range(tail * f):
        s = q // tail
        per[q % bd] += chunks // f + (1 if s < chunks % f else 0)
    return per


def _warm_a_cycles(p: Problem, t: Tiling, target: HardwareConfig, items: int, bd: int, t_item: float, window: float,
                   n_l1: int, per_chunk: float) -> float:
    """AIV cycles of the A warm-up of a prefetching kernel (templates/matmul.py `_Prefetch.warm_a`),
    0.0 when it has none. When the items do not make whole waves, the cores of the partial last
    wave (`items mod bd` of them run one item more) leave the others' AIVs idle for one item:
    those AIVs read every A chunk [m, k·l1_depth] once, GM -> UB, at the kernel's start, so the
    AICs' reads of A (the first ones of each chunk otherwise miss, all on the few cores that
    start a tile row, which then end last) hit L2. It applies (a) to a prefetching matmul of
    one A (no split_k, tail_split, ffn_up), (b) with at least two items per core and cores with
    one item fewer, (c) when the A chunk fits the UB beside the B prefetch's chunk, (d) when the
    warm-up (`per_chunk` cycles a chunk, the chunks spread over the idle cores' prefetching
    AIVs: `prefetch_aivs`, one beside an AIV epilogue) takes at most one item, the slack of those
    cores, and (e) when the kernel's cores run within the L2 residency `window` (the warmed
    chunks are still there when the AICs read them)."""
    short = bd - items % bd if items % bd else 0
    per_core = -(-items // bd)
    aivs = prefetch_aivs(p, target)  # the AIVs that prefetch B warm A (beside an AIV epilogue: the second one)
    if not (t.prefetch and short and per_core > 1 and not p.ffn_up
            and t.split_k == 1 and t.tail_split < 2 and p.batch == p.a_batch == 1):
        return 0.0
    ub = aligned_bytes(target, "ub", t.m * t.k_l1 * p.es) + aligned_bytes(target, "ub", t.k_l1 * t.n * p.es)
    cycles = -(-(-(-p.m // t.m) * n_l1) // (aivs * short)) * per_chunk
    if ub > target.capacity("ub") or cycles > t_item or per_core * t_item > window:
        return 0.0
    return cycles


def warms_a(p: Problem, t: Tiling, target: HardwareConfig) -> bool:
    """Whether the matmul kernel of tiling `t` warms A into L2 on idle AIVs (`_warm_a_cycles`;
    templates/matmul.py obeys it)."""
    return estimate(p, t, target).parts["warm_a"] > 0


def _reduce_cycles(p: Problem, splits: int, target: HardwareConfig, total: int | None = None, tile: int = REDUCE_TILE) -> float:
    """The split-K reduction kernel (templates/matmul.py `_emit_split_k_reduce`): AIV tiles of
    REDUCE_TILE elements, `splits` f32 loads (L2 hits: the partials were just written, write-
    allocate), splits-1 vadds (+ vcast), one store; launch head on top. With `total` elements
    in pieces of `tile`: tail_split's reduction (`_emit_tail_reduce`, `tail_piece` pieces)."""
    total = p.batch * p.m * p.n if total is None else total
    tiles = -(-total // tile)
    bd = min(target.num_aiv, tiles)
    env = CostEnv(target, target.hbm_bytes_per_cycle / bd)
    e = min(tile, total)
    load = copy_startup(target, Pipe.MTE2, None) + e * 4 / env.gm_rate(target.rate("gm", "ub"), "gm", "ub", True)
    store = copy_startup(target, Pipe.MTE3, None) + e * p.out_bytes / env.gm_rate(target.rate("ub", "gm"), "ub", "gm")
    per_tile = splits * load + store  # MTE2 dominates; V (vadd 256 B/cycle) is far below it
    core = -(-tiles // bd) * per_tile + env.gm_latency("gm", "ub", True) + env.gm_latency("ub", "gm")
    floor = bandwidth_bound_cycles(total * 4 * splits, total * p.out_bytes, target, total * 4 * splits)
    return max(core, floor) + target.kernel_launch_cycles


# ----------------------------------------------------------------------------------------------
# search
# ----------------------------------------------------------------------------------------------
def candidates(p: Problem, target: HardwareConfig, swizzles: tuple[int, ...] = SWIZZLE_CHOICES):
    """Every aligned tiling that fits `target` (see the module docstring for the grids), with
    swizzle from `swizzles`."""
    es = p.es
    ka = max(1, 32 // es)
    m16, n16, kal = -(-p.m // 16) * 16, -(-p.n // 16) * 16, -(-p.k // ka) * ka
    ms = sorted({min(x, m16) for x in M_CHOICES})
    min_n = min(n16, -(-MIN_GM_ROW_BYTES // es // 16) * 16)  # B rows of >= 128 B (S2)
    ns = sorted({min(x, n16) for x in N_CHOICES if min(x, n16) >= min_n})
    ks_ = sorted({min(b // es, kal) for b in K_BYTES_CHOICES if b // es >= ka})
    for bm in ms:
        tm = -(-p.m // bm)
        for bn in ns:
            if bm * bn * 4 > target.capacity("l0c"):
                continue
            for bk in ks_:
                for depth in DEPTH_CHOICES:
                    if depth > 1 and bk * depth > kal * 2:
                        continue
                    if depth * bk * es < min(MIN_GM_ROW_BYTES, kal * es):  # A rows of >= 128 B (S2)
                        continue
                    for sk in SPLIT_K_CHOICES:
                        # (an int8 product's partial sums are int32: the f32 split-K workspace does not take them)
                        if sk > 1 and (p.epilogue or p.batch > 1 or depth * bk * sk > kal or p.dtype == "i8"):
                            continue
                        for sw in swizzles:
                            if sw > 1 and sw >= tm * 2:
                                continue
                            t = Tiling(bm, bn, bk, depth, sk, sw)
                            if misfit(p, t, target) is None:
                                yield t
                                # the AIVs prefetch B; the AIC still streams A and pays its first-read
                                # misses, which fall on the cores that start tile rows. Unless A is
                                # the smaller operand (M < N), the search prefetches only tiles whose
                                # B part is the larger (n >= m). 910B2 fp16 weight GEMMs with
                                # prefetch, 256x128 vs 128x256 (l1_depth 4): 4096^3 787.8 K vs
                                # 772.9 K cycles; 14336x4096x4096 2.86 M (one core 10 % behind the
                                # others) vs 2.70 M (l1_depth 5); but 512x11008x4096 (M < N) 83.4 % vs
                                # 78.1 % of the cube
                                pf = (bm <= bn or p.m < p.n) and prefetch_fits(p, t, target)
                                if pf:
                                    yield replace(t, prefetch=1)
                                # the partial last wave's tiles as K ranges over every AIC (catlass
                                # TailSplitK) with the B prefetch, where tail_misfit allows it and
                                # not beside the A warm-up (see TAIL_SPLIT_CHOICES)
                                if pf and sk == 1 and sw == 1:
                                    u = replace(t, prefetch=1)
                                    if tail_misfit(p, replace(u, tail_split=2), target) is None and not warms_a(p, u, target):
                                        for f in TAIL_SPLIT_CHOICES:
                                            if tail_misfit(p, replace(u, tail_split=f), target) is None:
                                                yield replace(u, tail_split=f)


def ranked(p: Problem, e: Estimate, t: Tiling) -> float:
    """The cycles a tiling is ranked by: its estimate, raised by PREFETCH_MARGIN when it
    prefetches a B that is not a constant weight."""
    return e.cycles * (1 + PREFETCH_MARGIN) if t.prefetch and not p.b_nz else e.cycles


def search(p: Problem, target: HardwareConfig) -> SearchResult:
    """The candidate with the fewest `ranked` cycles; among those within ESTIMATE_RESOLUTION of
    the fewest (which the estimate cannot order), fewer splits, fewer tail ranges, no swizzle,
    no prefetch, then the larger output tile, the deeper L1 chunk, the larger k.

    Raises:
        AscendirError: when no candidate fits (not even 16 x 16 x 32 B tiles)."""
    t0 = time.perf_counter()
    scored: list[tuple[tuple, Tiling, Estimate]] = []
    n = 0
    tm_max = -(-p.m // 16)
    for t1 in candidates(p, target, (1,)):
        # swizzle only changes B panels re-read by a later row group: try it only when the
        # row-major order misses them (estimate flag), and only up to the tile rows there are
        tm = -(-p.m // t1.m)
        for sw in SWIZZLE_CHOICES:
            if sw > 1 and (sw >= 2 * tm or sw > tm_max):
                continue
            t = t1 if sw == 1 else replace(t1, swizzle=sw)
            n += 1
            e = estimate(p, t, target)
            scored.append(((t.split_k, t.tail_split, t.swizzle, t.prefetch, -t.m * t.n, -t.k_l1, -t.k, round(ranked(p, e, t))), t, e))
            if sw == 1 and not e.parts["b_regroup_misses"]:
                break
    if not scored:
        raise AscendirError(f"matmul {p.m}x{p.k}x{p.n} {p.dtype}: no tiling fits {target.name}")
    least = min(c[0][-1] for c in scored)
    _, best, best_e = min((c for c in scored if c[0][-1] <= least * (1 + ESTIMATE_RESOLUTION)), key=lambda c: c[0])
    return SearchResult(best, best_e, n, time.perf_counter() - t0)


# The alignment every op's field needs whatever its shape and dtype (S3): m, n, bc multiples of
# 16 rows / columns, k of 32 B of the widest operand (f32: 8 elements; f16 / bf16 need 16,
# checked per op by check_fits). br is checked per attention (flash_attention.forced: Br = Sq
# is allowed below 16 queries). Checked up front so no path (CLI, pass option, IR attribute)
# reaches a template or cost formula with a zero, negative or misaligned tile.
FIELD_ALIGN = {"m": 16, "n": 16, "k": 8, "bc": 16}
FIELD_MAX = 65536
"""The largest value of any field: a tile edge beyond it fits no buffer of any chip, and a
split_k or swizzle beyond it would only make the search loop longer."""
_ENTRY = re.compile(r"([a-z_0-9]+)=(-?[0-9]{1,12})", re.ASCII)  # 12 digits: int() of 5,000 digits refuses


def check_fields(fields: dict[str, int], where: str) -> None:
    """Raises AscendirError (`{where}: ...`) for a field < 1, > FIELD_MAX or one off FIELD_ALIGN."""
    for key, v in fields.items():
        if key in OPTIONAL_FIELDS and v in (0, 1):
            continue
        if key in FLAG_FIELDS:
            raise AscendirError(f"{where}: {key}={v} must be 0 or 1")
        if key in OPTIONAL_FIELDS and v < 0:
            raise AscendirError(f"{where}: {key}={v} must be >= 0 (0 or 1: none)")
        if v < 1:
            raise AscendirError(f"{where}: {key}={v} must be >= 1")
        if v > FIELD_MAX:
            raise AscendirError(f"{where}: {key}={v} is larger than {FIELD_MAX}")
        a = FIELD_ALIGN.get(key)
        if a and v % a:
            raise AscendirError(f"{where}: {key}={v} is not aligned ({key} must be a multiple of {a}; S3)")


def parse_tiling(spec: str, source: str = "--tiling") -> dict[str, int]:
    """`"m=128,n=128,k=64,br=64"` -> {"m": 128, ...}; keys from FIELDS (matmul) and
    ATTENTION_FIELDS (flash attention). Entries are separated by `,` (or `;`); whitespace around
    an entry, key or value is ignored (`"m = 128, n=64"` is `"m=128,n=64"`); values are plain
    decimal integers >= 1, aligned as FIELD_ALIGN says. `source` names where the spec came from in
    errors (`--tiling`, or `choose-tiling` for that pass's option).

    Raises:
        AscendirError: an unknown or repeated key, an empty entry, a value that is not a decimal
            integer, < 1 or misaligned."""
    out: dict[str, int] = {}
    keys = ", ".join(FIELDS + ATTENTION_FIELDS)
    shown = spec if len(spec) <= 80 else spec[:79] + "…"  # the message stays one short line
    where = f"bad --tiling '{shown}'" if source == "--tiling" else f'bad {source} option tiling="{shown}"'
    for part in (s.strip() for s in spec.replace(";", ",").split(",")):
        if not part:
            raise AscendirError(f"{where}: empty entry (expected KEY=INT,KEY=INT..., KEY in {keys})")
        m = _ENTRY.fullmatch(re.sub(r"\s*=\s*", "=", part, count=1))
        if m is None or m.group(1) not in FIELDS + ATTENTION_FIELDS:
            raise AscendirError(f"{where}: bad entry '{part if len(part) <= 40 else part[:39] + '…'}' (expected KEY=INT, KEY in {keys})")
        key = m.group(1)
        if key in out:
            raise AscendirError(f"{where}: key '{key}' given twice")
        out[key] = int(m.group(2))
    check_fields(out, where)
    return out


def _fields(attr: Attribute | None, allowed: tuple[str, ...], what: str) -> dict[str, int] | None:
    if attr is None:
        return None
    # `what` names the op: its kind, or the caller's description (`nn.matmul #3 ('/0/Gemm')`)
    where = f"{TILING_ATTR} of {what}" if what in ("nn.matmul", "nn.attention") else f"{what}: {TILING_ATTR}"
    if not isinstance(attr, TilingAttr):
        raise AscendirError(f"{where} must be a #ascend.tiling<{{...}}> dictionary {{{' = .., '.join(allowed)} = ..}}, got {attr}")
    out = {}
    for key, v in attr.data.items():
        if key not in allowed or not isinstance(v, IntegerAttr):
            raise AscendirError(f"{where}: bad entry {key} = {v} (integers for {', '.join(allowed)})")
        out[key] = v.value.data
    check_fields(out, where)
    return out


def tiling_from_attr(attr: Attribute | None, what: str = "nn.matmul") -> dict[str, int] | None:
    """The fields of an nn.matmul's `ascend.tiling` dictionary attribute (None when absent);
    `what` names the op in errors.

    Raises:
        AscendirError: a key not in FIELDS, a value that is not an integer, < 1 or misaligned."""
    return _fields(attr, FIELDS, what)


def attention_fields(attr: Attribute | None, what: str = "nn.attention") -> dict[str, int] | None:
    """The fields of an nn.attention's `ascend.tiling` ({br = .., bc = ..}; None when absent);
    `what` names the op in errors.

    Raises:
        AscendirError: a key not in ATTENTION_FIELDS, a value that is not an integer or < 1."""
    return _fields(attr, ATTENTION_FIELDS, what)


def attention_attr(br: int, bc: int) -> TilingAttr:
    return TilingAttr({"br": br, "bc": bc})


def complete(p: Problem, fields: dict[str, int], target: HardwareConfig, count: bool = False):
    """A full Tiling from user fields: missing m / n / k / l1_depth from the search's best
    candidate with the given fields held fixed (a given value off the grid: the grid's candidates
    with it substituted, those that fit; when none fits, the largest tile around the given fields
    that fits, else the given ones with the template defaults, which check_fits then rejects),
    split_k / swizzle default 1. With `count`: (tiling, candidates scored)."""
    if set(FIELDS) - set(OPTIONAL_FIELDS) <= set(fields):  # fully specified (e.g. written by annotate): nothing to search
        t = Tiling(**{f: fields[f] for f in FIELDS if f in fields})
        return (t, 0) if count else t
    best, n = None, 0
    grid = list(candidates(p, target)) if p.dtype in target.cube.k_per_cycle else []
    for t in grid:
        if all(getattr(t, f) == v for f, v in fields.items()):
            e = ranked(p, estimate(p, t, target), t)
            n += 1
            if best is None or e < best[0]:
                best = (e, t)
    if best is None and grid:
        # a given value off the search grid (m=272, l1_depth=13, ...): the grid's other fields
        # around it, every combination that can be lowered
        for t in sorted({replace(c, **fields) for c in grid if c.swizzle == 1}, key=Tiling.text):
            if fit_error(p, t, target) is None:
                e = ranked(p, estimate(p, t, target), t)
                n += 1
                if best is None or e < best[0]:
                    best = (e, t)
    if best is not None:
        t = best[1]
    else:
        es = p.es
        base = {"m": min(128, -(-p.m // 16) * 16), "n": min(256, -(-p.n // 16) * 16), "k": 128 // es, "l1_depth": 1, "split_k": 1, "swizzle": 1, "prefetch": 0}
        base.update(fields)
        t = Tiling(**base)
        if fit_error(p, t, target) is not None and not fit_error(p, t, target).startswith("is not aligned"):
            # the largest completion around the given fields, if any fits (else `t` and its error)
            fit = largest_fit(p, t, target, frozenset(fields))
            if fit is not None and fit_error(p, fit, target) is None:
                t = fit
            elif modes := {f: fields[f] for f in ("split_k", "prefetch", "tail_split") if f in fields}:
                # no tile takes the forced split_k / prefetch / tail_split: the error shows them
                # on a tile that fits the buffers, so it gives their reason (tail_split on an
                # ffn_up matmul), not the overflow of a default tile nobody asked for
                plain = largest_fit(p, replace(t, split_k=1, prefetch=0, tail_split=0), target, frozenset(fields) - set(modes))
                if plain is not None:
                    t = replace(plain, **modes)
    return (t, n) if count else t


def tiling_for_op(op: Operation, p: Problem, target: HardwareConfig, what: str) -> Tiling | None:
    """The Tiling an op's `ascend.tiling` attribute asks for (completed and checked), or None."""
    fields = tiling_from_attr(op.attributes.get(TILING_ATTR), what)
    if fields is None:
        return None
    t = complete(p, fields, target)
    check_fits(p, t, target, what)
    return t
