"""Matrix products: MatMul and Gemm."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.quantization import qdq_matmul
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Constant, Value


@converts("MatMul")
def convert_matmul(node: NodeContext) -> list[Value]:
    """MatMul → nn.matmul (numpy rule: batched, broadcasting, 1-D operands promoted). With a
    zero-size operand the product is known at import: zeros of the result shape (K = 0, as
    onnxruntime gives) or an empty array, a constant and no kernel."""
    if node.dtype(0) != node.dtype(1):
        raise node.error(f"operands have different element types ({node.dtype(0)}, {node.dtype(1)})")
    if 0 in node.shape(0) or 0 in node.shape(1):
        return [node.constant(np.zeros(_matmul_shape(node, 0, 1), node.dtype(0)), "zeros")]
    if (y := qdq_matmul(node)) is not None:  # DequantizeLinear operands: the int8 product
        return [y]
    return [node.emit(nn.MatmulOp(node.value(0), node.value(1)))]


def _matmul_shape(node: NodeContext, a: int, b: int) -> tuple[int, ...]:
    """The product's shape (numpy's matmul rule; ONNX shape inference already checked it)."""
    try:
        return nn.matmul_shape(node.shape(a), node.shape(b))
    except VerifyException as e:
        raise node.error(f"operand shapes {list(node.shape(a))} and {list(node.shape(b))} do not multiply: {e}") from None


def _not_empty(node: NodeContext, *indices: int) -> None:
    """Raises the node's error for a zero-size operand (nn.matmul's verifier refuses them)."""
    for i in indices:
        if 0 in node.shape(i):
            raise node.error(f"operand {i} has zero size (shape {list(node.shape(i))}); zero-size matrix products are not supported")


def _gemm_operand(node: NodeContext, i: int, transpose: bool) -> SSAValue:
    if len(node.shape(i)) != 2:
        raise node.error(f"operand {i} must be 2-D, got shape {list(node.shape(i))}")
    if not transpose:
        return node.value(i)
    if isinstance(node.input(i), Constant):  # a transposed weight is stored transposed
        return node.derived(i, lambda a: np.ascontiguousarray(a.T), node.shape(i)[::-1], "T")
    return node.emit(nn.TransposeOp(node.value(i), [1, 0]))


@converts("Gemm")
def convert_gemm(node: NodeContext) -> list[Value]:
    """Y = alpha * op(A) @ op(B) + beta * C  →  nn.matmul [+ nn.mul alpha] [+ nn.add beta*C]; with
    K = 0 (and M, N > 0) the product is zeros, as onnxruntime gives.

    Raises:
        AscendirError: operands that are not 2-D, of different element types, or empty in M or N."""
    dtype = node.dtype(0)
    if node.dtype(1) != dtype:
        raise node.error(f"operands have different element types ({dtype}, {node.dtype(1)})")
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    for i in (0, 1):
        if len(node.shape(i)) != 2:
            raise node.error(f"operand {i} must be 2-D, got shape {list(node.shape(i))}")
    ta, tb = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    (m, k), n = (node.shape(0)[::-1] if ta else node.shape(0)), (node.shape(1)[0] if tb else node.shape(1)[1])
    if k == 0 and m and n:  # an empty sum: alpha * A @ B is zeros (onnxruntime), then beta * C adds
        y = node.constant(np.zeros((m, n), dtype), "zeros")
    else:
        _not_empty(node, 0, 1)
        y = qdq_matmul(node, tb) if not ta else None  # DequantizeLinear operands: the int8 product
        if y is None:
            y = node.emit(nn.MatmulOp(_gemm_operand(node, 0, ta), _gemm_operand(node, 1, tb)))
        if alpha != 1.0:
            y = node.emit(nn.MulOp(y, node.scalar(alpha, dtype)))
    if node.has_input(2) and beta != 0.0:
        if beta == 1.0:
            c = node.value(2)
        elif isinstance(node.input(2), Constant):
            c = node.derived(2, lambda a: (a * np.asarray(beta, dtype)).astype(dtype), node.shape(2), "scaled")
        else:
            c = node.emit(nn.MulOp(node.value(2), node.scalar(beta, dtype)))
        y = node.emit(nn.AddOp(y, c))
    return [y]
