"""The addresses of GM views that deferred cube data merges and groups by (interpreter/exec/
deferred.py `_addr`): kept per array object while a data walk runs, they stay each view's own
when views come and go (their ids reused), past the bound and after a walk ends."""

from __future__ import annotations

import numpy as np

from ascendir.interpreter.exec import deferred


def _true(v: np.ndarray) -> int:
    return v.__array_interface__["data"][0]


def test_views_made_and_dropped_one_by_one_get_their_own_addresses():
    # each view dies before the next is made, so CPython hands the next one its id: an address
    # kept by id alone (without the array) would be the previous view's
    gm = np.zeros((64, 64), np.float16)
    for i in range(200):
        v = gm[i % 64:, (7 * i) % 64:]
        assert deferred._addr(v) == _true(v)
        del v


def test_addresses_past_the_bound_and_after_a_walk_are_right(monkeypatch):
    monkeypatch.setattr(deferred, "ADDRS", 8)
    gm = np.zeros((64, 64), np.float16)
    views = [gm[i:, i:] for i in range(20)]  # held: more than the bound
    for _ in range(2):
        assert [deferred._addr(v) for v in views] == [_true(v) for v in views]
        assert len(deferred._ADDRS) <= 8
    deferred.CubeDeferral([]).drop()
    assert not deferred._ADDRS
    assert [deferred._addr(v) for v in reversed(views)] == [_true(v) for v in reversed(views)]
