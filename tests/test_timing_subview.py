"""Timed subviews of static sizes and strides (exec/memref_ops.py `_subview_timing_static`, the
generated straight-line form) against the general timed subview (`_subview_timing`, reached by
giving the same sizes as dynamic operands): the same result view (shape, dtype), the same GM
address tag (root, offset, strides; strides interned: equal strides are one object), the same
bounds errors, over random forms (static and dynamic offsets, static non-zero offsets, strides
1 and 3, dropped unit dims, GM sources with and without an address tag)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.interpreter.exec.common import zero_view
from ascendir.interpreter.exec.memref_ops import MemrefOps
from ascendir.interpreter.state import Frame

SRC, OUT = 0, 1  # slots of the source and the result; the operands' slots follow


class _Ops(MemrefOps):
    """MemrefOps of a host function of a timing-only program: what the timed subviews read."""

    def __init__(self, nslots: int):
        self.F = Frame(nslots)
        self.k = None
        self.m = SimpleNamespace(timing_only=True)


def _form(rng: random.Random, shape: tuple[int, ...]):
    """A random valid subview of `shape`: (dims for the static form, the same with every size
    as a dynamic operand, operand values by slot)."""
    dims, dyn_dims, vals = [], [], {}
    slot = 2
    for n in shape:
        st = rng.choice([1, 1, 3])
        sz = rng.choice([1, 1, 2, max(1, n // (2 * st))])
        sz = min(sz, (n - 1) // st + 1)
        o = rng.randrange(0, n - (sz - 1) * st)
        drop = sz == 1 and rng.random() < 0.5
        if rng.random() < 0.6:
            off = (True, slot)
            vals[slot] = o
            slot += 1
        else:
            off = (False, o)
        vals[slot] = sz
        dims.append((off, (False, sz), (False, st), drop))
        dyn_dims.append((off, (True, slot), (False, st), drop))
        slot += 1
    return dims, dyn_dims, vals


def _run(dims, vals, sources, tag):
    """Run the timed subview of `dims` once per source in `sources` (each with an equal but
    distinct copy of address tag `tag`): the result view and tag of each run."""
    ops = _Ops(64)
    run = ops._subview_timing(SRC, OUT, dims, "memref.subview in the host function", None)
    R, A = ops.F.values, ops.F.gm_tags
    for s, v in vals.items():
        R[s] = v
    out = []
    for a in sources:
        R[SRC], A[SRC] = a, None if tag is None else (tag[0], tag[1], tuple(list(tag[2])))
        run()
        out.append((R[OUT], A[OUT]))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_static_form_matches_general(seed):
    rng = random.Random(seed)
    shape = tuple(rng.choice([1, 4, 7, 16, 33]) for _ in range(rng.choice([1, 2, 3])))
    dims, dyn_dims, vals = _form(rng, shape)
    a, b = zero_view(shape, np.dtype("float16")), zero_view(shape, np.dtype("float32"))
    sources = [a, a, b, a]  # (a source of another dtype in between: its own view)
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    for tag in (None, ("root", rng.randrange(1000), strides)):
        got = _run(dims, vals, sources, tag)
        want = _run(dyn_dims, vals, sources, tag)
        for (v, t), (wv, wt), src in zip(got, want, sources):
            assert v.shape == wv.shape and v.dtype == wv.dtype == src.dtype
            assert t == wt
        if tag is not None:  # interned strides: equal strides are one object over the runs
            assert all(t[2] is got[0][1][2] for _, t in got)


@pytest.mark.parametrize("seed", range(12))
def test_static_form_bounds_errors(seed):
    rng = random.Random(100 + seed)
    shape = (rng.choice([4, 7, 16]), rng.choice([4, 16]))
    dims, dyn_dims, vals = _form(rng, shape)
    # move one offset, made dynamic, past the end (or below 0) of its dim
    i, slot = rng.randrange(2), 63
    for ds in (dims, dyn_dims):
        ds[i] = ((True, slot), *ds[i][1:])
    vals[slot] = rng.choice([-1, shape[i] - (dims[i][1][1] - 1) * dims[i][2][1]])
    a = zero_view(shape, np.dtype("float32"))
    with pytest.raises(AscendirError) as static_err:
        _run(dims, vals, [a], None)
    with pytest.raises(AscendirError) as general_err:
        _run(dyn_dims, vals, [a], None)
    assert str(static_err.value) == str(general_err.value)
    assert f"out of bounds on dim {i}: offset {vals[slot]}" in str(static_err.value)
