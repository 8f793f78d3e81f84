"""Vectorised special functions numpy lacks (erf), in float64, accurate to ~1e-15 absolute.

numpy has no erf, scipy is not a dependency and `np.vectorize(math.erf)` runs ~1 µs per element.
For |x| < 2.5 we sum the all-positive series
    erf(x) = 2/sqrt(pi) · exp(-x²) · Σ_n (2x²)^n · x / (1·3·…·(2n+1))      (Abramowitz-Stegun 7.1.6)
(no cancellation; 48 terms reach 1e-17 relative at |x| = 2.5), and for |x| ≥ 2.5 the continued
fraction
    erfc(x) = exp(-x²)/sqrt(pi) · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))  (A-S 7.1.14)
evaluated bottom-up from depth 60. Checked against `math.erf` in tests/test_interpreter_special.py.
"""

from __future__ import annotations

import math

import numpy as np

_SPLIT = 2.5
_SERIES_TERMS = 48
_CF_DEPTH = 60
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def erf(x: np.ndarray) -> np.ndarray:
    """erf of `x` (any float dtype) as float64, same shape."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    ax = np.abs(x)
    small = ax < _SPLIT
    if small.any():
        xs = x[small]
        x2 = xs * xs
        two_x2 = 2.0 * x2
        term = xs.copy()
        total = xs.copy()
        for n in range(_SERIES_TERMS):
            term *= two_x2 / (2 * n + 3)
            total += term
        out[small] = _TWO_OVER_SQRT_PI * np.exp(-x2) * total
    big = ~small
    if big.any():
        xb = ax[big]
        finite = np.isfinite(xb)
        xf = np.where(finite, xb, _SPLIT)
        f = xf.copy()
        for k in range(_CF_DEPTH, 0, -1):
            f = xf + (0.5 * k) / f
        erfc = np.exp(-xf * xf) * _INV_SQRT_PI / f
        val = np.where(finite, 1.0 - erfc, 1.0)
        val = np.where(np.isnan(xb), np.nan, val)
        out[big] = np.copysign(val, x[big])
    return out
