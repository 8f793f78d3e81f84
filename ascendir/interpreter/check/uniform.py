"""Kernels whose blocks make the same on-chip accesses on the same control path (race.py's cheap
follow, `RaceChecker.reset`).

A value is block-invariant when every block computes it alike along the same control decisions
(each scf.if's branch, each scf.for iteration's start and the loop's end, in execution order):
constants, on-chip allocs, the kernel's arguments (one GM tag per launch), pure ops (arith,
views) of invariant operands, an scf.for's induction variable when its lower bound and step are
invariant (the k-th iteration's value is lb + k * step; whether it runs is a decision),
loop-carried values and region results whose inits and yields are invariant. Anything else may
differ per block: ascend.block_idx, loads, every other op with results (conservative).

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
from ascendir.interpreter.exec.common import space_name
from ascendir.interpreter.exec.walk import _is_a, operands_of

# ops computing their results from their operands alone (besides arith)
_PURE = frozenset({"memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.collapse_shape",
                   "memref.expand_shape", "scf.yield"})


def uniform_blocks(ops: Sequence[Operation], tile: Callable[[Operation], bool | None]) -> bool:
    """True when the blocks of a kernel whose body is `ops` (in walk order, nested ops included)
    make the same on-chip accesses as long as they take the same control decisions (module doc).
    `tile(op)`: None for an op that is not a tile op, else whether its pipe and unit depend on
    the op alone (a built-in cost).

    The IR is read once into rules over value ids (`_rules`); the varying values then grow to
    their fixed point over ints."""
    rules = _rules(ops)
    if rules is None:
        return False
    always, conditional = rules
    varying: set[int] = set(always)
    changed = True
    while changed:  # to a fixed point: loop-carried values feed back
        changed = False
        for ins, outs in conditional:
            if not varying.isdisjoint(ins):
                for v in outs:
                    if v not in varying:
                        varying.add(v)
                        changed = True
    for o in ops:
        fixed = tile(o)
        if fixed is None:
            continue
        if not fixed:
            return False
        for v in operands_of(o):  # (the set first: most operands are invariant, their type is not read)
            if id(v) in varying and isinstance(v.type, MemRefType) and space_name(v.type) != "gm":
                return False
    return True


def _rules(ops: Sequence[Operation]) -> tuple[list[int], list[tuple[tuple[int, ...], tuple[int, ...]]]] | None:
    """What makes the values of `ops` vary, as ids of values (`ops` keep them alive): the values
    varying whatever the others do (results of ops other than arith, views and on-chip allocs),
    and rules (inputs, outputs): the outputs vary when one of the inputs does. None when an op
    has regions other than scf.for / scf.if (control the decisions do not describe: scf.while, ...).
    (One kind per op class, `_kind`: a 7B layer's FlashAttention kernel has 3,700 ops, a third
    of them flags, which test nothing more than their kind and their regions.)"""
    always: list[int] = []
    conditional: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    add = conditional.append
    kinds = _KINDS
    for o in ops:
        t = type(o)
        kind = kinds.get(t)
        if kind is None:
            kind = kinds[t] = _kind(t)
        if kind is _PURE_OP or kind is _ALLOC and space_name(o.result.type) != "gm":  # (most ops: tested first)
            if o.results:
                add((tuple(map(id, operands_of(o))), tuple(map(id, o.results))))
        elif kind is _FOR:  # (xDSL's fields: its named accessors are chains of Python calls)
            lb, _, step, *inits = operands_of(o)
            blk = o.regions[0].block
            add(((id(lb), id(step)), (id(blk.args[0]),)))
            y = blk._last_op
            ys = operands_of(y) if _is_a(type(y), scf.YieldOp) else ()
            for k, (arg, init, r) in enumerate(zip(blk.args[1:], inits, o.results)):
                add(((id(init), id(ys[k])) if k < len(ys) else (id(init),), (id(arg), id(r))))
        elif kind is _IF:
            res = o.results
            for r in o.regions:
                for b in r.blocks:
                    y = b._last_op
                    if _is_a(type(y), scf.YieldOp):
                        for v, x in zip(operands_of(y), res):
                            add(((id(v),), (id(x),)))
        elif o.regions:  # (any other op, a GM alloc too)
            return None
        elif o.results:
            always.extend(map(id, o.results))
    return always, conditional


_PURE_OP, _ALLOC, _FOR, _IF, _OTHER = "pure", "alloc", "for", "if", "other"
_KINDS: dict[type, str] = {}  # op class -> `_kind` (the rules ask it of every op of a kernel)


def _kind(t: type) -> str:
    """How `_rules` reads the ops of class `t`: `_PURE_OP` (arith, views, scf.yield: results from
    operands alone), `_ALLOC` (ascend.alloc: pure when on chip), `_FOR` (scf.for), `_IF`
    (scf.if), else `_OTHER`."""
    name = getattr(t, "name", "")
    if isinstance(name, str) and (name.startswith("arith.") or name in _PURE):
        return _PURE_OP
    if _is_a(t, ascend.AllocOp):
        return _ALLOC
    return _FOR if _is_a(t, scf.ForOp) else _IF if _is_a(t, scf.IfOp) else _OTHER

