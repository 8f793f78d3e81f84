"""The data pointer of an ndarray, read cheaply: the data walk compares and rebases the addresses
of GM views (exec/deferred.py, exec/data_loop_memo.py, exec/wide.py) tens of thousands of times
per 7B layer."""

from __future__ import annotations

import ctypes

import numpy as np


def pointer_reader():
    """A function ndarray -> its data pointer (int): read from the array object's `data` field
    (numpy's C API, ndarraytypes.h: PyArrayObject_fields begins with PyObject_HEAD, then
    `char *data`, what PyArray_DATA reads), ~1 us on the benchmark machine against ~8 for
    __array_interface__, which builds a dict describing the whole view. Checked on probe views
    at import; where the layout or `id` differ (another interpreter), __array_interface__."""
    def slow(v: np.ndarray) -> int:
        return v.__array_interface__["data"][0]

    at, head = ctypes.c_void_p.from_address, object.__basicsize__

    def fast(v: np.ndarray) -> int:
        return at(id(v) + head).value or 0

    try:
        probes = np.zeros((6, 8), np.float16), np.zeros(5, np.int8)
        probes += (probes[0][1:4, 2:7:2], probes[1][3:], probes[0].T[1])
        if all(fast(p) == slow(p) for p in probes):
            return fast
    except (ValueError, OverflowError, OSError):  # (an id that is no address)
        pass
    return slow


# ndarray -> the address (bytes) of its first element
data_pointer = pointer_reader()


def byte_span(v: np.ndarray, at: int | None = None) -> tuple[int, int]:
    """[first, last] byte address view `v` touches (its first element at address `at`, when the
    caller has it); last < first for an empty view."""
    lo = hi = data_pointer(v) if at is None else at
    if v.size == 0:
        return lo, lo - 1
    for n, st in zip(v.shape, v.strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + v.itemsize - 1
