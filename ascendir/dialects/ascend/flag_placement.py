"""Which units a flag connects in a kernel with more than one unit (a split chip's mix kernel:
the AIC and its AIVs): MTE2 / MTE3 / S exist on every unit, so a flag on them takes its units
from the `units` attribute or from the nearest op on the pipe. The interpreter and insert-sync
resolve flags with this one rule."""

from __future__ import annotations

from xdsl.ir import Operation

from ascendir.dialects.ascend.attrs import FLAG_UNITS_ATTR, FlagUnit
from ascendir.dialects.ascend.ops_sync import FlagOp
from ascendir.dialects.ascend.placement import Unit, pipe_unit

# FLAG_UNITS_ATTR (#ascend.flag_units<aic -> aiv>) on a set_flag / wait_flag of a 910B mix kernel
# names the units it connects when the pipes alone (MTE2, MTE3, S exist on both) leave it
# ambiguous. Without it the nearest op on the pipe decides (see flag_units).
_UNIT_INDEX = {FlagUnit.AIC: 0, FlagUnit.AIV: 1, FlagUnit.AIV0: 1, FlagUnit.AIV1: 2}
UNIT_NAMES = (FlagUnit.AIC, FlagUnit.AIV, FlagUnit.AIV1)  # unit index -> its FlagUnit


def flag_units(order: list[Operation], placed: list[tuple[str, int] | None]) -> dict[Operation, tuple[int, int]]:
    """(src unit, dst unit) of every flag op of a mixed kernel (units: 0 = AIC, 1 = AIV 0, 2 = AIV 1).

    `order` is the kernel body in walk (program) order, `placed[i]` the (pipe, unit) of the tile
    op order[i] or None. FLAG_UNITS_ATTR decides when present. Otherwise MTE2/MTE3/S exist on
    both units: take the unit of the nearest op on that pipe (before a set, after a wait), else
    the partner pipe's unit, else AIC. A set and its waits must agree: the first resolution of a
    (src pipe, dst pipe, event) wins for every flag op of that triple (so one triple connects one
    pair of units in a kernel). insert-sync resolves flags with this same rule."""
    res: dict[Operation, tuple[int, int]] = {}

    def fixed(p: str) -> int | None:
        u = pipe_unit(p)  # placement: M / MTE1 / FIX the AIC's, V an AIV's, the rest both
        return None if u is None else 0 if u is Unit.AIC else 1

    def nearest(i: int, p: str, step: int) -> int | None:
        j = i + step
        while 0 <= j < len(order):
            if placed[j] is not None and placed[j][0] == p:
                return placed[j][1]
            j += step
        return None

    by_name: dict[tuple[str, str, int], tuple[int, int]] = {}
    # (per op class, and the properties read from their dict: isinstance on xDSL's op classes,
    # ABCs, and each property accessor run Python code, over every op of a kernel of thousands)
    is_flag: dict[type, bool] = {}
    for i, o in enumerate(order):
        t = type(o)
        flag = is_flag.get(t)
        if flag is None:
            flag = is_flag[t] = issubclass(t, FlagOp)
        if not flag:
            continue
        p = o.properties
        s, d, event = p["src"].data, p["dst"].data, p["event"].value.data
        hint = o.attributes.get(FLAG_UNITS_ATTR)
        if hint is not None:  # explicit "aic->aiv" etc. (cross-unit hand-offs of mix kernels)
            su, du = (_UNIT_INDEX[u] for u in hint.units)
            res[o] = by_name.setdefault((s, d, event), (su, du))
            continue
        su = fixed(s)
        if su is None:
            su = nearest(i, s, -1)
            su = nearest(i, s, +1) if su is None else su
        du = fixed(d)
        if du is None:
            du = nearest(i, d, +1)
            du = nearest(i, d, -1) if du is None else du
        if su is None:
            su = du if du is not None else 0
        if du is None:
            du = su
        res[o] = by_name.setdefault((s, d, event), (su, du))
    return res
