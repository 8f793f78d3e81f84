"""ort_cast.py `widen_into` of views of any shape into a strided float32 dest (a batched GM write
into its buffer's float32 copy, wide.py `GmShadows.write`): bit for bit numpy's cast."""

import numpy as np
import pytest

from ascendir.interpreter.exec.ort_cast import widen_into
from ascendir.interpreter.exec.wide import GmShadows


def _views(special: bool):
    bits = np.random.default_rng(3).integers(0, 1 << 16, 8 * 2 * 64 * 96, dtype=np.uint16)
    if not special:  # (exponent 31 cleared: no inf or NaN)
        bits[(bits & 0x7C00) == 0x7C00] &= 0xBFFF
    else:
        bits[5] = 0x7C01  # a signalling NaN: numpy keeps it, the hardware would quiet it
    src = bits.view(np.float16).copy()  # (its own buffer: GmShadows copies fp16 buffers only)
    dst = np.full(src.size, -1.0, np.float32)
    return src, dst, src.reshape(8, 2, 64, 96)[:, 0], dst.reshape(8, 2, 64, 96)[:, 0]


@pytest.mark.parametrize("special", [False, True])
def test_strided_3d_bits(special):
    src, dst, v, w = _views(special)
    with np.errstate(invalid="ignore"):
        widen_into(w, v)
        want = v.astype(np.float32)
    assert w.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
    # nothing outside the dest view written
    assert (dst.reshape(8, 2, 64, 96)[:, 1] == -1.0).all()


def test_shadow_write_follows_buffer():
    src, _, v, _ = _views(False)
    sh = GmShadows()
    sh.wide(src[:4096])  # the buffer gets a copy
    assert id(src) in sh.copies
    with np.errstate(over="ignore"):  # (the random fp16 data may overflow to inf: the copy must follow that too)
        src.reshape(8, 2, 64, 96)[:, 0] *= np.float16(3)
    sh.write(v)
    got = sh.wide_each(v)
    assert got.tobytes() == v.astype(np.float32).tobytes()
