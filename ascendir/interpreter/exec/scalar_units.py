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

from ascendir.interpreter.exec.walk import OpTree, _is_a, operands_of


def scalar_units(order: list[Operation], anchored: dict[Operation, int], tree: OpTree | None = None) -> dict[Operation, tuple[int, ...]]:
    """Units (sorted indices) running each op of `order` that has no unit of its own.

    `order`: the kernel body in walk (pre-)order. `tree`: the kernel's OpTree when the caller
    has it (its ops: the kernel op, then `order`), else the regions are read from the IR. `anchored`: op -> bit mask of the units that
    run it (bit u = unit u), for every op whose unit is known (tile ops by their pipe and
    subblock, flag ops: both ends); ops absent from it get theirs from their users. Ops with an
    empty result (no unit needs them) are absent from the answer: callers charge every unit.

    The masks grow to the least fixpoint of: an op's mask holds the masks its results are needed
    by (`_needs`), and its nested ops' masks; a value is needed by its users' masks, a yielded
    value and a loop's init by what needs the loop-carried argument or result it becomes. The
    use lists are read once into index lists (`_plan`); the passes then run over ints."""
    plan, nvals = _plan(order, tree)
    known = [anchored.get(o) for o in order]  # (one lookup per op: an op's hash is Python code)
    mask = [0 if m is None else m for m in known]
    val = [0] * nvals  # value index -> units needing it (results and block arguments)
    changed = True
    while changed:  # loop-carried values flow backwards in walk order: iterate to the fixpoint
        changed = False
        for i, results, args, inner in plan:
            m = mask[i]
            for values, own in ((results, True), (args, False)):
                for v, users, via in values:
                    n = 0
                    for u in users:
                        n |= mask[u]
                    for x in via:
                        n |= val[x]
                    if n != val[v]:
                        val[v] = n
                        changed = True
                    if own:  # an op runs where its results are needed
                        m |= n
            for u in inner:
                m |= mask[u]
            if m != mask[i]:
                mask[i] = m
                changed = True
    return {o: _UNITS[m] for o, m, k in zip(order, mask, known) if m and k is None}


_UNITS = [tuple(u for u in range(3) if m >> u & 1) for m in range(8)]  # mask -> its units, sorted


def _plan(order: list[Operation], tree: OpTree | None = None) -> tuple[list[tuple], int]:
    """The dependencies of `scalar_units` as indices, in reversed walk order: per op with results,
    region block arguments or region ops (no other op's mask ever changes: most tile ops and
    flags; `scalar_units` passes over the rest only), (its index in `order`, its results, its
    regions' block arguments, its regions' ops), each value as (its
    index, the indices of the ops using it, the indices of the values whose needs it takes:
    the loop-carried argument and the result of a yield or init use, a branch result). The uses
    are read from the operands of the ops of `order` (every use of a value of the kernel).
    `tree`: as for `scalar_units` (its nested ops and block arguments instead of the IR's)."""
    vals: dict[int, int] = {}  # id(value) -> index (`order` keeps the values alive)
    users: list[list[int]] = []  # value index -> indices of the ops using it
    via: list[list[int]] = []  # value index -> the values its yield and init uses become

    def vi(v) -> int:
        k = vals.get(id(v))
        if k is None:
            k = vals[id(v)] = len(vals)
            users.append([])
            via.append([])
        return k

    for i, u in enumerate(order):
        t = type(u)
        if _is_a(t, scf.YieldOp):
            for k, v in enumerate(operands_of(u)):
                via[vi(v)] += [vi(x) for x in _yield_targets(u, k)]
        elif _is_a(t, scf.ForOp):
            for k, v in enumerate(operands_of(u)):
                if k >= 3:  # an iter_arg init: its block arg, result
                    via[vi(v)] += [vi(u.body.block.args[k - 2]), vi(u.results[k - 3])]
                else:
                    users[vi(v)].append(i)
        else:
            for v in operands_of(u):
                users[vi(v)].append(i)

    def needs(v) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        k = vi(v)
        return k, tuple(users[k]), tuple(via[k])

    plan = []
    index = None
    for i in range(len(order) - 1, -1, -1):
        o = order[i]
        results = tuple(map(needs, o.results))
        if tree is not None:
            kids, bargs = tree.nested(i + 1)  # (tree index i + 1: the kernel op comes first)
            args, inner = [needs(a) for a in bargs], [k - 1 for k in kids]
            if results or args or inner:
                plan.append((i, results, tuple(args), tuple(inner)))
            continue
        if index is None:
            index = {id(o): i for i, o in enumerate(order)}
        args, inner = [], []
        for region in o.regions:
            for block in region.blocks:
                args += [needs(a) for a in block.args]
                x = block.first_op  # (not block.ops: xDSL's iterator is a generator over next_op)
                while x is not None:
                    k = index.get(id(x))
                    if k is not None:
                        inner.append(k)
                    x = x.next_op
        if results or args or inner:
            plan.append((i, results, tuple(args), tuple(inner)))
    return plan, len(vals)


def _yield_targets(y: scf.YieldOp, i: int) -> list:
    """The values taking operand i of a yield: the loop's carried block argument and result, or
    the branch's result."""
    parent = y.parent_op()
    if _is_a(type(parent), scf.ForOp):
        return [parent.body.block.args[1 + i], parent.results[i]]
    if parent is not None and i < len(parent.results):
        return [parent.results[i]]
    return []
