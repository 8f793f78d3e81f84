"""`fuse-elementwise`: DAGs of elementwise ops → `nn.fused {kind = #nn.fused_kind<elementwise>}`, one vector
kernel that loads each input tile once, applies every op in UB and stores once
(template: lowering/fused_elementwise.py).

Elementwise means an op with a vector recipe (`lowering.elementwise.ELEMENTWISE`: unary,
broadcasting binary, comparisons, Where, Cast, Clip, GELU, ...). A region grows backwards from
its last op (the root, whose shape O is the kernel's iteration space) over the producers of its
operands. A producer joins when

* its result broadcasts to O (an operand may be smaller: a bias row, a scalar), and
* every user of its result is in the region, or its result has exactly shape O and every outside
  user comes after the root: then it is also written out as an extra output of the region
  (computed once, stored once, instead of stored and loaded again).

The second rule also keeps the graph acyclic: a path leaving the region and coming back would
start at an outside user placed before the root. Regions of one op are left alone (the plain
template is the same kernel). Run it after the other fusions, so it takes what they leave
(RoPE's mul/add chains, residual adds, mask arithmetic) and never an op a richer template wants.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.lowering.elementwise import ELEMENTWISE
from ascendir.transforms.patterns import funcs, fuse_ops, program_order

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


@dataclass(frozen=True)
class FuseElementwise(ModulePass):
    """Wrap DAGs of elementwise ops in nn.fused {kind = #nn.fused_kind<elementwise>} (one vector kernel each)."""

    name = "fuse-elementwise"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in funcs(op):
            fuse_elementwise_in(f.body.block)
