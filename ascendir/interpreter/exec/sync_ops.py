"""Kernel-only ops: ascend.block_idx, set_flag / wait_flag (a wait before its set holds the
pipe: timing/holds.py) and pipe_barrier."""

from __future__ import annotations

import functools
import weakref
from functools import partial

from ascendir.dialects import ascend
from ascendir.dialects.ascend import AIC_PIPES, AIV_PIPES, Pipe
from ascendir.errors import AscendirError
from ascendir.interpreter.check.race import BARRIER, sync_event
from ascendir.interpreter.timing.holds import Holds
from ascendir.interpreter.timing.timeline import NPIPES, PIPE_INDEX
from ascendir.interpreter.exec.common import Closure, KernelInfo

class SyncOps:
    """Compiler part: block index and synchronisation (mixed into compiler.Compiler)."""

    flag_fns: tuple | None = None  # the data walk's (set, wait) functions (`data_flag_fns`), once made
    data_flags: dict | None = None  # (op class, flag ends) -> its `data_flag`, once asked
    timed_flags: dict | None = None  # (op class, flag ends) -> its timed closure (`_timed_flag`), once made

    # -- kernel-only ops --------------------------------------------------------------------
    def block_idx(self, op: ascend.BlockIdxOp) -> Closure:
        R, F = self.F.values, self.F
        out = self.slot(op.result)

        def run() -> None:
            R[out] = F.block

        return run

    def _flag_slots(self, op: ascend.FlagOp) -> tuple[int, int, int]:
        return flag_slots(self.k, op)

    def _timed_flag(self, op: ascend.FlagOp, make) -> Closure:
        """The timed closure of flag op `op`, `make(op)` once per compile for each op class and
        flag ends (KernelInfo.flag_ends: source and destination pipe slots, event): the closure
        reads nothing of its op but those, and queues itself on a held pipe as any op would, so
        the flags of one kind and ends share it (an unrolled pipeline repeats a few dozen flags
        ~1,400 times: FlashAttention's), as the data walk's share their arguments (`data_flag`)."""
        if self.timed_flags is None:
            self.timed_flags = {}
        key = (type(op), self.k.flag_ends[op])
        got = self.timed_flags.get(key)
        if got is None:
            got = self.timed_flags[key] = make(op)
        return got

    def set_flag(self, op: ascend.SetFlagOp) -> Closure:
        if self.k.data_only:  # (data_codegen.py writes them inline: this serves other callers)
            return partial(self.data_flag_fns()[0], *self.data_flag(op)[1])
        return self._timed_flag(op, self._timed_set)

    def _timed_set(self, op: ascend.SetFlagOp) -> Closure:
        F = self.F
        src, dst, key = self._flag_slots(op)
        self.k.set_keys.add(key)
        s_id = (src // NPIPES) * NPIPES
        event = op.event.value.data
        ev = sync_event("set", src, key)  # its race-check step (race.py)

        def run() -> None:
            if not F.slow_path and F.trace is None:  # no race check, no held pipe, no trace (hot)
                core = F.core
                free = core.free
                t = free[src]
                d = core.done[src]
                if d > t:
                    t = d
                s = free[s_id]
                if s >= t:
                    t = s
                    F.s_clock_decisions += 1
                free[src] = t
                F.flags.queues[key].append(t)
                return
            slow = F.slow_path
            if slow and F.hold is not None and src in F.hold.lists:
                F.hold.defer(src, me(), (), s_id)
                return
            core = F.core
            free = core.free
            t = t0 = free[src]
            if core.done[src] > t:
                t = core.done[src]
            if free[s_id] >= t:
                t = free[s_id]
                F.s_clock_decisions += 1
            if F.trace is not None and free[s_id] > t0:  # the set is issued when src and S reached it
                t0 = free[s_id]
            free[src] = t
            F.flags.queues[key].append(t)
            if F.races is not None:
                F.races.set(ev)
            if F.trace is not None:
                fid = next(F.flow_ids)
                F.flow_queues.queues[key].append(fid)
                # src holds the set from its issue until everything before it completed
                F.flows.append(("s", core.index, src, dst, event, t0, t, fid))
            if slow and F.hold is not None:
                F.hold.release(key)  # a pipe held on this flag runs what queued behind its wait

        # `run` queues itself on a held pipe (holds.py) through a weak reference: a closure holding
        # itself is a reference cycle, left to the cyclic collector (alive while it runs: its
        # caller holds it)
        me = weakref.ref(run)
        return run

    def wait_flag(self, op: ascend.WaitFlagOp) -> Closure:
        if self.k.data_only:
            return partial(self.data_flag_fns()[1], *self.data_flag(op)[1])
        return self._timed_flag(op, self._timed_wait)

    def _timed_wait(self, op: ascend.WaitFlagOp) -> Closure:
        F = self.F
        src, dst, key = self._flag_slots(op)
        kname = self.k.name
        event = op.event.value.data
        text = _wait_text(op.src.data, op.dst.data, event)
        s_id = (dst // NPIPES) * NPIPES
        set_keys, flag_keys = self.k.set_keys, self.k.flag_keys
        ev = sync_event("wait", dst, key)  # its race-check step (race.py)

        def run() -> None:
            q = F.flags.queues[key]
            if q and not F.slow_path and F.trace is None:  # a pending set, no race check, no held pipe, no trace (hot)
                t = q.popleft()
                free = F.core.free
                fd = free[dst]
                if t > fd:
                    free[dst] = t
                elif fd <= free[s_id]:
                    F.s_clock_decisions += 1  # a pipe at (or behind) its S clock keeps that value
                return
            if F.slow_path and F.hold is not None and dst in F.hold.lists:
                F.hold.defer(dst, me(), (), s_id)
                return
            if not q:
                if dst == s_id:  # the scalar unit stalls: it would issue every later set
                    raise _scalar_stall(kname, F.block, text, key, set_keys, flag_keys)
                # the set may come later in program order: only dst waits for it (holds.py)
                if F.hold is None:
                    F.hold = Holds(F, kname, set_keys)
                    F.slow_path = True
                F.hold.block(dst, key, me(), s_id, text)
                return
            t = q.popleft()
            core = F.core
            free = core.free
            if F.trace is not None:  # the wait is issued when dst and the S unit reached it
                w0 = free[dst] if free[dst] > free[s_id] else free[s_id]
            if t > free[dst]:
                free[dst] = t
            elif free[dst] <= free[(dst // NPIPES) * NPIPES]:
                F.s_clock_decisions += 1  # a pipe at (or behind) its S clock keeps that value
            if F.races is not None:
                F.races.wait(ev if dst != s_id or F.hold is None else _s_wait(F, ev))
            if F.trace is not None:
                # dst is blocked from the wait's issue until the set (zero length if it came first)
                F.flows.append(("f", core.index, dst, src, event, w0, free[dst] if free[dst] > w0 else w0,
                                F.flow_queues.queues[key].popleft()))

        me = weakref.ref(run)
        return run

    # -- the data walk's (KernelInfo.data_only) ----------------------------------------------
    # Its tile ops move data and touch no clock, scalar ops charge nothing and nothing reads the
    # core's clocks afterwards (sim/kernel.py `_data_walk`): flags and barriers there only order
    # data, through held pipes (holds.py), and the race check's clocks (race.py). Its pending
    # sets carry no time (each is 0.0): a queue is a count, which data_codegen.py's inline fast
    # path moves without calling these.
    def data_flag(self, op: ascend.FlagOp) -> tuple[bool, tuple]:
        """(is a set, the arguments of `data_flag_fns`' function for it) of flag op `op` in the
        data walk: (src slot, key, S slot, race-check step) for a set_flag, (dst slot, key, S
        slot, deadlock text, race-check step) for a wait_flag. One object per kind and ends (an
        unrolled pipeline repeats a few dozen flags ~1,400 times: FlashAttention's)."""
        t, ends = type(op), self.k.flag_ends[op]
        if self.data_flags is None:
            self.data_flags = {}
        got = self.data_flags.get((t, ends))
        if got is None:
            src, dst, key = self._flag_slots(op)
            if isinstance(op, ascend.SetFlagOp):
                self.k.set_keys.add(key)
                got = True, (src, key, (src // NPIPES) * NPIPES, sync_event("set", src, key))
            else:
                text = _wait_text(op.src.data, op.dst.data, op.event.value.data)
                got = False, (dst, key, (dst // NPIPES) * NPIPES, text, sync_event("wait", dst, key))
            self.data_flags[(t, ends)] = got
        return got

    def data_flag_fns(self) -> tuple:
        """(set, wait): the data walk's set_flag and wait_flag as functions of their `data_flag`
        arguments, made once per compile (kept in `flag_fns`).

        set: a pending set of its key, its race-check step, and the release of a pipe held on it;
        queued itself while its src pipe is held. wait: takes the oldest pending set of its key
        (its race-check step: the set's clock joins dst's), or holds dst until one comes
        (holds.py), or raises the scalar-unit deadlock; queued itself while dst is held."""
        if self.flag_fns is not None:
            return self.flag_fns
        F, kname, set_keys, flag_keys = self.F, self.k.name, self.k.set_keys, self.k.flag_keys

        def set_run(src: int, key: int, s_id: int, ev: tuple) -> None:
            h = F.hold
            if h is not None and src in h.lists:
                h.defer(src, partial(me_set(), src, key, s_id, ev), (), s_id)
                return
            F.flags.queues[key].append(0.0)
            if F.races is not None:
                F.races.set(ev)
            if h is not None:
                h.release(key)  # a pipe held on this flag runs what queued behind its wait

        def wait_run(dst: int, key: int, s_id: int, text: str, ev: tuple) -> None:
            h = F.hold
            if h is not None and dst in h.lists:
                h.defer(dst, partial(me_wait(), dst, key, s_id, text, ev), (), s_id)
                return
            q = F.flags.queues[key]
            if not q:
                if dst == s_id:
                    raise _scalar_stall(kname, F.block, text, key, set_keys, flag_keys)
                if h is None:
                    h = F.hold = Holds(F, kname, set_keys)
                    F.slow_path = True
                h.block(dst, key, partial(me_wait(), dst, key, s_id, text, ev), s_id, text)
                return
            q.popleft()
            if F.races is not None:
                F.races.wait(ev if dst != s_id or h is None else _s_wait(F, ev))

        # each queues itself on a held pipe (holds.py) through a weak reference: a function naming
        # itself is a reference cycle, left to the cyclic collector (alive while it runs: the
        # generated code and this compiler hold it)
        me_set, me_wait = weakref.ref(set_run), weakref.ref(wait_run)
        self.flag_fns = (set_run, wait_run)
        return self.flag_fns

    def barrier(self, op: ascend.PipeBarrierOp) -> Closure | None:
        F = self.F
        p = op.pipe.data
        if p == "ALL" and self.k.data_only:

            def data_all() -> None:
                if F.hold is not None:
                    raise F.hold.deadlock(F.block, _BARRIER_HOLDS)
                if F.races is not None:
                    F.races.barrier_all(BARRIER)

            return data_all
        if p == "ALL":

            def run_all() -> None:
                if F.hold is not None:  # the scalar unit waits for a pipe held on a set after the barrier
                    raise F.hold.deadlock(F.block, _BARRIER_HOLDS)
                core = F.core
                t = core.end()
                core.free = [t] * len(core.free)
                F.s_clock_decisions += 1
                if F.races is not None:
                    F.races.barrier_all(BARRIER)

            return run_all
        if p not in PIPE_INDEX:
            raise AscendirError(f"ascend.pipe_barrier in kernel @{self.k.name}: unknown pipe {p}")
        if self.k.data_only:  # it orders its own pipe's clock only (race.py: program order already does)
            return None
        ids = [u * NPIPES + PIPE_INDEX[p] for u in range(self.k.nunits)]
        if self.k.nunits > 1 and p in AIC_PIPES:
            ids = ids[:1]
        elif self.k.nunits > 1 and p in AIV_PIPES:
            ids = ids[1:]

        def one(i: int) -> None:
            core = F.core
            free, done = core.free, core.done
            s = free[(i // NPIPES) * NPIPES]
            t = max(free[i], done[i], s)
            if s >= t:
                F.s_clock_decisions += 1
            free[i] = t

        per = {i: (lambda i=i: one(i)) for i in ids}

        def run() -> None:
            h = F.hold
            if h is not None:  # a held pipe queues its barrier (holds.py)
                for i in ids:
                    if i in h.lists:
                        h.defer(i, per[i], (), (i // NPIPES) * NPIPES)
                    else:
                        one(i)
                return
            core = F.core
            free, done = core.free, core.done
            for i in ids:
                s = free[(i // NPIPES) * NPIPES]
                t = max(free[i], done[i], s)
                if s >= t:
                    F.s_clock_decisions += 1
                free[i] = t

        return run


def _s_wait(F, ev: tuple) -> tuple:
    """The race-check step of wait `ev` on the S slot ev[2] while pipes are held (F.hold): the
    held pipes of its unit (their queued ops were issued before it) inherit its clock only when
    their queue reaches it, at a "join" step queued there (check/race.py)."""
    s = ev[2]
    held = tuple([w for w in range(s, s + NPIPES) if w in F.hold.lists])
    if not held:
        return ev
    for w in held:
        F.hold.defer(w, partial(_join, F, sync_event("join", w)), (), s)
    return sync_event("wait", s, ev[3], held)


def _join(F, ev: tuple) -> None:
    if F.races is not None:
        F.races.set(ev)


_BARRIER_HOLDS = ("ascend.pipe_barrier ALL waits for the pipe it holds, and the scalar unit would issue the "
                  "matching set only after the barrier")


def _scalar_stall(kname: str, block: int, text: str, key: int, set_keys: set, flag_keys: dict) -> AscendirError:
    """The error of a wait_flag (`text`, flag `key`) whose dst is S and which finds no pending
    set (KernelInfo.set_keys, flag_keys): a deadlock when the set is its own unit's (the scalar
    unit stalls, and it would issue every later set), or has none; a set of another unit of a mix
    kernel later in program order is legal on the chip (that unit issues on), but the interpreter
    runs the units in one program order and cannot stop one unit's issue there."""
    flag = text.split(" ", 1)[1]
    src, dst = next(e[:2] for e, v in flag_keys.items() if v == key)
    if key not in set_keys:
        why = f"the kernel has no ascend.set_flag {flag}"
    elif src // NPIPES != dst // NPIPES:
        return AscendirError(f"unsupported in kernel @{kname} (block {block}): {text} waits on S for a set of "
                             "another unit that comes later in program order: the interpreter runs the units of a "
                             "mix kernel in one program order and cannot stop one unit's issue; write the set first")
    else:
        why = "it stalls the scalar unit, which issues in program order, so no later set can be issued"
    return AscendirError(f"deadlock in kernel @{kname} (block {block}): {text} has no earlier matching "
                         f"ascend.set_flag {flag}: {why}")


@functools.cache
def _wait_text(src: Pipe, dst: Pipe, event: int) -> str:
    """How deadlock messages name a wait_flag from pipe `src` to `dst` on `event`, per triple:
    formatting the pipes (enums) was most of compiling a wait_flag, a kernel has hundreds."""
    return f"ascend.wait_flag {src} -> {dst}, {event}"


def flag_slots(k: KernelInfo, op: ascend.FlagOp) -> tuple[int, int, int]:
    """(source pipe slot, destination pipe slot, flag key) of flag op `op` in kernel `k`: the
    slots `k.flag_ends` holds for it (its units' pipes); the key (its queue) numbered in first-asked
    order, per (source, destination, event)."""
    src, dst, event = k.flag_ends[op]
    return src, dst, k.flag_keys.setdefault((src, dst, event), len(k.flag_keys))
