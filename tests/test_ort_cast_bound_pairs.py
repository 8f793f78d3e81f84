"""ort_cast's bound (source, dest) pairs (`_Ort.bound`) against numpy's cast over sequences of
conversions: new arrays (owning their memory or views, C or Fortran order, inf / NaN / overflow
values, empty ones), a source converted into another dest and a dest taking another source, the
sources' contents changed between conversions, arrays freed (ids reused), shapes changed in
place, and several threads each converting through more pairs than are kept."""

from __future__ import annotations

import threading
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ascendir.interpreter.exec.ort_cast import narrow_into, widen_into

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
SPECIAL = [*np.array([0.0, -0.0, 65504, 65519.99, 65520, -65520, 6e-8, 3e-5, np.inf, -np.inf, np.nan, 1e38], F32),
           *np.array([0x7F800001, 0xFFC00123], np.uint32).view(F32)]
SHAPES = [(5000,), (64, 64), (4096,), (1, 4096), (3, 2000), (130, 1024), (1 << 17,), ((1 << 17) + 16,), (7,), (0,), (2, 0)]


def _numpy16(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return x.astype(F16)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


@st.composite
def _float32s(draw) -> np.ndarray:
    shape = draw(st.sampled_from(SHAPES))
    rng = np.random.default_rng(draw(st.integers(0, 10**6)))
    x = (rng.standard_normal(shape) * draw(st.sampled_from([1.0, 1e-6, 100.0, 3e4, 6e4]))).astype(F32)
    if x.size and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            x.reshape(-1)[rng.integers(x.size)] = draw(st.sampled_from(SPECIAL))
    return x


def _laid_out(draw, x: np.ndarray) -> np.ndarray:
    """x itself, or its values in a strided view, an offset view or Fortran order."""
    kind = draw(st.sampled_from(["own", "own", "strided", "offset", "fortran"]))
    if kind == "own" or not x.size:
        return x
    if kind == "strided":
        v = np.empty(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)[..., ::2]
    elif kind == "offset":
        v = np.empty(x.size + 8, x.dtype)[4:4 + x.size].reshape(x.shape)
    else:
        return np.asfortranarray(x)
    v[...] = x
    return v


@settings(max_examples=40, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_conversion_sequences_match_numpy(data):
    xs, ds = [], []  # pairs kept across steps
    for step in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.sampled_from(["new", "narrow", "narrow", "widen", "other", "other", "mutate", "free", "reshape"]))
        if op == "new" or not xs:
            x = data.draw(_float32s())
            xs.append(_laid_out(data.draw, x))
            ds.append(np.zeros(x.shape, F16) if data.draw(st.booleans()) else _laid_out(data.draw, np.zeros(x.shape, F16)))
            continue
        i = data.draw(st.integers(0, len(xs) - 1))
        x, d = xs[i], ds[i]
        if op == "narrow":
            before = d.copy()
            if narrow_into(d, x):
                assert _same(d, _numpy16(x))
            else:
                assert _same(d, before), "declined, yet dst was written"
                d[...] = _numpy16(x)
        elif op == "widen" and x.ndim in (1, 2):
            h = _laid_out(data.draw, _numpy16(x))
            out = np.empty(h.shape, F32)
            widen_into(out, h)
            assert _same(out, h.astype(F32))
        elif op == "other":  # this source into another dest, another source of its shape into this dest
            d2 = np.full(x.shape, 7, F16)
            if narrow_into(d2, x):
                assert _same(d2, _numpy16(x))
            x2 = xs[data.draw(st.integers(0, len(xs) - 1))]
            if x2.shape == d.shape and narrow_into(d, x2):
                assert _same(d, _numpy16(x2))
        elif op == "mutate" and x.size:
            x[...] = (np.random.default_rng(step).standard_normal(x.shape) * 10).astype(F32)
        elif op == "free":
            del xs[i], ds[i]  # (freed now: numpy arrays hold no reference cycles; a new one may take their id)
        elif op == "reshape" and x.size and x.base is None and d.base is None and x.flags.c_contiguous and d.flags.c_contiguous:
            x.shape, d.shape = (x.size,), (d.size,)


def test_threads_converting_through_more_pairs_than_kept():
    errors = []

    def work(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            xs = [rng.standard_normal(5000 + 16 * j).astype(F32) for j in range(10)]
            ds = [np.empty(x.shape, F16) for x in xs]
            for _ in range(300):
                j = rng.integers(10)
                xs[j][:] = rng.standard_normal(xs[j].shape).astype(F32)
                assert narrow_into(ds[j], xs[j]) and _same(ds[j], _numpy16(xs[j]))
        except Exception as e:  # (reported by the main thread)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
