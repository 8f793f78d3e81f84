"""L2Pass.first_change (steady.py's jumps) answers as the outcome array of every read would."""

import numpy as np

from ascendir.interpreter.timing.l2 import L2Cache, L2Pass
from ascendir.hardware import load_target


def _outcomes(p, l2, keys, times, block, t_start):
    """What `read` would answer for the next len(keys) reads of `block`, without recording (the
    plain definition): hits, except designated misses not resident from an earlier kernel."""
    hit = np.ones(len(keys), bool)
    if p.recording:
        return hit
    for i in p._designated(block, p.ordinal.get(block, 0), len(keys)):
        hit[i] = l2.resident_before(int(keys[i]), float(times[i]), t_start)
    return hit


def _first_by_outcomes(p, l2, keys, times, expect):
    got = _outcomes(p, l2, keys, times, 0, 0.0)
    want = np.resize(np.array(expect, bool), len(keys))
    bad = np.flatnonzero(got != want)
    return int(bad[0]) if len(bad) else len(keys)


def test_first_change_matches_outcomes():
    hw = load_target("ascend910b2")
    l2 = L2Cache(hw)
    rng = np.random.default_rng(1)
    keys = np.arange(40, dtype=np.int64) * 7
    times = np.arange(40, dtype=np.float64) * 3.0
    l2.last.update({int(k): 0.0 for k in keys[::3]})  # resident from an earlier kernel
    for trial in range(200):
        misses = set(map(tuple, rng.integers(0, 40, (rng.integers(0, 8), 1)).tolist()))
        p = L2Pass.settled(l2.window, {(0, j) for (j,) in misses})
        nr = int(rng.integers(1, 5))
        expect = [bool(x) for x in rng.random(nr) < 0.8]
        miss_pos = [i for i, x in enumerate(expect) if not x]
        n = nr * int(rng.integers(1, 10))
        assert p.first_change(l2, keys[:n], times[:n], 0, 0.0, expect, miss_pos) == _first_by_outcomes(p, l2, keys[:n], times[:n], expect)
    rec = L2Pass(l2.window)  # recording pass: every read hits
    assert rec.first_change(l2, keys[:8], times[:8], 0, 0.0, [True, False], [1]) == 1
    assert rec.first_change(l2, keys[:8], times[:8], 0, 0.0, [True, True], []) == 8
