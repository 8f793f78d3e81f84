"""fp16 cube operands held in fp32 (numerics runs): the L1 / L0A / L0B buffers of fp16 data are
stored as float32 arrays, and GM fp16 data read into L1 comes from an fp32 copy of its GM buffer
made once per launch (`GmShadows`), so mmad multiplies fp32 arrays as they are instead of
converting both operands on every call (that conversion cost as much as the products: 1.4 ns per
element against 89 GFLOP/s single-thread sgemm on a 128x64x128 tile).

Exact: every fp16 value is a float32 value, and what reaches these buffers is fp16 data (GM,
UB or L1 fp16) or is rounded to fp16 first (FixPipe L0C f32 -> L1 f16, a scalar store), so the
arrays hold the values the fp16 buffers would; mmad computed `a.astype(f32) @ b.astype(f32)`
before, now the same product of the same float32 values. Costs see the declared dtype
(`declared`: an op's cost is a function of its operands' shapes and dtypes), so cycles do not
change. Only float16 widens (bf16 and int8 operands stay as they are).
"""

from __future__ import annotations

import numpy as np

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
WIDE_SPACES = frozenset({"l1", "l0a", "l0b"})  # the cube's operand buffers (not L0C, BT, UB)


def storage_dtype(space: str, dtype: np.dtype) -> np.dtype:
    """The dtype numerics runs store a `space` buffer of `dtype` in: float32 for fp16 cube
    operand buffers, else `dtype`."""
    return F32 if dtype == F16 and space in WIDE_SPACES else dtype


def declared(vals: tuple, dtypes: tuple) -> tuple:
    """`vals` with each widened array replaced by a zero view of its declared dtype (`dtypes`:
    per operand, None for scalars): what the operands' cost is computed from."""
    out = []
    for v, dt in zip(vals, dtypes):
        if dt is not None and v.dtype != dt:
            v = np.broadcast_to(np.zeros((), dt), v.shape)
        out.append(v)
    return tuple(out)


class GmShadows:
    """float32 copies of GM fp16 buffers for the GM -> L1 copies of one launch.

    A buffer is copied whole once this launch's reads from it have added up to its size (before
    that each read converts its own tile): so no buffer costs more than twice the conversions of
    reading it tile by tile, and an operand re-read per output tile (a GEMM's A and B) is
    converted about once. `drop` forgets a buffer an op wrote (ops writing GM call it); `clear`
    at each launch's start (the host and comm kernels write GM between launches)."""

    __slots__ = ("copies", "read")

    def __init__(self):
        self.copies: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}  # id(owner) -> (owner, f32 copy, owner address)
        self.read: dict[int, int] = {}  # id(owner) -> elements read so far this launch

    def clear(self) -> None:
        self.copies.clear()
        self.read.clear()

    def drop(self, view: np.ndarray) -> None:
        """Forget the copy of the buffer `view` belongs to (it is being written)."""
        if self.copies:
            o = view.base if view.base is not None else view
            self.copies.pop(id(o), None)

    def wide(self, view: np.ndarray) -> np.ndarray:
        """`view` (fp16, in GM) as float32: a view of its buffer's copy when there is one (made
        here when the reads have added up), else converted."""
        o = view.base if view.base is not None else view
        got = self.copies.get(id(o))
        if got is None:
            if type(o) is not np.ndarray or o.dtype != F16 or not o.flags.c_contiguous:
                return view.astype(F32)
            k = id(o)
            n = self.read.get(k, 0) + view.size
            if n < o.size:
                self.read[k] = n
                return view.astype(F32)
            got = self.copies[k] = (o, o.astype(F32), o.__array_interface__["data"][0])
        o, c, base = got
        off = view.__array_interface__["data"][0] - base
        return np.ndarray(view.shape, F32, c, off * 2, tuple(s * 2 for s in view.strides))
