"""`LoopMemo`: whole executions of a timing-only loop stored and applied again when the loop is
entered with the same control values from the same relative state (steady.py's module doc
gives the conditions and why it is exact); `LoopMemo.prefix` applies a stored execution up to
an iteration checkpoint, or its first jump, before the first read whose L2 outcome differs.
Also what an execution depends on (`memo_inputs`, `never_again`) and the relative core state it
is keyed by (`state_key`)."""

from __future__ import annotations

from itertools import accumulate, chain
from operator import add, itemgetter, le, sub
import numpy as np
from xdsl.dialects import memref, scf
from xdsl.ir import Block, Operation, SSAValue
from ascendir.dialects import ascend
from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.exec.walk import OpTree, operands_of
from ascendir.interpreter.accel.accesses import Acc, _apply_accesses, _naccesses, first_write_change


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
    such a subview. `tree`: as for `uniform_loop`; the result is computed once per tree (the
    twin's compile and the data walk's `plan` ask it of the same loops) and not to be changed."""
    if tree is None:
        tree = OpTree(loop)
    return tree.derived(("memo_inputs", id(loop)), lambda: _memo_inputs(loop, tree))


def _memo_inputs(loop: scf.ForOp, tree: OpTree) -> tuple:
    """`memo_inputs` computed."""
    # ids of the values the loop defines (its ops' results, their regions' block arguments): a
    # value is external (`_external`) when its id is not here; one set test per operand
    return inputs_of(tree.walk(loop), tree.defined(loop), tree)


def inputs_of(ops: list[Operation], defined: set[int], tree: OpTree, alias: dict | None = None) -> tuple:
    """`memo_inputs` of the ops `ops` (a loop's walk, or a run of ops' walks: data_loop_memo.py
    `plan_run`) whose own values have the ids `defined`: (control values, address values, GM
    copies). `alias`: id of an op of `ops` -> the value a GM subview offset it defines counts as
    (data_loop_memo.py `_aliases`); those ops are left out."""
    # by id (an xDSL value's hash is Python code): the outside values used, in order of first use;
    # the (subview, dim) pairs each offsets; those used otherwise too
    vals: dict[int, SSAValue] = {}
    uses: dict[int, list] = {}
    other: set[int] = set()
    for op in ops:
        if alias and id(op) in alias:
            continue
        sv = tree.subview(op) if type(op) is memref.SubviewOp else None
        gm_sv = sv is not None and sv.gm and id(sv.source) not in defined
        dyn_dims = sv.dyn_offsets if gm_sv else []
        offsets = sv.offsets if gm_sv else ()
        if alias and gm_sv:
            offsets = [alias.get(id(o.owner), o) for o in offsets]
        for v in (*operands_of(op), *offsets) if alias else operands_of(op):
            i = id(v)
            if i in defined:
                continue
            if i not in vals:
                vals[i] = v
                uses[i] = []
            if gm_sv and any(v is o for o in offsets):
                continue
            other.add(i)
        for k, o in enumerate(offsets):
            if id(o) not in defined:
                uses[id(o)].append((op, dyn_dims[k]))
    addr = {i: v for i, v in vals.items() if i not in other and uses[i]}
    ctrl = [v for i, v in vals.items() if i not in addr]
    return ctrl, list(addr.values()), offset_copies(ops, tree, list(addr.values()), {v: uses[i] for i, v in addr.items()})


def offset_copies(ops: list[Operation], tree: OpTree, addr: list[SSAValue],
                  uses: dict[SSAValue, list[tuple[Operation, int]]]) -> dict[Operation, tuple[SSAValue, list[tuple[int, int]]]]:
    """The copies among `ops` whose GM operand is a subview offset by values of `addr`: copy op
    -> (the subview's source, [(dim, index into addr)]). `uses`: value -> the (subview, dim)
    pairs it offsets."""
    by_sv: dict[int, list[tuple[int, int]]] = {}  # id(subview) -> its (dim, index into addr)
    for j, v in enumerate(addr):
        for op, dim in uses[v]:
            by_sv.setdefault(id(op), []).append((dim, j))
    copies: dict[Operation, tuple[SSAValue, list[tuple[int, int]]]] = {}
    if not by_sv:
        return copies
    for op in ops:
        if type(op) is ascend.CopyOp:
            for g in operands_of(op):  # (source, dest: its only operands; xDSL's accessors decode per access)
                sv = g.owner
                if type(sv) is memref.SubviewOp and id(sv) in by_sv:
                    copies[op] = (tree.subview(sv).source, by_sv[id(sv)])
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
    (d) in a mix kernel, a loop whose ops run on some units only (an AIC K loop) neither reads nor
        moves the other units' clocks nor flag queues it does not set or wait on
        (scf_ops.loop_units): those are left out of its key, its latest clock is its units'
        latest, and applying a stored execution leaves them as they are (`units`, `qkeys`).
    (e) an S clock may also lag *less* far behind than at the stored entry of such an execution
        (no S clock decided anything), as long as, advanced by the execution's scalar charges,
        it stays below the lowest clock of the key that is not at its S clock (`s_behind`).
        In an execution where no S clock decides anything, every clock value an S clock is
        compared with (a tile op's or a barrier's pipe clock, a set's source clocks, a wait's
        destination clock) is at least that lowest one: by induction over the ops, a value
        at its S clock when entered would be compared as it is only with an S clock at or
        past it (a decision), and every other value is a sum or max of such values and costs.
        An S clock that lagged less but stays below them all then decides nothing either, and
        the execution is the stored one, S advancing by the same charges.
    So an execution depends on its control values (`memo_inputs`), on the clamped clocks relative
    to the latest one (exact: multiples of the cycle quantum, costmodel/quantum.py) and on the
    L2 outcomes of its reads and writes. A stored
    execution with the same key is applied when its reads and writes, moved to the new addresses
    (address values × element strides) and times (shifted by c), get the same L2 outcomes (a
    write's: a rewrite of a tile still dirty or not, which the tiles other blocks or this block's
    earlier loops wrote decide, not the key); its GM accesses
    are replayed into the L2 as arrays, like steady-state jumps. This is what makes an inner loop
    (a matmul's K loop) cost nothing once its outer loop, or another block, has run it from the
    same relative state: nested periodic regimes, and blocks running the same program on shifted
    addresses.
    """

    __slots__ = ("ctrl", "addr", "copies", "table", "dst_units", "flag_keys", "npipes", "ctrl_key", "once", "units", "qkeys")

    def __init__(self, ctrl: list[int], addr: list[int], copies: dict[int, tuple[int, list[tuple[int, int]]]], flag_keys: dict, npipes: int,
                 ctrl_mem: list[bool | str] | None = None, once: bool = False, units: list[int] | None = None,
                 qkeys: list[int] | None = None):
        self.ctrl = ctrl  # slots of the control values
        self.once = once  # never_again: the loop's executions are never stored nor looked up
        # the units whose clocks and the flag keys whose queues the loop can read or move
        # (scf_ops.loop_units; None: all): the rest is left out of the key and kept by `_restore`.
        # An execution neither reads nor moves them, and the key's clocks are taken relative to
        # the latest of the units' own, so it is exact whatever they hold
        self.units, self.qkeys = units, qkeys
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
        rel, srel, base, S = state_key(F, self.npipes, self.dst_units_for(F), True, self.units, self.qkeys)
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
            if hs != srel and not (head[0] and ((srel[0] <= hs[0] if one else all(map(le, srel, hs)))
                                                or s_behind(srel, hs, head[7], self.units, ent[0][1]))):
                continue
            if len(v) == 2:  # stored raw (`store`): arrays built on the first match
                v = vs[j] = self._finish(*v)
            ri, misses = v[15], v[17]
            sh = None  # the table rows' shifts (Coefs.row_shifts)
            hit = None
            if len(ri):  # every read's outcome holds (`_first_change` == len(ri)), cheap tests first
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
            if not allrd and _first_write_change(F, acc, keys, t, len(acc.rd)) < len(acc.rd):
                continue  # a write's outcome differs (another block wrote the tile, or did not)
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
        miss among hits), apply the part of one up to a checkpoint before its first read whose
        outcome would differ now: the loop then goes on from that checkpoint's iteration instead
        of running its first iterations one by one. Checkpoints: the state at the start of each
        iteration the stored execution ran one by one, where no write came before, and its
        first sampled jump, where the loop goes on in that jump's regime (the outcomes of the
        writes before it checked too, `_first_write_change`) (`SteadyLoop.jump`) instead of running its transient and sampling two
        periods. The latest checkpoint that holds is taken. Exact for the same reasons as
        `reuse`: from the same relative state, with the same outcomes of the reads made before
        it, the loop reaches the checkpoint's state, moved in time. Returns (iteration, P, d,
        prev, cur, regime, time shift); P ... regime None when the checkpoint has no regime."""
        srel, base, S, vs = ent[1], ent[2], ent[3], ent[8]
        if not vs:
            return None
        l2p = F.l2_pass
        addr = None  # the address values, built for the first candidate that needs them
        one = len(srel) == 1  # one unit: one S clock (as in `reuse`)
        best = None  # (checkpoint, stored execution, row shifts, time shift, address-value delta)
        des = None  # the designated reads among the next ones (the longest stored execution's)
        for j in range(len(vs) - 1, -1, -1):
            v = vs[j]
            head, cps = (v[0], v[1][2]) if len(v) == 2 else (v, v[18])  # tests on either form first
            if not cps or best is not None and cps[0][0] <= best[0][0]:  # (none later than the best so far)
                continue
            hs = head[1]
            if hs != srel and not (head[0] and ((srel[0] <= hs[0] if one else all(map(le, srel, hs)))
                                                or s_behind(srel, hs, head[7], self.units, ent[0][1]))):
                continue
            if len(v) == 2:
                v = vs[j] = self._finish(*v)
            # (the tests above hold for the finished form: same S positions and checkpoints)
            vbase, acc, coefs, vaddr, vt0, ri, rhit, misses = v[2], v[10], v[11], v[12], v[13], v[15], v[16], v[17]
            if coefs is not None and addr is None:
                addr = [R[s] for s in self.addr]
            dv = list(map(sub, addr, vaddr)) if coefs is not None else None  # address-value delta
            sh = coefs.row_shifts(dv) if dv is not None else None  # the table rows' shifts
            tshift = (F.kernel_start + base) - (vt0 + vbase)
            fc = None  # the first read whose outcome differs now (computed when a checkpoint needs it)
            fw = None  # the same for the writes (as an access index)
            for cp in v[18]:  # latest first
                if best is not None and cp[0] <= best[0][0]:
                    break
                nr = cp[8]  # reads before the checkpoint
                if cp[0] >= n - 1:
                    continue
                if nr < cp[3]:  # writes before it (a jump's checkpoint only): do their outcomes hold?
                    if fw is None:  # (over the writes before the latest such checkpoint: the first that differs)
                        keys = v[19] if sh is None else v[19] + coefs.shift(sh)
                        fw = _first_write_change(F, acc, keys, acc.t + tshift, cp[3])
                    if fw < cp[3]:
                        continue
                if nr:
                    if fc is None:
                        if not l2p.recording and (des is None or des[1] < len(rhit)):
                            des = (l2p._designated(F.block, l2p.ordinal.get(F.block, 0), len(rhit)), len(rhit))
                        fc = _first_change(F, acc, coefs, sh, ri, rhit, misses, tshift,
                                           None if l2p.recording else [p for p in des[0] if p < len(rhit)], v[23])
                    if fc < nr:
                        continue
                best = (cp, v, sh, tshift, dv)
                break
        if best is None:
            return None
        cp, v, sh, tshift, dv = best
        self._apply_prefix(F, S, v[3], base - v[2], tshift, v[10], v[11], sh, v[16], v[0], cp)
        idx0, regime, rows = cp[0], cp[4], cp[7]
        if regime is None:
            return idx0, None, None, None, None, None, tshift
        P, d, prev, cur = regime[0], regime[1], regime[2], regime[3]
        oshift = None
        if dv is not None and any(dv):
            by_op = dict(zip(rows, _row_dot(len(dv))(list(rows.values()), dv)))  # copy op -> its shift
            oshift = np.array([by_op.get(c, 0) for c in cur.cid.tolist()], np.int64)
        return idx0, P, d, prev, cur, [P, d, prev, cur, regime[4], 0, regime[6], idx0, regime[8], oshift], tshift

    def _apply_prefix(self, F, S, vS, c_shift: float, tshift: float, acc: Acc, coefs, sh, rhit, s_free: bool, cp: tuple) -> None:
        """Apply a stored execution up to checkpoint `cp` (`prefix`): its accesses before it,
        moved by the row shifts `sh` and `tshift`, and the state it was in there."""
        idx0, vec, lens, npre, regime, busy0, acct0, rows, nr = cp
        part = Acc(acc.cid[:npre], acc.sid[:npre], acc.off[:npre], acc.t[:npre], acc.rd[:npre], acc.hit[:npre])
        off = part.off if sh is None else part.off + coefs.shift(sh)[:npre]
        _apply_accesses(F, part, part.sid * SHIFT + off, off, part.t + tshift, rhit[:nr] if nr else None)
        ns, na, npipes = len(F.core.free), len(F.acct), self.npipes
        k = j = 3 * ns + na
        eq = []
        for ln in lens:
            eq.append(vec[k:k + ln])
            k += ln
        dS = [vec[u * npipes] - x for u, x in enumerate(vS)]  # S clock advance per unit
        self._restore(F, S, vS, c_shift, vec[:ns], vec[ns:2 * ns], eq, dS, list(map(sub, vec[2 * ns:3 * ns], busy0)),
                      list(map(sub, vec[3 * ns:j], acct0)), s_free)

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
        du = self.dst_units
        queues = F.flags.queues
        free, done = core.free, core.done
        # the loop's units and queues only (`units`): it leaves the rest as it is; per unit its
        # pipes' slice (its S clock first, which advances by the execution's charges)
        for u in (self.units if self.units is not None else range(len(S))):
            s, v, c0 = S[u], vS[u], u * npipes
            c1 = c0 + npipes
            free[c0:c1] = [s + dS[u], *[s if y == v else y + c_shift for y in ef[c0 + 1:c1]]]
            done[c0:c1] = [s if y == v else y + c_shift for y in ed[c0:c1]]
        for k in (self.qkeys if self.units is not None else range(len(queues))):
            q, ts = queues[k], eq[k]
            if q or ts:
                u = du[k]
                q.clear()
                q.extend([S[u] if x == vS[u] else x + c_shift for x in ts])
        core.busy[:] = map(add, core.busy, dbusy)  # (as above)
        F.acct[:] = map(add, F.acct, dacct)
        if not s_free:
            F.s_clock_decisions += 1  # an S clock decided something in the applied execution

    def store(self, F, R, ent: tuple, log: list, first: tuple | None = None, g0: int = 0, collapse: bool = False,
              marks: list | None = None) -> tuple | None:
        """Keep the execution that just ran from `ent` (its GM accesses: `log`, records of
        `F.gm_log`). Kept raw: most stored executions of an outer loop never match again, so their
        arrays are built by `_finish` on the first match only; `collapse`: build them now, as one
        `Acc` record. `marks`: the snapshots (`SteadyLoop.snapshot`) of the iterations it ran one
        by one, kept as checkpoints for `prefix`. Returns (the stored execution's token: what
        `reuse` appends to `Frame.cost_log` when it applies it; the log as stored), None when not
        stored."""
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
        cps = []  # checkpoints for `prefix`: (iteration, snapshot vector, queue lengths, accesses before, regime or None)
        if marks:  # (accesses before each: counted now, the log may be collapsed into one record below)
            before = [0, *accumulate([len(r.cid) if type(r) is Acc else 1 for r in log])]
            cps = [(m[0], m[1], m[2], before[m[3] - g0], None) for m in marks if m[0] > 0]
        if first is not None:  # (snapshot at the first sampled jump, its regime)
            snap, regime = first
            cps.append((snap[0], snap[1], snap[2], _naccesses(log[:snap[3] - g0]), regime))
        # latest first; at one iteration, the jump's first (it goes on in its regime)
        cps.sort(key=lambda c: (c[0], c[4] is not None), reverse=True)
        if collapse and log:
            log = [Acc.of(log)]
        head = (
            F.s_clock_decisions == srel0, srel, base, list(S), list(c.free), list(c.done), [list(q) for q in F.flags.queues], dS,
            [b - a for a, b in zip(busy0, c.busy)], [b - a for a, b in zip(acct0, F.acct)],
            None, None, [R[s] for s in self.addr], F.kernel_start, F.skipped - skipped0,
        )
        vs.append((head, (log, coef_rows, cps, busy0, acct0)))
        if len(vs) > VARIANTS:
            del vs[0]
        return head, log

    def _finish(self, head: tuple, raw: tuple) -> tuple:
        log, coef_rows, cps, busy0, acct0 = raw
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
        # the checkpoints, latest first, each + its busy and counter deltas, the coefficient rows,
        # the number of reads before it. A checkpoint without a regime (an iteration run one by
        # one) is kept only when no write comes before it: `prefix` checks read outcomes only
        cp = []
        for idx0, vec, lens, npre, regime in cps:
            nr = npre if allrd else int(np.searchsorted(ri, npre))
            if regime is None and nr != npre:
                continue
            cp.append((idx0, vec, lens, npre, regime, busy0, acct0, coef_rows, nr))
        misses = _miss_positions(rhit)
        # + the keys before the address shift, whether every access reads, the reads' hit count,
        # the token, a cache for `_designated_hold`
        return (*head[:10], acc, coefs, vaddr, head[13], head[14],
                ri, rhit, misses, cp,
                acc.sid * SHIFT + acc.off, allrd, len(rhit) - len(misses), head, [])


def _first_write_change(F, acc: Acc, keys: np.ndarray, t: np.ndarray, stop: int) -> int:
    """Index (into the accesses) of the first write among a stored execution's first `stop`
    accesses, at the tile keys `keys` and chip times `t` (moved to this entry), whose L2 outcome
    (accesses.first_write_change) differs from the stored one; `stop` when none. A stored write's
    outcome depends on the tiles written before it, by this block's earlier loops or by other
    blocks, which the entry key does not hold (rows t / 2: the execution at t = 2k writes row k
    first, the one at t = 2k + 1 rewrites it from the same state)."""
    wi = np.flatnonzero(~acc.rd[:stop])
    if not len(wi):
        return stop
    j = first_write_change(F, keys[wi], t[wi], acc.hit[wi])
    return int(wi[j]) if j < len(wi) else stop


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


def s_behind(srel: tuple, hs: tuple, dS: list[float], units: list[int] | None, rel: tuple) -> bool:
    """LoopMemo doc (e): whether an entry whose S clocks sit at `srel` (cycles relative to the
    latest clock of the key, one per unit of `units`, every unit when None) may take a stored
    execution of the same key `rel` (`state_key`'s first part) entered with them at `hs`, in
    which no S clock decided anything and unit u's S clock advanced by dS[u] cycles: every S
    clock lags at least as far behind as then, or, advanced by its dS, stays below the lowest
    clock of `rel` that is not at its S clock ("S"). Exact comparisons: multiples of the cycle
    quantum (costmodel/quantum.py)."""
    lowest = None
    for i, (s, h) in enumerate(zip(srel, hs)):
        if s <= h:
            continue
        if lowest is None:  # (rel: the queue lengths, then clocks and pending times or "S")
            lowest = min([x for x in rel[1:] if x != "S"], default=float("inf"))
        if not s + dS[units[i] if units is not None else i] < lowest:
            return False
    return True


def _each_pipe(S: list, npipes: int) -> list:
    """Each pipe's S clock: the S clock of each unit of `S` repeated for its `npipes` pipes."""
    out = []
    for s in S:
        out += [s] * npipes
    return out


def state_key(F, npipes: int, dst_units: list[int], clamp: bool = True, units: list[int] | None = None,
              qkeys: list[int] | None = None) -> tuple[tuple, tuple, float, list[float]]:
    """The core's clocks clamped to their unit's S clock (LoopMemo doc (a), exact; `clamp`:
    write the clamped values back) as (the flag queue lengths, then the clocks relative to the
    latest one (exact differences of multiples of the cycle quantum), "S" for those at or below
    their S clock; the S clocks relative to it; the latest clock; the S clocks). `units`, `qkeys`
    (several units only; None: all): only these units' clocks and these flag keys' queues are in
    the key and its latest clock (LoopMemo.units); the S clocks returned last are every unit's."""
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
        rel += ["S" if x <= s else x - base for x in vals]
        return tuple(rel), (s - base,), base, [s]
    S = free[::npipes]
    Sx = _each_pipe(S, npipes)
    if clamp:  # free[i] = s only where free[i] < s (a conditional per clock: cheaper than max)
        free[:] = [s if x < s else x for x, s in zip(free, Sx)]
        done[:] = [s if x < s else x for x, s in zip(done, Sx)]
        for k, q in enumerate(queues):
            if q:
                s = S[dst_units[k]]
                for j in range(len(q)):
                    if q[j] < s:
                        q[j] = s
    if units is None:
        fr, dn, Su, qkeys = free, done, S, range(len(queues))
    else:
        fr = [x for u in units for x in free[u * npipes:(u + 1) * npipes]]
        dn = [x for u in units for x in done[u * npipes:(u + 1) * npipes]]
        Su = [S[u] for u in units]
        Sx = _each_pipe(Su, npipes)
    base = max(max(fr), max(dn))
    rel: list = [tuple([len(queues[k]) for k in qkeys])]
    rel += ["S" if x <= s else x - base for x, s in zip(fr, Sx)]
    rel += ["S" if x <= s else x - base for x, s in zip(dn, Sx)]
    for k in qkeys:
        q = queues[k]
        if q:
            s = S[dst_units[k]]
            rel.extend(["S" if t <= s else t - base for t in q])
    return tuple(rel), tuple([x - base for x in Su]), base, S


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


def _first_change(F, acc: Acc, coefs, rows, ri, rhit, misses, tshift: float, des: list[int] | None, cache: list) -> int:
    """Index of the first read of a stored execution (LoopMemo.prefix), moved by `rows` (the
    table rows' shifts, `Coefs.row_shifts`, None without address values) and time shift `tshift`,
    whose outcome now differs from its stored one `rhit`; len(rhit) when none.
    A stored miss that is no designated miss now hits; a designated read (`des`: ascending
    indices, None in the recording pass, where every read hits) misses unless the chip L2 of
    earlier kernels holds its tile."""
    n = len(rhit)
    if des is None:
        return min(misses, default=n)
    ds = frozenset(des)
    first = min([p for p in misses if p not in ds], default=n)
    if not des or des[0] >= first:
        return first
    p = _first_moved(F, acc, coefs, rows, ri, rhit, tshift, des, cache, first)
    return first if p is None else p


def _designated_hold(F, acc: Acc, coefs, rows, ri, rhit, tshift: float, des: list[int], cache: list) -> bool:
    """Whether every designated read `des` (indices into the reads `ri`) gets its stored
    outcome (`_first_moved` finds none that does not)."""
    return not des or _first_moved(F, acc, coefs, rows, ri, rhit, tshift, des, cache, len(rhit)) is None


def _first_moved(F, acc: Acc, coefs, rows, ri, rhit, tshift: float, des: list[int], cache: list, stop: int) -> int | None:
    """The first designated read `des` (ascending indices into the reads `ri`) before `stop`
    whose outcome now (the chip L2 of earlier kernels) differs from its stored one `rhit`, None
    when none does. Element by element on Python lists of the stored arrays (`cache`: the stored
    execution's, built on first use): a call looks at a handful of reads, where numpy's
    per-call and per-element costs dominate; `rows`: the row shifts (`Coefs.row_shifts`, None
    without address values)."""
    if not cache:
        cache.append((ri.tolist(), acc.sid.tolist(), acc.off.tolist(), acc.t.tolist(), rhit.tolist(),
                      coefs.inv.tolist() if coefs is not None else None))
    ri_l, sid_l, off_l, t_l, hit_l, inv_l = cache[0]
    resident, t0 = F.l2.resident_before, F.kernel_start
    for p in des:
        if p >= stop:
            break
        e = ri_l[p]
        o = off_l[e] if rows is None else off_l[e] + rows[inv_l[e]]
        if resident(sid_l[e] * SHIFT + o, t_l[e] + tshift, t0) != hit_l[p]:
            return p
    return None
