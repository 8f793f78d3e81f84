"""Per-core pipe clocks: one in-order clock per (unit, pipe), in cycles from the kernel start.

Model (S2/S5 semantics of Da Vinci pipes, reference §5):
* every pipe is in order; an op on pipe P of unit U starts at max(free[P], free[S of U]) — the
  scalar unit issues instructions in program order, so nothing starts before S reached it —
  occupies P for its `cycles`, and its result is visible `latency` cycles after that (`done`);
* set_flag(src→dst) happens when src has finished everything before it (max(free, done)); the
  src pipe stalls until then (in-order queue);
* wait_flag(src→dst) holds dst until the oldest unconsumed matching set (FIFO per (src, dst, id));
  a wait issued before its set holds dst (only) until the set runs (holds.py); a wait no later
  set releases is a deadlock;
* pipe_barrier(P) = free[P] := max(free[P], done[P]); "ALL" does it across every pipe of the core;
* a block starts on its core when the core's previous block has fully finished.

Pipe ids: unit·7 + index in PIPES. Single-unit kernels use unit 0; mixed kernels use
unit 0 = AIC and unit 1 = AIV (separate engines: the AIC's MTE2 is not the AIV's MTE2).
"""

from __future__ import annotations

from collections import deque

PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")
PIPE_INDEX = {p: i for i, p in enumerate(PIPES)}
NPIPES = len(PIPES)


class CoreState:
    """Clocks of one core (all its units) over a kernel launch."""

    __slots__ = ("index", "free", "done", "busy", "blocks")

    def __init__(self, index: int, nslots: int):
        self.index = index
        self.free = [0.0] * nslots  # time the pipe can start its next op
        self.done = [0.0] * nslots  # time every op issued so far on the pipe has completed
        self.busy = [0.0] * nslots  # summed occupancy
        self.blocks = 0

    def end(self) -> float:
        return max(max(self.free), max(self.done))

    def start_block(self) -> None:
        """A new block starts when everything of the previous one has finished."""
        t = self.end()
        n = len(self.free)
        self.free = [t] * n
        self.done = [t] * n
        self.blocks += 1


class FlagQueues:
    """FIFO of set times per flag key (resolved to small ints at compile time)."""

    __slots__ = ("queues",)

    def __init__(self, nkeys: int):
        self.queues = [deque() for _ in range(nkeys)]

    def reset(self) -> None:
        for q in self.queues:
            q.clear()
