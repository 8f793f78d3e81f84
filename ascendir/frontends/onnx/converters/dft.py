"""DFT as matrix products with constant twiddle matrices (the signal length is static).

The signal axis is moved last and the real and imaginary parts are multiplied by [n, K]
cosine and sine matrices (n input samples, K output bins): forward or inverse (sign +, scale
1/L), one-sided (K = L // 2 + 1), zero-padded or truncated to `dft_length` L (rows past L are
zero; an input shorter than L is zero-padded by having fewer rows). The inverse of a one-sided
spectrum (irfft) is real: y[t] = (1/L) Σ_k w_k (Re X_k cos(2πkt/L) − Im X_k sin(2πkt/L)) with
w_0 = 1, w_k = 2 below the Nyquist bin and 1 at it (L even), as numpy.fft.irfft. On the chip
this is a MatMul per part; an FFT would need fewer operations for large L, but the cube runs
the [n, K] product at its full rate.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value


def _angles(n: int, k: int, length: int, sign: float) -> np.ndarray:
    """sign · 2π (t·k mod L) / L for t < min(n, L), zero rows past L: [n, k] in float64."""
    t = np.arange(n)[:, None]
    return sign * 2 * np.pi * ((t * np.arange(k)[None, :]) % length) / length


@converts("DFT")
def convert_dft(node: NodeContext) -> list[Value]:
    """DFT (opset 17: axis attribute, default 1; opset 20: axis input, default -2) of x
    [..., n, ..., 1 or 2] (real, or real and imaginary parts) along `axis` → [..., K, ..., 2]
    (or [..., L, ..., 1] for a one-sided inverse); float x; dft_length and axis known at import."""
    shape = node.shape(0)
    dtype = node.dtype(0)
    rank = len(shape)
    if not (dtype.kind == "f" or dtype.name == "bfloat16") or rank < 2 or shape[-1] not in (1, 2):
        raise node.error(f"expects a float tensor [..., signal, 1 or 2], got {dtype} of shape {list(shape)}")
    if node.state.opset >= 20:
        axis = int(node.require_scalar(2, "axis")) if node.has_input(2) else -2
    else:
        axis = int(node.attr("axis", 1))
    if not -rank <= axis < rank or axis % rank == rank - 1:
        raise node.error(f"axis {axis} is not a signal axis of shape {list(shape)} (the last dim holds the parts)")
    axis %= rank
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    n = shape[axis]
    complex_in = shape[-1] == 2
    if onesided and not inverse and complex_in:
        raise node.error("onesided applies to a real input (last dim 1)")
    if node.has_input(1):
        length = int(node.require_scalar(1, "dft_length"))
    else:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1:
        raise node.error(f"dft_length {length} must be >= 1")
    parts = [node.emit(nn.SliceOp(node.value(0), [0] * rank, [1] * rank, [*shape[:-1], 1]))]
    if complex_in:
        parts.append(node.emit(nn.SliceOp(node.value(0), [0] * (rank - 1) + [1], [1] * rank, [*shape[:-1], 1])))
    perm = [i for i in range(rank - 1) if i != axis] + [axis]
    back = [perm.index(i) for i in range(rank - 1)]
    rows = [node.emit(nn.TransposeOp(node.emit(nn.ReshapeOp(p, list(shape[:-1]))), perm)) for p in parts]

    def product(x: SSAValue, m: np.ndarray, name: str) -> SSAValue:
        return node.emit(nn.MatmulOp(x, node.constant(m.astype(dtype), name)))

    def out(v: SSAValue, k: int) -> SSAValue:
        moved = node.emit(nn.TransposeOp(v, back))
        return node.emit(nn.ReshapeOp(moved, [*shape[:axis], k, *shape[axis + 1:-1], 1]))

    keep = (np.arange(n) < length)[:, None]  # samples past dft_length are dropped
    if inverse and onesided:  # irfft: the first L // 2 + 1 bins, Hermitian, a real result
        used = np.arange(n)[:, None] < length // 2 + 1
        w = np.where(np.arange(n) == 0, 1.0, 2.0)
        if length % 2 == 0:
            w = np.where(np.arange(n) == length // 2, 1.0, w)
        a = _angles(n, length, length, 1.0)
        y = product(rows[0], used * w[:, None] * np.cos(a) / length, "irfft_cos")
        if complex_in:
            y = node.emit(nn.AddOp(y, product(rows[1], used * w[:, None] * -np.sin(a) / length, "irfft_sin")))
        return [out(y, length)]
    k = length // 2 + 1 if onesided else length
    a = _angles(n, k, length, 1.0 if inverse else -1.0)
    scale = 1.0 / length if inverse else 1.0
    cos, sin = keep * np.cos(a) * scale, keep * np.sin(a) * scale
    re = product(rows[0], cos, "dft_cos")
    im = product(rows[0], sin, "dft_sin")
    if complex_in:
        re = node.emit(nn.SubOp(re, product(rows[1], sin, "dft_sin")))
        im = node.emit(nn.AddOp(im, product(rows[1], cos, "dft_cos")))
    return [node.emit(nn.ConcatOp([out(re, k), out(im, k)], rank - 1))]
