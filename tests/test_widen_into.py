"""fp16 -> float32 conversion of GM data by integer and float32 passes (interpreter/exec/wide.py
`widen_into`): bit for bit numpy's cast for every fp16 bit pattern, whatever the view's strides;
numpy's cast where the passes do not apply."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.exec import wide
from ascendir.interpreter.exec.wide import GmShadows, widen_into

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
EVERY = np.arange(65536, dtype=np.uint16).view(F16)  # every fp16: zeros, subnormals, normals, inf, NaNs


def _same_bits(got: np.ndarray, src: np.ndarray) -> bool:
    return np.array_equal(got.view(np.uint32), src.astype(F32).view(np.uint32))


@pytest.mark.parametrize("shape", [(65536,), (256, 256), (64, 1024)])
def test_every_fp16_converts_as_numpys_cast(shape):
    src = EVERY.reshape(shape)
    dst = np.empty(shape, F32)
    widen_into(dst, src)
    assert _same_bits(dst, src)


@pytest.mark.parametrize("subnormal_passes", [False, True])
def test_every_fp16_converts_as_numpys_cast_by_either_path(monkeypatch, subnormal_passes):
    monkeypatch.setattr(wide, "_many_subnormal", lambda h: subnormal_passes)
    monkeypatch.setattr(wide, "ROWS_ELEMENTS", 5000)  # (several blocks, the last one short)
    src = EVERY.reshape(256, 256)[:, 3:]
    dst = np.empty(src.shape, F32)
    widen_into(dst, src)
    assert _same_bits(dst, src)


def test_many_fp16_subnormals_take_the_passes_without_float32_subnormals(monkeypatch):
    # a SiLU x up product (a third of its elements fp16 subnormals) takes `_widen_subnormals`;
    # weights of N(0, 0.02) (1 in 400) the multiply, half of them zeros (no slow path) too
    taken = []
    orig = wide._widen_subnormals
    monkeypatch.setattr(wide, "_widen_subnormals", lambda d, spare: (taken.append(d.size), orig(d, spare))[1])
    rng = np.random.default_rng(2)
    act = (rng.standard_normal((512, 704)) * rng.choice([1e-5, 1e-3, 1.0], (512, 704))).astype(F16)
    weight = (rng.standard_normal((512, 704)) * 0.02).astype(F16)
    weight[::2] = 0
    dst = np.empty(act.shape, F32)
    widen_into(dst, act)
    assert taken and sum(taken) == act.size and _same_bits(dst, act)
    taken.clear()
    widen_into(dst, weight)
    assert not taken and _same_bits(dst, weight)


def test_a_strided_column_slice_of_a_weight(monkeypatch):
    # a super-tile's B: a column slice of a row-major weight (exec/deferred.py `_once`), in blocks
    # of fewer rows than it has (ROWS_ELEMENTS)
    monkeypatch.setattr(wide, "ROWS_ELEMENTS", 3000)
    rng = np.random.default_rng(0)
    w = rng.integers(0, 65536, (300, 700), dtype=np.uint16).view(F16)
    src = w[5:290, 100:612]
    dst = np.empty(src.shape, F32)
    widen_into(dst, src)
    assert _same_bits(dst, src)


def test_small_or_daz_falls_back_to_numpys_cast(monkeypatch):
    calls = []  # sizes of numpy's fp16 -> float32 casts (the passes copy int16 -> int32 only)
    orig = np.copyto

    def copyto(d, s, **kw):
        if s.dtype == F16:
            calls.append(s.size)
        orig(d, s, **kw)
    monkeypatch.setattr(np, "copyto", copyto)
    src = EVERY.reshape(256, 256)
    small = np.empty((10, 10), F32)
    widen_into(small, src[:10, :10])
    assert calls == [100] and _same_bits(small, src[:10, :10])
    widen_into(np.empty((256, 256), F32), src)
    assert calls == [100]  # (the passes: no cast)
    # a process flushing subnormal inputs to zero (DAZ) would lose fp16 subnormals: the probe sees it
    monkeypatch.setattr(wide, "_PROBE", np.array([0.0], F32))
    dst = np.empty((256, 256), F32)
    widen_into(dst, src)
    assert calls == [100, 65536] and _same_bits(dst, src)


def test_shadows_and_work_buffers_convert_through_it():
    rng = np.random.default_rng(1)
    g = rng.integers(0, 65536, (64, 4096), dtype=np.uint16).view(F16)
    sh = GmShadows()
    assert _same_bits(np.ascontiguousarray(sh.wide(g[3:40, 100:3000])), g[3:40, 100:3000])
    assert _same_bits(sh.widened(g[:, 512:1536], 0), g[:, 512:1536])
    sh.clear()
