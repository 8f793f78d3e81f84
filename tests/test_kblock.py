"""Products of an fp16 B converted one of sgemm's K blocks at a time (interpreter/exec/kblock.py):
bit for bit numpy's single call, in the deferred GEMMs of a numerics run too."""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import kblock
from ascendir.interpreter.exec.wide import GmShadows
from test_data_loop_memo import _template_gemm

HW = load_target("ascend910b2")


def _core() -> str:
    """The CPU core OpenBLAS (the one numpy carries) chose, '' when not found."""
    root = os.path.dirname(np.__file__)
    for path in glob.glob(os.path.join(root, os.pardir, "numpy.libs", "libscipy_openblas64_*")):
        f = getattr(ctypes.CDLL(path), "scipy_openblas_get_config64_", None)
        if f is not None:
            f.restype = ctypes.c_char_p
            return f().decode()
    return ""


def test_parts_are_the_level3_drivers_k_blocks():
    # whole GEMM_Q blocks while 2 of them fit, then the rest in halves rounded up to GEMM_UNROLL_M
    assert kblock._parts(4096, 448, 16) == [448] * 8 + [256, 256]
    assert kblock._parts(11008, 448, 16) == [448] * 23 + [352, 352]
    assert kblock._parts(1000, 448, 16) == [448, 288, 264]
    assert kblock._parts(448, 448, 16) == [448]
    assert kblock._parts(900, 448, 8) == [448, 232, 220]
    assert kblock._parts(1573, 448, None) == [448, 448, 339, 338]  # level3_thread.c: halves rounded up


def test_skylakex_blocking_found():
    # the benchmark machine's BLAS (numpy's OpenBLAS on Sapphire Rapids: its SkylakeX kernels);
    # elsewhere the probe may find another pair or none (then products are single calls)
    if "SkylakeX" not in _core() or os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        pytest.skip("not numpy's single-thread SkylakeX OpenBLAS")
    assert kblock._blocking(1) == (448, 16)


def test_threaded_blas_blocking():
    # with several BLAS threads OpenBLAS runs its threaded driver, which halves K otherwise: the
    # probe, in a process of its own, finds that blocking, and products stay bit for bit numpy's
    script = (
        "import numpy as np\n"
        "from ascendir.interpreter.exec import kblock\n"
        "from ascendir.interpreter.exec.wide import GmShadows\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.standard_normal((512, 4096)).astype(np.float32)\n"
        "b = rng.standard_normal((4096, 3000)).astype(np.float16)[:, 500:2548]\n"
        "got = GmShadows().product(a, b, 0)\n"
        "print(kblock._blocking(2), np.array_equal(got, a @ b.astype(np.float32)))\n")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out[-1] == "True"
    if "SkylakeX" in _core():
        assert out[:2] == ["(448,", "None)"]


@pytest.mark.parametrize("m, k, n, cols, blocked", [
    (512, 4096, 2048, (1024, 3072), True),  # a 7B super-tile: a column slice of a 4096 x 4096 weight
    (256, 3669, 2048, (0, 2048), True),     # a tail split's K piece
    (384, 1000, 1536, (0, 1536), True),
    (16, 3000, 160, (40, 200), False),      # blocks under BLOCKED_MNK: one call
])
def test_product_bit_for_bit_numpy(m, k, n, cols, blocked):
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((m, k + 8)).astype(np.float32)[:, 8:]  # rows of a wider array, as a GM copy's
    w = rng.standard_normal((k, 4096)).astype(np.float16)
    b = w[:, cols[0]: cols[1]]
    want = a @ b.astype(np.float32)
    parts = kblock.blocks(a, b)
    assert (parts is not None) == (blocked and kblock._checked(1, k) is not None)
    sh = GmShadows()
    got = sh.product(a, b, 0)
    sh.clear()
    assert got.dtype == np.float32 and np.array_equal(got, want)


def test_other_blockings_differ():
    # the equality above is not vacuous: blocks split otherwise than the BLAS's own give other sums
    got, parts = kblock._blocking(1), kblock._checked(1, 4096)
    if parts is None:
        pytest.skip("no blocking found for this BLAS")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 512)).astype(np.float16)
    want = a @ b.astype(np.float32)
    buf = np.empty(1024 * 512, np.float32)
    assert np.array_equal(kblock.product(a, b, parts, buf), want)
    assert not np.array_equal(kblock.product(a, b, kblock._parts(4096, got[0] - 64, got[1]), buf), want)


@pytest.mark.parametrize("m, k, n, tiling", [
    (384, 1000, 1536, "m=128,n=256,k=64,l1_depth=2,split_k=1,swizzle=1"),
    # a tail split (catlass TailSplitK): its K pieces' super-tiles convert B's rows again by K blocks
    (512, 4096, 1024, "m=128,n=128,k=64,l1_depth=2,tail_split=3"),
])
def test_deferred_gemm_bit_for_bit_with_single_calls(monkeypatch, m, k, n, tiling):
    # a GEMM whose super-tiles and first tiles take K blocks: outputs and report as with one call each
    module, feeds = _template_gemm(m, k, n, tiling)
    calls = []
    orig = kblock.product
    monkeypatch.setattr(kblock, "product", lambda *a: calls.append(a[2]) or orig(*a))
    new = simulate(module, None, feeds, HW)
    assert kblock._checked(1, k) is None or calls
    monkeypatch.setattr(kblock, "_lib", lambda: None)
    plain = simulate(module, None, feeds, HW)
    assert new.report == plain.report
    (name,) = new.outputs
    assert np.array_equal(new.outputs[name], plain.outputs[name])


def test_overlapping_rows_are_one_call():
    # A's rows less than K apart (a sliding window over GM, as a 1-D convolution reads it): the
    # BLAS takes no such leading dimension (numpy copies the view first): one call, numpy's product
    rng = np.random.default_rng(5)
    base = rng.standard_normal(600 * 128 + 1024).astype(np.float32)
    a = np.lib.stride_tricks.as_strided(base, (512, 1024), (128 * 4, 4))
    b = rng.standard_normal((1024, 512)).astype(np.float16)
    assert kblock.blocks(a, b) is None
    sh = GmShadows()
    assert np.array_equal(sh.product(a, b, 0), a @ b.astype(np.float32))
    sh.clear()


def test_each_k_is_checked_before_its_blocks_are_used(monkeypatch):
    # a probe can match by accident (module doc): a K whose blocks do not give the single call's
    # sums is computed in one call
    kblock._checked.cache_clear()
    try:
        monkeypatch.setattr(kblock, "_blocking", lambda threads: (384, 16))
        assert kblock._checked(1, 4096) is None
        rng = np.random.default_rng(6)
        a = rng.standard_normal((512, 4096)).astype(np.float32)
        b = rng.standard_normal((4096, 2048)).astype(np.float16)
        assert kblock.blocks(a, b) is None
        sh = GmShadows()
        assert np.array_equal(sh.product(a, b, 0), a @ b.astype(np.float32))
        sh.clear()
    finally:
        kblock._checked.cache_clear()
