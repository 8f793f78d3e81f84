"""Numerics of element type conversion: ONNX Cast (opset 25) on numpy arrays, shared by `nn.cast`
(nn_reference.py) and `ascend.vcast` (semantics.py).

* float → float: round to nearest even; out of range → ±inf, except for the float 8 types
  E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ, which with `saturate` (the default) clamp to ±max finite
  (±inf too) and without it follow ml_dtypes (E4M3* and FNUZ types → NaN, E5M2 → ±inf), as the
  table of the ONNX Cast spec says; float4 E2M1 (no inf/NaN) always clamps to ±6.
* → float8 E8M0 (a power of two): `round_mode` "up" (default), "down" or "nearest" and
  `saturate`, with onnx.numpy_helper.to_float8e8m0 (the ONNX reference).
* float → integer: truncate toward zero; NaN → 0. Out of range is undefined in ONNX: 8- to
  64-bit integers saturate; 4- and 2-bit integers keep the low bits (what the ONNX node tests
  expect, via ml_dtypes).
* integer → integer: keep the low bits (two's complement), as ONNX says.
* anything → bool: x != 0.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ascendir.dtypes import E8M0, FLOAT8, bits, is_float, is_integer

def cast(x: np.ndarray, dtype: np.dtype, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """`x` converted to `dtype` as ONNX Cast does (see the module doc); same shape."""
    dtype = np.dtype(dtype)
    src = np.asarray(x)
    if src.dtype == dtype:
        return src.copy()
    # ml_dtypes' 4/2-bit integers and small floats convert exactly to float64 / int64
    if src.dtype.kind == "V":
        src = src.astype(np.float64 if is_float(src.dtype) else np.int64)
    if dtype == np.bool_:
        return src != 0
    if dtype == E8M0:
        from onnx.numpy_helper import to_float8e8m0

        return to_float8e8m0(src, saturate, round_mode).astype(dtype)
    if is_integer(dtype) and src.dtype.kind == "f":
        t = np.nan_to_num(np.trunc(src.astype(np.float64)), nan=0.0, posinf=np.inf, neginf=-np.inf)
        if bits(dtype) < 8:
            return np.clip(t, -(2.0**63), 2.0**63 - 1024).astype(np.int64).astype(dtype)
        info = np.iinfo(dtype)
        # float64 bounds of a 64-bit range round up past it: clip, then fix the top end
        clipped = np.clip(t, float(info.min), float(info.max))
        out = clipped.astype(dtype)
        if dtype.itemsize == 8:
            out[clipped >= float(info.max)] = info.max
        return out
    if dtype in FLOAT8 and saturate:
        info = ml_dtypes.finfo(dtype)
        wide = src if src.dtype.kind == "f" else src.astype(np.float64)
        return np.clip(wide, float(info.min), float(info.max)).astype(dtype)
    return src.astype(dtype)


def is_plain(src: np.dtype, dst: np.dtype) -> bool:
    """Whether numpy's assignment (np.copyto, casting="unsafe") already converts `src` to `dst`
    as `cast` does: no saturation, rounding mode, truncation or != 0 rule applies."""
    src, dst = np.dtype(src), np.dtype(dst)
    return not (dst in FLOAT8 or dst == E8M0 or dst == np.bool_ or (is_integer(dst) and is_float(src)))
