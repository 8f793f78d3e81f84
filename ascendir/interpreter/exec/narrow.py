"""float32 -> fp16 stores by float32 and integer passes (`narrow_into`), for arrays with many
elements below fp16's least normal: numpy's cast raises the FP underflow flag for each of them
that rounds inexactly (~100 ns per element on the benchmark machine, against ~5 for others) and
still takes ~12 ns more for each exact fp16 subnormal; the passes cost the same for every element
(~7.5 ns per element for a 64x128 tile, ~5.5 for 256x64, ~4.3 for 128x256, the fixed cost of a
dozen ufunc calls apart): they lose to numpy's cast on small tiles with few tiny elements, so
semantics.py `_store` takes them only where `narrow_f16`'s sample finds one element in 16 tiny.
"""

from __future__ import annotations

import numpy as np

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
I16 = np.dtype(np.int16)
I32 = np.dtype(np.int32)
_EXP = np.int32(0x7F800000)  # float32's exponent bits
_HALF = np.float32(0.5)  # 2^(-14 + 13): M below fp16's normal range
_BY_2_13 = np.int32(13 << 23)  # adds 13 to a float32's exponent field
_DOWN = np.float32(2.0**-112)  # 2^(15 - 127): fp16's exponent bias over float32's
_OVER = np.float32(65520)  # from here (in magnitude) numpy's cast gives inf (and warns)
_SIGN = np.int32(0x8000)
# fp16's least subnormal (2^-24) scaled down: a float32 subnormal, 0 where the FP unit flushes
# subnormal results to zero (FTZ), which the passes need off
_PROBE = np.array([2.0**-24], F32)


def narrow_into(dst: np.ndarray, x: np.ndarray) -> bool:
    """dst[...] = x for a float32 `x` and a float16 `dst` of the same shape (any strides), bit for bit numpy's cast (round to nearest even, subnormals, signed zeros); False,
    nothing written, where the passes do not apply: an element of 65520 or more in magnitude or
    a NaN (numpy's cast gives inf, NaN payloads and its overflow warning), other shapes or
    dtypes, or FTZ on.

    Per element, on a = |x|: M = 2^(e + 13) for a's exponent e, at least 2^-1 (e below -14: fp16's
    subnormal range, where fp16's spacing stays 2^-24), is 2^23 times fp16's spacing at a, so
    a + M (in [M, 2M], float32's spacing there being fp16's) rounds a to fp16 to the nearest,
    ties to even, as float32 addition does; subtracting M is exact. The fp16 value R times
    2^-112 is a float32 (normal for normal R, else subnormal; exact) whose bits shifted right by
    13 are R's fp16 bits without the sign: the exponent field is fp16's exponent, the significand
    fp16's, subnormals included; the sign is x's, shifted down by 16."""
    if (x.dtype != F32 or dst.dtype != F16 or x.shape != dst.shape or not x.size
            or float(_PROBE[0] * _DOWN) == 0.0):
        return False
    a = np.abs(x)
    if not np.maximum.reduce(a, axis=None) < _OVER:  # (a NaN fails the test too)
        return False
    m = np.bitwise_and(a.view(I32), _EXP)
    m += _BY_2_13
    mf = m.view(F32)
    np.maximum(mf, _HALF, out=mf)  # (e below -14, zeros included)
    a += mf
    a -= mf
    a *= _DOWN
    v = a.view(I32)
    v >>= 13
    s = np.right_shift(x.view(I32), 16, out=m)  # the sign, at bit 15 (the rest masked off)
    s &= _SIGN
    v |= s
    np.copyto(dst.view(I16), v, casting="unsafe")  # (below 2^16: the low 16 bits)
    return True
