"""float32 -> fp16 stores by float32 and integer passes (`narrow_into`): numpy's cast costs ~1.6
ns per element on the Sapphire Rapids benchmark machine, and raises the FP underflow flag for
each element below fp16's least normal that rounds inexactly (~70 ns each: a SiLU x up product
of the 7B layer has a third of its elements there, 23 ns per element in all). The passes cost
~1.1 ns per element whatever the values, plus ~6 us per call (a dozen ufunc calls): semantics.py
`_store` takes them for tiles of 4,096 elements (NARROW_PASSES) or more, and for smaller ones where
`_many_tiny`'s sample finds one element in 16 tiny.
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
_OVER = np.float32(65520)  # from here (in magnitude) numpy's cast gives inf (and warns)
_SIGN = np.int32(0x8000)
_BIAS = np.int32(126 << 10)  # 0.5's float32 exponent (126) at fp16's exponent field


def narrow_into(dst: np.ndarray, x: np.ndarray) -> bool:
    """dst[...] = x for a float32 `x` and a float16 `dst` of the same shape (any strides), bit
    for bit numpy's cast (round to nearest even, subnormals, signed zeros); False, nothing
    written, where the passes do not apply: an element of 65520 or more in magnitude or a NaN
    (numpy's cast gives inf, NaN payloads and its overflow warning), other shapes or dtypes,
    0-d arrays (numpy's ufuncs return scalars for them, which the passes cannot write into).

    Per element, on a = |x| of float32 exponent e: M = 2^(e + 13), at least 2^-1 (e below -14:
    fp16's subnormal range, where fp16's spacing stays 2^-24), is 2^23 times fp16's spacing at
    a, so a + M (in [M, 2M): a < 2^(e + 1)) rounds a to fp16's spacing, to the nearest, ties to
    even, as float32 addition does, and its significand field is q = a / that spacing, rounded:
    fp16's significand with its leading 1 (1024 to 2048, 2048 when a rounds up to the next
    power of two) or, for M = 2^-1, fp16's subnormal bits (0 to 1024). fp16's bits are then
    q + (E - 126) * 2^10 for M's float32 exponent field E (e + 140, or 126 for 2^-1): adding
    fp16's exponent field less one to the significand with its leading 1 (a carry from 2048
    included) as fp16's encoding does; the float32 exponent bits above (E * 2^23) are dropped by
    the final cast to 16 bits. The sign is x's, shifted down by 16. No float32 subnormal is
    computed (a float32 subnormal x adds to 2^-1 as 0 would): the FP unit's FTZ and DAZ modes
    do not change the result, and no element takes the unit's slow path for subnormals."""
    if x.dtype != F32 or dst.dtype != F16 or x.shape != dst.shape or not x.size or not x.ndim:
        return False
    a = np.abs(x)
    if not np.maximum.reduce(a, axis=None) < _OVER:  # (a NaN fails the test too)
        return False
    v = a.view(I32)
    m = np.bitwise_and(v, _EXP)
    m += _BY_2_13
    mf = m.view(F32)
    np.maximum(mf, _HALF, out=mf)  # (e below -14, zeros included)
    a += mf
    m >>= 13  # E at fp16's exponent field
    v += m
    s = np.right_shift(x.view(I32), 16, out=m)  # the sign, at bit 15 (the rest masked off)
    s &= _SIGN
    v += s
    v -= _BIAS
    np.copyto(dst.view(I16), v, casting="unsafe")  # (the low 16 bits)
    return True
