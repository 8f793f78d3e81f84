"""wide.py `GmShadows.wide_each`: a batched GM view (slice k = block k's view) read through the
launch's fp32 copy converts the chunks its slices span, and only those, without per-slice views."""

import numpy as np
import pytest

from ascendir.interpreter.exec.wide import CHUNK, GmShadows


def _spanned(buf: np.ndarray, view: np.ndarray) -> set[int]:
    """The chunks of `buf` (flat fp16) the slices of batched `view` touch, slice by slice."""
    out = set()
    for k in range(view.shape[0]):
        sl = view[k]
        # element indices of the slice: offsets of its elements from the buffer's start
        start = (sl.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // 2
        offs = start + sum(np.indices(sl.shape)[d] * (sl.strides[d] // 2) for d in range(sl.ndim))
        out |= set(np.unique(offs.reshape(-1) // CHUNK).tolist())
    return out


def _cases():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((96, 4096)).astype(np.float16)
    kv = rng.standard_normal(8 * 4 * 128 * 96).astype(np.float16)
    heads = q.reshape(96, 32, 128)[:, 0:8].transpose(1, 0, 2)  # slices' spans overlap: one span
    return [
        ("heads", q, heads),
        ("heads reversed", q, heads[::-1]),
        ("far apart", kv, kv.reshape(8, 4, 128, 96)[:, 1]),  # slices 3 chunks each, 12 apart
        ("far apart reversed", kv, kv.reshape(8, 4, 128, 96)[::-1, 2]),
    ]


@pytest.mark.parametrize("name,buf,view", _cases(), ids=[c[0] for c in _cases()])
def test_wide_each_values_and_chunks(name, buf, view):
    sh = GmShadows()
    got = sh.wide_each(view)
    assert got.dtype == np.float32 and got.shape == view.shape
    assert got.tobytes() == view.astype(np.float32).tobytes()
    copy = sh.copies[id(buf)]
    converted = {i for i, f in enumerate(copy[2]) if f}
    assert converted == _spanned(buf, view), name  # neither fewer chunks nor the gaps between slices
    assert copy[4] == len(copy[2]) - len(converted)
    # read again after a write into GM: the copy follows the buffer
    view[3] = np.float16(2.5)
    sh.write(view[3])
    assert sh.wide_each(view).tobytes() == view.astype(np.float32).tobytes()
