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
from xdsl.ir import Operation, OpResult

from ascendir.interpreter.exec.walk import OpTree, _is_a, operands_of


def scalar_units(order: list[Operation], anchored: dict[Operation, int], tree: OpTree | None = None) -> dict[Operation, tuple[int, ...]]:
    """Units (sorted indices) running each op of `order` that has no unit of its own.

    `order`: the kernel body in walk (pre-)order. `tree`: the kernel's OpTree when the caller
    has it (its ops: the kernel op, then `order`), else the nesting is read from the IR. `anchored`:
    op -> bit mask of the units that run it (bit u = unit u), for every op whose unit is known
    (tile ops by their pipe and subblock, flag ops: both ends); ops absent from it get theirs
    from their users. Ops with an empty result (no unit needs them) are absent from the answer:
    callers charge every unit.

    The masks are the least fixpoint of: an op's mask holds the masks its results are needed
    by, and its nested ops' masks; a value is needed by its users' masks, a yielded value and a
    loop's init by what needs the loop-carried argument or result it becomes. They grow from the
    anchored ops backwards along those edges (a worklist: an op or value is visited again only
    when its mask gained a unit, of three), so only the ops some unit needs and their operands
    are read, about once each: passes over the whole kernel to a fixed point, each reading
    every op's uses, cost twice as much (~8 ms a 7B layer's FlashAttention kernel)."""
    n = len(order)
    if tree is not None:
        span, base = tree._span, 1  # (the tree's id(op) -> (index, end); index - 1 in `order`: the kernel op comes first)
        parent = tree.parents()
    else:
        span, base = {id(o): (i, 0) for i, o in enumerate(order)}, 0
        parent = [-1] * n
        for i, o in enumerate(order):
            for region in o.regions:
                for block in region.blocks:
                    for x in block.ops:
                        got = span.get(id(x))
                        if got is not None:
                            parent[got[0]] = i
    # loop-carried flows: id(value) -> the values whose needs it becomes part of (a yield's
    # operand and a loop's init take the needs of the block argument and result they become)
    into: dict[int, list] = {}
    # per op of `order`, what of its operands are plain uses: all (None), a loop's bounds and
    # step (3: its inits are loop-carried), none (0: a yield's operands are carried)
    plain: list[int | None] = [None] * n
    for j, u in enumerate(order):
        t = type(u)
        if _is_a(t, scf.YieldOp):
            plain[j] = 0
            for k, v in enumerate(operands_of(u)):
                for x in _yield_targets(u, k):
                    into.setdefault(id(x), []).append(v)
        elif _is_a(t, scf.ForOp):
            plain[j] = 3
            args = u.body.block.args
            for k, v in enumerate(operands_of(u)[3:]):
                into.setdefault(id(args[k + 1]), []).append(v)
                into.setdefault(id(u.results[k]), []).append(v)
    mask = [0] * n
    fixed = [False] * n  # the anchored ops (their units are their own: not in the answer)
    val: dict[int, int] = {}  # id(value) -> units needing it
    todo: list = []  # ops (index) whose mask grew: their uses, their parent
    for o, m in anchored.items():
        got = span.get(id(o))
        if got is not None:
            i = got[0] - base
            fixed[i] = True
            if m:
                mask[i] |= m
                todo.append(i)
    vals: list = []  # values whose needs grew: their defining op, the values they flow into
    get = val.get
    while todo or vals:
        while todo:
            i = todo.pop()
            m = mask[i]
            uses = operands_of(order[i])
            cut = plain[i]
            if cut is not None:
                uses = uses[:cut]
            for v in uses:
                x = id(v)
                old = get(x, 0)
                if old | m != old:
                    val[x] = old | m
                    vals.append(v)
            p = parent[i + base] - base
            if p >= 0 and mask[p] | m != mask[p]:
                mask[p] |= m
                todo.append(p)
        while vals:
            v = vals.pop()
            m = val[id(v)]
            if type(v) is OpResult:  # (xDSL has no subclass of it: a block argument else)
                got = span.get(id(v.op))
                if got is not None:
                    d = got[0] - base
                    if mask[d] | m != mask[d]:
                        mask[d] |= m
                        todo.append(d)
            for w in into.get(id(v), ()):
                x = id(w)
                old = get(x, 0)
                if old | m != old:
                    val[x] = old | m
                    vals.append(w)
    return {order[i]: _UNITS[m] for i, m in enumerate(mask) if m and not fixed[i]}


_UNITS = [tuple(u for u in range(3) if m >> u & 1) for m in range(8)]  # mask -> its units, sorted


def _yield_targets(y: scf.YieldOp, i: int) -> list:
    """The values taking operand i of a yield: the loop's carried block argument and result, or
    the branch's result."""
    parent = y.parent_op()
    if _is_a(type(parent), scf.ForOp):
        return [parent.body.block.args[1 + i], parent.results[i]]
    if parent is not None and i < len(parent.results):
        return [parent.results[i]]
    return []
