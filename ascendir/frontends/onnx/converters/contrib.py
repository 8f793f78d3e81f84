"""onnxruntime contrib ops (domain com.microsoft) that its quantizers write: MatMulNBits, the
block-wise 2/4/8-bit weight-only MatMul of `MatMulNBitsQuantizer`."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts_contrib
from ascendir.frontends.onnx.values import Constant, Value


def unpack_nbits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first `count` unsigned `bits`-bit values of each row of `packed` (uint8 [..., bytes]),
    least significant bits first (onnxruntime's MatMulNBits packing) -> uint8 [..., count]."""
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    shifts = (np.arange(per_byte, dtype=np.uint8) * bits)[None, :]
    flat = packed.reshape(-1, packed.shape[-1])
    values = (flat[:, :, None] >> shifts[:, None, :]) & mask  # [rows, bytes, per_byte]
    return values.reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)[..., :count].astype(np.uint8)


def dequantize_nbits(node: NodeContext, b: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None,
                     k: int, n: int, bits: int, block: int, dtype: np.dtype) -> np.ndarray:
    """MatMulNBits' weight as a float [K, N] (B^T of its [N, K]): w = (q - zp) · scale per block of
    `block` values along K; zp is 2^(bits-1) when absent, packed uint8 (bits per value) or float.

    Raises:
        AscendirError: shapes that do not match K, N, bits and block_size."""
    nb = -(-k // block)
    blob = block * bits // 8
    if b.dtype != np.uint8 or b.size != n * nb * blob:
        raise node.error(f"B must be uint8 [N={n}, {nb} blocks, {blob} bytes], got {b.dtype} {list(b.shape)}")
    q = unpack_nbits(b.reshape(n, nb, blob), bits, block).astype(np.float32)  # [N, nb, block]
    s = np.asarray(scales, np.float32).reshape(n, nb, 1)
    if scales.size != n * nb:
        raise node.error(f"scales must hold N x blocks = {n * nb} values, got {scales.size}")
    if zero_points is None:
        zp = np.full((n, nb, 1), float(1 << (bits - 1)), np.float32)
    elif zero_points.dtype == np.uint8:
        per_row = -(-nb * bits // 8)
        if zero_points.size != n * per_row:
            raise node.error(f"packed zero_points must hold N x {per_row} bytes, got {zero_points.size}")
        zp = unpack_nbits(zero_points.reshape(n, per_row), bits, nb).astype(np.float32).reshape(n, nb, 1)
    else:
        if zero_points.size != n * nb:
            raise node.error(f"zero_points must hold N x blocks = {n * nb} values, got {zero_points.size}")
        zp = np.asarray(zero_points, np.float32).reshape(n, nb, 1)
    w = ((q - zp) * s).reshape(n, nb * block)[:, :k]
    return np.ascontiguousarray(w.T.astype(dtype))


@converts_contrib("com.microsoft", "MatMulNBits")
def convert_matmul_nbits(node: NodeContext) -> list[Value]:
    """Y = A @ dequantize(B)^T (+ bias): A [..., K] float, B uint8 [N, blocks, block·bits/8] with
    per-block scales (and zero points); bits 2, 4 or 8. With 4 or 8 bits (and no float zero
    points) it becomes `nn.weight_quant_matmul`: the weight stays int4 / int8 in GM and is
    dequantised on chip (antiquant). Otherwise the weight is dequantised once at import into a
    float [K, N] weight and the product is an ordinary nn.matmul. Both compute onnxruntime's
    accuracy_level 0 product: the same float weight, a float product.

    Raises:
        AscendirError: B, scales or zero points that are not constants, g_idx, bits other than
            2 / 4 / 8, shapes that disagree with K / N / block_size."""
    k, n = int(node.attr("K", 0)), int(node.attr("N", 0))
    bits, block = int(node.attr("bits", 4)), int(node.attr("block_size", 0))
    if bits not in (2, 4, 8):
        raise node.error(f"bits={bits} is not supported (2, 4 or 8)")
    if k <= 0 or n <= 0 or block < 16 or block & (block - 1):
        raise node.error(f"K={k}, N={n} must be positive and block_size={block} a power of two >= 16")
    if node.shape(0)[-1] != k:
        raise node.error(f"A's last dim {node.shape(0)[-1]} is not K={k}")
    if node.has_input(4) and node.const(4) is not None and not np.array_equal(
        np.asarray(node.const(4)).reshape(-1), np.arange(k) // block
    ):
        raise node.error("g_idx (act-order) reordering is not supported")
    for i, what in ((1, "B"), (2, "scales"), (3, "zero_points")):
        if node.has_input(i) and not isinstance(node.input(i), Constant):
            raise node.error(f"{what} (input {i}) must be a constant")
    dtype = node.dtype(0)
    b_in, s_in = node.input(1), node.input(2)
    z_in = node.input(3) if node.has_input(3) else None
    nb = -(-k // block)
    if int(np.prod(b_in.shape)) != n * nb * block * bits // 8 or int(np.prod(s_in.shape)) != n * nb:
        raise node.error(f"B {list(b_in.shape)} / scales {list(s_in.shape)} do not match N={n}, K={k}, block_size={block}, bits={bits}")

    def compute() -> np.ndarray:  # only when the weight is read (never under --shape-only)
        zps = np.asarray(z_in.array) if z_in is not None else None
        return dequantize_nbits(node, np.asarray(b_in.array), np.asarray(s_in.array), zps, k, n, bits, block, dtype)

    sources = [b_in, s_in] + ([z_in] if z_in is not None else [])
    if bits in (4, 8) and (z_in is None or z_in.dtype == np.uint8) and dtype.kind == "f":
        y = _antiquant(node, b_in, s_in, z_in, k, n, bits, block, dtype)
    else:
        weight = node.state.materialize(node.state.derive(f"{node.node.input[1]}.dequantized", sources, compute, (k, n), dtype))
        y = node.emit(nn.MatmulOp(node.value(0), weight))
    if node.has_input(5):
        y = node.emit(nn.AddOp(y, node.value(5)))
    return [y]


def _antiquant(node: NodeContext, b_in: Constant, s_in: Constant, z_in: Constant | None, k: int, n: int, bits: int,
               block: int, dtype: np.dtype) -> Value:
    """MatMulNBits as `nn.weight_quant_matmul`: the weight kept narrow, as signed q - 2^(bits-1)
    (int4 / int8 [K, N]), scales [blocks, N], and offset = 2^(bits-1) - zero point [blocks, N]
    (absent for the default zero point), so (q' + offset) · scale = (q - zp) · scale exactly."""
    nb = -(-k // block)
    mid = 1 << (bits - 1)
    narrow = np.dtype(ml_dtypes.int4) if bits == 4 else np.dtype(np.int8)

    def weight() -> np.ndarray:
        q = unpack_nbits(np.asarray(b_in.array).reshape(n, nb, block * bits // 8), bits, block).reshape(n, nb * block)[:, :k]
        return np.ascontiguousarray((q.astype(np.int16) - mid).T.astype(narrow))

    def scales() -> np.ndarray:
        return np.ascontiguousarray(np.asarray(s_in.array).reshape(n, nb).T.astype(dtype))

    def offsets() -> np.ndarray:
        per_row = -(-nb * bits // 8)
        zp = unpack_nbits(np.asarray(z_in.array).reshape(n, per_row), bits, nb).astype(np.float32).reshape(n, nb)
        return np.ascontiguousarray((mid - zp).T.astype(dtype))

    name = node.node.input[1]
    w = node.state.materialize(node.state.derive(f"{name}.antiquant", [b_in], weight, (k, n), narrow))
    s = node.state.materialize(node.state.derive(f"{node.node.input[2]}.antiquant", [s_in], scales, (nb, n), dtype))
    o = None
    if z_in is not None:
        o = node.state.materialize(node.state.derive(f"{node.node.input[3]}.antiquant", [z_in], offsets, (nb, n), dtype))
    return node.emit(nn.WeightQuantMatmulOp(node.value(0), w, s, o, block))

