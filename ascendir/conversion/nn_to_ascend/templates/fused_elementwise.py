"""Template of `nn.fused {kind = #nn.fused_kind<elementwise>}` (built by fuse-elementwise): a DAG of
elementwise ops in one vector kernel.

Each tile of every region input is loaded into UB once (MTE2), the body's ops run one after the
other on UB tiles (V; each op's recipe is `elementwise.vector_map_of`, so the vector ops are
exactly those of the unfused kernels), and each region output is stored once (MTE3): n ops cost
one GM round trip instead of n. The loop structure and tile choice are
`elementwise.emit_vector_kernel`'s.

Intermediates live in full-tile UB temporaries, reused once their last reader has run (one pool
per element type), so a long chain needs as many temporaries as values alive at once, not one
per op. An intermediate that broadcasts (smaller than the output) is computed on the full tile:
more vector work than needed, but such values are rare (constant subexpressions are folded).

A body with an op that has no vector recipe, or outputs of different shapes, is declined (`parse`)
and lowered op by op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Attribute, Block, Operation, SSAValue

from ascendir.dialects import nn
from ascendir.patterns import fuse_ops, program_order
from ascendir.conversion.nn_to_ascend.templates.elementwise import ELEMENTWISE, VectorMap, emit_vector_kernel, vector_map_of
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder


class _TempPool:
    """Full-tile UB temporaries by element type, handed out and returned as values die."""

    def __init__(self) -> None:
        self.elems: list[Attribute] = []
        self.free: list[int] = []

    def take(self, e: Attribute) -> int:
        for i in self.free:
            if self.elems[i] == e:
                self.free.remove(i)
                return i
        self.elems.append(e)
        return len(self.elems) - 1

    def give(self, i: int) -> None:
        self.free.append(i)


@dataclass(frozen=True)
class FusedElementwise:
    """An elementwise region as `parse` reads it: the body ops with their vector recipes, where
    each value lives ("in", i) / ("out", j) / ("tmp", k), each op's own full-tile temporaries
    and its small ones, the temporaries' element types and the outputs' shape and types."""

    body: tuple[Operation, ...]
    recipes: tuple[VectorMap, ...]
    where: dict[SSAValue, tuple[str, int]]
    op_temps: tuple[tuple[int, ...], ...]
    op_small: tuple[range, ...]
    full: tuple[Attribute, ...]  # element type of each full-tile temporary
    small: tuple[tuple[tuple[int, ...], Attribute], ...]
    out_shape: tuple[int, ...]
    out_elems: tuple[Attribute, ...]


def parse(region: nn.FusedOp) -> FusedElementwise | Declined:
    """The vector kernel's plan of an elementwise region (see the module docstring), or Declined
    when an op has no vector recipe or the outputs differ in shape."""
    block = region.body.block
    body = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    recipes = [vector_map_of(o) for o in body]
    term = block.last_op
    out_shape = shape(region.outputs[0])
    if any(r is None for r in recipes) or not isinstance(term, nn.YieldOp):
        bad = next((o.name for o, r in zip(body, recipes) if r is None), "the terminator")
        return Declined(f"{bad} has no vector recipe")
    outputs: list[SSAValue] = list(term.values)
    if any(shape(o) != out_shape for o in region.outputs) or any(v.owner not in body for v in outputs):
        return Declined("the outputs differ in shape, or one is not computed in the region")

    where: dict[SSAValue, tuple[str, int]] = {a: ("in", i) for i, a in enumerate(block.args)}
    where.update({v: ("out", j) for j, v in enumerate(outputs)})
    last_use = {v: i for i, o in enumerate(body) for v in o.operands}
    pool = _TempPool()
    op_temps: list[tuple[int, ...]] = []
    small: list[tuple[tuple[int, ...], Attribute]] = []
    op_small: list[range] = []
    for i, (o, vmap) in enumerate(zip(body, recipes)):
        own = [pool.take(e) for e in vmap.temps]
        r = o.results[0]
        if r not in where:
            where[r] = ("tmp", pool.take(elem(r)))
        for k in own:
            pool.give(k)
        for v in set(o.operands):
            kind, k = where[v]
            if kind == "tmp" and last_use[v] == i:
                pool.give(k)
        op_temps.append(tuple(own))
        op_small.append(range(len(small), len(small) + len(vmap.small_temps)))
        small.extend(vmap.small_temps)
    return FusedElementwise(tuple(body), tuple(recipes), where, tuple(op_temps), tuple(op_small), tuple(pool.elems),
                            tuple(small), out_shape, tuple(elem(o) for o in region.outputs))


def emit_fused_elementwise(ctx: LoweringContext, fe: FusedElementwise, operands: list[SSAValue]) -> list[SSAValue]:
    """One vector kernel computing the region `fe` was parsed from over `operands` (GM buffers,
    one per block argument); returns the output buffers."""
    n_full = len(fe.full)

    def compute(kb: KernelBuilder, ins: list[SSAValue], outs: list[SSAValue], temps: list[SSAValue]) -> None:
        def buf(v: SSAValue) -> SSAValue:
            kind, k = fe.where[v]
            return {"in": ins, "out": outs, "tmp": temps}[kind][k]

        for o, vmap, own, sm in zip(fe.body, fe.recipes, fe.op_temps, fe.op_small):
            vmap.compute(
                kb, [buf(v) for v in o.operands], buf(o.results[0]), [temps[k] for k in own] + [temps[n_full + k] for k in sm]
            )

    return emit_vector_kernel(
        ctx, "fused_elementwise", operands, fe.out_shape, list(fe.out_elems), compute, list(fe.full), list(fe.small)
    )


KIND = "elementwise"


def broadcasts_to(s: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """True if shape `s` broadcasts to `out` without growing `out` (numpy rule)."""
    return len(s) <= len(out) and all(d in (1, o) for d, o in zip(reversed(s), reversed(out)))


def grow_region(root: Operation, block: Block, taken: set[Operation]) -> tuple[list[Operation], list[SSAValue]]:
    """The ops of the region rooted at `root` (program order) and its outputs (the root's
    result first), following the rules of the module docstring; ops in `taken` are skipped."""
    out = nn.shape_of(root.results[0])
    region: set[Operation] = {root}
    work = [root]
    while work:
        for v in work.pop().operands:
            p = v.owner
            if not isinstance(p, ELEMENTWISE) or p in region or p in taken or p.parent is not block:
                continue
            r = p.results[0]
            if not broadcasts_to(nn.shape_of(r), out):
                continue
            outside = [u.operation for u in r.uses if u.operation not in region]
            if outside and (nn.shape_of(r) != out or any(not root.is_before_in_block(u) for u in outside)):
                continue
            region.add(p)
            work.append(p)
    ops = program_order(list(region))
    # Users outside at the end are a subset of those checked when each op joined.
    extra = [o.results[0] for o in ops[:-1] if any(u.operation not in region for u in o.results[0].uses)]
    return ops, [root.results[0], *extra]


def fuse_elementwise_in(block: Block) -> None:
    """Wrap the elementwise DAGs of `block` (its own ops, not nested ones) in regions."""
    taken: set[Operation] = set()
    for root in reversed(list(block.ops)):
        if root in taken or not isinstance(root, ELEMENTWISE):
            continue
        ops, outputs = grow_region(root, block, taken)
        taken.update(ops)
        if len(ops) > 1:
            fuse_ops(KIND, ops, outputs)
