"""Softmax and normalizations (LayerNormalization, inference BatchNormalization)."""

from __future__ import annotations

import numpy as np

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
    """LayerNormalization (Y output only) → nn.layer_norm over dims [axis, rank)."""
    if node.output_used(1) or node.output_used(2):
        raise node.error("the Mean and InvStdDev outputs are not supported (inference form only)")
    if node.dtype(1) != node.dtype(0) or (node.has_input(2) and node.dtype(2) != node.dtype(0)):
        raise node.error("scale and bias must have the input's element type")
    axis = node.axis(node.attr("axis", -1), len(node.shape(0)))
    bias = node.value(2) if node.has_input(2) else None
    epsilon = float(node.attr("epsilon", 1e-5))
    return [node.emit(nn.LayerNormOp(node.value(0), node.value(1), bias, axis, epsilon)), None, None]


@converts("BatchNormalization")
def convert_batch_norm(node: NodeContext) -> list[Value]:
    """Inference BatchNormalization with known statistics → x * s + t with folded s and t."""
    if node.attr("training_mode", 0) or any(node.output_used(i) for i in range(1, 5)):
        raise node.error("training mode (running statistics outputs) is not supported")
    shape, dtype = node.shape(0), node.dtype(0)
    if len(shape) < 2:
        raise node.error(f"expects an N x C x ... input, got shape {list(shape)}")
    scale, bias, mean, var = (
        node.require_const(i, what).astype(np.float64)
        for i, what in ((1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var"))
    )
    epsilon = float(node.attr("epsilon", 1e-5))
    s = scale / np.sqrt(var + epsilon)
    t = bias - mean * s
    channel_shape = (shape[1],) + (1,) * (len(shape) - 2)  # broadcasts over N and spatial dims
    y = node.emit(nn.MulOp(node.value(0), node.constant(s.astype(dtype).reshape(channel_shape), "scale")))
    return [node.emit(nn.AddOp(y, node.constant(t.astype(dtype).reshape(channel_shape), "shift")))]
