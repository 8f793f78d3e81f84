"""vreduce_max / vreduce_min over a short float32 last dim by a transposed copy (semantics.py
`_short_extreme`): numpy's bits (values, zero signs, NaN payloads) per block and batched."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.dialects import ascend
from ascendir.interpreter.exec import registry, semantics

RNG = np.random.default_rng(7)


def _rows(shape: tuple, nans: bool = False, zeros: bool = False) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    for i in range(0, flat.shape[0], 3):
        if zeros:  # a row whose extreme is a zero of either sign, the others on one side of it
            flat[i] = -np.abs(flat[i]) if i % 2 else np.abs(flat[i])
            flat[i, RNG.choice(shape[-1], 2, replace=False)] = RNG.choice([-0.0, 0.0], 2)
        if nans:  # two NaNs of other payloads in one row: which one numpy keeps depends on its order
            bits = flat[i].view(np.uint32)
            bits[RNG.choice(shape[-1], 2, replace=False)] = np.uint32(0x7FC00000) | RNG.integers(1, 2**22, 2).astype(np.uint32)
    flat[1, 0] = np.inf
    flat[2, :] = -np.inf
    return x


@pytest.mark.parametrize("name, fn", [("vreduce_max", np.maximum), ("vreduce_min", np.minimum)])
@pytest.mark.parametrize("shape", [(64, 12), (8, 64, 12), (5, 2), (3, 32)])
@pytest.mark.parametrize("kind", ["plain", "nans", "zeros"])
def test_numpy_bits(name, fn, shape, kind):
    t = ascend.vector_op(name)
    x = _rows(shape, nans=kind == "nans", zeros=kind == "zeros")
    want = fn.reduce(x, axis=-1, keepdims=True)
    for sem in (registry.SEMANTICS[t](None), registry.BATCHED[t][0](None)):
        dst = np.full(shape[:-1] + (1,), 42.0, np.float32)
        sem(x, dst)
        assert dst.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()


def test_the_short_path_is_taken(monkeypatch):
    # rows without a zero or NaN extreme: the transposed reduction, not numpy's per-row one
    taken: list[bool] = []
    short = semantics._short_extreme

    def spying(fn, x, dst):
        taken.append(short(fn, x, dst))
        return taken[-1]

    monkeypatch.setattr(semantics, "_short_extreme", spying)
    x = _rows((8, 64, 12))
    dst = np.empty((8, 64, 1), np.float32)
    registry.SEMANTICS[ascend.vector_op("vreduce_max")](None)(x, dst)
    assert taken == [True]
    assert np.array_equal(dst, x.max(-1, keepdims=True))
    registry.SEMANTICS[ascend.vector_op("vreduce_max")](None)(_rows((8, 64, 12), nans=True), dst)
    assert taken == [True, False]


@pytest.mark.parametrize("name, fn", [("vreduce_max", np.maximum), ("vreduce_min", np.minimum)])
def test_no_rows(name, fn):
    # a tile of no rows: numpy's (empty) result, not the short path's reduction of nothing
    x = np.empty((0, 12), np.float32)
    dst = np.empty((0, 1), np.float32)
    registry.SEMANTICS[ascend.vector_op(name)](None)(x, dst)
    assert dst.shape == fn.reduce(x, axis=-1, keepdims=True).shape
