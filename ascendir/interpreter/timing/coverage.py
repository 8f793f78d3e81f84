"""Which elements GM tiles hold, and whether other tiles accessed in time hold all of a tile's
(the L2 model's coverage, interpreter/timing/l2.py): a tile read in another shape than it was
written or read before hits when those tiles hold every element it reads.

A GM tile is `(root, element offset, shape, element strides)`, keyed as one int (`SHIFT`); its
elements are contiguous runs (`Geometry.runs`). `covered_first` settles a launch's candidate misses
at once, `RunTable` answers lookups against a root's accesses (an earlier kernel's: `covers_many`)."""

from __future__ import annotations

import math

import numpy as np

SHIFT = 1 << 40  # tile key = stream id * SHIFT + element offset (GM buffers hold < 2^40 elements)

RUNS = 1 << 14  # contiguous runs a tile may have and still take part in coverage (`Geometry`)
ONES = 64  # the same for runs of one element


class Geometry:
    """Which elements GM tiles hold, for coverage across tile shapes. A stream's tile
    (shape, element strides) is a set of contiguous element runs: its rows after merging
    contiguous dims. Coverage is by elements: a read hits through other tiles only when they hold
    every element it reads (a 512-B line partly read before still counts as a miss here)."""

    __slots__ = ("stream_of", "rel", "rootno", "sid_root")

    def __init__(self, stream_of: list):
        self.stream_of = stream_of  # L2Cache's (root, shape, strides) per stream id, append-only
        self.rel: dict[int, tuple | None] = {}
        self.rootno: dict = {}
        self.sid_root = np.zeros(0, np.int64)

    def root_of(self, sids: np.ndarray) -> np.ndarray:
        """Root number of each stream id (int64 array; -1 for an id no stream has: keys made up
        without `L2Cache.sid`, as some tests do)."""
        n = self._grow()
        sids = np.asarray(sids)
        return np.where(sids < n, self.sid_root[np.minimum(sids, max(n - 1, 0))] if n else -1, -1)

    def root_of_key(self, key: int) -> int:
        sid = key // SHIFT
        return int(self.sid_root[sid]) if sid < self._grow() else -1

    def _grow(self) -> int:
        """Number the roots of the streams added since the last call; the number of streams."""
        n = len(self.stream_of)
        if len(self.sid_root) < n:
            rn = self.rootno
            more = [rn.setdefault(self.stream_of[i][0], len(rn)) for i in range(len(self.sid_root), n)]
            self.sid_root = np.concatenate([self.sid_root, np.array(more, np.int64)])
        return n

    def runs(self, sid: int) -> tuple | None:
        """(run starts relative to the tile's offset (int64), run length, extent) of stream `sid`,
        all in elements; None when the tile has more than RUNS runs, or more than ONES runs of
        one element (strided rows: the windows of a stride-2 convolution, too many to follow)."""
        got = self.rel.get(sid, False)
        if got is not False:
            return got
        _, shape, strides = self.stream_of[sid]
        dims = [(d, st) for d, st in zip(shape, strides) if d != 1]
        got = None
        if len(shape) != len(strides):  # (no such view comes out of the compiler: take no part)
            pass
        elif not dims:
            got = (np.zeros(1, np.int64), 1, 1)
        elif 0 not in shape:
            length, outer = (dims[-1][0], dims[:-1]) if dims[-1][1] == 1 else (1, dims)
            while outer and length > 1 and outer[-1][1] == length:  # contiguous with the run
                length *= outer.pop()[0]
            n = math.prod(d for d, _ in outer)
            if n <= (RUNS if length > 1 else ONES):
                rel = np.zeros(1, np.int64)
                for d, st in outer:
                    rel = (rel[:, None] + np.arange(d, dtype=np.int64) * st).ravel()
                ext = int(rel.max()) + length
                if int(rel.min()) >= 0:
                    got = (rel, length, ext)
        self.rel[sid] = got
        return got

    def expand(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The runs of tiles `keys` (int64): starts, ends (elements) and the index in `keys` of
        each run's tile, a tile's runs contiguous; a tile whose runs are not known has none."""
        sid, off = np.divmod(keys, SHIFT)
        parts = []
        for s in np.unique(sid).tolist():
            g = self.runs(s)
            if g is None:
                continue
            idx = np.flatnonzero(sid == s)
            st = (off[idx][:, None] + g[0]).ravel()
            parts.append((st, st + g[1], np.repeat(idx, len(g[0]))))
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        st, en, who = (np.concatenate(x) for x in zip(*parts))
        return st, en, who

    def disjoint(self, keys: np.ndarray) -> bool:
        """Whether the distinct tiles `keys` (one root) share no element (none can cover another's
        elements); False also when a tile's runs are not known."""
        k = _distinct(keys)
        st, en, who = self.expand(k)
        if not np.bincount(who, minlength=len(k)).all():
            return False
        o = np.argsort(st, kind="stable")
        return bool(np.all(st[o][1:] >= np.maximum.accumulate(en[o])[:-1]))


def _distinct(a: np.ndarray) -> np.ndarray:
    """np.unique of an int64 array by sorting (numpy 2's hashing unique is several times slower
    on the large arrays here)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


def _pieces(ia: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of n[i] >= 1 pieces from piece ia[i], laid end to end: the first position of each
    run, and the piece at every position (ia[0], ia[0]+1, .., ia[1], ia[1]+1, ..)."""
    first = np.zeros(len(n), np.int64)
    np.cumsum(n[:-1], out=first[1:])
    return first, np.repeat(ia - first, n) + np.arange(int(n.sum()))


def _piece_times(st: np.ndarray, en: np.ndarray, t: np.ndarray, reduce: np.ufunc, fill: float):
    """The element axis cut at every end of the runs [st, en) into pieces: (the cuts, each
    piece's time: `reduce` (np.minimum / np.maximum) of the times `t` of the runs over it, `fill`
    where none; per run the first position and the piece at every position, as `_pieces`)."""
    cuts = _distinct(np.concatenate([st, en]))
    ia, ib = np.searchsorted(cuts, st), np.searchsorted(cuts, en)
    n = ib - ia  # pieces per run (>= 1)
    first, piece = _pieces(ia, n)
    f = np.full(len(cuts), fill)
    reduce.at(f, piece, np.repeat(t, n))
    return cuts, f, first, piece


def covered_first(geo: Geometry, keys: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per tile (distinct `keys` of one root, int64, first accessed at `times`): whether other
    tiles accessed strictly before it hold every element it reads. Vectorised over all tiles: the
    element axis is cut at every run's ends into pieces; a piece's time is the earliest access
    covering it; a tile is covered when the latest of its pieces' times is before its own.
    (Its own runs count at its own time, which is not before it.)"""
    out = np.zeros(len(keys), bool)
    st, en, who = geo.expand(keys)  # runs, grouped by tile
    if not len(st):
        return out
    t = times[who]
    _, f, first, piece = _piece_times(st, en, t, np.minimum, np.inf)
    latest = np.maximum.reduceat(f[piece], first)  # per run: when all its pieces were held
    tile = np.flatnonzero(np.r_[True, who[1:] != who[:-1]])
    out[who[tile]] = np.maximum.reduceat(latest, tile) < t[tile]
    return out


class RunTable:
    """The element runs (`Geometry.runs`) of accesses of one root: start, end (elements) and
    access time (cycles) per run, sorted by start, for `covers`' range lookups."""

    __slots__ = ("st", "en", "t", "maxlen", "latest")

    def __init__(self, geo: Geometry, keys: np.ndarray, times: np.ndarray):
        self.latest: tuple | None = None  # (cuts, latest time per piece): covers_many
        st, en, who = geo.expand(keys)
        o = np.argsort(st, kind="stable")
        self.st, self.en, self.t = st[o], en[o], times[who][o]
        self.maxlen = int((en - st).max()) if len(st) else 0

    def covers_many(self, geo: Geometry, keys: np.ndarray, t_lo: np.ndarray, t_hi: np.ndarray) -> np.ndarray:
        """`covers(geo, keys[i], t_lo[i], t_hi[i], False)` for every i (bool array), at once
        when no run is later than any t_hi (an earlier kernel's accesses, read by a later one):
        then an element is held in time when the latest run over it is not before t_lo. The
        element axis is cut at every run's ends into pieces, each with the latest time of the
        runs over it (-inf where none)."""
        if len(keys) <= 16 or len(self.t) and self.t.max() > t_hi.min():  # (a few: range lookups cost less)
            return np.array([self.covers(geo, int(k), float(a), float(b), False) for k, a, b in zip(keys, t_lo, t_hi)], bool)
        out = np.zeros(len(keys), bool)
        if not len(self.t):
            return out
        if self.latest is None:
            self.latest = _piece_times(self.st, self.en, self.t, np.maximum, -np.inf)[:2]
        cuts, f = self.latest
        qs, qe, who = geo.expand(keys)
        if not len(qs):
            return out
        inside = (qs >= cuts[0]) & (qe <= cuts[-1])
        ia = np.clip(np.searchsorted(cuts, qs, "right") - 1, 0, len(cuts) - 1)
        ib = np.maximum(np.searchsorted(cuts, qe) - 1, ia)  # the piece holding the run's last element
        first, piece = _pieces(ia, ib - ia + 1)
        ok = inside & (np.minimum.reduceat(f[piece], first) >= t_lo[who])
        tile = np.flatnonzero(np.r_[True, who[1:] != who[:-1]])
        out[who[tile]] = np.logical_and.reduceat(ok, tile)
        return out

    def covers(self, geo: Geometry, key: int, t_lo: float, t_hi: float, before: bool) -> bool:
        """Whether the runs accessed at times in [t_lo, t_hi] (`before`: strictly before t_hi)
        hold every element of tile `key`. (Its own accesses count too: where it is asked, none of
        them is in the range, or the tile would be resident by its key.)"""
        sid, off = divmod(key, SHIFT)
        q = geo.runs(sid)
        if q is None or not len(self.st):
            return False
        lo, hi = off, off + q[2]
        a = np.searchsorted(self.st, lo - self.maxlen + 1)
        b = np.searchsorted(self.st, hi)
        t = self.t[a:b]
        m = (self.en[a:b] > lo) & (t >= t_lo) & ((t < t_hi) if before else (t <= t_hi))
        st, en = self.st[a:b][m], self.en[a:b][m]
        if not len(st):
            return False
        en = np.maximum.accumulate(en)  # (st is sorted)
        new = np.ones(len(st), bool)
        new[1:] = st[1:] > en[:-1]  # a gap before this run: a new merged segment
        seg_start = st[new]
        seg_end = np.append(en[np.flatnonzero(new)[1:] - 1], en[-1])
        qs = off + q[0]
        i = np.searchsorted(seg_start, qs, "right") - 1
        return bool(np.all((i >= 0) & (seg_end[np.maximum(i, 0)] >= qs + q[1])))
