"""The loop driver of the steady-state speed-ups: runs a timing-only loop, jumping over whole
periods once steady (steady.SteadyLoop), applying stored whole executions (loop_memo.LoopMemo,
with remapped addresses: remap.py) and executions of earlier blocks (xblock.BlockMemo). See
steady.py for the conditions; `Accel` switches each part."""

from __future__ import annotations

from xdsl.ir import Operation

from ascendir.interpreter.accel.loop_memo import LoopMemo
from ascendir.interpreter.accel.remap import Remap
from ascendir.interpreter.accel.steady import MIN_TRIPS, SteadyLoop, step_test
from ascendir.interpreter.accel.xblock import BlockMemo, Track
from ascendir.dialects.ir_checks import loop_range
from ascendir.interpreter.exec.common import Closure
from ascendir.interpreter.exec.scalar_codegen import charge_lines, generated
from ascendir.interpreter.state import EXTRAPOLATED, FLOPS
from ascendir.interpreter.timing.timeline import NPIPES, PIPES


class SteadyFor:
    """Compiler part: the accelerated scf.for (mixed into compiler.Compiler)."""

    def _steady_for(self, lb: int, ub: int, st: int, iv: int, body: list[Closure], charge, checked: list[Operation], memo: LoopMemo,
                    gen: Remap | None = None, bm: BlockMemo | None = None, use_memo: bool = True, steps: int | None = None,
                    fixed: range | None = None, s_ids: list[int] | None = None, bounds=None) -> Closure:
        """A timing-only loop that may be extrapolated once steady (steady.py). `checked`: the
        loop-level scalar ops steady.py re-evaluates for the iterations it skips; `memo`: stored
        executions of the whole loop (loop_memo.LoopMemo), applied when the loop is entered again
        from the same relative state (next tile of an outer loop, another block); `gen`: its
        address values that are not affine in the iv (remap.py), None when it has none; `bm`:
        its whole executions kept for the next blocks (xblock.py), None when it may not;
        `use_memo`: `memo` is entered (Accel.loop_memo); `steps`: how many of `checked` (the
        first) the step tests compare (all when None; `bm`'s hoisted values follow them); `fixed`:
        the loop's iterations when its bounds are constants, else None; `s_ids`: the S pipes
        `charge` charges (KernelInfo.s_ids), None when not known; `bounds`: scf_ops.in_bounds's
        test of an iteration's GM subviews, None when none moves."""
        step = iteration(self.F, body, charge, s_ids, self.k.alu if self.k is not None else 0.0)
        if fixed is not None and len(fixed) < MIN_TRIPS and bm is None:
            # always too short to sample, and kept for no block (`LoopDriver.run`): every run of
            # it runs every iteration, as the driver would, without its per-run tests
            R = self.F.values

            def plain() -> None:
                for i in fixed:
                    R[iv] = i
                    step()

            return plain
        values = None
        if checked:
            # the checked values are pure functions of the iv and these outside values
            inputs = sorted({self.slot(v) for o in checked for v in o.operands} - {iv} - {self.slot(o.results[0]) for o in checked})
            values = CheckedValues(self.checked_values(iv, checked), inputs, self.F.values, len(checked) if steps is None else steps, gen)
        return LoopDriver(self.F, (lb, ub, st, iv), step, values, memo, gen, bm, use_memo, bounds if values is not None else None).run


UNROLL = 12  # a body of up to this many closures is called one by one by generated code (`calls`)


def calls(body: list[Closure], name: str, args: dict) -> list[str]:
    """Lines of generated code calling the closures of `body` in order: one call each (the
    closures added to `args` as name0, name1, ...), or past UNROLL a loop over `body` (added as
    `name`). (A loop over a list costs a few bytecodes per closure that one call each does not.)"""
    if len(body) > UNROLL:
        args[name] = body
        return [f"for _f in {name}:", "    _f()"]
    for i, f in enumerate(body):
        args[f"{name}{i}"] = f
    return [f"{name}{i}()" for i in range(len(body))] or ["pass"]


def iteration(F, body: list[Closure], charge, s_ids: list[int] | None, alu: float) -> Closure:
    """One iteration of a timed loop's body, as generated code: its closures called in order
    (`calls`), then the loop's scalar charge (`charge`; written inline on the S pipes `s_ids`, in
    its order, when they are known). Its code is shared per body length and S pipes."""
    args: dict = {"F": F, "alu": alu, "charge": charge}
    lines = calls(body, "f", args)
    if charge is not None and s_ids is not None:
        lines += charge_lines(s_ids)
    elif charge is not None:
        lines.append("charge()")
    make = generated(f"def make({', '.join(args)}):\n    def step() -> None:", ["    " + x for x in lines] + ["return step"], {}, "make")
    return make(**args)


class CheckedValues:
    """The checked values of a loop's iterations (SteadyLoop.tops), memoised per the values they
    depend on (the range and the outside inputs) across executions of the loop
    (steady.SteadyLoop.vals), and the step tests that compare them (`step_test`: every value, or
    the control values only where remap.py moves the addresses)."""

    __slots__ = ("at", "inputs", "R", "known", "same_all", "same_ctl")

    def __init__(self, at, inputs: list[int], R: list, n: int, gen: Remap | None):
        self.at = at  # iv value -> the checked values of that iteration (generated code)
        self.inputs, self.R = inputs, R
        self.known: dict[tuple, dict] = {}
        self.same_all = step_test(list(range(n)))
        self.same_ctl = step_test(gen.control_pos) if gen is not None else None

    def table(self, rng: range) -> dict | None:
        """The memo of the checked values for this range and these inputs (None when 64 other
        ones are kept already)."""
        R = self.R
        ik = (rng.start, rng.step, *[R[x] for x in self.inputs])
        vals = self.known.get(ik)
        if vals is None and len(self.known) < 64:
            vals = self.known[ik] = {}
        return vals

    def of(self, vals: dict | None, rng: range):
        """i -> the checked values of iteration i, kept in `vals` (SteadyLoop.value_of's)."""
        at = self.at
        if vals is None:
            return lambda i: at(rng[i])

        def value_of(i: int) -> tuple:
            v = vals.get(i)
            if v is None:
                v = vals[i] = at(rng[i])
            return v

        return value_of


class LoopDriver:
    """One compiled timing-only scf.for and its speed-ups; `run` executes it once."""

    __slots__ = ("F", "R", "bounds", "step", "values", "memo", "gen", "bm", "use_memo", "in_bounds")

    def __init__(self, F, bounds: tuple[int, int, int, int], step: Closure, values: CheckedValues | None, memo: LoopMemo,
                 gen: Remap | None, bm: BlockMemo | None, use_memo: bool, in_bounds=None):
        self.F, self.R = F, F.values
        self.bounds = bounds  # slots of the lower bound, upper bound, step and iv
        self.step = step  # one iteration of the body, with its charge (`iteration`)
        self.values = values  # None: the loop has no checked values
        self.memo, self.gen, self.bm, self.use_memo = memo, gen, bm, use_memo
        self.in_bounds = in_bounds  # (iv value, checked values) -> its moving GM subviews in bounds (scf_ops.in_bounds)

    def plain(self, rng: range) -> None:
        """Run the iterations of `rng`, every op."""
        R, iv, step = self.R, self.bounds[3], self.step
        for i in rng:
            R[iv] = i
            step()

    def run(self) -> None:
        F, R = self.F, self.R
        lb, ub, st, _ = self.bounds
        rng = loop_range(R[lb], R[ub], R[st])
        n = len(rng)
        # (a short loop kept for the next blocks is worth its sampling: it is run once per key)
        short = n < MIN_TRIPS and (self.bm is None or F.gm_log is not None or F.l2_pass is None or not F.l2_pass.recording)
        if (short and F.may_extrapolate and F.hold is None and self.bm is not None and F.gm_log is None and F.l2_pass is not None
                and F.trace is None and F.l2_pass.shares(F.block)):
            self._short_timed(rng, n)  # (a timed pass: the loop runs plainly, or as an earlier block's)
            return
        if short or not F.may_extrapolate or F.hold is not None:
            self.plain(rng)  # a held pipe (holds.py) is state the steady-state jump does not see
            return
        mark = len(F.trace) if F.trace is not None else 0  # this execution's slices start here
        before = self._clocks()
        entered = self._enter(rng, n)
        if entered is None:  # a stored execution was applied
            self._extrapolated(before, n, mark)
            return
        ent, xkey, vals = entered
        own = F.gm_log is None  # the outermost sampling loop owns the logs
        if own:
            F.gm_log, F.cost_log = [], []
        g0, l0 = len(F.gm_log), len(F.cost_log)
        h0 = F.times_held
        lg = F.launch_gm_log
        lg0 = len(lg) if lg is not None else 0
        try:
            sl = self._sampler(rng, n, vals)
            if ent is not None:  # (stored below: its snapshots are LoopMemo.prefix's checkpoints)
                sl.marks = []
            before = self._clocks()  # (prefix applies the stored part: its slices are drawn from here)
            pre = self.memo.prefix(F, R, ent, n) if ent is not None else None
            track = sl.track = Track() if xkey is not None and pre is None else None
            idx = 0
            if pre is not None:
                idx = self._from_prefix(sl, pre, n)
                self._extrapolated(before, idx, mark)
            if not self._iterate(sl, rng, idx, h0, track, mark):
                ent = None  # a pipe was held: the execution is not stored
            if ent is not None and F.times_held == h0:
                self._store(sl, ent, xkey, track, n, g0, l0, own, lg, lg0)
        finally:
            if own:
                F.gm_log = F.cost_log = None

    def _short_timed(self, rng: range, n: int) -> None:
        """A loop kept for the next blocks (xblock.py) too short to sample, in a timed pass: an
        earlier block's execution applied when one matches (`BlockMemo.reuse`), else the loop
        runs every iteration, as without the memo, and is kept."""
        F, R, memo, bm = self.F, self.R, self.memo, self.bm
        if not self.use_memo or F.races is not None:
            self.plain(rng)
            return
        mark = len(F.trace) if F.trace is not None else 0
        before = self._clocks()
        ent = memo.enter(F, R)
        xkey = bm.key(R, F.gm_tags, ent, n)
        cv = self.values
        vals = cv.table(rng) if cv is not None else None
        value_of = cv.of(vals, rng) if cv is not None else (lambda i: ())
        if bm.reuse(F, R, memo, ent, xkey, value_of, n):
            self._extrapolated(before, n, mark)
            return
        F.gm_log, F.cost_log = [], []
        h0 = F.times_held
        lg = F.launch_gm_log
        lg0 = len(lg) if lg is not None else 0
        try:
            track = Track()
            R_, iv, step = self.R, self.bounds[3], self.step
            for idx, i in enumerate(rng):
                track.marks.append((len(F.gm_log), idx))
                R_[iv] = i
                step()
            if F.times_held == h0:
                stored = memo.store(F, R, ent, F.gm_log, None, 0)
                if stored is not None:
                    bm.store(R, xkey, stored[0], F.gm_log, track, value_of, n, _ran(lg, lg0))
        finally:
            F.gm_log = F.cost_log = None

    def _enter(self, rng: range, n: int) -> tuple | None:
        """Enter the loop memo (`LoopMemo.enter`) and apply a stored execution of this loop, or
        of another block's (xblock.py), when one matches: then None. Else (the memo entry or
        None, the cross-block key or None, the memo of the checked values or None)."""
        F, R, memo, bm = self.F, self.R, self.memo, self.bm
        ent = xkey = vals = None
        # across blocks (xblock.py): the outermost sampling loop
        # (a timed pass: blocks whose misses no other block shares never match, and a traced one
        # draws every op's slice and flow: not kept)
        cross = bm is not None and F.gm_log is None and F.l2_pass is not None and (
            F.l2_pass.recording or F.trace is None and F.l2_pass.shares(F.block))
        # the race checker needs every op; a `once` loop (loop_memo.never_again) is never reused
        # by its LoopMemo, so it enters it only for its BlockMemo
        if self.use_memo and F.races is None and (not memo.once or cross):
            ent = memo.enter(F, R)
            if memo.reuse(F, R, ent, n):
                return None
            if cross:
                xkey = bm.key(R, F.gm_tags, ent, n)
                cv = self.values
                # (the checked values go where this block's timed pass looks them up)
                vals = cv.table(rng) if cv is not None else None
                if bm.reuse(F, R, memo, ent, xkey, cv.of(vals, rng) if cv is not None else None, n):
                    return None
        return ent, xkey, vals

    def _sampler(self, rng: range, n: int, vals: dict | None) -> SteadyLoop:
        """The SteadyLoop that samples this execution."""
        F, cv, gen = self.F, self.values, self.gen
        # address values remapped only where no read outcome can change with the address: in the
        # timed pass the misses repeat with the addresses' longer period, which is then the
        # loop's (a shorter one is cut at once by the next miss)
        remapped = gen is not None and (F.l2_pass is None or F.l2_pass.recording)
        if cv is None:
            return SteadyLoop(F, n, None, self.memo, NPIPES, gen if remapped else None)  # (no values: no step test)
        at = cv.at

        def tops(i: int) -> tuple:
            """Checked values of iteration i (pure scalar ops; body closures rewrite them)."""
            return at(rng[i])

        sl = SteadyLoop(F, n, tops, self.memo, NPIPES, gen if remapped else None, cv.same_ctl if remapped else cv.same_all)
        if vals is None:
            vals = cv.table(rng)
        if vals is not None:
            sl.vals = vals
        ok = self.in_bounds
        if ok is not None:  # (not through sl: a reference cycle)
            sl.inb = lambda i, v: ok(rng[i], v)
        return sl

    def _from_prefix(self, sl: SteadyLoop, pre: tuple, n: int) -> int:
        """Start at a stored execution's checkpoint (`LoopMemo.prefix`): an iteration it ran one
        by one, or its first jump, in that jump's regime; returns the iteration to go on from."""
        F = self.F
        idx, P, d, prev, cur, regime, tshift = pre
        F.skipped += idx
        if P is None:  # an iteration it ran one by one: the loop goes on from there
            return idx
        # d's pending flag times are laid out queue by queue at the lengths the regime started
        # from; a mix kernel's loop restores its own units' queues only (LoopMemo._restore), so
        # when another unit's queue holds another number of sets now, the loop samples its own
        # period from the checkpoint (as `_back` refuses a regime whose lengths differ)
        if tuple(map(len, F.flags.queues)) != regime[6][1]:
            return idx
        sl.snapshot(idx)
        m = sl._periods_checked(P, idx, (n - idx) // P)
        skipped = sl.jump(P, d, prev, cur, m, regime, tshift) if m >= 1 else 0
        F.skipped += skipped
        sl.hist.clear()
        return idx + skipped

    def _iterate(self, sl: SteadyLoop, rng: range, idx: int, h0: int, track: Track | None, mark: int) -> bool:
        """Run iterations idx.. of `rng`, sampling each one and jumping when steady; False when a
        pipe was held on the way (holds.py: the rest then runs plainly, and nothing is stored).
        `mark`: where this execution's trace slices start."""
        F, R, iv, step = self.F, self.R, self.bounds[3], self.step
        n = len(rng)
        while idx < n:
            if F.times_held != h0:  # a pipe was held in this loop (holds.py): no jump, no memo
                self.plain(rng[idx:])
                return False
            sl.snapshot(idx)
            if sl.regime is not None:
                before = self._clocks() if F.trace is not None else None
                skipped = sl.reenter(idx)
                if skipped:
                    self._extrapolated(before, skipped, mark)
                    idx += skipped
                    F.skipped += skipped
                    continue
            if n - idx > 2 and len(sl.hist) > 2:  # (detect needs two periods of 1)
                found = sl.detect()
                if found is not None:
                    before = self._clocks() if F.trace is not None else None
                    skipped = sl.jump(*found)
                    if skipped:
                        self._extrapolated(before, skipped, mark)
                        idx += skipped
                        F.skipped += skipped
                        continue
            if track is not None:
                track.marks.append((len(F.gm_log), idx))
            R[iv] = rng[idx]
            step()
            idx += 1
        return True

    def _clocks(self) -> tuple | None:
        """The running core's pipe clocks, busy cycles and the launch's byte counts, when traced
        (what `_extrapolated` compares with); None otherwise."""
        F = self.F
        if F.trace is None:
            return None
        return list(F.core.free), list(F.core.busy), list(F.acct[:FLOPS])

    def _extrapolated(self, before: tuple | None, iterations: int, mark: int) -> None:
        """Trace the iterations a shortcut just applied without running them one by one: on each
        pipe of the core that did work in them, one slice from where the pipe's clock was to where
        it is, named after the ops this execution ran on that pipe ("mmad ×96 iterations"; the
        pipe's name when none ran one by one yet), with the bytes they moved, shared out over the
        pipes as the slices run one by one moved theirs (the launch's totals stay exact)."""
        if before is None or iterations <= 0:
            return
        F = self.F
        core = F.core
        # a set pending across the jump was waited on in the skipped iterations: the waits to come
        # get fresh flow ids, which no set carries, so the trace draws no arrow across the jump
        for q in F.flow_queues.queues:
            for i in range(len(q)):
                q[i] = next(F.flow_ids)
        free0, busy0, acct0 = before
        moved = [a - b for a, b in zip(F.acct[:FLOPS], acct0)]
        names: dict[int, dict[str, None]] = {}
        per_pipe: dict[int, list[float]] = {}
        for c, slot, _, _, name, items in F.trace[mark:]:
            if c != core.index:
                continue
            names.setdefault(slot, {})[name.split(" ×")[0]] = None
            acc = per_pipe.setdefault(slot, [0.0] * FLOPS)
            for i, b in items:
                if i < FLOPS:
                    acc[i] += b
        worked = [p for p in range(len(free0)) if core.busy[p] > busy0[p]]
        if not worked:
            return
        totals = [sum(per_pipe.get(p, [0.0] * FLOPS)[i] for p in worked) for i in range(FLOPS)]
        busiest = max(worked, key=lambda p: core.busy[p] - busy0[p])
        for p in worked:
            acc = per_pipe.get(p, [0.0] * FLOPS)
            items = []
            for i, d in enumerate(moved):
                if d <= 0:
                    continue
                share = acc[i] / totals[i] if totals[i] > 0 else (1.0 if p == busiest else 0.0)
                if share > 0:
                    items.append((i, d * share))
            label = "/".join(list(names.get(p, {}))[:3]) or PIPES[p % NPIPES]
            F.trace.append((core.index, p, free0[p], core.free[p] - free0[p], f"{label} ×{iterations}{EXTRAPOLATED}", tuple(items)))

    def _store(self, sl: SteadyLoop, ent: tuple, xkey, track: Track | None, n: int, g0: int, l0: int, own: bool,
               lg: list | None = None, lg0: int = 0) -> None:
        """Keep the execution that just ran (from memo entry `ent`; its GM log records and cost
        entries from g0 and l0) for the loop memo and, with a `track`, for the next blocks.
        When an enclosing loop samples (not `own`), its periods compare log records and cost
        entries, so the execution is recorded as a reuse of it would be (one GM log record, one
        cost entry): a period that ran it and one that reused it then compare equal, as they are
        (the stored execution is this one)."""
        F = self.F
        stored = self.memo.store(F, self.R, ent, F.gm_log[g0:], sl.first, g0, collapse=not own, marks=sl.marks)
        if track is not None and stored is not None:
            self.bm.store(self.R, xkey, stored[0], F.gm_log[g0:], track, sl.value_of, n, _ran(lg, lg0))
        if stored is not None and not own:
            token, log = stored
            del F.gm_log[g0:]
            F.gm_log.extend(log)
            del F.cost_log[l0:]
            F.cost_log.append(token)


def _ran(lg: list | None, lg0: int) -> set | None:
    """(key, time) of the accesses that ran one by one since position lg0 of a launch's GM log
    `lg` (Frame.launch_gm_log: their tuples; replays log arrays), None without a log."""
    if lg is None:
        return None
    return {(k, t) for k, t, _ in lg[lg0:] if type(k) is int}
