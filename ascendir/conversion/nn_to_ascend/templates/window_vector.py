"""Window ops on the vector unit: max / average pooling and depthwise convolution.

Each output channel depends on its own input channel only, so the work is split into tiles of
`cc` channels (and static tiles of `th` output rows); per kernel offset (i, j) the strided input
window (a "slab", see `window.py`) is loaded into UB by MTE2 and combined into an accumulator by
the vector unit:

    max: acc = max(acc, slab)       (padding = the dtype's lowest finite value)
         with indices: mask = slab > acc; acc = sel(mask, slab, acc); idx = sel(mask, tap, idx)
         where tap = base + offset(i, j), base the i32 index of window offset (0, 0) per output
         position, built once per kernel in UB (varange and vadds); idx → i64 (vcast) for MTE3
    avg: acc = acc + slab, then acc * (1 / count)   (padding = 0; count per output position)
    dw : acc = acc + slab * w[c, i, j] (+ bias) (then an activation, fused by fuse-conv-activation)

Kernel (AIV, block-cyclic over channel tiles; single buffered):

    [avg with position-dependent counts: build 1/count per row tile in UB once (V)]
    prefill slab with padding (V) when the first slab is partial; prime V->MTE2, MTE3->V
    scf.for %t = %block_idx to NC/cc step block_dim
      for each row tile, for each (i, j) (unrolled: static geometry)
        wait V->MTE2;  GM->UB slab (+ weights/bias with the first slab) (MTE2);  set/wait MTE2->V
        [first slab of a row tile: wait MTE3->V]  combine into acc (V)  [last slab: + bias (V)]
        prefill the next slab with padding if it is partial (V);  set V->MTE2
        [last slab: scale / activation (V); set/wait V->MTE3; UB->GM (MTE3); set MTE3->V]
    drain MTE3->V, V->MTE2
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import i1, i32, i64
from xdsl.ir import Attribute, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize, to_numpy_dtype
from ascendir.conversion.nn_to_ascend.templates.elementwise import emit_activation, ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder
from ascendir.conversion.nn_to_ascend.templates.window import Window, largest_divisor


def lowest(el: Attribute) -> float:
    """The padding value of max pooling: the lowest finite value of `el` (what a vdup can hold
    in every float format; a real window always has at least one element inside the input)."""
    dt = to_numpy_dtype(el)
    if dt.kind in "iub":
        return float(np.iinfo(dt).min)
    # ml_dtypes.finfo also knows bfloat16, which numpy does not treat as floating (kind 'V')
    return float(ml_dtypes.finfo(dt).min)


def _v(name: str) -> type:
    return ascend.vector_op(name)


def emit_window_vector(
    ctx: LoweringContext,
    base: str,
    x: SSAValue,
    win: Window,
    out_elem: Attribute,
    mode: str,
    weight: SSAValue | None = None,
    bias: SSAValue | None = None,
    count_include_pad: bool = False,
    storage_order: int | None = None,
    activation: str | None = None,
) -> list[SSAValue]:
    """Launch the window kernel on GM x [N, C, H, W]; returns the new GM result [N, C, Ho, Wo]
    (and, with `storage_order`, the i64 indices of the maxima in their H x W plane).

    Args:
        mode: "max", "avg" or "dw" (depthwise conv: weight [C, 1, kh, kw], optional bias [C]).
        count_include_pad: avg only, ONNX AveragePool's attribute.
        storage_order: max only: also compute the indices, h * W + w (0) or h + w * H (1).
        activation: applied to each finished tile before the store (`emit_activation`), or None.

    Raises:
        AscendirError: when one output row of one channel does not fit UB.
    """
    n, c = shape(x)[:2]
    kh, kw = win.kernel
    result = ctx.buffer([n, c, win.ho, win.wo], out_elem)
    indices = ctx.buffer([n, c, win.ho, win.wo], i64) if storage_order is not None else None
    nc = n * c
    es = itemsize(out_elem)
    nbuf = 3 if mode == "dw" else 2  # acc, slab (+ product)

    # Output rows per row tile; avg with varying counts keeps 1/count of every row tile in UB.
    inv_counts = _inverse_counts(win, count_include_pad) if mode == "avg" else None
    uniform = inv_counts is not None and np.all(inv_counts == inv_counts.flat[0])
    budget = ub_budget(ctx)
    if inv_counts is not None and not uniform:
        budget -= win.ho * win.wo * es
    row_bytes = win.wo * es * nbuf
    if indices is not None:
        budget -= win.ho * win.wo * 4  # base indices, i32
        row_bytes += win.wo * (4 + 4 + 8 + 1)  # idx, tap (i32), idx as i64, mask (i1)
    if row_bytes > budget:
        raise ctx.error(f"{base}: one output row ({win.wo} elements) per buffer does not fit UB")
    th = largest_divisor(win.ho, budget // row_bytes)
    cores = vector_cores(ctx)
    # A tile never straddles two images, so channel c of tile row r is r % C (weights, bias).
    cc = largest_divisor(c if mode == "dw" else nc, min(budget // (th * row_bytes), max(1, nc // cores)))
    ntiles = nc // cc
    block_dim = min(cores, ntiles)

    args = [ctx.view(x, [nc, win.h, win.w]), ctx.view(result, [nc, win.ho, win.wo])]
    if indices is not None:
        args.append(ctx.view(indices, [nc, win.ho, win.wo]))
    if mode == "dw":
        args.append(ctx.view(weight, [c, kh * kw, 1]))
        if bias is not None:
            args.append(ctx.view(bias, [c, 1, 1]))
    kb = KernelBuilder(ctx, ctx.name(base), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gm_x, gm_out = kb.args[:2]
    acc = kb.alloc([cc, th, win.wo], out_elem, MemSpace.UB)
    slab_buf = kb.alloc([cc, th, win.wo], out_elem, MemSpace.UB)
    prod = kb.alloc([cc, th, win.wo], out_elem, MemSpace.UB) if mode == "dw" else None
    w_ub = kb.alloc([cc, kh * kw, 1], out_elem, MemSpace.UB) if mode == "dw" else None
    b_ub = kb.alloc([cc, 1, 1], out_elem, MemSpace.UB) if mode == "dw" and bias is not None else None
    pad_value = lowest(out_elem) if mode == "max" else 0.0
    argmax = None
    if indices is not None:
        argmax = _ArgmaxBuffers(kb, win, cc, th, storage_order)

    scale = None
    if inv_counts is not None and not uniform:
        scale = kb.alloc([1, win.ho, win.wo], out_elem, MemSpace.UB)
        _build_inverse_counts(kb, scale, win, count_include_pad)

    row_tiles = [(row0, _touching(win.slabs(row0, th))) for row0 in range(0, win.ho, th)]
    flat = [(row0, s, si == 0, si == len(slabs) - 1) for row0, slabs in row_tiles for si, s in enumerate(slabs)]
    in_ev = kb.event(Pipe.V, Pipe.MTE2)
    raw_ev = kb.event(Pipe.MTE2, Pipe.V)
    out_free = kb.event(Pipe.MTE3, Pipe.V)
    out_raw = kb.event(Pipe.V, Pipe.MTE3)
    if flat[0][1].partial:
        kb.emit(ascend.VdupOp(slab_buf, pad_value))
    kb.set_flag(Pipe.V, Pipe.MTE2, in_ev)
    kb.set_flag(Pipe.MTE3, Pipe.V, out_free)
    sh, sw = win.strides
    with kb.tiles(ntiles) as t:
        r0 = kb.mul(t, cc)
        for idx, (row0, slab, first, last) in enumerate(flat):
            kb.wait_flag(Pipe.V, Pipe.MTE2, in_ev)
            if idx == 0 and w_ub is not None:
                c0 = kb.rem(r0, c) if nc != c else r0
                kb.copy(kb.subview(kb.args[2], [c0, 0, 0], [cc, kh * kw, 1]), w_ub)
                if b_ub is not None:
                    kb.copy(kb.subview(kb.args[3], [c0, 0, 0], [cc, 1, 1]), b_ub)
            if not slab.empty:
                (a0, a1), (b0, b1) = slab.out_rows, slab.out_cols
                src = kb.subview(gm_x, [r0, slab.in_row, slab.in_col], [cc, a1 - a0, b1 - b0], [1, sh, sw])
                kb.copy(src, kb.subview(slab_buf, [0, a0, b0], [cc, a1 - a0, b1 - b0]))
            kb.set_flag(Pipe.MTE2, Pipe.V, raw_ev)
            kb.wait_flag(Pipe.MTE2, Pipe.V, raw_ev)
            if first:
                kb.wait_flag(Pipe.MTE3, Pipe.V, out_free)
            if argmax is not None:
                argmax.combine(first, slab_buf, acc, row0, slab.ij)
            else:
                _combine(kb, mode, first, slab_buf, acc, prod, w_ub, slab.ij)
            if last and b_ub is not None:
                # before V releases the inputs (in_ev): the next tile's MTE2 reloads b_ub
                kb.emit(_v("vadd")(acc, b_ub, acc))
            nxt = flat[(idx + 1) % len(flat)][1]
            if nxt.partial:
                kb.emit(ascend.VdupOp(slab_buf, pad_value))
            kb.set_flag(Pipe.V, Pipe.MTE2, in_ev)
            if last:
                if mode == "avg":
                    if scale is not None:
                        kb.emit(_v("vmul")(acc, kb.subview(scale, [0, row0, 0], [1, th, win.wo]), acc))
                    else:
                        kb.emit(_v("vmuls")(acc, acc, float(inv_counts.flat[0])))
                if argmax is not None:
                    kb.emit(ascend.VcastOp(argmax.idx, argmax.idx64))
                if activation is not None:
                    emit_activation(kb, activation, acc, acc)
                kb.set_flag(Pipe.V, Pipe.MTE3, out_raw)
                kb.wait_flag(Pipe.V, Pipe.MTE3, out_raw)
                kb.copy(acc, kb.subview(gm_out, [r0, row0, 0], [cc, th, win.wo]))
                if argmax is not None:
                    kb.copy(argmax.idx64, kb.subview(kb.args[2], [r0, row0, 0], [cc, th, win.wo]))
                kb.set_flag(Pipe.MTE3, Pipe.V, out_free)
    kb.wait_flag(Pipe.MTE3, Pipe.V, out_free)
    kb.wait_flag(Pipe.V, Pipe.MTE2, in_ev)
    ctx.launch(kb.finish(), args)
    return [result] if indices is None else [result, indices]


def _touching(slabs: list) -> list:
    """The slabs that read the input. An offset that only sees padding adds nothing to a sum
    (0, or 0 x w), nor to a max (a window always holds one input element), so it is not issued:
    a kernel larger than its input (EfficientNet's 320x320 ceil-mode AveragePool on a 1x1 map)
    would otherwise loop over 102,400 offsets for one value. The first slab stays when none
    reads (it initialises the accumulator)."""
    return [s for s in slabs if not s.empty] or slabs[:1]


def _combine(kb: KernelBuilder, mode: str, first: bool, slab: SSAValue, acc: SSAValue,
             prod: SSAValue | None, w_ub: SSAValue | None, ij: int) -> None:
    """acc (op)= slab for one kernel offset; the first offset of a row tile initializes acc."""
    if mode == "dw":
        assert prod is not None and w_ub is not None
        cc = w_ub.type.get_shape()[0]
        w_ij = kb.subview(w_ub, [0, ij, 0], [cc, 1, 1])
        if first:
            kb.emit(_v("vmul")(slab, w_ij, acc))
        else:
            kb.emit(_v("vmul")(slab, w_ij, prod))
            kb.emit(_v("vadd")(acc, prod, acc))
    elif first:
        kb.emit(_v("vcopy")(slab, acc))
    else:
        kb.emit(_v("vmax" if mode == "max" else "vadd")(acc, slab, acc))


class _ArgmaxBuffers:
    """UB state of a max pool that also finds where each maximum is (ONNX MaxPool's Indices).

    `base[0, oh, ow]` is the index in the H x W plane of window offset (0, 0) of output (oh, ow):
    (oh*sh - top)*rs + (ow*sw - left)*cs with (rs, cs) = (W, 1) row-major or (1, H) column-major;
    kernel offset (i, j) adds i*dh*rs + j*dw*cs. Built once per kernel: varange for row 0, then
    rows doubled by vadds (log2(Ho) steps), all before the tile loop."""

    def __init__(self, kb: KernelBuilder, win: Window, cc: int, th: int, storage_order: int):
        self.kb, self.win, self.th = kb, win, th
        self.rs, self.cs = (win.w, 1) if storage_order == 0 else (1, win.h)
        self.base = kb.alloc([1, win.ho, win.wo], i32, MemSpace.UB)
        self.idx = kb.alloc([cc, th, win.wo], i32, MemSpace.UB)
        self.tap = kb.alloc([cc, th, win.wo], i32, MemSpace.UB)
        self.idx64 = kb.alloc([cc, th, win.wo], i64, MemSpace.UB)
        self.mask = kb.alloc([cc, th, win.wo], i1, MemSpace.UB)
        (sh, sw), (top, left, _, _) = win.strides, win.pads
        row0 = kb.subview(self.base, [0, 0, 0], [1, 1, win.wo])
        kb.emit(ascend.VarangeOp(kb.const(0), row0))
        kb.emit(_v("vmuls")(row0, row0, float(sw * self.cs)))
        kb.emit(_v("vadds")(row0, row0, float(-top * self.rs - left * self.cs)))
        done = 1
        while done < win.ho:
            rows = min(done, win.ho - done)
            src = kb.subview(self.base, [0, 0, 0], [1, rows, win.wo])
            kb.emit(_v("vadds")(src, kb.subview(self.base, [0, done, 0], [1, rows, win.wo]), float(done * sh * self.rs)))
            done += rows

    def combine(self, first: bool, slab: SSAValue, acc: SSAValue, row0: int, ij: int) -> None:
        """Fold the slab of kernel offset `ij` into acc / idx for output rows [row0, row0 + th)."""
        kb, win = self.kb, self.win
        i, j = divmod(ij, win.kernel[1])
        offset = float(i * win.dilations[0] * self.rs + j * win.dilations[1] * self.cs)
        base = kb.subview(self.base, [0, row0, 0], [1, self.th, win.wo])
        if first:
            kb.emit(_v("vcopy")(slab, acc))
            kb.emit(_v("vadds")(base, self.idx, offset))
            return
        kb.emit(_v("vadds")(base, self.tap, offset))
        kb.emit(ascend.VcmpOp("gt", slab, acc, self.mask))
        kb.emit(ascend.VselOp(self.mask, slab, acc, acc))
        kb.emit(ascend.VselOp(self.mask, self.tap, self.idx, self.idx))


def _inverse_counts(win: Window, count_include_pad: bool) -> np.ndarray:
    """1 / (number of window elements that count) per output position, [Ho, Wo] float64."""
    counts = np.zeros((win.ho, win.wo))
    for s in win.slabs(0, win.ho, inside_pads=count_include_pad):
        (a0, a1), (b0, b1) = s.out_rows, s.out_cols
        counts[a0:a1, b0:b1] += 1
    return 1.0 / np.maximum(counts, 1)


def _build_inverse_counts(kb: KernelBuilder, scale: SSAValue, win: Window, count_include_pad: bool) -> None:
    """scale[0, oh, ow] = 1 / count, computed by the vector unit before the tile loop: +1 over
    the rectangle of each kernel offset, then a reciprocal."""
    kb.emit(ascend.VdupOp(scale, 0.0))
    for s in win.slabs(0, win.ho, inside_pads=count_include_pad):
        if s.empty:
            continue
        (a0, a1), (b0, b1) = s.out_rows, s.out_cols
        part = kb.subview(scale, [0, a0, b0], [1, a1 - a0, b1 - b0])
        kb.emit(_v("vadds")(part, part, 1.0))
    kb.emit(_v("vrec")(scale, scale))


__all__ = ["emit_window_vector", "lowest", "math"]
