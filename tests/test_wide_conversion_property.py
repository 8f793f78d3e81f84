"""Property tests of the fp16 -> float32 conversions of GM data (interpreter/exec/wide.py, by
ort_cast.py `widen_into`): numpy's cast bit for bit for any fp16 bits (zeros, subnormals,
+-65504, inf, NaN payloads) in views of any shape, strides and size, its blocks of any length
(not a divisor of the array), an inf or NaN in any block; `GmShadows.wide` gives the cast of any
sequence of views of a buffer converted chunk by chunk, the chunks left counted right."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendir.interpreter.exec import ort_cast, wide
from ascendir.interpreter.exec.ort_cast import widen_into
from ascendir.interpreter.exec.wide import F16, F32, GmShadows

# fp16 bit patterns a random draw rarely hits: zeros, the least and largest subnormals, the least
# normal, 65504, inf, a signalling and a quiet NaN (with payloads), each with both signs
SPECIAL = np.array([s | b for s in (0, 0x8000) for b in (0x0000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0x7C01, 0x7E00, 0x7D55)],
                   np.uint16)


def _bits(seed: int, shape: tuple, special: float) -> np.ndarray:
    """fp16 array of uniformly random bits, a `special` fraction of its elements from SPECIAL."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 65536, shape, dtype=np.uint16)
    pick = rng.random(shape) < special
    u[pick] = rng.choice(SPECIAL, int(pick.sum()))
    return u.view(F16)


def _same_bits(got: np.ndarray, src: np.ndarray) -> bool:
    return got.dtype == F32 and np.array_equal(got.view(np.uint32), src.astype(F32).view(np.uint32))


@st.composite
def views(draw):
    """A 1-D or 2-D fp16 view of a larger random buffer: odd sizes, steps (negative too), column slices."""
    rows, cols = draw(st.integers(1, 300)), draw(st.integers(1, 300))
    base = _bits(draw(st.integers(0, 2**32 - 1)), (rows + 7, cols + 9), draw(st.sampled_from([0.0, 1e-4, 0.01, 0.5])))
    r0, c0 = draw(st.integers(0, 7)), draw(st.integers(0, 9))
    rs, cs = draw(st.sampled_from([1, 1, 2, 3, -1])), draw(st.sampled_from([1, 1, 1, 2, -1]))
    v = base[r0: r0 + rows][::rs, c0: c0 + cols][:, ::cs]
    return v.reshape(-1) if draw(st.booleans()) and v.flags.c_contiguous else (v[0] if draw(st.integers(0, 9)) == 0 else v)


@given(views(), st.sampled_from([1 << 17, 4096, 5000, 777]))
# no example database: it would be written into the checkout (.hypothesis/)
@settings(max_examples=300, deadline=None, database=None)
def test_widen_into_is_numpys_cast_bit_for_bit(src, block):
    saved = ort_cast.BLOCK
    ort_cast.BLOCK = block  # blocks of other lengths than the arrays' rows
    try:
        dst = np.full(src.shape, np.nan, F32)
        widen_into(dst, src)
    finally:
        ort_cast.BLOCK = saved
    assert _same_bits(dst, src)


@pytest.mark.parametrize("bits", [0x7C00, 0xFC00, 0x7C01, 0xFE00, 0x7FFF, 0xFC01])
def test_a_lone_inf_or_nan_among_zeros_is_numpys_cast(bits):
    src = np.zeros((64, 256), F16)
    src.view(np.uint16)[37, 201] = bits
    dst = np.empty(src.shape, F32)
    widen_into(dst, src)
    assert _same_bits(dst, src)


@given(st.integers(0, 2**32 - 1), st.sampled_from([96, 100, 4096]), st.lists(st.tuples(st.integers(0, 63), st.integers(1, 64),
       st.integers(0, 95), st.integers(1, 96), st.sampled_from([1, 2, -1])), min_size=1, max_size=8))
@settings(max_examples=150, deadline=None, database=None)
def test_shadow_views_read_in_any_order_are_the_cast(seed, chunk, reads):
    saved = wide.CHUNK
    wide.CHUNK = chunk  # (a row per chunk, chunks across rows, the whole buffer in one)
    try:
        gm = _bits(seed, (64, 96), 0.01).copy()  # (a buffer of its own: a GM buffer)
        sh = GmShadows()
        for r0, nr, c0, nc, step in reads:
            v = gm[r0: r0 + nr, c0: c0 + nc][::step]
            assert _same_bits(np.asarray(sh.wide(v)), v)
            got = sh.copies[id(gm)]
            assert got[4] == got[2].count(0)  # the chunks left to convert: counted as flagged
        assert _same_bits(sh.wide(gm), gm)
        assert sh.copies[id(gm)][4] == 0
        sh.clear()
    finally:
        wide.CHUNK = saved
