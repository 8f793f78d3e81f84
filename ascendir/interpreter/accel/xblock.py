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
evaluated for any iteration). Those are, per remap.AddressPlan, address values (GM subview
offsets only, weights = element strides: an access's offset moves by Σ w_a · Δa(i) for the
iteration i it was made in) and control values (sizes, bounds, conditions). At run time a stored
execution applies when these are as when it was stored: the other control values (`LoopMemo`
key minus the lower bound), the loop's own address values (outside values used only as GM
offsets, which the move above leaves out: one computed from the block index differs per
block), the clamped relative state (`LoopMemo.enter`), the trip count and every iteration's
control values; and when the moved writes get the same L2 write outcomes (`first_write_change`).
Each access's iteration is recorded while the loop runs (`Track`): executed iterations by their
GM log records, jumps' replayed periods by the sampled period's per-access phase.
"""

from __future__ import annotations

from operator import le

import numpy as np
from xdsl.dialects import scf
from xdsl.ir import SSAValue

from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.accel.remap import Remap
from ascendir.interpreter.accel.accesses import Acc, first_write_change
from ascendir.interpreter.accel.loop_memo import _op_rows, getter
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


class BlockMemo:
    """Stored top-level loop executions of one loop, per pass, for the next blocks (module doc).
    `key_slots`: the LoopMemo control slots but the lower bound's, with whether each is a
    memref (keyed by shape and address tag); `gen`: the loop's address plan."""

    __slots__ = ("key_of", "gen", "control", "table")

    def __init__(self, key_slots: list[tuple[int, bool]], gen: Remap):
        get_sc = getter([s for s, m in key_slots if not m])
        mem = [s for s, m in key_slots if m]
        self.key_of = lambda R, A: (get_sc(R), tuple([(R[s].shape, A[s]) for s in mem]))
        self.gen = gen
        self.control = getter(gen.control_pos)
        self.table: dict[tuple, list[tuple]] = {}

    @staticmethod
    def plan(loop: scf.ForOp, checked: list, ctrl: list[SSAValue], tree: OpTree) -> list[SSAValue] | None:
        """The values that key a stored execution (`ctrl`, the loop's control and address
        values, without the lower bound), or None when the iv or the lower bound reach the body
        other than through checked ops."""
        lb = loop.lb
        if lb not in ctrl:
            return None
        ops = {id(op) for op in checked}
        iv = loop.body.block.args[0]
        if any(id(u.operation) not in ops for u in iv.uses):
            return None
        inside = {id(o) for o in tree.walk(loop)}
        for u in lb.uses:
            if id(u.operation) not in inside:
                continue
            if u.operation is loop:
                if u.index != 0:  # also the upper bound or the step
                    return None
            elif id(u.operation) not in ops:
                return None
        return [v for v in ctrl if v is not lb]

    def key(self, R, A, ent: tuple, n: int) -> tuple:
        return (self.key_of(R, A), ent[0][1], n)

    def reuse(self, F, R, memo, ent: tuple, key: tuple, value_of, n: int) -> bool:
        """Apply a stored execution matching `key` (`key`, LoopMemo `ent` of this entry of an
        n-iteration loop) in the recording pass; True when applied. `value_of(i)`: the checked
        values of iteration i. The reads are logged and the writes recorded as
        `_apply_accesses` would in the recording pass (every read hits)."""
        vs = self.table.get(key)
        if not vs:
            return False
        srel, base, S = ent[1], ent[2], ent[3]
        C = None
        for v in reversed(vs):
            head, cids, C0, ctl, reads, writes = v
            hs = head[1]
            if hs != srel and not (head[0] and all(map(le, srel, hs))):
                continue
            if C is None:
                control, C = self._values(value_of, n)
                rows = self.gen.rows(F.gm_tags)
                zero = [0] * C.shape[1]
            if control != ctl:
                continue
            W = np.array([rows.get(c, zero) for c in cids], np.int64).reshape(len(cids), C.shape[1])
            moved = ((C - C0) @ W.T).ravel()  # (iteration, op), flat: element shift of its accesses
            tshift = (F.kernel_start + base) - (head[13] + head[2])
            if writes is not None:
                at, keys, t, hit, fresh = writes
                wkeys = keys + moved[at]
                wt = t + tshift if tshift else t
                klist = wkeys.tolist()
                # (first writes of distinct tiles none of which is dirty: every outcome "fresh")
                if not (fresh and len(set(klist)) == len(klist) and F.l2_pass.dirty.keys().isdisjoint(klist)):
                    if first_write_change(F, wkeys, wt, hit) < len(klist):
                        continue
            if reads is not None:
                at, keys, t, hit = reads
                F.l2_pass.read_many(F.l2, keys + moved[at], t + tshift if tshift else t, F.block, F.kernel_start, hit, len(hit))
            if writes is not None:
                F.l2_pass.store_many(wkeys, wt)
            s_free, vS, ef, ed, eq, dS, dbusy, dacct = head[0], head[3], head[4], head[5], head[6], head[7], head[8], head[9]
            memo._restore(F, S, vS, base - head[2], ef, ed, eq, dS, dbusy, dacct, s_free)
            F.skipped += n
            return True
        return False

    def store(self, key: tuple, head: tuple, log: list, track: Track, value_of, n: int) -> None:
        """Keep the execution that just ran in the recording pass (`head`: LoopMemo's end state
        of it, `log`: its GM log records, `track`: their iterations, `value_of(i)`: checked
        values of iteration i)."""
        acc = Acc.of(log) if log else None
        if acc is None or not len(acc.cid):
            return
        its = track.iterations(log)
        if len(its) != len(acc.cid) or its.min() < 0 or its.max() >= n:
            return  # (a record the track does not know: keep nothing rather than guess)
        cids, inv = _op_rows(acc.cid)
        at = its * len(cids) + inv  # each access's entry of the flattened (iteration, op) shifts
        keys = acc.sid * SHIFT + acc.off
        control, C0 = self._values(value_of, n)
        rd = acc.rd
        reads = writes = None
        if rd.any():
            reads = (at[rd], keys[rd], acc.t[rd], acc.hit[rd])
        if not rd.all():
            wr = ~rd
            hit = acc.hit[wr]
            writes = (at[wr], keys[wr], acc.t[wr], hit, not hit.any())
        vs = self.table.setdefault(key, [])
        vs.append((head, cids, C0, control, reads, writes))
        if len(vs) > VARIANTS:
            del vs[0]

    def _values(self, value_of, n: int) -> tuple[list, np.ndarray]:
        """(the control values of each of the n iterations, their address values as an (n, a)
        table), from `value_of(i)`: the checked values of iteration i."""
        vals = [value_of(i) for i in range(n)]
        get = self.gen._get
        return list(map(self.control, vals)), np.array([get(x) for x in vals], np.int64).reshape(n, -1)
