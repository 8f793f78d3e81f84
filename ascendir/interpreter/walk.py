"""Walking a kernel's ops fast (compiling runs several walks per kernel and per loop)."""

from __future__ import annotations

from xdsl.ir import Operation


def walk_ops(op: Operation) -> list[Operation]:
    """`op` and every op nested in it, in `op.walk()` order (pre-order, program order). A plain
    recursion over the block lists: xDSL's walk passes every op up through a generator per
    enclosing op, region and block, which made the kernel walks a visible part of compiling."""
    out: list[Operation] = []

    def visit(o: Operation) -> None:
        out.append(o)
        for region in o.regions:
            for block in region.blocks:
                x = block.first_op
                while x is not None:
                    visit(x)
                    x = x.next_op

    visit(op)
    return out
