"""The GM byte intervals the deferred cube data's super-tiles read (interpreter/exec/deferred.py
`CubeDeferral.spans`), searched by a write (`_meets_span`) as the loop over every super-tile
would find them."""

from __future__ import annotations

import itertools

import numpy as np

from ascendir.interpreter.exec.deferred import CubeDeferral


def test_meets_span_is_the_loops_answer():
    # intervals nested in, overlapping and apart from each other (a long A interval starting first
    # holds later short ones: the running maximum of the last bytes, not the last interval's)
    rng = np.random.default_rng(0)
    for trial in range(200):
        cube = CubeDeferral([])
        for key in range(int(rng.integers(1, 6))):
            a0, b0 = (int(x) for x in rng.integers(0, 200, 2))
            cube._span(key, (a0, a0 + int(rng.integers(0, 60)), b0, b0 + int(rng.integers(0, 60))))
        for lo, hi in itertools.combinations(range(0, 280, 7), 2):
            want = any((lo <= ahi and alo <= hi) or (lo <= bhi and blo <= hi) for alo, ahi, blo, bhi in cube.spans.values())
            assert cube._meets_span(lo, hi) == want, (cube.spans, lo, hi)


def test_a_changed_span_is_searched_again():
    cube = CubeDeferral([])
    cube._span("x", (0, 9, 100, 109))
    assert not cube._meets_span(50, 60)
    cube._span("x", (0, 9, 55, 58))  # (the same key reading other bytes)
    assert cube._meets_span(50, 60)
    cube._forget()
    assert not cube._meets_span(0, 200)
