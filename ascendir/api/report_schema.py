"""The shape of a simulation report (interpreter/report/report.py) as data, and the check of a JSON
document against it.

`ascendir report` renders and draws a hand-edited or foreign file only after `check(REPORT, data)`
passes: every key it reads has the right type; figures (cycles, seconds, bytes, flops, ops,
bandwidths) are finite and non-negative; the clock and the roofline ceilings are positive; rates
(pipe utilization, L2 hit rate, cube peak fraction) lie in [0, 1]. Keys the renderer does not read
are allowed (newer reports may carry more). The first problem is returned as one line naming the
field by its path, e.g. "'kernels[0].bytes.gm_read' is -1, not a non-negative number".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Union


@dataclass(frozen=True)
class Leaf:
    what: str  # the description in an error: "a non-negative number"
    ok: Callable[[object], bool]


@dataclass(frozen=True)
class Obj:
    """A JSON object with these known fields (others allowed); `required` must be present."""

    fields: dict
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class MapOf:
    """A JSON object whose every value is `value` (keys: pipes, memory levels, dtypes, ...)."""

    value: "Spec"


@dataclass(frozen=True)
class ListOf:
    item: "Spec"


Spec = Union[Leaf, Obj, MapOf, ListOf]


def _real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _integral(v) -> bool:
    return _real(v) and float(v).is_integer()


STR = Leaf("a string", lambda v: isinstance(v, str))
BOOL = Leaf("true or false", lambda v: isinstance(v, bool))
NUM = Leaf("a finite non-negative number", lambda v: _real(v) and v >= 0)
POS = Leaf("a finite positive number", lambda v: _real(v) and v > 0)
COUNT = Leaf("a non-negative integer", lambda v: _integral(v) and v >= 0)
POS_COUNT = Leaf("a positive integer", lambda v: _integral(v) and v > 0)
RATE = Leaf("a rate in [0, 1]", lambda v: _real(v) and 0 <= v <= 1)

KERNEL = Obj(
    {
        "name": STR, "block_dim": POS_COUNT, "core_type": STR, "cores_used": POS_COUNT, "dtype": STR,
        "cycles": NUM, "seconds": NUM, "launch_cycles": NUM,
        "pipe_busy": MapOf(NUM), "pipe_busy_by_unit": MapOf(NUM), "pipe_utilization": MapOf(RATE),
        "bytes": MapOf(NUM), "flops": NUM, "tile_ops": COUNT, "vector_ops": MapOf(NUM),
        "gm_bandwidth_Bps": NUM, "gm_share_Bpc": NUM, "bandwidth_floor_applied": BOOL,
        "compute_bound_cycles": NUM, "bandwidth_bound_cycles": NUM, "cube_peak_fraction": RATE,
        "extrapolated_iterations": COUNT, "cube_peak_flops_per_s": POS,
    },
    required=("name", "cycles", "bytes"),
)

REPORT = Obj(
    {
        "target": STR, "clock_hz": POS, "total_cycles": NUM, "total_seconds": NUM, "flops": NUM, "tile_ops": COUNT,
        "bytes": MapOf(NUM), "pipe_busy": MapOf(NUM), "pipe_utilization": MapOf(RATE),
        "gm_bandwidth_Bps": NUM, "l2_hit_rate": RATE, "cube_peak_fraction": RATE,
        "kernels": ListOf(KERNEL), "l2_model": STR, "model": ListOf(STR), "run_id": STR,
        "ceilings": Obj({"cube_flops_per_s": MapOf(POS), "vector_flops_per_s": MapOf(POS), "hbm_Bps": POS, "l2_Bps": POS},
                        required=("cube_flops_per_s", "vector_flops_per_s", "hbm_Bps", "l2_Bps")),
        "gm_footprint": Obj({p: COUNT for p in ("weights", "inputs", "outputs", "arena", "total", "live_peak")}),
        "tiling_search": MapOf(Obj({"ops": COUNT, "searches": COUNT, "candidates": COUNT, "seconds": NUM})),
        "declined": ListOf(Obj({"region": STR, "kind": STR, "reason": STR}, required=("region", "kind", "reason"))),
    },
    required=("target", "total_cycles", "total_seconds", "clock_hz", "kernels"),
)


def _show(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def check(spec: Spec, value, path: str = "") -> str | None:
    """The first way `value` departs from `spec`, as one line naming the field's path, or None."""
    where = f"'{path}'" if path else "the file"
    if isinstance(spec, Leaf):
        return None if spec.ok(value) else f"{where} is {_show(value)}, not {spec.what}"
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return f"{where} is {_show(value)}, not a list"
        return next((p for i, item in enumerate(value) if (p := check(spec.item, item, f"{path}[{i}]"))), None)
    if not isinstance(value, dict):
        return f"{where} is {_show(value)}, not an object"
    sub = (lambda k: f"{path}.{k}") if path else (lambda k: k)
    if isinstance(spec, MapOf):
        return next((p for k, v in value.items() if (p := check(spec.value, v, sub(k)))), None)
    missing = next((k for k in spec.required if k not in value), None)
    if missing is not None:
        return f"no '{sub(missing)}'"
    return next((p for k, s in spec.fields.items() if k in value and (p := check(s, value[k], sub(k)))), None)
