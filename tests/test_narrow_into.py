"""float32 -> fp16 stores by float32 and integer passes (interpreter/exec/narrow.py `narrow_into`):
bit for bit numpy's cast for every float32 it takes (zeros, subnormal and normal fp16 results,
ties, the largest finite fp16), whatever the strides; nothing written where it does not apply
(NaN, overflow, broadcasting), and semantics.py `_store` then casts as before."""

from __future__ import annotations

import numpy as np
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from ascendir.interpreter.exec import semantics
from ascendir.interpreter.exec.narrow import narrow_into

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def _numpy(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(F16).view(np.uint16)


def _bits(lo: int, hi: int, step: int) -> np.ndarray:
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
def test_every_pattern_casts_as_numpy(lo, hi, step):
    x = _bits(lo, hi, step)
    dst = np.empty(x.shape, F16)
    assert narrow_into(dst, x)
    assert np.array_equal(dst.view(np.uint16), _numpy(x))


def test_random_tiles_with_any_strides():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((96, 160)) * rng.choice([1e-7, 1e-5, 1.0, 300.0], (96, 160))).astype(F32)
    x[::7, ::3] = 0.0
    x[1::9] *= -1
    src = x[3:67, 5:133:2]  # (a strided source: an L0C tile's view)
    big = np.zeros((130, 300), F16)
    dst = big[1:129:2, 10:74]  # (a strided destination: a tile of a GM matrix)
    assert narrow_into(dst, src)
    assert np.array_equal(dst.view(np.uint16), _numpy(src))
    assert not big[0].any() and not big[2:129:2].any()  # nothing written around it


@pytest.mark.parametrize("bad", [np.nan, np.inf, -65520.0, 70000.0])
def test_nan_and_overflow_are_left_to_numpy(bad):
    x = np.full((8, 8), 1e-6, F32)
    x[3, 4] = bad
    dst = np.zeros((8, 8), F16)
    assert not narrow_into(dst, x)
    assert not dst.any()


def test_other_shapes_or_dtypes_are_left_to_numpy():
    x = np.full((4, 8), 1e-6, F32)
    dst = np.zeros((4, 8), F16)
    assert not narrow_into(dst, x[:1])  # (broadcasting)
    assert not narrow_into(dst, x.astype(np.float64))
    assert not narrow_into(np.zeros((4, 8), F32), x)
    assert not dst.any()
    one = np.zeros((), F16)  # (0-d: a tiny element's store took the passes and raised)
    assert not narrow_into(one, x[0, 0])
    semantics._store(one, np.array(1e-6, F32))
    assert one.view(np.uint16) == _numpy(np.array(1e-6, F32))


def test_every_fp16_tie_and_its_neighbours_cast_as_numpy():
    # the float32s halfway between consecutive fp16 values (ties: to the even one), one float32 step
    # either side of them, and the fp16 values themselves, for every finite fp16 of either sign
    # (subnormal results, the carry into the next exponent, 65504)
    h = np.arange(0, 0x7BFF, dtype=np.uint16).view(F16).astype(F32).view(np.int32)
    nxt = (h.view(F32).astype(F16).view(np.uint16) + 1).view(F16).astype(F32).view(np.int32)
    mid = ((h.view(F32).astype(np.float64) + nxt.view(F32).astype(np.float64)) / 2).astype(F32).view(np.int32)
    u = np.concatenate([h, mid - 1, mid, mid + 1]).astype(np.uint32)
    x = np.concatenate([u, u | np.uint32(0x80000000)]).view(F32)
    dst = np.empty(x.shape, F16)
    assert narrow_into(dst, x)
    assert np.array_equal(dst.view(np.uint16), _numpy(x))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 0x477FEFFF), min_size=1, max_size=64), st.booleans())
def test_any_float32_below_65520_casts_as_numpy(bits, negative):
    u = np.array(bits, np.uint32) | np.uint32(0x80000000 if negative else 0)
    x = u.view(F32)
    dst = np.empty(x.shape, F16)
    assert narrow_into(dst, x)
    assert np.array_equal(dst.view(np.uint16), _numpy(x))


def test_store_takes_it_for_tiny_tiles_and_falls_back(monkeypatch):
    calls = []
    orig = semantics.narrow_into

    def spy(dst, x):
        ok = orig(dst, x)
        calls.append(ok)
        return ok
    monkeypatch.setattr(semantics, "narrow_into", spy)
    rng = np.random.default_rng(1)
    tiny = (rng.standard_normal((64, 128)) * 1e-6).astype(F32)  # a SiLU x up product's corner
    dst = np.empty((64, 128), F16)
    semantics._store(dst, tiny)
    assert calls == [True] and np.array_equal(dst.view(np.uint16), _numpy(tiny))
    semantics._store(dst, tiny[:1])  # broadcast: rounded first (round_subnormal_f16), then numpy's cast
    assert calls == [True, False] and np.array_equal(dst.view(np.uint16), np.broadcast_to(_numpy(tiny[:1]), dst.shape))
    tiny[5, 6] = np.nan
    semantics._store(dst, tiny)
    assert calls == [True, False, False] and np.array_equal(dst.view(np.uint16), _numpy(tiny))
    normal = rng.standard_normal((32, 64)).astype(F32)  # few tiny elements in a small tile: numpy's cast, no passes
    semantics._store(dst[:32, :64], normal)
    assert calls == [True, False, False] and np.array_equal(dst[:32, :64].view(np.uint16), _numpy(normal))
    normal = rng.standard_normal((64, 64)).astype(F32)  # (semantics.NARROW_PASSES elements: the passes)
    semantics._store(dst[:, :64], normal)
    assert calls == [True, False, False, True] and np.array_equal(dst[:, :64].view(np.uint16), _numpy(normal))
