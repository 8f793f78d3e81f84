"""LoopMemo's relative core state of a mix kernel (loop_memo.state_key: clocks clamped to their
unit's S clock, the key, the S positions) and the restore of a stored execution's end state
(LoopMemo._restore: per unit, its S clock advanced, pinned clocks at S, the rest moved), checked
against plain per-clock reference loops on random states of 3 units, every unit or some
(LoopMemo.units), clamped or not: the same key, the same clamped and restored clocks, queues and
counters."""

from __future__ import annotations

import random
from collections import deque
from types import SimpleNamespace

import pytest

from ascendir.interpreter.accel import loop_memo
from ascendir.interpreter.timing.timeline import NPIPES

NU = 3  # units of a 910B mix kernel: AIC, AIV 0, AIV 1
NQ = 9  # flag keys


def ref_state_key(F, npipes, dst_units, clamp, units, qkeys):
    """state_key's several-unit case, one clock at a time."""
    c = F.core
    free, done, queues = c.free, c.done, F.flags.queues
    S = [free[u * npipes] for u in range(len(free) // npipes)]
    if clamp:
        for i in range(len(free)):
            s = S[i // npipes]
            if free[i] < s:
                free[i] = s
            if done[i] < s:
                done[i] = s
        for k, q in enumerate(queues):
            for j in range(len(q)):
                if q[j] < S[dst_units[k]]:
                    q[j] = S[dst_units[k]]
    us = range(len(S)) if units is None else units
    ks = range(len(queues)) if units is None else qkeys
    idx = [u * npipes + p for u in us for p in range(npipes)]
    base = max(max(free[i] for i in idx), max(done[i] for i in idx))
    rel = [tuple(len(queues[k]) for k in ks)]
    rel += ["S" if free[i] <= S[i // npipes] else free[i] - base for i in idx]
    rel += ["S" if done[i] <= S[i // npipes] else done[i] - base for i in idx]
    for k in ks:
        rel += ["S" if t <= S[dst_units[k]] else t - base for t in queues[k]]
    return tuple(rel), tuple(S[u] - base for u in us), base, S


def ref_restore(memo, F, S, vS, c_shift, ef, ed, eq, dS, dbusy, dacct, s_free):
    """LoopMemo._restore's several-unit case, one clock at a time."""
    core, npipes = F.core, memo.npipes
    us = range(len(S)) if memo.units is None else memo.units
    for u in us:
        for i in range(u * npipes, (u + 1) * npipes):
            if i == u * npipes:
                core.free[i] = S[u] + dS[u]
            else:
                core.free[i] = S[u] if ef[i] == vS[u] else ef[i] + c_shift
            core.done[i] = S[u] if ed[i] == vS[u] else ed[i] + c_shift
    for k in (range(len(eq)) if memo.units is None else memo.qkeys):
        u = memo.dst_units[k]
        F.flags.queues[k].clear()
        F.flags.queues[k].extend(S[u] if x == vS[u] else x + c_shift for x in eq[k])
    for i in range(len(core.busy)):
        core.busy[i] += dbusy[i]
    for i in range(len(F.acct)):
        F.acct[i] += dacct[i]
    if not s_free:
        F.s_clock_decisions += 1


def _frame(rng: random.Random):
    n = NU * NPIPES
    free = [float(rng.choice([0, 8, 16, 24, 40, 64, 96])) for _ in range(n)]
    done = [float(rng.choice([0, 8, 16, 24, 40, 64, 96, 128])) for _ in range(n)]
    queues = [deque(float(rng.choice([0, 16, 40, 80])) for _ in range(rng.choice([0, 0, 1, 2]))) for _ in range(NQ)]
    core = SimpleNamespace(free=free, done=done, busy=[float(rng.randrange(100)) for _ in range(n)])
    return SimpleNamespace(core=core, flags=SimpleNamespace(queues=queues), acct=[float(rng.randrange(50)) for _ in range(6)],
                           s_clock_decisions=0)


def _state(F):
    return (list(F.core.free), list(F.core.done), list(F.core.busy), [list(q) for q in F.flags.queues], list(F.acct),
            F.s_clock_decisions)


@pytest.mark.parametrize("units", [None, [0], [1, 2], [0, 2]])
def test_state_key_and_restore_match_the_reference(units):
    rng = random.Random(7)
    du = [rng.randrange(NU) for _ in range(NQ)]
    qkeys = None if units is None else [k for k in range(NQ) if du[k] in units or k % 3 == 0]
    for trial in range(200):
        clamp = trial % 4 != 3
        F, G = _frame(rng), None
        G = _frame(random.Random(0))
        G.core.free[:], G.core.done[:], G.core.busy[:] = F.core.free, F.core.done, F.core.busy
        G.flags.queues[:] = [deque(q) for q in F.flags.queues]
        G.acct[:] = F.acct
        got = loop_memo.state_key(F, NPIPES, du, clamp, units, qkeys)
        want = ref_state_key(G, NPIPES, du, clamp, units, qkeys)
        assert got == want and _state(F) == _state(G)
        # a stored end state: some clocks pinned at the stored S clocks vS, the rest moved
        S = list(got[3])
        vS = [float(rng.choice([8, 16, 24])) for _ in range(NU)]
        pick = [vS[i // NPIPES] if rng.random() < 0.3 else float(rng.choice([32, 48, 72])) for i in range(NU * NPIPES)]
        ef = list(pick)
        ed = [vS[i // NPIPES] if rng.random() < 0.3 else float(rng.choice([40, 56, 88])) for i in range(NU * NPIPES)]
        eq = [[vS[du[k]] if rng.random() < 0.3 else float(rng.choice([24, 64])) for _ in range(rng.choice([0, 1, 3]))]
              for k in range(NQ)]
        dS = [float(rng.choice([0, 8, 16])) for _ in range(NU)]
        dbusy = [float(rng.randrange(9)) for _ in range(NU * NPIPES)]
        dacct = [float(rng.randrange(9)) for _ in range(6)]
        memo = loop_memo.LoopMemo([], [], {}, {}, NPIPES, units=units, qkeys=qkeys)
        memo.dst_units = du
        c_shift, s_free = float(rng.choice([-16, 0, 24])), trial % 2 == 0
        memo._restore(F, S, vS, c_shift, ef, ed, eq, dS, dbusy, dacct, s_free)
        ref_restore(memo, G, S, vS, c_shift, ef, ed, eq, dS, dbusy, dacct, s_free)
        assert _state(F) == _state(G)
