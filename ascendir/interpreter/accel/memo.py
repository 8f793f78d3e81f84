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
stored one. Its GM accesses (every read and write, at its
time, addresses mapped to the new arguments; writes also as dirty) are then written into the
chip L2 so later kernels see them, and the L2 hit/miss counters advance as they did. A key keeps up to `VARIANTS` stored
launches (a layer's projection may find its input resident or not, depending on what ran just
before); any that passes its checks is applied. When none does the launch runs, but its L2
recording pass does not: it depends on the key alone, so its miss designation is kept too.

A traced launch keeps its trace slices too (relative to the launch start, so a reuse repeats
them as they are). Not memoised: numerics mode (data must move), kernels that
allocate GM buffers themselves (fresh address roots every run). Numerics runs still share per
key the miss designation and the race check (same ops on the same relative addresses), unless
the kernel reads scalars from data (memref.load may steer its control flow).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.timing.timeline import CoreState

VARIANTS = 4  # stored launches per key (most recent kept)


@dataclass
class Memo:
    cores: list[tuple[int, list[float], list[float], list[float], int]]  # index, free, done, busy, blocks
    acct: list[float]
    skipped: int
    checks: list[tuple]  # (key, chip time, outcome) as the stored launch saw them
    wchecks: list[tuple]  # (key, chip time, rewrite) of its first explicit write of each tile
    accesses: list[tuple]  # (key, chip time, is read), or (keys, times, is read) arrays
    hits: int
    misses: int
    roots: dict  # address root -> index of the first argument with it, in the stored launch
    t0: float  # chip time the stored launch started
    trace: tuple | None = None  # its trace slices (events, flows), relative to its start (state.KernelRecord); None untraced

    def remap(self, key: int, tags: list, l2) -> int:
        """A stored tile key (l2.py: stream id * SHIFT + offset) moved onto the arguments `tags`
        of a new launch (only keys in argument buffers change; keys are converted when used, not
        when stored)."""
        sid, off = divmod(key, SHIFT)
        root, shape, strides = l2.stream_of[sid]
        r = self.roots.get(root)
        return key if r is None else l2.sid(tags[r][0], shape, strides) * SHIFT + off

    def remap_many(self, keys: np.ndarray, tags: list, l2) -> np.ndarray:
        """`remap` of an array of keys."""
        sids = keys // SHIFT
        uniq, inv = np.unique(sids, return_inverse=True)
        new = np.array([self.remap(int(s) * SHIFT, tags, l2) // SHIFT for s in uniq.tolist()], np.int64)
        return new[inv.ravel()] * SHIFT + keys % SHIFT


@dataclass
class Launches:
    """What is kept per memo key: stored launches (timing-only), the recording pass's designated
    misses (l2.L2Pass.misses; None until a launch with GM reads ran) and whether a launch was
    checked for races (race.py) and found none."""

    variants: list[Memo]
    misses: set | None = None
    race_free: bool = False

    def add(self, m: Memo) -> None:
        self.variants.append(m)
        if len(self.variants) > VARIANTS:
            del self.variants[0]


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
