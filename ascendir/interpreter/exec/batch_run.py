"""Phase B of the batched data walk (sim/kernel.py `_data_walk`): the tile ops a launch's blocks
recorded (exec/tape.py) computed, group after group of blocks (exec/batch_groups.py), each op of a
group run once for all its blocks on batched operands where it can, block by block where not.

Why the bits are the plain walk's:
* Batched operands. At each operand position of an op, the group's B blocks hold either equal
  scalars, or arrays of one shape, strides and dtype at addresses affine in the block (a0 + k*d:
  on-chip buffers are slices of one launch buffer per alloc, tape.py; GM tiles step by a fixed
  offset). The array of shape (B,) + shape, strides (d,) + strides at a0 is then, slice by
  slice, the blocks' arrays themselves (same memory, shape, strides): an op's batched form
  (registry.BATCHED, semantics.batched_semantics) computes what the op computes on each block's
  operands, slice by slice. Operands of one op must have one number of dimensions (so that the
  batch axes line up where numpy broadcasts), and a form marked layout-sensitive (numpy may take
  another loop for another layout: transcendentals, reductions) runs batched only where every
  operand is C-contiguous batched exactly when it is per block. Where any of that fails, or an op
  has no batched form, the op runs on each block's own operands, in block order: the plain op.
* Decisions a semantics takes on its whole operand (ORT or numpy cast, fp16 via fp32, the
  samples of `narrow_f16`, `_blocks_of_8`) then see the whole batch: they pick among paths that
  give numpy's bits each (semantics.py says why for each), so another pick gives the same bits.
* Order: batch_groups.py.
Errors: the plain walk raises the error of the first block that fails, at its op. A group runs
op after op, so a later block may fail first: the blocks before it then run their remaining ops,
block after block, and the first of them that fails raises its error, else the later block's is
raised (the blocks of a group meet in no GM byte: what the earlier blocks compute does not depend
on the later ones' ops). An op whose batched form raises (`semantics.Unbatched`, or an error of
the op) runs again block by block.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import memref

from ascendir.dialects import ascend
from ascendir.interpreter.exec.batch_groups import coded_hazard, form_span, runs
from ascendir.interpreter.exec.pointer import data_pointer
from ascendir.interpreter.exec.walk import _is_a

# ops that touch data outside the tile ops (a load steering control, a store, a value read): a
# walk recording only the tile ops would run them out of order
_DATA_OPS = (memref.LoadOp, memref.StoreOp, ascend.GetValueOp)


_FORM_BITS = 14  # (x86-64 and arm64 user addresses are below 2**48: an address and a form's number fit an int64)

# tile ops a block of a group runs, at least, for the group to run batched: a group's fixed cost
# (grouping, the GM hazard check, the batched views: ~1-2 ms) exceeds what batching the ops of
# blocks of ~120 small ops saves (the 7B layer's 48-block RMSNorm and add kernels: measured
# slower batched), while FlashAttention's blocks of 1,076-1,414 ops gain ~15%
MIN_OPS = 256


def batchable(ops) -> bool:
    """Whether a data walk of the kernel of `ops` (its body's ops) may record its tile ops and
    compute them after (exec/tape.py): none of its other ops reads or writes data."""
    return not any(_is_a(t, _DATA_OPS) for t in set(map(type, ops)))  # (per class: walk.py `_is_a`)


def run(blocks: list[list]) -> None:
    """Compute the tile ops recorded per block (`blocks[b]`: tape.py), as the plain data walk
    would have computed them (the module doc says why the bits are equal)."""
    for start, stop in runs(blocks):
        group = blocks[start:stop]
        if len(group) > 1 and len(group[0]) >= MIN_OPS:
            _batched(group)
        else:
            _plain(group, 0)


def _plain(tapes: list[list], start: int) -> None:
    """Run the ops of `tapes` from op `start` on, block after block (the plain walk's order)."""
    for tape in tapes:
        for facts, vals in tape[start:]:
            facts[0](*vals)


def _each(tapes: list[list], n: int) -> None:
    """Run op `n` of every tape block by block; where block k's raises, blocks 0..k-1 run their
    remaining ops first and the first of their errors, else block k's, is raised (module doc)."""
    run = tapes[0][n][0][0]
    for k, t in enumerate(tapes):
        try:
            run(*t[n][1])
        except Exception:
            _plain(tapes[:k], n + 1)
            raise


def _batched(tapes: list[list]) -> None:
    """Run the ops of a group's tapes (equal ops: batch_groups.py) op after op, each batched
    where it can be (the module doc), or, where the group has a GM hazard, block by block."""
    B = len(tapes)
    flats = [[v for e in t for v in e[1]] for t in tapes]
    # id(operand value) -> its address (0: a scalar) << _FORM_BITS | its form's number, a form
    # being (shape, strides, dtype) of an array, (type, repr) of a scalar (repr tells -0.0 from
    # 0.0 and NaNs apart, which == would not)
    code: dict[int, int] = {}
    forms: dict[tuple, int] = {}
    for fl in flats:
        for i, v in dict(zip(map(id, fl), fl)).items():
            if i not in code:
                if isinstance(v, np.ndarray):
                    code[i] = data_pointer(v) << _FORM_BITS | forms.setdefault((v.shape, v.strides, v.dtype), len(forms))
                else:
                    code[i] = forms.setdefault((type(v), repr(v)), len(forms))
    M = len(flats[0])
    try:
        if len(forms) >> _FORM_BITS:
            raise OverflowError
        X = np.array([np.fromiter(map(code.__getitem__, map(id, fl)), np.int64, M) for fl in flats])
    except OverflowError:  # (codes past an int64: the group block by block, as the plain walk)
        _plain(tapes, 0)
        return
    P, Fm = X >> _FORM_BITS, X & ((1 << _FORM_BITS) - 1)
    gm, pos, ends = [], 0, []
    for facts, vals in tapes[0]:
        if facts[3]:
            gm += [(pos + j, w) for j, w in facts[3]]
        pos += len(vals)
        ends.append(pos)
    spans = np.array([form_span(f[0], f[1], f[2].itemsize) if len(f) == 3 else (0, 0) for f in forms], np.int64).reshape(-1, 2)
    if coded_hazard(flats, gm, P, Fm, spans):
        _plain(tapes, 0)
        return
    D = P[1] - P[0]
    bad = ~((Fm == Fm[0]).all(0) & (P == P[0] + np.arange(B, dtype=np.int64)[:, None] * D).all(0))
    # per op: whether every operand is affine in the block (no bad operand among its own)
    bad = np.concatenate(([0], np.cumsum(bad)))
    ok = (bad[ends] == bad[np.concatenate(([0], ends[:-1])).astype(np.int64)]).tolist()
    D = D.tolist()
    cache: dict = {}
    pos = 0
    for n, (facts, vals) in enumerate(tapes[0]):
        m = len(vals)
        args = None
        if facts[1] is not None and ok[n]:
            args = _stacked(vals, D[pos: pos + m], B, facts[2], cache)
        pos += m
        if args is None:
            _each(tapes, n)
            continue
        try:
            facts[1](*args)
        except Exception:  # (Unbatched, or what the plain walk raises: its first block's error)
            _each(tapes, n)


def _stacked(vals: tuple, steps: list[int], B: int, keep_layout: bool, cache: dict) -> list | None:
    """The batched operands of an op whose block-0 operands are `vals`, each array's blocks `steps`
    bytes apart; None where the op must run block by block (module doc). `cache`: (id(array),
    step) -> its batched array, so that operands one array per block give one batched array (an
    op may test `is`)."""
    out = []
    nd = -1
    for v, d in zip(vals, steps):
        if not isinstance(v, np.ndarray):
            out.append(v)
            continue
        if nd < 0:
            nd = v.ndim
        elif v.ndim != nd:
            return None
        key = (id(v), d)
        got = cache.get(key)
        if got is None:
            s = _stack(v, d, B)
            got = cache[key] = (s, s is not False and s.flags.c_contiguous == v.flags.c_contiguous)
        if got[0] is False or keep_layout and not got[1]:
            return None
        out.append(got[0])
    return out


def _stack(v: np.ndarray, d: int, B: int) -> np.ndarray | bool:
    """The array whose slice k is `v` moved by k * d bytes, k < B (False when numpy will not view
    v's buffer so)."""
    root = v.base if v.base is not None else v
    if type(root) is not np.ndarray:
        return False
    try:
        return np.ndarray((B,) + v.shape, v.dtype, root, data_pointer(v) - data_pointer(root), (d,) + v.strides)
    except (ValueError, TypeError):
        return False
