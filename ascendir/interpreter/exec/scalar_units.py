"""Which units of a mix kernel run each scalar op (index arithmetic, `ascend.get_value`,
`memref.load` / `store`, subviews, the loop and branch bookkeeping of `scf.for` / `scf.if`).

On a split chip (910B, dav-c220) a mix kernel is two programs: the kernel is compiled once for
the cube core (`dav-c220-cube`) and once for the vector cores (`dav-c220-vec`), and the AIC and
each AIV run their own program on their own scalar unit (ascend-hardware.md §910B: "Each AI
Core is split into one AIC (Cube + MTE1 + MTE2 + FixPipe + Scalar) and two AIV (Vector + MTE2 +
MTE3 + Scalar)", S1 / S2, documented). Ascend C writes the split as `if ASCEND_IS_AIC { ... }`
/ `if ASCEND_IS_AIV { ... }`; our IR is the one program both share, so the split is derived:
a unit runs a scalar op when one of its own ops needs the op's result (as an operand, a loop
bound, a branch condition, through other scalar ops and loop-carried values), and runs a loop
or a branch when the loop holds an op of that unit. A scalar op nothing of any unit needs
(dead here) is charged to every unit, as before this analysis.

    scalar_units(order, anchored) -> {op: (unit, ...)}   units 0 = AIC, 1 = AIV 0, 2 = AIV 1

Why it matters: the AIVs' scalar reads of a grouped MatMul's group list (a GM read, hundreds
of cycles each) charged to the AIC's scalar unit too stalled its cube pipeline.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.ir import Operation


def scalar_units(order: list[Operation], anchored: dict[Operation, int]) -> dict[Operation, tuple[int, ...]]:
    """Units (sorted indices) running each op of `order` that has no unit of its own.

    `order`: the kernel body in walk (pre-)order. `anchored`: op -> bit mask of the units that
    run it (bit u = unit u), for every op whose unit is known (tile ops by their pipe and
    subblock, flag ops: both ends); ops absent from it get theirs from their users. Ops with an
    empty result (no unit needs them) are absent from the answer: callers charge every unit."""
    mask: dict[Operation, int] = {o: anchored.get(o, 0) for o in order}
    val: dict[object, int] = {}  # SSA value -> units needing it (results and block arguments)

    def need(v) -> int:
        m = 0
        for use in v.uses:
            u = use.operation
            if isinstance(u, scf.YieldOp):
                m |= _yield_target(u, use.index, val)
            elif isinstance(u, scf.ForOp) and use.index >= 3:  # an iter_arg init: its block arg, result
                i = use.index - 3
                m |= val.get(u.body.block.args[1 + i], 0) | val.get(u.results[i], 0)
            else:
                m |= mask.get(u, 0)
        return m

    changed = True
    while changed:  # loop-carried values flow backwards in walk order: iterate to the fixpoint
        changed = False
        for o in reversed(order):
            m = mask[o]
            for r in o.results:
                n = need(r)
                if n != val.get(r, 0):
                    val[r] = n
                    changed = True
                m |= n
            for region in o.regions:
                for block in region.blocks:
                    for a in block.args:
                        n = need(a)
                        if n != val.get(a, 0):
                            val[a] = n
                            changed = True
                    for inner in block.ops:
                        m |= mask.get(inner, 0)
            if m != mask[o]:
                mask[o] = m
                changed = True
    return {o: tuple(u for u in range(3) if m >> u & 1) for o, m in mask.items() if m and o not in anchored}


def _yield_target(y: scf.YieldOp, i: int, val: dict) -> int:
    """Units needing operand i of a yield: the loop's carried block argument and result, or the
    branch's result."""
    parent = y.parent_op()
    if isinstance(parent, scf.ForOp):
        return val.get(parent.body.block.args[1 + i], 0) | val.get(parent.results[i], 0)
    if parent is not None and i < len(parent.results):
        return val.get(parent.results[i], 0)
    return 0

