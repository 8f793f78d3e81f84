"""`LoopMemo.prefix` starts a loop at a checkpoint of a stored execution: the state at the start of
any iteration that execution ran one by one (`SteadyLoop.marks`), not only at its first jump, as
long as every read before it gets its stored L2 outcome now (`_first_change`). A GEMM's K loop in
the timed pass rarely jumps (its prefetching AIVs' clocks and the designated misses keep it off
any period), but a later tile often enters it from a stored relative state and reads as the
stored one did up to some iteration: that part is applied instead of run. Same results bit for
bit as without the loop memo; only `extrapolated_iterations` counts more."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import Accel
from ascendir.interpreter.accel import loop_memo
from ascendir.interpreter.accel.accesses import Acc
from ascendir.interpreter.accel.loop_memo import Coefs, _first_change
from ascendir.interpreter.testing import matmul_ir, parse
from ascendir.interpreter.timing.l2 import SHIFT
from test_interpreter_accel import WITHOUT, Fired, assert_identical

HW = load_target("ascend910b2")


def _now(resident, acc, table, inv, dv, tshift, t0, des):
    """The definition: the outcome each read gets now (a designated read misses unless the chip L2
    holds its tile, every other read hits)."""
    out = []
    for p in range(len(acc.cid)):
        key = int(acc.sid[p]) * SHIFT + int(acc.off[p]) + (int(np.dot(table[inv[p]], dv)) if table is not None else 0)
        out.append(resident(key, float(acc.t[p]) + tshift, t0) if p in des else True)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_first_change_matches_the_definition(seed):
    rng = np.random.default_rng(seed)
    pr = random.Random(seed)
    window, t0, tshift = 2000.0, 50.0, 77.5
    for _ in range(60):
        n = int(rng.integers(1, 50))
        acc = Acc(np.zeros(n, np.int64), rng.integers(1, 4, n), rng.integers(0, 1 << 20, n), rng.random(n) * 1e4,
                  np.ones(n, bool), np.ones(n, bool))
        shifted = pr.random() < 0.5
        table = rng.integers(0, 64, (2, 2)) if shifted else None
        inv = rng.integers(0, 2, n)
        dv = rng.integers(0, 100, 2)
        coefs = Coefs(table.tolist(), inv) if shifted else None
        rows = coefs.row_shifts(dv.tolist()) if shifted else None
        des = sorted(rng.choice(n, int(rng.integers(0, n + 1)), replace=False).tolist())
        last = {}
        for p in des:
            if pr.random() < 0.5:
                key = int(acc.sid[p]) * SHIFT + int(acc.off[p]) + (int(np.dot(table[inv[p]], dv)) if shifted else 0)
                last[key] = float(acc.t[p]) + tshift - window / 2

        def resident(k, now, ts):
            return k in last and now - last[k] <= window

        # stored outcomes: what the reads get now, a few flipped (often none)
        now = _now(resident, acc, table, inv, dv, tshift, t0, set(des))
        rhit = np.array(now)
        for p in rng.choice(n, min(n, int(rng.integers(0, 3))), replace=False):
            rhit[p] = not rhit[p]
        misses = frozenset(np.flatnonzero(~rhit).tolist())
        F = SimpleNamespace(kernel_start=t0, l2=SimpleNamespace(resident_before=resident))
        want = next((p for p in range(n) if now[p] != rhit[p]), n)
        assert _first_change(F, acc, coefs, rows, np.arange(n), rhit, misses, tshift, des, []) == want
        # the recording pass (no designation: every read hits)
        assert _first_change(F, acc, coefs, rows, np.arange(n), rhit, misses, tshift, None, []) == min(misses, default=n)


def test_prefix_from_an_iteration_checkpoint_gives_identical_results(monkeypatch):
    """A 24-core GEMM, timing-only: later tiles' K loops start at a stored execution's
    iteration checkpoint (spied), and the run equals the one without the loop memo."""
    module = parse(matmul_ir(512, 1024, 1024, tm=128, tn=128, tk=64, block_dim=24))
    marks = []
    prefix = loop_memo.LoopMemo.prefix

    def spy(self, F, R, ent, n):
        r = prefix(self, F, R, ent, n)
        if r is not None and r[1] is None:
            marks.append(r[0])
        return r

    monkeypatch.setattr(loop_memo.LoopMemo, "prefix", spy)
    fired = Fired(monkeypatch)
    on, n_on = fired.run(module, Accel())
    assert marks and max(marks) > 1, "no iteration checkpoint was taken: the test would prove nothing"
    off, _ = fired.run(module, WITHOUT["loop_memo"])
    assert_identical(on, off, "GEMM 512x1024x1024, iteration checkpoints on vs loop memo off")
