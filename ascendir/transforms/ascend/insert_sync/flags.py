"""Where insert-sync puts the flag pair that orders a `Conflict`, and which event id it takes (the
package docstring gives the rules)."""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.ir import Operation

from ascendir.dialects import ascend
from ascendir.dialects.ascend import FLAG_UNITS_ATTR, FlagUnitsAttr, module_arch
from ascendir.dialects.ascend.flag_placement import UNIT_NAMES
from ascendir.errors import AscendirError
from ascendir.transforms.ascend.insert_sync.conflict import Conflict
from ascendir.transforms.ascend.insert_sync.ops import kernel_flag_units, split_units

EVENTS = 8  # event ids per (src, dst) pipe pair (S6 EVENT_ID0-7)


def _ancestors(op: Operation, stop: Operation) -> list[Operation]:
    """op, its parent op, ..., up to (excluding) `stop`."""
    out = [op]
    while (p := out[-1].parent_op()) is not None and p is not stop:
        out.append(p)
    return out


def _anchor(a: Operation, b: Operation, kernel: Operation) -> tuple[Operation, Operation]:
    """The ops holding a and b in the innermost block containing both."""
    ca, cb = _ancestors(a, kernel), _ancestors(b, kernel)
    blocks_b = {o.parent_block(): o for o in cb}
    for o in ca:
        blk = o.parent_block()
        if blk in blocks_b:
            return o, blocks_b[blk]
    raise AssertionError("ops of one kernel share its body block")



def _used_events(kernel: ascend.KernelOp) -> dict[tuple[str, str], set[int]]:
    used: dict[tuple[str, str], set[int]] = {}
    for op in kernel.walk():
        if isinstance(op, ascend.FlagOp):
            used.setdefault((op.src.data, op.dst.data), set()).add(op.event.value.data)
    return used


def _handoff_only(kernel: ascend.KernelOp, key: tuple[str, str, int], units: tuple[int, int], resolved: dict) -> bool:
    """Every flag op of `key` is a hand-off (a set immediately followed by its wait): no set of
    the event is ever outstanding across other ops, so another hand-off may use it too -- between
    the same units (`resolved`: flag_placement.flag_units of a split mix kernel, else empty), since one
    (src, dst, event) connects one pair of units in a kernel."""
    for op in kernel.walk():
        if not isinstance(op, ascend.FlagOp) or (op.src.data, op.dst.data, op.event.value.data) != key:
            continue
        if resolved.get(op, (0, 0)) != units:
            return False
        other = op.next_op if isinstance(op, ascend.SetFlagOp) else op.prev_op
        want = ascend.WaitFlagOp if isinstance(op, ascend.SetFlagOp) else ascend.SetFlagOp
        if not isinstance(other, want) or (other.src.data, other.dst.data, other.event.value.data) != key:
            return False
    return True


def insert_pair(kernel: ascend.KernelOp, c: Conflict) -> None:
    """One flag pair ordering `c` (placement rules in the module docstring)."""
    a, b = _anchor(c.first, c.second, kernel)
    blk = a.parent_block()
    ops = list(blk.ops)
    forward = ops.index(a) < ops.index(b)
    by_unit = split_units(kernel)
    resolved = kernel_flag_units(kernel, module_arch(kernel)) if by_unit else {}
    # ids per pipe pair whatever units they connect: the interpreter (and a set's waits) match a
    # flag by (src, dst, event), so one id must not connect two pairs of units
    used = sorted(_used_events(kernel).get((c.src.value, c.dst.value), set()))
    shared = [e for e in used if forward and _handoff_only(kernel, (c.src.value, c.dst.value, e), c.units, resolved)]
    free = shared + [e for e in range(EVENTS) if e not in used]
    if not free:
        raise AscendirError(
            f"insert-sync: kernel @{kernel.sym_name.data} needs more than {EVENTS} events for "
            f"{c.src.value} -> {c.dst.value} ({c.describe()})"
        )
    ev = free[0]

    def flag(kind: type) -> Operation:
        f = kind(c.src, c.dst, ev)
        if by_unit:  # MTE2 / MTE3 exist on every unit: name them (interpreter/kernel.py)
            f.attributes[FLAG_UNITS_ATTR] = FlagUnitsAttr(UNIT_NAMES[c.units[0]], UNIT_NAMES[c.units[1]])
        return f

    if forward:  # a hand-off: the set also covers the src pipe's ops up to b
        blk.insert_op_before(flag(ascend.SetFlagOp), b)
        blk.insert_op_before(flag(ascend.WaitFlagOp), b)
        return
    blk.insert_op_after(flag(ascend.SetFlagOp), a)
    blk.insert_op_before(flag(ascend.WaitFlagOp), b)
    loop = blk.parent_op()
    while loop is not None and loop is not kernel and not isinstance(loop, scf.ForOp):
        loop = loop.parent_op()
    if not isinstance(loop, scf.ForOp):
        raise AssertionError(f"insert-sync: {c.first.name} -> {c.second.name} goes backwards outside any loop")
    while loop.parent_op() is not kernel:  # prime once for the whole kernel: no bubble per outer iteration
        loop = loop.parent_op()
    outer = loop.parent_block()
    outer.insert_op_before(flag(ascend.SetFlagOp), loop)
    outer.insert_op_after(flag(ascend.WaitFlagOp), loop)
