"""Kernels whose blocks make the same on-chip accesses on the same control path (race.py's cheap
follow, `RaceChecker.reset`).

A value is block-invariant when every block computes it alike along the same control decisions
(each scf.if's branch, each scf.for's trip count, in execution order): constants, on-chip
allocs, the kernel's arguments (one GM tag per launch), pure ops (arith, views) of invariant
operands, an scf.for's induction variable when its lower bound and step are invariant (the k-th
iteration's value is lb + k * step; the trip count is a decision), loop-carried values and
region results whose inits and yields are invariant. Anything else may differ per block:
ascend.block_idx, loads, every other op with results (conservative).

Structured control (scf.for, scf.if only) makes the sequence of ops a block runs a function of
its control decisions: two blocks with the same decisions run the same ops, and by induction
over that sequence every invariant value is the same in both at each op. So when every on-chip
memref operand of every tile op is invariant and every tile op's pipe is its op's alone, the
blocks' race-check events (accesses: pipe, op name, on-chip operands; set / wait / barrier:
static) are the same while their decisions are, GM operands apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation

from ascendir.dialects import ascend

# ops computing their results from their operands alone (besides arith)
_PURE = frozenset({"memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.collapse_shape",
                   "memref.expand_shape", "scf.yield"})


def uniform_blocks(ops: Sequence[Operation], tile: Callable[[Operation], bool | None]) -> bool:
    """True when the blocks of a kernel whose body is `ops` (in walk order, nested ops included)
    make the same on-chip accesses as long as they take the same control decisions (module doc).
    `tile(op)`: None for an op that is not a tile op, else whether its pipe and unit depend on
    the op alone (a built-in cost)."""
    for o in ops:
        if o.regions and not isinstance(o, (scf.ForOp, scf.IfOp)):
            return False  # control the decisions do not describe (scf.while, ...)
    varying: set = set()
    changed = True
    while changed:  # to a fixed point: loop-carried values feed back
        changed = False
        for o in ops:
            if isinstance(o, scf.ForOp):
                blk = o.body.block
                new = [blk.args[0]] if o.lb in varying or o.step in varying else []
                ys = list(blk.last_op.operands) if isinstance(blk.last_op, scf.YieldOp) else []
                for k, (arg, init) in enumerate(zip(blk.args[1:], o.iter_args)):
                    if init in varying or (k < len(ys) and ys[k] in varying):
                        new += [arg, o.results[k]]
            elif isinstance(o, scf.IfOp):
                new = []
                for r in o.regions:
                    for b in r.blocks:
                        if isinstance(b.last_op, scf.YieldOp):
                            new += [o.results[k] for k, y in enumerate(b.last_op.operands) if y in varying]
            elif o.name.startswith("arith.") or o.name in _PURE or (
                    isinstance(o, ascend.AllocOp) and ascend.space_of(o.result.type).value != "gm"):
                new = list(o.results) if any(v in varying for v in o.operands) else []
            else:
                new = list(o.results)
            for v in new:
                if v not in varying:
                    varying.add(v)
                    changed = True
    for o in ops:
        fixed = tile(o)
        if fixed is None:
            continue
        if not fixed:
            return False
        for v in o.operands:
            if isinstance(v.type, MemRefType) and ascend.space_of(v.type).value != "gm" and v in varying:
                return False
    return True
