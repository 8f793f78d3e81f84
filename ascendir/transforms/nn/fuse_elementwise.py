"""`fuse-elementwise`: DAGs of elementwise ops → `nn.fused {kind = "elementwise"}`, one vector
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
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.fused_elementwise import fuse_elementwise_in
from ascendir.patterns import funcs


@dataclass(frozen=True)
class FuseElementwise(ModulePass):
    """Wrap DAGs of elementwise ops in nn.fused {kind = "elementwise"} (one vector kernel each)."""

    name = "fuse-elementwise"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in funcs(op):
            fuse_elementwise_in(f.body.block)
