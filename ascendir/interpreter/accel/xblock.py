"""Reuse of a block's whole top-level loop execution by the next blocks, with remapped addresses.

A matmul's tile loop `t = block + i·block_dim` is the same program on every block but for its
tile addresses, which are not affine in the iv (row t / n, column t % n: remap.py). Where no read
outcome can depend on an address (the recording pass: every read hits, l2.py), block b's loop then
runs exactly like block 0's, from the same relative state: every clock, counter and access time
is the same, and every GM access is block 0's moved by the address values of its own iteration.
`BlockMemo` keeps the first execution of such a loop and applies it to the later blocks instead
of running them (each would run its transient, sample two periods and jump, ~1 ms).

When it is exact (static, `BlockMemo.plan`): the loop's iv and its lower bound (the block index)
reach the body only through the loop's checked values (steady.uniform_loop: pure scalar ops
evaluated for any iteration), the `hoisted` values and offset chains. Checked values are, per
remap.AddressPlan, address values (GM subview offsets only, weights = element strides: an
access's offset moves by Σ w_a · Δa(i) for the iteration i it was made in) and control values
(sizes, bounds, conditions). What else moves the accesses (`Moves`, the same sum with its own
weights): *shifts*, outside scalars (the block index, offsets computed from it before the loop)
whose uses inside are checked ops and *offset chains* (`_offset_chain`: +, -, × by a constant
into GM subview offsets, whose coefficient times the stride is the weight; FlashAttention's
per-block workspace rows `512 · block`, an FFN's `block · 128` computed in the body), and
*chained* control values, checked values whose other uses are such chains (FlashAttention's
head index in its inner loops' offsets). Hoisted values: pure scalar ops of inner loops on the
iv, checked values and outside values (a matmul's `iv == block` first-tile test in its K loop),
evaluated per iteration with the checked values and compared as control values. In the
recording pass every read hits (l2.py), so accesses moved by a constant element offset behave
the same but for the L2 write outcomes, checked below. At run time a stored execution applies
when the rest is as when it was stored: the other control values (`LoopMemo` key minus the
lower bound and the shifts), the clamped relative state (`LoopMemo.enter`), the trip count and
every iteration's control values; and when the moved writes get the same L2 write outcomes
(`first_write_change`). Each access's iteration is recorded while the loop runs (`Track`):
executed iterations by their GM log records, jumps' replayed periods by the sampled period's
per-access phase. Loops of fewer than steady.MIN_TRIPS trips are kept too (loop_driver.py): one
execution per key stands for every other block's (FlashAttention's 5-6 tasks per block, a
matmul epilogue's 2-3 tiles).

The timed pass (l2.py) keeps and applies executions too, where a read's outcome is known before
the read: a designated miss of the block (by its ordinal among the block's reads) misses unless
an earlier kernel left the tile resident (`L2Cache.resident_before`), every other read hits. A
stored execution then applies when, moved, each of its reads gets its stored outcome
(`BlockMemo._reads_hold`) and each write its write outcome, as above; the applied execution
records what running it records (the reads' designation checks and the launch's GM log for the
launch memo, the first writes of the writes that ran one by one, the chip L2's accesses and
dirty tiles) and counts the iterations its own jumps skipped: a report's extrapolated
iterations count steady-state deltas, and a block whose loop is applied adds only those of the
stored execution, where running it might have jumped on its own (a 512 x 1024 x 1024 GEMM: 96
with every block run, 0 with the reuse; the counter may differ between speed-ups, `Accel`).
Only blocks whose designated misses another block shares (`L2Pass.shares`: FlashAttention's and
an epilogue GEMM's blocks in groups of 8 of 24, where the 7B layer's plain GEMMs' blocks each pay
their own) and untraced passes (a trace draws every op) keep them.
"""

from __future__ import annotations

from operator import le

import numpy as np
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue

from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.accel.remap import AddressPlan, Remap
from ascendir.interpreter.accel.accesses import Acc, first_write_change
from ascendir.dialects import ascend
from ascendir.interpreter.accel.loop_memo import _external, _op_rows, getter, s_behind
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.exec.walk import OpTree

VARIANTS = 4  # stored executions per key (trip counts, entry states)


class Track:
    """Iteration of every GM log record of one loop execution (`F.gm_log`, owned by the loop):
    executed iterations mark where their records start; a jump or tail replay adds one record
    whose accesses' iterations it gives as an array."""

    __slots__ = ("marks", "jumps")

    def __init__(self):
        self.marks: list[tuple[int, int]] = []  # (first record index, iteration), ascending
        self.jumps: dict[int, np.ndarray] = {}  # record index -> iteration of each access

    def iterations(self, log: list) -> np.ndarray:
        """Iteration of each access of `log` (program order), as Acc.of(log) lays them out."""
        out = []
        marks, jumps = self.marks, self.jumps
        k, it = 0, -1
        for r, rec in enumerate(log):
            while k < len(marks) and marks[k][0] <= r:
                it = marks[k][1]
                k += 1
            got = jumps.get(r)
            if got is not None:
                out.append(got)
            elif type(rec) is Acc:
                out.append(np.full(len(rec.cid), it, np.int64))
            else:
                out.append(np.array([it], np.int64))
        return np.concatenate(out) if out else np.zeros(0, np.int64)


# ops that fail for some operands (a division by zero): never evaluated out of place
_PARTIAL = (arith.DivUIOp, arith.DivSIOp, arith.RemUIOp, arith.RemSIOp, arith.FloorDivSIOp, arith.CeilDivSIOp, arith.CeilDivUIOp)

_CHAIN = (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.IndexCastOp, memref.SubviewOp)


def _offset_chain(v: SSAValue, loop: scf.ForOp, checked: set[int], inside: dict[int, int], tree: OpTree) -> dict | None:
    """How the outside scalar `v` moves the loop's GM accesses: copy op -> (its GM subview's
    source, [(dim, coefficient)]), each access of the copy moving by Σ coefficient · stride(dim)
    · Δv elements; None when `v` reaches the body other than through `checked` ops (their
    values are compared or remapped per iteration), the loop's lower bound and offset chains:
    +, -, × by a constant and index casts (in program order, so a value's coefficient is known
    before its uses) ending only in dynamic offsets of subviews of outside GM buffers used by
    copies alone (remap.address_plan's address values). FlashAttention's per-block workspace
    rows `512 · block`, an FFN's `block · 128`: the same program on rows moved per block.
    `inside`: id of each op of the loop -> its position in program order."""
    # the ops the chain reaches (through uses: cheaper than walking the loop per value), then
    # in program order
    reach: dict[int, Operation] = {}
    todo = [v]
    while todo:
        x = todo.pop()
        for u in x.uses:
            op = u.operation
            i = id(op)
            if i not in inside or i in reach or i in checked:
                continue
            if op is loop:
                if u.index != 0:
                    return None
                continue  # (the lower bound: iterations are compared by their checked values)
            t = type(op)
            if t not in _CHAIN:
                return None
            reach[i] = op
            if t is not memref.SubviewOp:
                todo.append(op.results[0])
    coef: dict[int, int] = {id(v): 1}  # id(value) -> its coefficient (an xDSL value's hash is Python code)
    out: dict = {}
    for op in sorted(reach.values(), key=lambda o: inside[id(o)]):
        t = type(op)
        if t is arith.AddiOp or t is arith.SubiOp:
            a, b = coef.get(id(op.lhs), 0), coef.get(id(op.rhs), 0)
            coef[id(op.result)] = a + b if t is arith.AddiOp else a - b
        elif t is arith.MuliOp:
            lin = id(op.lhs) in coef
            k = op.rhs if lin else op.lhs
            if id(k) in coef or type(k.owner) is not arith.ConstantOp:
                return None
            coef[id(op.result)] = coef[id(op.lhs) if lin else id(op.rhs)] * k.owner.value.value.data
        elif t is arith.IndexCastOp:
            coef[id(op.result)] = coef[id(op.input)]
        elif t is memref.SubviewOp:
            sv = tree.subview(op)
            if (not sv.gm or not _external(sv.source, inside) or id(sv.source) in coef or any(id(x) in coef for x in (*sv.sizes, *sv.strides))
                    or not all(type(u.operation) is ascend.CopyOp for u in op.result.uses)):
                return None
            dims = [(d, coef[id(o)]) for d, o in zip(sv.dyn_offsets, sv.offsets) if id(o) in coef]
            for u in op.result.uses:
                got = out.setdefault(u.operation, (op, sv.source, []))
                if got[0] is not op:  # (a copy between two moved GM views: one access record, two moves)
                    return None
                got[2].extend(dims)
        else:
            return None
    return {c: (src, dims) for c, (_, src, dims) in out.items()}


class BlockMemo:
    """Stored top-level loop executions of one loop, per pass, for the next blocks (module doc).
    `key_slots`: the LoopMemo control slots but the lower bound's and the shifts', with whether
    each is a memref (keyed by shape and address tag); `gen`: the loop's address plan; `moves`:
    what `plan` adds to it (`Moves`)."""

    __slots__ = ("key_of", "gen", "control", "table", "moves", "_rows", "_weights")

    def __init__(self, key_slots: list[tuple[int, bool]], gen: Remap, moves: Moves, more_control: list[int] = ()):
        get_sc = getter([s for s, m in key_slots if not m])
        mem = [s for s, m in key_slots if m]
        self.key_of = lambda R, A: (get_sc(R), tuple([(R[s].shape, A[s]) for s in mem]))
        self.gen = gen
        self.moves = moves
        chained = set(moves.chained)
        # (`more_control`: positions of the `hoisted` values, after the checked ones)
        self.control = getter([p for p in gen.control_pos if p not in chained] + list(more_control))
        self.table: dict[tuple, list[tuple]] = {}
        self._rows: tuple | None = None  # (the source tags they were built from, rows), as Remap.rows
        self._weights: tuple = (None, {})  # (rows, id(cids) -> (cids, their rows as a matrix)): `_weights_of`

    @staticmethod
    def hoisted(loop: scf.ForOp, checked: list, tree: OpTree) -> list[Operation]:
        """The scalar ops in the loop's inner loops that compute from the iv (or from each other)
        and otherwise only from checked values and outside values, in program order: pure
        functions of the iteration, which steady.uniform_loop does not check (they are not at
        loop level) and which `plan` then compares per iteration as control values (a
        matmul's `iv == block` first-tile test in its K loop). Divisions and remainders are
        left out: evaluated for an iteration whose inner loop does not run, they could divide
        by zero."""
        iv = loop.body.block.args[0]
        ops = tree.walk(loop)
        inside: set[int] | None = None  # the ids of the loop's ops, when first needed
        # (ids: an xDSL op's or value's hash is Python code)
        known = {id(op.results[0]) for op in checked}
        ids = {id(op) for op in checked}
        out: list[Operation] = []
        mine: set[int] = {id(iv)}  # the iv and the values of `out`
        for op in ops:
            t = type(op)
            if t not in SCALAR_OPS or t in _PARTIAL or id(op) in ids or len(op.results) != 1:
                continue
            xs = op.operands
            if any(id(x) in mine for x in xs):
                if inside is None:
                    inside = {id(o) for o in ops}
                if all(id(x) in mine or id(x) in known or _external(x, inside) for x in xs):
                    out.append(op)
                    mine.add(id(op.results[0]))
        return out

    @staticmethod
    def plan(loop: scf.ForOp, checked: list, ctrl: list[SSAValue], addr: AddressPlan | None, tree: OpTree) -> tuple[list[SSAValue], Moves] | None:
        """(the values that key a stored execution: `ctrl`, the loop's control and address
        values, without the lower bound and the shifts; the `Moves` beyond `addr`'s), or None
        when the iv or the lower bound reach the body other than through checked ops and
        offset chains (`_offset_chain`). Shifts: outside scalars (the lower bound among them)
        whose uses inside are the lower bound, checked ops and offset chains; chained: checked
        control values (per `addr`) whose other uses are offset chains."""
        lb = loop.lb
        if lb not in ctrl:
            return None
        ops = {id(op) for op in checked}
        iv = loop.body.block.args[0]
        if any(id(u.operation) not in ops for u in iv.uses):
            return None
        inside = {id(o): i for i, o in enumerate(tree.walk(loop))}  # (positions: `_offset_chain` orders by them)
        moves = Moves()
        for v in ctrl:
            if not isinstance(v.type, MemRefType):
                chain = _offset_chain(v, loop, ops, inside, tree)
                if chain is not None:
                    moves.add(None, v, chain)
        if lb not in moves.shifts:
            return None
        for p in addr.control if addr is not None else ():
            chain = _offset_chain(checked[p].results[0], loop, ops, inside, tree)
            if chain is not None:
                moves.add(p, None, chain)
        return [v for v in ctrl if v not in moves.shifts], moves

    def key(self, R, A, ent: tuple, n: int) -> tuple:
        return (self.key_of(R, A), ent[0][1], n)

    def rows(self, A: list) -> dict[int, list[int]]:
        """Copy op id -> elements its accesses move per unit of each column of `_values`'
        table: the address plan's weights (Remap.rows), then the moves' (coefficient × the
        stride of the dimension, from the GM source's address tag). Kept while the tags are
        the same objects."""
        mv = self.moves
        tags = [A[s] for s, _ in mv.slot_copies.values()]
        base = self.gen.rows(A)
        got = self._rows
        if got is not None and got[0] is base and all(a is b for a, b in zip(got[1], tags)):
            return got[2]
        na, nm = len(self.gen.addr), mv.width()
        rows = {c: list(r) + [0] * nm for c, r in base.items()}
        for (cid, (_, dims)), tag in zip(mv.slot_copies.items(), tags):
            if tag is None:
                continue
            row = rows.setdefault(cid, [0] * (na + nm))
            for dim, k, j in dims:
                row[na + j] += k * tag[2][dim]
        self._rows = (base, tags, rows)
        return rows

    def reuse(self, F, R, memo, ent: tuple, key: tuple, value_of, n: int) -> bool:
        """Apply a stored execution matching `key` (`key`, LoopMemo `ent` of this entry of an
        n-iteration loop) of this pass; True when applied. `value_of(i)`: the checked values of
        iteration i. The reads are logged and the writes recorded as `_apply_accesses` would (a
        timed pass: when each read and write gets its stored outcome, module doc)."""
        vs = self.table.get(key)
        if not vs:
            return False
        srel, base, S = ent[1], ent[2], ent[3]
        l2p = F.l2_pass
        timed = not l2p.recording
        dirty = F.l2.dirty if timed else l2p.dirty
        C = None
        for v in reversed(vs):
            head, cids, C0, ctl, reads, writes = v
            hs = head[1]
            if hs != srel and not (head[0] and (all(map(le, srel, hs)) or s_behind(srel, hs, head[7], memo.units, ent[0][1]))):
                continue
            if C is None:
                control, C = self._values(R, value_of, n)
                rows = self.rows(F.gm_tags)
                zero = [0] * C.shape[1]
            if control != ctl:
                continue
            W = self._weights_of(rows, cids, zero)
            moved = ((C - C0) @ W.T).ravel()  # (iteration, op), flat: element shift of its accesses
            tshift = (F.kernel_start + base) - (head[13] + head[2])
            if writes is not None:
                at, keys, t, hit, fresh, wexe = writes
                wkeys = keys + moved[at]
                wt = t + tshift if tshift else t
                klist = wkeys.tolist()
                # (first writes of distinct tiles none of which is dirty: every outcome "fresh")
                if not (fresh and len(set(klist)) == len(klist) and dirty.keys().isdisjoint(klist)):
                    if first_write_change(F, wkeys, wt, hit) < len(klist):
                        continue
            if reads is not None:
                at, keys, t, rhit, misses = reads
                rk, rt = keys + moved[at], t + tshift if tshift else t
                # a timed pass: each read's outcome is the stored one, a designated miss of this
                # block (l2.L2Pass) where the stored read missed, resident or not as it was
                if timed and not self._reads_hold(F, l2p, rk, rt, rhit, misses):
                    continue
                l2p.read_many(F.l2, rk, rt, F.block, F.kernel_start, rhit, len(rhit) - len(misses))
            if writes is not None:
                if timed:
                    F.l2.store_many(wkeys, wt)
                    wf = F.first_writes
                    if wf is not None:  # the executed writes, as running the loop records them (tile_ops.py)
                        for k, tt, w in zip(wkeys[wexe].tolist(), wt[wexe].tolist(), hit[wexe].tolist()):
                            if k not in wf:
                                wf[k] = (tt, w)
                else:
                    l2p.store_many(wkeys, wt)
            if timed and F.launch_gm_log is not None:
                if reads is not None:
                    F.launch_gm_log.append((rk, rt, np.ones(len(rk), bool)))
                if writes is not None:
                    F.launch_gm_log.append((wkeys, wt, np.zeros(len(wkeys), bool)))
            s_free, vS, ef, ed, eq, dS, dbusy, dacct = head[0], head[3], head[4], head[5], head[6], head[7], head[8], head[9]
            memo._restore(F, S, vS, base - head[2], ef, ed, eq, dS, dbusy, dacct, s_free)
            # (a timed pass counts the jumps of the execution applied, the only steady-state
            # deltas it adds; the recording pass's count is not reported)
            F.skipped += head[14] if timed else n
            return True
        return False

    def _weights_of(self, rows: dict, cids: list, zero: list) -> np.ndarray:
        """`rows`' rows of the copy ops `cids` (`zero` for one without) as an int64 matrix
        (len(cids), columns). Kept per stored execution while `rows` is the same object: the
        next blocks apply the same few executions (building it each time was a quarter of the
        reuse of a FlashAttention block). Callers do not change it."""
        held, by = self._weights
        if held is not rows or len(by) >= 64:  # (64: more executions than a table keeps)
            by = {}
            self._weights = (rows, by)
        got = by.get(id(cids))
        if got is None:  # (the entry holds `cids`: no other object gets its id while it is kept)
            got = by[id(cids)] = (cids, np.array([rows.get(c, zero) for c in cids], np.int64).reshape(len(cids), len(zero)))
        return got[1]

    @staticmethod
    def _reads_hold(F, l2p, rk: np.ndarray, rt: np.ndarray, rhit: np.ndarray, misses: list[int]) -> bool:
        """Whether this block's reads `rk` at `rt` get outcomes `rhit` (`misses`: where it is
        False) in the timed pass: the reads designated misses of the block (l2.L2Pass, by their
        ordinals from the block's next) hit only when resident from an earlier kernel, every
        other read hits."""
        des = l2p._designated(F.block, l2p.ordinal.get(F.block, 0), len(rk))
        if not set(misses) <= set(des):
            return False
        if des:
            resident, t0 = F.l2.resident_before, F.kernel_start
            hl = rhit.tolist()
            for p in des:
                if resident(int(rk[p]), float(rt[p]), t0) != hl[p]:
                    return False
        return True

    def store(self, R, key: tuple, head: tuple, log: list, track: Track, value_of, n: int, ran: set | None = None) -> None:
        """Keep the execution that just ran (`head`: LoopMemo's end state of it, `log`: its GM
        log records, `track`: their iterations, `value_of(i)`: checked values of iteration i;
        `R`: the frame's values, holding the shifts; `ran`: in a timed pass storing its launch,
        the (key, time) of each access that ran one by one)."""
        acc = Acc.of(log) if log else None
        if acc is None or not len(acc.cid):
            return
        its = track.iterations(log)
        if len(its) != len(acc.cid) or its.min() < 0 or its.max() >= n:
            return  # (a record the track does not know: keep nothing rather than guess)
        cids, inv = _op_rows(acc.cid)
        at = its * len(cids) + inv  # each access's entry of the flattened (iteration, op) shifts
        keys = acc.sid * SHIFT + acc.off
        control, C0 = self._values(R, value_of, n)
        rd = acc.rd
        reads = writes = None
        if rd.any():
            rhit = acc.hit[rd]
            reads = (at[rd], keys[rd], acc.t[rd], rhit, np.flatnonzero(~rhit).tolist())
        if not rd.all():
            wr = ~rd
            hit = acc.hit[wr]
            # which writes ran one by one (`ran`: their (key, time)s; none in a recording pass): a
            # timed pass records their first writes (tile_ops.py), not the replayed ones'
            wk, wt = keys[wr], acc.t[wr]
            exe = np.array([(k, t) in ran for k, t in zip(wk.tolist(), wt.tolist())], bool) if ran else np.zeros(len(wk), bool)
            writes = (at[wr], wk, wt, hit, not hit.any(), exe)
        vs = self.table.setdefault(key, [])
        vs.append((head, cids, C0, control, reads, writes))
        if len(vs) > VARIANTS:
            del vs[0]

    def _values(self, R, value_of, n: int) -> tuple[list, np.ndarray]:
        """(the control values of each of the n iterations, the values that move its accesses
        as an (n, columns of `rows`) table: the address plan's, the chained ones, the shifts),
        from `value_of(i)`: the checked values of iteration i, and the frame's values `R`."""
        vals = [value_of(i) for i in range(n)]
        get, mv = self.gen._get, self.moves
        C = np.array([get(x) for x in vals], np.int64).reshape(n, -1)
        if mv.chained:
            ch = mv.get_chained if len(mv.chained) > 1 else (lambda x, g=mv.get_chained: (g(x),))
            C = np.hstack([C, np.array([ch(x) for x in vals], np.int64).reshape(n, -1)])
        if mv.slots:
            C = np.hstack([C, np.array([R[s] for s in mv.slots], np.int64)[None, :].repeat(n, 0)])
        return list(map(self.control, vals)), C


class Moves:
    """What moves a block's GM accesses besides the address plan's values (`BlockMemo.plan`):
    checked control values whose other uses are offset chains (`chained`: their positions), and
    outside values (`shifts`), each with its `_offset_chain`. `compile` numbers them as the
    columns of BlockMemo's table (the chained ones, then the shifts) and gives `slots` (the
    shifts' frame slots), `slot_copies` (id(copy op) -> (its GM source's slot, [(dim,
    coefficient, column)])) and `get_chained` (a checked-value tuple -> the chained values)."""

    __slots__ = ("chained", "shifts", "chains", "slots", "slot_copies", "get_chained")

    def __init__(self):
        self.chained: list[int] = []
        self.shifts: list[SSAValue] = []
        self.chains: dict[int | SSAValue, dict] = {}
        self.slots: list[int] = []
        self.slot_copies: dict[int, tuple[int, list[tuple[int, int, int]]]] = {}
        self.get_chained = None

    def add(self, pos: int | None, v: SSAValue | None, chain: dict) -> None:
        """One more moving value: checked position `pos`, or outside value `v`, with its chain."""
        if v is None:
            self.chained.append(pos)
            self.chains[pos] = chain
        else:
            self.shifts.append(v)
            self.chains[v] = chain

    def width(self) -> int:
        return len(self.chained) + len(self.shifts)

    def compile(self, slot_of) -> Moves:
        """Fill `slots`, `slot_copies` and `get_chained` (class doc); `slot_of`: value -> slot."""
        self.slots = [slot_of(v) for v in self.shifts]
        self.get_chained = getter(self.chained) if self.chained else None
        for j, x in enumerate([*self.chained, *self.shifts]):
            for c, (src, dims) in self.chains[x].items():
                self.slot_copies.setdefault(id(c), (slot_of(src), []))[1].extend((d, k, j) for d, k in dims)
        return self
