"""Whether numpy's sgemm here sums each element's K products in an order independent of the
product's shape, which the deferred cube data's super-tiles (exec/deferred.py `_product`) rely on
for bit-identical blocks. OpenBLAS's SkylakeX sgemm does (the machine the claim was measured on);
its Haswell kernel, which AVX2 machines without AVX-512 take (OpenBLAS 0.3.31 on an AMD EPYC),
does not: a 128 x 128 block of a 512 x 1024 product differs from that tile's own product in the
last bits. Both are fp32 sums of the same exact products, so they stay within the accumulation
bound (deferred.py's module doc), which the tests check instead where the order is not free."""

from __future__ import annotations

import functools

import numpy as np

U = 2.0 ** -24  # unit roundoff of fp32


@functools.cache
def shape_free_sums() -> bool:
    """True when blocks of a 512 x 512 x 1024 sgemm equal the products of their own tiles."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 1024)).astype(np.float32)
    full = a @ b
    return all(np.array_equal(a[i: i + 128] @ b[:, j: j + 128], full[i: i + 128, j: j + 128])
               for i, j in ((0, 0), (128, 256), (384, 896)))


def assert_same_sums(got: np.ndarray, want: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """got == want bit for bit where `shape_free_sums`, else within twice the fp32 accumulation
    bound of a @ b (a: m x k, b: k x n; each within gamma_K sum |a||b| of the exact sum), plus one
    fp16 ulp when the results are fp16 (FixPipe's rounding of two different f32 sums)."""
    if shape_free_sums():
        np.testing.assert_array_equal(got, want)
        return
    k = a.shape[-1]
    bound = 2 * k * U / (1 - k * U) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    if got.dtype == np.float16:
        bound = bound + np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert (diff <= bound).all(), f"max excess {float((diff - bound).max())}"
