"""Chip L2 cache model at tile granularity (L2 model "tile", the default on every target).

What it keys on: every GM buffer carries an address tag (root buffer, element offset, element
strides; `Compiler` propagates it through `ascend.view` and `memref.subview`), so a GM tile is
`(root, offset, shape, strides)`. A read of a tile hits when the same tile was read or written
(write-allocate) earlier in *simulated time* and is still resident, or when other tiles of its
root read or written earlier and still resident hold every element it reads (coverage.py:
a workspace written whole and read in chunks, chunks written and read whole, a producer's output
tiles read by the next kernel in another tiling); otherwise it misses and is recorded. Blocks are simulated one after another, so accesses arrive out of time order; each tile
keeps the sorted list of its access times and a lookup asks for the latest one at or before now.

Who pays a miss: blocks are simulated one after another, so the first block simulated would see
every tile first and pay every miss while its peers, simulated later, hit. A kernel with GM reads
therefore runs twice: a recording pass (every read hits, no numerics, no trace) notes when each
block reads and writes each tile; the misses go to the reads that are first in that pass's time
order (or come more than the residency window after the previous read), unless the launch wrote
the tile before them within the window (write-allocate: the write left it in L2, the hand-off of
a workspace written and read in the same launch), or other tiles it read or wrote before them
hold all their elements (`L2Pass._covered`); readers tied in time take turns
(`L2Pass.settle`: round-robin per group of tied readers, on simulated time, block and tile key,
not on the order the interpreter ran them in). The timed pass charges exactly those accesses as
misses, unless the tile, or tiles holding all its elements, was left in L2 by an earlier
kernel (`L2Cache.resident_before`, `covered_before`).

Residency (INF, from [S1] l2_size and the chip HBM bandwidth [S25]): L2 content is replaced by
lines filled from HBM, at most `hbm_bytes_per_cycle` per cycle, so a line touched at t₀ survives
at least until t₀ + l2_bytes / hbm_bytes_per_cycle cycles (LRU). We use exactly that window: a
conservative (short) residency, which makes no reuse look better than the hardware.
Line size: tiles count as whole 512-B lines [S4][S5][S24] (`lines()`), which is what the hit-rate
statistic in the report uses. Coverage is by elements and whole: a read that other tiles hold
only in part misses whole (pessimistic: its lines that are in L2 are paid as misses too; e.g. a
causal FlashAttention diagonal block whose score tile the cube wrote only in its first steps).
Tiles whose innermost stride is not 1 (strided windows of a stride-2 convolution) take no part in
coverage either way: their runs are single elements, too many to follow (`Geometry.runs`).
Cost: a launch whose accesses of a root lie within one window settles all its candidate misses at
once (`covered_first`); earlier kernels' accesses are kept per root as a RunTable, pruned to the
window, and a launch memo's checks look them up per root at once (`RunTable.covers_many`).

Hit cost: rate min(l2_read_rate [S1], l2_bw_over_hbm [S8] × HBM share) and hit latency 50 cycles
[S5] (cost.CostEnv); a miss costs the HBM path (DDR rate, 307-cycle read latency [S5]).

Representation (for speed; the answers are those of a per-tile dict of sorted access times):
a tile key is one int, `stream id * SHIFT + element offset`, the stream id naming (root, shape,
strides) (`L2Cache.sid`), so steady-state extrapolation (steady.py) can replay thousands of
skipped accesses as numpy arrays. The chip L2 keeps per key only the latest access time of the
kernels launched before the running one (`last`): a timed read asks only about earlier kernels
(`resident_before`), and every access of an earlier kernel precedes the running kernel's start
(a kernel's accesses start inside its timeline, the next kernel starts after it plus launch
overhead), so the latest one is the one the sorted list would find. The running kernel's accesses
are kept aside and folded in by `commit()` when the next kernel starts.
Writes (INF): the L2 is write-back with write-allocate, so a tile rewritten while its earlier
write is still resident (a per-core scratch workspace, e.g. FlashAttention's AIC <-> AIV
hand-off) never reaches HBM in between: that write goes at the path's L2 write rate (FixPipe
L0C -> L2 86 B/cycle [S4] = [S1] l2_write_rate) with the hit latency, and its bytes count as
"l2_write" (L2, not HBM, bandwidth in the chip floor). The first write of a tile, and writes of
fresh tiles (every ordinary output), keep the DDR write rate and count against HBM. Writes of
iterations that steady.py skips update the dirty map in bulk (`store_many`); their outcomes are
checked first against the dirty map (`first_rewrite_change`: the sampled period's need not hold,
another block may have written the tiles), and a jump stops before the first that differs.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter.timing.coverage import SHIFT, Geometry, RunTable, covered_first



class L2Cache:
    """Tile-granular L2 of one chip over one `ModuleProg.run` (kernels share it: a consumer
    kernel that reads a producer's output soon enough hits)."""

    __slots__ = ("window", "line", "last", "pk", "pt", "chunks", "hits", "misses", "streams", "stream_of", "dirty", "geo", "done", "tables")

    def __init__(self, target: HardwareConfig):
        mem = target.memory
        self.window = mem.l2_bytes / target.hbm_bytes_per_cycle  # cycles a line stays resident
        self.line = mem.l2_line_bytes
        self.last: dict[int, float] = {}  # key -> latest access time of the committed kernels
        self.pk: list[int] = []  # accesses of the running kernel (keys, times), not yet committed
        self.pt: list[float] = []
        self.chunks: list[tuple[np.ndarray, np.ndarray]] = []  # same, as arrays (replays)
        self.streams: dict[tuple, int] = {}  # (root, shape, strides) -> stream id
        self.stream_of: list[tuple] = []
        self.dirty: dict[int, float] = {}  # tile key -> time of its latest write
        self.geo = Geometry(self.stream_of)
        self.done: dict[int, list] = {}  # root number -> committed (keys, times) chunks (`covered_before`)
        self.tables: dict[int, RunTable] = {}  # root number -> its chunks as a RunTable, until the next commit touching it
        self.hits = 0
        self.misses = 0

    def reset(self) -> None:
        self.last.clear()
        self.done.clear()
        self.tables.clear()
        self.dirty.clear()
        self.pk.clear()
        self.pt.clear()
        self.chunks.clear()
        self.hits = self.misses = 0

    def sid(self, root, shape: tuple, strides: tuple) -> int:
        """Stream id of GM tiles of `shape`/`strides` (elements) in buffer `root`."""
        k = (root, shape, strides)
        s = self.streams.get(k)
        if s is None:
            s = self.streams[k] = len(self.stream_of)
            self.stream_of.append(k)
        return s

    def key(self, root, offset: int, shape: tuple, strides: tuple) -> int:
        """Key of the GM tile of `shape` at element `offset` of `root` with element `strides`."""
        return self.sid(root, shape, strides) * SHIFT + offset

    def commit(self) -> None:
        """Fold the accesses recorded so far into `last` (called when a kernel starts: from then
        on they belong to earlier kernels)."""
        if self.pk:
            self.chunks.append((np.array(self.pk, np.int64), np.array(self.pt, np.float64)))
            self.pk.clear()
            self.pt.clear()
        if not self.chunks:
            return
        k = np.concatenate([c[0] for c in self.chunks])
        t = np.concatenate([c[1] for c in self.chunks])
        self.chunks.clear()
        o = np.lexsort((t, k))
        k, t = k[o], t[o]
        end = np.ones(len(k), bool)
        end[:-1] = k[1:] != k[:-1]  # the latest access of each key
        k, t = k[end], t[end]
        last = self.last
        for kk, tt in zip(k.tolist(), t.tolist()):
            old = last.get(kk)
            if old is None or tt > old:
                last[kk] = tt
        roots = self.geo.root_of(k // SHIFT)
        o = np.argsort(roots, kind="stable")
        roots, k, t = roots[o], k[o], t[o]
        cut = np.flatnonzero(np.diff(roots)) + 1
        for r, kk, tt in zip(roots[np.r_[0, cut]].tolist(), np.split(k, cut), np.split(t, cut)):
            if r >= 0:
                self.tables.pop(r, None)
                got = self.done.setdefault(r, [])
                got.append((kk, tt))
                if len(got) > 8:  # (a root never looked up: keep its history bounded)
                    got[:] = [self._recent(got)]

    def resident_before(self, key: int, now: float, t_start: float) -> bool:
        """True when an access of an earlier kernel (before `t_start`, committed) left `key`
        resident at `now` (>= t_start)."""
        t = self.last.get(key)
        return t is not None and now - t <= self.window or self.covered_before(key, now)

    def covered_before(self, key: int, now: float) -> bool:
        """Whether the accesses of earlier kernels (committed) still resident at `now` hold every
        element of tile `key` between them: a tile written or read in other shapes (a producer's
        [128, 256] output tiles read as rows, a workspace written whole and read in chunks)."""
        if not self.done:
            return False
        got = self._table(self.geo.root_of_key(key))
        return got is not None and got.covers(self.geo, key, now - self.window, now, False)

    def _table(self, r: int) -> RunTable | None:
        """The committed accesses of root number `r` as a RunTable (built once per commit that
        touched the root, from its chunks pruned to the window), None when there are none."""
        got = self.tables.get(r)
        if got is None and r in self.done:
            chunks = self.done[r]
            chunks[:] = [self._recent(chunks)]
            got = self.tables[r] = RunTable(self.geo, *chunks[0])
        return got

    def _recent(self, chunks: list) -> tuple[np.ndarray, np.ndarray]:
        """The (keys, times) of committed chunks of one root without the accesses older than
        the residency window before the latest one: every later lookup is at or after the
        latest commit, where those are gone from L2."""
        k = np.concatenate([c[0] for c in chunks])
        t = np.concatenate([c[1] for c in chunks])
        keep = t >= t.max() - self.window
        return k[keep], t[keep]

    def resident_many(self, keys: np.ndarray, times: np.ndarray) -> np.ndarray:
        """`resident_before` of each (key, time): bool array of len(keys); the coverage of the
        keys not resident themselves looked up per root at once."""
        last, w = self.last, self.window
        prev = np.array([last.get(x, np.nan) for x in keys.tolist()], np.float64)
        out = times - prev <= w
        rest = np.flatnonzero(~out)
        if not len(rest) or not self.done:
            return out
        roots = self.geo.root_of(keys[rest] // SHIFT)
        for r in np.unique(roots).tolist():
            table = self._table(r)
            if table is not None:
                idx = rest[roots == r]
                out[idx] = table.covers_many(self.geo, keys[idx], times[idx] - w, times[idx])
        return out

    def write(self, key: int, now: float) -> None:
        """Record an access of tile `key` at chip time `now` (a write allocates; a read fills)."""
        self.pk.append(key)
        self.pt.append(now)

    def write_many(self, keys: np.ndarray, times: np.ndarray) -> None:
        """`write` for arrays: 1-D int64 keys and float64 times (what every caller has), kept as
        they are until `commit` and never written to meanwhile (no conversions: replays call this
        for every jump)."""
        if len(keys):
            self.chunks.append((keys, times))

    def store(self, key: int, now: float) -> bool:
        """Record a write of tile `key` by a kernel (write-allocate, as `write`); True when it
        rewrites the tile while an earlier write of it is still in L2 (|Δt| within the residency
        window): the write-back L2 absorbs it and the path runs at its L2 write rate."""
        self.write(key, now)
        return _rewrite(self.dirty, key, now, self.window)

    def dirty_at(self, key: int, now: float) -> bool:
        """What `store(key, now)` would answer, without recording the write."""
        prev = self.dirty.get(key)
        return prev is not None and abs(now - prev) <= self.window

    def store_many(self, keys: np.ndarray, times: np.ndarray) -> None:
        """`store` for the writes of skipped iterations (outcomes known: the sampled period's)."""
        self.write_many(keys, times)
        _latest(self.dirty, keys, times)

    def latest_writes(self, keys: np.ndarray, times: np.ndarray) -> None:
        """The dirty map after writes of tiles `keys` at `times` (a stored launch's latest write
        per tile, memo.py; a key given twice keeps its latest), their accesses already given to
        `write_many`."""
        dirty = self.dirty
        for k, t in zip(keys.tolist(), times.tolist()):
            old = dirty.get(k)
            if old is None or t > old:
                dirty[k] = t


def _rewrite(dirty: dict[int, float], key: int, now: float, window: float) -> bool:
    """Note a write of `key` at `now` in `dirty`; whether an earlier one is within `window`.
    (Blocks are simulated one after another, so `now` may precede the stored time; a scratch tile
    is per core, so in practice times per key only grow.)"""
    prev = dirty.get(key)
    if prev is None or now > prev:
        dirty[key] = now
    return prev is not None and abs(now - prev) <= window


def first_rewrite_change(dirty: dict[int, float], window: float, keys: np.ndarray, times: np.ndarray, expect: np.ndarray) -> int:
    """Index of the first of these writes (program order) whose outcome (`_rewrite`: a rewrite of
    a tile still dirty within `window`) differs from expect[i], len(keys) when none; `dirty` is
    not changed. For the skipped writes of jumps and the writes of applied stored executions
    (loop_memo.py): their outcomes depend on the tiles written before (by other blocks too),
    which the sampled periods or the stored execution did not see. Shapes: 1-D int64 keys, float64 times (chip
    cycles), bool expect, of one length."""
    mine: dict[int, float] = {}  # the tiles these writes touch, starting from `dirty`
    for i, (k, t, e) in enumerate(zip(keys.tolist(), times.tolist(), expect.tolist())):
        if k not in mine and k in dirty:
            mine[k] = dirty[k]
        if _rewrite(mine, k, t, window) != e:
            return i
    return len(keys)


def _latest(dirty: dict[int, float], keys: np.ndarray, times: np.ndarray) -> None:
    """dirty[k] = max(dirty[k], latest of `times` for k) for every key of the arrays."""
    k = np.asarray(keys, np.int64).ravel()
    if not len(k):
        return
    t = np.asarray(times, np.float64).ravel()
    o = np.lexsort((t, k))
    k, t = k[o], t[o]
    end = np.ones(len(k), bool)
    end[:-1] = k[1:] != k[:-1]
    for kk, tt in zip(k[end].tolist(), t[end].tolist()):
        old = dirty.get(kk)
        if old is None or tt > old:
            dirty[kk] = tt


def contiguous_strides(shape) -> tuple[int, ...]:
    """Row-major strides in elements."""
    st, acc = [], 1
    for d in reversed(tuple(shape)):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


TIE = 1.0  # cycles: accesses this close to a miss count as simultaneous with it


class L2Pass:
    """Who pays the misses of one kernel launch (see the module docstring).

    Recording: `read` notes (tile, time, block, ordinal of the read within its block) and answers
    "hit". `settle()` marks the misses. Timed: `read` answers from those marks (and the chip L2
    left by earlier kernels) and records the access in the chip L2. `first_change` / `read_many` do
    the same for arrays of reads (steady.py's replays), in order.
    """

    __slots__ = ("recording", "log", "chunks", "misses", "by_block", "ordinal", "window", "checks", "dirty", "patterns", "reads",
                 "wlog", "wchunks")

    def __init__(self, window: float):
        self.recording = True
        self.window = window
        self.log: tuple[list, list, list, list] = ([], [], [], [])  # keys, times, blocks, ordinals
        self.chunks: list[tuple] = []  # the same as arrays, in call order
        self.misses: set[tuple[int, int]] = set()
        self.by_block: dict[int, list[int]] | None = None  # block -> sorted miss ordinals
        self.ordinal: dict[int, int] = {}
        self.checks: list | None = None  # (key, now, outcome) of designated misses, for memo.py
        self.dirty: dict[int, float] = {}  # the recording pass's own write times (see store)
        self.patterns: dict | None = None  # designated miss ordinals -> blocks with them (`shares`)
        self.reads: tuple | None = None  # (keys, blocks, ordinals) of the recorded reads, kept by `settle` (exec/census.py)
        self.wlog: tuple[list, list] = ([], [])  # keys, times of the recorded writes (write-allocate, `settle`)
        self.wchunks: list[tuple[np.ndarray, np.ndarray]] = []

    @classmethod
    def settled(cls, window: float, misses: set[tuple[int, int]]) -> L2Pass:
        """A pass in the timed state with a designation `misses` kept from an identical launch
        (memo.py): the recording pass would make the same one."""
        p = cls(window)
        p.misses = misses
        p.recording = False
        return p

    def store(self, key: int, now: float) -> bool:
        """A write in the recording pass (the chip L2 is not touched): whether it rewrites a
        tile still dirty, as `L2Cache.store` will answer in the timed pass."""
        self.wlog[0].append(key)
        self.wlog[1].append(now)
        return _rewrite(self.dirty, key, now, self.window)

    def store_many(self, keys: np.ndarray, times: np.ndarray) -> None:
        """`store` for the writes of skipped iterations in the recording pass."""
        if len(keys):
            self._wflush()
            self.wchunks.append((np.asarray(keys, np.int64).ravel(), np.asarray(times, np.float64).ravel()))
        _latest(self.dirty, keys, times)

    def _wflush(self) -> None:
        k, t = self.wlog
        if k:
            self.wchunks.append((np.array(k, np.int64), np.array(t, np.float64)))
            k.clear()
            t.clear()

    def _writes(self) -> tuple[np.ndarray, np.ndarray]:
        """Keys and times of the recorded writes (int64, float64)."""
        self._wflush()
        if not self.wchunks:
            return np.zeros(0, np.int64), np.zeros(0)
        if len(self.wchunks) > 1:
            self.wchunks[:] = [(np.concatenate([c[0] for c in self.wchunks]), np.concatenate([c[1] for c in self.wchunks]))]
        return self.wchunks[0]

    def _covered(self, l2: L2Cache, ak: np.ndarray, at: np.ndarray, qk: np.ndarray, qt: np.ndarray) -> np.ndarray:
        """Per read (tile `qk` at `qt`): whether accesses of this launch (`ak` at `at`: reads and
        writes) of its root within the residency window before it hold all its elements
        (coverage.py: `covered_first`, `RunTable.covers`). A root whose tiles share no element is
        skipped whole."""
        geo = l2.geo
        out = np.zeros(len(qk), bool)
        aroot, qroot = geo.root_of(ak // SHIFT), geo.root_of(qk // SHIFT)
        for r in np.unique(qroot).tolist():
            if r < 0:
                continue
            m = aroot == r
            rk, rt = ak[m], at[m]
            if geo.disjoint(rk):
                continue
            mine = np.flatnonzero(qroot == r)
            if len(rt) and rt.max() - rt.min() <= self.window:
                # the launch's accesses of the root lie within one window: any access before a
                # read is still resident, and each tile's first access decides (a read here is
                # the first of its tile: L2Pass.settle's periods start once)
                o = np.lexsort((rt, rk))
                first = np.ones(len(o), bool)
                first[1:] = rk[o][1:] != rk[o][:-1]
                uk, ut = rk[o][first], rt[o][first]
                cov = covered_first(geo, uk, ut)
                out[mine] = cov[np.searchsorted(uk, qk[mine])]
                continue
            table = RunTable(geo, rk, rt)
            for i in mine.tolist():
                t = float(qt[i])
                out[i] = table.covers(geo, int(qk[i]), t - self.window, t, True)
        return out

    def _allocated(self, keys: np.ndarray, times: np.ndarray) -> np.ndarray:
        """Per read (tile `keys`, recording-pass `times`): whether this launch wrote the tile
        earlier (strictly) within the residency window. Write-allocate: the write left the tile's
        lines in L2, so the read hits however new the tile is to the chip L2 of earlier kernels."""
        out = np.zeros(len(keys), bool)
        wk, wt = self._writes()
        if not len(wk) or not len(keys):
            return out
        # reads and writes in one order by (tile, time), a write before a read at the same time
        # is not before it (writes sort after reads at equal times); each read takes the latest
        # write of its tile above it
        k = np.concatenate([keys, wk])
        t = np.concatenate([times, wt])
        isw = np.zeros(len(k), bool)
        isw[len(keys):] = True
        o = np.lexsort((isw, t, k))
        ks, ts, ws = k[o], t[o], isw[o]
        idx = np.where(ws, np.arange(len(o)), -1)
        np.maximum.accumulate(idx, out=idx)
        ok = idx >= 0
        j = np.where(ok, idx, 0)
        ok &= ks[j] == ks
        ok &= ts - ts[j] <= self.window
        ok &= ~ws
        out[o[~ws]] = ok[~ws]
        return out

    def _flush(self) -> None:
        k, t, b, j = self.log
        if k:
            self.chunks.append((np.array(k, np.int64), np.array(t, np.float64), np.array(b, np.int64), np.array(j, np.int64)))
            for x in self.log:
                x.clear()

    def settle(self, l2: L2Cache | None = None) -> None:
        """Mark the misses: per tile, the first access of each residency period. Accesses tied
        with it (within TIE cycles: blocks that run the same schedule reach the tile together)
        take turns paying, as the leading core of a group reading the same lines changes when
        the leader falls behind (the core that paid a miss waits for HBM, so at the group's next
        shared tile another core's request gets there first). The recording pass, where every
        read hits, keeps such a group tied for the whole launch; the turns stand in for that
        drift.

        Turns go round-robin per reader group: the tie groups with the same readers (the same
        multiset of blocks) in order of (time, tile key), the group's k-th tie paid by its
        (k mod size)-th reader in (time, block, ordinal) order. No public source fixes which of
        simultaneous readers' requests reaches L2 first; what the rule must give is each group's
        misses spread evenly over its readers, and it must not depend on the order the
        interpreter ran the units in, which is not the hardware's. So it uses simulated time,
        block index and tile key only. (It used to count the turns over the whole launch, tiles
        in order of their first row in the log: emitting a unit's ops elsewhere in the walk moved
        which cores paid, and a counter shared by the groups that read at the same times steps
        each group's payer by the number of such groups, e.g. by 3 over 3 readers: always the
        same one.) The ordinal (a read's rank among its block's reads) orders only reads of one
        tile by one block at the same time, which are interchangeable.
        Shapes: the log's rows (key int64, time float64 cycles, block int64, ordinal int64);
        vectorised over all rows (no Python loop per row: this runs for every launch)."""
        self._flush()
        if self.chunks:
            K, T, B, J = (np.concatenate(c) for c in zip(*self.chunks))
            self.chunks.clear()
            self.reads = (K, B, J)  # (none is written below)
            n = len(K)
            # rows by (tile, time, block, ordinal). (block, ordinal) is unique per read and the log
            # is normally in that order already (blocks run in turn, ordinals count up): then the
            # stable sort on (tile, time) alone gives the same order, for half the sorting
            if n < 2 or bool(np.all((B[1:] > B[:-1]) | ((B[1:] == B[:-1]) & (J[1:] > J[:-1])))):
                o = np.lexsort((T, K))
            else:
                o = np.lexsort((J, B, T, K))
            Ks, Ts = K[o], T[o]  # block and ordinal are needed only at the misses: taken through o there
            start = np.ones(n, bool)
            np.not_equal(Ks[1:], Ks[:-1], out=start[1:])
            tiles = np.flatnonzero(start)  # first row of each tile
            # a gap longer than the residency window starts a period (the unsorted times are no
            # longer needed: their memory takes the differences)
            start[1:] |= np.subtract(Ts[1:], Ts[:-1], out=T[1:]) > self.window
            st = np.flatnonzero(start)
            tid = np.searchsorted(tiles, st, "right") - 1  # tile number of each start
            # tie group of each start: the following rows of its tile within TIE of it. Times are
            # sorted per tile, so the group is a prefix of the rest of the tile: bisect its length
            # in [1, rows left in the tile] (one round per bit, for all starts at once)
            lo = np.ones(len(st), np.int64)
            hi = np.append(tiles[1:], n)[tid] - st
            t0 = Ts[st]
            for _ in range(int(hi.max(initial=0)).bit_length()):
                mid = (lo + hi + 1) >> 1
                ok = Ts[st + mid - 1] - t0 <= TIE
                lo = np.where(ok, mid, lo)
                hi = np.where(ok, hi, mid - 1)
            size = lo
            # round-robin per reader group: the tie groups of one set of readers (a multiset of
            # blocks, by a hash of its members) take turns in order of (time, tile key), each
            # group's k-th tie paid by its (k mod size)-th reader in (time, block, ordinal) order
            turn = np.zeros(len(st), np.int64)
            many = np.flatnonzero(size > 1)
            if len(many):
                h = B[o].astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)  # splitmix64 of each reader's block
                h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
                h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
                h ^= h >> np.uint64(31)
                cs = np.zeros(n + 1, np.uint64)
                np.cumsum(h, out=cs[1:])  # wraps modulo 2^64: a sum of a group's rows is a multiset hash
                s0 = st[many]
                g = cs[s0 + size[many]] - cs[s0]
                by = np.lexsort((Ks[s0], Ts[s0], g))
                gs = g[by]
                new = np.ones(len(by), bool)
                np.not_equal(gs[1:], gs[:-1], out=new[1:])
                idx = np.arange(len(by))
                first = np.maximum.accumulate(np.where(new, idx, 0))
                turn[many[by]] = idx - first
            c = o[st + turn % size]
            # a period whose tile this launch wrote, or whose elements other tiles brought in
            # (`l2`'s geometry), before its start has no miss (K: unsorted keys; Ts[st]: start times)
            t0 = Ts[st]
            keep = ~self._allocated(K[c], t0)
            if l2 is not None and keep.any():
                wk, wt = self._writes()
                keep[keep] = ~self._covered(l2, np.concatenate([Ks, wk]), np.concatenate([Ts, wt]), K[c][keep], t0[keep])
            c = c[keep]
            self.misses.update(zip(B[c].tolist(), J[c].tolist()))
        self.ordinal.clear()
        self.recording = False

    def shares(self, block: int) -> bool:
        """Whether another block has the same designated misses (ordinals) as `block`, or it has
        none (timed pass): only then can a block's timed loop execution be another's
        (xblock.py; a matmul's blocks pay each their own misses, FlashAttention's in groups)."""
        if self.patterns is None:
            self._designated(block, 0, 0)  # (builds by_block)
            pats: dict = {}
            for b, js in self.by_block.items():
                pats[tuple(js)] = pats.get(tuple(js), 0) + 1
            self.patterns = pats
        js = self.by_block.get(block)
        return not js or self.patterns[tuple(js)] > 1

    def _designated(self, block: int, j0: int, n: int) -> list[int]:
        """Indices i < n whose read (block, j0 + i) is a designated miss (ascending). Python
        lists and bisect: called for every replay with a handful of misses per block, where
        numpy's per-call overhead would dominate."""
        if self.by_block is None:
            per: dict[int, list[int]] = {}
            for b, j in self.misses:
                per.setdefault(b, []).append(j)
            self.by_block = {b: sorted(js) for b, js in per.items()}
        ords = self.by_block.get(block)
        if not ords:
            return []
        lo = bisect_left(ords, j0)
        hi = bisect_left(ords, j0 + n, lo)
        return [j - j0 for j in ords[lo:hi]]

    def first_change(self, l2: L2Cache, keys: np.ndarray, times: np.ndarray, block: int, t_start: float,
                     expect: list[bool], misses: list[int], seen: list | None = None) -> int:
        """Index of the first of the next len(keys) reads of `block` whose outcome (what `read`
        would answer) differs from expect[i % len(expect)] (a sampled period's outcomes,
        repeated; `misses`: the positions where it is False), len(keys) when none; without
        recording. Plain Python over the designated misses only: a replay has a handful of them,
        so no outcome array is built. `seen`: gets (index, key, time, outcome) of each designated
        read before the returned index (`read_many` records them without converting again)."""
        n, nr = len(keys), len(expect)
        if self.recording:  # every read hits
            return misses[0] if misses and misses[0] < n else n
        des = self._designated(block, self.ordinal.get(block, 0), n)
        first = n  # the first expected miss that is no designated miss (it hits)
        if misses:
            ds = set(des)
            for base in range(0, n, nr):
                for p in misses:
                    if base + p < n and base + p not in ds:
                        first = base + p
                        break
                if first < n:
                    break
        for i in des:
            if i >= first:
                break
            k, t, e = int(keys[i]), float(times[i]), expect[i % nr]
            if l2.resident_before(k, t, t_start) != e:
                return i
            if seen is not None:
                seen.append((i, k, t, e))
        return first

    def read_many(self, l2: L2Cache, keys: np.ndarray, times: np.ndarray, block: int, t_start: float, hit: np.ndarray,
                  nhit: int | None = None, seen: list | None = None) -> None:
        """Record the next len(keys) reads of `block`, whose outcomes (as `first_change` checked
        them) are `hit` (`nhit`: its number of hits, when known). `keys`, `times`: as for
        `L2Cache.write_many`. `seen`: what `first_change` gave for these reads (it returned at
        least len(keys))."""
        n = len(keys)
        j0 = self.ordinal.get(block, 0)
        self.ordinal[block] = j0 + n
        if self.recording:
            self._flush()
            self.chunks.append((keys, times, np.full(n, block, np.int64), np.arange(j0, j0 + n, dtype=np.int64)))
            return
        if self.checks is not None:
            if seen is not None:  # every designated read below n, as first_change converted it
                self.checks.extend([(k, t, h) for i, k, t, h in seen if i < n])
            else:
                for i in self._designated(block, j0, n):
                    self.checks.append((int(keys[i]), float(times[i]), bool(hit[i])))
        l2.write_many(keys, times)
        h = int(np.count_nonzero(hit)) if nhit is None else nhit
        l2.hits += h
        l2.misses += n - h

    def read(self, l2: L2Cache, key: int, now: float, block: int, t_start: float) -> bool:
        j = self.ordinal.get(block, 0)
        self.ordinal[block] = j + 1
        if self.recording:
            k, t, b, jj = self.log
            k.append(key)
            t.append(now)
            b.append(block)
            jj.append(j)
            return True
        if (block, j) in self.misses:
            hit = l2.resident_before(key, now, t_start)
            if self.checks is not None:
                self.checks.append((key, now, hit))
        else:
            hit = True
        l2.write(key, now)  # now resident (a read fills the line)
        if hit:
            l2.hits += 1
        else:
            l2.misses += 1
        return hit
