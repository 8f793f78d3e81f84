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
* `LoopMemo`: a whole execution of a loop (a matmul's K loop) is stored and applied again when
  the loop is entered with the same control values from the same relative state, clamped to
  the S clocks (exact, max-plus shift invariance): the next tile of the outer loop, or another
  block running the same program on shifted addresses, costs one lookup. When only later L2
  outcomes differ (one miss among hits), `LoopMemo.prefix` applies the stored execution up to
  its first jump and the loop continues from there in that jump's regime.

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
outer loop compares and replays them like executed accesses; skipping one outer period skips its
inner loops whole.

When a loop may be extrapolated (`uniform_loop`, static, on the IR):
* no loop-carried values, no memref.load/store (data-dependent control) in the body;
* every dynamic offset of a subview of a GM buffer is affine in the *checked values* (+, −, × by
  invariants, index casts), so each GM address of a skipped iteration is known exactly. Checked
  values: the induction variable and every scalar `arith` op directly in the body or in its scf.if
  regions (FlashAttention's ring-slot offsets) whose operands are invariant or checked (div, rem,
  min, compares included); an inner loop's iv counts as invariant when its bounds are invariant
  or checked.
And at run time:
* two consecutive periods have equal deltas of every state component (relative 1e-9), execute
  the same tile-op cost entries in the same order (`Frame.cost_log`), and make the same GM accesses
  up to an address shift (same op, stream = root/shape/strides, read/write, L2 outcome);
* no clock would overtake another: sorted by value, the moving clocks' deltas do not decrease
  (otherwise the bottleneck changes later and the regime is not periodic yet);
* `SteadyLoop.jump` evaluates the checked values (pure scalar ops, cheap) of every iteration it
  would skip and skips only whole periods in which each of them advances by the same step as in
  the sampled period: the addresses, the tile sizes and the branch conditions computed in the
  body (e.g. `min(rem, tile)` of a partial tile, the parity of a ping-pong branch) are exactly
  those of the sampled period shifted, so none of them is assumed.

Remaining assumption (documented, not checked): values computed inside an inner loop from checked
values by other than affine ops keep the sampled pattern; the lowering templates compute tile
sizes and conditions at loop level.

L2 (l2.py): the GM accesses of the skipped periods are replayed into the L2 model as numpy arrays
(tile keys and times advance by their per-period deltas), in program order, so the tag store,
the recording pass's miss attribution, hit/miss counters and later kernels see every access. In
the timed pass a replayed read whose outcome (hit/miss) differs from the sampled period's would
cost differently; the jump stops before that period and the loop runs normally from there (and
may extrapolate again later). So the byte counters and L2 outcomes of an extrapolated loop are
exact; only the timing assumes the periodic regime. Extrapolation is off when tracing (the trace
needs every op) and in numerics mode.
"""

from __future__ import annotations

import functools
from itertools import chain, compress
from operator import add, is_, itemgetter, le, sub

import numpy as np
from xdsl.dialects import arith, memref, scf
from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.interpreter.timing.l2 import SHIFT, first_rewrite_change
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.exec.walk import OpTree

MIN_TRIPS = 8  # shorter loops cannot amortise detection (2 periods + a tail)
PMAX = 16  # longest period looked for (the matmul tile loop needs lcm(block_dim, tiles)/block_dim)
REL = 1e-9  # relative tolerance of "equal delta" (sums of the same float costs)

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
    inside = {id(o) for o in order}  # (ids: an xDSL op's hash is Python code)
    kind: dict[SSAValue, int] = {}
    checked: set[Operation] = set()

    def loop_level(op: Operation) -> bool:
        """Directly in the body, or in scf.if regions of it (not in an inner loop): evaluated
        once per iteration, so it can be checked like a body op (a branch not taken computes it
        harmlessly)."""
        blk = op.parent_block()
        while blk is not body:
            parent = blk.parent_op() if blk is not None else None
            if type(parent) is not scf.IfOp:
                return False
            blk = parent.parent_block()
        return True

    def k(v: SSAValue) -> int:
        if v is iv:
            return _AFF
        got = kind.get(v)
        if got is not None:
            return got
        owner = v.owner
        if type(owner) is Block:
            parent = owner.parent_op()
            if parent is None or id(parent) not in inside:
                r = _INV
            elif type(parent) is scf.ForOp and owner.args and v is owner.args[0]:
                # an inner loop's iv takes the same values every iteration if its bounds do
                r = _INV if all(k(x) == _INV or x.owner in checked for x in (parent.lb, parent.ub, parent.step)) else _OTHER
            else:
                r = _OTHER
        elif id(owner) not in inside:
            r = _INV
        elif type(owner) is arith.ConstantOp:
            r = _INV
        elif type(owner) in SCALAR_OPS and loop_level(owner):
            kinds = [k(x) for x in owner.operands]
            if all(x == _INV for x in kinds):
                r = _INV
            elif _OTHER in kinds:
                r = _OTHER
            else:
                r = _AFF  # evaluated for every skipped iteration (SteadyLoop.jump)
                checked.add(owner)
        elif type(owner) in (arith.AddiOp, arith.SubiOp):
            r = max(k(owner.lhs), k(owner.rhs))
        elif type(owner) is arith.MuliOp:
            a, b = k(owner.lhs), k(owner.rhs)
            r = _INV if a == b == _INV else _AFF if {a, b} == {_INV, _AFF} else _OTHER
        elif type(owner) is arith.IndexCastOp:
            r = k(owner.input)
        else:
            r = _INV if all(k(x) == _INV for x in owner.operands) else _OTHER
        kind[v] = r
        return r

    # classify every loop-level value first, in scf.if regions too: each scalar one that depends on
    # the iv is checked, even when only sizes or inner-loop bounds use it (a partial last tile)
    for op in order:
        if loop_level(op):
            for res in op.results:
                k(res)
    for op in order:
        if type(op) in (memref.LoadOp, memref.StoreOp, scf.ForOp) and op is not loop:
            if type(op) is not scf.ForOp:
                return None
            if op.iter_args:
                return None
        if type(op) is memref.SubviewOp:
            sv = tree.subview(op)
            if sv.gm and any(k(o) == _OTHER for o in sv.offsets):
                return None
    return [op for op in order if op in checked]


class Acc:
    """GM accesses as arrays (one entry per access, program order): op id, stream id (l2.py),
    element offset, chip time, read?, L2 hit?. `F.gm_log` holds tuples of the same fields for
    executed accesses and `Acc` records for replayed ones."""

    __slots__ = ("cid", "sid", "off", "t", "rd", "hit", "rep", "it0", "ph")

    def __init__(self, cid, sid, off, t, rd, hit):
        self.cid, self.sid, self.off, self.t, self.rd, self.hit = cid, sid, off, t, rd, hit
        self.rep = None  # _Replay: the jumps' tables when this is a sampled period
        # a sampled period of a loop with a remap.Remap: its first iteration, and the iteration
        # (within the period) of each access
        self.it0: int | None = None
        self.ph: np.ndarray | None = None

    @classmethod
    def of(cls, records: list) -> Acc:
        """Flatten a slice of `F.gm_log` (tuples and Acc records, in order) into one set of
        arrays: records by slices, tuples element by element (cheaper than converting runs of
        a few tuples to arrays: an outer loop's period alternates replayed inner loops and
        single executed accesses)."""
        if len(records) == 1 and type(records[0]) is cls:
            return records[0]
        n = 0
        arrays = False
        for r in records:
            if type(r) is cls:
                n += len(r.cid)
                arrays = True
            else:
                n += 1
        if not arrays and n > 8:
            return cls._of_tuples(records)
        out = cls(np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.float64),
                  np.empty(n, bool), np.empty(n, bool))
        cid, sid, off, t, rd, hit = out.cid, out.sid, out.off, out.t, out.rd, out.hit
        i = 0
        for r in records:
            if type(r) is cls:
                j = i + len(r.cid)
                cid[i:j], sid[i:j], off[i:j], t[i:j], rd[i:j], hit[i:j] = r.cid, r.sid, r.off, r.t, r.rd, r.hit
                i = j
            else:
                cid[i], sid[i], off[i], t[i], rd[i], hit[i] = r
                i += 1
        return out

    @classmethod
    def _of_tuples(cls, run: list[tuple]) -> Acc:
        if not run:
            z = np.zeros(0, np.int64)
            return cls(z, z, z, np.zeros(0), np.zeros(0, bool), np.zeros(0, bool))
        cid, sid, off, t, rd, hit = zip(*run)
        return cls(np.array(cid, np.int64), np.array(sid, np.int64), np.array(off, np.int64),
                   np.array(t, np.float64), np.array(rd, bool), np.array(hit, bool))

    def same_kind(self, o: Acc) -> bool:
        """The same ops, streams, directions and L2 outcomes in the same order (offsets and times
        may differ). Byte comparison: the arrays are short and of fixed dtypes."""
        return (len(self.cid) == len(o.cid) and self.cid.tobytes() == o.cid.tobytes() and self.sid.tobytes() == o.sid.tobytes()
                and self.rd.tobytes() == o.rd.tobytes() and self.hit.tobytes() == o.hit.tobytes())


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


_TILED: dict[tuple, np.ndarray] = {}  # (dtype, pattern bytes) -> the pattern repeated, most rows built so far


@functools.lru_cache(maxsize=256)
def _ks(K: int) -> tuple[np.ndarray, np.ndarray]:
    """1..K as an int64 column and as a float64 column (shared by every _Replay with K rows)."""
    ks = np.arange(1, K + 1, dtype=np.int64)[:, None]
    return ks, ks.astype(np.float64)


def _tiled(x: np.ndarray, K: int) -> np.ndarray:
    """_tile(x, K) for a pattern of op ids, stream ids or outcome flags, shared by every _Replay
    with the same pattern (another block's jumps, the next execution of the loop): a view of
    one table with at least K rows. (Tables are never written to.)"""
    key = (x.dtype.char, x.tobytes())
    got = _TILED.get(key)
    n = K * len(x)
    if got is None or len(got) < n:
        if got is None and len(_TILED) >= 256:
            _TILED.clear()
        got = _TILED[key] = _tile(x, K)
    return got[:n]


def _naccesses(records: list) -> int:
    """GM accesses in a slice of `F.gm_log` (an executed access is one tuple, a replayed run one
    `Acc`)."""
    return sum(len(r.cid) if type(r) is Acc else 1 for r in records)


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

    __slots__ = ("F", "hist", "n", "vals", "tops", "memo", "npipes", "regime", "bad", "first", "gen", "same", "track")

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

    def snapshot(self, idx: int) -> None:
        F = self.F
        c = F.core
        qs = F.flags.queues
        vec = c.free + c.done + c.busy + F.acct
        for q in qs:  # (most flag queues are empty)
            if q:
                vec += q
        h = self.hist
        h.append((idx, vec, [*map(len, qs)], len(F.gm_log), len(F.cost_log), F.s_clock_decisions))
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
        # P <= n - idx: a longer period has no whole period left to skip
        hr = h[::-1]  # hr[P] = h[-1 - P]
        for P in range(1, min(PMAX, (len(h) - 1) // 2, self.n - idx) + 1):
            # cheapest tests first: structure (cost-entry counts, the first cost entry: most
            # candidates differ there), queue lengths and log counts, then the cost entries, then
            # every state component
            b, a = hr[P], hr[2 * P]
            la, lb_ = a[4], b[4]
            if lb_ - la != lc - lb_ or lb_ > la and sig[la] is not sig[lb_]:
                continue
            if bad and bad.get(P, 0) >= 2:  # its checked values failed twice: not this loop's period
                continue
            if b[2] != qc or a[2] != qc or b[3] - a[3] != gc - b[3]:
                continue
            if not all(map(is_, sig[la:lb_], sig[lb_:lc])):  # the same cost entries
                continue
            va, vb = a[1], b[1]
            # the pipe clocks first, one by one (the same test as below, on the components where
            # a transient shows): most calls are rejected here without building two delta lists
            for x, y, z in zip(vc[:ns], vb[:ns], va[:ns]):
                e = (x - y) - (y - z)
                if e and abs(e) > REL * max(1.0, abs(x)):
                    break
            else:
                e = 0.0
            if e:
                continue
            d = list(map(sub, vc, vb))
            d0 = list(map(sub, vb, va))
            # not exactly equal: within the tolerance? A largest difference e <= REL passes every
            # component (REL <= REL·max(1, |z|)); e > REL·max(1, largest |z|) fails at its own
            # component; else test the components that differ
            if d != d0 and not (e := max(map(abs, map(sub, d0, d)))) <= REL:
                z = max(map(abs, vc))
                if z == z and e > REL * max(1.0, z):  # (z == z: a NaN can hide larger values from max)
                    continue
                ok = True
                for x, y, z in zip(d0, d, vc):
                    if x != y and abs(x - y) > REL * max(1.0, abs(z)):
                        ok = False
                        break
                if not ok:
                    continue
            if not self._no_overtaking(vc, d):
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
        if not ds:
            return True
        lo = min(ds)
        if max(ds) - lo <= REL * max(1.0, abs(lo)):  # all advance alike
            return True
        moving = sorted(zip(compress(v[:2 * ns] + v[j:], dc), ds))
        ys = list(map(itemgetter(1), moving))
        if all(map(le, ys, ys[1:])):  # deltas in clock order never decrease: no pair below fails
            return True
        for (x0, d0), (x1, d1) in zip(moving, moving[1:]):
            if d1 < d0 - REL * max(1.0, abs(d0)) and x1 > x0:
                return False
        return True

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
            if rep.vals is not None and nr < L:  # remapped writes may rewrite other tiles (remap.py)
                cut = first_write_change(F, keys[wr], t[wr], hit[wr]) // (L - nr)
            if nr:
                rk, rt = (keys, t) if nr == L else (keys[rd], t[rd])
                seen = []
                cut = min(cut, F.l2_pass.first_change(F.l2, rk, rt, F.block, F.kernel_start, rep.chit, rep.misses, seen) // nr)
            if cut < m:
                m = cut
                stopped = True
                if m < 1:
                    if regime is None:
                        self.hist.clear()
                    else:  # the next period differs again: it runs normally
                        regime[5] = idx + P
                        self.regime = regime
                    return 0
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

    def _tail(self, P: int, d: list[float], idx: int, m: int, cur: Acc, rep: _Replay | None) -> int:
        """After a fresh jump of m whole periods from idx that ran to the end of them, skip the
        r < P iterations left before the loop ends too (returns r, or 0 when they run normally).
        The sampled periods, taken at offset r instead of 0, must show the same: equal queue
        lengths, the same per-period delta of every clock and counter as `d` (REL), the same
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
        if dr[:nfix] != d[:nfix]:  # not exactly equal: within the tolerance?
            for x, y, z in zip(dr[:nfix], d[:nfix], vb):
                if x != y and abs(x - y) > REL * max(1.0, abs(z)):
                    return 0
        if self._checked_to(P, idx + m * P, self.n)[0] < self.n:
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
            if rep.vals is not None and nr < nt:  # remapped writes (remap.py)
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
        nothing in the regime, further behind. What depends on the starting state only is kept
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
                if not (abs(r1 - r0) <= 1e-6 or (s_free and r1 <= r0 + 1e-6)):
                    return None
                continue
            at_s1 = v1[i] <= s1[i]
            if at_s0 and at_s1:
                continue
            if kind == 1:
                if r1 > r0 + 1e-6:
                    return None
                continue
            if at_s0 != at_s1 or abs(r1 - r0) > 1e-6:
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


# ----------------------------------------------------------------------------------------------
# reuse of a whole loop execution (nested regimes, across blocks)
# ----------------------------------------------------------------------------------------------
def _external(v: SSAValue, inside: set[int]) -> bool:
    """Whether `v` is defined outside the ops whose ids are `inside`."""
    owner = v.owner
    if type(owner) is Block:
        parent = owner.parent_op()
        return parent is None or id(parent) not in inside
    return id(owner) not in inside


def memo_inputs(loop: scf.ForOp, tree: OpTree | None = None) -> tuple[list[SSAValue], list[SSAValue], dict[Operation, tuple[SSAValue, list[tuple[int, int]]]]]:
    """What one execution of `loop` depends on, for `LoopMemo`: (control values, address
    values, GM copies). Address values are values defined outside the loop whose only uses inside
    are dynamic offsets of subviews of GM buffers defined outside the loop: they move the GM
    addresses (by value × the buffer's element stride) and nothing else. Every other outside value
    used inside (bounds, sizes, conditions, buffers) is a control value. GM copies: copy op ->
    (the subview's source, [(dim, index into address values)]) for copies whose GM operand is
    such a subview. `tree`: as for `uniform_loop`."""
    if tree is None:
        tree = OpTree(loop)
    ops = tree.walk(loop)
    inside = {id(o) for o in ops}
    uses: dict[SSAValue, list] = {}
    other: set[SSAValue] = set()
    for op in ops:
        sv = tree.subview(op) if type(op) is memref.SubviewOp else None
        gm_sv = sv is not None and sv.gm and _external(sv.source, inside)
        dyn_dims = sv.dyn_offsets if gm_sv else []
        offsets = sv.offsets if gm_sv else ()
        for v in op.operands:
            if not _external(v, inside):
                continue
            uses.setdefault(v, [])
            if gm_sv and any(v is o for o in offsets):
                continue
            other.add(v)
        for k, o in enumerate(offsets):
            if _external(o, inside):
                uses[o].append((op, dyn_dims[k]))
    addr = [v for v in uses if v not in other and uses[v]]
    ctrl = [v for v in uses if v not in addr]
    return ctrl, addr, offset_copies(ops, tree, addr, uses)


def offset_copies(ops: list[Operation], tree: OpTree, addr: list[SSAValue],
                  uses: dict[SSAValue, list[tuple[Operation, int]]]) -> dict[Operation, tuple[SSAValue, list[tuple[int, int]]]]:
    """The copies among `ops` whose GM operand is a subview offset by values of `addr`: copy op
    -> (the subview's source, [(dim, index into addr)]). `uses`: value -> the (subview, dim)
    pairs it offsets."""
    index = {v: j for j, v in enumerate(addr)}
    by_sv: dict[Operation, list[tuple[int, int]]] = {}
    for v in addr:
        for op, dim in uses[v]:
            by_sv.setdefault(op, []).append((dim, index[v]))
    copies: dict[Operation, tuple[SSAValue, list[tuple[int, int]]]] = {}
    for op in ops:
        if type(op) is ascend.CopyOp:
            for g in (op.source, op.dest):
                sv = g.owner
                if type(sv) is memref.SubviewOp and sv in by_sv:
                    copies[op] = (tree.subview(sv).source, by_sv[sv])
    return copies


def never_again(loop: scf.ForOp, ctrl: list[SSAValue]) -> bool:
    """Whether no stored execution of `loop` can ever be reused (`LoopMemo.once`): the loop is
    nested in no loop, so it runs at most once per block, and the block index is one of its
    control values, so no two blocks' keys are equal (kernel.py runs each block once per pass and
    empties the tables per pass). Such a loop skips `LoopMemo` altogether (its key, the failed
    lookups and its stores cost ~0.1 ms per block for nothing)."""
    p = loop.parent_op()
    while p is not None and type(p) is not ascend.KernelOp:
        if type(p) in (scf.ForOp, scf.WhileOp):
            return False
        p = p.parent_op()
    return p is not None and any(type(v.owner) is ascend.BlockIdxOp for v in ctrl)


def getter(slots: list[int]):
    """X -> X[slots[0]], X[slots[1]], ... as a tuple; X[slots[0]] alone for one slot, None for none
    (one C call where there are several)."""
    return itemgetter(*slots) if len(slots) > 1 else (lambda X, s=slots[0]: X[s]) if slots else (lambda X: None)


VARIANTS = 8  # stored executions per key (L2 outcome patterns differ between blocks)
KEYS = 256  # keys per loop before it stops storing


class LoopMemo:
    """Reuse of one loop's whole execution (timing-only, with extrapolation on).

    Why it is exact. Every clock update of the timeline (timeline.py, compiler.py) is a max or a
    sum of clocks and constant costs, and every op's start is a max with its unit's S clock (the
    scalar unit issues in order), which only moves forward. Hence:
    (a) a pipe clock, completion time or pending flag time at or below its unit's S clock acts
        exactly like the S clock; `enter` raises it there ("clamps") and the key marks it "S";
    (b) shifting every other clock by the same c shifts every later clock by c (max-plus
        algebra), and busy times, bytes, flops and tile ops grow by the same amounts;
    (c) the S clock runs behind the pipes in most loops (issuing is cheap, the pipes are the
        bottleneck): when no S clock decided anything during the stored execution (`Frame.s_clock_decisions`
        did not move: no op started at its S clock, no clock stayed at it), a new entry whose S
        clocks lag at least as far behind gets the same result, and S itself advances by the
        same scalar charges. Otherwise the S clocks' relative positions are part of the key.
    So an execution depends on its control values (`memo_inputs`), on the clamped clocks relative
    to the latest one (rounded to 1e-6 cycles) and on the L2 outcomes of its reads. A stored
    execution with the same key is applied when its reads, moved to the new addresses (address
    values × element strides) and times (shifted by c), get the same L2 outcomes; its GM accesses
    are replayed into the L2 as arrays, like steady-state jumps. This is what makes an inner loop
    (a matmul's K loop) cost nothing once its outer loop, or another block, has run it from the
    same relative state: nested periodic regimes, and blocks running the same program on shifted
    addresses.
    """

    __slots__ = ("ctrl", "addr", "copies", "table", "dst_units", "flag_keys", "npipes", "ctrl_key", "once")

    def __init__(self, ctrl: list[int], addr: list[int], copies: dict[int, tuple[int, list[tuple[int, int]]]], flag_keys: dict, npipes: int,
                 ctrl_mem: list[bool | str] | None = None, once: bool = False):
        self.ctrl = ctrl  # slots of the control values
        self.once = once  # never_again: the loop's executions are never stored nor looked up
        # the control part of the key: scalars as they are, buffers as (shape, address tag);
        # `ctrl_mem` (static, per control value: False for a scalar, else whether the memref
        # type has a static shape, which then need not be looked at) lets it be built without tests
        self.ctrl_key = None
        if ctrl_mem is not None:
            sc = [s for s, mm in zip(ctrl, ctrl_mem) if mm is False]
            fixed = [s for s, mm in zip(ctrl, ctrl_mem) if mm == "static"]
            dyn = [s for s, mm in zip(ctrl, ctrl_mem) if mm == "dynamic"]

            get, get_tags = getter(sc), getter(fixed)
            if dyn:
                self.ctrl_key = lambda R, A: (get(R), get_tags(A), *[(R[s].shape, A[s]) for s in dyn])
            else:  # (the common case) without an empty comprehension per call
                self.ctrl_key = lambda R, A: (get(R), get_tags(A))
        self.addr = addr  # slots of the address values
        self.copies = copies  # id(copy op) -> (source slot, [(dim, address index)])
        self.table: dict[tuple, list] = {}
        self.flag_keys = flag_keys  # (src slot, dst slot, event) -> flag key (filled while compiling)
        self.npipes = npipes
        self.dst_units: list[int] | None = None  # flag key -> unit of its wait

    def dst_units_for(self, F) -> list[int]:
        """Unit of the wait of each flag key (clamping a pending flag time uses its S clock)."""
        du = self.dst_units
        if du is None or len(du) < len(F.flags.queues):
            du = [0] * len(F.flags.queues)
            for (_s, d, _e), k in self.flag_keys.items():
                if k < len(du):
                    du[k] = d // self.npipes
            self.dst_units = du
        return du

    def enter(self, F, R) -> tuple:
        """Clamp the core state (class doc (a)) and return what `reuse` and `store` need."""
        rel, srel, base, S = state_key(F, self.npipes, self.dst_units_for(F))
        A = F.gm_tags
        if self.ctrl_key is not None:
            ctrl = self.ctrl_key(R, A)
        else:
            ctrl = tuple([(v.shape, A[sl]) if isinstance(v, np.ndarray) else v for sl, v in zip(self.ctrl, map(R.__getitem__, self.ctrl))])
        c = F.core
        key = (ctrl, rel)
        # + the key's stored executions, looked up once for `reuse`, `prefix` and `store` (a key
        # is a few dozen values and buffer tags: hashing it again costs more than the lookup)
        return key, srel, base, S, list(c.busy), list(F.acct), F.skipped, F.s_clock_decisions, self.table.get(key)

    def reuse(self, F, R, ent: tuple, n: int) -> bool:
        """Apply a stored execution matching `ent` whose L2 outcomes hold; True when applied."""
        srel, base, S, vs = ent[1], ent[2], ent[3], ent[8]
        if not vs:
            return False
        addr = None  # the address values, built for the first candidate that needs them
        l2p = F.l2_pass
        des = None
        one = len(srel) == 1  # one unit: one S clock (the test below without a generator)
        for j in range(len(vs) - 1, -1, -1):
            v = vs[j]
            head = v[0] if len(v) == 2 else v  # (s_free, S positions) lead both forms
            hs = head[1]
            if hs != srel and not (head[0] and (srel[0] <= hs[0] + 1e-6 if one else all(a <= b + 1e-6 for a, b in zip(srel, hs)))):
                continue
            if len(v) == 2:  # stored raw (`store`): arrays built on the first match
                v = vs[j] = self._finish(*v)
            ri, misses = v[15], v[17]
            sh = None  # the table rows' shifts (Coefs.row_shifts)
            hit = None
            if len(ri):  # _outcomes_hold over all the reads, its cheap tests first
                if des is None and not l2p.recording:  # the same for every candidate
                    des = l2p._designated(F.block, l2p.ordinal.get(F.block, 0), len(ri))
                    des_set = frozenset(des)
                if des is None:
                    if misses:  # recording pass: every read hits
                        continue
                elif not misses <= des_set:  # a stored miss that is no designated miss now
                    continue
            s_free, vsrel, vbase, vS, ef, ed, eq, dS, dbusy, dacct, acc, coefs, vaddr, vt0, _skipped, ri, rhit, misses, _cp, keys0, allrd, nhit, token, lists = v
            tshift = (F.kernel_start + base) - (vt0 + vbase)
            if coefs is not None:
                if addr is None:
                    addr = [R[s] for s in self.addr]
                sh = coefs.row_shifts(list(map(sub, addr, vaddr)))
            if len(ri):
                if des:  # the stored misses are designated ones (above): do the designated reads hold?
                    if not _designated_hold(F, acc, coefs, sh, ri, rhit, tshift, des, lists):
                        continue
                hit = rhit
            t = acc.t + tshift
            if sh is None:
                off, keys = acc.off, keys0
            else:
                cd = coefs.shift(sh)
                off, keys = acc.off + cd, keys0 + cd
            _apply_accesses(F, acc, keys, off, t, hit, allrd, nhit)
            self._restore(F, S, vS, base - vbase, ef, ed, eq, dS, dbusy, dacct, s_free)
            if j != len(vs) - 1:  # most recently used last: `store` drops the first
                vs.append(vs.pop(j))
            F.skipped += n
            if F.cost_log is not None:
                F.cost_log.append(token)
            return True
        return False

    def prefix(self, F, R, ent: tuple, n: int) -> tuple | None:
        """When no stored execution applies whole (`reuse`: another L2 outcome later on, e.g. one
        miss among hits), apply the part of one up to its first sampled jump, if the reads of that
        part get the same outcomes: the loop then starts at that jump's iteration, in its regime
        (`SteadyLoop.jump`), instead of running its transient and sampling two periods. Exact for
        the same reasons as `reuse`. Returns (iteration, P, d, prev, cur, regime, time shift)."""
        srel, base, S, vs = ent[1], ent[2], ent[3], ent[8]
        if not vs:
            return None
        l2p, npipes = F.l2_pass, self.npipes
        addr = None  # the address values, built for the first candidate that needs them
        one = len(srel) == 1  # one unit: one S clock (as in `reuse`)
        for j in range(len(vs) - 1, -1, -1):
            v = vs[j]
            head, cp = (v[0], v[1][2]) if len(v) == 2 else (v, v[18])  # tests on either form first
            if cp is None or cp[0] >= n - 1:
                continue
            hs = head[1]
            if hs != srel and not (head[0] and (srel[0] <= hs[0] + 1e-6 if one else all(a <= b + 1e-6 for a, b in zip(srel, hs)))):
                continue
            if len(v) == 2:
                v = vs[j] = self._finish(*v)
            # (the tests above hold for the finished form: same S positions and checkpoint)
            s_free, vbase, vS = v[0], v[2], v[3]
            acc, coefs, vaddr, vt0, ri, rhit, misses, cp = v[10], v[11], v[12], v[13], v[15], v[16], v[17], v[18]
            if coefs is not None and addr is None:
                addr = [R[s] for s in self.addr]
            idx0, vec, lens, npre, regime, dbusy, dacct, rows, nr = cp  # nr: reads before the checkpoint
            dv = list(map(sub, addr, vaddr)) if coefs is not None else None  # address-value delta
            sh = coefs.row_shifts(dv) if dv is not None else None  # the table rows' shifts
            tshift = (F.kernel_start + base) - (vt0 + vbase)
            c_shift = base - vbase
            if nr:
                des = None if l2p.recording else l2p._designated(F.block, l2p.ordinal.get(F.block, 0), nr)
                if not _outcomes_hold(F, acc, coefs, sh, ri, rhit, misses, tshift, nr, des, v[23]):
                    continue
            part = Acc(acc.cid[:npre], acc.sid[:npre], acc.off[:npre], acc.t[:npre], acc.rd[:npre], acc.hit[:npre])
            off = part.off if sh is None else part.off + coefs.shift(sh)[:npre]
            _apply_accesses(F, part, part.sid * SHIFT + off, off, part.t + tshift, rhit[:nr] if nr else None)
            ns = len(F.core.free)
            k = 3 * ns + len(F.acct)
            eq = []
            for ln in lens:
                eq.append(vec[k:k + ln])
                k += ln
            dS = [vec[u * npipes] - x for u, x in enumerate(vS)]  # S clock advance per unit
            self._restore(F, S, vS, c_shift, vec[:ns], vec[ns:2 * ns], eq, dS, dbusy, dacct, s_free)
            P, d, prev, cur = regime[0], regime[1], regime[2], regime[3]
            oshift = None
            if dv is not None and any(dv):
                by_op = dict(zip(rows, _row_dot(len(dv))(list(rows.values()), dv)))  # copy op -> its shift
                oshift = np.array([by_op.get(c, 0) for c in cur.cid.tolist()], np.int64)
            return idx0, P, d, prev, cur, [P, d, prev, cur, regime[4], 0, regime[6], idx0, regime[8], oshift], tshift
        return None

    def _restore(self, F, S, vS, c_shift: float, ef, ed, eq, dS, dbusy, dacct, s_free: bool) -> None:
        """Set the core's clocks and flag queues to a stored execution's end (`ef` / `ed` / `eq`:
        free, done, pending flag times; moved by `c_shift`, or pinned to the unit's S clock `S`
        where they were at the stored one `vS`; each S clock advances by `dS`) and add its busy
        and byte/flop counter deltas."""
        core, npipes = F.core, self.npipes
        if len(core.free) == npipes:  # one unit: one S clock (as below, without unit lookups)
            s, v = S[0], vS[0]
            # every stored clock in one comprehension: free, done, then the queues' times in order
            x = [s if y == v else y + c_shift for y in chain(ef, ed, *eq)]
            ns = npipes
            x[0] = s + dS[0]  # the S clock advances by the stored execution's scalar charges
            core.free[:] = x[:ns]
            core.done[:] = x[ns:2 * ns]
            k = 2 * ns
            for q, ts in zip(F.flags.queues, eq):
                if ts:
                    q.clear()
                    q.extend(x[k:k + len(ts)])
                    k += len(ts)
                elif q:
                    q.clear()
            core.busy[:] = map(add, core.busy, dbusy)  # (the slice assignment takes the map whole first)
            F.acct[:] = map(add, F.acct, dacct)
            if not s_free:
                F.s_clock_decisions += 1
            return
        units = range(len(core.free))
        core.free[:] = [S[i // npipes] + dS[i // npipes] if i % npipes == 0
                        else S[i // npipes] if ef[i] == vS[i // npipes] else ef[i] + c_shift for i in units]
        core.done[:] = [S[i // npipes] if ed[i] == vS[i // npipes] else ed[i] + c_shift for i in units]
        du = self.dst_units
        for k, (q, ts) in enumerate(zip(F.flags.queues, eq)):
            if q or ts:
                u = du[k]
                q.clear()
                q.extend([S[u] if x == vS[u] else x + c_shift for x in ts])
        core.busy[:] = [a + b for a, b in zip(core.busy, dbusy)]
        F.acct[:] = [a + b for a, b in zip(F.acct, dacct)]
        if not s_free:
            F.s_clock_decisions += 1  # an S clock decided something in the applied execution

    def store(self, F, R, ent: tuple, log: list, first: tuple | None = None, g0: int = 0, collapse: bool = False) -> tuple | None:
        """Keep the execution that just ran from `ent` (its GM accesses: `log`, records of
        `F.gm_log`). Kept raw: most stored executions of an outer loop never match again, so their
        arrays are built by `_finish` on the first match only; `collapse`: build them now, as one
        `Acc` record. Returns (the stored execution's token: what `reuse` appends to `Frame.cost_log`
        when it applies it; the log as stored), None when not stored."""
        key, srel, base, S, busy0, acct0, skipped0, srel0, vs = ent
        if vs is None:  # (the table is emptied per pass only: `enter`'s lookup still holds)
            if len(self.table) >= KEYS:
                return None
            vs = self.table[key] = []
        c = F.core
        npipes = self.npipes
        coef_rows = {}
        for cid, (src, dims) in self.copies.items():
            tag = F.gm_tags[src]
            if tag is not None:
                row = [0] * len(self.addr)
                for dim, j in dims:
                    row[j] += tag[2][dim]
                coef_rows[cid] = row
        dS = [c.free[u * npipes] - S[u] for u in range(len(S))]
        cp = None
        if first is not None:  # (snapshot at the first sampled jump, its regime)
            snap, regime = first
            ns, na = len(c.free), len(F.acct)
            vec = snap[1]
            # accesses before the checkpoint (the log may be collapsed into one record later)
            npre = _naccesses(log[:snap[3] - g0])
            cp = (snap[0], vec, snap[2], npre, regime,
                  [b - a for a, b in zip(busy0, vec[2 * ns:3 * ns])], [b - a for a, b in zip(acct0, vec[3 * ns:3 * ns + na])])
        if collapse and log:
            log = [Acc.of(log)]
        head = (
            F.s_clock_decisions == srel0, srel, base, list(S), list(c.free), list(c.done), [list(q) for q in F.flags.queues], dS,
            [b - a for a, b in zip(busy0, c.busy)], [b - a for a, b in zip(acct0, F.acct)],
            None, None, [R[s] for s in self.addr], F.kernel_start, F.skipped - skipped0,
        )
        vs.append((head, (log, coef_rows, cp)))
        if len(vs) > VARIANTS:
            del vs[0]
        return head, log

    def _finish(self, head: tuple, raw: tuple) -> tuple:
        log, coef_rows, cp = raw
        acc = Acc.of(log)
        coefs = None
        if self.addr and len(acc.cid):
            rows, inv = _op_rows(acc.cid)
            zero = [0] * len(self.addr)
            coefs = Coefs([coef_rows.get(c, zero) for c in rows], inv)
        vaddr = head[12]
        rd = acc.rd
        allrd = bool(rd.all())
        if allrd:  # (a K loop's accesses: reads only) the reads are the accesses
            ri, rhit = np.arange(len(rd)), acc.hit
        else:
            ri, rhit = np.flatnonzero(rd), acc.hit[rd]
        if cp is not None:  # + the coefficient rows, the number of reads before the checkpoint
            cp = (*cp, coef_rows, cp[3] if allrd else int(np.searchsorted(ri, cp[3])))
        misses = _miss_positions(rhit)
        # + the keys before the address shift, whether every access reads, the reads' hit count,
        # the token, a cache for `_designated_hold`
        return (*head[:10], acc, coefs, vaddr, head[13], head[14],
                ri, rhit, misses, cp,
                acc.sid * SHIFT + acc.off, allrd, len(rhit) - len(misses), head, [])


_OP_ROWS: dict[bytes, tuple[list[int], np.ndarray]] = {}


def _op_rows(cid: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The distinct op ids of a stored execution's accesses in first-access order (one `Coefs`
    row each: few ops, many accesses) and each access's row. Shared between executions with the
    same op sequence (a loop's executions mostly have one: converting it costs more than the
    lookup)."""
    key = cid.tobytes()
    got = _OP_ROWS.get(key)
    if got is None:
        cids = cid.tolist()
        rows = {c: i for i, c in enumerate(dict.fromkeys(cids))}
        if len(_OP_ROWS) >= 256:
            _OP_ROWS.clear()
        got = _OP_ROWS[key] = (list(rows), np.array(list(map(rows.__getitem__, cids)), np.int64))
    return got


_MISSES: dict[bytes, frozenset] = {}


def _miss_positions(hit: np.ndarray) -> frozenset:
    """Positions of the False entries of `hit` (a stored execution's read outcomes): a Python
    scan of a few dozen outcomes costs less than numpy calls, and looking the pattern up (few
    patterns: all hits, a miss every so many reads) less than the scan."""
    key = hit.tobytes()
    got = _MISSES.get(key)
    if got is None:
        if len(_MISSES) >= 256:
            _MISSES.clear()
        got = _MISSES[key] = frozenset([p for p, h in enumerate(hit.tolist()) if not h])
    return got


def state_key(F, npipes: int, dst_units: list[int], clamp: bool = True) -> tuple[tuple, tuple, float, list[float]]:
    """The core's clocks clamped to their unit's S clock (LoopMemo doc (a), exact; `clamp`:
    write the clamped values back) as (the flag queue lengths, then the clocks relative to the
    latest one in integer units of 1e-6 cycles (rounded), "S" for those at or below their S
    clock; the S clocks relative to it; the latest clock; the S clocks)."""
    c = F.core
    free, done = c.free, c.done
    ns = len(free)
    queues = F.flags.queues
    if ns == npipes:  # one unit (most kernels): one S clock, the same key built without unit lookups
        s = free[0]
        # every clock in one flat list (the key is the same sequence as free, done, then each
        # queue's times: a queue's length is in the key's first part), clamped in one comprehension
        vals = [*free, *done, *chain.from_iterable(queues)]
        if clamp and min(vals) < s:
            vals = [s if x < s else x for x in vals]
            free[:] = vals[:ns]
            done[:] = vals[ns:2 * ns]
            k = 2 * ns
            for q in queues:
                if q:  # (rewritten whether or not it changed: cheaper than testing)
                    m = len(q)
                    q.clear()
                    q.extend(vals[k:k + m])
                    k += m
        base = max(vals[:2 * ns])
        rel = [tuple(map(len, queues))]
        rel += ["S" if x <= s else round((x - base) * 1e6) for x in vals]
        return tuple(rel), (round(s - base, 6),), base, [s]
    S = [free[u] for u in range(0, ns, npipes)]
    if clamp:
        for i in range(ns):
            s = S[i // npipes]
            if free[i] < s:
                free[i] = s
            if done[i] < s:
                done[i] = s
        for k, q in enumerate(queues):
            if q:
                s = S[dst_units[k]]
                for j in range(len(q)):
                    if q[j] < s:
                        q[j] = s
    base = max(max(free), max(done))
    rel: list = [tuple(map(len, queues))]
    for i, x in enumerate(free):
        rel.append("S" if x <= S[i // npipes] else round((x - base) * 1e6))
    for i, x in enumerate(done):
        rel.append("S" if x <= S[i // npipes] else round((x - base) * 1e6))
    for k, q in enumerate(queues):
        if q:
            s = S[dst_units[k]]
            rel.extend(["S" if t <= s else round((t - base) * 1e6) for t in q])
    return tuple(rel), tuple(round(x - base, 6) for x in S), base, S


class Coefs:
    """Address coefficients of a stored execution's GM accesses (LoopMemo): access i moves by
    `table[inv[i]] @ dv` elements when the address values move by dv (one table row per copy op;
    `table`: Python lists of ints, a few rows of a few values, where numpy calls cost more than
    the sums)."""

    __slots__ = ("table", "inv", "dot")

    def __init__(self, table: list[list[int]], inv: np.ndarray):
        self.table, self.inv = table, inv
        self.dot = _row_dot(len(table[0]) if table else 0)

    def row_shifts(self, dv: list[int]) -> list[int]:
        """`table @ dv`: the element-offset shift of each row for address-value delta dv (once
        per candidate: `_designated_hold` and `shift` both use it)."""
        return self.dot(self.table, dv)

    def shift(self, rows: list[int]) -> np.ndarray:
        """Element-offset shift of every access, given the rows' shifts (`row_shifts`)."""
        return np.array(rows, np.int64)[self.inv]


_ROW_DOTS: dict[int, object] = {}


def _row_dot(n: int):
    """fn(table, dv) -> [row @ dv for row in table] for rows of n values: generated
    straight-line code (as `step_test`): a few rows of one or two values, where `sum(map(...))`
    per row costs several times the arithmetic."""
    fn = _ROW_DOTS.get(n)
    if fn is None:
        body = " + ".join(f"r[{k}] * d[{k}]" for k in range(n)) or "0"
        env: dict = {}
        exec(f"def dot(t, d):\n    return [{body} for r in t]\n", env)  # noqa: S102 (our own text)
        fn = _ROW_DOTS[n] = env["dot"]
    return fn


def _outcomes_hold(F, acc: Acc, coefs, rows, ri, rhit, misses, tshift: float, nr: int, des: list[int] | None, cache: list) -> bool:
    """Whether the first `nr` reads of a stored execution (LoopMemo.reuse / .prefix), moved by
    `rows` (the table rows' shifts, `Coefs.row_shifts`) and time shift `tshift`, get their
    stored outcomes `rhit` now: only
    designated misses (l2.L2Pass; `des`, None in the recording pass) can miss, and those look at
    the chip L2 of earlier kernels."""
    if des is None:
        return not any(p < nr for p in misses)
    if not all(p in des for p in misses if p < nr):
        return False
    return _designated_hold(F, acc, coefs, rows, ri, rhit, tshift, des, cache)


def _designated_hold(F, acc: Acc, coefs, rows, ri, rhit, tshift: float, des: list[int], cache: list) -> bool:
    """The residency part of `_outcomes_hold`: every designated read `des` (indices into the
    reads `ri`) gets its stored outcome. Element by element on Python lists of the stored arrays
    (`cache`: the stored execution's, built on first use): a call looks at a handful of reads,
    where numpy's per-call and per-element costs dominate; `rows`: the row shifts
    (`Coefs.row_shifts`, None without address values)."""
    if not des:
        return True
    if not cache:
        cache.append((ri.tolist(), acc.sid.tolist(), acc.off.tolist(), acc.t.tolist(), rhit.tolist(),
                      coefs.inv.tolist() if coefs is not None else None))
    ri_l, sid_l, off_l, t_l, hit_l, inv_l = cache[0]
    resident, t0 = F.l2.resident_before, F.kernel_start
    for p in des:
        e = ri_l[p]
        o = off_l[e] if rows is None else off_l[e] + rows[inv_l[e]]
        if resident(sid_l[e] * SHIFT + o, t_l[e] + tshift, t0) != hit_l[p]:
            return False
    return True


def first_write_change(F, keys: np.ndarray, times: np.ndarray, expect: np.ndarray) -> int:
    """l2.first_rewrite_change against the dirty map this pass's writes go to (the chip L2's in
    the timed pass, the recording pass's own)."""
    p = F.l2 if F.numerics_on else F.l2_pass
    return first_rewrite_change(p.dirty, p.window, keys, times, expect)


def _tile(x: np.ndarray, m: int) -> np.ndarray:
    """np.tile(x, m) for a 1-D x, without np.tile's Python-level overhead."""
    return x[None, :].repeat(m, 0).ravel()


def _apply_accesses(F, acc: Acc, keys: np.ndarray, off: np.ndarray, t: np.ndarray, hit: np.ndarray | None,
                    allrd: bool = False, nhit: int | None = None, rk: np.ndarray | None = None, rt: np.ndarray | None = None,
                    wr: np.ndarray | None = None, seen: list | None = None) -> None:
    """Replay GM accesses (arrays, program order) into the L2, the memo log and the enclosing
    loop's GM log, as if the ops had run. `allrd`: every access is a read (known); `nhit`: the
    number of hits in `hit` (known); `rk`, `rt`: the reads' keys and times, `wr`: the writes' mask
    (known, when not allrd); `seen`: l2.L2Pass.first_change's conversions of these reads."""
    rd = acc.rd
    if hit is not None:
        if rk is None:
            rk, rt = (keys, t) if allrd else (keys[rd], t[rd])
        F.l2_pass.read_many(F.l2, rk, rt, F.block, F.kernel_start, hit, nhit, seen)
    if not allrd:
        if wr is None:
            wr = ~rd
        if wr.any():
            if F.numerics_on:
                F.l2.store_many(keys[wr], t[wr])
            elif F.l2_pass is not None:
                F.l2_pass.store_many(keys[wr], t[wr])
    if F.numerics_on:
        if F.launch_gm_log is not None and len(keys):
            F.launch_gm_log.append((keys, t, rd))
    if F.gm_log is not None and len(keys):
        F.gm_log.append(acc if acc.off is off and acc.t is t else Acc(acc.cid, acc.sid, off, t, rd, acc.hit))
