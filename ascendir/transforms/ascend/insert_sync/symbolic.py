"""The values insert-sync's symbolic execution (analysis.py) computes: windows of buffers
(`View`), integers from `arith` ops (`ARITH`, `CMP`), and how a buffer is named in messages."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue

from ascendir.dialects.ascend import space_of


@dataclass
class View:
    """A window of a buffer: key (the buffer, or the space of planned buffers), byte offset,
    shape and strides in elements, element size."""

    key: object
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    size: int

    def range(self) -> tuple | None:
        """(lo, hi, offset, strides, shape) in bytes, for race._overlap; None when empty."""
        if any(s == 0 for s in self.shape):
            return None
        st = tuple(s * self.size for s in self.strides) + (1,)
        shape = self.shape + (self.size,)
        hi = self.offset + sum((n - 1) * s for n, s in zip(shape, st))
        return (self.offset, hi, self.offset, st, shape)


def contiguous(shape) -> tuple[int, ...]:
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def buffer_name(key: object) -> str:
    """`gm buffer %z` (a kernel argument or an alloc, by its space and name), or `ub bytes of
    AIV 1` for the buffers placed in a space (compared by bytes)."""
    if isinstance(key, tuple):
        space, sub = key
        return f"{space.value} bytes" + (f" of AIV {sub}" if sub else "")
    if isinstance(key, SSAValue):
        space = space_of(key.type).value if isinstance(key.type, MemRefType) else "?"
        return f"{space} buffer %{key.name_hint}" if key.name_hint else f"a {space} buffer"
    return str(key)


def _div(a: int, b: int) -> int:
    return a // b


ARITH = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divui": _div,
    "arith.divsi": lambda a, b: int(a / b),
    "arith.floordivsi": _div,
    "arith.ceildivsi": lambda a, b: -(-a // b),
    "arith.ceildivui": lambda a, b: -(-a // b),
    "arith.remui": lambda a, b: a % b,
    "arith.remsi": lambda a, b: int(math.fmod(a, b)),
    "arith.minsi": min,
    "arith.minui": min,
    "arith.maxsi": max,
    "arith.maxui": max,
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
    "arith.select": lambda c, a, b: a if c else b,
    "arith.index_cast": lambda a: a,
}
CMP = {
    0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b,
    4: lambda a, b: a > b, 5: lambda a, b: a >= b, 6: lambda a, b: a < b, 7: lambda a, b: a <= b,
    8: lambda a, b: a > b, 9: lambda a, b: a >= b,
}
