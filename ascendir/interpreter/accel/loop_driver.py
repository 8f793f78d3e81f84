"""The loop driver of the steady-state speed-ups: runs a timing-only loop, jumping over whole
periods once steady (steady.SteadyLoop), applying stored whole executions (loop_memo.LoopMemo,
with remapped addresses: remap.py) and executions of earlier blocks (xblock.BlockMemo). See
steady.py for the conditions; `Accel` switches each part."""

from __future__ import annotations

from __future__ import annotations
from xdsl.ir import Operation
from ascendir.interpreter.accel.remap import Remap
from ascendir.interpreter.accel.steady import MIN_TRIPS, SteadyLoop, step_test
from ascendir.interpreter.accel.loop_memo import LoopMemo
from ascendir.interpreter.timing.timeline import NPIPES
from ascendir.interpreter.accel.xblock import BlockMemo, Track
from ascendir.interpreter.exec.common import Closure

class SteadyFor:
    """Compiler part: the accelerated scf.for (mixed into compiler.Compiler)."""

    def _steady_for(self, lb: int, ub: int, st: int, iv: int, body: list[Closure], charge, checked: list[Operation], memo: LoopMemo,
                    gen: Remap | None = None, bm: BlockMemo | None = None, use_memo: bool = True) -> Closure:
        """A timing-only loop that may be extrapolated once steady (steady.py). `checked`: the
        loop-level scalar ops steady.py re-evaluates for the iterations it skips; `memo`: stored
        executions of the whole loop (loop_memo.LoopMemo), applied when the loop is entered again
        from the same relative state (next tile of an outer loop, another block); `gen`: its
        address values that are not affine in the iv (remap.py), None when it has none; `bm`:
        its whole executions kept for the next blocks (xblock.py), None when it may not;
        `use_memo`: `memo` is entered (Accel.loop_memo)."""
        F, R = self.F, self.F.values
        values_at = self.checked_values(iv, checked) if checked else None
        same_all = step_test(list(range(len(checked))))
        same_ctl = step_test(gen.control_pos) if gen is not None else None
        # the checked values are pure functions of the iv and these outside values: memoised per
        # their values across executions of the loop (steady.SteadyLoop.vals)
        inputs = sorted({self.slot(v) for o in checked for v in o.operands} - {iv} - {self.slot(o.results[0]) for o in checked})
        known: dict[tuple, dict] = {}

        def known_vals(rng) -> dict | None:
            ik = (rng.start, rng.step, *[R[x] for x in inputs])
            vals = known.get(ik)
            if vals is None and len(known) < 64:
                vals = known[ik] = {}
            return vals

        def values_of(vals: dict | None, rng):
            """i -> the checked values of iteration i, kept in `vals` (SteadyLoop.value_of's)."""
            if vals is None:
                return lambda i: values_at(rng[i])

            def value_of(i: int) -> tuple:
                v = vals.get(i)
                if v is None:
                    v = vals[i] = values_at(rng[i])
                return v

            return value_of

        def plain(rng) -> None:
            for i in rng:
                R[iv] = i
                for f in body:
                    f()
                if charge is not None:
                    charge()

        def run() -> None:
            rng = range(R[lb], R[ub], R[st])
            n = len(rng)
            if n < MIN_TRIPS or not F.may_extrapolate or F.trace is not None or F.hold is not None:
                plain(rng)  # a held pipe (holds.py) is state the steady-state jump does not see
                return
            ent = xkey = vals = None
            # across blocks (xblock.py): the outermost sampling loop, in the recording pass
            cross = bm is not None and F.gm_log is None and F.l2_pass is not None and F.l2_pass.recording
            # the race checker needs every op; a `once` loop (loop_memo.never_again) is never reused
            # by its LoopMemo, so it enters it only for its BlockMemo
            if use_memo and F.races is None and (not memo.once or cross):
                ent = memo.enter(F, R)
                if memo.reuse(F, R, ent, n):
                    return
                if cross:
                    xkey = bm.key(R, F.gm_tags, ent, n)
                    # (the checked values go where this block's timed pass looks them up)
                    vals = known_vals(rng) if checked else None
                    if bm.reuse(F, R, memo, ent, xkey, values_of(vals, rng), n):
                        return
            own = F.gm_log is None  # the outermost sampling loop owns the logs
            if own:
                F.gm_log, F.cost_log = [], []
            g0, l0 = len(F.gm_log), len(F.cost_log)

            def tops(i: int) -> tuple:
                """Checked values of iteration i (pure scalar ops; body closures rewrite them)."""
                return values_at(rng[i])

            h0 = F.times_held
            try:
                # address values remapped only where no read outcome can change with the address:
                # in the timed pass the misses repeat with the addresses' longer period, which is
                # then the loop's (a shorter one is cut at once by the next miss)
                remapped = gen is not None and (F.l2_pass is None or F.l2_pass.recording)
                sl = SteadyLoop(F, n, tops if checked else None, memo, NPIPES, gen if remapped else None, same_ctl if remapped else same_all)
                if checked:
                    if vals is None:
                        vals = known_vals(rng)
                    if vals is not None:
                        sl.vals = vals
                idx = 0
                pre = memo.prefix(F, R, ent, n) if ent is not None else None
                track = sl.track = Track() if xkey is not None and pre is None else None
                if pre is not None:  # start at a stored execution's first jump, in its regime
                    idx, P, d, prev, cur, regime, tshift = pre
                    F.skipped += idx
                    sl.snapshot(idx)
                    m = sl._periods_checked(P, idx, (n - idx) // P)
                    skipped = sl.jump(P, d, prev, cur, m, regime, tshift) if m >= 1 else 0
                    idx += skipped
                    F.skipped += skipped
                    sl.hist.clear()
                while idx < n:
                    if F.times_held != h0:  # a pipe was held in this loop (holds.py): no jump, no memo
                        plain(rng[idx:])
                        ent = None
                        break
                    sl.snapshot(idx)
                    if sl.regime is not None:
                        skipped = sl.reenter(idx)
                        if skipped:
                            idx += skipped
                            F.skipped += skipped
                            continue
                    if n - idx > 2 and len(sl.hist) > 2:  # (detect needs two periods of 1)
                        found = sl.detect()
                        if found is not None:
                            skipped = sl.jump(*found)
                            if skipped:
                                idx += skipped
                                F.skipped += skipped
                                continue
                    if track is not None:
                        track.marks.append((len(F.gm_log), idx))
                    R[iv] = rng[idx]
                    for f in body:
                        f()
                    if charge is not None:
                        charge()
                    idx += 1
                if ent is not None and F.times_held == h0:
                    # an enclosing loop samples (not `own`): its periods compare log records and
                    # cost entries, so record this execution as a reuse of it would (one GM log
                    # record, one cost entry): a period that ran it and one that reused it then
                    # compare equal, as they are (the stored execution is this one)
                    stored = memo.store(F, R, ent, F.gm_log[g0:], sl.first, g0, collapse=not own)
                    if track is not None and stored is not None:
                        bm.store(xkey, stored[0], F.gm_log[g0:], track, sl.value_of, n)
                    if stored is not None and not own:
                        token, log = stored
                        del F.gm_log[g0:]
                        F.gm_log.extend(log)
                        del F.cost_log[l0:]
                        F.cost_log.append(token)
            finally:
                if own:
                    F.gm_log = F.cost_log = None

        return run
