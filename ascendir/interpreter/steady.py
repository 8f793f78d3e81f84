"""Steady-state extrapolation of uniform `scf.for` loops (timing-only mode).

A loop whose body costs the same every iteration (same op sequence, same tile sizes) drives the
per-core timeline (timeline.py) into a periodic regime after a short transient: every period of
P iterations (P = 1, or 2 for ping-pong parity branches) advances each pipe clock, busy counter,
byte/flop counter and pending flag time by the same amount. `SteadyLoop` runs iterations
normally while recording the core state at each iteration start; once two consecutive periods
show the same delta, it adds (periods skipped × delta) to the state instead of running them,
then runs the last period(s) normally (a partial last tile changes the sizes there).

When a loop may be extrapolated (`uniform_loop`, static, on the IR):
* no loop-carried values, no memref.load/store (data-dependent control) in the body;
* every dynamic offset of a subview of a GM buffer is invariant or affine in the induction
  variable (+, −, × by invariants), so GM addresses of skipped iterations are known exactly
  (the L2 needs them); an inner loop's iv counts as invariant when its bounds are.
And at run time (`SteadyLoop.detect`):
* two consecutive periods have equal deltas of every state component (relative 1e-9), execute
  the same tile-op cost entries in the same order (`Frame.sig`), and make the same GM accesses
  up to an address shift (same op, root, shape, strides, L2 outcome);
* no clock would overtake another: sorted by value, the moving clocks' deltas do not decrease
  (otherwise the bottleneck changes later and the regime is not periodic yet).

Assumption (documented, not checked): tile sizes and branch outcomes that depend on the
induction variable change only in the last period (`min(rem, tile)` partial tiles) or with the
period (parity); both are what the lowering templates emit. The last P iterations always run.

L2 (l2.py): each GM access of a skipped iteration is replayed into the L2 model at its
extrapolated time and address (time and offset advance by their per-period deltas), so the tag
store, the recording pass's miss attribution, hit/miss counters and later kernels see every
access. In the timed pass a replayed read whose outcome (hit/miss) differs from the sampled
period's would cost differently; the jump stops before that period and the loop runs normally
from there (and may extrapolate again later). So the byte counters and L2 outcomes of an
extrapolated loop are exact; only the timing assumes the periodic regime. Extrapolation is off
when tracing (the trace needs every op) and in numerics mode.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref, scf
from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import ascend

MIN_TRIPS = 8  # shorter loops cannot amortise detection (2 periods + a tail)
REL = 1e-9  # relative tolerance of "equal delta" (sums of the same float costs)

_INV, _AFF, _OTHER = 0, 1, 2


def _is_gm(v: SSAValue) -> bool:
    try:
        return ascend.space_of(v.type).value == "gm"
    except Exception:  # noqa: BLE001 - non-memref or no space: not GM
        return False


def uniform_loop(loop: scf.ForOp) -> bool:
    """Static part of the eligibility test (module docstring)."""
    if loop.iter_args:
        return False
    iv = loop.body.block.args[0]
    inside: set[Operation] = set(loop.body.walk())
    kind: dict[SSAValue, int] = {}

    def k(v: SSAValue) -> int:
        if v is iv:
            return _AFF
        got = kind.get(v)
        if got is not None:
            return got
        owner = v.owner
        if isinstance(owner, Block):
            parent = owner.parent_op()
            if parent is None or parent not in inside:
                r = _INV
            elif isinstance(parent, scf.ForOp) and owner.args and v is owner.args[0]:
                # an inner loop's iv takes the same values every outer iteration if its bounds do
                r = _INV if all(k(x) == _INV for x in (parent.lb, parent.ub, parent.step)) else _OTHER
            else:
                r = _OTHER
        elif owner not in inside:
            r = _INV
        elif isinstance(owner, arith.ConstantOp):
            r = _INV
        elif isinstance(owner, (arith.AddiOp, arith.SubiOp)):
            r = max(k(owner.lhs), k(owner.rhs))
        elif isinstance(owner, arith.MuliOp):
            a, b = k(owner.lhs), k(owner.rhs)
            r = _INV if a == b == _INV else _AFF if {a, b} == {_INV, _AFF} else _OTHER
        elif isinstance(owner, arith.IndexCastOp):
            r = k(owner.input)
        else:
            r = _INV if all(k(x) == _INV for x in owner.operands) else _OTHER
        kind[v] = r
        return r

    for op in inside:
        if isinstance(op, (memref.LoadOp, memref.StoreOp, scf.ForOp)) and op is not loop:
            if not isinstance(op, scf.ForOp):
                return False
            if op.iter_args:
                return False
        if isinstance(op, memref.SubviewOp) and _is_gm(op.source):
            if any(k(o) == _OTHER for o in op.offsets):
                return False
    return True


class SteadyLoop:
    """Run-time detection and extrapolation for one loop execution on one core (see module)."""

    __slots__ = ("F", "hist", "n")

    def __init__(self, F, n: int):
        self.F = F
        self.n = n
        self.hist: list[tuple] = []  # (iteration index, state vector, queue lengths, gm log pos, sig pos)

    def snapshot(self, idx: int) -> None:
        F = self.F
        c = F.core
        vec = [*c.free, *c.done, *c.busy, *F.acct]
        lens = []
        for q in F.flags.queues:
            lens.append(len(q))
            vec.extend(q)
        self.hist.append((idx, vec, tuple(lens), len(F.gmlog), len(F.sig)))
        if len(self.hist) > 5:
            del self.hist[0]

    def detect(self) -> tuple[int, list[float], list, list] | None:
        """(period, delta per period, previous and current period GM logs) when steady."""
        h = self.hist
        F = self.F
        for P in (1, 2):
            if len(h) < 2 * P + 1:
                return None
            a, b, c = h[-1 - 2 * P], h[-1 - P], h[-1]
            if not (a[2] == b[2] == c[2]):
                continue
            va, vb, vc = a[1], b[1], c[1]
            ok = True
            for x, y, z in zip(va, vb, vc):
                if abs((y - x) - (z - y)) > REL * max(1.0, abs(z)):
                    ok = False
                    break
            if not ok:
                continue
            d = [z - y for y, z in zip(vb, vc)]
            sig = F.sig
            la, lb_, lc = a[4], b[4], c[4]
            if lb_ - la != lc - lb_ or any(sig[la + i] is not sig[lb_ + i] for i in range(lc - lb_)):
                continue
            log = F.gmlog
            ga, gb, gc = a[3], b[3], c[3]
            if gb - ga != gc - gb:
                continue
            prev, cur = log[ga:gb], log[gb:gc]
            if any(p[0] != q[0] or p[1] != q[1] or p[3] != q[3] or p[4] != q[4] or p[7] != q[7] for p, q in zip(prev, cur)):
                continue
            if not self._no_overtaking(vc, d):
                continue
            return P, d, prev, cur
        return None

    def _no_overtaking(self, v: list[float], d: list[float]) -> bool:
        """Clocks (free, done, pending flag times) that move: sorted by value, their deltas must
        not decrease, or a faster clock behind a slower one would overtake it later."""
        c = self.F.core
        ns = len(c.free)
        clocks = list(range(2 * ns)) + list(range(3 * ns + len(self.F.acct), len(v)))
        moving = sorted((v[i], d[i]) for i in clocks if d[i] != 0.0)
        for (x0, d0), (x1, d1) in zip(moving, moving[1:]):
            if d1 < d0 - REL * max(1.0, abs(d0)) and x1 > x0:
                return False
        return True

    def jump(self, P: int, d: list[float], prev: list, cur: list, idx: int, own: bool) -> int:
        """Skip as many whole periods as leave at least one period to run; returns iterations
        skipped (0 when the first skipped period's L2 outcomes would differ). `own`: this loop
        owns the GM log (no enclosing loop is sampling), so replayed accesses need not be logged."""
        m = (self.n - idx - P) // P
        if m < 1:
            return 0
        F = self.F
        l2p, l2 = F.l2p, F.l2
        deltas = [(q[2] - p[2], q[5] - p[5]) for p, q in zip(prev, cur)]
        done = 0
        log = None if own else F.gmlog
        if cur:
            recording = l2p is None or l2p.recording
            for mm in range(1, m + 1):
                # peek first (no side effects): a different outcome ends the jump here
                acc = []
                k = 0
                for q, (doff, dt) in zip(cur, deltas):
                    key = (q[1], q[2] + mm * doff, q[3], q[4])
                    t = q[5] + mm * dt
                    if q[6] and not recording:
                        if l2p.peek(l2, key, t, F.block, k, F.t0) != q[7]:
                            acc = None
                            break
                        k += 1
                    acc.append((q, key, t))
                if acc is None:
                    break
                launch = F.launchlog if F.sem_on else None
                for q, key, t in acc:
                    if q[6]:
                        l2p.read(l2, key, t, F.block, F.t0)
                    elif F.sem_on:
                        l2.store(key, t)
                    elif l2p is not None:
                        l2p.store(key, t)
                    if launch is not None:
                        launch.append((key, t))
                    if log is not None:
                        log.append((q[0], key[0], key[1], key[2], key[3], t, q[6], q[7]))
                done = mm
        else:
            done = m
        if done:
            self._advance(d, done)
        self.hist.clear()
        return done * P

    def _advance(self, d: list[float], m: int) -> None:
        F = self.F
        c = F.core
        ns = len(c.free)
        free, dn, busy, acct = c.free, c.done, c.busy, F.acct
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
