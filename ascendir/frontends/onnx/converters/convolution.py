"""Convolution and pooling over NCHW tensors: Conv, MaxPool, AveragePool.

auto_pad is resolved into explicit pads, 1-D windows become 2-D ones with a unit height (3-D pools
two 2-D ones), and ceil_mode becomes the pooled result's extra window; the nn ops carry explicit
2-D values only.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.quantization import qdq_conv
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.converters.window_attrs import _as_2d, _spatial_rank, _window_attrs
from ascendir.frontends.onnx.values import Constant, Value


@converts("Conv")
def convert_conv(node: NodeContext) -> list[Value]:
    """Conv (1-D or 2-D, NCHW) → nn.conv2d with explicit pads; 1-D runs over a unit height."""
    x_shape, w_shape = node.shape(0), node.shape(1)
    rank = _spatial_rank(node, x_shape)
    kernel = tuple(w_shape[2:])
    if node.has_attr("kernel_shape") and tuple(node.attr("kernel_shape")) != kernel:
        raise node.error(f"kernel_shape {node.attr('kernel_shape')} differs from the weight shape {list(w_shape)}")
    strides, pads, dilations = _as_2d(*_window_attrs(node, tuple(x_shape[2:]), kernel))
    if rank == 2 and (y := qdq_conv(node)) is not None:  # DequantizeLinear operands: the int8 product
        return [y]
    x, w = node.value(0), node.value(1)
    if rank == 1:  # [N, C, L] → [N, C, 1, L]
        x = node.emit(nn.ReshapeOp(x, [*x_shape[:2], 1, x_shape[2]]))
        new_w = [*w_shape[:2], 1, w_shape[2]]
        if isinstance(node.input(1), Constant):
            w = node.derived(1, lambda a: a.reshape(new_w), new_w, "2d")
        else:
            w = node.emit(nn.ReshapeOp(w, new_w))
    bias = node.value(2) if node.has_input(2) else None
    y = node.emit(nn.Conv2dOp(x, w, bias, strides, pads, dilations, int(node.attr("group", 1))))
    if rank == 1:
        shape = nn.shape_of(y)
        y = node.emit(nn.ReshapeOp(y, [shape[0], shape[1], shape[3]]))
    return [y]


def _pooled_size(size: int, k: int, stride: int, begin: int, end: int, dilation: int, ceil_mode: bool) -> int:
    span = size + begin + end - dilation * (k - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + begin:
        out -= 1  # the last window would start in the end padding: dropped, as ONNX does
    return out


@converts("MaxPool", "AveragePool")
def convert_pool(node: NodeContext) -> list[Value]:
    """MaxPool/AveragePool (1-D, 2-D or 3-D) → nn.pool2d; ceil_mode sets the output shape.

    1-D pools run over a unit height. A 3-D pool is separable: the max (or average) over a
    kd x kh x kw box is the max (average) over kd of the kh x kw results, and every per-dim
    rule (pads, dilations, ceil_mode's clipped window, count_include_pad's divisor, which is the
    product of the per-dim counts) holds dim by dim. So it runs as an H x W pool over
    [N, C·D, H, W], then a kd x 1 pool over [N, C, D, Ho·Wo].

    MaxPool's Indices output (1-D and 2-D) is nn.pool2d's indices result, the index in the
    H x W plane (storage_order 0: row-major, 1: column-major), plus the plane's offset
    (n·C + c)·H·W, a constant added by nn.add."""
    shape = node.shape(0)
    with_indices = node.output_used(1)
    rank = _spatial_rank(node, shape, (1, 2) if with_indices else (1, 2, 3))
    storage_order = int(node.attr("storage_order", 0)) if with_indices else None
    if storage_order not in (None, 0, 1):
        raise node.error(f"storage_order={storage_order} is not 0 (row-major) or 1 (column-major)")
    kernel = tuple(node.attr("kernel_shape") or ())
    if len(kernel) != rank:
        raise node.error(f"kernel_shape {list(kernel)} does not match {rank} spatial dims")
    strides, pads, dilations = _window_attrs(node, tuple(shape[2:]), kernel)
    ceil_mode = bool(node.attr("ceil_mode", 0))
    out = [
        _pooled_size(shape[2 + d], kernel[d], strides[d], pads[d], pads[rank + d], dilations[d], ceil_mode)
        for d in range(rank)
    ]
    kind = "max" if node.op_type == "MaxPool" else "avg"
    count_include_pad = bool(node.attr("count_include_pad", 0))

    def pool(x: SSAValue, dims: tuple[int | None, int | None], pool_shape: list[int]) -> nn.Pool2dOp:
        """nn.pool2d over `pool_shape` (x reshaped) whose H and W are spatial dims `dims` of
        the node (None: a dim the pool leaves alone, window 1)."""
        k = [kernel[d] if d is not None else 1 for d in dims]
        o = [out[d] if d is not None else pool_shape[2 + i] for i, d in enumerate(dims)]
        st = [strides[d] if d is not None else 1 for d in dims]
        dl = [dilations[d] if d is not None else 1 for d in dims]
        pd = [pads[d] if d is not None else 0 for d in dims] + [pads[rank + d] if d is not None else 0 for d in dims]
        x = node.emit(nn.ReshapeOp(x, pool_shape)) if nn.shape_of(x) != tuple(pool_shape) else x
        op = nn.Pool2dOp(x, kind, k, st, pd, dl, o, count_include_pad, storage_order)
        node.state.emit(op)
        return op

    def unpooled(v: SSAValue) -> SSAValue:
        return node.emit(nn.ReshapeOp(v, [n, c, *out])) if nn.shape_of(v) != (n, c, *out) else v

    n, c = shape[:2]
    x = node.value(0)
    if rank == 1:  # [N, C, L] pooled as [N, C, 1, L]
        op = pool(x, (None, 0), [n, c, 1, shape[2]])
    elif rank == 2:
        op = pool(x, (0, 1), list(shape))
    else:
        d, h, w = shape[2:]
        op = pool(pool(x, (1, 2), [n, c * d, h, w]).result, (0, None), [n, c, d, out[1] * out[2]])
    if not with_indices:
        return [unpooled(op.result)]
    plane = math.prod(shape[2:])
    offsets = (np.arange(n * c, dtype=np.int64) * plane).reshape(n, c, *[1] * rank)
    return [unpooled(op.result), node.emit(nn.AddOp(unpooled(op.indices[0]), node.constant(offsets, "plane_offsets")))]


@converts("ConvTranspose")
def convert_conv_transpose(node: NodeContext) -> list[Value]:
    """ConvTranspose (1-D or 2-D) → the convolution it is the gradient of:
    the input with stride - 1 zeros between elements and padded by dilation·(k - 1) - pads
    (plus output_padding at the end; a negative amount crops), as one nn.gather per spatial
    axis from the input with a zero row appended, then a stride-1 nn.conv2d with the weight's
    in / out channels swapped per group and its window flipped. pads come from `pads`, or from
    output_shape / auto_pad as the operator defines (SAME_UPPER puts the odd one at the end)."""
    x_shape, w_shape = node.shape(0), node.shape(1)
    rank = _spatial_rank(node, x_shape)
    group = int(node.attr("group", 1))
    kernel = tuple(w_shape[2:])
    c, m = x_shape[1], w_shape[1] * group
    if w_shape[0] != c or c % group:
        raise node.error(f"weight {list(w_shape)} does not fit {c} input channels in {group} groups")
    if node.has_attr("kernel_shape") and tuple(node.attr("kernel_shape")) != kernel:
        raise node.error(f"kernel_shape {node.attr('kernel_shape')} differs from the weight shape {list(w_shape)}")
    spatial = x_shape[2:]
    strides = list(node.attr("strides", [1] * rank))
    dilations = list(node.attr("dilations", [1] * rank))
    out_pad = list(node.attr("output_padding", [0] * rank))
    pads = list(node.attr("pads", [0] * 2 * rank))
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise node.error(f"auto_pad '{auto_pad}' is not an ONNX padding mode")
    if not len(strides) == len(dilations) == len(out_pad) == rank or len(pads) != 2 * rank:
        raise node.error(f"strides/dilations/output_padding/pads do not match {rank} spatial dims")
    if any(out_pad[d] >= strides[d] and out_pad[d] >= dilations[d] for d in range(rank)):
        raise node.error(f"output_padding {out_pad} must be less than the stride {strides} or the dilation {dilations}")
    full = [strides[d] * (spatial[d] - 1) + out_pad[d] + (kernel[d] - 1) * dilations[d] + 1 for d in range(rank)]
    target = node.attr("output_shape")
    if target is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [spatial[d] * strides[d] for d in range(rank)]
    if auto_pad == "VALID":
        pads = [0] * 2 * rank
    if target is not None:
        target = list(target)[-rank:]
        for d in range(rank):
            total = full[d] - target[d]
            small, large = total // 2, total - total // 2
            pads[d], pads[rank + d] = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    out = [full[d] - pads[d] - pads[rank + d] for d in range(rank)]
    if any(o <= 0 for o in out):
        raise node.error(f"the output would have shape {out}")

    n = x_shape[0]
    x = node.value(0)
    if rank == 1:  # [N, C, L] → [N, C, 1, L]
        x = node.emit(nn.ReshapeOp(x, [n, c, 1, spatial[0]]))
    size2d = [1, *spatial] if rank == 1 else list(spatial)
    dims2d = [None, 0] if rank == 1 else [0, 1]
    zero = node.constant(np.zeros([1] * 4, node.dtype(0)), "zero")
    for h, d in enumerate(dims2d):
        if d is None:
            continue
        axis = 2 + h
        # positions of the zero-stuffed, padded input: input element i sits at
        # before + i * stride; everything else reads the appended zero row
        before = dilations[d] * (kernel[d] - 1) - pads[d]
        length = out[d] + dilations[d] * (kernel[d] - 1)
        pos = np.arange(length) - before
        inside = (pos >= 0) & (pos % strides[d] == 0) & (pos // strides[d] < spatial[d])
        index = np.where(inside, pos // strides[d], spatial[d]).astype(np.int64)
        block = [n, c, *size2d]
        block[axis] = 1
        stuffed = node.emit(nn.ConcatOp([x, node.emit(nn.ExpandOp(zero, block))], axis))
        x = node.emit(nn.GatherOp(stuffed, node.constant(index, f"stuffed_index{d}"), axis))
        size2d[h] = length

    cg, mg = c // group, m // group
    w2d = [m, cg, *([1] if rank == 1 else []), *kernel]

    def as_conv_weight(w: np.ndarray) -> np.ndarray:
        w = w.reshape(group, cg, mg, *kernel).swapaxes(1, 2).reshape(m, cg, *kernel)
        return np.flip(w, axis=tuple(range(2, 2 + rank))).reshape(w2d)

    if isinstance(node.input(1), Constant):
        weight = node.derived(1, as_conv_weight, w2d, "conv")
    else:  # the same steps as nn ops on a runtime weight
        weight = node.emit(nn.ReshapeOp(node.value(1), [group, cg, mg, *kernel]))
        weight = node.emit(nn.TransposeOp(weight, [0, 2, 1, *range(3, 3 + rank)]))
        weight = node.emit(nn.ReshapeOp(weight, [m, cg, *kernel]))
        for d in range(rank):
            backwards = np.arange(kernel[d] - 1, -1, -1, dtype=np.int64)
            weight = node.emit(nn.GatherOp(weight, node.constant(backwards, f"flip{d}"), 2 + d))
        weight = node.emit(nn.ReshapeOp(weight, w2d)) if rank == 1 else weight
    bias = node.value(2) if node.has_input(2) else None
    d2 = [1, *dilations] if rank == 1 else dilations
    y = node.emit(nn.Conv2dOp(x, weight, bias, [1, 1], [0, 0, 0, 0], d2, group))
    if rank == 1:
        y = node.emit(nn.ReshapeOp(y, [n, m, out[0]]))
    return [y]
