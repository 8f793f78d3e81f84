"""Where buffers of a lowered module live: the root `ascend.alloc` of a memref value, the
program-order interval over which each buffer is in use, the dims a rank-reducing subview drops
and whether two views of a buffer may share bytes (shared by plan-memory, insert-sync and the
interpreter's race checker).

Positions are pre-order indices of the ops of a region (nested ops included), so an op with
regions spans [its index, the index of its last nested op].
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.ir import Operation, Region, SSAValue

from ascendir.dialects import ascend
from ascendir.dtypes import packed_nbytes, to_numpy_dtype
from ascendir.errors import AscendirError


def root_of(v: SSAValue) -> SSAValue:
    """The buffer a memref value is a window of: through `memref.subview` and `ascend.view`
    to an `ascend.alloc` / `ascend.weight` result or a block argument."""
    while isinstance(v.owner, (memref.SubviewOp, ascend.ViewOp)):
        v = v.owner.source
    return v


def nbytes(t: MemRefType) -> int:
    """Bytes of a statically shaped memref type (elements x element size; sub-byte types packed)."""
    return packed_nbytes(to_numpy_dtype(t.element_type), math.prod(t.get_shape()))


def positions(region: Region) -> tuple[dict[Operation, int], dict[Operation, int]]:
    """(position of each op, end position of each op) in pre-order over `region`; the end of an
    op without regions is its own position."""
    pos: dict[Operation, int] = {}
    end: dict[Operation, int] = {}

    def visit(op: Operation) -> int:
        pos[op] = n = len(pos)
        for r in op.regions:
            for b in r.blocks:
                for o in b.ops:
                    n = visit(o)
        end[op] = n
        return n

    for b in region.blocks:
        for o in b.ops:
            visit(o)
    return pos, end


def enclosing_loops(op: Operation, stop: Operation) -> Iterable[scf.ForOp]:
    """The scf.for ops around `op`, innermost first, up to (excluding) `stop`."""
    p = op.parent_op()
    while p is not None and p is not stop:
        if isinstance(p, scf.ForOp):
            yield p
        p = p.parent_op()


def live_intervals(container: Operation, buffers: Iterable[SSAValue]) -> dict[SSAValue, tuple[int, int]]:
    """[first, last] position in `container`'s body during which each buffer is in use.

    A buffer used inside a loop is live for the whole loop: its contents may be carried from one
    iteration to the next (an accumulator, ping-pong slots), and pipes run iterations ahead of
    each other, so sharing its bytes within the loop would need more than program order.
    Buffers never used get an empty interval (first > last)."""
    pos, end = positions(container.regions[0])
    wanted = set(buffers)
    iv: dict[SSAValue, list[int]] = {b: [1 << 62, -1] for b in wanted}
    for op, p in pos.items():
        if isinstance(op, (memref.SubviewOp, ascend.ViewOp)):
            continue  # a window is used where the op using it is
        for v in op.operands:
            if not isinstance(v.type, MemRefType):
                continue
            r = root_of(v)
            if r not in wanted:
                continue
            lo, hi = p, end[op]
            for loop in enclosing_loops(op, container):
                lo, hi = min(lo, pos[loop]), max(hi, end[loop])
            cur = iv[r]
            cur[0], cur[1] = min(cur[0], lo), max(cur[1], hi)
    return {b: (lo, hi) for b, (lo, hi) in iv.items()}


def dropped_dims(sizes: list[int], res_shape: list[int], n: int) -> set[int]:
    """Source dims a rank-reducing subview drops (unit dims, matched greedily from the left)."""
    r = len(res_shape)
    if r == n:
        return set()
    dropped, j = set(), 0
    for i, s in enumerate(sizes):
        keep_left = r - j
        if j < r and s != 1:
            j += 1
        elif j < r and s == 1 and res_shape[j] in (1, DYNAMIC_INDEX) and (n - i) <= keep_left:
            j += 1
        elif s == 1:
            dropped.add(i)
        else:
            raise AscendirError(f"memref.subview: cannot match sizes {sizes} to result shape {res_shape}")
    return dropped


def ranges_overlap(a: tuple, b: tuple) -> bool:
    """a, b = (lo, hi, offset, strides, shape) with [lo, hi] inclusive (insert-sync's and the race checker's ranges)."""
    if a[1] < b[0] or b[1] < a[0]:
        return False
    return views_overlap(a[2], a[3], a[4], b[2], b[3], b[4])


def views_overlap(oa: int, sa: tuple, ha: tuple, ob: int, sb: tuple, hb: tuple) -> bool:
    """Whether two views (offset, strides, shape) of one buffer may overlap: exact per-dim index
    boxes when the strides are equal (offsets decomposed along them), else True."""
    if sa != sb or not sa:
        return True
    order = sorted(range(len(sa)), key=lambda i: -sa[i])
    ra, rb = oa, ob
    for i in order:
        s = sa[i]
        if s <= 0:
            return True
        ia, ra = divmod(ra, s)
        ib, rb = divmod(rb, s)
        if ia + ha[i] <= ib or ib + hb[i] <= ia:
            return False
    return True
