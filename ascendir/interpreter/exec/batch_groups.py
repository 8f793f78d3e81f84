"""Which blocks of a recorded launch (exec/tape.py) phase B of the batched data walk runs as one
batch (exec/batch_run.py): pure functions over the tapes.

A group is a run of consecutive blocks, at most MAX_BATCH, whose tapes hold the same ops in the
same order (`runs`), and in which no block writes a GM byte that another block of the group reads
or writes (`coded_hazard`). Phase B runs the groups in block order and, inside a group, op after op,
each for all the group's blocks, where the plain walk ran block after block. That reorders only
ops of different blocks of one group: their on-chip arrays are apart (tape.py) and their GM
accesses touch no byte one of them writes, so each op reads the values it reads in the plain walk
and the last write of every byte is the plain walk's last write of it.

The hazard check is exact, per byte: for each GM buffer written in the group, a map of its bytes
marked with the block that wrote them; a byte marked by another block than the one reading or
writing it is a hazard. A group with one is run block by block (phase B's plain replay).

`coded_hazard` computes it on the operand addresses and forms phase B has already read (numpy
over the group's GM operands instead of a Python loop per view): a group whose GM buffers are not
plain C-contiguous numpy arrays, or share memory, counts as a hazard; per written buffer, when its
blocks' byte hulls, sorted by their first bytes, are all distinct, each ending before the next
begins, no byte is shared; else the per-byte marks decide (`_shared`, whose answer does not depend
on the order of the views). tests/test_batch_walk.py compares it with a per-view reference.
"""

from __future__ import annotations

from operator import itemgetter

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


def _shared(root: np.ndarray, writes: list, reads: list) -> bool:
    """Whether a byte of `root` (a plain C-contiguous buffer) written by a (block mark, view) of
    `writes` is written or read by another block's (`reads`), or cannot be told (a view numpy
    will not remap). The answer does not depend on the order or repeats of the pairs."""
    marks = np.zeros(root.nbytes, np.uint8)  # (untouched pages stay unmapped)
    at = data_pointer(root)
    for views, mark in ((writes, True), (reads, False)):
        for k, v in views:
            m = _bytes_of(marks, at, v)
            if m is None or np.count_nonzero(m) != np.count_nonzero(m == k):  # (a byte marked by another block)
                return True
            if mark:
                m[...] = k
    return False


def coded_hazard(flats: list[list], gm: list[tuple[int, bool]], P: np.ndarray, F: np.ndarray,
                 spans: np.ndarray) -> bool:
    """Whether a block of a group writes a GM byte that another reads or writes, or that cannot be
    told (the module doc), on the operand addresses and forms phase B has read. `flats[k]`: block k's operand values, its ops' operands one after the other; `gm`:
    (position in a flat list, written) of each GM operand (the group's ops are equal: `runs`);
    `P`, `F`: (blocks, operands) int64, the data pointer of each array operand and the number of
    its form; `spans[f]`: [first, last] byte of an array of form f from its data pointer, as
    `byte_span` computes it."""
    if not any(w for _, w in gm):
        return False
    at = [p for p, _ in gm]
    pick = itemgetter(*at) if len(at) > 1 else lambda fl: (fl[at[0]],)
    picked = [pick(fl) for fl in flats]
    views: dict[int, np.ndarray] = {}  # id(GM view) -> view
    for vs in picked:
        views.update(zip(map(id, vs), vs))
    rix: dict[int, int] = {}  # id(GM view) -> its buffer's number
    roots: list = []
    num: dict[int, int] = {}  # id(buffer) -> its number
    for i, v in views.items():
        root = v.base if v.base is not None else v
        r = num.get(id(root))
        if r is None:
            r = num[id(root)] = len(roots)
            roots.append(root)
        rix[i] = r
    R = [list(map(rix.__getitem__, map(id, vs))) for vs in picked]
    for root in roots:
        if type(root) is not np.ndarray or not root.flags.c_contiguous:
            return True
    rs = sorted(byte_span(root) for root in roots)
    if any(b[0] <= a[1] for a, b in zip(rs, rs[1:])):
        return True
    R = np.array(R, np.int64)
    W = np.array([w for _, w in gm])
    Pg, Fg = P[:, at], F[:, at]
    lo, hi = Pg + spans[Fg, 0], Pg + spans[Fg, 1]
    big = np.iinfo(np.int64)
    for r in np.unique(R[:, W]).tolist():
        m = R == r
        touch = m.any(1)
        first = np.where(m, lo, big.max).min(1)[touch]
        last = np.where(m, hi, big.min).max(1)[touch]
        o = np.argsort(first, kind="stable")
        first, last = first[o], last[o]
        if (first[:-1] < first[1:]).all() and (last[:-1] < first[1:]).all():
            continue  # (the blocks' hulls are apart)
        writes, reads = [], []
        ks, ps = np.nonzero(m)
        for k, p in zip(ks.tolist(), ps.tolist()):
            (writes if W[p] else reads).append((k + 1, flats[k][at[p]]))
        if _shared(roots[r], writes, reads):
            return True
    return False


def form_span(shape: tuple, strides: tuple, itemsize: int) -> tuple[int, int]:
    """[first, last] byte, from its data pointer, of an array of `shape`, `strides` (bytes) and
    `itemsize`: `byte_span` of such an array at address 0."""
    lo = hi = 0
    if 0 in shape:
        return 0, -1
    for n, st in zip(shape, strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + itemsize - 1


def _bytes_of(marks: np.ndarray, at: int, v: np.ndarray) -> np.ndarray | None:
    """The bytes of `marks` (one per byte of the buffer at address `at`) under view `v` of that
    buffer, as an array of v's shape plus one axis of its itemsize; None when numpy will not
    make it."""
    try:
        return np.ndarray(v.shape + (v.itemsize,), np.uint8, marks, data_pointer(v) - at, v.strides + (1,))
    except (ValueError, TypeError):
        return None
