"""fp16 <-> float32 conversions by onnxruntime's Cast (interpreter/exec/ort_cast.py): bit for bit
numpy's cast on every fp16 and on float32 patterns of every class (ties, subnormals, overflow,
signed zeros, signalling and quiet NaNs with payloads), through the Cast itself (not numpy's
fall-back), whatever the views' strides, with MXCSR's DAZ / FTZ bits on, from several threads,
and without loading onnxruntime for small conversions."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendir.interpreter.exec import ort_cast, semantics
from ascendir.interpreter.exec.ort_cast import narrow_into, widen_into

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
EVERY = np.arange(65536, dtype=np.uint16)
FINITE = EVERY[(EVERY & 0x7C00) != 0x7C00].view(F16)  # every fp16 but inf and NaN: 63,488 values
SPECIAL = EVERY[(EVERY & 0x7C00) == 0x7C00].view(F16)  # +-inf, and NaNs: signalling (0x7C01..) and quiet (0x7E00..)


def _numpy16(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(F16).view(np.uint16)


def _same32(got: np.ndarray, src: np.ndarray) -> bool:
    return got.dtype == F32 and np.array_equal(got.view(np.uint32), src.astype(F32).view(np.uint32))


@pytest.fixture
def casts(monkeypatch):
    """Sizes of the arrays the Cast converted (each call: one entry)."""
    sizes = []
    orig = ort_cast._Ort.cast
    monkeypatch.setattr(ort_cast._Ort, "cast", lambda self, s, d: (sizes.append(s.size), orig(self, s, d))[1])
    return sizes


@pytest.mark.parametrize("shape", [(63488,), (248, 256), (64, 992)])
def test_every_finite_fp16_widens_through_the_cast_as_numpy(casts, shape):
    src = FINITE.reshape(shape)
    dst = np.empty(shape, F32)
    widen_into(dst, src)
    assert casts == [src.size] and _same32(dst, src)


def test_every_inf_and_nan_among_finite_ones_widens_as_numpy(casts, monkeypatch):
    # the hardware quiets a signalling NaN (0x7C01 -> 0x7FC02000; numpy's cast keeps 0x7F802000):
    # a block holding one goes through numpy's cast, and only that block
    for i, bits in enumerate(SPECIAL.view(np.uint16)[::7]):
        src = FINITE[:8192].copy()
        src.view(np.uint16)[(i * 977) % 8192] = bits
        dst = np.empty(src.shape, F32)
        widen_into(dst, src)
        assert _same32(dst, src), hex(bits)
    assert not casts
    src = np.tile(FINITE[:4096], 4)
    src.view(np.uint16)[5000] = 0x7C01
    dst = np.empty(src.shape, F32)
    monkeypatch.setattr(ort_cast, "BLOCK", 4096)
    widen_into(dst, src)
    assert casts == [4096, 4096, 4096] and _same32(dst, src)


def test_strided_views_widen_by_blocks_of_rows(casts, monkeypatch):
    # a super-tile's B: a column slice of a row-major weight (exec/deferred.py `_once`), in blocks
    # of fewer rows than it has; a reversed 1-D view
    monkeypatch.setattr(ort_cast, "BLOCK", 5000)
    w = np.tile(FINITE, 4)[: 300 * 700].reshape(300, 700)
    src = w[5:290, 100:612]
    dst = np.empty(src.shape, F32)
    widen_into(dst, src)
    assert casts == [9 * 512] * 31 + [6 * 512] and _same32(dst, src)
    src = FINITE[::-3]
    dst = np.empty(src.shape, F32)
    widen_into(dst, src)
    assert _same32(dst, src)


def test_small_arrays_widen_by_numpy_other_shapes_through_scratch(casts):
    src, dst = FINITE[:4095], np.empty(4095, F32)
    widen_into(dst, src)
    assert _same32(dst, src) and not casts
    # (3-D, or a strided float32 dest, up to BLOCK elements: one cast between scratch blocks)
    for src, dst in [(FINITE[:8192].reshape(2, 4, 1024), np.empty((2, 4, 1024), F32)), (FINITE[:8192], np.empty(16384, F32)[::2])]:
        widen_into(dst, src)
        assert _same32(dst, src)
    assert casts == [8192, 8192]


def _bits32(lo: int, hi: int, step: int) -> np.ndarray:
    """float32s of bit patterns lo, lo + step, ... below hi, both signs."""
    u = np.arange(lo, hi, step, dtype=np.uint32)
    return np.concatenate([u, u | np.uint32(0x80000000)]).view(F32)


@pytest.mark.parametrize("lo, hi, step", [
    (0, 0x38800000, 4099),  # zeros, float32 subnormals, fp16 subnormal results (rounded)
    (0x33000000, 0x38900000, 89),  # 2^-25 .. just past 2^-14 (ties: fp16 subnormals are multiples of 2^-24)
    (0x387F0000, 0x38810000, 1),  # around 2^-14, the subnormal/normal edge: every float32
    (0x38800000, 0x477FF000, 997),  # fp16 normal results
    (0x477FD000, 0x477FF000, 1),  # 65504 up to 65520: every float32 (rounds to the largest finite)
])
def test_float32_patterns_narrow_through_the_cast_as_numpy(casts, lo, hi, step):
    x = _bits32(lo, hi, step)
    dst = np.empty(x.shape, F16)
    assert narrow_into(dst, x)
    assert casts == [x.size] and np.array_equal(dst.view(np.uint16), _numpy16(x))


def test_every_fp16_tie_and_its_neighbours_narrow_as_numpy():
    # the float32s halfway between consecutive fp16 values (ties: to the even one), one float32 step
    # either side of them, and the fp16 values themselves, for every finite fp16 of either sign
    h = np.arange(0, 0x7BFF, dtype=np.uint16).view(F16).astype(F32).view(np.int32)
    nxt = (h.view(F32).astype(F16).view(np.uint16) + 1).view(F16).astype(F32).view(np.int32)
    mid = ((h.view(F32).astype(np.float64) + nxt.view(F32).astype(np.float64)) / 2).astype(F32).view(np.int32)
    u = np.concatenate([h, mid - 1, mid, mid + 1]).astype(np.uint32)
    x = np.concatenate([u, u | np.uint32(0x80000000)]).view(F32)
    dst = np.empty(x.shape, F16)
    assert narrow_into(dst, x)
    assert np.array_equal(dst.view(np.uint16), _numpy16(x))


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.integers(0, 0x477FEFFF), min_size=1, max_size=64), st.booleans())
def test_any_float32_below_65520_narrows_as_numpy(bits, negative):
    u = np.array(bits, np.uint32) | np.uint32(0x80000000 if negative else 0)
    x = u.view(F32)
    dst = np.empty(x.shape, F16)
    assert narrow_into(dst, x)
    assert np.array_equal(dst.view(np.uint16), _numpy16(x))


@pytest.mark.parametrize("bad", [np.nan, -np.inf, -65520.0, 70000.0, 3e38, 0x7F800001, 0xFFC00123])
def test_nan_inf_and_overflow_are_left_to_numpy(bad):
    # (numpy's cast warns of the overflow and keeps NaN payloads: a signalling one stays signalling)
    x = np.full((64, 64), 1e-6, F32)
    x.view(np.uint32)[3, 4] = bad if isinstance(bad, int) else np.float32(bad).view(np.uint32)
    assert not narrow_into(np.zeros((64, 64), F16), x)
    want = np.empty((64, 64), F16)
    with warnings.catch_warnings(record=True) as expected:
        warnings.simplefilter("always")
        np.copyto(want, x, casting="unsafe")
    dst = np.zeros((64, 64), F16)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        semantics._store(dst, x)
    assert np.array_equal(dst.view(np.uint16), want.view(np.uint16))
    assert [w.category for w in got] == [w.category for w in expected]


def test_large_finite_values_narrow_after_the_search():
    # a sum of squares over the bound with no element past 65504 (the search of the result)
    x = np.full((64, 256), 65504, F32)
    x[::2] = -65519.99
    x[5, 7] = 6e-8
    dst = np.empty(x.shape, F16)
    assert narrow_into(dst, x)
    assert np.array_equal(dst.view(np.uint16), _numpy16(x))


def test_strided_and_overlapping_arrays_narrow_as_numpy():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((96, 160)) * rng.choice([1e-7, 1e-5, 1.0, 300.0], (96, 160))).astype(F32)
    src = x[3:67, 5:133:2]  # (a strided source: an L0C tile's view)
    big = np.zeros((130, 300), F16)
    dst = big[1:129:2, 10:74]  # (a strided destination: a tile of a GM matrix)
    assert narrow_into(dst, src)
    assert np.array_equal(dst.view(np.uint16), _numpy16(src))
    assert not big[0].any() and not big[2:129:2].any()  # nothing written around it
    # an fp16 destination over the float32 source's own bytes (the Cast reads and writes as it goes)
    for at in (0, 2, 8192):
        raw = np.zeros(4 * 16384 + 16, np.uint8)
        xs = raw[16: 16 + 4 * 16384].view(F32)
        xs[:] = rng.standard_normal(16384)
        want = _numpy16(xs.copy())
        d = raw[16 + at: 16 + at + 2 * 16384].view(F16)
        assert narrow_into(d, xs)
        assert np.array_equal(d.view(np.uint16), want)


def test_other_shapes_or_dtypes_are_left_to_numpy():
    x = np.full((4, 8), 1e-6, F32)
    dst = np.zeros((4, 8), F16)
    assert not narrow_into(dst, x[:1])  # (broadcasting)
    assert not narrow_into(dst, x.astype(np.float64))
    assert not narrow_into(np.zeros((4, 8), F32), x)
    assert not dst.any()
    one = np.zeros((), F16)
    assert not narrow_into(one, x[0, 0])
    semantics._store(one, np.array(1e-6, F32))
    assert one.view(np.uint16) == _numpy16(np.array(1e-6, F32))


def test_store_takes_it_for_large_or_tiny_tiles(casts):
    rng = np.random.default_rng(1)
    tiny = (rng.standard_normal((16, 32)) * 1e-6).astype(F32)  # a SiLU x up product's corner: fp16 subnormals
    dst = np.empty((64, 128), F16)
    semantics._store(dst[:16, :32], tiny)
    assert casts == [512] and np.array_equal(dst[:16, :32].view(np.uint16), _numpy16(tiny))
    semantics._store(dst, tiny[:1, :1])  # broadcast: numpy's cast
    normal = rng.standard_normal((32, 64)).astype(F32)  # few tiny elements in a small tile: numpy's cast
    semantics._store(dst[:32, :64], normal)
    assert casts == [512] and np.array_equal(dst[:32, :64].view(np.uint16), _numpy16(normal))
    normal = rng.standard_normal((64, 64)).astype(F32)  # (CAST_ELEMENTS elements: the Cast)
    semantics._store(dst[:, :64], normal)
    assert casts == [512, 4096] and np.array_equal(dst[:, :64].view(np.uint16), _numpy16(normal))


class _Mxcsr:
    """MXCSR of this thread through glibc's fenv_t (x86-64: its last 4 bytes)."""

    def __init__(self):
        self.libm = ctypes.CDLL("libm.so.6")
        self.env = (ctypes.c_uint32 * 8)()

    def get(self) -> int:
        assert self.libm.fegetenv(self.env) == 0
        return self.env[7]

    def set(self, v: int) -> None:
        self.libm.fegetenv(self.env)
        self.env[7] = v
        assert self.libm.fesetenv(self.env) == 0


@pytest.mark.skipif(platform.machine() != "x86_64" or not sys.platform.startswith("linux"), reason="MXCSR through glibc's fenv_t")
def test_daz_and_ftz_change_no_conversion(casts):
    # an extension built with -ffast-math switches DAZ / FTZ on for the process's thread: a float
    # multiply would flush fp16 subnormals (float32 subnormals once scaled), the F16C conversion not
    m = _Mxcsr()
    saved = m.get()
    src = np.tile(FINITE, 2)
    x = _bits32(0, 0x38900000, 577)  # float32 subnormals, fp16 subnormal and least normal results
    wide, narrow = np.empty(src.shape, F32), np.empty(x.shape, F16)
    m.set(saved | 0x8040)  # FTZ (bit 15) and DAZ (bit 6)
    try:
        assert np.float32(1e-40) * np.float32(2.0**100) == 0  # (DAZ on)
        widen_into(wide, src)
        ok = narrow_into(narrow, x)
    finally:
        m.set(saved)
    assert casts == [src.size, x.size] and ok
    assert _same32(wide, src) and np.array_equal(narrow.view(np.uint16), _numpy16(x))


def test_threads_convert_at_once():
    rng = np.random.default_rng(3)
    srcs = [rng.integers(0, 0x7C00, 300_000, dtype=np.uint16).view(F16) for _ in range(4)]
    outs, errors = [np.empty(300_000, F32) for _ in srcs], []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                widen_into(outs[i], srcs[i])
                back = np.empty(300_000, F16)
                assert narrow_into(back, outs[i]) and np.array_equal(back.view(np.uint16), srcs[i].view(np.uint16))
        except BaseException as e:  # (reported by the main thread)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(_same32(o, s) for o, s in zip(outs, srcs))


def test_small_conversions_do_not_load_onnxruntime():
    code = ("import sys, numpy as np\n"
            "from ascendir.interpreter.exec import semantics, wide\n"
            "semantics._store(np.empty(100, np.float16), np.ones(100, np.float32))\n"
            "wide.widen_into(np.empty(100, np.float32), np.ones(100, np.float16))\n"
            "print('onnxruntime' in sys.modules)\n"
            "wide.widen_into(np.empty(8192, np.float32), np.ones(8192, np.float16))\n"
            "print('onnxruntime' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]


def test_shadows_and_work_buffers_convert_through_it(casts):
    from ascendir.interpreter.exec.wide import GmShadows

    g = np.tile(FINITE, 5)[: 64 * 4096].reshape(64, 4096)
    sh = GmShadows()
    assert _same32(np.ascontiguousarray(sh.wide(g[3:40, 100:3000])), g[3:40, 100:3000])
    assert _same32(sh.widened(g[:, 512:1536], 0), g[:, 512:1536])
    sh.clear()
    assert casts == [ort_cast.BLOCK, 37 * 4096 - ort_cast.BLOCK, 64 * 1024]  # (rows 3 to 39: their chunks, then the slice)


def test_pairs_stay_bound_and_convert_what_they_hold_now():
    # a kernel's UB tiles converted again and again (`_Ort`: each pair keeps its binding): every
    # call converts the values the source holds then into that pair's dest, after the source
    # changed, with other pairs (sharing a source or a dest) in between, more pairs than are kept
    # bound, and arrays freed and new ones made (ids reused) in between
    rng = np.random.default_rng(5)
    io = ort_cast._ort()
    xs = [np.empty((64, 96), F32) for _ in range(3)]
    ds = [np.empty((64, 96), F16) for _ in range(ort_cast.BOUND + 2)]
    for rnd in range(3):
        for i, d in enumerate(ds):
            x = xs[i % len(xs)]
            x[...] = rng.standard_normal(x.shape) * (i + 1)
            io.cast(x, d)
            assert np.array_equal(d.view(np.uint16), _numpy16(x)), (rnd, i)
            io.cast(d, x)  # (back the other way: a pair of the fp16 -> float32 direction)
            assert _same32(x, d)
    for n in range(2 * ort_cast.BOUND):
        x = rng.standard_normal(6144).astype(F32) * (n + 1)
        d = np.empty(6144, F16)
        io.cast(x, d)
        assert np.array_equal(d.view(np.uint16), _numpy16(x)), n
        del x, d


def test_views_are_not_kept_bound():
    # a view would hold its base (a GM buffer, a simulation's output) alive in the kept pairs
    import gc
    import weakref

    io = ort_cast._ort()
    big = np.zeros((256, 96), F16)
    ref = weakref.ref(big)
    x = np.random.default_rng(6).standard_normal((64, 96)).astype(F32)
    io.cast(x, big[64:128])
    assert np.array_equal(big[64:128].view(np.uint16), _numpy16(x)) and not big[:64].any()
    del big
    gc.collect()
    assert ref() is None
