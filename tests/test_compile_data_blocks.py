"""Compile-time shortcuts of the data walk's generated blocks (exec/data_codegen.py) and of the
tile ops' copy paths read once per kernel (sim/kernel.py `_prewalk`, KernelInfo.paths): the
walks they give equal the single walk's, and sabotaged they do not."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import data_codegen, scalar_codegen, tile_ops
from ascendir.interpreter.testing import parse

from test_data_codegen import KERNEL, _feeds
from test_data_walk_equivalence import _assert_same


def _sources(monkeypatch) -> list[str]:
    """The data walk's generated sources of KERNEL (simulated once)."""
    got: list[str] = []
    real = scalar_codegen.generated

    def spy(head, lines, env, name, slots=None):
        got.append("\n".join(lines))
        return real(head, lines, env, name, slots)

    monkeypatch.setattr(data_codegen, "generated", spy)
    simulate(parse(KERNEL), None, _feeds(), load_target("ascend910b2"))
    return got


def test_stores_read_only_by_the_block_are_dropped(monkeypatch):
    """The kernel's block keeps the stores of what closures read (the subview's offset) and drops
    the others (constants and the parity test, read from locals)."""
    (src,) = _sources(monkeypatch)
    stores = re.findall(r"R\[\d+\] = v\w+", src)
    scalars = re.findall(r"^\s*v\w+ = ", src, re.M)
    assert stores and len(stores) < len(scalars)


@pytest.mark.parametrize("nest", [0, 1, data_codegen.MAX_NEST])
@pytest.mark.parametrize("loop", [1, data_codegen.CALL_LOOP, 10 ** 9])
def test_call_loops_and_direct_calls_equal_single_walk(loop, nest, monkeypatch):
    """Closures called from a loop over their tuple (CALL_LOOP 1: every run) or one by one (a
    limit no run reaches): the single walk's outputs and cycles."""
    monkeypatch.setattr(data_codegen, "MAX_NEST", nest)
    monkeypatch.setattr(data_codegen, "CALL_LOOP", loop)
    assert _assert_same(KERNEL, None, _feeds(), "as written", monkeypatch) == "ok"


@pytest.mark.parametrize("nest", [0, data_codegen.MAX_NEST])
def test_sabotaged_reads_break_the_walk(nest, monkeypatch):
    """With no slot noted as read by other code (closures, yields' copies), the stores they read
    are dropped too: the walk no longer equals the single walk (what the equivalence tests see)."""
    monkeypatch.setattr(data_codegen, "MAX_NEST", nest)
    monkeypatch.setattr(data_codegen.DataCodegen, "_read_outside", lambda self, ops: None)
    with pytest.raises((AssertionError, TypeError)):
        _assert_same(KERNEL, None, _feeds(), "sabotaged", monkeypatch)


def test_copy_paths_come_from_the_prewalk(monkeypatch):
    """The tile ops' compiles take each copy's path from the pre-walk (tile_ops.copy_path is not
    called again); a wrong path there shows in the trace's slice names, and without one
    (KernelInfo.paths empty) tile_ops asks copy_path itself, with the same record."""
    hw = load_target("ascend910b2")

    def trace(**patch) -> tuple:
        with monkeypatch.context() as mp:
            for name, value in patch.items():
                mp.setattr(tile_ops, name, value)
            r = simulate(parse(KERNEL), None, _feeds(), hw, trace=True)
        return r.report["total_cycles"], [e.get("name") for e in r.trace_events if e.get("ph") == "X"], r.outputs["z"]

    def refuse(op, target):
        raise AssertionError("copy_path asked again")

    base = trace()
    assert "GM->UB" in base[1]
    assert trace(copy_path=refuse)[:2] == base[:2]
    swapped = lambda op, target, path=None: real_name(op, target, path and (path[1], path[0], path[2]))  # noqa: E731
    real_name = tile_ops.slice_name
    assert trace(slice_name=swapped)[1] != base[1]
    from ascendir.interpreter.sim.kernel import KernelProgram
    prewalk = KernelProgram._prewalk

    def forgetful(self, m, op, tree) -> None:
        prewalk(self, m, op, tree)
        self._facts[4].clear()  # (KernelInfo.paths)

    monkeypatch.setattr(KernelProgram, "_prewalk", forgetful)
    empty = trace()
    assert empty[:2] == base[:2] and np.array_equal(empty[2], base[2])
