"""nn.conv2d on the Cube: img2col (MTE2 strided window reads, one slab per kernel offset) into a
GM column matrix, then one batched `mmad` kernel (the matmul template) whose epilogue adds the
per-channel bias -- a column of the product, so on 910B the AIV half of a mix kernel adds it (the
bias table BT only holds a row), on 910A the vector unit after L0C -> UB -- and, for
`nn.fused {kind = #nn.fused_kind<conv_activation>}` (fuse-conv-activation), applies ReLU / ReLU6 / SiLU before
the tile is final: no GM round trip of the pre-activation. Without bias, ReLU is FixPipe's.
Depthwise convolutions (group == C == O) go to the vector unit instead (`window_vector.py`):
their per-channel K = kh*kw is far below a cube fractal, so the cube would mostly multiply
padding.

Layout: for image n and group g the conv is W_g[Og, K] @ col[n, g][K, Ho*Wo] with
K = Cg*kh*kw ordered (c, i, j) -- exactly ONNX's weight layout [O, Cg, kh, kw] -- and the
product [Og, Ho*Wo] is already the NCHW result, so neither weights nor output are transposed.

The img2col kernel (AIV, block-cyclic over channel tiles; two UB slots ping-pong):

    prime MTE3->V (slot free) x2
    scf.for %t = %block_idx to N*C/cc step block_dim         // cc channels of one image
      for each output row tile, for each kernel offset (i, j) (unrolled: static geometry)
        wait MTE3->V;  vdup 0 when the slab reads padding (V);  set/wait V->MTE2
        GM->UB (MTE2) x[c, oh*sh + i*dh - pt, ow*sw + j*dw - pl]  (strided subview)
        set/wait MTE2->MTE3;  UB->GM (MTE3) col[c, (i, j), rows];  set MTE3->V
    drain MTE3->V x2

This is the explicit-img2col form CANN uses where load3d cannot be used; fusing load3d (L1 ->
L0A img2col on MTE1) into the matmul kernel would save the GM round trip of `col` (TODO).
A 1x1, stride-1, unpadded conv needs no img2col: col is x itself.
"""

from __future__ import annotations

import math

import ml_dtypes
from xdsl.ir import Operation, SSAValue

from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.dtypes import to_numpy_dtype
from ascendir.conversion.nn_to_ascend.templates.elementwise import VectorMap, emit_activation, emit_vector_map, ub_budget, vector_cores
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder, ceil_div
from ascendir.conversion.nn_to_ascend.templates.epilogue import Epilogue
from ascendir.conversion.nn_to_ascend.templates.matmul import emit_matmul
from ascendir.conversion.nn_to_ascend.templates.window import Window, largest_divisor
from ascendir.conversion.nn_to_ascend.templates.window_vector import emit_window_vector


def window_of(op: nn.WindowOp, in_shape: tuple[int, ...], out_shape: tuple[int, ...], kernel) -> Window:
    """The static geometry of a window op (NCHW)."""
    return Window(
        in_shape[2], in_shape[3], out_shape[2], out_shape[3], tuple(kernel), tuple(op.strides.get_values()),
        tuple(op.pads.get_values()), tuple(op.dilations.get_values()),
    )


def emit_img2col(ctx: LoweringContext, x: SSAValue, win: Window) -> SSAValue:
    """Launch the img2col kernel: GM x [N, C, H, W] → new GM col [N, C, kh*kw, Ho, Wo] (padding
    reads as 0).

    Raises:
        AscendirError: when not even one output row of one channel fits UB.
    """
    n, c = shape(x)[:2]
    el = elem(x)
    kh, kw = win.kernel
    col = ctx.buffer([n, c, kh * kw, win.ho, win.wo], el)
    nc = n * c
    es = itemsize(el)
    budget = ub_budget(ctx) // 2  # two slots
    row_bytes = win.wo * es
    if row_bytes > budget:
        raise ctx.error(f"img2col: one output row ({win.wo} elements) does not fit UB")
    th = largest_divisor(win.ho, budget // row_bytes)
    cores = vector_cores(ctx)
    cc = largest_divisor(nc, min(budget // (th * row_bytes), max(1, nc // cores)))
    ntiles = nc // cc
    block_dim = min(cores, ntiles)

    args = [ctx.view(x, [nc, win.h, win.w]), ctx.view(col, [nc, kh * kw, win.ho, win.wo])]
    kb = KernelBuilder(ctx, ctx.name("img2col"), [a.type for a in args], CoreType.AIV, block_dim, ctx.current)
    gm_x, gm_col = kb.args
    slots = [kb.alloc([cc, th, win.wo], el, MemSpace.UB) for _ in range(2)]
    free = [kb.event(Pipe.MTE3, Pipe.V) for _ in range(2)]
    v_to_mte2 = [kb.event(Pipe.V, Pipe.MTE2) for _ in range(2)]
    mte2_to_mte3 = [kb.event(Pipe.MTE2, Pipe.MTE3) for _ in range(2)]
    for e in free:
        kb.set_flag(Pipe.MTE3, Pipe.V, e)
    sh, sw = win.strides
    with kb.tiles(ntiles) as t:
        r0 = kb.mul(t, cc)
        s = 0
        for row0 in range(0, win.ho, th):
            for slab in win.slabs(row0, th):
                k = s % 2
                buf = slots[k]
                kb.wait_flag(Pipe.MTE3, Pipe.V, free[k])
                if slab.partial:
                    kb.emit(ascend.VdupOp(buf, 0.0))
                kb.set_flag(Pipe.V, Pipe.MTE2, v_to_mte2[k])
                kb.wait_flag(Pipe.V, Pipe.MTE2, v_to_mte2[k])
                if not slab.empty:
                    (a0, a1), (b0, b1) = slab.out_rows, slab.out_cols
                    src = kb.subview(gm_x, [r0, slab.in_row, slab.in_col], [cc, a1 - a0, b1 - b0], [1, sh, sw])
                    kb.copy(src, kb.subview(buf, [0, a0, b0], [cc, a1 - a0, b1 - b0]))
                kb.set_flag(Pipe.MTE2, Pipe.MTE3, mte2_to_mte3[k])
                kb.wait_flag(Pipe.MTE2, Pipe.MTE3, mte2_to_mte3[k])
                dst = kb.subview_keep(gm_col, [r0, slab.ij, row0, 0], [cc, 1, th, win.wo], keep=[0, 2, 3])
                kb.copy(buf, dst)
                kb.set_flag(Pipe.MTE3, Pipe.V, free[k])
                s += 1
    for e in free:
        kb.wait_flag(Pipe.MTE3, Pipe.V, e)
    ctx.launch(kb.finish(), args)
    return col


def is_depthwise(op: nn.Conv2dOp) -> bool:
    """group == C == O: one filter per channel (what the vector template handles)."""
    x, w = shape(op.input), shape(op.weight)
    g = op.group.value.data
    return g > 1 and g == x[1] and w[0] == g and w[1] == 1


def conv_activation_of(op: Operation) -> str | None:
    """The epilogue activation (`emit_activation` name) computing `op`, or None: ReLU, SiLU,
    Clip(0, 6) (ReLU6) and Clip(0, no upper bound) (ReLU); other Clip bounds are not epilogues."""
    if isinstance(op, nn.ReluOp):
        return "vrelu"
    if isinstance(op, nn.SiluOp):
        return "vsilu"
    if not isinstance(op, nn.ClipOp) or op.min is None or op.min.value.data != 0.0:
        return None
    hi = op.max.value.data if op.max is not None else math.inf
    if hi == 6.0:
        return "vrelu6"
    top = float(ml_dtypes.finfo(to_numpy_dtype(elem(op.input))).max)
    return "vrelu" if hi >= top else None


def _bias_activation(kb: KernelBuilder, ins: list[SSAValue], out: SSAValue, act: str | None) -> None:
    src = ins[0]
    if len(ins) > 1:
        kb.emit(ascend.vector_op("vadd")(ins[0], ins[1], out))
        src = out
    if act is not None:
        emit_activation(kb, act, src, out)


def emit_conv2d(ctx: LoweringContext, op: nn.Conv2dOp, operands: list[SSAValue], act: str | None = None) -> SSAValue:
    """nn.conv2d [+ `act`] → img2col + one cube matmul whose epilogue adds the per-channel bias
    (a column of W @ col) and applies `act` before the tile is final; depthwise → the vector
    window kernel (bias and `act` on each finished tile); grouped → matmul + one vector kernel.
    Returns the GM result [N, O, Ho, Wo]."""
    x, w = operands[0], operands[1]
    bias = operands[2] if len(operands) > 2 else None
    n, c, _, _ = shape(x)
    o, cg, kh, kw = shape(w)
    out = shape(op.result)
    el = elem(op.result)
    win = window_of(op, shape(x), out, (kh, kw))
    if math.prod(out) == 0:
        return ctx.buffer(out, el)
    if is_depthwise(op):
        return emit_window_vector(ctx, "dwconv", x, win, el, "dw", weight=w, bias=bias, activation=act)[0]
    g = op.group.value.data
    og, k, p = o // g, cg * kh * kw, win.ho * win.wo
    pointwise = (kh, kw) == (1, 1) and win.strides == (1, 1) and not any(win.pads)
    col = x if pointwise else emit_img2col(ctx, x, win)
    if g == 1:
        epilogue = Epilogue(activation=act, channel_bias=bias)
        return ctx.view(emit_matmul(ctx, ctx.view(w, [o, k]), ctx.view(col, [n, k, p]), [n, o, p], el, epilogue, base="conv"), out)
    y = ctx.view(emit_matmul(ctx, ctx.view(w, [g, og, k]), ctx.view(col, [n, g, k, p]), [n, g, og, p], el, base="conv"), out)
    if bias is None and act is None:
        return y
    ins = [y] + ([ctx.view(bias, [1, o, 1, 1])] if bias is not None else [])
    return emit_vector_map(ctx, "conv_epilogue", ins, out, el, VectorMap(lambda kb, i, r, t: _bias_activation(kb, i, r, act)))


def lower_conv2d(ctx: LoweringContext, op: Operation, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.conv2d → `emit_conv2d` without activation."""
    assert isinstance(op, nn.Conv2dOp)
    return [emit_conv2d(ctx, op, operands)]


def lower_conv_activation(ctx: LoweringContext, op: nn.FusedOp, operands: list[SSAValue]) -> list[SSAValue] | Declined:
    """Template of `nn.fused {kind = #nn.fused_kind<conv_activation>}` (fuse-conv-activation): conv2d then one
    activation of `conv_activation_of`, the activation applied in the conv's epilogue; Declined for
    another body."""
    block = op.body.block
    body = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    if len(body) != 2 or not isinstance(body[0], nn.Conv2dOp) or len(op.outputs) != 1:
        return Declined("the body is not one nn.conv2d and one activation with one output")
    conv, a = body
    act = conv_activation_of(a)
    args = dict(zip(block.args, operands))
    if act is None or a.operands[0] != conv.result or any(v not in args for v in conv.operands):
        return Declined(f"{a.name} after the conv is not an activation its epilogue applies to the conv's result")
    return [emit_conv2d(ctx, conv, [args[v] for v in conv.operands], act)]


__all__ = ["lower_conv2d", "lower_conv_activation", "emit_img2col", "window_of", "ceil_div"]
