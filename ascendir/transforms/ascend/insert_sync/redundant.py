"""Removing the events whose flags the analysis shows to order nothing that needs it."""

from __future__ import annotations

from ascendir.dialects import ascend
from ascendir.dialects.ascend import module_arch
from ascendir.transforms.ascend.insert_sync.analysis import conflicts
from ascendir.transforms.ascend.insert_sync.conflict import Conflict


def _key(op: ascend.FlagOp) -> tuple[str, str, int]:
    return (op.src.data, op.dst.data, op.event.value.data)


def _unflaggable(found: list[Conflict]) -> int:
    """How many of `found` no flag can order (one pipe on two units, see insert_sync)."""
    return sum(c.src == c.dst for c in found)


def remove_redundant(kernel: ascend.KernelOp) -> int:
    """Remove every event (all set_flag / wait_flag ops of one (src, dst, id), so the rest stays
    balanced) whose ops the analysis all ran and whose removal leaves it without conflict (but
    those no flag can order, no more of them than before); returns how many events."""
    ran: set = set()
    arch = module_arch(kernel)
    found = conflicts(kernel, ran)
    if found is None or len(found) != _unflaggable(found):
        return 0
    left = len(found)
    removed = 0
    flags = [o for o in kernel.walk() if isinstance(o, ascend.FlagOp)]
    unseen = {_key(o) for o in flags if o not in ran}
    for key in sorted({_key(o) for o in flags} - unseen):
        trial = kernel.clone()
        for o in [o for o in trial.walk() if isinstance(o, ascend.FlagOp) and _key(o) == key]:
            o.detach()
            o.erase()
        got = conflicts(trial, arch=arch)
        if got is not None and len(got) == _unflaggable(got) <= left:
            for o in [o for o in kernel.walk() if isinstance(o, ascend.FlagOp) and _key(o) == key]:
                o.detach()
                o.erase()
            removed += 1
    return removed
