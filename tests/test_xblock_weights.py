"""xblock.BlockMemo.reuse moves a stored execution's accesses by its copy ops' rows of the address
plan (`rows`) as a matrix, kept per stored execution (`_weights_of`) while the rows are the same
object: the same matrix as building it, built once for the next blocks, built again when the rows
(the GM address tags) change."""

from __future__ import annotations

import numpy as np

from ascendir.interpreter.accel.xblock import BlockMemo


def _memo() -> BlockMemo:
    bm = BlockMemo.__new__(BlockMemo)  # (only the weights' cache is used here)
    bm._weights = (None, {})
    return bm


def _direct(rows: dict, cids: list, zero: list) -> np.ndarray:
    return np.array([rows.get(c, zero) for c in cids], np.int64).reshape(len(cids), len(zero))


def test_weights_kept_per_execution_while_rows_are_the_same():
    bm = _memo()
    zero = [0, 0, 0]
    rows = {1: [1, 2, 3], 4: [0, 5, -6]}
    a, b = [1, 4, 9], [4]
    wa = bm._weights_of(rows, a, zero)
    assert np.array_equal(wa, _direct(rows, a, zero)) and wa.dtype == np.int64
    wb = bm._weights_of(rows, b, zero)
    assert np.array_equal(wb, _direct(rows, b, zero))
    assert bm._weights_of(rows, a, zero) is wa and bm._weights_of(rows, b, zero) is wb
    # an equal list of ops of another execution is its own entry (keyed by the stored object)
    assert np.array_equal(bm._weights_of(rows, [1, 4, 9], zero), wa)


def test_weights_rebuilt_when_rows_change():
    bm = _memo()
    zero = [0, 0]
    cids = [2, 3]
    first = bm._weights_of({2: [1, 1], 3: [2, 2]}, cids, zero)
    other = {2: [7, 0]}  # (new tags: a new rows object)
    got = bm._weights_of(other, cids, zero)
    assert np.array_equal(got, _direct(other, cids, zero)) and not np.array_equal(got, first)


def test_weights_cache_is_bounded():
    bm = _memo()
    rows = {0: [1]}
    keep = [[0] for _ in range(200)]  # (alive: distinct ids)
    for c in keep:
        bm._weights_of(rows, c, [0])
    assert len(bm._weights[1]) <= 64
