"""Reuse of the kernels of structurally identical nn ops during convert-nn-to-ascend.

A LLaMA-style model repeats the same layer: its nn ops (or `nn.fused` regions) have the same op
kind, attributes, operand and result types in every layer, only the GM buffers differ. A
template's output depends on nothing else (the chip is fixed for the run), so the first such op
is lowered by its template and the host ops it emitted (GM `ascend.alloc`s, `ascend.view`s,
`ascend.launch`es) are recorded as a fragment; every later op with the same signature replays
the fragment on its own buffers: fresh allocs and views, launches of the same kernels. One
`ascend.kernel`, many `ascend.launch`es of it; the numerics are those of the shared kernel.

The signature covers: the op's name, properties and attributes (except `onnx.*` naming), the
types of operands and results, which operands share a GM buffer (aliasing changes what a kernel
may assume), and for ops with regions (`nn.fused`) the region's ops and their dataflow.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext

Signature = Hashable


def _root(v: SSAValue) -> SSAValue:
    return v.owner.source if isinstance(v.owner, ascend.ViewOp) else v


def _attributes(op: Operation) -> tuple:
    attrs = tuple(sorted((k, a) for k, a in op.attributes.items() if not k.startswith("onnx.")))
    return (tuple(sorted(op.properties.items())), attrs)


def _region_signature(op: Operation) -> tuple | None:
    """The ops of `op`'s regions with operands as local value numbers; None if a region reads a
    value defined outside it (then its lowering may depend on that value)."""
    numbers: dict[SSAValue, int] = {}
    out: list = []

    def number(values: Sequence[SSAValue]) -> None:
        for v in values:
            numbers[v] = len(numbers)

    def walk_block(block: Block) -> bool:
        number(block.args)
        out.append(tuple(a.type for a in block.args))
        for inner in block.ops:
            if any(v not in numbers for v in inner.operands):
                return False
            out.append((
                inner.name, _attributes(inner), tuple(numbers[v] for v in inner.operands),
                tuple(r.type for r in inner.results), len(inner.regions),
            ))
            for region in inner.regions:
                for b in region.blocks:
                    if not walk_block(b):
                        return False
            number(inner.results)
        return True

    for region in op.regions:
        for block in region.blocks:
            if not walk_block(block):
                return None
    return tuple(out)


def signature(op: Operation, operands: Sequence[SSAValue]) -> Signature | None:
    """What the lowering of `op` on GM buffers `operands` depends on; None when it cannot be
    keyed (an unhashable attribute, a region reading outer values)."""
    roots = [_root(v) for v in operands]
    aliasing = tuple((roots.index(r), operands.index(v)) for r, v in zip(roots, operands))
    body = _region_signature(op) if op.regions else ()
    if body is None:
        return None
    key = (
        op.name, _attributes(op), tuple(v.type for v in operands), tuple(r.type for r in op.results),
        aliasing, body,
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


# How a fragment refers to a host value: ("op", i, j) result j of fragment op i, ("operand", i)
# operand buffer i, ("view", i, shape) operand i's buffer viewed as shape.
Ref = tuple


@dataclass
class Fragment:
    """Host ops one template emitted, with operands as `Ref`s, and its results as `Ref`s."""

    ops: list[tuple[Operation, list[Ref]]]
    results: list[Ref]
    row_order: list[tuple[Ref, Ref]]  # ctx.row_order entries of buffers the fragment made

    @staticmethod
    def record(first: Operation | None, operands: Sequence[SSAValue], results: Sequence[SSAValue],
               row_order: dict[SSAValue, SSAValue] | None = None) -> Fragment | None:
        """The fragment of host ops from `first` to the end of its block, with the `row_order`
        entries (LoweringContext.row_order) of the buffers it made; None when one of them reads a
        host value that is neither an operand (or a view of one) nor made by the fragment."""
        produced: dict[SSAValue, Ref] = {}
        roots = [_root(v) for v in operands]

        def ref(v: SSAValue) -> Ref | None:
            if v in produced:
                return produced[v]
            if v in operands:
                return ("operand", operands.index(v))
            if _root(v) in roots:
                return ("view", roots.index(_root(v)), tuple(v.type.get_shape()))
            return None

        ops: list[tuple[Operation, list[Ref]]] = []
        op = first
        while op is not None:
            refs = [ref(v) for v in op.operands]
            if any(r is None for r in refs):
                return None
            for j, r in enumerate(op.results):
                produced[r] = ("op", len(ops), j)
            ops.append((op, refs))
            op = op.next_op
        result_refs = [ref(v) for v in results]
        if any(r is None for r in result_refs):
            return None
        orders = [(produced[b], produced[d]) for b, d in (row_order or {}).items() if b in produced and d in produced]
        return Fragment(ops, result_refs, orders)

    def replay(self, ctx: LoweringContext, operands: Sequence[SSAValue]) -> list[SSAValue]:
        """Emit the fragment again on `operands`; returns the result buffers."""
        made: list[list[SSAValue]] = []

        def value(r: Ref) -> SSAValue:
            if r[0] == "op":
                return made[r[1]][r[2]]
            if r[0] == "operand":
                return operands[r[1]]
            return ctx.view(operands[r[1]], r[2])

        for op, refs in self.ops:
            args = [value(r) for r in refs]
            if isinstance(op, ascend.ViewOp):  # through ctx.view: chains collapse, views are shared
                made.append([ctx.view(args[0], op.results[0].type.get_shape())])
                continue
            new = op.clone(value_mapper=dict(zip(op.operands, args)))
            if isinstance(new, ascend.LaunchOp):  # the replaying op's own ONNX node(s), not the recorded one's
                if ctx.onnx_nodes:
                    new.attributes["onnx.node"] = StringAttr(ctx.onnx_nodes)
                else:
                    new.attributes.pop("onnx.node", None)
            ctx.emit(new)
            made.append(list(new.results))
        for b, d in self.row_order:
            ctx.row_order[value(b)] = value(d)
        return [value(r) for r in self.results]

