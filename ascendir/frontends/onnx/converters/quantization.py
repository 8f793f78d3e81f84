"""Quantized ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
ConvInteger, QLinearMatMul, QLinearConv (and com.microsoft MatMulNBits in contrib.py).

Each becomes typed `nn` ops. Integer products run where they are exact:

* MatMulInteger / QLinearMatMul: an `nn.matmul` of int8 x int8 -> int32, the cube's s8 mmad
  (int32 accumulate, bit-exact). uint8 operands are shifted into int8 (q - 128) and their zero
  points with them; the zero points are taken out after the product,
  (A - za)(B - zb) = A·B - zb·rowsum(A) - za·colsum(B) + K·za·zb, all in int32, so every
  result equals onnxruntime's integer result exactly.
* ConvInteger / QLinearConv: an fp32 `nn.conv2d` of the zero-point-shifted integers: exact (every
  partial sum an integer below 2^24) while C/group · kh · kw · max|x - zx| · max|w - zw| ≤ 2^24,
  which is checked at import (with 255 for a runtime input); a larger window is refused.

Requantization (QLinear*, QuantizeLinear) divides or multiplies in float32 as onnxruntime does
and rounds half to even with the float32 round-to-integer idiom (v + 1.5·2^23) - 1.5·2^23
(exact for |v| < 2^22; larger values saturate first), then adds the zero point and clips.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import FloatAttr, f32, i8, i32
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.dtypes import from_numpy_dtype, to_numpy_dtype
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.converters.window_attrs import _as_2d, _spatial_rank, _window_attrs
from ascendir.frontends.onnx.values import Constant, Value

_ROUND_MAGIC = 12582912.0  # 1.5 * 2^23: adding then subtracting it rounds an f32 half to even
_ROUND_LIMIT = 4194304.0  # 2^22: below it the idiom is exact; beyond it every integer type saturates
_EXACT_F32 = 2**24  # integers up to this are exact in float32 (24-bit significand)


def _int_range(dtype: np.dtype) -> tuple[int, int] | None:
    """(min, max) of an integer quantized type (int8, uint8, int16, uint16, int4, uint4, int2,
    uint2), or None for a float one."""
    import ml_dtypes

    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    try:
        info = ml_dtypes.iinfo(dtype)
    except (ValueError, TypeError):
        return None
    return int(info.min), int(info.max)


def _param(node: NodeContext, i: int, x_shape: tuple[int, ...], axis: int, block: int, dtype: np.dtype | None = None) -> SSAValue:
    """Scale or zero point input `i` shaped to broadcast against x (ONNX's per-tensor, per-axis
    and blocked forms), optionally cast to `dtype`.

    Raises:
        AscendirError: a parameter whose shape is neither one value, a vector along `axis`, nor
            (blocked) x's shape with ceil(dim / block) along `axis`."""
    shape = node.shape(i)
    rank = len(x_shape)
    v = node.input(i)
    want = node.dtype(i) if dtype is None else np.dtype(dtype)
    if block:
        if len(shape) != rank or any(s != x for d, (s, x) in enumerate(zip(shape, x_shape)) if d != axis) \
                or shape[axis] != -(-x_shape[axis] // block):
            raise node.error(f"blocked input {i} of shape {list(shape)} does not match x {list(x_shape)} with block_size {block}")

        def repeat(a: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(np.repeat(a, block, axis=axis).take(range(x_shape[axis]), axis=axis).astype(want))

        if isinstance(v, Constant):
            return node.state.materialize(node.state.derive(f"{node.node.input[i]}.blocked", [v], lambda: repeat(v.array), x_shape, want))
        # runtime: [.., nb, ..] -> [.., nb, 1, ..] -> [.., nb, block, ..] -> [.., nb·block, ..] -> x's
        y = _cast(node, node.value(i), from_numpy_dtype(want))
        nb = shape[axis]
        y = node.emit(nn.ReshapeOp(y, [*shape[: axis + 1], 1, *shape[axis + 1 :]]))
        y = node.emit(nn.ExpandOp(y, [*shape[: axis + 1], block, *shape[axis + 1 :]]))
        full = [*shape[:axis], nb * block, *shape[axis + 1 :]]
        y = node.emit(nn.ReshapeOp(y, full))
        if full[axis] != x_shape[axis]:
            y = node.emit(nn.SliceOp(y, [0] * rank, [1] * rank, list(x_shape)))
        return y
    size = int(np.prod(shape))
    if size == 1:
        target = []
    elif len(shape) == 1 and rank and shape[0] == x_shape[axis]:
        target = [1] * rank
        target[axis] = shape[0]
    else:
        raise node.error(f"input {i} of shape {list(shape)} is neither one value nor a vector along axis {axis} of x {list(x_shape)}")
    if isinstance(v, Constant):
        return node.constant(np.asarray(v.array).astype(want).reshape(target), f"param{i}")
    y = node.value(i)
    if tuple(shape) != tuple(target):
        y = node.emit(nn.ReshapeOp(y, target))
    if np.dtype(want) != node.dtype(i):
        y = node.emit(nn.CastOp(y, from_numpy_dtype(want)))
    return y


def _zero_point_is_zero(node: NodeContext, i: int) -> bool:
    if not node.has_input(i):
        return True
    value = node.const(i)
    return value is not None and not np.any(np.asarray(value).astype(np.float32))


def _cast(node: NodeContext, v: SSAValue, elem) -> SSAValue:
    return v if v.type.element_type == elem else node.emit(nn.CastOp(v, elem))


def _round_saturate(node: NodeContext, v: SSAValue, zero_point: SSAValue | None, lo: int, hi: int, out) -> SSAValue:
    """saturate(rint(v) + zero_point) as `out` (an integer type); v is float32."""
    v = node.emit(nn.ClipOp(v, min=FloatAttr(-_ROUND_LIMIT, f32), max=FloatAttr(_ROUND_LIMIT, f32)))
    magic = node.scalar(_ROUND_MAGIC, np.float32)
    v = node.emit(nn.SubOp(node.emit(nn.AddOp(v, magic)), magic))
    if zero_point is not None:
        v = node.emit(nn.AddOp(v, zero_point))
    v = node.emit(nn.ClipOp(v, min=FloatAttr(float(lo), f32), max=FloatAttr(float(hi), f32)))
    return node.emit(nn.CastOp(v, out))


def _axis_block(node: NodeContext, rank: int) -> tuple[int, int]:
    """(axis made non-negative, block_size); the axis is only checked when a scale is a vector
    (a per-tensor scale ignores it: ONNX's default 1 over a 1-D x is valid)."""
    block = int(node.attr("block_size", 0) or 0)
    if block < 0:
        raise node.error(f"block_size {block} must be positive")
    axis = int(node.attr("axis", 1))
    if int(np.prod(node.shape(1))) > 1 or block:
        return node.axis(axis, rank), block
    return 0, block


@converts("DequantizeLinear")
def convert_dequantize_linear(node: NodeContext) -> list[Value]:
    """y = (float32(x) - float32(zero_point)) * scale, as scale's type (or `output_dtype`);
    per tensor, per axis or blocked. x: int8/uint8/int16/uint16/int4/uint4/int2/uint2/int32, or a
    float 8/4 type (no zero point)."""
    x_shape = node.shape(0)
    axis, block = _axis_block(node, len(x_shape))
    out = node.onnx_dtype(node.attr("output_dtype")) if node.attr("output_dtype") else node.dtype(1)
    v = _cast(node, node.value(0), f32)
    if _int_range(node.dtype(0)) is not None and not _zero_point_is_zero(node, 2):
        v = node.emit(nn.SubOp(v, _param(node, 2, x_shape, axis, block, np.float32)))
    v = node.emit(nn.MulOp(v, _param(node, 1, x_shape, axis, block, np.float32)))
    return [_cast(node, v, from_numpy_dtype(out))]


@converts("QuantizeLinear")
def convert_quantize_linear(node: NodeContext) -> list[Value]:
    """y = saturate(rint(x / scale) + zero_point) (x / scale in float32, as onnxruntime),
    per tensor, per axis or blocked; integer outputs round half to even, float 8 / 4 outputs are
    a (saturating) cast. The output type is the zero point's, else `output_dtype`, else uint8."""
    x_shape = node.shape(0)
    axis, block = _axis_block(node, len(x_shape))
    if node.has_input(2):
        out = node.dtype(2)
    elif node.attr("output_dtype"):
        out = node.onnx_dtype(node.attr("output_dtype"))
    else:
        out = np.dtype(np.uint8)
    # onnxruntime divides in float32 whatever x's float type (its fp16 kernel widens first);
    # `precision` (opset 23) names the type explicitly
    xdt = np.dtype(np.float32) if node.dtype(0).itemsize <= 4 else node.dtype(0)
    if node.attr("precision"):
        xdt = node.onnx_dtype(node.attr("precision"))
    x = _cast(node, node.value(0), from_numpy_dtype(xdt))
    v = node.emit(nn.DivOp(x, _param(node, 1, x_shape, axis, block, xdt)))
    v = _cast(node, v, f32)
    rng = _int_range(out)
    if rng is None:  # float 8 / float 4: their zero point is 0 (float 4 adds it, as the reference)
        if node.has_input(2) and out.itemsize == 1 and not _zero_point_is_zero(node, 2) and "e2m1" in out.name:
            v = node.emit(nn.AddOp(v, _param(node, 2, x_shape, axis, block, np.float32)))
        return [node.emit(nn.CastOp(v, from_numpy_dtype(out), saturate=bool(node.attr("saturate", 1))))]
    zp = None if _zero_point_is_zero(node, 2) else _param(node, 2, x_shape, axis, block, np.float32)
    return [_round_saturate(node, v, zp, *rng, from_numpy_dtype(out))]


@converts("DynamicQuantizeLinear")
def convert_dynamic_quantize_linear(node: NodeContext) -> list[Value]:
    """uint8 quantization with a scale and zero point from x's range (widened to include 0):
    scale = (max - min) / 255 (1.0 when max = min, as onnxruntime), zero_point = saturate(rint(-min / scale)),
    y = saturate(rint(x / scale) + zero_point). x: float32; outputs y, y_scale (f32 scalar),
    y_zero_point (uint8 scalar)."""
    x = node.value(0)
    rank = len(node.shape(0))
    if node.dtype(0) != np.float32:
        raise node.error(f"x must be float32, got {node.dtype(0)}")
    axes = list(range(rank))
    zero = node.scalar(0.0, np.float32)
    hi = node.emit(nn.MaxOp(node.emit(nn.ReduceMaxOp(x, axes, False)), zero))
    lo = node.emit(nn.MinOp(node.emit(nn.ReduceMinOp(x, axes, False)), zero))
    span = node.emit(nn.SubOp(hi, lo))
    # max = min (only when x is all zeros) would make the scale 0: onnxruntime then takes 1.0
    # (onnx's reference evaluator 1 / 255; y and the zero point are 0 either way)
    scale = node.emit(nn.WhereOp(node.emit(nn.EqualOp(span, zero)), node.scalar(1.0, np.float32),
                                 node.emit(nn.DivOp(span, node.scalar(255.0, np.float32)))))
    zp_f = node.emit(nn.SubOp(zero, node.emit(nn.DivOp(lo, scale))))
    zp_q = _round_saturate(node, zp_f, None, 0, 255, from_numpy_dtype(np.dtype(np.uint8)))
    y = _round_saturate(node, node.emit(nn.DivOp(x, scale)), _cast(node, zp_q, f32), 0, 255, from_numpy_dtype(np.dtype(np.uint8)))
    return [y, scale, zp_q]


# ---------------------------------------------------------------------------------------------
# integer products
# ---------------------------------------------------------------------------------------------
def _vshape(v: Value) -> tuple[int, ...]:
    return v.shape if isinstance(v, Constant) else nn.shape_of(v)


def _vdtype(v: Value) -> np.dtype:
    return v.dtype if isinstance(v, Constant) else to_numpy_dtype(v.type.element_type)


def _vssa(node: NodeContext, v: Value) -> SSAValue:
    return node.state.materialize(v) if isinstance(v, Constant) else v


def _as_int8(node: NodeContext, v: Value) -> tuple[SSAValue, int]:
    """`v` (int8 or uint8) as int8, and the shift folded into its zero point (128 for uint8:
    q - 128 fits int8 exactly). A constant is shifted at import."""
    dt = _vdtype(v)
    if dt == np.int8:
        return _vssa(node, v), 0
    if dt != np.uint8:
        raise node.error(f"integer product operands must be int8 or uint8, got {dt}")
    if isinstance(v, Constant):
        shifted = node.state.derive(f"{v.name}.s8", [v], lambda: (v.array.astype(np.int16) - 128).astype(np.int8), v.shape, np.int8)
        return node.state.materialize(shifted), 128
    # widen, shift, narrow: every step exact
    w = node.emit(nn.SubOp(node.emit(nn.CastOp(v, i32)), node.scalar(128, np.int32)))
    return node.emit(nn.CastOp(w, i8)), 128


def _zero_point_i32(node: NodeContext, zp: Value | None, shift: int, shape: list[int]) -> SSAValue | int:
    """Zero point `zp` minus `shift`, as an int32 value shaped `shape` (a row or column vector)
    or a Python int when it is one known value."""
    if zp is None:
        return -shift
    if isinstance(zp, Constant):
        c = np.asarray(zp.array).astype(np.int32) - shift
        if c.size == 1 or not np.any(c != c.reshape(-1)[0]):  # one value (e.g. all-zero per-channel points)
            return int(c.reshape(-1)[0])
        return node.constant(c.reshape(shape), "zp")
    z = node.emit(nn.CastOp(zp, i32))
    zs = _vshape(zp)
    if zs and int(np.prod(zs)) > 1:
        z = node.emit(nn.ReshapeOp(z, shape))
    elif zs:
        z = node.emit(nn.ReshapeOp(z, []))
    return node.emit(nn.SubOp(z, node.scalar(shift, np.int32))) if shift else z


def _mul_zp(node: NodeContext, zp: SSAValue | int, v: SSAValue) -> SSAValue:
    return node.emit(nn.MulOp(v, node.scalar(zp, np.int32) if isinstance(zp, int) else zp))


def integer_matmul(node: NodeContext, a: Value, a_zp: Value | None, b: Value, b_zp: Value | None) -> SSAValue:
    """(A - za) @ (B - zb) in int32 for int8 / uint8 operands and their optional zero points
    (scalars, a's per row [M], b's per column [N]): one int8 cube matmul and the zero-point
    corrections (module docstring).

    Raises:
        AscendirError: operands other than int8 / uint8, 1-D operands, or zero-size ones."""
    sa, sb = _vshape(a), _vshape(b)
    if len(sa) < 2 or len(sb) < 2:
        raise node.error(f"1-D operands are not supported (shapes {list(sa)} x {list(sb)})")
    if 0 in sa or 0 in sb:
        raise node.error(f"zero-size operands are not supported (shapes {list(sa)} x {list(sb)})")
    k = sa[-1]
    qa, shift_a = _as_int8(node, a)
    qb, shift_b = _as_int8(node, b)
    za = _zero_point_i32(node, a_zp, shift_a, [sa[-2], 1])
    zb = _zero_point_i32(node, b_zp, shift_b, [sb[-1]])
    y = node.emit(nn.MatmulOp(qa, qb, i32))
    if not (isinstance(zb, int) and zb == 0):  # - zb · rowsum(A)
        # row sums as a product with ones: exact on the int8 cube, however long K is
        rows = node.emit(nn.MatmulOp(qa, node.constant(np.ones((k, 1), np.int8), "ones_col"), i32))
        y = node.emit(nn.SubOp(y, _mul_zp(node, zb, rows)))
    if not (isinstance(za, int) and za == 0):  # - za · colsum(B)
        if isinstance(b, Constant):
            sums = np.asarray(b.array).astype(np.int32) - shift_b
            cols = node.constant(sums.sum(axis=-2, keepdims=True).astype(np.int32), "colsum")
        else:
            cols = node.emit(nn.MatmulOp(node.constant(np.ones((1, k), np.int8), "ones_row"), qb, i32))
        y = node.emit(nn.SubOp(y, _mul_zp(node, za, cols)))
        if not (isinstance(zb, int) and zb == 0):  # + K · za · zb
            if isinstance(za, int) and isinstance(zb, int):
                y = node.emit(nn.AddOp(y, node.scalar(k * za * zb, np.int32)))
            else:
                zz = _mul_zp(node, za, zb if not isinstance(zb, int) else node.scalar(zb, np.int32))
                y = node.emit(nn.AddOp(y, _mul_zp(node, k, zz)))
    return y


def _inputs(node: NodeContext, *indices: int) -> list[Value | None]:
    return [node.input(i) if node.has_input(i) else None for i in indices]


def _dequantized(node: NodeContext, i: int) -> tuple[Value, Constant, Constant | None, int] | None:
    """(quantized value, scale, zero point, axis) when node input `i` is the output of a
    per-tensor / per-axis DequantizeLinear of int8 / uint8 into float32 or float16 with constant
    scale and zero point, else None."""
    dq = node.state.dequantized.get(node.node.input[i]) if node.has_input(i) else None
    if dq is None or any(a.name in ("block_size", "output_dtype") and a.i for a in dq.attribute):
        return None
    vals = [node.state.values.get(n) if n else None for n in dq.input]
    q, scale, zp = (vals + [None, None])[:3]
    if q is None or _vdtype(q) not in (np.int8, np.uint8) or not isinstance(scale, Constant) \
            or scale.dtype not in (np.float32, np.float16):
        return None
    if zp is not None and (not isinstance(zp, Constant) or zp.size != scale.size):
        return None
    axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
    return q, scale, zp, axis % max(len(_vshape(q)), 1)


def qdq_matmul(node: NodeContext, transpose_b: bool = False) -> SSAValue | None:
    """The QDQ pattern of onnxruntime's quantize_static / quantize_dynamic around a MatMul or a
    Gemm: A = DequantizeLinear(qa, sa, za) (one scale), B = DequantizeLinear(qb, sb, zb) of a
    constant 2-D weight (one scale, or one per output column). Runs as what onnxruntime fuses it
    into (MatMulIntegerToFloat): float32((qa - za) @ (qb - zb)) · (sa · sb), the product on the
    int8 cube (int32 accumulate) instead of a float32 one over dequantized values. None when the
    inputs are not that pattern (the MatMul then runs in float on the dequantized values)."""
    pa, pb = _dequantized(node, 0), _dequantized(node, 1)
    if pa is None and pb is not None:
        return weight_only_matmul(node, pb, transpose_b)
    if pa is None or pb is None:
        return None
    qa, sa, za, _ = pa
    qb, sb, zb, axis = pb
    if sa.size != 1 or len(_vshape(qa)) < 2 or not isinstance(qb, Constant) or len(qb.shape) != 2:
        return None
    n_axis = 0 if transpose_b else 1
    if sb.size != 1 and (axis != n_axis or sb.size != qb.shape[n_axis]):
        return None
    if transpose_b:
        qb = node.state.derive(f"{qb.name}.T", [qb], lambda q=qb: np.ascontiguousarray(q.array.T), qb.shape[::-1], qb.dtype)
    if _vshape(qa)[-1] != qb.shape[0]:
        return None
    acc = integer_matmul(node, qa, za, qb, zb)
    mult = (np.float32(np.asarray(sa.array).reshape(())) * np.asarray(sb.array, np.float32)).astype(np.float32)
    mult = node.constant(mult.reshape(()) if mult.size == 1 else mult.reshape(-1), "multiplier")
    y = node.emit(nn.MulOp(node.emit(nn.CastOp(acc, f32)), mult))
    return _cast(node, y, from_numpy_dtype(sa.dtype))  # a float16 model's scales: its output type


def weight_only_matmul(node: NodeContext, pb: tuple[Value, Constant, Constant | None, int], transpose_b: bool) -> SSAValue | None:
    """Weight-only QDQ (W8A16 / W8A32): float activations times DequantizeLinear(qb, sb, zb) of a
    constant 2-D int8 / uint8 weight with one scale or one per output column, as
    `nn.weight_quant_matmul` (antiquant: the weight stays int8 in GM and is dequantised on chip).
    The weight is stored as int8 (uint8 shifted by 128) with offset = shift - zb, so
    (q + offset) · sb is onnxruntime's (float32(qb) - zb) · sb exactly. None when the pattern
    does not hold (the MatMul then runs in float on the dequantized weight)."""
    qb, sb, zb, axis = pb
    dtype = node.dtype(0)
    if not isinstance(qb, Constant) or len(qb.shape) != 2 or dtype.kind != "f" or sb.dtype != dtype:
        return None
    k_axis = 1 if transpose_b else 0
    k, n = qb.shape[k_axis], qb.shape[1 - k_axis]
    if node.shape(0)[-1] != k or sb.size != 1 and (axis != 1 - k_axis or sb.size != n):
        return None
    shift = 128 if qb.dtype == np.uint8 else 0

    def weight(q=qb) -> np.ndarray:
        w = np.asarray(q.array).astype(np.int16) - shift
        return np.ascontiguousarray((w.T if transpose_b else w).astype(np.int8))

    def row(values: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.broadcast_to(np.asarray(values, np.float32).reshape(-1), (n,)).reshape(1, n).astype(dtype))

    w = node.state.materialize(node.state.derive(f"{qb.name}.antiquant", [qb], weight, (k, n), np.int8))
    scale = node.state.materialize(node.state.derive(f"{sb.name}.antiquant", [sb], lambda: row(sb.array), (1, n), dtype))
    offset = None
    if shift or zb is not None and np.any(np.asarray(zb.array)):
        srcs = [zb] if zb is not None else [sb]
        zero = (lambda: np.asarray(zb.array, np.float32)) if zb is not None else (lambda: np.zeros((), np.float32))
        offset = node.state.materialize(node.state.derive(f"{srcs[0].name}.antiquant_offset", srcs, lambda: row(shift - zero()), (1, n), dtype))
    return node.emit(nn.WeightQuantMatmulOp(_vssa(node, node.value(0)), w, scale, offset, k))


@converts("MatMulInteger")
def convert_matmul_integer(node: NodeContext) -> list[Value]:
    """Y (int32) = (A - a_zero_point) @ (B - b_zero_point): an int8 cube matmul, exact."""
    return [integer_matmul(node, *_inputs(node, 0, 2, 1, 3))]


def _requantize(node: NodeContext, acc: SSAValue, multiplier: SSAValue, zp_index: int, out: np.dtype) -> SSAValue:
    """saturate(rint(float32(acc) * multiplier) + zero_point) as `out` (int8 / uint8)."""
    v = node.emit(nn.MulOp(node.emit(nn.CastOp(acc, f32)), multiplier))
    rng = _int_range(out)
    zp = None
    if node.has_input(zp_index) and not _zero_point_is_zero(node, zp_index):
        zp = _cast(node, node.value(zp_index), f32)
        if node.shape(zp_index):
            zp = node.emit(nn.ReshapeOp(zp, []))
    return _round_saturate(node, v, zp, *rng, from_numpy_dtype(out))


def _multiplier(node: NodeContext, scales: list[int], divisor: int, shape: list[int]) -> SSAValue:
    """float32 product of the scale inputs over the divisor's (onnxruntime's requantization
    multiplier), reshaped to `shape` when it is a vector."""
    consts = [node.const(i) for i in (*scales, divisor)]
    if all(c is not None for c in consts):
        m = np.asarray(consts[0], np.float32) * np.asarray(consts[1], np.float32) / np.asarray(consts[2], np.float32)
        m = np.asarray(m, np.float32)
        return node.constant(m.reshape(shape) if m.size > 1 else m.reshape(()), "multiplier")
    vals = []
    for i in (*scales, divisor):
        v = _cast(node, node.value(i), f32)
        n = int(np.prod(node.shape(i)))
        v = node.emit(nn.ReshapeOp(v, shape if n > 1 else [])) if node.shape(i) else v
        vals.append(v)
    return node.emit(nn.DivOp(node.emit(nn.MulOp(vals[0], vals[1])), vals[2]))


@converts("QLinearMatMul")
def convert_qlinear_matmul(node: NodeContext) -> list[Value]:
    """y = saturate(rint((a - za) @ (b - zb) · (a_scale · b_scale / y_scale)) + y_zero_point):
    the int8 cube product (exact) then a float32 requantization, as onnxruntime."""
    acc = integer_matmul(node, *_inputs(node, 0, 2, 3, 5))
    out = node.dtype(7) if node.has_input(7) else node.dtype(0)
    mult = _multiplier(node, [1, 4], 6, [node.shape(3)[-1]])
    return [_requantize(node, acc, mult, 7, out)]


# ---------------------------------------------------------------------------------------------
# integer convolutions (fp32, exact within the bound checked here)
# ---------------------------------------------------------------------------------------------
def _shifted_float(node: NodeContext, i: int, zp: int, axis_shape: list[int] | None) -> tuple[SSAValue, int]:
    """float32(input i - zero point) and a bound on its magnitude."""
    v = node.input(i)
    z = node.const(zp) if node.has_input(zp) else None
    if isinstance(v, Constant) and (z is not None or not node.has_input(zp)):
        zz = np.zeros((), np.float32) if z is None else np.asarray(z, np.float32)
        if zz.size > 1 and axis_shape is not None:
            zz = zz.reshape(axis_shape)
        arr = np.asarray(v.array, np.float32) - zz
        return node.constant(arr, f"in{i}"), int(np.abs(arr).max(initial=0))
    lo, hi = _int_range(node.dtype(i))
    x = _cast(node, node.value(i), f32)
    if node.has_input(zp) and not _zero_point_is_zero(node, zp):
        zv = _cast(node, node.value(zp), f32)
        n = int(np.prod(node.shape(zp)))
        if node.shape(zp):
            zv = node.emit(nn.ReshapeOp(zv, axis_shape if n > 1 and axis_shape is not None else []))
        x = node.emit(nn.SubOp(x, zv))
    return x, hi - lo


def _pad_with(node: NodeContext, x: SSAValue, fill: SSAValue, pads: list[int]) -> SSAValue:
    """x [N, C, H, W] padded by pads [top, left, bottom, right] with the 0-d value `fill` (x's type)."""
    fill = node.emit(nn.ReshapeOp(fill, [1, 1, 1, 1]))
    for axis, (lo, hi) in ((2, (pads[0], pads[2])), (3, (pads[1], pads[3]))):
        shape = list(nn.shape_of(x))
        parts = []
        for count, where in ((lo, 0), (hi, 1)):
            if count:
                shape[axis] = count
                parts.append((where, node.emit(nn.ExpandOp(fill, list(shape)))))
        if parts:
            x = node.emit(nn.ConcatOp([p for w, p in parts if w == 0] + [x] + [p for w, p in parts if w == 1], axis))
    return x


def _int8_conv(node: NodeContext, x: int, x_zp: int, w: int, w_zp: int) -> SSAValue | None:
    """`int8_conv` of node inputs x, w and their zero points (indices), or None."""
    x_shape, w_shape = node.shape(x), node.shape(w)
    if len(x_shape) != 4 or node.has_input(x_zp) and int(np.prod(node.shape(x_zp))) != 1:
        return None
    wv, zw = node.input(w), node.input(w_zp) if node.has_input(w_zp) else None
    if not isinstance(wv, Constant) or zw is not None and not isinstance(zw, Constant):
        return None
    window = _window_attrs(node, tuple(x_shape[2:]), tuple(w_shape[2:]))
    return int8_conv(node, node.input(x), node.input(x_zp) if node.has_input(x_zp) else None, wv, zw,
                     int(node.attr("group", 1)), *window)


def int8_conv(node: NodeContext, x: Value, x_zp: Value | None, w: Constant, w_zp: Constant | None, group: int,
              strides: list[int], pads: list[int], dilations: list[int]) -> SSAValue | None:
    """(x - zx) conv (w - zw) in int32 on the int8 cube, exact for any window: x [N, C, H, W]
    int8 / uint8 with a per-tensor zero point (constant or runtime), a constant int8 / uint8
    weight with its zero point per tensor or per output channel. uint8 operands are shifted into
    int8 with their zero points (as integer_matmul); x is padded explicitly with its zero point
    (a padded tap adds 0), and sum (x' - zx')(w' - zw') = x'·w' - zw'·boxsum(x') - zx'·sum(w') +
    K·zx'·zw' per output channel, boxsum(x') a conv with a ones kernel. None when the operands are
    not that (the caller's float path)."""
    if _vdtype(x) not in (np.int8, np.uint8) or w.dtype not in (np.int8, np.uint8) or len(w.shape) != 4:
        return None
    o, cg, kh, kw = w.shape
    shift_w = 128 if w.dtype == np.uint8 else 0
    zw_c = np.zeros((), np.int32) if w_zp is None else np.asarray(w_zp.array, np.int32)
    if zw_c.size not in (1, o):
        return None
    zw = np.broadcast_to(zw_c.reshape(-1), (o,)) - shift_w
    if group != 1 and np.any(zw) or group > 1 and cg == 1:
        # the boxsum of a grouped conv would be one per group; a depthwise conv runs on the
        # vector unit (conv.py), which has no int8 product
        return None
    qx, shift_x = _as_int8(node, x)
    qw, _ = _as_int8(node, w)
    zx = _zero_point_i32(node, x_zp, shift_x, [])
    w_centered = lambda: (np.asarray(w.array).astype(np.int32) - shift_w) - zw.reshape(o, 1, 1, 1)  # noqa: E731
    n, _, h, wd = _vshape(x)
    out_hw = [nn.window_output_size(size, k, st, pads[d], pads[2 + d], dl)
              for d, (size, k, st, dl) in enumerate(zip((h, wd), (kh, kw), strides, dilations))]
    # a constant zero point: the padded taps' share of zx' · sum(w' - zw') is known at import (a
    # [1, O, Ho, Wo] constant while small); otherwise x is padded with its zero point
    border = isinstance(zx, int) and zx != 0 and any(pads) and o * math.prod(out_hw) <= _BORDER_CONSTANT
    if not (isinstance(zx, int) and zx == 0) and any(pads) and not border:
        fill = node.scalar(zx, np.int8) if isinstance(zx, int) else node.emit(nn.CastOp(zx, i8))
        qx, pads = _pad_with(node, qx, fill, pads), [0, 0, 0, 0]
    y = node.emit(nn.Conv2dOp(qx, qw, None, strides, pads, dilations, group, i32))

    def per_channel(v: np.ndarray, name: str) -> SSAValue:
        return node.constant(np.asarray(v, np.int32).reshape(1, o, 1, 1), name)

    if np.any(zw):  # - zw' · boxsum(x') (padded taps read 0 or zx' - zx' = 0 after the next term)
        ones = node.constant(np.ones((1, cg, kh, kw), np.int8), "ones_kernel")
        box = node.emit(nn.Conv2dOp(qx, ones, None, strides, pads, dilations, 1, i32))
        y = node.emit(nn.SubOp(y, node.emit(nn.MulOp(box, per_channel(zw, "zw")))))
    if border:  # - zx' · (sum of w' - zw' over the taps inside the image)
        y = node.emit(nn.SubOp(y, node.constant(zx * _valid_tap_sums(w_centered(), (h, wd), out_hw, strides, pads, dilations), "w_sums")))
    elif not (isinstance(zx, int) and zx == 0):  # - zx' · sum(w' - zw')
        y = node.emit(nn.SubOp(y, _mul_zp(node, zx, per_channel(w_centered().reshape(o, -1).sum(axis=1), "w_sums"))))
    return y


_BORDER_CONSTANT = 1 << 16  # elements of the [1, O, Ho, Wo] border correction kept as a constant


def _valid_tap_sums(wc: np.ndarray, hw: tuple[int, int], out_hw: list[int], strides, pads, dilations) -> np.ndarray:
    """int32 [1, O, Ho, Wo]: for each output position, the sum of wc [O, Cg, kh, kw] over the
    taps that read inside the image (not padding)."""
    o, _, kh, kw = wc.shape
    per_tap = wc.sum(axis=1)  # [O, kh, kw]
    rows = [np.arange(out_hw[0]) * strides[0] + i * dilations[0] - pads[0] for i in range(kh)]
    cols = [np.arange(out_hw[1]) * strides[1] + j * dilations[1] - pads[1] for j in range(kw)]
    out = np.zeros((o, *out_hw), np.int64)
    for i in range(kh):
        vr = (rows[i] >= 0) & (rows[i] < hw[0])
        for j in range(kw):
            vc = (cols[j] >= 0) & (cols[j] < hw[1])
            out += per_tap[:, i, j, None, None] * (vr[:, None] & vc[None, :])
    return out.astype(np.int32)[None]


def qdq_conv(node: NodeContext) -> SSAValue | None:
    """The QDQ pattern of quantize_static around a 2-D Conv: X = DequantizeLinear(qx, sx, zx) (one
    scale), W = DequantizeLinear(qw, sw, zw) of a constant int8 / uint8 weight (one scale or one
    per output channel), optional float bias. Runs as float32(int8_conv(qx, qw)) · (sx · sw) +
    bias: the product on the int8 cube (int32 accumulate, exact), one rounding by the scales,
    instead of a float conv over dequantized values. None when the inputs are not that pattern."""
    pa, pb = _dequantized(node, 0), _dequantized(node, 1)
    if pa is None or pb is None or len(node.shape(0)) != 4:
        return None
    qx, sx, zx, _ = pa
    qw, sw, zw, axis = pb
    if sx.size != 1 or not isinstance(qw, Constant) or len(qw.shape) != 4 or sw.size != 1 and (axis != 0 or sw.size != qw.shape[0]):
        return None
    if node.has_input(2) and node.dtype(2) != sx.dtype:
        return None
    window = _window_attrs(node, tuple(node.shape(0)[2:]), tuple(qw.shape[2:]))
    acc = int8_conv(node, qx, zx, qw, zw, int(node.attr("group", 1)), *window)
    if acc is None:
        return None
    o = qw.shape[0]
    mult = (np.float32(np.asarray(sx.array).reshape(())) * np.asarray(sw.array, np.float32)).astype(np.float32)
    mult = node.constant(mult.reshape(()) if mult.size == 1 else mult.reshape(1, o, 1, 1), "multiplier")
    y = node.emit(nn.MulOp(node.emit(nn.CastOp(acc, f32)), mult))
    y = _cast(node, y, from_numpy_dtype(sx.dtype))
    if node.has_input(2):
        y = node.emit(nn.AddOp(y, node.emit(nn.ReshapeOp(node.value(2), [o, 1, 1]))))
    return y


def integer_conv(node: NodeContext, x: int, x_zp: int, w: int, w_zp: int) -> SSAValue:
    """(x - zx) conv (w - zw) as float32 (exact integers), NCHW 2-D (or 1-D).

    Raises:
        AscendirError: when a partial sum could exceed 2^24 (not exact in float32)."""
    x_shape, w_shape = node.shape(x), node.shape(w)
    rank = _spatial_rank(node, x_shape)
    kernel = tuple(w_shape[2:])
    strides, pads, dilations = _as_2d(*_window_attrs(node, tuple(x_shape[2:]), kernel))
    xs, xb = _shifted_float(node, x, x_zp, None)
    ws, wb = _shifted_float(node, w, w_zp, [w_shape[0]] + [1] * (len(w_shape) - 1))
    terms = int(np.prod(w_shape[1:]))
    if terms * xb * wb > _EXACT_F32:
        raise node.error(
            f"a window of {terms} products of up to {xb} x {wb} could exceed 2^24 and lose integers in the "
            "fp32 convolution; integer convolutions this large are not supported"
        )
    if rank == 1:
        xs = node.emit(nn.ReshapeOp(xs, [*x_shape[:2], 1, x_shape[2]]))
        ws = node.emit(nn.ReshapeOp(ws, [*w_shape[:2], 1, w_shape[2]]))
    y = node.emit(nn.Conv2dOp(xs, ws, None, strides, pads, dilations, int(node.attr("group", 1))))
    if rank == 1:
        s = nn.shape_of(y)
        y = node.emit(nn.ReshapeOp(y, [s[0], s[1], s[3]]))
    return y


@converts("ConvInteger")
def convert_conv_integer(node: NodeContext) -> list[Value]:
    """y (int32) = (x - x_zero_point) conv (w - w_zero_point) (w's per output channel): the int8
    cube convolution (`_int8_conv`, exact) for a constant weight, else an fp32 convolution of
    exact integers (module docstring's bound)."""
    if (y := _int8_conv(node, 0, 2, 1, 3)) is not None:
        return [y]
    return [node.emit(nn.CastOp(integer_conv(node, 0, 2, 1, 3), i32))]


@converts("QLinearConv")
def convert_qlinear_conv(node: NodeContext) -> list[Value]:
    """y = saturate(rint(((x - zx) conv (w - zw) + bias) · (x_scale · w_scale / y_scale)) + zy);
    w_scale per tensor or per output channel, bias int32. The accumulator is the int8 cube's
    (`_int8_conv`, exact) for a constant weight, else the fp32 convolution's."""
    nd = len(node.shape(0))
    acc = _int8_conv(node, 0, 2, 3, 5)
    if acc is not None:  # int32 accumulator + int32 bias, then float32 (as onnxruntime)
        if node.has_input(8):
            acc = node.emit(nn.AddOp(acc, node.emit(nn.ReshapeOp(_vssa(node, node.input(8)), [node.shape(8)[0], 1, 1]))))
        acc = node.emit(nn.CastOp(acc, f32))
    else:
        acc = integer_conv(node, 0, 2, 3, 5)
        if node.has_input(8):
            bias = node.const(8)
            b = node.constant(np.asarray(bias, np.float32).reshape([-1] + [1] * (nd - 2)), "bias") if bias is not None else \
                node.emit(nn.ReshapeOp(node.emit(nn.CastOp(node.value(8), f32)), [node.shape(8)[0]] + [1] * (nd - 2)))
            acc = node.emit(nn.AddOp(acc, b))
    out = node.dtype(7) if node.has_input(7) else node.dtype(0)
    mult = _multiplier(node, [1, 4], 6, [node.shape(3)[0]] + [1] * (nd - 2))
    v = node.emit(nn.MulOp(acc, mult))
    zp = None
    if node.has_input(7) and not _zero_point_is_zero(node, 7):
        zp = _cast(node, node.value(7), f32)
        if node.shape(7):
            zp = node.emit(nn.ReshapeOp(zp, []))
    return [_round_saturate(node, v, zp, *_int_range(out), from_numpy_dtype(out))]
