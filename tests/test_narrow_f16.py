"""float32 -> fp16 stores of the numerics (interpreter/exec/semantics.py `narrow_f16`): elements
in fp16's subnormal range are rounded beforehand so numpy's cast skips its slow underflow path;
the stored bits must be `astype(float16)`'s, for every kind of value."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.exec import semantics
from ascendir.interpreter.exec.semantics import narrow_f16, round_subnormal_f16

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def _cases() -> np.ndarray:
    """float32 values around every fp16 rounding boundary of the subnormal range (each multiple
    of 2^-24 and the ties halfway between, both signs, one float32 ulp either side), zeros,
    the least normal, inf, NaN, overflow, and random bit patterns."""
    q = np.arange(0, 1025, dtype=np.float64)
    at = np.concatenate([q, q + 0.5]) * 2.0**-24  # multiples of 2^-24 and the ties between them
    at = at.astype(F32)
    near = np.concatenate([at, np.nextafter(at, np.float32(1)), np.nextafter(at, np.float32(0))])
    special = np.array([0.0, 2.0**-14, 2.0**-25, 2.0**-26, 2.0**-149, 65504, 65520, 1e30, np.inf, np.nan, 1.0], F32)
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(F32)
    small = (rng.standard_normal(50_000) * 1e-5).astype(F32)
    vals = np.concatenate([near, special, bits, small])
    return np.concatenate([vals, -vals])


def _same_bits(got: np.ndarray, x: np.ndarray) -> bool:
    with np.errstate(all="ignore"):
        return np.array_equal(got.astype(F16).view(np.uint16), x.astype(F16).view(np.uint16))


def test_rounding_gives_the_casts_bits():
    x = _cases()
    with np.errstate(all="ignore"):
        got = round_subnormal_f16(x)
    assert got.dtype == F32 and got.shape == x.shape
    assert _same_bits(got, x)
    assert not np.array_equal(got, x, equal_nan=True)  # (the cases have tiny elements to round)


def test_many_tiny_elements_take_the_rounding():
    x = _cases()
    x = x[np.abs(x) < 2.0**-13][:50_000].reshape(-1, 10)  # tiny elements and a few just above 2^-14
    got = narrow_f16(x)
    assert got is not x
    assert _same_bits(got, x)


@pytest.mark.parametrize("shape", [(64, 128), (1, 4096), (3, 5, 7)])
def test_store_into_fp16_gives_the_casts_bits(shape):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3e-5).astype(F32)  # a third below 2^-14 in magnitude
    x.flat[0] = -1e-9  # rounds to -0
    assert (np.abs(x) < 2.0**-14).any()
    dst = np.empty(shape, F16)
    semantics._store(dst, x)
    assert _same_bits(dst, x)
    assert np.signbit(dst.flat[0]) and dst.flat[0] == 0


def test_values_without_tiny_elements_pass_through():
    # the fallback: nothing below 2^-14, the array is cast as it is
    x = np.array([[1.0, -2.5, 70000.0, np.nan]], F32)
    assert narrow_f16(x) is x
    few = np.full((64, 128), 0.5, F32)
    few[1::8, 3::8] = 1e-6  # one element in 64 below 2^-14 (none in the sample): not worth rounding first
    assert narrow_f16(few) is few
    zeros = np.zeros((64, 96), F32)  # zeros cast fast: no rounding first
    zeros[:, :20] = 0.25
    assert narrow_f16(zeros) is zeros
    assert narrow_f16(x[:0]) is not None
    dst = np.empty((2, 4), F16)
    with np.errstate(all="ignore"):
        semantics._store(dst, x)  # (broadcast over dst's rows)
        assert _same_bits(dst, np.broadcast_to(x, (2, 4)))


def test_fixpipe_into_a_wide_l1_buffer_rounds_as_fp16():
    # FixPipe L0C f32 -> L1 fp16 held in f32 (wide.py): the copy rounds to fp16 first, through narrow_f16
    from ascendir.interpreter.testing import parse

    c, l1, l0a = ("memref<16x16xf32, #ascend<space l0c>>", "memref<16x16xf16, #ascend<space l1>>",
                  "memref<16x16xf16, #ascend<space l0a>>")
    text = f"""builtin.module {{
  func.func @k() {{
    %c = ascend.alloc : {c}
    %l1 = ascend.alloc : {l1}
    %a = ascend.alloc : {l0a}
    ascend.copy %c, %l1 : {c}, {l1}
    ascend.copy %l1, %a : {l1}, {l0a}
    func.return
  }}
}}"""
    op = next(o for o in parse(text).walk() if o.name == "ascend.copy")
    run = semantics.copy(op)
    x = (np.random.default_rng(9).standard_normal((16, 16)) * 3e-5).astype(F32)
    x[0, 0] = -1e-9
    dst = np.empty((16, 16), F32)
    run(x, dst)
    with np.errstate(all="ignore"):
        assert np.array_equal(dst.view(np.uint32), x.astype(F16).astype(F32).view(np.uint32))
