"""Which ops the interpreter runs as tile ops: op class -> (semantics factory, cost factory).

Pass authors add ops with `register_op(MyOp, semantics=..., cost=...)`:

    def my_semantics(op):            # called once per compile
        def run(src, dst):           # numpy views (memref operands) / ints (index operands)
            dst[...] = src * 2
        return run

    def my_cost(op, env):            # env: CostEnv (env.target is the HardwareConfig)
        def run(src, dst):
            return OpCost("V", cycles=dst.size / 64 + 20, bytes={"ub": dst.nbytes})
        return run

    register_op(MyOp, semantics=my_semantics, cost=my_cost)

Costs are cached per tuple of memref operand shapes, so a cost function must depend on shapes
(and the op's attributes) only, not on data.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from ascendir import costmodel as _cost
from ascendir.interpreter.exec import semantics as _sem

SemanticsFactory = Callable[[Operation], Callable[..., None]]

SEMANTICS: dict[type, SemanticsFactory] = _sem.builtin_semantics()
COSTS: dict[type, _cost.CostFactory] = _cost.builtin_costs()
# op class -> (factory of its semantics on operands with a leading batch axis, whether it runs so
# only where operands keep their contiguity): semantics.batched_semantics; an op without one
# (registered ops) runs block by block in the batched data walk (exec/batch_run.py)
BATCHED: dict[type, tuple[SemanticsFactory, bool]] = _sem.batched_semantics()


def register_op(op_class: type, semantics: SemanticsFactory | None = None, cost: _cost.CostFactory | None = None) -> None:
    """Register (or override) the numerics and/or cost of `op_class`.

    An op needs both before it can run; registering only one keeps the other if it exists.
    """
    if semantics is not None:
        SEMANTICS[op_class] = semantics
        BATCHED.pop(op_class, None)  # (a batched form of the semantics replaced)
    if cost is not None:
        COSTS[op_class] = cost
