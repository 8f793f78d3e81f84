"""Exact GM addresses for the skipped iterations of a loop whose addresses are not affine in its iv.

A matmul's tile loop `t = block + i·block_dim` reads tile row t / n and column t % n. Those
address values keep one step only every lcm(block_dim, n) / block_dim iterations (4 for 24 cores
over 32 tile columns), while the loop's timing repeats every iteration. steady.py replays the
accesses of skipped periods as the sampled period's moved by a constant step per period, so on its
own it has to take the longer period and run two of them (9 iterations) before it can jump. With
an `AddressPlan` the period is the timing's, and every skipped access's address is computed from
its own iteration's address values (`Remap.tables`).

Address values (static, `address_plan`): checked values (steady.uniform_loop) each of whose uses
is a dynamic offset of a subview of a GM buffer defined outside the loop, or an operand of another
checked op. They move GM addresses and nothing else: a size, bound or condition computed from one
is a checked value of its own, whose step steady.py still compares. The element offset of a GM
access made in iteration i (directly or in an inner loop) is then

    offset(i) = rest(i) + sum over address values a of w_a · a(i)

where w_a is the element stride of the dimension that a offsets (summed over the dimensions it
offsets) and rest(i) depends only on the other checked values and on inner loops, so it keeps the
sampled periods' step. `Remap.tables` takes rest from the two sampled periods and a(i) from each
skipped iteration: exact, whatever function of the iv the address values are. (Jumps check
every skipped write's L2 outcome, accesses.first_write_change: a skipped write may rewrite a tile
the sampled periods did not.)

Where (compiler._steady_for): where no read outcome can depend on an address, that is the
recording pass (every read hits) and kernels without GM reads. In the timed pass the misses
repeat with the addresses' longer period, which stays the loop's period there.
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np
from xdsl.dialects import arith, memref, scf
from xdsl.ir import Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.accel.loop_memo import _external, _op_rows, offset_copies
from ascendir.interpreter.exec.walk import OpTree

_AFFINE = (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.IndexCastOp)


class AddressPlan:
    """What `address_plan` finds: positions (in the checked ops' order) of the address values
    and of the values whose step must still be compared, and the GM copies whose subview offsets
    are address values: copy op -> (the subview's source, [(dim, address value number)])."""

    __slots__ = ("addr", "control", "copies")

    def __init__(self, addr: list[int], control: list[int], copies: dict[Operation, tuple[SSAValue, list[tuple[int, int]]]]):
        self.addr, self.control, self.copies = addr, control, copies


def address_plan(loop: scf.ForOp, checked: list[Operation], tree: OpTree | None = None) -> AddressPlan | None:
    """The loop's address values (module docstring), or None when it has none computed by a
    non-affine op (div, rem, min, ...): then the sampled step already moves every address
    exactly, and steady.py needs nothing from here. `tree`: as for steady.uniform_loop."""
    if tree is None:
        tree = OpTree(loop)
    inside: set[int] | None = None  # the ids of the loop's ops (as loop_memo._external takes them), when first needed
    results = [op.results[0] for op in checked]
    checked_ids = {id(op) for op in checked}  # (ids: an xDSL op's or value's hash is Python code)
    offsets_of: dict[int, list[tuple[Operation, int]]] = {}  # id(value) -> the (subview, dim) pairs it offsets
    control: set[int] = set()
    for v in results:
        for use in v.uses:
            u = use.operation
            if id(u) in checked_ids:
                continue
            # (operands of a subview: source, offsets, sizes, strides; only copies may use it,
            # the ops whose accesses steady.py logs)
            if type(u) is memref.SubviewOp:
                sv = tree.subview(u)
                if sv.gm and 1 <= use.index <= len(sv.offsets):
                    if inside is None:
                        inside = {id(o) for o in tree.walk(loop)}
                    if _external(sv.source, inside) and all(type(w.operation) is ascend.CopyOp for w in u.result.uses):
                        offsets_of.setdefault(id(v), []).append((u, sv.dyn_offsets[use.index - 1]))
                        continue
            control.add(id(v))
    addr_pos = [i for i, v in enumerate(results) if id(v) in offsets_of and id(v) not in control]
    addr = [results[i] for i in addr_pos]
    if not any(_nonaffine(v, checked_ids) for v in addr):
        return None
    # intermediate values (used by checked ops only) act through the values they feed
    control_pos = [i for i, v in enumerate(results) if id(v) in control]
    return AddressPlan(addr_pos, control_pos, offset_copies(tree.walk(loop), tree, addr, {v: offsets_of[id(v)] for v in addr}))


def _nonaffine(v: SSAValue, checked: set[int]) -> bool:
    """Whether a checked op (`checked`: their ids) other than +, -, × or an index cast computes v
    or a value it uses."""
    seen: set[int] = set()
    todo = [v.owner]
    while todo:
        op = todo.pop()
        if id(op) in seen or id(op) not in checked:
            continue
        seen.add(id(op))
        if not isinstance(op, _AFFINE):
            return True
        todo.extend(x.owner for x in op.operands)
    return False


class Remap:
    """An `AddressPlan` at run time, for one compiled loop: `control_pos`, the entries of a
    checked-value tuple whose step is compared; `tables` builds a jump's offsets and keys."""

    __slots__ = ("addr", "control_pos", "copies", "_rows", "_get")

    def __init__(self, plan: AddressPlan, slot_of):
        self.addr = plan.addr
        a = plan.addr
        # a checked-value tuple -> its address values, as a tuple (one C call)
        self._get = itemgetter(*a) if len(a) > 1 else (lambda v, i=a[0]: (v[i],))
        self.control_pos = plan.control
        self.copies = {id(op): (slot_of(src), dims) for op, (src, dims) in plan.copies.items()}
        self._rows: tuple | None = None  # (the source tags they were built from, rows)

    def rows(self, A: list) -> dict[int, list[int]]:
        """Copy op id -> weight of each address value (elements: the stride of the dimension it
        offsets, from the GM source's address tag). Kept while the tags are the same objects."""
        tags = [A[s] for s, _ in self.copies.values()]
        got = self._rows
        if got is not None and len(got[0]) == len(tags) and all(a is b for a, b in zip(got[0], tags)):
            return got[1]
        rows = {}
        for (cid, (_, dims)), tag in zip(self.copies.items(), tags):
            if tag is None:
                continue
            row = [0] * len(self.addr)
            for dim, j in dims:
                row[j] += tag[2][dim]
            rows[cid] = row
        self._rows = (tags, rows)
        return rows

    def tables(self, prev, cur, K: int, value_of, A: list) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, keys) of the accesses k = 1..K periods after the sampled period `cur`
        (rows of len(cur) accesses, flattened), as steady._Replay lays them out. `prev`, `cur`:
        the sampled periods (accesses.Acc with `it0`, their first iteration, and `ph`, each
        access's iteration within the period); value_of(i): the checked values of iteration i
        (None past the loop's end)."""
        P = cur.it0 - prev.it0
        rows = self.rows(A)
        # one weight row per copy op (a handful), each access pointing at its op's row
        ops, inv = _op_rows(cur.cid)
        zero = [0] * len(self.addr)
        W = np.array([rows.get(c, zero) for c in ops], np.int64).reshape(len(ops), len(self.addr))
        lo, hi = prev.it0, cur.it0 + (K + 1) * P
        # (zeros past the loop's end: rows a jump never applies)
        get, zero = self._get, (0,) * len(self.addr)
        C = np.array([zero if v is None else get(v) for v in map(value_of, range(lo, hi))], np.int64).reshape(hi - lo, len(self.addr))
        # iteration of each access, relative to lo: prev's, cur's, then k = 1..K periods on
        its = cur.ph[None, :] + (np.arange(K + 2, dtype=np.int64) * P)[:, None]
        moved = (C @ W.T)[its, inv[None, :]]  # (K + 2, L): sum of w_a · a(i) per access
        rest_prev, rest_cur = prev.off - moved[0], cur.off - moved[1]
        step = rest_cur - rest_prev
        ks = np.arange(1, K + 1, dtype=np.int64)[:, None]
        off = (rest_cur[None, :] + ks * step[None, :] + moved[2:]).ravel()
        return off, (cur.sid * SHIFT)[None, :].repeat(K, 0).ravel() + off
