"""Which blocks of a recorded launch (exec/tape.py) phase B of the batched data walk runs as one
batch (exec/batch_run.py): pure functions over the tapes.

A group is a run of consecutive blocks, at most MAX_BATCH, whose tapes hold the same ops in the
same order (`runs`), and in which no block writes a GM byte that another block of the group reads
or writes (`gm_hazard`). Phase B runs the groups in block order and, inside a group, op after op,
each for all the group's blocks, where the plain walk ran block after block. That reorders only
ops of different blocks of one group: their on-chip arrays are apart (tape.py) and their GM
accesses touch no byte one of them writes, so each op reads the values it reads in the plain walk
and the last write of every byte is the plain walk's last write of it.

The hazard check is exact, per byte: for each GM buffer written in the group, a map of its bytes
marked with the block that wrote them; a byte marked by another block than the one reading or
writing it is a hazard. A group with one is run block by block (phase B's plain replay).
"""

from __future__ import annotations

import numpy as np

from ascendir.interpreter.exec.pointer import byte_span, data_pointer

# blocks in one batch at most: a batch's on-chip buffers (FlashAttention: ~1 MB a block) overflow
# the L2 cache the per-block walk worked in, so the copies between them cost more batched. The 7B
# layer's FlashAttention data walk (in-process, min of 6, shared machine): 236 ms block by block,
# 259 in batches of 2, 218 of 4, 194 of 8, 203 of 12
MAX_BATCH = 8


def runs(blocks: list[list], cap: int = MAX_BATCH) -> list[tuple[int, int]]:
    """[start, stop) of the maximal runs of consecutive blocks (at most `cap` each, in block order,
    covering all) whose tapes (`blocks[b]`: (op facts, operand values) per tile op run) hold the
    same ops in the same order."""
    out = []
    start, n = 0, len(blocks)
    while start < n:
        sig = [e[0] for e in blocks[start]]
        stop = start + 1
        while stop < n and stop - start < cap and len(blocks[stop]) == len(sig) and [e[0] for e in blocks[stop]] == sig:
            stop += 1
        out.append((start, stop))
        start = stop
    return out


def gm_hazard(tapes: list[list]) -> bool:
    """Whether a block of `tapes` (a group's tapes, in block order, of equal ops: `runs`) writes a GM byte that another
    reads or writes, or that cannot be told (GM arrays that are no plain numpy buffers, or
    distinct buffers sharing memory). The GM operands of an op are its facts' [3]: (operand
    position, written)."""
    bufs: dict[int, tuple] = {}  # id(buffer) -> (buffer, [(block mark, written view)], [(mark, read view)])
    at = [(n, j, w) for n, (facts, _) in enumerate(tapes[0]) for j, w in facts[3]]  # (the group's ops are equal)
    for k, tape in enumerate(tapes):
        views = {}  # (id(view), written) -> view: each once
        for n, j, w in at:
            v = tape[n][1][j]
            views[id(v), w] = v
        for (_, w), v in views.items():
            root = v.base if v.base is not None else v
            got = bufs.get(id(root))
            if got is None:
                got = bufs[id(root)] = (root, [], [])
            (got[1] if w else got[2]).append((k + 1, v))
    written = [g for g in bufs.values() if g[1]]
    if not written:
        return False
    for g in bufs.values():
        if type(g[0]) is not np.ndarray or not g[0].flags.c_contiguous:
            return True
    spans = sorted(byte_span(g[0]) for g in bufs.values())
    if any(b[0] <= a[1] for a, b in zip(spans, spans[1:])):
        return True
    for root, writes, reads in written:
        if _apart(writes + reads):
            continue
        marks = np.zeros(root.nbytes, np.uint8)  # (untouched pages stay unmapped)
        at = data_pointer(root)
        for views, mark in ((writes, True), (reads, False)):
            for k, v in views:
                m = _bytes_of(marks, at, v)
                if m is None or ((m != 0) & (m != k)).any():
                    return True
                if mark:
                    m[...] = k
    return False


def _apart(views: list[tuple[int, np.ndarray]]) -> bool:
    """Whether the byte ranges from the first to the last byte of the (block mark, view) pairs
    `views` of each block are apart from those of every other block (then no byte is shared)."""
    hull: dict[int, list[int]] = {}
    for k, v in views:
        lo, hi = byte_span(v)
        h = hull.get(k)
        if h is None:
            hull[k] = [lo, hi]
        else:
            if lo < h[0]:
                h[0] = lo
            if hi > h[1]:
                h[1] = hi
    spans = sorted(hull.values())
    return all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def _bytes_of(marks: np.ndarray, at: int, v: np.ndarray) -> np.ndarray | None:
    """The bytes of `marks` (one per byte of the buffer at address `at`) under view `v` of that
    buffer, as an array of v's shape plus one axis of its itemsize; None when numpy will not
    make it."""
    try:
        return np.ndarray(v.shape + (v.itemsize,), np.uint8, marks, data_pointer(v) - at, v.strides + (1,))
    except (ValueError, TypeError):
        return None
