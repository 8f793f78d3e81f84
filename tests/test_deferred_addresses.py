"""The addresses of GM views that deferred cube data merges and groups by (interpreter/exec/
deferred.py `_addr`): kept per array object while a data walk runs, they stay each view's own
when views come and go (their ids reused), past the bound and after a walk ends; the data
pointer they are read with (exec/pointer.py) is numpy's own for any view, or read numpy's way."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendir.interpreter.exec import deferred, pointer


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


@settings(max_examples=200, deadline=None, database=None)
@given(st.sampled_from([np.int8, np.float16, np.float32, np.float64]), st.integers(1, 9), st.integers(1, 9),
       st.integers(0, 8), st.integers(0, 8), st.integers(1, 3), st.integers(-3, 3).filter(bool), st.booleans())
def test_the_data_pointer_is_numpy_s_own(dtype, rows, cols, r0, c0, rstep, cstep, transpose):
    # (views of every offset, stride sign and order: the field read is where numpy keeps them)
    a = np.zeros((rows + 8, cols + 8), dtype)
    v = a[r0::rstep, c0::cstep]
    v = v.T if transpose else v
    assert pointer.data_pointer(v) == _true(v)
    w = v.reshape(-1)[1:]  # (a copy's view where v is not contiguous)
    assert pointer.data_pointer(w) == _true(w)


def test_a_reader_whose_probe_disagrees_falls_back_to_the_array_interface(monkeypatch):
    class Wrong:
        value = 64  # (what a read at the wrong offset would give)

    class FakeVoidP:
        @staticmethod
        def from_address(_):
            return Wrong

    monkeypatch.setattr(pointer.ctypes, "c_void_p", FakeVoidP)
    read = pointer.pointer_reader()
    v = np.zeros((4, 4), np.float32)[1:, 2:]
    assert read(v) == _true(v)
    assert read.__name__ == "slow"
