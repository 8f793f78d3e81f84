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


class OpTree:
    """`walk_ops(root)` (`ops`) together with where each op's own walk lies in it: in pre-order
    an op and the ops nested in it are consecutive, so `walk(op)` is a slice and the per-loop
    analyses of a kernel (steady.py, remap.py; the tile loop's walk holds the K loop's, ...) need
    no walk of their own. Valid while the IR is not changed: build one per compile."""

    __slots__ = ("ops", "_span")

    def __init__(self, root: Operation):
        ops: list[Operation] = []
        span: dict[int, tuple[int, int]] = {}  # id(op) -> (its index, the index past its nested ops)

        def visit(o: Operation) -> None:
            i = len(ops)
            ops.append(o)
            for region in o.regions:
                for block in region.blocks:
                    x = block.first_op
                    while x is not None:
                        visit(x)
                        x = x.next_op
            span[id(o)] = (i, len(ops))  # (ids are unique: `ops` keeps every op alive)

        visit(root)
        self.ops = ops
        self._span = span

    def walk(self, op: Operation) -> list[Operation]:
        """`walk_ops(op)` for an op of the tree (KeyError for any other op)."""
        i, j = self._span[id(op)]
        return self.ops[i:j]
