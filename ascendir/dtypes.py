"""Element types: builtin xDSL types ↔ numpy dtypes (bf16 and fp8 via ml_dtypes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    Float64Type,
    BFloat16Type,
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

_TO_NUMPY: dict[Attribute, np.dtype] = {
    f16: np.dtype(np.float16),
    bf16: np.dtype(ml_dtypes.bfloat16),
    f32: np.dtype(np.float32),
    f64: np.dtype(np.float64),
    i1: np.dtype(np.bool_),
    i8: np.dtype(np.int8),
    i16: np.dtype(np.int16),
    i32: np.dtype(np.int32),
    i64: np.dtype(np.int64),
    IntegerType(8, Signedness.UNSIGNED): np.dtype(np.uint8),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}


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


def itemsize(elem: Attribute) -> int:
    """Bytes per element (i1 counts as one byte, as it is stored in UB)."""
    return to_numpy_dtype(elem).itemsize
