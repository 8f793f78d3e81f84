"""Softmax and normalizations (Layer-, Batch-, Instance-, Group-, LpNormalization)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

@converts("Softmax")
def convert_softmax(node: NodeContext) -> list[Value]:
    """Softmax → nn.softmax over one axis (default -1). Opset < 13 models, whose Softmax
    normalized the flattened trailing dims from `axis`, are upgraded at load by onnx's version
    converter, which rewrites that form."""
    return [node.emit(nn.SoftmaxOp(node.value(0), node.axis(node.attr("axis", -1), len(node.shape(0)))))]


@converts("LayerNormalization")
def convert_layer_norm(node: NodeContext) -> list[Value]:
    """LayerNormalization → nn.layer_norm over dims [axis, rank); the Mean and InvStdDev outputs,
    when used, are the op's statistics results (stash_type 1: f32, cast if the op keeps f64)."""
    if node.dtype(1) != node.dtype(0) or (node.has_input(2) and node.dtype(2) != node.dtype(0)):
        raise node.error("scale and bias must have the input's element type")
    axis = node.axis(node.attr("axis", -1), len(node.shape(0)))
    bias = node.value(2) if node.has_input(2) else None
    epsilon = float(node.attr("epsilon", 1e-5))
    stats = node.output_used(1) or node.output_used(2)
    stash_type = node.attr("stash_type", 1)
    if stats and stash_type != 1:
        raise node.error(f"stash_type={stash_type} (only 1, float32 statistics, is supported)")
    op = nn.LayerNormOp(node.value(0), node.value(1), bias, axis, epsilon, stats)
    node.state.emit(op)
    outs = [node.emit(nn.CastOp(r, f32)) if r.type.element_type != f32 else r for r in op.stats]
    return [op.result, *outs] if stats else [op.result, None, None]


@converts("BatchNormalization")
def convert_batch_norm(node: NodeContext) -> list[Value]:
    """BatchNormalization over the channel dim 1 of an N x C x ... input.

    Inference with known statistics → x * s + t with s and t folded at import; with statistics
    that are runtime inputs → the same with s = scale / sqrt(var + epsilon), t = B - mean * s
    computed by nn ops on the [C] vectors. training_mode=1 (opset ≥ 14) normalizes with the
    batch statistics (mean and population variance over every dim but 1) and returns the running
    statistics input * momentum + batch * (1 - momentum)."""
    shape, dtype = node.shape(0), node.dtype(0)
    if len(shape) < 2:
        raise node.error(f"expects an N x C x ... input, got shape {list(shape)}")
    training = bool(node.attr("training_mode", 0))
    if any(node.output_used(i) for i in range(1, 5)) and not (training and node.opset >= 14):
        raise node.error("the statistics outputs exist only with training_mode=1 (opset ≥ 14)")
    node.same_dtype(*range(5))
    epsilon = float(node.attr("epsilon", 1e-5))
    channel_shape = (shape[1],) + (1,) * (len(shape) - 2)  # broadcasts over N and spatial dims
    stats = [node.const(i) for i in range(1, 5)]
    if not training and all(v is not None for v in stats):
        scale, bias, mean, var = (v.astype(np.float64) for v in stats)
        with np.errstate(all="ignore"):  # var + epsilon <= 0 gives nan / inf, as onnxruntime's x / sqrt does
            s = scale / np.sqrt(var + epsilon)
            t = bias - mean * s
        y = node.emit(nn.MulOp(node.value(0), node.constant(s.astype(dtype).reshape(channel_shape), "scale")))
        return [node.emit(nn.AddOp(y, node.constant(t.astype(dtype).reshape(channel_shape), "shift")))]

    def per_channel(v: SSAValue) -> SSAValue:
        return node.emit(nn.ReshapeOp(v, channel_shape))

    x = node.value(0)
    if training:
        axes = [d for d in range(len(shape)) if d != 1]
        mean = node.emit(nn.ReduceMeanOp(x, axes, False))
        centered = node.emit(nn.SubOp(x, per_channel(mean)))
        var = node.emit(nn.ReduceMeanOp(node.emit(nn.MulOp(centered, centered)), axes, False))
    else:
        mean, var = node.value(3), node.value(4)
        centered = node.emit(nn.SubOp(x, per_channel(mean)))
    inv_std = node.emit(nn.RsqrtOp(node.emit(nn.AddOp(var, node.scalar(epsilon, dtype)))))
    s = node.emit(nn.MulOp(node.value(1), inv_std))
    y = node.emit(nn.AddOp(node.emit(nn.MulOp(centered, per_channel(s))), per_channel(node.value(2))))
    if not training:
        return [y]
    momentum = float(node.attr("momentum", 0.9))

    def running(i: int, batch: SSAValue) -> SSAValue:
        old = node.emit(nn.MulOp(node.value(i), node.scalar(momentum, dtype)))
        return node.emit(nn.AddOp(old, node.emit(nn.MulOp(batch, node.scalar(1.0 - momentum, dtype)))))

    return [y, running(3, mean), running(4, var)]


@converts("InstanceNormalization")
def convert_instance_norm(node: NodeContext) -> list[Value]:
    """InstanceNormalization over the spatial dims of each (n, c) → nn.layer_norm of x viewed as
    [N, C, spatial] over its last dim (unit scale), then the per-channel scale and B."""
    shape, dtype = node.shape(0), node.dtype(0)
    if len(shape) < 3:
        raise node.error(f"expects an N x C x spatial... input, got shape {list(shape)}")
    node.same_dtype(0, 1, 2)
    n, c = shape[:2]
    size = int(np.prod(shape[2:]))
    x = node.emit(nn.ReshapeOp(node.value(0), [n, c, size]))
    ones = node.constant(np.ones(size, dtype), "unit_scale")
    y = node.emit(nn.LayerNormOp(x, ones, None, 2, float(node.attr("epsilon", 1e-5))))
    channel = [c, 1]
    y = node.emit(nn.MulOp(y, node.emit(nn.ReshapeOp(node.value(1), channel))))
    y = node.emit(nn.AddOp(y, node.emit(nn.ReshapeOp(node.value(2), channel))))
    return [node.emit(nn.ReshapeOp(y, list(shape)))]


@converts("GroupNormalization")
def convert_group_norm(node: NodeContext) -> list[Value]:
    """GroupNormalization → nn.layer_norm of x viewed as [N, G, C/G · spatial] over its last dim
    (unit scale), then the affine per channel: scale and bias have one entry per channel from
    opset 21, one per group before (repeated over the group's channels)."""
    shape, dtype = node.shape(0), node.dtype(0)
    if len(shape) < 3:
        raise node.error(f"expects an N x C x spatial... input, got shape {list(shape)}")
    node.same_dtype(0, 1, 2)
    n, c = shape[:2]
    g = int(node.attr("num_groups", 0))
    if g < 1 or c % g:
        raise node.error(f"num_groups={g} does not divide {c} channels")
    size = int(np.prod(shape[2:]))
    x = node.emit(nn.ReshapeOp(node.value(0), [n, g, (c // g) * size]))
    y = node.emit(nn.LayerNormOp(x, node.constant(np.ones((c // g) * size, dtype), "unit_scale"), None, 2,
                                 float(node.attr("epsilon", 1e-5))))
    y = node.emit(nn.ReshapeOp(y, [n, c, size]))
    for i, combine in ((1, nn.MulOp), (2, nn.AddOp)):
        per = node.shape(i)[0] if node.shape(i) else 0
        if per not in (c, g):
            raise node.error(f"input {i} has {per} entries, not one per channel ({c}) or group ({g})")
        v = node.emit(nn.ReshapeOp(node.value(i), [per, 1]))
        if per != c:  # one per group: repeat over the group's channels
            v = node.emit(nn.ReshapeOp(node.emit(nn.ExpandOp(node.emit(nn.ReshapeOp(v, [g, 1, 1])), [g, c // g, 1])), [c, 1]))
        y = node.emit(combine(y, v))
    return [node.emit(nn.ReshapeOp(y, list(shape)))]


@converts("LpNormalization")
def convert_lp_norm(node: NodeContext) -> list[Value]:
    """LpNormalization → x / (sum |x|) (p = 1) or x / sqrt(sum x²) (p = 2) along `axis`; 0
    where the norm is 0."""
    rank = len(node.shape(0))
    axis = node.axis(int(node.attr("axis", -1)), rank)
    p = int(node.attr("p", 2))
    x = node.value(0)
    if p == 1:
        norm = node.emit(nn.ReduceSumOp(node.emit(nn.AbsOp(x)), [axis], True))
    elif p == 2:
        norm = node.emit(nn.SqrtOp(node.emit(nn.ReduceSumOp(node.emit(nn.MulOp(x, x)), [axis], True))))
    else:
        raise node.error(f"p={p} is not 1 or 2")
    # a zero norm means x is all zeros there: divide by 1, giving 0 rather than 0 / 0
    dtype = node.dtype(0)
    zero = node.emit(nn.EqualOp(norm, node.scalar(0.0, dtype)))
    norm = node.emit(nn.WhereOp(zero, node.scalar(1.0, dtype), norm))
    return [node.emit(nn.DivOp(x, norm))]



@converts("LRN")
def convert_lrn(node: NodeContext) -> list[Value]:
    """LRN over channels of x [N, C, ...] → x / (bias + alpha / size · s)^beta, s the sum of x²
    over the channel window [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to
    0..C-1: one nn.matmul of a constant 0/1 band [C, C] with x² as [N, C, rest] (each window a
    row of the band)."""
    shape = node.shape(0)
    dtype = node.dtype(0)
    if len(shape) < 2 or not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise node.error(f"expects a float tensor [N, C, ...], got {dtype} of shape {list(shape)}")
    size = int(node.attr("size", 0))
    if size < 1:
        raise node.error(f"size {size} must be >= 1")
    alpha, beta, bias = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))
    n, c = shape[0], shape[1]
    rest = int(np.prod(shape[2:], dtype=np.int64))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    ch = np.arange(c)
    band = ((ch[None, :] >= ch[:, None] - lo) & (ch[None, :] <= ch[:, None] + hi)).astype(dtype)
    x = node.value(0)
    sq = node.emit(nn.ReshapeOp(node.emit(nn.MulOp(x, x)), [n, c, rest]))
    s = node.emit(nn.ReshapeOp(node.emit(nn.MatmulOp(node.constant(band, "window"), sq)), list(shape)))
    scaled = node.emit(nn.AddOp(node.emit(nn.MulOp(s, node.scalar(alpha / size, dtype))), node.scalar(bias, dtype)))
    return [node.emit(nn.DivOp(x, node.emit(nn.PowOp(scaled, node.scalar(beta, dtype)))))]
