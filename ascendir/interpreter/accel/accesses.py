"""GM accesses as arrays: the records a sampling loop logs (`Acc`: op, stream, offset, time, read,
L2 outcome per access) and their replay into the L2 model at the times and addresses of the
iterations a jump or a stored execution skipped (`_apply_accesses`). Shared by the steady-state
jump (steady.py), the loop memo (loop_memo.py) and cross-block reuse (xblock.py)."""

from __future__ import annotations

import functools
import numpy as np
from ascendir.interpreter.timing.l2 import first_rewrite_change


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


def _naccesses(records: list) -> int:
    """GM accesses in a slice of `F.gm_log` (an executed access is one tuple, a replayed run one
    `Acc`)."""
    return sum(len(r.cid) if type(r) is Acc else 1 for r in records)


@functools.lru_cache(maxsize=256)
def _ks(K: int) -> tuple[np.ndarray, np.ndarray]:
    """1..K as an int64 column and as a float64 column (shared by every _Replay with K rows)."""
    ks = np.arange(1, K + 1, dtype=np.int64)[:, None]
    return ks, ks.astype(np.float64)


def _tile(x: np.ndarray, m: int) -> np.ndarray:
    """np.tile(x, m) for a 1-D x, without np.tile's Python-level overhead."""
    return x[None, :].repeat(m, 0).ravel()


_TILED: dict[tuple, np.ndarray] = {}  # (dtype, pattern bytes) -> the pattern repeated, most rows built so far


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


def first_write_change(F, keys: np.ndarray, times: np.ndarray, expect: np.ndarray) -> int:
    """l2.first_rewrite_change against the dirty map this pass's writes go to (the chip L2's in
    the timed pass, the recording pass's own)."""
    p = F.l2 if F.numerics_on else F.l2_pass
    return first_rewrite_change(p.dirty, p.window, keys, times, expect)


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
