"""Shortcuts in steady.py's detection and memo bookkeeping give the answers of the plain
definitions they replace (randomised cases, ties and near-ties included): the overtaking test's
early accept, the designated-read residency test on Python lists (`_designated_hold`) and the
generated address-row dot products (`Coefs.row_shifts`)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np

from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.accel.steady import SteadyLoop
from ascendir.interpreter.accel.accesses import Acc
from ascendir.interpreter.accel.loop_memo import _designated_hold, Coefs


def _no_overtaking_plain(v, d, ns, na):
    """The pairwise definition (SteadyLoop._no_overtaking's docstring)."""
    j = 3 * ns + na
    ds = [y for y in d[:2 * ns] if y != 0.0] + [y for y in d[j:] if y != 0.0]
    if not ds or max(ds) == min(ds):
        return True
    moving = sorted([(x, y) for x, y in zip(v[:2 * ns], d[:2 * ns]) if y != 0.0] + [(x, y) for x, y in zip(v[j:], d[j:]) if y != 0.0])
    return all(not (d1 < d0 and x1 > x0) for (x0, d0), (x1, d1) in zip(moving, moving[1:]))


def test_no_overtaking_matches_pairwise_definition():
    rng = random.Random(5)
    ns, na = 7, 4
    F = SimpleNamespace(core=SimpleNamespace(free=[0.0] * ns), acct=[0.0] * na)
    sl = SteadyLoop(F, 32, None, None, ns)
    seen = set()
    for _ in range(3000):
        nq = rng.randrange(0, 4)
        n = 3 * ns + na + nq
        # few distinct values: equal clocks, equal deltas, zero deltas and near-ties all occur
        v = [rng.choice([0.0, 10.0, 20.0, 30.0]) + rng.choice([0.0, 1e-12]) for _ in range(n)]
        d = [rng.choice([0.0, 0.0, 5.0, 7.0, 7.0 + 1e-12, 9.0]) for _ in range(n)]
        want = _no_overtaking_plain(v, d, ns, na)
        assert sl._no_overtaking(v, d) == want, (v, d)
        seen.add(want)
    assert seen == {True, False}


def test_designated_hold_matches_scalar_lookup():
    rng = np.random.default_rng(7)
    n = 40
    acc = Acc(np.zeros(n, np.int64), rng.integers(1, 4, n), rng.integers(0, 1 << 20, n), rng.random(n) * 1e4,
              np.ones(n, bool), np.ones(n, bool))
    table = rng.integers(0, 64, (2, 2))
    coefs = Coefs(table.tolist(), rng.integers(0, 2, n))
    dv = rng.integers(0, 100, 2)
    tshift, t0, window = 123.5, 50.0, 2000.0
    ri = np.arange(n)
    des = sorted(rng.choice(n, 12, replace=False).tolist())
    # resident for about half of them (the rule of l2.L2Cache.resident_before)
    last = {}
    for p in des[::2]:
        key = int(acc.sid[p]) * SHIFT + int(acc.off[p]) + int(table[coefs.inv[p]] @ dv)
        last[key] = float(acc.t[p]) + tshift - window / 2
    F = SimpleNamespace(kernel_start=t0, l2=SimpleNamespace(resident_before=lambda k, now, ts: k in last and now - last[k] <= window))
    want = np.ones(n, bool)
    for p in des:
        key = int(acc.sid[p]) * SHIFT + int(acc.off[p]) + int(table[coefs.inv[p]] @ dv)
        want[p] = key in last and float(acc.t[p]) + tshift - last[key] <= window
    assert want.sum() not in (0, n)
    assert _designated_hold(F, acc, coefs, coefs.row_shifts(dv.tolist()), ri, want, tshift, des, [])
    for p in des:
        flipped = want.copy()
        flipped[p] = not flipped[p]
        assert not _designated_hold(F, acc, coefs, coefs.row_shifts(dv.tolist()), ri, flipped, tshift, des, [])


def test_row_shifts_match_the_dot_products():
    # Coefs.row_shifts is generated straight-line code per row length: table @ dv, exactly
    rng = random.Random(11)
    for n in (1, 2, 3, 5):
        table = [[rng.randrange(-5000, 5000) for _ in range(n)] for _ in range(rng.randrange(1, 6))]
        coefs = Coefs(table, np.zeros(1, np.int64))
        for _ in range(20):
            dv = [rng.randrange(-(1 << 20), 1 << 20) for _ in range(n)]
            assert coefs.row_shifts(dv) == [sum(a * b for a, b in zip(row, dv)) for row in table]


def test_op_rows_match_first_access_order():
    # LoopMemo._finish's rows (loop_memo._op_rows, shared per op sequence): the distinct op ids in
    # first-access order and each access's row, for fresh and repeated sequences alike
    from ascendir.interpreter.accel.loop_memo import _op_rows

    rng = np.random.default_rng(3)
    for _ in range(50):
        ops = rng.choice(1 << 40, rng.integers(1, 6), replace=False)
        cid = ops[rng.integers(0, len(ops), rng.integers(1, 80))].astype(np.int64)
        for _ in range(2):  # the second call finds the first's result
            rows, inv = _op_rows(cid)
            seq = cid.tolist()
            assert rows == list(dict.fromkeys(seq))
            assert inv.dtype == np.int64 and [rows[i] for i in inv.tolist()] == seq


def test_miss_positions_match_the_scan():
    # LoopMemo._finish's miss positions (loop_memo._miss_positions, shared per outcome pattern)
    from ascendir.interpreter.accel.loop_memo import _miss_positions

    rng = np.random.default_rng(4)
    for _ in range(50):
        hit = rng.random(rng.integers(0, 70)) < rng.choice([1.0, 0.9, 0.5])
        for _ in range(2):  # the second call finds the first's result
            assert _miss_positions(hit) == frozenset(np.flatnonzero(~hit).tolist())


def test_detect_answer_does_not_depend_on_the_clash_clock(monkeypatch):
    """`SteadyLoop.detect` tests the state component that broke the period last (`clash`: a clock,
    busy time or counter) before the others: a necessary condition tested early, so the period
    found (or none), its delta and its skippable periods are the same whichever component it
    names; and a rejection by the state names the first component whose period deltas differ.
    (The random deltas here put most clocks at rates of their own, which `_settled_rates` refuses
    whatever `clash` names: it is a function of the delta alone, taken as passing here so that
    periods are found; tests/test_steady_settled_rates.py tests it.)"""
    monkeypatch.setattr(SteadyLoop, "_settled_rates", lambda self, d: True)
    rng = random.Random(11)
    ns, na = 4, 2
    answers = set()
    for _ in range(400):
        P0 = rng.choice([1, 2, 3])
        L = rng.randrange(3, 34)  # snapshots (detect keeps at most 2 * PMAX + 1)
        # per phase of the true period, each component's per-iteration delta (multiples of 0.5:
        # exact sums); a few deltas perturbed at random iterations, mostly pipe clocks
        base = [[rng.choice([0.0, 0.5, 2.0, 3.5]) for _ in range(3 * ns + na)] for _ in range(P0)]
        toks = [object() for _ in range(P0)]
        vec = [0.0] * (3 * ns + na)
        hist, cost_log = [], []
        jitter = rng.random() < 0.6
        early = rng.randrange(L)  # before it, a flag queue's length changes: fewer pending times
        for i in range(L):
            q = 2 if i >= early else rng.randrange(3)  # pending flag times follow the fixed part
            late = 0.5 * (jitter and rng.random() < 0.2)  # a pending time off the period now and then
            hist.append((i, list(vec) + [7.0 + i + late, 9.5 + i][:q], [q], 0, len(cost_log), 0))
            cost_log.append(toks[i % P0])
            step = list(base[i % P0])
            if jitter and rng.random() < 0.3:
                step[rng.randrange(ns) if rng.random() < 0.7 else rng.randrange(3 * ns + na)] += 0.5
            vec = [x + y for x, y in zip(vec, step)]
        F = SimpleNamespace(core=SimpleNamespace(free=[0.0] * ns), acct=[0.0] * na, flags=SimpleNamespace(queues=[[]]),
                            cost_log=cost_log, gm_log=[])
        got = set()
        for k in [0, *range(3 * ns + na)]:
            sl = SteadyLoop(F, L + 40, None, None, ns)
            sl.hist = list(hist)
            sl.clash = k
            found = sl.detect()
            got.add(None if found is None else (found[0], tuple(found[1]), found[4]))
            if found is None and sl.clash != k:  # learned: the first component off the period for some P
                c, ps = hist[-1][1], range(1, (L - 1) // 2 + 1)
                firsts = {next((i for i in range(3 * ns + na) if c[i] - hist[-1 - P][1][i] != hist[-1 - P][1][i] - hist[-1 - 2 * P][1][i]),
                               None) for P in ps}
                assert sl.clash in firsts
        assert len(got) == 1, got
        answers |= got
    assert None in answers and len(answers) > 2
