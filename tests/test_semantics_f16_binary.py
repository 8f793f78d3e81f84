"""fp16 elementwise ops computed in float32 (interpreter/exec/semantics.py `_f16_via_f32`): for
dests of CAST_ELEMENTS elements or more, vadd / vsub / vmul / vdiv on fp16 widen
their operands, compute in float32 and round once; the dest must hold numpy's fp16 result bit
for bit, NaN payloads, infs, overflow, subnormals and signed zeros included."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.exec import semantics
from ascendir.interpreter.exec.ort_cast import CAST_ELEMENTS
from ascendir.interpreter.exec.semantics import BINARY

F16 = np.dtype(np.float16)
RNG = np.random.default_rng(11)
OPS = [("vadd", np.add), ("vsub", np.subtract), ("vmul", np.multiply), ("vdiv", np.divide)]


def _patterns(shape) -> np.ndarray:
    """fp16 arrays of random bit patterns: every class (NaNs with payloads, infs, subnormals,
    zeros of both signs) occurs."""
    return RNG.integers(0, 1 << 16, shape, dtype=np.uint16).view(F16)


def _normal(shape) -> np.ndarray:
    """finite fp16 values from subnormals to 2^13 or so in magnitude."""
    return (RNG.standard_normal(shape) * 2.0 ** RNG.integers(-26, 12, shape)).astype(F16)


def _spy(monkeypatch) -> list[bool]:
    """What each `_f16_via_f32` call returned (True: it wrote the dest)."""
    seen: list[bool] = []
    orig = semantics._f16_via_f32

    def spy(*a):
        seen.append(orig(*a))
        return seen[-1]

    monkeypatch.setattr(semantics, "_f16_via_f32", spy)
    return seen


def _expect(fn, a, b) -> bytes:
    with np.errstate(all="ignore"):
        return fn(a, b).tobytes()


@pytest.mark.parametrize("op, fn", OPS)
def test_finite_operands_take_float32_and_give_numpys_fp16(monkeypatch, op, fn):
    seen = _spy(monkeypatch)
    shape = (64, CAST_ELEMENTS // 32)
    a, b = _normal(shape), _normal(shape)
    b[0, :4] = [0.0, -0.0, 2.0**-24, 65504.0]
    dst = np.zeros(shape, F16)
    with np.errstate(all="ignore"):
        BINARY[op](None)(a, b, dst)
    assert seen[-1] or not np.isfinite(dst).all()  # (a quotient or a sum may overflow: then fp16)
    assert dst.tobytes() == _expect(fn, a, b)


@pytest.mark.parametrize("op, fn", OPS + [("vmax", np.maximum), ("vmin", np.minimum)])
def test_all_bit_patterns_are_numpys(op, fn):
    a = np.arange(1 << 16, dtype=np.uint16).view(F16).reshape(256, 256)
    b = _patterns(a.shape)
    for x, y in ((a, b), (b, a), (a, a)):
        dst = np.empty(a.shape, F16)
        with np.errstate(all="ignore"):
            BINARY[op](None)(x, y, dst)
        assert dst.tobytes() == _expect(fn, x, y)


@pytest.mark.parametrize("op, fn", OPS)
def test_a_broadcast_row_and_an_operand_in_the_dest(monkeypatch, op, fn):
    seen = _spy(monkeypatch)
    a, row = RNG.standard_normal((32, 256)).astype(F16), RNG.uniform(0.5, 2.0, (1, 256)).astype(F16)
    want = _expect(fn, a, row)
    BINARY[op](None)(a, row, a)  # dest = the first operand
    assert seen == [True] and a.tobytes() == want


def test_small_dests_stay_in_fp16(monkeypatch):
    seen = _spy(monkeypatch)
    a, b = _normal((8, 64)), _normal((8, 64))
    dst = np.empty((8, 64), F16)
    BINARY["vadd"](None)(a, b, dst)
    assert seen == [] and dst.tobytes() == _expect(np.add, a, b)
