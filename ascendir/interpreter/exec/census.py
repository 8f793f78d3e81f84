"""Which rows of a GEMM super-tile some block asks for over its whole K slice, read from a
launch's GM reads before its data walk runs (exec/deferred.py `CubeDeferral._product`).

A super-tile (512 rows of A x 2048 columns of B over one K slice) is computed when its GEMM's
second tile is asked for, before the data walk knows which of its rows any later tile will ask
for whole. A tail split (catlass TailSplitK, nn_to_ascend/templates/matmul.py) asks for its last
wave's rows as K pieces only: the whole-K super-tile of their columns computed them for nobody
(the 7B layer's down projection of benchmarks/numerics_speed.py: 11.5 of its 58 GFLOP of
products). The timing-only twin's L2 recording pass (timing/l2.py `L2Pass`) has already seen
every GM read of the launch, per block: `Census` keeps those reads (the arrays the pass built for
`settle`, nothing added per read) and answers, per super-tile, the rows of the output tiles that
some block reads over exactly the super-tile's K slice (each A read paired with the B reads of
its K step) in some of the super-tile's columns. Built per launch from the pass's arrays, at
the first super-tile of each GEMM: ~13 ms CPU for the 7B layer's four GEMM kernels.

A hint, never a promise: a tile of rows left out is computed alone when asked for (the same fp32
sums: `_product`), so a wrong census costs time, not bits. Reads are counted as covering what
they cover; anything the census cannot place (a view of a buffer it cannot map, other strides)
is simply not seen, and a super-tile none of whose rows it sees asked for whole is computed whole.
"""

from __future__ import annotations

import numpy as np

from ascendir.interpreter.exec.pointer import data_pointer


class Census:
    """The GM reads of one launch's recording pass: `keys` (int64 L2 tile keys, stream id *
    `shift` + element offset, timing/l2.py), `blocks` and `ordinals` (int64: block of each read,
    its rank among the block's reads), `streams` (stream id -> (address-tag root, tile shape,
    element strides)); `args` / `tags` the launch's GM arguments and their address tags (root,
    element offset, element strides), which map a root to the C-contiguous ndarray owning its
    memory (the buffers `_product`'s views are of)."""

    __slots__ = ("keys", "blocks", "ordinals", "shift", "streams", "owners", "sids", "kinds", "reads", "pairs", "memo")

    def __init__(self, keys: np.ndarray, blocks: np.ndarray, ordinals: np.ndarray, shift: int, streams: list,
                 args: list, tags: list):
        self.keys, self.blocks, self.ordinals, self.shift, self.streams = keys, blocks, ordinals, shift, streams
        # root -> (owner ndarray, owner element index minus root element index)
        self.owners: dict = {}
        for a, t in zip(args, tags):
            if t is None or not isinstance(a, np.ndarray):
                continue
            o = a if a.base is None else a.base
            if type(o) is not np.ndarray or not o.flags.c_contiguous or o.dtype != a.dtype:
                continue
            d, r = divmod(data_pointer(a) - data_pointer(o), a.itemsize)
            if not r:
                self.owners[t[0]] = (o, d - t[1])
        self.sids: np.ndarray | None = None  # stream id of each read (built at the first question)
        self.kinds: list = []  # the distinct stream ids
        self.reads: dict = {}  # (buffer, row stride) -> `_reads`
        self.pairs: dict = {}  # (A's buffer, B's buffer, row strides) -> `_pairs`
        self.memo: dict = {}  # GEMM (buffers, strides, K slice) -> whole items (`rows`)

    def rows(self, oa: np.ndarray, ob: np.ndarray, sa: int, sb: int, kc: int, k: int, kb: int,
             r0: int, r1: int, c0: int, c1: int) -> tuple[int, int]:
        """Rows [lo, hi) (of A's buffer `oa`, r0 <= lo < hi <= r1) holding every row in [r0, r1)
        of an output tile that some block reads over exactly the K slice (`_whole`): its A rows
        over A's columns [kc, kc + k) and some of its columns in [c0, c1) of B's buffer `ob` over
        B's rows [kb, kb + k), each A read paired with the B reads of its K step (`_pairs`); (r0, r1) when
        no such tile is seen. `sa`, `sb`: the buffers' row strides in elements (reads of other
        strides are not seen). A read pairs with B reads of the same K elements only where A's
        column and B's row of an element are equal (a GEMM of whole buffers; others: not seen)."""
        key = (id(oa), sa, kc, k, id(ob), sb, kb)
        whole = self.memo.get(key)
        if whole is None:
            whole = self.memo[key] = self._whole(oa, ob, sa, sb, kc, k)
        ar, ae, bc, be = whole
        m = (bc < c1) & (be > c0) & (ar < r1) & (ae > r0)
        if not m.any():
            return r0, r1
        return max(int(ar[m].min()), r0), min(int(ae[m].max()), r1)

    def _whole(self, oa, ob, sa, sb, kc, k) -> tuple:
        """Arrays (A's first row, end row, B's first column, end column) of the output tiles some
        block reads over exactly the K slice, A's columns [kc, kc + k): the K elements the
        tile's pairs cover (`_pairs`; overlaps counted once) are k, all inside it. (A whole-K
        tile over a K piece's rows asks for the whole-K product, not the piece's.)"""
        got = self.pairs.get((id(oa), id(ob), sa, sb))
        if got is None:
            got = self.pairs[(id(oa), id(ob), sa, sb)] = self._pairs(oa, ob, sa, sb)
        firsts, gid, at, ext, tiles, span = got
        if not len(at):
            return tiles
        total = _covered(firsts, gid, np.clip(at, kc, kc + k), np.clip(at + ext, kc, kc + k))
        return tuple(x[(total >= k) & (span <= k)] for x in tiles)

    def _reads(self, owner: np.ndarray, stride: int) -> tuple:
        """The reads of 2-D tiles of `owner` (row stride `stride` elements, unit column stride):
        (block, ordinal, first row, first column, rows, columns) arrays."""
        got = self.reads.get((id(owner), stride))
        if got is None:
            got = self.reads[(id(owner), stride)] = self._read(owner, stride)
        return got

    def _read(self, owner: np.ndarray, stride: int) -> tuple:
        if self.sids is None:
            self.sids = self.keys // self.shift
            self.kinds = np.unique(self.sids).tolist()
        roots = {r: d for r, (o, d) in self.owners.items() if o is owner}
        want = {}
        for s in self.kinds if roots else ():
            root, shape, st = self.streams[s]
            if root in roots and len(shape) == 2 and tuple(st) == (stride, 1):
                want[s] = (roots[root], *shape)
        if not want:
            return tuple(np.zeros(0, np.int64) for _ in range(6))
        table = np.zeros((max(want) + 1, 3), np.int64)  # stream -> (element delta, rows, columns)
        for s, v in want.items():
            table[s] = v
        sel = np.flatnonzero(np.isin(self.sids, list(want)))
        sid = self.sids[sel]
        d, h, w = table[sid].T
        r, c = np.divmod(self.keys[sel] - sid * self.shift + d, stride)
        return self.blocks[sel], self.ordinals[sel], r, c, h, w

    def _pairs(self, oa, ob, sa, sb) -> tuple:
        """Each B read with the A read of its K step: the block's latest A read before it whose
        first column is the B read's first row (the cube loads a K step's A and B tiles before
        its mmad). Grouped by output tile (block, A's rows, B's columns), by K within a tile:
        (first pair of each tile, tile number of each pair, first K element (A's column) and K
        elements both reads cover of each pair, (A's first row, end row, B's first column, end
        column) arrays of each tile)."""
        ab, aj, ar, ac, ah, aw = self._reads(oa, sa)
        bb, bj, br, bc, bh, bw = self._reads(ob, sb)
        na = len(ab)
        blk = np.concatenate([ab, bb])
        kpos = np.concatenate([ac, br])
        o = np.lexsort((np.concatenate([aj, bj]), kpos, blk))  # by block, K step, program order
        blk, kpos = blk[o], kpos[o]
        is_a = o < na
        idx = np.arange(len(o))
        new = np.ones(len(o), bool)
        new[1:] = (blk[1:] != blk[:-1]) | (kpos[1:] != kpos[:-1])
        start = np.maximum.accumulate(np.where(new, idx, 0))
        last = np.maximum.accumulate(np.where(is_a, idx, -1))
        ok = ~is_a & (last >= start)
        ia, ib = o[last[ok]], o[ok] - na
        cols = [bb[ib], ar[ia], ah[ia], bc[ib], bw[ib]]
        at, ext = ac[ia], np.minimum(aw[ia], bh[ib])
        if not len(at):
            return np.zeros(0, np.int64), at, at, at, (at, at, at, at), at
        o = np.lexsort((at, *reversed(cols)))
        cols = [x[o] for x in cols]
        at, ext = at[o], ext[o]
        new = np.zeros(len(o), bool)
        new[0] = True
        for x in cols:
            new[1:] |= x[1:] != x[:-1]
        firsts = np.flatnonzero(new)
        gid = np.cumsum(new) - 1
        _, r, h, c, w = (x[firsts] for x in cols)
        return firsts, gid, at, ext, (r, r + h, c, c + w), _covered(firsts, gid, at, at + ext)


def _covered(firsts: np.ndarray, gid: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per tile, how many elements the union of its intervals [s, e) holds (int64 arrays: the
    intervals by tile `gid`, tiles starting at `firsts`, sorted by s within a tile)."""
    big = np.int64(1) << 40  # (> any element index: the running maximum restarts per tile)
    run = np.maximum.accumulate(e + gid * big)
    before = np.empty_like(run)
    before[0] = -1
    before[1:] = run[:-1] - gid[1:] * big  # (at a tile's first interval, the tile before's: negative)
    return np.add.reduceat(np.maximum(e - np.maximum(s, before), 0), firsts)
