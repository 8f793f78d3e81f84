"""Pipes held by a wait_flag whose matching set_flag comes later in program order.

Hardware (reference §5, S2/S5/S6): the scalar unit issues instructions in program order into one
in-order queue per pipe; `wait_flag(src, dst, id)` blocks only the dst pipe. So a wait issued
before its set is not a deadlock: the scalar unit goes on issuing, the src pipe runs up to the
set, and the set releases dst, which then runs what queued behind the wait.

The interpreter runs closures in program order. When a wait finds no pending set (compiler.py
`wait_flag`), `Holds.block` marks dst held: every later op on dst (tile op, set_flag, wait_flag,
pipe_barrier of that pipe) is queued with the registers it reads and the S clock at its issue
(`defer`) instead of running. When the matching set runs, `release` replays the held pipe's
queue in order, each op starting no earlier than its issue time; a replayed wait that finds no
set holds the pipe again with the rest of the queue behind it. Replays nest (a replayed set may
release another held pipe). Ops on other pipes keep running in program order meanwhile, so
timing, numerics (the held V op reads what the later MTE2 copy wrote) and the race check's
happens-before (set → wait) are those of the hardware.

Real deadlocks stay errors (AscendirError naming the kernel, block and ops):
* the block ends with a pipe still held: no matching set ran after the wait (or the kernel has
  none at all);
* a wait with no pending set whose dst is S: the scalar unit itself stalls, and every later set
  of its unit needs it to be issued (a set by another unit of a mix kernel, later in program
  order, is legal on the chip but not modelled: one program order cannot stop one unit's issue
  alone; an error that says so);
* pipe_barrier(ALL) while a pipe is held: the scalar unit waits for every pipe to drain, and the
  held one waits for a set the scalar unit would issue after the barrier.
Not modelled: the queue depth (32 per pipe, S5): the scalar unit would stall when a held pipe's
queue is full (the interpreter ignores queue depth everywhere).

Cost: nothing on the common path. Tile ops test one Frame flag (`slow`) that is set only while
the race checker runs or a pipe is held; steady-state extrapolation and loop memos (steady.py) are
off from the moment a pipe is held until the loop ends (`Frame.times_held`).
"""

from __future__ import annotations

from collections import deque

from ascendir.errors import AscendirError


class Holds:
    """Held pipes of the running block: pipe slot -> queue of (closure, register slots, their
    values, their address tags, S slot, S clock at issue); flag key -> (held pipe, wait text)."""

    __slots__ = ("F", "kernel", "lists", "waiting", "set_keys", "depth")

    def __init__(self, F, kernel: str, set_keys: set):
        self.F = F
        self.kernel = kernel
        self.lists: dict[int, deque] = {}
        self.waiting: dict[int, tuple[int, str]] = {}
        self.set_keys = set_keys  # flag keys some set_flag of the kernel sets (deadlock messages)
        self.depth = 0  # replays in progress: a replayed pipe's queue is out of `lists` meanwhile

    def _item(self, fn, slots, sid: int) -> tuple:
        F = self.F
        if not slots:  # a flag op or a barrier: no registers
            return (fn, slots, None, None, sid, F.core.free[sid])
        R, A = F.values, F.gm_tags
        return (fn, slots, [R[i] for i in slots], [A[i] for i in slots], sid, F.core.free[sid])

    def defer(self, pid: int, fn, slots, sid: int) -> None:
        """Queue `fn` (an op on held pipe `pid`, issued now) with the registers `slots` it reads."""
        self.lists[pid].append(self._item(fn, slots, sid))

    def defer_read(self, pid: int, fn, slots, vals: tuple, tags: tuple, sid: int) -> None:
        """`defer` for a caller that has read its registers already: `vals`, `tags` = the values
        and address tags of `slots` now."""
        self.lists[pid].append((fn, slots, vals, tags, sid, self.F.core.free[sid]))

    def block(self, pid: int, key: int, fn, sid: int, text: str) -> None:
        """Hold `pid` at wait `fn` (flag `key` has no pending set)."""
        self.lists[pid] = deque([self._item(fn, (), sid)])
        self.waiting[key] = (pid, text)
        self.F.times_held += 1

    def release(self, key: int) -> None:
        """A set of flag `key` ran: replay the pipe held on it, if any."""
        w = self.waiting.pop(key, None)
        if w is None:
            return
        F = self.F
        q = self.lists.pop(w[0])
        R, A = F.values, F.gm_tags
        self.depth += 1
        while q:
            fn, slots, vals, tags, sid, s = q.popleft()
            free = F.core.free
            s_now = free[sid]
            free[sid] = s  # the op was issued then: it starts no earlier (compiler.py tile ops)
            if vals is None:  # no registers to put back (`_item`)
                try:
                    fn()
                finally:
                    free[sid] = s_now
            else:
                now_v = [R[i] for i in slots]
                now_t = [A[i] for i in slots]
                for i, v, t in zip(slots, vals, tags):
                    R[i] = v
                    A[i] = t
                try:
                    fn()
                finally:
                    free[sid] = s_now
                    for i, v, t in zip(slots, now_v, now_t):
                        R[i] = v
                        A[i] = t
            again = self.lists.get(w[0])
            if again is not None:  # a replayed wait held the pipe again: the rest queues behind it
                # (the new queue holds that wait alone: put it in front of the rest rather than
                # copying the rest behind it, which made long held queues cost their square)
                q.extendleft(reversed(again))
                self.lists[w[0]] = q
                break
        self.depth -= 1
        if not self.lists and not self.depth:
            F.hold = None
            F.slow_path = F.races is not None

    def deadlock(self, block: int, why: str = "") -> AscendirError:
        """The error for a block that cannot finish: the first held pipe's wait."""
        key, (pid, text) = next(iter(self.waiting.items()))
        flag = text.split(" ", 1)[1]
        if why:
            reason = why
        elif key not in self.set_keys:
            reason = f"the kernel has no ascend.set_flag {flag}"
        else:
            reason = f"no matching ascend.set_flag {flag} runs after it"
        return AscendirError(f"deadlock in kernel @{self.kernel} (block {block}): {text} never returns: {reason}")
