"""The data walk's tile ops look their pipe up (exec/tile_ops.py `_data_tile`) only while the race
checker runs or a pipe is held, from their cost; ops whose cost is a built-in one share their
pipe per cost function (costmodel.shared_cost: one per form of op) and AIV subblock, so a checked
block resolves a cost per form, not per op (FlashAttention's 700 tile ops have a few dozen forms).
The outputs and the report stay those of resolving per op (tests/test_data_codegen.py compares
the data walk with the single walk, race errors included)."""

from __future__ import annotations

import numpy as np

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import tile_ops
from ascendir.interpreter.sim.kernel import KernelProgram
from ascendir.interpreter.testing import parse

from test_data_codegen import KERNEL, _feeds


def _count_data_walk_costs(monkeypatch) -> tuple[int, int, int]:
    """(cost function calls in the data walk, distinct cost functions, tile ops) of KERNEL's run."""
    calls = {"data": 0}
    in_data = [False]
    wrapped: dict = {}
    real = tile_ops.shared_cost

    def shared_cost(*a, **kw):
        fn = real(*a, **kw)
        w = wrapped.get(fn)
        if w is None:  # one wrapper per function: the ops sharing a function still share one
            def w(*vals, _fn=fn, **k):
                if in_data[0]:
                    calls["data"] += 1
                return _fn(*vals, **k)
            wrapped[fn] = w
        return w

    monkeypatch.setattr(tile_ops, "shared_cost", shared_cost)
    walk = KernelProgram._data_walk

    def data_walk(self, *a):
        in_data[0] = True
        try:
            return walk(self, *a)
        finally:
            in_data[0] = False

    monkeypatch.setattr(KernelProgram, "_data_walk", data_walk)
    module = parse(KERNEL)
    ntile = sum(1 for op in module.walk() if op.name in ("ascend.copy", "ascend.vadd"))
    res = simulate(module, None, {"x": _feeds()["x"]}, load_target("ascend910b2"))
    assert np.isfinite(res.outputs["z"].astype(np.float32)).all()
    return calls["data"], len(wrapped), ntile


def test_checked_block_resolves_a_cost_per_form(monkeypatch):
    """KERNEL's 10 tile ops (vadds of one form, copies of two paths) resolve at most one cost per
    cost function in the data walk, whose first block is checked in full."""
    data, forms, ntile = _count_data_walk_costs(monkeypatch)
    assert ntile >= 10 and forms <= 3
    assert 1 <= data <= forms
