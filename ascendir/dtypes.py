"""Element types: builtin xDSL types ↔ numpy dtypes (bf16, fp8, fp4 and 4/2-bit integers via
ml_dtypes), and their storage size (sub-byte types pack several elements per byte)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float4E2M1FNType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute

from ascendir.errors import AscendirError


def _unsigned(width: int) -> IntegerType:
    return IntegerType(width, Signedness.UNSIGNED)


# Signed integers are signless (as MLIR's arith ops expect), unsigned ones carry `ui`.
_TO_NUMPY: dict[Attribute, np.dtype] = {
    f16: np.dtype(np.float16),
    bf16: np.dtype(ml_dtypes.bfloat16),
    f32: np.dtype(np.float32),
    f64: np.dtype(np.float64),
    Float8E4M3FNType(): np.dtype(ml_dtypes.float8_e4m3fn),
    Float8E4M3FNUZType(): np.dtype(ml_dtypes.float8_e4m3fnuz),
    Float8E5M2Type(): np.dtype(ml_dtypes.float8_e5m2),
    Float8E5M2FNUZType(): np.dtype(ml_dtypes.float8_e5m2fnuz),
    Float8E8M0FNUType(): np.dtype(ml_dtypes.float8_e8m0fnu),
    Float4E2M1FNType(): np.dtype(ml_dtypes.float4_e2m1fn),
    i1: np.dtype(np.bool_),
    IntegerType(2): np.dtype(ml_dtypes.int2),
    IntegerType(4): np.dtype(ml_dtypes.int4),
    i8: np.dtype(np.int8),
    i16: np.dtype(np.int16),
    i32: np.dtype(np.int32),
    i64: np.dtype(np.int64),
    _unsigned(2): np.dtype(ml_dtypes.uint2),
    _unsigned(4): np.dtype(ml_dtypes.uint4),
    _unsigned(8): np.dtype(np.uint8),
    _unsigned(16): np.dtype(np.uint16),
    _unsigned(32): np.dtype(np.uint32),
    _unsigned(64): np.dtype(np.uint64),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}

_ML_FLOATS = frozenset(d for d in _TO_NUMPY.values() if d.kind == "V" and d.name.startswith(("float", "bfloat")))
_ML_INTS = frozenset(d for d in _TO_NUMPY.values() if d.kind == "V" and d.name.startswith(("int", "uint")))

FLOAT8 = frozenset(
    np.dtype(t)
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)
)
"""The four ONNX float 8 types whose Cast honours `saturate` (E8M0 has its own rules)."""

E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)


def to_numpy_dtype(elem: Attribute) -> np.dtype:
    """numpy dtype of an xDSL element type.

    Raises:
        AscendirError: an element type ascendir does not support.
    """
    try:
        return _TO_NUMPY[elem]
    except KeyError:
        raise AscendirError(f"unsupported element type {elem}") from None


def from_numpy_dtype(dtype: np.dtype) -> Attribute:
    """xDSL element type of a numpy dtype.

    Raises:
        AscendirError: a dtype ascendir does not support.
    """
    try:
        return _FROM_NUMPY[np.dtype(dtype)]
    except KeyError:
        raise AscendirError(f"unsupported dtype {dtype}") from None


def is_float(dtype: np.dtype) -> bool:
    """Whether `dtype` is a floating-point type (numpy's or one of ml_dtypes')."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or (dtype.kind == "V" and dtype in _ML_FLOATS)


def is_integer(dtype: np.dtype) -> bool:
    """Whether `dtype` is an integer type (numpy's or ml_dtypes' 4/2-bit ones); not bool."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" or (dtype.kind == "V" and dtype in _ML_INTS)


def numpy_native(arr: np.ndarray) -> np.ndarray:
    """`arr` in a dtype plain numpy reads (`np.load` without ml_dtypes; an .npz stores ml_dtypes
    arrays as raw bytes, `|V2` for bf16): ml_dtypes floats (bf16, the float8 types, float4) as
    float32 and their 2/4-bit integers as int8 / uint8. Exact: every value of those types is a
    float32 / int8 / uint8 value (bf16 is the top half of a float32; e8m0's 2^-127 is a float32
    subnormal). Other arrays are returned as they are."""
    if arr.dtype.kind != "V":
        return arr
    if is_float(arr.dtype):
        return arr.astype(np.float32)
    if is_integer(arr.dtype):
        return arr.astype(np.int8 if ml_dtypes.iinfo(arr.dtype).min < 0 else np.uint8)
    return arr


def bits(dtype: np.dtype) -> int:
    """Bits one element occupies in memory: 4 for int4/uint4/float4, 2 for int2/uint2, else
    8 × the numpy item size (bool counts as 8, as it is stored in UB)."""
    dtype = np.dtype(dtype)
    if dtype in _ML_INTS:
        return ml_dtypes.iinfo(dtype).bits
    if dtype in _ML_FLOATS:
        return ml_dtypes.finfo(dtype).bits
    return 8 * dtype.itemsize


def packed_nbytes(dtype: np.dtype, count: int) -> int:
    """Bytes `count` elements of `dtype` occupy packed in memory: ceil(count × bits / 8)
    (numpy holds sub-byte types one per byte; the hardware and ONNX pack them)."""
    return math.ceil(count * bits(dtype) / 8)


def itemsize(elem: Attribute) -> int:
    """Bytes per element as the interpreter stores it (i1 and the sub-byte types take one
    byte; buffer sizes of packed data are `packed_nbytes`)."""
    return to_numpy_dtype(elem).itemsize


def dense_value(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """A dense elements attribute (nn.constant's, or an inline ascend.weight value) as a numpy
    array of its tensor type."""
    t = attr.type
    dtype = to_numpy_dtype(t.element_type)
    shape = tuple(t.get_shape())
    raw = attr.data.data
    n = int(np.prod(shape, dtype=np.int64))
    if dtype != np.bool_ and len(raw) == dtype.itemsize * n:
        return np.frombuffer(raw, dtype).reshape(shape).copy()
    if dtype == np.bool_ and len(raw) == n:  # xDSL stores i1 as one byte per element
        return (np.frombuffer(raw, np.uint8) != 0).reshape(shape)
    return np.array(attr.get_values(), dtype=dtype).reshape(shape)
