"""`Conflict`: two ops on different pipes (or units) touching the same bytes, one writing, with no
happens-before between them: what the analysis (analysis.py) finds and a flag pair (flags.py)
orders."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation

from ascendir.dialects.ascend import Pipe
from ascendir.dialects.ascend.flag_placement import UNIT_NAMES


@dataclass(frozen=True)
class Conflict:
    """Op `first` on pipe `src` and later op `second` on pipe `dst` touch the same bytes, one
    writing, with no happens-before between them. `units` = (unit of `first`, unit of `second`):
    0 = AIC (or the only unit of a non-mix kernel), 1 = AIV 0, 2 = AIV 1."""

    first: Operation
    second: Operation
    src: Pipe
    dst: Pipe
    units: tuple[int, int] = (0, 0)
    buffer: str = field(default="", compare=False)  # the buffer they share, for messages

    @property
    def slots(self) -> tuple[tuple[int, Pipe], tuple[int, Pipe]]:
        """((unit, pipe) of `first`, (unit, pipe) of `second`)."""
        return (self.units[0], self.src), (self.units[1], self.dst)

    def describe(self) -> str:
        """`ascend.copy on aic FIX then ascend.copy on aiv MTE2` (units named only when they differ)."""
        a, b = self.units
        if a == b:
            what = f"{self.first.name} on {self.src.value} then {self.second.name} on {self.dst.value}"
        else:
            what = f"{self.first.name} on {UNIT_NAMES[a]} {self.src.value} then {self.second.name} on {UNIT_NAMES[b]} {self.dst.value}"
        return f"{what} ({self.buffer})" if self.buffer else what
