"""fp32 products a @ b of an fp16 b converted one K block at a time (numerics runs), bit for bit
the product numpy's single sgemm call gives.

Why: a deferred GEMM's super-tile (exec/deferred.py `_product`) multiplies fp32 activations by a
weight's column slice, k x 2048 fp16, which numerics converts to float32 first (wide.py). Converted
whole, the slice (32 MB for k = 4096, 90 MB for the 7B down projection's k = 11008) is written out
to memory and read back by sgemm's packing; converted one of sgemm's own K blocks at a time into
one small buffer, each block is still in cache when sgemm packs it and nothing is written back.
Measured on the benchmark machine (2-core Sapphire Rapids, OpenBLAS 0.3.31 SkylakeX, one thread),
conversion plus product of a 512 x 4096 x 12288 GEMM by 2048-column slices: 379-390 ms whole,
359-367 ms by K blocks; 512 x 11008 x 4096: 329-355 against 319-333 (4 alternated rounds each).

Exact: OpenBLAS's level-3 driver (driver/level3/level3.c, its `ls` loop) runs a product as K blocks
of GEMM_Q elements (the last two blocks of less than 2 GEMM_Q split in halves rounded up to
GEMM_UNROLL_M; its threaded driver, level3_thread.c, splits them in halves rounded up to an
element), scaling C by beta before the first and adding each block's product to C in order.
One sgemm call per such block, the first with beta = 0 and the others with beta = 1, makes the same
additions in the same order: the same float32 result, bit for bit. GEMM_Q and GEMM_UNROLL_M are
compiled into the library per CPU core and not exported, so `blocks` takes them from a probe at
first use in the process, per BLAS thread count: a single call against blocked calls on random
operands for candidate pairs (the SkylakeX sgemm's first: (448, 16) with one BLAS thread, (448,
threaded) with more). A kernel may match the probe's K by accident (OpenBLAS's Katmai kernels,
which it runs on Core2-era CPUs, give the single call's bits for any cut at a multiple of 128: there
the probe takes (640, 32), not that kernel's own blocks), so each K's blocks are checked once the
same way before they are used, and only blocks that gave the single call's sums are. Where no pair
matches (another BLAS), a K's check fails, or numpy's OpenBLAS does not export cblas_sgemm (found
by its ILP64 names in the libraries numpy's wheel carries), products are single calls, as before.
Blocks below BLOCKED_MNK are single calls too: there OpenBLAS may take kernels that order K
otherwise (and runs one thread where several are allowed: the probe's product and every blocked
one are above it, so both take the driver the probe found).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading

import numpy as np

from ascendir.interpreter.exec.ort_cast import widen_into

F32 = np.dtype(np.float32)
# tiles smaller than this (m * n * k, or m or n under 16) are computed alone: below it OpenBLAS's
# x86-64 sgemm may take its direct or small-matrix kernels (kernel/x86_64/sgemm_direct_performant.c:
# "if (mnk >= 28 * 512 * 512) return 0"), which order an element's K products otherwise than the
# blocked sgemm a super-tile takes (about 1 in 3 of random small tiles differ in the last bit; of
# 22,372 random tiles above it, m, n >= 16, none does)
BLOCKED_MNK = 28 * 512 * 512
# (GEMM_Q, GEMM_UNROLL_M) pairs the probe tries, in order: SkylakeX sgemm's first (found by this
# probe on the benchmark machine), then other cores' plausible ones; GEMM_UNROLL_M None stands for
# the threaded driver's halves (`_parts`)
_CANDIDATES = tuple((q, u) for q in (448, 384, 512, 320, 256, 640, 768) for u in (16, None, 8, 32, 4))
_ROW_MAJOR, _NO_TRANS = 101, 111
_lock = threading.Lock()


def _parts(k: int, q: int, u: int | None) -> list[int]:
    """The K block sizes, in order, of level3.c's `ls` loop over `k` with GEMM_Q `q` and
    GEMM_UNROLL_M `u`, or of level3_thread.c's (`u` None)."""
    out, ls = [], 0
    while ls < k:
        n = k - ls
        if n >= 2 * q:
            n = q
        elif n > q:
            n = (n + 1) // 2 if u is None else (n // 2 + u - 1) // u * u
        out.append(n)
        ls += n
    return out


@functools.cache
def _lib() -> tuple | None:
    """(cblas_sgemm, openblas_get_num_threads or None) of the OpenBLAS numpy links (ILP64: 64-bit
    integer arguments), or None."""
    root = os.path.dirname(np.__file__)
    for path in sorted(glob.glob(os.path.join(root, os.pardir, "numpy.libs", "libscipy_openblas64_*"))
                       + glob.glob(os.path.join(root, ".dylibs", "libscipy_openblas64_*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_", ""):
            f = getattr(lib, prefix + "cblas_sgemm64_", None)
            if f is not None:
                i, p = ctypes.c_int64, ctypes.c_void_p
                f.argtypes = [i, i, i, i, i, i, ctypes.c_float, p, i, p, i, ctypes.c_float, p, i]
                f.restype = None
                threads = getattr(lib, prefix + "openblas_get_num_threads64_", None)
                if threads is not None:
                    threads.argtypes, threads.restype = [], ctypes.c_int
                return f, threads
    return None


def _call(f, a: np.ndarray, k0: int, w: np.ndarray, beta: float, c: np.ndarray) -> None:
    """c = a[:, k0: k0 + len(w)] @ w + beta * c (float32, rows of unit stride)."""
    m, kc, n = a.shape[0], w.shape[0], w.shape[1]
    f(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, kc, 1.0, a.ctypes.data + 4 * k0, a.strides[0] // 4,
      w.ctypes.data, w.strides[0] // 4, beta, c.ctypes.data, c.strides[0] // 4)


def _same(f, k: int, parts: list[int]) -> bool:
    """Whether blocks `parts` of K = k give numpy's single call's product of random operands, bit
    for bit (128 rows; enough columns that every block is above BLOCKED_MNK)."""
    rng = np.random.default_rng(k)
    m = 128
    n = max(256, -(-BLOCKED_MNK // (m * min(parts)) // 16) * 16)
    a = rng.random((m, k), F32) - 0.5
    b = rng.random((k, n), F32) - 0.5
    c = np.empty((m, n), F32)
    k0 = 0
    for kc in parts:
        _call(f, a, k0, b[k0: k0 + kc], 0.0 if k0 == 0 else 1.0, c)
        k0 += kc
    return np.array_equal(c, a @ b)


@functools.cache
def _blocking(threads: int) -> tuple[int, int | None] | None:
    """(GEMM_Q, GEMM_UNROLL_M or None: threaded) of the sgemm numpy calls with `threads` BLAS
    threads, probed (module doc), or None."""
    f = _lib()[0]
    for q in dict.fromkeys(q for q, _ in _CANDIDATES):
        k = 3 * q + q // 2 + 5  # (two whole blocks, then the halves rule)
        for u in dict.fromkeys(u for qq, u in _CANDIDATES if qq == q):
            if _same(f, k, _parts(k, q, u)):
                return q, u
    return None


@functools.cache
def _checked(threads: int, k: int) -> tuple[int, ...] | None:
    """The K blocks of `_blocking(threads)` for K = k once checked against a single call (module
    doc), or None: no blocking, a single block, or the check failed."""
    got = _blocking(threads)
    parts = None if got is None else _parts(k, *got)
    return tuple(parts) if parts and len(parts) > 1 and _same(_lib()[0], k, parts) else None


def blocks(a: np.ndarray, b: np.ndarray) -> tuple[int, ...] | None:
    """The K blocks (sizes, in order) in which `product` computes a @ b, or None when it is one
    call: no blocking for this K (module doc), a single block, a block under BLOCKED_MNK, m or n
    under 16, or `a` not float32 with rows of unit stride at least K elements apart (a view whose
    rows overlap, a sliding window: numpy copies it before calling the BLAS, which takes no
    such leading dimension). a: (m, k) float32; b: (k, n)."""
    m, k = a.shape
    n = b.shape[1]
    if m < 16 or n < 16 or a.dtype != F32 or a.strides[1] != 4 or a.strides[0] % 4 or a.strides[0] < 4 * k:
        return None
    if m * n * (k // 2) < BLOCKED_MNK:  # (two blocks or more have one of K / 2 or less: no probe)
        return None
    lib = _lib()
    if lib is None:
        return None
    with _lock:
        parts = _checked(lib[1]() if lib[1] is not None else 0, k)
    if parts is None or m * n * min(parts) < BLOCKED_MNK:
        return None
    return parts


def product(a: np.ndarray, b: np.ndarray, parts: tuple[int, ...], buf: np.ndarray) -> np.ndarray:
    """a @ b as float32, b converted block by block into `buf`: a (m, k) float32 with rows of unit
    stride, b (k, n) fp16 (any strides), `parts` from `blocks(a, b)`, `buf` a flat float32 buffer of
    at least max(parts) * n elements. Returns a new (m, n) float32 array, bit for bit a @ b.astype
    (float32) by numpy."""
    f = _lib()[0]
    n = b.shape[1]
    c = np.empty((a.shape[0], n), F32)
    k0 = 0
    for kc in parts:
        w = buf[: kc * n].reshape(kc, n)
        widen_into(w, b[k0: k0 + kc])
        _call(f, a, k0, w, 0.0 if k0 == 0 else 1.0, c)
        k0 += kc
    return c
