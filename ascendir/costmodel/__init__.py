"""The cost model: cycles of mmad / copy / vector ops, GM bandwidth shares and floors.

One set of formulas that the templates' analytic estimates (lowering, choose-tiling) and the
interpreter's per-op costs both call. Below the interpreter, the templates and the transforms,
above `hardware` and `dialects`: it imports nothing from interpreter, lowering, transforms or
driver.

* ops.py        OpCost, CostEnv, the per-op cost factories and their cycle formulas
                (mmad_cycles, vector_cycles, copy_startup, bandwidth_bound_cycles, ...)
* quantum.py    the cycle quantum (2^-14): durations the interpreter adds are multiples of it,
                so its timeline arithmetic is exact
* emulation.py  vector passes of element types the vector unit has no instruction for
* memory.py     buffer placement analysis (first fit of on-chip buffers and the GM arena) that
                plan-memory writes into the IR and the interpreter checks capacity with
"""

from ascendir.costmodel.ops import (
    LEVELS,
    CostEnv,
    CostFactory,
    CostFn,
    OpCost,
    bandwidth_bound_cycles,
    builtin_costs,
    copy,
    copy_path,
    copy_startup,
    gather_rows,
    mmad,
    mmad_cycles,
    sequential_get_value_cycles,
    shared_cost,
    space_unit,
    varange,
    vector,
    vector_cycles,
    vector_rate_class,
)
from ascendir.costmodel.quantum import QUANTUM, quantise

__all__ = [
    "LEVELS", "CostEnv", "CostFactory", "CostFn", "OpCost", "bandwidth_bound_cycles", "builtin_costs", "copy",
    "copy_path", "copy_startup", "gather_rows", "mmad", "mmad_cycles", "sequential_get_value_cycles", "shared_cost", "space_unit",
    "varange", "vector", "vector_cycles", "vector_rate_class", "QUANTUM", "quantise",
]
