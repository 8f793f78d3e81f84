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

A body with an op that has no vector recipe, or outputs of different shapes, returns None and is
lowered op by op.
"""

from __future__ import annotations

from xdsl.ir import Attribute, SSAValue

from ascendir.dialects import nn
from ascendir.lowering.elementwise import emit_vector_kernel, vector_map_of
from ascendir.lowering.host_builder import LoweringContext, elem, shape
from ascendir.lowering.kernel_builder import KernelBuilder


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


def lower_fused_elementwise(
    ctx: LoweringContext, op: nn.FusedOp, operands: list[SSAValue]
) -> list[SSAValue] | None:
    """Lower an elementwise region to one vector kernel (see the module docstring), or None."""
    block = op.body.block
    body = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    recipes = [vector_map_of(o) for o in body]
    term = block.last_op
    out_shape = shape(op.outputs[0])
    if any(r is None for r in recipes) or not isinstance(term, nn.YieldOp):
        return None
    outputs: list[SSAValue] = list(term.values)
    if any(shape(o) != out_shape for o in op.outputs) or any(v.owner not in body for v in outputs):
        return None

    # Plan: where each value lives ("in", i) / ("out", j) / ("tmp", k); temps of op i.
    where: dict[SSAValue, tuple[str, int]] = {a: ("in", i) for i, a in enumerate(block.args)}
    where.update({v: ("out", j) for j, v in enumerate(outputs)})
    last_use = {v: i for i, o in enumerate(body) for v in o.operands}
    pool = _TempPool()
    op_temps: list[list[int]] = []
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
        op_temps.append(own)
        op_small.append(range(len(small), len(small) + len(vmap.small_temps)))
        small.extend(vmap.small_temps)
    n_full = len(pool.elems)

    def compute(kb: KernelBuilder, ins: list[SSAValue], outs: list[SSAValue], temps: list[SSAValue]) -> None:
        def buf(v: SSAValue) -> SSAValue:
            kind, k = where[v]
            return {"in": ins, "out": outs, "tmp": temps}[kind][k]

        for o, vmap, own, sm in zip(body, recipes, op_temps, op_small):
            vmap.compute(
                kb, [buf(v) for v in o.operands], buf(o.results[0]), [temps[k] for k in own] + [temps[n_full + k] for k in sm]
            )

    return emit_vector_kernel(
        ctx, "fused_elementwise", operands, out_shape, [elem(o) for o in op.outputs], compute, pool.elems, small
    )

