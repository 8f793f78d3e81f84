"""Steady-state extrapolation of uniform `scf.for` loops (timing-only mode), nested.

A loop whose body costs the same every iteration (same op sequence, same tile sizes) drives the
per-core timeline (timeline.py) into a periodic regime after a short transient: every period of
P iterations advances each pipe clock, busy counter, byte/flop counter and pending flag time by
the same amount. `SteadyLoop` runs iterations normally while recording the core state at each
iteration start; once two consecutive periods show the same delta, it adds (periods skipped ×
delta) to the state instead of running them, then runs the remaining iterations (fewer than a
period) normally. The last iteration is skipped like any other: what could make it differ (a
partial tile, a condition on the iv) is a checked value, compared before the jump.

Three mechanisms make timing-only simulation fast (the 4096³ matmul of
benchmarks/interpreter_speed.py executes ~2 % of its tile ops, over both L2 passes):
* the jump above, nested (below), with the skipped GM accesses replayed into the L2 as arrays;
* `SteadyLoop.reenter`: a jump cut short by a read with another L2 outcome (a miss among hits)
  resumes as soon as the state after that period is the jump's starting state again, relative
  to its latest clock (exact: see `LoopMemo`), instead of sampling two new periods;
* `LoopMemo` (loop_memo.py): a whole execution of a loop (a matmul's K loop) is stored and applied again when
  the loop is entered with the same control values from the same relative state, clamped to
  the S clocks (exact, max-plus shift invariance): the next tile of the outer loop, or another
  block running the same program on shifted addresses, costs one lookup. When only later L2
  outcomes differ (one miss among hits), `LoopMemo.prefix` applies the stored execution up to
  the last of its checkpoints before that read: the start of an iteration it ran one by one
  (`SteadyLoop.marks`; a GEMM's K loop in the timed pass, kept off any period by its
  prefetching AIVs and the designated misses, mostly runs one by one), from which the loop
  runs on, or its first jump, from which it continues in that jump's regime.

Periods: P = 1 .. PMAX. P = 2 covers ping-pong parity branches; longer periods cover loops whose
GM addresses repeat their pattern only every few iterations: the per-core tile loop of a matmul
(`t = block + i·block_dim`, tile row t / n_tiles, column t % n_tiles) advances every address by a
constant step only every lcm(block_dim, n_tiles) / block_dim iterations (4 for 24 cores over 32
tile columns). Where no read outcome can depend on the address (the recording pass, where every
read hits, and kernels without GM reads), such address values are remapped instead (remap.py):
the period is the timing's, and each skipped access is placed at its own iteration's address.
In the timed pass the longer period stays: the misses repeat with the addresses.

Nesting: loops inside an extrapolated loop extrapolate too. While an outer loop samples, an inner
loop's skipped iterations are appended to the shared GM log as one array record (`Acc`), so the
outer loop compares and replays them like executed accesses (accesses.py); skipping one outer period skips its
inner loops whole.

When a loop may be extrapolated (`uniform_loop`, static, on the IR):
* no loop-carried values, no memref.load/store or ascend.get_value (data-dependent control) in the body;
* every dynamic offset of a subview of a GM buffer is affine in the *checked values* (+, −, × by
  invariants, index casts), so each GM address of a skipped iteration is known exactly. Checked
  values: the induction variable and every scalar `arith` op directly in the body or in its scf.if
  regions (FlashAttention's ring-slot offsets) whose operands are invariant or checked (div, rem,
  min, compares included), and the invariant ones of those the checked ones read (evaluated with
  them, not read from the body's slots: `_with_body_operands`); an inner loop's iv counts as
  invariant when its bounds are invariant or checked.
And at run time:
* two consecutive periods have equal deltas of every state component (exactly: durations are
  multiples of the cycle quantum, costmodel/quantum.py, so the timeline's sums are exact), execute
  the same tile-op cost entries in the same order (`Frame.cost_log`), and make the same GM accesses
  up to an address shift (same op, stream = root/shape/strides, read/write, L2 outcome);
* no clock would overtake another: sorted by value, the moving clocks' deltas do not decrease
  (otherwise the bottleneck changes later and the regime is not periodic yet);
* every moving clock but the S clocks advances at the fastest one's rate or an S clock's
  (`_settled_rates`: a clock at a third rate drifts from what it waits on until the wait turns);
* `SteadyLoop.jump` evaluates the checked values (pure scalar ops, cheap) of every iteration it
  would skip and skips only whole periods in which each of them advances by the same step as in
  the sampled period: the addresses, the tile sizes and the branch conditions computed in the
  body (e.g. `min(rem, tile)` of a partial tile, the parity of a ping-pong branch) are exactly
  those of the sampled period shifted, so none of them is assumed.

* no skipped iteration holds a GM subview out of bounds (`SteadyLoop.inb`, scf_ops.in_bounds:
  the subviews at loop level whose offsets or sizes move with the iv): the jump stops short of
  such an iteration, which then runs and raises the error the walk of every op raises. Checked
  at the first and the last skipped period only, exactly: those offsets and sizes are the iv,
  checked values or invariants, each advancing by a constant step per period over the jump.
  (Not covered: subviews inside inner loops, and stored executions applied by LoopMemo or
  xblock at other addresses.)

Remaining assumption (documented, not checked): values computed inside an inner loop from checked
values by other than affine ops keep the sampled pattern; the lowering templates compute tile
sizes and conditions at loop level.

L2 (l2.py): the GM accesses of the skipped periods are replayed into the L2 model as numpy arrays
(tile keys and times advance by their per-period deltas), in program order, so the tag store,
the recording pass's miss attribution, hit/miss counters and later kernels see every access. In
the timed pass a replayed read whose outcome (hit/miss) differs from the sampled period's would
cost differently; the jump stops before that period and the loop runs normally from there (and
may extrapolate again later). So the byte counters and L2 outcomes of an extrapolated loop are
exact; only the timing assumes the periodic regime. Writes likewise: a write's outcome (l2.py:
the rewrite of a tile still dirty, or a first write) depends on the tiles written before, by
this loop or by other blocks (rows t / 2 of a grid-stride loop: a skipped period's first write
of a row is a rewrite where an earlier block wrote the row), so the skipped writes are checked
against the dirty map (`first_write_change`) and the jump stops before the first period where
one differs, as for a read. Extrapolation is off when tracing (the trace needs every op) and in
numerics mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from itertools import chain, compress
from operator import is_, itemgetter, le, sub

import numpy as np
from xdsl.dialects import arith, memref, scf
from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import ascend

from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.exec.walk import OpTree, operands_of
from ascendir.interpreter.accel.accesses import Acc, _apply_accesses, _ks, _naccesses, _tiled, first_write_change

if TYPE_CHECKING:
    from ascendir.interpreter.accel.loop_memo import LoopMemo

MIN_TRIPS = 8  # shorter loops cannot amortise detection (2 periods + a tail)
PMAX = 16  # longest period looked for (the matmul tile loop needs lcm(block_dim, tiles)/block_dim)

_INV, _AFF, _OTHER = 0, 1, 2


def uniform_loop(loop: scf.ForOp, tree: OpTree | None = None) -> list[Operation] | None:
    """Static part of the eligibility test (module docstring): None when the loop may not be
    extrapolated, else the ops whose results are checked at run time, in program order.
    `tree`: an OpTree holding the loop (the kernel's, built once per compile), else one is built.
    (Ops and blocks are told apart by exact type here and in memo_inputs: xDSL's classes are
    ABCs, whose isinstance is several times slower, and these walks run for every loop at
    every compile.)"""
    if loop.iter_args:
        return None
    body = loop.body.block
    iv = body.args[0]
    if tree is None:
        tree = OpTree(loop)
    order = tree.walk(loop)[1:]  # the body, in program order
    inside = {id(o) for o in order}  # (ids: an xDSL op's or value's hash is Python code)
    kind: dict[int, int] = {}  # id(value) -> _INV, _AFF or _OTHER
    checked: dict[int, Operation] = {}  # id(op) -> op
    # ids of the blocks whose ops run once per iteration: the body and the regions of its scf.if
    # ops, nested. (In pre-order an scf.if comes before the ops of its regions, and an op after
    # the ops defining its operands, so one pass knows each op's level when it gets to it.)
    level = {id(body)}

    def k(v: SSAValue) -> int:
        if v is iv:
            return _AFF
        got = kind.get(id(v))
        if got is not None:
            return got
        owner = v.owner
        if type(owner) is Block:
            parent = owner.parent_op()
            if parent is None or id(parent) not in inside:
                r = _INV
            elif type(parent) is scf.ForOp and owner.args and v is owner.args[0]:
                # an inner loop's iv takes the same values every iteration if its bounds do
                r = _INV if all(k(x) == _INV or id(x.owner) in checked for x in (parent.lb, parent.ub, parent.step)) else _OTHER
            else:
                r = _OTHER
        elif id(owner) not in inside:
            r = _INV
        elif type(owner) is arith.ConstantOp:
            r = _INV
        elif type(owner) in SCALAR_OPS and id(owner.parent) in level:
            # (directly in the body, or in scf.if regions of it, not in an inner loop: evaluated once
            # per iteration, so it can be checked like a body op; a branch not taken computes it
            # harmlessly)
            kinds = [k(x) for x in operands_of(owner)]
            if all(x == _INV for x in kinds):
                r = _INV
            elif _OTHER in kinds:
                r = _OTHER
            else:
                r = _AFF  # evaluated for every skipped iteration (SteadyLoop.jump)
                checked[id(owner)] = owner
        elif type(owner) in (arith.AddiOp, arith.SubiOp):
            r = max(k(owner.lhs), k(owner.rhs))
        elif type(owner) is arith.MuliOp:
            a, b = k(owner.lhs), k(owner.rhs)
            r = _INV if a == b == _INV else _AFF if {a, b} == {_INV, _AFF} else _OTHER
        elif type(owner) is arith.IndexCastOp:
            r = k(owner.input)
        else:
            r = _INV if all(k(x) == _INV for x in operands_of(owner)) else _OTHER
        kind[id(v)] = r
        return r

    # classify every loop-level scalar value, in scf.if regions too: each that depends on the iv is
    # checked, even when only sizes or inner-loop bounds use it (a partial last tile). (Only scalar
    # ops at loop level are ever checked, and a value's kind does not depend on the order values are
    # classified in: the other ops' values are classified when something asks.)
    uniform = True
    for op in order:
        t = type(op)
        if id(op.parent) in level:
            if t is scf.IfOp:
                level.update(id(b) for r in op.regions for b in r.blocks)
            elif t in SCALAR_OPS:
                for res in op.results:
                    k(res)
        if t in _NOT_UNIFORM:
            if t is not scf.ForOp or op.iter_args:
                uniform = False
                break
        elif t is memref.SubviewOp:
            sv = tree.subview(op)
            if sv.gm and any(k(o) == _OTHER for o in sv.offsets):
                uniform = False
                break
    del k  # (it calls itself: a reference cycle otherwise)
    if not uniform or not _with_body_operands(checked, iv, inside, level):
        return None
    return sorted(checked.values(), key=tree.index)  # (program order; an op's hash is Python code: no set test per op)


_NOT_UNIFORM = (memref.LoadOp, memref.StoreOp, ascend.GetValueOp, scf.ForOp)  # (an scf.for: with loop-carried values)


def _with_body_operands(checked: dict[int, Operation], iv: SSAValue, inside: set[int], level: set[int]) -> bool:
    """Add to `checked` the loop-level scalar ops of the body that checked ops read (`off` of
    `off = t · 32; a = off + k`, t outside): invariant in the loop, but computed in its body.
    The checked values are evaluated out of place (before the body of an iteration or of the
    whole execution ran: `SteadyLoop.value_of`, `LoopMemo.prefix`, xblock) and memoised per
    the values they read from outside (loop_driver.CheckedValues), so such a value read from
    its slot would be the previous execution's; evaluated with the checked ones it is this
    execution's. Constants are the same in every execution and stay read from their slots.
    False when a checked op reads another value the body computes (not a scalar op at loop
    level: an scf.if result): the loop is then not extrapolated. `checked`: id(op) -> op;
    `inside`: the ids of the loop's ops; `level`: the ids of its blocks at loop level."""
    todo = list(checked.values())
    while todo:
        for x in operands_of(todo.pop()):
            owner = x.owner
            if x is iv or id(owner) in checked or type(owner) is arith.ConstantOp:
                continue
            if type(owner) is Block:
                parent = owner.parent_op()
                if parent is not None and id(parent) in inside:
                    return False
                continue
            if id(owner) not in inside:
                continue
            if type(owner) not in SCALAR_OPS or id(owner.parent) not in level:
                return False
            checked[id(owner)] = owner
            todo.append(owner)
    return True


_STEP_TESTS: dict[tuple[int, ...], object] = {}


def step_test(entries: list[int]):
    """fn(v0, v1, v2) -> whether the given entries of the tuples advance from v1 to v2 by what
    they advanced from v0 to v1 (`SteadyLoop._checked_to`): generated straight-line code, one
    short-circuit comparison per entry, no step tuples built."""
    key = tuple(entries)
    fn = _STEP_TESTS.get(key)
    if fn is None:
        body = " and ".join(f"c[{i}] - b[{i}] == b[{i}] - a[{i}]" for i in key) or "True"
        env: dict = {}
        exec(f"def same(a, b, c):\n    return {body}\n", env)  # noqa: S102 (our own text)
        fn = _STEP_TESTS[key] = env["same"]
    return fn


class _Replay:
    """The accesses a regime's jumps replay, k = 1..K periods after the sampled period `cur`
    (K grows on demand), for one pair of sampled periods (cached on `cur`: re-entered jumps and
    LoopMemo.prefix reuse the pair). A jump then slices these tables instead of building ~30
    small arrays: a period has 4-260 accesses and m is 1-15, so numpy's per-call overhead, not
    the element work, is what a jump costs. Acc arrays are never written to, so views are safe."""

    __slots__ = ("prev", "K", "nr", "chit", "misses", "off", "keys", "kdt", "t", "cid", "sid", "rd", "hit", "wr", "hits", "views", "vals")

    @classmethod
    def of(cls, prev: Acc, cur: Acc, K: int, sl: SteadyLoop) -> _Replay:
        r = cur.rep
        if r is None or r.prev is not prev or r.K < K or (r.vals is not None and r.vals is not sl.vals):
            r = cur.rep = cls(prev, cur, K, sl)
        return r

    def __init__(self, prev: Acc, cur: Acc, K: int, sl: SteadyLoop):
        self.prev, self.K = prev, K
        self.vals = None  # the checked values the offsets were computed from (remap.Remap)
        rd = cur.rd
        chit = cur.hit[rd]
        self.nr = nr = len(chit)
        self.chit = chit.tolist()  # the sampled period's read outcomes (L2Pass.first_change)
        self.misses = (~chit).nonzero()[0].tolist()  # (np.flatnonzero's Python wrapper costs more than the work)
        ks, ksf = _ks(K)
        if cur.ph is not None and sl.gen is not None:  # each skipped iteration's own address values
            self.vals = sl.vals
            self.off, self.keys = sl.gen.tables(prev, cur, K, sl.value_of, sl.F.gm_tags)
        else:
            step = ks * (cur.off - prev.off)[None, :]
            self.off = (cur.off[None, :] + step).ravel()
            self.keys = ((cur.sid * SHIFT + cur.off)[None, :] + step).ravel()
        self.kdt = ksf * (cur.t - prev.t)[None, :]  # (K, L): k·dt
        self.t = (cur.t[None, :] + self.kdt).ravel()  # the times when the time shift is 0
        self.cid, self.sid, self.rd, self.hit = _tiled(cur.cid, K), _tiled(cur.sid, K), _tiled(rd, K), _tiled(cur.hit, K)
        self.wr = None if nr == len(rd) else ~self.rd
        self.hits = self.hit if self.wr is None else _tiled(chit, K)  # every access reads: the same table
        self.views: dict[int, tuple] = {K: (self.cid, self.sid, self.rd, self.hit, self.wr, self.hits, self.t)}

    def rows(self, m: int) -> tuple:
        """The first m periods' op ids, stream ids, read and sampled-outcome masks, write mask
        (None: no writes), the reads' outcomes, times at time shift 0 (views, kept per m:
        re-entered jumps skip the same numbers of periods)."""
        v = self.views.get(m)
        if v is None:
            n, nr = m * len(self.rd) // self.K, m * self.nr
            v = self.views[m] = (self.cid[:n], self.sid[:n], self.rd[:n], self.hit[:n],
                                 None if self.wr is None else self.wr[:n], self.hits[:nr], self.t[:n])
        return v


class SteadyLoop:
    """Run-time detection and extrapolation for one loop execution on one core (see module)."""

    __slots__ = ("F", "hist", "n", "vals", "tops", "memo", "npipes", "regime", "bad", "first", "gen", "same", "track", "clash", "marks",
                 "inb")

    def __init__(self, F, n: int, tops, memo: LoopMemo, npipes: int, gen=None, same=None):
        self.F = F
        # (v0, v1, v2) -> whether checked values v2 advance over v1 as v1 over v0 (`step_test`)
        self.same = same
        self.gen = gen  # remap.Remap: address values not affine in the iv (None: none)
        self.n = n
        self.memo = memo  # for its flag-key units (state_key)
        self.npipes = npipes
        # after a jump cut short by a different L2 outcome: (P, d, prev, cur, periods after cur
        # accounted for, next boundary, state key at the jump, S positions, S decided nothing)
        self.regime: list | None = None
        self.bad: dict[int, int] = {}  # period -> times its checked values failed (skipped from 2)
        # the state where this execution's first sampled jump started (LoopMemo.prefix)
        self.first: tuple | None = None
        self.tops = tops  # i -> tuple of the checked values of iteration i (compiler._steady_for)
        self.vals: dict[int, tuple] = {}  # tops(i) so far (pure: computed once per iteration)
        self.hist: list[tuple] = []  # (iteration index, state vector, queue lengths, gm log pos, sig pos)
        self.track = None  # xblock.Track: the iteration of each GM log record, when kept
        # the state component (a clock, busy time or counter: an index below the pending flag
        # times) whose period deltas differed last in `detect`: tested first there (a clock off
        # the period, e.g. one unit's jittering behind another's misses, stays so for many
        # samples and every period length)
        self.clash = 0
        # every snapshot of this execution, when it is stored (LoopMemo.store: the checkpoints of
        # LoopMemo.prefix), else None
        self.marks: list | None = None
        # (i, checked values of iteration i) -> whether iteration i's GM subviews that move with
        # the iv are in bounds (scf_ops.in_bounds), None when none moves
        self.inb = None

    def snapshot(self, idx: int) -> None:
        F = self.F
        c = F.core
        qs = F.flags.queues
        # (one list built once: the clocks, busy times, counters, then the pending flag times,
        # queue by queue, most empty)
        vec = [*c.free, *c.done, *c.busy, *F.acct, *chain.from_iterable(qs)]
        h = self.hist
        h.append((idx, vec, [*map(len, qs)], len(F.gm_log), len(F.cost_log), F.s_clock_decisions))
        if self.marks is not None:
            self.marks.append(h[-1])
        if len(h) > 2 * PMAX + 1:
            del h[0]

    def detect(self) -> tuple[int, list[float], Acc, Acc, int] | None:
        """(period, delta per period, previous and current period GM accesses, periods that may
        be skipped) when steady. The shortest period whose checked values (module docstring)
        hold up to the end wins; a period that holds only part of the way is taken only once
        every period length could be tested (else a longer one may cover everything)."""
        h = self.hist
        F = self.F
        c = h[-1]
        vc = c[1]
        idx = c[0]
        best = None
        pend = None  # a partial candidate whose GM accesses are not compared yet: (P, d, periods)
        bad = self.bad
        qc, gc, lc = c[2], c[3], c[4]
        sig = F.cost_log
        ns = len(F.core.free)
        nfix = 3 * ns + len(F.acct)  # the clocks, busy times and counters; pending flag times follow
        # P <= n - idx: a longer period has no whole period left to skip
        hr = h[::-1]  # hr[P] = h[-1 - P]
        k = self.clash
        for P in range(1, min(PMAX, (len(h) - 1) // 2, self.n - idx) + 1):
            # cheapest tests first: structure (cost-entry counts, the first cost entry: most
            # candidates differ there), queue lengths and log counts, then the cost entries, then
            # every state component
            b, a = hr[P], hr[2 * P]
            va, vb = a[1], b[1]
            if vc[k] - vb[k] != vb[k] - va[k]:  # (k = self.clash: most rejections, one test of a necessary condition)
                continue
            la, lb_ = a[4], b[4]
            if lb_ - la != lc - lb_ or lb_ > la and sig[la] is not sig[lb_]:
                continue
            if bad and bad.get(P, 0) >= 2:  # its checked values failed twice: not this loop's period
                continue
            if b[2] != qc or a[2] != qc or b[3] - a[3] != gc - b[3]:
                continue
            if not all(map(is_, sig[la:lb_], sig[lb_:lc])):  # the same cost entries
                continue
            # the pipe clocks first (where a transient shows): most calls are rejected here
            # without building two delta lists. Equal deltas are equal exactly: the values are
            # multiples of the cycle quantum (or integer counts), whose differences are exact
            d1, d0 = list(map(sub, vc[:ns], vb[:ns])), list(map(sub, vb[:ns], va[:ns]))
            if d1 != d0:
                k = self.clash = next(i for i, (x, y) in enumerate(zip(d1, d0)) if x != y)
                continue
            d, d0 = list(map(sub, vc, vb)), list(map(sub, vb, va))
            if d != d0:
                i = next(i for i, (x, y) in enumerate(zip(d, d0)) if x != y)
                if i < nfix:  # (a pending flag time's index is another value's in other periods)
                    k = self.clash = i
                continue
            if not self._no_overtaking(vc, d) or not self._settled_rates(d):
                continue
            m = (self.n - idx) // P  # whole periods (>= 1: the range of P)
            ok = self._periods_checked(P, idx, m)
            if not ok:
                bad[P] = bad.get(P, 0) + 1
                continue
            if ok < m:
                if pend is not None:  # the partial candidate before decides whether this one is better
                    best = self._with_accesses(*pend) or best
                    pend = None
                if best is not None and ok * P <= best[4] * best[0]:
                    continue
                if self.n - idx - ok * P > P + 1:  # not (nearly) to the end: the best so far, if
                    pend = (P, d, ok)  # its accesses compare equal (tested when that matters)
                    continue
            found = self._with_accesses(P, d, ok)
            if found is not None:
                return found
        if len(h) == 2 * PMAX + 1:
            if pend is not None:
                best = self._with_accesses(*pend) or best
            return best
        return None

    def _with_accesses(self, P: int, d: list[float], ok: int) -> tuple[int, list[float], Acc, Acc, int] | None:
        """`detect`'s result for a period P that passed the state tests, if the two sampled periods
        make the same kind of GM accesses (and, remapped, at the same iterations of the period):
        built for the candidates that may be taken only (a partial candidate is often never
        needed: a longer period covers the loop, or the history is too short to take it)."""
        h = self.hist
        k = len(h) - 1
        prev, cur = self._accesses(k - 2 * P, k - P), self._accesses(k - P, k)
        if not prev.same_kind(cur):
            return None
        if self.gen is not None:
            prev, cur = self._phased(prev, k - 2 * P, P), self._phased(cur, k - P, P)
            if prev.ph.tobytes() != cur.ph.tobytes():
                return None
        elif self.track is not None:  # (xblock.Track places the jumps' accesses by their phases)
            cur = self._phased(cur, k - P, P)
        return P, d, prev, cur, ok

    def _accesses(self, i: int, j: int) -> Acc:
        """`Acc.of` of the GM log between snapshots h[i] and h[j] (one conversion: it is built for
        the periods a jump uses, not for every candidate)."""
        h = self.hist
        return Acc.of(self.F.gm_log[h[i][3]:h[j][3]])

    def _phased(self, acc: Acc, i: int, P: int) -> Acc:
        """A copy of `acc`, the accesses of the period starting at snapshot h[i], with its first
        iteration and each access's iteration within the period (remap.Remap.tables)."""
        h, log = self.hist, self.F.gm_log
        out = Acc(acc.cid, acc.sid, acc.off, acc.t, acc.rd, acc.hit)
        out.it0 = h[i][0]
        out.ph = np.repeat(np.arange(P, dtype=np.int64), [_naccesses(log[h[i + q][3]:h[i + q + 1][3]]) for q in range(P)])
        return out

    def value_of(self, i: int) -> tuple | None:
        """The checked values of iteration i (computed once: they are pure in i); None past the
        loop's end."""
        if i >= self.n:
            return None
        v = self.vals.get(i)
        if v is None:
            v = self.vals[i] = self.tops(i)
        return v

    def _no_overtaking(self, v: list[float], d: list[float]) -> bool:
        """Clocks (free, done, pending flag times) that move: sorted by value, their deltas must
        not decrease, or a faster clock behind a slower one would overtake it later."""
        ns = len(self.F.core.free)
        j = 3 * ns + len(self.F.acct)
        dc = d[:2 * ns] + d[j:]  # the clocks' deltas (busy times and counters left out)
        ds = list(compress(dc, dc))  # the nonzero ones (compress: selection in C, no Python loop)
        if not ds or max(ds) == min(ds):  # none moves, or all advance alike
            return True
        moving = sorted(zip(compress(v[:2 * ns] + v[j:], dc), ds))
        ys = list(map(itemgetter(1), moving))
        if all(map(le, ys, ys[1:])):  # deltas in clock order never decrease: no pair below fails
            return True
        for (x0, d0), (x1, d1) in zip(moving, moving[1:]):
            if d1 < d0 and x1 > x0:
                return False
        return True

    def _settled_rates(self, d: list[float]) -> bool:
        """Every moving clock other than the S clocks (free, done, pending flag times) advances
        per period as the fastest-moving one does, or as an S clock does (a pipe the loop's scalar
        issue drags along). A clock between the two rates is in a transient the overtaking test
        does not see: a pipe ahead of the one it waits on drifts away from it at the rate
        difference, until the wait is decided by the other clock and every delta changes (the
        AIC's M ahead of its MTE2 at 4256 vs 4149 cycles per period in a 448x8000x3000 matmul
        whose AIVs prefetch B: the jump's cycles 233,531, every op run 258,804)."""
        ns, npp = len(self.F.core.free), self.npipes
        j = 3 * ns + len(self.F.acct)
        dc = [x for i, x in enumerate(d[:2 * ns]) if x != 0.0 and i % npp] + [x for x in d[j:] if x != 0.0]
        if not dc:
            return True
        front = max(dc)
        s = d[0:ns:npp]
        return all(x == front or x in s for x in dc)

    def _periods_checked(self, P: int, idx: int, m: int) -> int:
        """How many of the next m periods (from iteration idx) have every checked value advance
        by the sampled period's step (module docstring); 0..m. A checked value that raises (e.g.
        a division by zero ahead; the run will report it) before the first failing step gives 0,
        as it stops the scan."""
        if self.tops is None or m < 1:
            return m
        end = idx + m * P
        j, raised = self._checked_to(P, idx, end)
        if j >= end:
            return m
        return 0 if raised else (j - idx) // P

    def _checked_to(self, P: int, idx: int, end: int) -> tuple[int, bool]:
        """(j, raised): iterations idx..j-1 (j <= end) keep the step of the checked values, and
        whether the scan stopped at j because a checked value raised.

        Iteration j keeps the step when its checked values advance over j - P as those of j - P
        over j - 2P; by induction the iterations from idx on repeat the sampled periods shifted
        iff that is true for each of them. The scan over j is kept per P with the checked values
        (`vals`: pure in the iteration) and extended on demand, so repeated calls (every sampled
        iteration, every re-entry) do not compare the same iterations again."""
        if self.tops is None:
            return end, False
        vals, f = self.vals, self.tops
        # the entries compared: all, or without the address values (remap.py: any values)
        same = self.same
        key = ("scan", P, same)
        sc = vals.get(key)  # [lo, hi, stop]: j in [lo, hi) keep the step; stop at hi: 0 not scanned, 1 fails, 2 raises
        if sc is None or not sc[0] <= idx <= sc[1]:
            sc = vals[key] = [idx, idx, 0]
        if sc[2] == 0 and sc[1] < end:
            get = vals.get
            j = sc[1]
            try:
                while j < end:
                    v0 = get(j - 2 * P)
                    if v0 is None:
                        v0 = vals[j - 2 * P] = f(j - 2 * P)
                    v1 = get(j - P)
                    if v1 is None:
                        v1 = vals[j - P] = f(j - P)
                    v2 = get(j)
                    if v2 is None:
                        v2 = vals[j] = f(j)
                    if not same(v0, v1, v2):
                        sc[2] = 1
                        break
                    j += 1
            except Exception:  # noqa: BLE001
                sc[2] = 2
            sc[1] = j
        if sc[1] >= end:
            return end, False
        return sc[1], sc[2] == 2

    def jump(self, P: int, d: list[float], prev: Acc, cur: Acc, m: int, regime: list | None = None, tshift: float = 0.0) -> int:
        """Skip m whole periods (`detect`: their checked values hold), fewer if the L2 outcomes of
        a skipped period would differ from the sampled one's; returns iterations skipped.

        Regimes. A jump cut short by a different L2 outcome (a miss among hits) leaves its regime
        (P, d, the sampled periods' accesses, the state it started from) behind: the loop runs
        that period normally and `reenter` checks at each following period boundary whether the
        state, relative to its latest clock, is again the one the regime started from (`_back`):
        then the loop is back in the same periodic regime (max-plus evolution from the same
        relative state) and jumps again without sampling two new periods. `regime`: the one being
        re-entered; `tshift`: chip time of the current state minus that of the regime's starting
        state (the skipped periods' accesses are the sampled period's moved by it, and by whole
        periods)."""
        F = self.F
        idx = self.hist[-1][0]
        # no skipped iteration may hold a subview out of bounds: it would raise when run. Its
        # offsets and sizes are the iv, checked values or invariants, which advance by the same
        # step every period here (`_periods_checked`), so per position in the period the bounds
        # hold for all m periods when they hold for the first and the last
        if not self._in_bounds(chain(range(idx, idx + P), range(idx + (m - 1) * P, idx + m * P))):
            return self._no_jump(regime, idx + P)
        if regime is None:
            q, oshift = 0, None
        else:
            q, oshift = (idx - regime[7]) // P, regime[9]
        stopped = False
        L = len(cur.cid)
        rep = None
        if L:
            # a fresh jump that may skip the loop's tail too (`_tail`) needs row m + 1
            tail = regime is None and 0 < self.n - idx - m * P < P
            rep = _Replay.of(prev, cur, q + m + tail, self)
            nr = rep.nr
            if oshift is None:  # rows q+1 .. q+m of the tables: views
                off, keys = rep.off[q * L:(q + m) * L], rep.keys[q * L:(q + m) * L]
            else:
                off = (rep.off[q * L:(q + m) * L].reshape(m, L) + oshift).ravel()
                keys = (rep.keys[q * L:(q + m) * L].reshape(m, L) + oshift).ravel()
            cid, sid, rd, hit, wr, hits, t = rep.rows(m)
            if tshift != 0.0:  # (cur.t + tshift) + k·dt, as the accesses of a period k periods on
                t = ((cur.t + tshift) + rep.kdt[:m]).ravel()
            rk = rt = seen = None
            cut = m  # the first period whose accesses get other L2 outcomes than the sampled one's
            if nr < L:  # (a write's outcome depends on the tiles written before: by other blocks too)
                cut = first_write_change(F, keys[wr], t[wr], hit[wr]) // (L - nr)
            if nr:
                rk, rt = (keys, t) if nr == L else (keys[rd], t[rd])
                seen = []
                cut = min(cut, F.l2_pass.first_change(F.l2, rk, rt, F.block, F.kernel_start, rep.chit, rep.misses, seen) // nr)
            if cut < m:
                m = cut
                stopped = True
                if m < 1:
                    return self._no_jump(regime, idx + P)
                off, keys = off[:m * L], keys[:m * L]
                if nr:
                    rk, rt = rk[:m * nr], rt[:m * nr]
                cid, sid, rd, hit, wr, hits, t0 = rep.rows(m)
                t = t0 if tshift == 0.0 else t[:m * L]
            if self.track is not None:  # periods q+1..q+m after the sampled one, per access
                self.track.jumps[len(F.gm_log)] = (cur.it0 + P * np.arange(q + 1, q + m + 1, dtype=np.int64)[:, None] + cur.ph[None, :]).ravel()
            # logged even when this loop owns the log: LoopMemo stores a loop's every access
            _apply_accesses(F, Acc(cid, sid, off, t, rd, hit), keys, off, t, hits if nr else None, allrd=nr == L,
                            nhit=(m * (nr - len(rep.misses))) if nr else None, rk=rk, rt=rt, wr=wr, seen=seen)
        if regime is None and (stopped or self.first is None):
            h = self.hist
            # [P, d, prev, cur, _back's cache, next boundary, starting state, its iteration, S decided nothing, address shift]
            fresh = [P, d, prev, cur, [None], 0, self._clocks(), idx, h[-1][5] == h[-1 - 2 * P][5], None]
            if self.first is None:
                self.first = (h[-1], fresh)
            if stopped:
                regime = fresh
        if stopped:
            regime[5] = idx + (m + 1) * P
            self.regime = regime
        else:
            self.regime = None
        self._advance(d, m)
        r = self._tail(P, d, idx, m, cur, rep) if regime is None and not stopped else 0
        self.hist.clear()
        return m * P + r

    def _in_bounds(self, iters) -> bool:
        """Whether the loop-level GM subviews that move with the iv (`inb`) are in bounds in each
        of the iterations `iters` (True when none moves)."""
        inb = self.inb
        return inb is None or all([inb(i, self.value_of(i)) for i in iters])

    def _no_jump(self, regime: list | None, boundary: int) -> int:
        """No period is skipped (returns 0): a fresh regime's samples are dropped (two new periods
        are sampled), a regime being re-entered runs the next period normally and is checked
        again at its end, iteration `boundary`."""
        if regime is None:
            self.hist.clear()
        else:
            regime[5] = boundary
            self.regime = regime
        return 0

    def _tail(self, P: int, d: list[float], idx: int, m: int, cur: Acc, rep: _Replay | None) -> int:
        """After a fresh jump of m whole periods from idx that ran to the end of them, skip the
        r < P iterations left before the loop ends too (returns r, or 0 when they run normally).
        The sampled periods, taken at offset r instead of 0, must show the same: equal queue
        lengths, the same per-period delta of every clock and counter as `d` (exactly), the same
        kind of GM accesses, the checked values keeping their step up to the end, and the same
        L2 outcomes. Then iteration idx + mP + r is iteration idx - P + r moved by m + 1
        periods: its state and its accesses. Those accesses are the first ones of the jump's
        sampled period `cur` (its first r iterations), so row m + 1 of the jump's tables `rep`
        (`_Replay`) holds them; the same kind as in the period before, as `detect` compared the
        whole periods, when the first r iterations of both made as many accesses."""
        r = self.n - idx - m * P
        h = self.hist
        if not 0 < r < P or len(h) < 2 * P + 1:
            return 0
        k = len(h) - 1
        a, b = h[k - 2 * P + r], h[k - P + r]
        if a[2] != b[2]:
            return 0
        F = self.F
        c = F.core
        ns = len(c.free)
        nfix = 3 * ns + len(F.acct)
        vb = b[1]
        dr = list(map(sub, vb, a[1]))
        if dr[:nfix] != d[:nfix]:
            return 0
        if self._checked_to(P, idx + m * P, self.n)[0] < self.n:
            return 0
        if not self._in_bounds(range(idx + m * P, self.n)):
            return 0
        # accesses of the first r iterations of the previous and current sampled period
        log = F.gm_log
        nt = _naccesses(log[h[k - P][3]:b[3]])
        if _naccesses(log[h[k - 2 * P][3]:a[3]]) != nt:
            return 0
        if nt:
            i = m * len(cur.cid)  # row m + 1 (times at time shift 0: a fresh jump's)
            off, keys, t, rd = rep.off[i:i + nt], rep.keys[i:i + nt], rep.t[i:i + nt], cur.rd[:nt]
            nr = int(np.count_nonzero(rd))
            hit = rk = rt = seen = None
            misses: list[int] = []
            if nr:
                rk, rt = (keys, t) if nr == nt else (keys[rd], t[rd])
                misses = [p for p in rep.misses if p < nr]
                seen = []
                if F.l2_pass.first_change(F.l2, rk, rt, F.block, F.kernel_start, rep.chit[:nr], misses, seen) < nr:
                    return 0
                hit = rep.hits[:nr]
            if nr < nt:  # (the writes' outcomes, as in `jump`)
                wr = ~rd
                if first_write_change(F, keys[wr], t[wr], cur.hit[:nt][wr]) < nt - nr:
                    return 0
            if self.track is not None:
                self.track.jumps[len(F.gm_log)] = cur.it0 + (m + 1) * P + cur.ph[:nt]
            _apply_accesses(F, Acc(cur.cid[:nt], cur.sid[:nt], off, t, rd, cur.hit[:nt]), keys, off, t, hit, allrd=nr == nt,
                            nhit=nr - len(misses), rk=rk, rt=rt, seen=seen)
        fm = float(m + 1)  # the same products as with the int, without int * float's slow path
        v = [x + fm * y for x, y in zip(vb, dr)]
        c.free[:] = v[:ns]
        c.done[:] = v[ns:2 * ns]
        c.busy[:] = v[2 * ns:3 * ns]
        F.acct[:] = v[3 * ns:nfix]
        j = nfix
        for q, ln in zip(F.flags.queues, b[2]):
            q.clear()
            q.extend(v[j:j + ln])
            j += ln
        return r

    def reenter(self, idx: int) -> int:
        """At the regime's next period boundary: jump again if the state is back (see `jump`)."""
        r = self.regime
        if idx != r[5]:
            return 0
        P = r[0]
        m = (self.n - idx) // P
        if m < 1:
            self.regime = None
            return 0
        ts = self._back(r)
        if ts is None:
            r[5] += P  # this period runs normally
            return 0
        m = self._periods_checked(P, idx, m)
        if m < 1:
            self.regime = None
            return 0
        return self.jump(P, r[1], r[2], r[3], m, r, ts)

    def _values(self) -> tuple[list[float], tuple, list[float]]:
        """(clock values: free, done, pending flag times, in `snapshot` order; queue lengths; S
        clock of each value's unit)."""
        F = self.F
        c = F.core
        ns, npp = len(c.free), self.npipes
        qs = F.flags.queues
        vals = [*c.free, *c.done, *chain.from_iterable(qs)]
        lens = tuple(map(len, qs))
        if ns == npp:  # one unit (most kernels): one S clock
            return vals, lens, [c.free[0]] * len(vals)
        du = self.memo.dst_units_for(F)
        S = c.free[::npp]
        return vals, lens, [S[i // npp] for i in range(ns)] * 2 + [S[du[k]] for k, ln in enumerate(lens) for _ in range(ln)]

    def _clocks(self) -> tuple:
        """(clock values: free, done, pending flag times; queue lengths; S clock of each value's
        unit; index of each value in the `snapshot` vector; kernel start time)."""
        vals, lens, s = self._values()
        F = self.F
        ns = len(F.core.free)
        j = 3 * ns + len(F.acct)  # the pending flag times follow the counters, in order
        return vals, lens, s, [*range(2 * ns), *range(j, j + len(vals) - 2 * ns)], F.kernel_start

    def _back(self, r: list) -> float | None:
        """If the state now is equivalent to the state `r[6]` (`_clocks`) regime r started from,
        moved in time, how far (chip cycles); else None. Clocks at or below their S clock count
        as the S clock (LoopMemo doc (a)). Clocks that moved in the regime must sit at the same
        distance from the latest clock. Clocks that did not (pipes the loop does not use; in a
        periodic regime where every moving clock advances alike they never decide anything) must
        be at least as far behind it. S clocks must be where they were or, when they decided
        nothing in the regime, further behind. Distances compare exactly (multiples of the cycle
        quantum: costmodel/quantum.py). What depends on the starting state only is kept
        in r[4][0] (the test runs at every period boundary after a cut-short jump; the holder is
        shared with the copies LoopMemo.prefix makes of a stored regime)."""
        v0, l0, s0, pos, t0 = r[6]
        v1, l1, s1 = self._values()
        if l0 != l1:
            return None
        pre = r[4][0]
        if pre is None:
            d, ns, npp = r[1], len(self.F.core.free), self.npipes
            e0 = [max(x, s) for x, s in zip(v0, s0)]
            b0 = max(e0)
            # per value: its index, kind (0: an S clock, 1: did not move, 2: moved), distance to
            # the latest clock, at or below its S clock
            pre = r[4][0] = (b0, [(i, 0 if i < ns and i % npp == 0 else 1 if d[p] == 0.0 else 2, e - b0, x <= s)
                                  for i, (p, e, x, s) in enumerate(zip(pos, e0, v0, s0))])
        b0, plan = pre
        e1 = list(map(max, v1, s1))
        b1 = max(e1)
        s_free = r[8]
        for i, kind, r0, at_s0 in plan:
            r1 = e1[i] - b1
            if kind == 0:
                if not (r1 == r0 or (s_free and r1 < r0)):
                    return None
                continue
            at_s1 = v1[i] <= s1[i]
            if at_s0 and at_s1:
                continue
            if kind == 1:
                if r1 > r0:
                    return None
                continue
            if at_s0 != at_s1 or r1 != r0:
                return None
        return (self.F.kernel_start + b1) - (t0 + b0)

    def _advance(self, d: list[float], m: int) -> None:
        F = self.F
        c = F.core
        ns = len(c.free)
        free, dn, busy, acct = c.free, c.done, c.busy, F.acct
        m = float(m)  # the same products as with the int, without int * float's slow path
        for i in range(ns):
            free[i] += m * d[i]
            dn[i] += m * d[ns + i]
            busy[i] += m * d[2 * ns + i]
        base = 3 * ns
        for i in range(len(acct)):
            acct[i] += m * d[base + i]
        j = base + len(acct)
        for q in F.flags.queues:
            for t in range(len(q)):
                q[t] += m * d[j]
                j += 1


