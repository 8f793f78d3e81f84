"""Chip L2 cache model at tile granularity (L2 model "tile", the default on every target).

What it keys on: every GM buffer carries an address tag (root buffer, element offset, element
strides; `Compiler` propagates it through `ascend.view` and `memref.subview`), so a GM tile is
`(root, offset, shape, strides)`. A read of a tile hits when the same tile was read or written
(write-allocate) earlier in *simulated time* and is still resident; otherwise it misses and is
recorded. Blocks are simulated one after another, so accesses arrive out of time order; each tile
keeps the sorted list of its access times and a lookup asks for the latest one at or before now.

Who pays a miss: blocks are simulated one after another, so the first block simulated would see
every tile first and pay every miss while its peers, simulated later, hit. A kernel with GM reads
therefore runs twice: a recording pass (every read hits, no numerics, no trace) notes when each
block reads each tile; the misses go to the accesses that are first in that pass's time order (or
come more than the residency window after the previous access). The timed pass charges exactly
those accesses as misses, unless the tile was left in L2 by an earlier kernel.

Residency (INF, from [S1] l2_size and the chip HBM bandwidth [S25]): L2 content is replaced by
lines filled from HBM, at most `hbm_bytes_per_cycle` per cycle, so a line touched at t₀ survives
at least until t₀ + l2_bytes / hbm_bytes_per_cycle cycles (LRU). We use exactly that window: a
conservative (short) residency, which makes no reuse look better than the hardware.
Line size: tiles count as whole 512-B lines [S4][S5][S24] (`lines()`), which is what the hit-rate
statistic in the report uses; partial overlaps between differently shaped tiles count as misses
(pessimistic: the same bytes read with another tiling do not hit).

Hit cost: rate min(l2_read_rate [S1], l2_bw_over_hbm [S8] × HBM share) and hit latency 50 cycles
[S5] (cost.CostEnv); a miss costs the HBM path (DDR rate, 307-cycle read latency [S5]).

Writes (INF): the L2 is write-back with write-allocate, so a tile rewritten while its earlier
write is still resident (a per-core scratch workspace, e.g. FlashAttention's AIC <-> AIV
hand-off) never reaches HBM in between: that write goes at the path's L2 write rate (FixPipe
L0C -> L2 86 B/cycle [S4] = [S1] l2_write_rate) with the hit latency, and its bytes count as
"l2_write" (L2 bandwidth, not HBM, in the chip floor). The first write of a tile, and writes of
fresh tiles (every ordinary output), keep the DDR write rate and count against HBM.
"""

from __future__ import annotations

from bisect import bisect_right, insort

from ascendir.hardware.config import HardwareConfig


class L2Cache:
    """Tile-granular L2 of one chip over one `ModuleProg.run` (kernels share it: a consumer
    kernel that reads a producer's output soon enough hits)."""

    __slots__ = ("window", "touch", "line", "hits", "misses", "dirty")

    def __init__(self, target: HardwareConfig):
        mem = target.memory
        self.window = mem.l2_bytes / target.hbm_bytes_per_cycle  # cycles a line stays resident
        self.line = mem.l2_line_bytes
        self.touch: dict[tuple, list[float]] = {}
        self.dirty: dict[tuple, float] = {}  # tile -> time of its latest write
        self.hits = 0
        self.misses = 0

    def reset(self) -> None:
        self.touch.clear()
        self.dirty.clear()
        self.hits = self.misses = 0

    def resident_before(self, key: tuple, now: float, t_start: float) -> bool:
        """True when an access before `t_start` (an earlier kernel) left `key` resident at `now`."""
        ts = self.touch.get(key)
        if not ts:
            return False
        i = bisect_right(ts, min(now, t_start))
        while i > 0 and ts[i - 1] >= t_start:
            i -= 1
        return i > 0 and now - ts[i - 1] <= self.window

    def read(self, key: tuple, now: float) -> bool:
        """Record a read of tile `key` at chip time `now` (cycles); True when it hits."""
        ts = self.touch.get(key)
        if ts is None:
            self.touch[key] = [now]
            self.misses += 1
            return False
        i = bisect_right(ts, now)
        hit = i > 0 and now - ts[i - 1] <= self.window
        if i == len(ts):
            ts.append(now)
        else:
            insort(ts, now)
        if hit:
            self.hits += 1
        else:
            self.misses += 1
        return hit

    def write(self, key: tuple, now: float) -> None:
        """Record a write of tile `key` (write-allocate: a later read of it hits)."""
        ts = self.touch.get(key)
        if ts is None:
            self.touch[key] = [now]
        elif ts[-1] <= now:
            ts.append(now)
        else:
            insort(ts, now)


    def store(self, key: tuple, now: float) -> bool:
        """Record a write of tile `key` by a kernel (write-allocate, as `write`); True when it
        rewrites the tile while an earlier write of it is still in L2 (|Δt| within the residency
        window): the write-back L2 absorbs it and the path runs at its L2 write rate."""
        self.write(key, now)
        return _rewrite(self.dirty, key, now, self.window)


def _rewrite(dirty: dict[tuple, float], key: tuple, now: float, window: float) -> bool:
    """Note a write of `key` at `now` in `dirty`; whether an earlier one is within `window`.
    (Blocks are simulated one after another, so `now` may precede the stored time; a scratch tile
    is per core, so in practice times per key only grow.)"""
    prev = dirty.get(key)
    if prev is None or now > prev:
        dirty[key] = now
    return prev is not None and abs(now - prev) <= window


def tile_key(tag: tuple, shape: tuple[int, ...]) -> tuple:
    """Key of the GM tile a view with address tag `tag` = (root, offset, strides) and `shape`
    covers."""
    return (tag[0], tag[1], shape, tag[2])


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

    Recording: `read` notes (time, block, ordinal of the read within its block) per tile and
    answers "hit". `settle(window)` marks the misses. Timed: `read` answers from those marks (and
    the chip L2 left by earlier kernels) and records the access in the chip L2.
    """

    __slots__ = ("recording", "log", "misses", "ordinal", "window", "checks", "dirty")

    def __init__(self, window: float):
        self.recording = True
        self.window = window
        self.log: dict[tuple, list] = {}
        self.misses: set[tuple[int, int]] = set()
        self.ordinal: dict[int, int] = {}
        self.checks: list | None = None  # (key, now, outcome) of designated misses, for memo.py
        self.dirty: dict[tuple, float] = {}  # the recording pass's own write times (see store)

    @classmethod
    def settled(cls, window: float, misses: set[tuple[int, int]]) -> L2Pass:
        """A pass in the timed state with a designation `misses` kept from an identical launch
        (memo.py): the recording pass would make the same one."""
        p = cls(window)
        p.misses = misses
        p.recording = False
        return p

    def store(self, key: tuple, now: float) -> bool:
        """A write in the recording pass (the chip L2 is not touched): whether it rewrites a
        tile still dirty, as `L2Cache.store` will answer in the timed pass."""
        return _rewrite(self.dirty, key, now, self.window)

    def settle(self) -> None:
        """Mark the misses: per tile, the first access of each residency period. Accesses tied
        with it (within TIE cycles: blocks that run the same schedule reach the tile together)
        take turns paying, round-robin over the launch, as the leading core of a group reading
        the same lines changes when the leader falls behind."""
        turn = 0
        for accesses in self.log.values():
            accesses.sort()
            last = None
            n = len(accesses)
            for i, (t, b, j) in enumerate(accesses):
                if last is None or t - last > self.window:
                    k = i
                    while k + 1 < n and accesses[k + 1][0] - t <= TIE:
                        k += 1
                    _, pb, pj = accesses[i + turn % (k - i + 1)]
                    self.misses.add((pb, pj))
                    turn += 1
                last = t
        self.log.clear()
        self.ordinal.clear()
        self.recording = False

    def peek(self, l2: L2Cache, key: tuple, now: float, block: int, ahead: int, t_start: float) -> bool:
        """What `read` would answer for the read `ahead` reads after the block's next one,
        without recording anything (steady.py checks replayed reads before committing them)."""
        if self.recording:
            return True
        if (block, self.ordinal.get(block, 0) + ahead) in self.misses:
            return l2.resident_before(key, now, t_start)
        return True

    def read(self, l2: L2Cache, key: tuple, now: float, block: int, t_start: float) -> bool:
        j = self.ordinal.get(block, 0)
        self.ordinal[block] = j + 1
        if self.recording:
            acc = self.log.get(key)
            if acc is None:
                self.log[key] = [(now, block, j)]
            else:
                acc.append((now, block, j))
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
