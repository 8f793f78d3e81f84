"""Reuse of identical kernel launches in timing-only mode (exact, not an approximation).

A LLaMA-style model launches the same kernels once per layer: same body, same shapes, only the
GM buffers (weights, activations) differ. A launch's timeline depends on (a) the kernel program,
(b) which of its GM arguments alias (same root, offsets, strides) and (c) the L2 outcomes of its
reads. (a) and (b) form the memo key (the kernel printed without its name, plus the argument
aliasing pattern). For (c): inside one launch the recording pass decides who pays each miss
from relative times only, so it is the same for every launch with the same key; the only
outside influence is whether a designated miss finds its tile left in L2 by an earlier kernel
(`L2Cache.resident_before`), and whether a write rewrites a tile an earlier kernel left dirty in
L2 (`L2Cache.store`: the first write of each tile; later ones depend on the launch alone). The
memo keeps those checks (address, time from launch start, outcome); a later launch with the same
key re-evaluates them against the chip L2 and, if every outcome is the same, its result is the
stored one. What the launch leaves in the chip L2 is then written there, moved onto the new
arguments and in time: per tile its latest access (all a later kernel's `resident_before` asks of
`L2Cache.last`) and its latest write (all `L2Cache.dirty` keeps), and the L2 hit/miss counters
advance as they did. A key keeps up to `VARIANTS` stored launches (a layer's projection may find
its input resident or not, depending on what ran just before); any that passes its checks is
applied. When none does the launch runs, but its L2 recording pass does not: it depends on the
key alone, so its miss designation is kept too.

Addresses are kept per GM stream (l2.py: a buffer root with a tile shape and strides) as the
index of the first launch argument with that root, so a stored launch applies on any chip L2:
the memo (`LaunchMemo`) can serve several runs of compiled modules, e.g. `generate`'s decode
steps, which differ only in their attention kernels (the memo is bound to one target and one set
of run options). A stored launch that reaches a GM root no argument has is applied only in the
run that stored it.

A traced launch keeps its trace slices too (relative to the launch start, so a reuse repeats
them as they are). Not memoised: numerics mode (data must move), kernels that
allocate GM buffers themselves (fresh address roots every run). Numerics runs still share per
key the miss designation and the race check (same ops on the same relative addresses), unless
the kernel reads scalars from data (memref.load may steer its control flow).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.timing.timeline import CoreState

VARIANTS = 4  # stored launches per key (most recent kept)


@dataclass
class Tiles:
    """GM tiles of a stored launch, as arrays: `stream` (index into Memo.streams), element
    offset `off`, time from the launch start `rel` (cycles) and, for checks, the outcome `out`."""

    stream: np.ndarray
    off: np.ndarray
    rel: np.ndarray
    out: np.ndarray | None = None

    def keys(self, sids: np.ndarray) -> np.ndarray:
        """The tiles' keys (l2.py) with stream i's id `sids[i]`."""
        return sids[self.stream] * SHIFT + self.off


def _mask(rd, keys: np.ndarray) -> np.ndarray:
    """The is-read flags of a logged array of accesses `keys`: `rd` as a bool array of its shape
    (a replay logs one flag per access; broadcast only when given one for all)."""
    rd = np.asarray(rd, bool)
    return rd if rd.shape == keys.shape else np.broadcast_to(rd, keys.shape)


@dataclass
class Memo:
    """One stored launch: its cores' clocks and counters (relative to its start), the L2 checks
    a reuse must pass and what it leaves in the chip L2 (see the module docstring)."""

    cores: list[tuple[int, list[float], list[float], list[float], int]]  # index, free, done, busy, blocks
    acct: list[float]
    skipped: int
    hits: int
    misses: int
    streams: list[tuple]  # (argument index, tile shape, strides), or (None, root, shape, strides)
    checks: Tiles  # designated misses as the stored launch saw them (out: resident before)
    wchecks: Tiles  # its first write of each tile (out: a rewrite of a tile still dirty)
    touched: Tiles  # latest access (read or write) of each tile
    written: Tiles  # latest write of each tile
    owner: object | None = None  # the run (ModuleProg) whose GM roots `streams` name; None: any
    trace: tuple | None = None  # its trace slices (events, flows), relative to its start (state.KernelRecord); None untraced

    @classmethod
    def build(cls, cores: list, acct: list[float], skipped: int, hits: int, misses: int, tags: list, stream_of: list | None,
              t0: float, checks: list[tuple], wchecks: list[tuple], log: list[tuple], owner, trace: tuple | None) -> Memo:
        """A stored launch from what it logged: `checks` (key, chip time, outcome) of its
        designated misses, `wchecks` (key, chip time, rewrite) of its first write of each tile,
        `log` its GM accesses, (key, chip time, is read) or (keys, times, is read) arrays; keys
        of a chip L2 whose `L2Cache.stream_of` is `stream_of` (None: no L2 model), launch
        arguments' tags `tags`, started at chip time `t0`."""
        if stream_of is None:  # no L2 model: nothing to check or leave behind
            checks, wchecks, log = [], [], []
        roots: dict = {}
        for i, t in enumerate(tags):
            roots.setdefault(t[0], i)
        scalars = [a for a in log if not isinstance(a[0], np.ndarray)]
        arrays = [a for a in log if isinstance(a[0], np.ndarray)]
        k = np.concatenate([np.array([a[0] for a in scalars], np.int64)] + [a[0].astype(np.int64, copy=False) for a in arrays])
        t = np.concatenate([np.array([a[1] for a in scalars], np.float64)] + [a[1].astype(np.float64, copy=False) for a in arrays])
        rd = np.concatenate([np.array([a[2] for a in scalars], bool)] + [_mask(a[2], a[0]) for a in arrays])
        ck = np.array([c[0] for c in checks], np.int64)
        wk = np.array([c[0] for c in wchecks], np.int64)
        sids, inv = np.unique(np.concatenate([k, ck, wk]) // SHIFT, return_inverse=True)
        streams, foreign = [], False
        for s in sids.tolist():
            root, shape, strides = stream_of[s]
            r = roots.get(root)
            streams.append((r, shape, strides) if r is not None else (None, root, shape, strides))
            foreign |= r is None
        inv = inv.ravel()
        n, nc = len(k), len(ck)

        def tiles(sel: slice, keys: np.ndarray, times, out) -> Tiles:
            return Tiles(inv[sel], keys % SHIFT, np.asarray(times, np.float64) - t0,
                         None if out is None else np.asarray(out, bool))

        def latest(mask: np.ndarray | None) -> Tiles:
            kk, tt, ii = (k, t, inv[:n]) if mask is None else (k[mask], t[mask], inv[:n][mask])
            o = np.lexsort((tt, kk))
            kk, tt, ii = kk[o], tt[o], ii[o]
            end = np.ones(len(kk), bool)
            end[:-1] = kk[1:] != kk[:-1]
            return Tiles(ii[end], kk[end] % SHIFT, tt[end] - t0)

        return cls(cores, acct, skipped, hits, misses, streams,
                   tiles(slice(n, n + nc), ck, [c[1] for c in checks], [c[2] for c in checks]),
                   tiles(slice(n + nc, None), wk, [c[1] for c in wchecks], [c[2] for c in wchecks]),
                   latest(None), latest(~rd), owner if foreign else None, trace)

    def sids(self, tags: list, l2) -> np.ndarray:
        """Stream ids in chip L2 `l2` of the stored streams moved onto the arguments `tags` of a
        new launch (streams of a root no argument has stay where they are)."""
        return np.array([l2.sid(tags[s[0]][0], s[1], s[2]) if s[0] is not None else l2.sid(*s[1:]) for s in self.streams],
                        np.int64)

    def apply(self, tags: list, l2, t0: float) -> bool:
        """Apply this stored launch to a launch with arguments `tags` starting at chip time `t0`
        when every L2 check has its stored outcome (memo.py); False (L2 untouched) otherwise."""
        sids = self.sids(tags, l2)
        c = self.checks
        if len(c.off):
            if not np.array_equal(l2.resident_many(c.keys(sids), t0 + c.rel), c.out):
                return False
        w = self.wchecks
        if len(w.off):
            dirty = l2.dirty
            prev = np.array([dirty.get(x, np.nan) for x in w.keys(sids).tolist()], np.float64)
            if not np.array_equal(np.abs((t0 + w.rel) - prev) <= l2.window, w.out):
                return False
        l2.write_many(self.touched.keys(sids), t0 + self.touched.rel)
        l2.latest_writes(self.written.keys(sids), t0 + self.written.rel)
        l2.hits += self.hits
        l2.misses += self.misses
        return True


class Later:
    """A stored launch kept as what it logged until a launch with its key looks it up
    (`Launches.stored`): `Memo.build`'s arguments, with the chip L2's stream list for the L2
    (append-only: the ids the log names keep their streams) and a weak reference to the run that
    stored it (a strong one would tie the run to its own memo in a reference cycle). Most stored
    launches are never looked up (a kernel launched once per run, the last layer's), and building
    one sorts every GM access of the launch. The log's arrays are never written to after they are
    logged (the L2 keeps them the same way until its next commit)."""

    __slots__ = ("args", "owner", "trace")

    def __init__(self, cores: list, acct: list[float], skipped: int, hits: int, misses: int, tags: list, l2, t0: float,
                 checks: list[tuple], wchecks: list[tuple], log: list[tuple], owner, trace: tuple | None):
        self.args = (cores, acct, skipped, hits, misses, tags, None if l2 is None else l2.stream_of, t0, checks, wchecks, log)
        self.owner = weakref.ref(owner)
        self.trace = trace

    def build(self) -> Memo:
        """The `Memo` (owned by a run that has ended: by none that can look it up)."""
        owner = self.owner()
        return Memo.build(*self.args, owner if owner is not None else object(), self.trace)


@dataclass
class Launches:
    """What is kept per memo key: stored launches (timing-only; `Memo`, or `Later` until looked
    up), the recording pass's designated misses (l2.L2Pass.misses; None until a launch with GM
    reads ran) and whether a launch was checked for races (race.py) and found none."""

    variants: list
    misses: set | None = None
    race_free: bool = False

    def add(self, m: Memo | Later) -> None:
        self.variants.append(m)
        if len(self.variants) > VARIANTS:
            del self.variants[0]

    def stored(self) -> list[Memo]:
        """The stored launches, oldest first, each built (`Later`) on the first look-up."""
        v = self.variants
        for i, m in enumerate(v):
            if type(m) is Later:
                v[i] = m.build()
        return v


@dataclass
class LaunchMemo:
    """The launch memo of one or more runs: memo key -> `Launches`, and the kernel body ids the
    keys use (kernel._memo_id: equal for kernels whose bodies are equal, in any module). Shared by
    runs only on the same target with the same run options (`bind`)."""

    entries: dict = field(default_factory=dict)
    body_ids: dict = field(default_factory=dict)  # kernel op names -> [kernel op, its ops, its key or None, id]
    nbodies: int = 0
    context: tuple | None = None
    # the memo of the timing-only twins that time the numerics runs this memo serves (sim/kernel.py
    # `timing_view`): shared with them, so generate's steps reuse each other's timing walks too
    timing: LaunchMemo | None = None

    def bind(self, context: tuple) -> None:
        """Use this memo for a run with `context` (target, timing-only, trace, race check,
        speed-ups).

        Raises:
            ValueError: the memo served a run with another context (its launches would not
                apply)."""
        if self.context is None:
            self.context = context
        elif self.context != context:
            raise ValueError("a launch memo serves runs on one target with the same options")


def pattern(tags: list) -> tuple:
    """Aliasing pattern of the argument tags: per argument the index of the first argument with
    the same root, its element offset and strides (None for untagged)."""
    first: dict = {}
    out = []
    for i, t in enumerate(tags):
        if t is None:
            out.append(None)
            continue
        j = first.setdefault(t[0], i)
        out.append((j, t[1], t[2]))
    return tuple(out)


def snapshot_cores(cores: list[CoreState]) -> list[tuple]:
    return [(c.index, list(c.free), list(c.done), list(c.busy), c.blocks) for c in cores]


def restore_cores(saved: list[tuple]) -> list[CoreState]:
    out = []
    for index, free, done, busy, blocks in saved:
        c = CoreState(index, len(free))
        c.free, c.done, c.busy, c.blocks = list(free), list(done), list(busy), blocks
        out.append(c)
    return out
