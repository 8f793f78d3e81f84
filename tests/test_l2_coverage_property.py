"""The L2 coverage lookups (interpreter/timing/coverage.py) against element sets, on random tiles of one
buffer: `covered_first` (a launch settled at once), `RunTable.covers` (one read) and
`RunTable.covers_many` (a launch memo's checks) give what the elements say."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendir.hardware import load_target
from ascendir.interpreter.timing.coverage import RunTable, covered_first
from ascendir.interpreter.timing.l2 import L2Cache

W = 64  # the buffer's row pitch (elements)

tiles = st.lists(st.tuples(st.integers(0, 7), st.integers(0, W - 1), st.integers(1, 4), st.integers(1, 24)),
                 min_size=1, max_size=12)


def _keys(c: L2Cache, spec) -> tuple[list[int], list[set[int]]]:
    """Keys of [h, w] tiles at (row, col) of one [*, W] buffer (clipped to the row), and their element sets."""
    keys, elems = [], []
    for r, col, h, w in spec:
        w = min(w, W - col)
        keys.append(c.key("buf", r * W + col, (h, w), (W, 1)))
        elems.append({(r + i) * W + col + j for i in range(h) for j in range(w)})
    return keys, elems


@settings(max_examples=150, deadline=None)
@given(tiles, st.lists(st.floats(0, 100, allow_nan=False), min_size=12, max_size=12))
def test_coverage_lookups_are_the_element_sets(spec, times):
    c = L2Cache(load_target("ascend910b2"))
    keys, elems = _keys(c, spec)
    k = np.array(keys, np.int64)
    t = np.array(times[:len(keys)])
    # covered_first: distinct tiles, each at its first access
    first: dict[int, tuple[float, set[int]]] = {}
    for kk, tt, e in zip(keys, t.tolist(), elems):
        if kk not in first or tt < first[kk][0]:
            first[kk] = (tt, e)
    uk = np.array(sorted(first), np.int64)
    ut = np.array([first[x][0] for x in uk.tolist()])
    got = covered_first(c.geo, uk, ut)
    for i, kk in enumerate(uk.tolist()):
        tt, e = first[kk]
        held = set().union(*[first[o][1] for o in first if o != kk and first[o][0] < tt])
        assert got[i] == (e <= held), (kk, tt)
    # RunTable.covers / covers_many: the runs accessed within [lo, hi]
    table = RunTable(c.geo, k, t)
    lo, hi = float(np.sort(t)[len(t) // 2]), 70.0  # (an access time: the range's ends count)
    for kk, e in zip(keys, elems):
        held = set().union(*[o for to, o in zip(t.tolist(), elems) if lo <= to <= hi])
        assert table.covers(c.geo, kk, lo, hi, False) == (e <= held)
    # covers_many: at once when no run is later than every query (an earlier kernel's accesses;
    # each key asked 17 times: more than it looks up one by one), and one by one otherwise
    late = t.max() + 1.0
    held = set().union(*[o for to, o in zip(t.tolist(), elems) if lo <= to])
    many = table.covers_many(c.geo, np.repeat(k, 17), np.full(17 * len(k), lo), np.full(17 * len(k), late))
    assert many.tolist() == np.repeat([e <= held for e in elems], 17).tolist()
    few = table.covers_many(c.geo, k, np.full(len(k), lo), np.full(len(k), late))
    assert few.tolist() == [e <= held for e in elems]
