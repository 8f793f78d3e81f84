"""Deferred cube data of a numerics data walk: a kernel's GEMM computed per L0C tile as one
matmul of its GM operands instead of copy by copy and mmad by mmad.

A cube kernel moves fp16 operands GM -> L1 -> L0A / L0B and accumulates mmads over K into an
L0C tile that FixPipe writes out. In the data walk of a launch (sim/kernel.py `_data_walk`; the
timing-only twin times it, so nothing here touches timing) those copies and mmads are recorded
instead of run, with the provenance of every operand proved op by op from the IR's views:

* a GM fp16 -> L1 copy (no transpose, no relu) into a 2-D box of an L1 buffer records that the
  box holds that GM view (its leading overlap, zeros beyond: the copy's rule);
* an L1 -> L0A / L0B copy (no transpose, no relu) of a 2-D box covered by such recorded boxes
  side by side (a fused FFN's gate and up weights in one L1 buffer) records that its
  destination region holds the matching boxes of those GM views;
* an mmad without bias whose A and B are exactly recorded L0A / L0B regions (A of one GM view)
  appends the pair of GM views to its L0C region's sum, per GM view of B for the columns it
  gives (`init` starts the sum, else it adds to what is there). An mmad adding to a region
  that recorded regions tile side by side, or that lies across the columns of one, regroups
  their sums by columns (`_regroup`, where provable: the same A, B's columns continuing each
  other): the matmul template's first and last L1 chunk run by L0C column halves, its middle
  chunks full width, and each element's K stays one run instead of three.

Any other op touching a buffer with recorded content (FixPipe reading L0C, an mmad of other
operands, a copy into part of a recorded L1 buffer) first materialises that buffer (of an L0C
buffer, the sums of the regions it touches: the regions of a buffer are disjoint): recorded
copies run as they would have (the same semantics, from the GM views they recorded), and an L0C
sum is computed as one matmul per run of K-contiguous GM slices, in fp32 on the fp16 values
(wide.py: exact) with fp32 accumulation, as the cube does. A run's matmul is a block of the
product of its super-tile (`CubeDeferral._product`: 512 rows of A, 256 for a K piece, x 1024
columns of B over the same K slice) once a second tile of its GEMM is asked for, kept while no GM write meets its operands:
the other output tiles of a GEMM, in any block, then read their blocks of a few big products
(the same fp32 sums element by element where the BLAS orders K independently of the shape,
else within the bound below: `_product` says when). Before any op writes GM elements
within the span that recorded items read of that buffer (`gm`), everything recorded is
materialised, so recorded reads see their time's GM data. Blocks start with fresh on-chip buffers: what is still recorded at a block's end is
never read and is dropped. A kernel with scalar loads or stores (memref.load / memref.store)
or ops outside the tile ops, scf, arith, views, flags and barriers is not deferred at all
(`eligible`), nor is one none of whose mmads may share a matmul with another (`_joins`: each
would be computed alone, as the mmad computes it).

A GEMM tile's K loop, which records only, is applied to later tiles from a stored execution
(data_loop_memo.py): this module counts what would make that inexact (`effects`, `watch`) and
logs the terms it adds to sums (`_add`, `log`) and which of them were no plain appends to a
region already there (`bent`); a run holding a tile's FixPipes is stored with the sums they
materialise (`_fixpipe`, `fx`, `_sum`), which its replays compute again (`sum_runs`).

Results: copies move the same values; a sum differs from the mmad-by-mmad result only by the
order of its fp32 additions. Both are fp32 evaluations of the same sum of K products of exact
operands, each within gamma_K * sum_k |a_ik b_kj| of the exact sum (gamma_K = K u / (1 - K u),
u = 2^-24; Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1), so they
differ by at most 2 gamma_K sum_k |a_ik b_kj| (before FixPipe's fp16 rounding, which can add
one fp16 ulp). tests/test_deferred_cube.py checks this bound element by element against the
single walk (Accel.none(): every op run as written). The zero padding of edge tiles is left out
of the products: with finite GM data it adds exact zeros (with an inf or NaN in an operand,
padding times it is NaN op by op and left out here: results differ only for non-finite inputs).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

import numpy as np
from xdsl.dialects import memref
from xdsl.ir import Operation

from ascendir.dialects import ascend
from ascendir.interpreter.check.race import extent
from ascendir.interpreter.exec.kblock import BLOCKED_MNK
from ascendir.interpreter.exec.pointer import byte_span, data_pointer
from ascendir.interpreter.exec.semantics import never_read
from ascendir.interpreter.exec.walk import _is_a, operands_of
from ascendir.interpreter.exec.wide import F16, F32, storage_dtype

# ascend ops besides tile ops that a deferred kernel may hold: none of them reads or writes data
_PLAIN = frozenset({"ascend.alloc", "ascend.view", "ascend.block_idx", "ascend.set_flag", "ascend.wait_flag",
                    "ascend.pipe_barrier", "ascend.return"})
_UNKNOWN = object()  # in CubeDeferral.gm: a recorded GM view without an address tag (any GM write flushes)


def eligible(ops: list[Operation], tile_types) -> bool:
    """Whether a kernel's data walk may defer its cube data: every op is a tile op (`tile_types`),
    scf, arith, memref.subview or a data-free ascend op (`_PLAIN`); and whether it gains by it:
    some mmad may share a matmul with others (`_joins`; a kernel without mmads has nothing to
    defer, its ops then run without the deferral's wrapper)."""
    joins = False
    for o in ops:
        if type(o) in tile_types or o.name in _PLAIN or o.name == "memref.subview":
            joins = joins or (isinstance(o, ascend.MmadOp) and _joins(o))
            continue
        if isinstance(o, (memref.LoadOp, memref.StoreOp)) or not o.name.startswith(("arith.", "scf.")):
            return False
    return joins


def _joins(op: ascend.MmadOp) -> bool:
    """Whether the sums of `op` may be computed in one matmul with those of other mmads: it adds
    to its L0C tile (a K run may join it to the mmads before it), or its tile (the static shapes
    of A: m x k and B: k x n; dynamic: may be any) is not one `_super` computes alone. Where no
    mmad of a kernel does, each sum would be one product computed alone (`_once`), the mmad's own
    product: deferring would save only the L1 -> L0 copies' data, for the recording, planning and
    materialising of every copy and mmad (the 7B layer's FlashAttention of
    benchmarks/numerics_speed.py: its P x V tiles, 128 x 96 x 128, ~0.1 s CPU of its ~1.1 s data
    walk more than running them as written)."""
    if op.init.value.data == 0:
        return True
    a, b = (v.type.get_shape() for v in op.operands[:2])
    if len(a) != 2 or len(b) != 2 or min(*a, *b) < 0:  # (dynamic dims: negative)
        return True
    (m, k), n = a, b[1]
    return m >= 16 and n >= 16 and m * n * k >= BLOCKED_MNK


class CubeDeferral:
    """The recorded cube data of one data walk (see the module doc); `tags` is the frame's
    address-tag list (Frame.gm_tags: root, element offset, element strides per slot)."""

    __slots__ = ("tags", "shadows", "copies", "sums", "gm", "grids", "seen", "spans", "span_index", "grid_bytes", "gemms",
                 "census", "effects", "watch", "log", "bent", "fx", "outer", "fxsums")

    def __init__(self, tags: list):
        self.tags = tags
        self.shadows = None  # wide.GmShadows of the launch (None: GM views converted per use)
        # on-chip root -> {region key: (fn, src, dst, pieces, (row, col, rows, cols, row stride) of the region
        # in the buffer)}, in recording order: fn(src, dst) materialises; pieces: `_put` (None: stale)
        self.copies: dict = {}
        # L0C root -> {region key: [accumulate, dst view, terms, region (`_meet`)]}, term = (A view, B view, their address tags)
        self.sums: dict = {}
        # GM root (address tag) -> [first, last] element that recorded items read (their union's span)
        self.gm: dict = {}
        # products of GM super-tiles (`_product`): key -> [fp32 product, its A and B buffers, its
        # elements not yet read]; key -> [the first tile asked of it, elements of its tiles computed
        # alone] (not yet computed); key -> (A bytes, B bytes) it reads
        self.grids: dict = {}
        self.seen: dict = {}
        self.spans: dict = {}
        self.span_index: tuple | None = None  # `spans` searchable (`_meets_span`); None: to build
        self.grid_bytes = 0
        # GEMMs (super-tile keys without the super-tile's row and column) a tile of which was asked
        # for since GM under it last changed: their other super-tiles are computed at their first
        # tile (`_product`)
        self.gemms: set = set()
        # the launch's GM reads (census.py: which rows of a super-tile some block asks for whole),
        # set before each data walk; None: every row
        self.census = None
        # for data_loop_memo.py: ops run on their data (`generic`) and reads of the records whose
        # ids are in `watch` (those made before the loop it records), counted; the terms added to
        # sums (`_add`), logged
        self.effects = 0
        self.watch: set | None = None
        self.log: list | None = None
        self.bent: list = []  # indices in `log` of the adds that were no plain appends (`_add`)
        # while data_loop_memo.py stores a run that may hold FixPipes (`fixpipe`): their events,
        # and the GM spans recorded before the run (`gm` then holds the run's own)
        self.fx: list | None = None
        self.outer: dict | None = None
        self.fxsums: list | None = None  # (the running FixPipe's event's sums, `_sum` logs them)

    def reset(self, shadows) -> None:
        """A block starts (fresh on-chip buffers): drop what is recorded (super-tile products
        stay: they are products of GM data, which blocks share)."""
        self.shadows = shadows
        self.watch = self.log = self.fx = self.outer = None
        if self.copies or self.sums:
            self.copies.clear()
            self.sums.clear()
            self.gm.clear()

    def drop(self) -> None:
        """The data walk ends: drop everything (the host may write GM before the next), the
        addresses of the walk's views (`_addr`) with it."""
        self.reset(None)
        self._forget()
        _ADDRS.clear()

    def _forget(self) -> None:
        self.grids.clear()
        self.seen.clear()
        self.spans.clear()
        self.span_index = None
        self.grid_bytes = 0
        self.gemms.clear()

    # -- wrapping the data walk's semantics -------------------------------------------------
    def wrap(self, op: Operation, sem, ins: list[int], facts: list):
        """`sem` (a data-walk tile op's semantics on its operand values) as run here: recorded
        when its provenance is proved (module doc), else run after materialising the recorded
        content of the buffers it touches. `facts`: per operand of `op`, tile_ops.py's
        `_memref_facts` of its type (numpy dtype, space name, widened), None for a scalar (the
        compile has them: read here again, they were half of this)."""
        tags = self.tags
        mems = [j for j, f in enumerate(facts) if f is not None]
        spaces = {j: facts[j][1] for j in mems}
        dts = {j: facts[j][0] for j in mems}
        copy = _is_a(type(op), ascend.CopyOp)  # (isinstance on xDSL's op classes, ABCs, runs Python code)
        out = mems[-1]  # the written operand (race.py convention)
        slots = [ins[j] for j in mems]
        writes_gm = spaces[out] == "gm"

        def generic(*vals) -> None:
            ev = self._fixpipe(sem, vals, slots) if fixpipe and self.fx is not None else None
            if ev is None:
                self.effects += 1
            else:
                self.fx.append(ev)
                self.fxsums = ev[-1]
            if self.copies or self.sums:
                for j, s in zip(mems, slots):
                    t = tags[s]
                    if t is not None:
                        r = t[0]
                        if r in self.copies:
                            self._flush_copies(r)
                        if r in self.sums:
                            self._flush_sums(r, t, vals[j])
                if writes_gm and (self.gm or self.outer):
                    t = tags[ins[out]]
                    if t is None or self._meets_gm(t, vals[out].shape):  # it overwrites what a recorded item reads
                        self.flush()
            self.fxsums = None
            sem(*vals)
            if writes_gm and self.spans:  # after the write: a flush above may have made a super-tile of the old data
                self._written(vals[out])

        fixpipe = copy and spaces[0] == "l0c" and writes_gm

        if copy and never_read(operands_of(op)[1]):  # (semantics.py: it writes no data)

            def skip(*vals) -> None:
                if self.copies or self.sums:
                    for s in slots:
                        t = tags[s]
                        if t is not None and (t[0] in self.copies or t[0] in self.sums):
                            generic(*vals)  # (what it would materialise first)
                            return

            return skip
        if copy and not _flag(op.transpose) and not _flag(op.relu) and dts[0] == F16 == dts[1]:
            src, dst = spaces[0], spaces[1]
            if src == "gm" and dst == "l1" and storage_dtype(dst, F16) == F32:
                return self._load(sem, generic, ins[0], ins[1])
            if src == "l1" and dst in ("l0a", "l0b") and storage_dtype(src, F16) == F32 == storage_dtype(dst, F16):
                return self._move(sem, generic, ins[0], ins[1])
        if (isinstance(op, ascend.MmadOp) and len(mems) == 3 and dts[0] == F16 and dts[1] == F16 and dts[2] == F32
                and storage_dtype(spaces[0], F16) == F32 == storage_dtype(spaces[1], F16)):
            return self._mmad(generic, op.init.value.data != 0, ins)
        return generic

    def _fixpipe(self, sem, vals: tuple, slots: list[int]) -> list | None:
        """While data_loop_memo.py stores a run that may hold FixPipes (`fx` set): the event of
        FixPipe `sem` on (L0C view, GM view) `vals` (operand slots `slots`) when all it does
        to the deferral is materialise the sums of its L0C regions (`_flush_sums` by view):
        no copy records of its buffers, no sums of its GM buffer, no recorded read of GM (of
        the run's own, `gm`: none of its GM buffer; of before it, `outer`: none it meets);
        else None (it counts among `effects`). The event: [sem, L0C view, GM view, their
        tags, the sums it materialises (`_sum` logs them)]."""
        tc, tg = self.tags[slots[0]], self.tags[slots[1]]
        c = vals[0]
        if tc is None or tg is None or c.ndim != 2 or tc[2][1] != 1:
            return None
        if tc[0] in self.copies or tg[0] in self.copies or tg[0] in self.sums or _UNKNOWN in self.gm or tg[0] in self.gm:
            return None
        if self.outer is not None and (_UNKNOWN in self.outer or self._meets_gm(tg, vals[1].shape)):
            return None
        return [sem, c, vals[1], tc, tg, []]

    def _meets_gm(self, t: tuple, shape: tuple) -> bool:
        """Whether a GM write at address tag `t` of `shape` meets the span recorded items read
        of its buffer (`gm`; while a run is stored, the span of `gm` and `outer` together, as
        one `gm` would hold it)."""
        if _UNKNOWN in self.gm or (self.outer is not None and _UNKNOWN in self.outer):
            return True
        span = self.gm.get(t[0])
        other = None if self.outer is None else self.outer.get(t[0])
        if other is not None:
            span = other if span is None else (min(span[0], other[0]), max(span[1], other[1]))
        if span is None:
            return False
        lo, hi = extent(t, shape)
        return lo <= span[1] and span[0] <= hi

    def _load(self, sem, generic, i_s: int, i_d: int):
        tags = self.tags

        def load(s: np.ndarray, d: np.ndarray) -> None:
            ts, td = tags[i_s], tags[i_d]
            if td is not None and s.ndim == 2 and d.ndim == 2 and td[2][1] == 1:
                self._put(td, d, sem, s, ((0, d.shape[1], s, ts),))
                if ts is None:
                    self.gm[_UNKNOWN] = None
                    return
                a, b = extent(ts, s.shape)
                span = self.gm.get(ts[0])
                if span is None:
                    self.gm[ts[0]] = [a, b]
                else:
                    if a < span[0]:
                        span[0] = a
                    if b > span[1]:
                        span[1] = b
                return
            generic(s, d)

        return load

    def _move(self, sem, generic, i_s: int, i_d: int):
        tags = self.tags
        wide = self._wide
        # source address tag -> `_plan` of the box: which recorded regions (by region key) hold it.
        # A K loop moves the same few boxes of an L1 buffer from fresh loads into the same
        # regions, so the regions' keys repeat while their entries change: a plan holds while its
        # regions are recorded and not stale (the regions not stale are disjoint, `_put`: those
        # holding the box then are the ones the search would find)
        plans: dict = {}

        def fill(pieces: tuple, d: np.ndarray) -> None:
            if len(pieces) == 1:
                sem(wide(pieces[0][2]), d)
                return
            for c0, w, g, _ in pieces:  # side by side along the rows: each with its own zero padding
                sem(wide(g), d[:, c0: c0 + w])

        def move(s: np.ndarray, d: np.ndarray) -> None:
            ts, td = tags[i_s], tags[i_d]
            if ts is not None and td is not None and ts[2][1] == 1 and td[2][1] == 1:
                sh = s.shape
                got = self.copies.get(ts[0]) if len(sh) == 2 and d.shape == sh else None
                if got is not None:
                    p = plans.get(ts)
                    if p is None or p[0] != td or p[1] != sh:
                        p = _plan(got, ts, td, sh)
                        if p is None:
                            generic(s, d)
                            return
                        if sh[0] and sh[1]:  # (an empty box is held by any region: not unique)
                            plans[ts] = p
                    pieces = self._pieces(got, p)
                    if pieces is None:
                        p = _plan(got, ts, td, sh)  # (the regions it read were overwritten since)
                        if p is not None:
                            if sh[0] and sh[1]:
                                plans[ts] = p
                            pieces = self._pieces(got, p)
                    if pieces is not None:
                        self._put(td, d, fill, pieces, pieces, p[2])
                        return
            generic(s, d)

        return move

    def _pieces(self, got: dict, p: tuple) -> tuple | None:
        """The pieces (`_put`) that plan `p` (`_plan`) cuts from the recorded regions `got` of an
        L1 buffer, or None when one of its regions is no longer recorded or is stale. Reading a
        region made before the loop data_loop_memo.py records counts in `effects`."""
        pieces = []
        watch = self.watch
        for rk, c0, i0, h, j0, j1 in p[3]:
            e = got.get(rk)
            if e is None or e[3] is None:
                return None
            if watch is not None and id(e) in watch:
                self.effects += 1
            pieces.append((c0, j1 - j0, *_cut(e, i0, h, j0, j1)))
        return tuple(pieces)

    def _put(self, td: tuple, d: np.ndarray, fn, src, pieces: tuple, key: tuple | None = None) -> None:
        """Record that region `d` (address tag `td`, unit stride along rows; region key `key`,
        (td[1], d.shape, td[2]) when None) of an on-chip buffer
        holds GM views side by side: `pieces` = (column in d, width, GM view, its tag) each
        (a view's leading overlap with its width, zeros beyond); fn(src, d) writes them.

        A recorded region this one overlaps is overwritten: dropped when this one covers it
        (its copy's values are never seen), else kept as stale (pieces None: no op reads it as
        recorded) so that materialising the buffer writes it before this one (the buffer's
        regions in recording order: later copies win where they overlap). The template's
        L0B double buffer alternates a 64 x 64 box of a 64 x 128 region with the whole region
        (its first and last K steps split by columns): materialising each overwritten region
        there converted a weight tile that no op read."""
        root = td[0]
        if key is None:
            key = (td[1], d.shape, td[2])
        got = self.copies.get(root)
        if got is None:
            box = _region(td, d)
            self.copies[root] = {key: (fn, src, d, pieces, box)}
            return
        old = got.get(key)
        if old is not None and len(got) == 1:
            got[key] = (fn, src, d, pieces, old[4])
            return
        if old is not None:
            box = old[4]
            del got[key]  # (re-recorded last: after the stale regions it overwrites)
        else:
            box = _region(td, d)
        for k, e in list(got.items()):
            if _meet(box, e[4]):
                if _covers(box, e[4]):
                    del got[k]
                elif e[3] is not None:
                    got[k] = (e[0], e[1], e[2], None, e[4])
        got[key] = (fn, src, d, pieces, box)

    def _mmad(self, generic, init: bool, ins: list[int]):
        tags = self.tags
        ia, ib, ic = ins[0], ins[1], ins[2]
        # (column, width) of a piece of B -> (c, tc, C's view there, its tag, its region key), of the
        # last c and tc over it: the same objects through a K loop (memref_ops' subview memo hands
        # them back; held, so an identity stays valid)
        parts: dict = {}

        def mmad(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
            ta, tb, tc = tags[ia], tags[ib], tags[ic]
            if ta is not None and tb is not None and tc is not None and c.ndim == 2 and tc[2][1] == 1:
                ga, gb = self.copies.get(ta[0]), self.copies.get(tb[0])
                pa = ga.get((ta[1], a.shape, ta[2])) if ga else None
                pb = gb.get((tb[1], b.shape, tb[2])) if gb else None
                if pa is not None and pb is not None and pa[3] is not None and pb[3] is not None and len(pa[3]) == 1:
                    watch = self.watch
                    if watch is not None and (id(pa) in watch or id(pb) in watch):
                        self.effects += 1
                    _, _, va, sa = pa[3][0]
                    root = tc[0]
                    for c0, w, vb, sb in pb[3]:  # B's pieces side by side: C's columns over them
                        if len(pb[3]) == 1:
                            cv, t = c, tc
                            key = (t[1], cv.shape, t[2])
                        else:
                            part = parts.get((c0, w))
                            if part is None or part[0] is not c or part[1] is not tc:
                                cv = c[:, c0: c0 + w]
                                t = (root, tc[1] + c0, tc[2])
                                part = parts[(c0, w)] = (c, tc, cv, t, (t[1], cv.shape, t[2]))
                            _, _, cv, t, key = part
                        self._add(root, key, cv, t, (va, vb, sa, sb), init)
                    return
            generic(a, b, c)

        return mmad

    def _add(self, root, key: tuple, cv: np.ndarray, t: tuple, term: tuple, init: bool) -> None:
        """An mmad's `term` (A view, B view, their tags) into the sum of L0C region `cv` (of
        buffer `root`, address tag `t`, region key `key`): a new sum when `init`, else added to
        the region's (see `_mmad`). Logged in `log` while data_loop_memo.py records a loop."""
        if self.log is not None:
            self.log.append((root, key, cv, term, init))
        got = self.sums.get(root)
        if got is None:
            got = self.sums[root] = {}
        cur = got.get(key)
        if cur is not None and not init:
            cur[2].append(term)
            return
        if self.log is not None:  # (data_loop_memo.py `_appends`: where its stretches of plain appends end)
            self.bent.append(len(self.log) - 1)
        box = _region(t, cv)
        if any(_meet(box, e[3]) for k, e in got.items() if k != key):
            if not init and _regroup(got, key, cv, box):  # the same sums over other column ranges
                got[key][2].append(term)
                return
            self._flush_sums(root)  # another recorded region of the tile overlaps: write it first
            got = self.sums[root] = {}
        elif cur is not None:  # init on a region with a sum recorded: that sum is overwritten
            del got[key]
        got[key] = [not init, cv, [term], box]

    # -- materialising -----------------------------------------------------------------------
    def _wide(self, g: np.ndarray) -> np.ndarray:
        sh = self.shadows
        return g.astype(F32) if sh is None else sh.wide(g)

    def _flush_copies(self, root) -> None:
        for fn, src, dst, *_ in self.copies.pop(root).values():
            fn(src, dst)

    def _flush_sums(self, root, tag: tuple | None = None, v: np.ndarray | None = None) -> None:
        """Materialise the recorded sums of L0C buffer `root`: those meeting view `v` (address
        tag `tag`, 2-D with unit stride along rows) when given, else all. The regions of a
        buffer are disjoint (`_mmad`), so those left keep their values: the template's last L1
        chunk by column halves sends the left half through FixPipe before the right half's last
        mmads, which then still add to its one K run."""
        got = self.sums[root]
        if v is not None and v.ndim == 2 and tag[2][1] == 1:
            box = _region(tag, v)
            for k, e in list(got.items()):
                if _meet(box, e[3]):
                    del got[k]
                    self._sum(e[0], e[1], e[2])
            if got:
                return
        for acc, c, terms, *_ in self.sums.pop(root).values():
            self._sum(acc, c, terms)

    def flush(self) -> None:
        """Materialise everything recorded (a GM buffer recorded items read is about to change)."""
        for root in list(self.copies):
            self._flush_copies(root)
        for root in list(self.sums):
            self._flush_sums(root)
        self.gm.clear()
        if self.outer is not None:
            self.outer.clear()

    def _sum(self, acc: bool, c: np.ndarray, terms: list) -> None:
        """c (+)= sum of the terms' products: a@b of each term's GM views (A: m x k leading part
        of the L0A tile, B: k x n of the L0B tile, zeros beyond), one product per run of terms
        whose A slices follow each other along K in one GM buffer, as their B slices do (`_runs`;
        each product `_product`). Logged for the FixPipe running while data_loop_memo.py
        stores a run (`fxsums`); elsewhere then it counts among `effects`."""
        runs = _runs(terms)
        if self.fx is not None:
            if self.fxsums is None:
                self.effects += 1
            else:
                self.fxsums.append((acc, c, runs))
        self.sum_runs(acc, c, runs)

    def sum_runs(self, acc: bool, c: np.ndarray, runs: list) -> None:
        """`_sum` of the runs `runs` (`_runs`) of a sum's terms."""
        first = not acc
        for ga, gb, _, _ in runs:
            m, n = ga.shape[0], gb.shape[1]
            p = self._product(ga, gb) if m and n else None
            if first:
                if (m, n) != c.shape or p is None:
                    c[...] = 0
                if p is not None:
                    c[:m, :n] = p
                first = False
            elif p is not None:
                c[:m, :n] += p

    def _product(self, ga: np.ndarray, gb: np.ndarray) -> np.ndarray:
        """wide(ga) @ wide(gb) (fp32, m x n): a block of the product of the super-tile holding it
        (`_super`: the same K slices, aligned bands of A's rows x GRID_COLS columns of B),
        computed when a second tile of that super-tile is asked for since GM under it last
        changed (a GEMM's other output tiles then follow, in this block or later ones), or at
        its first tile when a tile of another super-tile of the same GEMM (same buffers,
        strides and K slice) was asked for since, kept until as many of its elements were read
        as it has (each tile is read once per K slice: kept longer, a GEMM of more super-tiles
        than GRID_BYTES holds would start over and compute them again for almost every tile), a
        GM write meets the bytes it read (`_written`) or the data walk ends; a GEMM's first
        tile, or one no super-tile holds, is computed alone. A super-tile computes only the rows
        the launch's `census` (census.py, from the L2 recording pass's reads) sees some block
        read over exactly its K slice: a tile of rows left out is computed alone (a wrong census
        costs time, never bits).

        Same values: each element of a product is the same fp32 sum of the same K products
        whether it is computed in a 128 x 128 tile or a 512 x 1024 one, as long as the BLAS
        orders an element's K products independently of M, N and the element's place (OpenBLAS's
        SkylakeX sgemm: K is blocked by its K alone and each element accumulated along K in one
        lane). Its Haswell sgemm (AVX2 machines without AVX-512; OpenBLAS 0.3.31 on an AMD EPYC)
        orders by shape: there a block differs from its tile's own product in the last bits,
        both within the module doc's bound (tests/blas_order.py probes which; test_deferred_cube.py
        checks equality or the bound accordingly). Faster: single-thread sgemm packs both
        operands for every product, so a 128 x 4096 x 128 tile ran at ~90 GFLOP/s in the 7B layer
        of benchmarks/numerics_speed.py where a 512 x 4096 x 1024 product runs at ~160. Waste is
        bounded: a super-tile is computed only after two tiles of its GEMM were asked for since
        GM under them last changed (a P x V attention tile whose P is rewritten before each
        read never is); waiting for two tiles of each super-tile instead would compute every
        super-tile's first tile alone besides (the blocks of a launch start on different
        super-tiles): in the 7B layer (with 1024-column super-tiles) 48 tiles of 1/8 of a
        super-tile's product each, at ~105 GFLOP/s, their weight slices converted twice, against
        10 this way."""
        sup = _super(ga, gb)
        if sup is None:
            return self._once(ga, gb)
        key, box, at = sup
        got = self.grids.get(key)
        if got is None:
            a, b, spans = _views(ga, gb, at)
            first = self.seen.get(key)
            gemm = key[:-2]
            # (at the bound on what is kept: this tile alone, the super-tiles kept stay until read;
            # starting over would compute them again, for almost every tile of a GEMM of more
            # super-tiles than the bound holds)
            if ((first[0] == box if first is not None else gemm not in self.gemms)
                    or self.grid_bytes + 4 * a.shape[0] * b.shape[1] > GRID_BYTES):
                if first is None:
                    first = self.seen[key] = [box, 0]
                first[1] += ga.shape[0] * gb.shape[1]
                self._span(key, spans)
                self.gemms.add(gemm)
                return self._once(ga, gb)
            lo, hi = 0, a.shape[0]
            if self.census is not None:  # (rows no block reads whole over this K slice: left out)
                isa = ga.itemsize
                lo, hi = self.census.rows(at[0], at[1], key[1] // isa, key[5] // gb.itemsize, at[2] // isa, key[3], at[3],
                                          *at[4:])
                lo, hi = lo - at[4], hi - at[4]
            # [product of rows [lo, hi), A's and B's buffers, its elements not yet read (those of
            # the first tile, computed alone, were), lo, hi]
            done = first[1] if first and lo <= first[0][0] and first[0][0] + first[0][1] <= hi else 0
            got = self.grids[key] = [self._once(a[lo: hi] if hi - lo < a.shape[0] else a, b), _owner(ga), _owner(gb),
                                     (hi - lo) * b.shape[1] - done, lo, hi]
            self._span(key, spans)
            self.seen.pop(key, None)
            self.grid_bytes += got[0].nbytes
        i, j = box[0], box[2]
        if i < got[4] or i + box[1] > got[5]:  # rows the census left out, asked for after all
            return self._once(ga, gb)
        i -= got[4]
        tile = got[0][i: i + ga.shape[0], j: j + gb.shape[1]]
        got[3] -= tile.size
        if got[3] <= 0:  # every tile read: dropped now
            del self.grids[key]
            self.grid_bytes -= got[0].nbytes
        return tile

    def _once(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a @ b in fp32 (a super-tile's or a lone tile's operands). A (row slices of the
        activations, re-read by every column of super-tiles) through the launch's fp32 copies
        (`_wide`: converted once, in memory the previous launch used); B (a column slice of a
        weight, read by this product alone) converted into the chip's work buffer (wide.py
        `GmShadows.product`: one of sgemm's K blocks at a time where the BLAS allows, kblock.py,
        else whole): through the copies a lone tile's slice would convert the weight whole (it
        crosses every row's chunk), and the copy of a weight is fresh memory, whose first touch
        costs more than converting (~40 ns per fp32 element on the benchmark machine, ~1.3 to
        convert). A B inside one the work buffer holds whole is read there, not converted again
        (`GmShadows.held`: a tail split's K pieces after their whole-K super-tile, where it was
        not converted by K blocks)."""
        sh = self.shadows
        if sh is None or b.dtype != F16:
            return self._wide(a) @ self._wide(b)
        return sh.product(self._wide(a), b, 0)

    def _span(self, key: tuple, spans: tuple) -> None:
        """Record the byte intervals (A first, A last, B first, B last) a super-tile (or first
        tile) `key` reads."""
        if self.spans.get(key) != spans:
            self.spans[key] = spans
            self.span_index = None

    def _meets_span(self, lo: int, hi: int) -> bool:
        """Whether bytes [lo, hi] meet an interval of `spans`: the intervals sorted by their first
        byte with the running maximum of their last (`span_index`, built when asked after a
        change), the ones starting at or before `hi` meet it when that maximum reaches `lo`.
        (Most GM writes, a GEMM's output tiles, meet none: `_written` then skips its loop over
        every super-tile.)"""
        ix = self.span_index
        if ix is None:
            ivs = sorted(iv for s in self.spans.values() for iv in ((s[0], s[1]), (s[2], s[3])))
            ix = self.span_index = ([a for a, _ in ivs], list(accumulate((b for _, b in ivs), max)))
        i = bisect_right(ix[0], hi)
        return i > 0 and ix[1][i - 1] >= lo

    def _written(self, v: np.ndarray) -> None:
        """GM view `v` was just written: forget the super-tiles (and first tiles) whose
        GM bytes it may meet (byte intervals)."""
        lo, hi = byte_span(v, _addr(v))
        if hi < lo or not self._meets_span(lo, hi):
            return
        if self.shadows is not None:  # (a weight slice converted for a super-tile it meets: converted again)
            self.shadows.forget(lo, hi)
        for key, (alo, ahi, blo, bhi) in list(self.spans.items()):
            if (lo <= ahi and alo <= hi) or (lo <= bhi and blo <= hi):
                del self.spans[key]
                self.span_index = None
                self.seen.pop(key, None)
                self.gemms.discard(key[:-2])
                got = self.grids.pop(key, None)
                if got is not None:
                    self.grid_bytes -= got[0].nbytes


# a super-tile's rows of A and columns of B (`CubeDeferral._product`, `_super`). Each super-tile
# converts its B slice (k x GRID_COLS, a weight's columns: read by this product alone, wide.py
# `widened`), so every band of rows converts the weight again: the 7B layer's GEMMs have 512 rows,
# and 256-row bands converted each of its 202 M weight elements twice (~0.9 ns per element on
# the Sapphire Rapids machine, 0.18 s of the layer; sgemm runs at ~153 GFLOP/s for 256 x 4096 x
# 1024 there, ~158 for 512 rows). A bigger band computes more that nobody reads where only some
# of its rows are asked for: the 7B layer's down projection splits its last wave's tiles along K
# (tail split, catlass TailSplitK: nn_to_ascend/templates/matmul.py), so a full-K super-tile
# would compute the split rows' full-K products for nothing, and a super-tile of a K piece the
# whole tiles' rows; the launch's census (census.py) leaves such rows out. K pieces (a K slice
# narrower than A's rows) are asked for by the split tiles' rows only: their bands keep 256 rows
# (GRID_ROWS // 2). 2048 columns rather than 1024: half the sgemm calls, each packing A once for
# twice the columns (512 x 11008 x 2048 at ~178 GFLOP/s there against ~170 as two of 1024
# columns; ~181 against ~176 for K 4096): the layer ~0.03 s CPU less (21 runs of each alternated
# in one process on the loaded 2-core machine: mean difference -0.033 s, 15 of 21 pairs less).
# The layer's products: 220.3 GFLOP without the census, 208.8 with it (the down projection 58.4
# -> 46.9 for its 46.2). Bigger bands cost memory: B's work buffer holds one of sgemm's K blocks,
# 448 x 2048 fp32 (kblock.py; 2048 columns also beat 1024 and 4096 there: 348-353 ms against
# 365-371 and 357-367 for 512 x 4096 x 12288 on the benchmark machine), or, where the BLAS's
# blocks are not known, the down projection's whole 11008 x 2048 (90 MB, within wide.py's
# POOL_BYTES: the layer's second run takes no fresh memory). Columns nobody reads (a GEMM asking
# for some of a band's columns only, an MoE expert's sparse columns) grow likewise; of benchmarks/moe.py's layers (numerics, 512 tokens, hidden 4096,
# 8 experts of 2048, top-2) the grouped experts defer no products here and the dense all-experts
# GEMMs read every column (207.8 GFLOP with either)
GRID_ROWS, GRID_COLS = 512, 2048
GRID_BYTES = 256 << 20  # super-tile products kept at most (bytes of fp32) per data walk


def _runs(terms: list) -> list[tuple]:
    """The (A, B) GM view pairs whose products sum to a recorded L0C sum (`CubeDeferral.sums`
    terms), in order: one pair per run of terms whose A slices follow each other along K in one
    GM buffer, as their B slices do (A: m x k, B: k x n), each with the address tags of its first
    term (those of the run's views: they start there, with its strides)."""
    out = []
    i, n_terms = 0, len(terms)
    while i < n_terms:
        ga, gb, pa, pb = terms[i]
        m, ka = ga.shape
        kb, n = gb.shape
        k = min(ka, kb)
        oa, ob = _owner(ga), _owner(gb)
        j = i + 1
        # (tags: root, element offset, element strides; the next slices start k elements on along
        # K: their tags are those of this run's first slices moved on, compared whole)
        if (k == ka == kb and oa is not None and ob is not None and pa is not None and pb is not None
                and ga.strides[1] == pa[2][1] * ga.itemsize and gb.strides[0] == pb[2][0] * gb.itemsize):
            ra, a0, sta = pa
            rb, b0, stb = pb
            da, db = sta[1], stb[0]
            while j < n_terms:
                ha, hb, qa, qb = terms[j]
                if ha.base is not oa or hb.base is not ob or qa != (ra, a0 + k * da, sta) or qb != (rb, b0 + k * db, stb):
                    break
                hm, hka = ha.shape
                hkb, hn = hb.shape
                if hm != m or hn != n:
                    break
                j += 1
                if hka != hkb:
                    k += min(hka, hkb)
                    break  # (a slice padded along K ends its run)
                k += hka
        if j > i + 1:  # the run's slices as one view each (inside the buffers: the terms' views tile them)
            ga = np.ndarray((m, k), ga.dtype, oa, _addr(ga) - _addr(oa), ga.strides)
            gb = np.ndarray((k, n), gb.dtype, ob, _addr(gb) - _addr(ob), gb.strides)
        else:
            ga, gb = ga[:, :k], gb[:k, :]
        out.append((ga, gb, pa, pb))
        i = j
    return out


def _joined(t: tuple, u: tuple) -> tuple | None:
    """Terms `t` and `u` of a sum (A view, B view, their tags) as one term when `_runs` takes
    `u` on a run that `t` starts (or ends: a run through `t` is one through its slices) without
    ending it there: the same GM buffers, u's slices k elements on along K, the same rows and
    columns, neither padded along K. Its views are those `_runs` makes of the run; None otherwise."""
    k = _run_k(t, t[0].shape[1], u)
    return None if k is None else _run_term(t, k)


def _run_k(t: tuple, k: int, u: tuple) -> int | None:
    """The K of a run that starts at term `t` and has taken `k` elements of K when `_joined`
    takes term `u` on it (k is t's own K or that of the term `_run_term(t, k)`: whatever was
    joined onto t keeps its rows, columns, buffers and strides), or None when it would not. A
    chain of terms is then checked without building the views of each join (`_appends`). (t's
    own A and B agree on K where a run starts at it, so the joined term's always do.)"""
    va, vb, sa, sb = t
    ua, ub, qa, qb = u
    m = va.shape[0]
    oa, ob = _owner(va), _owner(vb)
    if (vb.shape[0] != va.shape[1] or ua.shape[1] != ub.shape[0] or oa is None or ob is None or sa is None or sb is None
            or va.strides[1] != sa[2][1] * va.itemsize or vb.strides[0] != sb[2][0] * vb.itemsize
            or ua.base is not oa or ub.base is not ob or ua.shape[0] != m or ub.shape[1] != vb.shape[1]
            or qa != (sa[0], sa[1] + k * sa[2][1], sa[2]) or qb != (sb[0], sb[1] + k * sb[2][0], sb[2])):
        return None
    return k + ua.shape[1]


def _run_term(t: tuple, k: int) -> tuple:
    """Term `t` (A view m x ., B view . x n, their tags) widened to `k` elements of K from its
    first ones (views on t's GM buffers, t's strides): the term `_run_k` checked a run of."""
    va, vb, sa, sb = t
    oa, ob = va.base, vb.base
    return (np.ndarray((va.shape[0], k), va.dtype, oa, _addr(va) - _addr(oa), va.strides),
            np.ndarray((k, vb.shape[1]), vb.dtype, ob, _addr(vb) - _addr(ob), vb.strides), sa, sb)


def _regroup(got: dict, key: tuple, cv: np.ndarray, box: tuple) -> bool:
    """Regroup the recorded sums of an L0C buffer (`CubeDeferral.sums` of its root: region key
    -> [accumulate, view, terms, region]) so that region `box` (key `key`, view `cv`, columns
    side by side with or inside recorded ones, the same rows) holds one, every element keeping
    its sum: the template's first and last L1 chunk by L0C column halves (templates/matmul.py
    `_tile_halves`) then stay one K run per element instead of three products.

    * Regions that tile `box` exactly, side by side, with the same accumulate flag and term by
      term the same A view and B views that continue each other along B's rows (all but the
      last full width, in one GM buffer): one region whose terms have that A and the B columns
      of them all (a full-width mmad after the first chunk's halves).
    * One region holding `box`: split into its column ranges before, at and after `box`, each
      with the region's flag and its terms' B columns (a half's mmad in the last chunk).

    Returns False, `got` untouched, when neither holds (the caller materialises instead)."""
    r0, c0, rows, cols, stride = box
    met = sorted((e[3][1], k, e) for k, e in got.items() if _meet(box, e[3]))
    if any(e[3][0] != r0 or e[3][2] != rows or e[3][4] != stride for _, _, e in met):
        return False
    if len(met) == 1 and _covers(met[0][2][3], box):
        _, k, (acc, ce, terms, eb) = met[0]
        del got[k]
        for a, b in ((eb[1], c0), (c0, c0 + cols), (c0 + cols, eb[1] + eb[3])):
            if a < b:
                part = _columns(terms, a - eb[1], b - eb[1])
                if a == c0:
                    got[key] = [acc, cv, part, box]
                else:
                    got[(k[0] + a - eb[1], (rows, b - a), k[2])] = [acc, ce[:, a - eb[1]: b - eb[1]], part, (r0, a, rows, b - a, stride)]
        return True
    at, acc, n = c0, met[0][2][0], len(met[0][2][2])
    for col, _, e in met:
        if col != at or e[0] != acc or len(e[2]) != n:
            return False
        at += e[3][3]
    if at != c0 + cols:
        return False
    terms, width = list(met[0][2][2]), met[0][2][3][3]
    for _, _, e in met[1:]:
        for i, u in enumerate(e[2]):
            t = _beside(terms[i], width, u)
            if t is None:
                return False
            terms[i] = t
        width += e[3][3]
    for _, k, _ in met:
        del got[k]
    got[key] = [acc, cv, terms, box]
    return True


def _columns(terms: list, a: int, b: int) -> list:
    """A recorded sum's terms (A view, B view, their address tags each) for the columns [a, b) of
    its region: B's columns there (none beyond B's view: zero padding)."""
    return [(va, vb[:, a: b], sa, None if sb is None else (sb[0], sb[1] + a * sb[2][1], sb[2])) for va, vb, sa, sb in terms]


def _beside(t: tuple, width: int, u: tuple) -> tuple | None:
    """Term `t` of a region `width` columns wide and term `u` of the region right of it as one
    term of both (`_regroup`): the same A view, u's B columns continuing t's in one GM buffer,
    t's B full width; else None."""
    va, vb, sa, sb = t
    ua, ub, qa, qb = u
    if sa is None or sb is None or qa != sa or qb is None or qb[0] != sb[0] or qb[2] != sb[2] or qb[1] != sb[1] + width * sb[2][1]:
        return None
    if ua.shape != va.shape or ua.strides != va.strides or ua.dtype != va.dtype or _addr(ua) != _addr(va):
        return None
    o = _owner(vb)
    if (o is None or _owner(ub) is not o or vb.shape[1] != width or ub.shape[0] != vb.shape[0] or ub.dtype != vb.dtype
            or ub.strides != vb.strides or vb.strides[1] <= 0 or _addr(ub) != _addr(vb) + width * vb.strides[1]):
        return None
    return va, np.ndarray((vb.shape[0], width + ub.shape[1]), vb.dtype, o, _addr(vb) - _addr(o), vb.strides), sa, sb


def _super(ga: np.ndarray, gb: np.ndarray) -> tuple | None:
    """The super-tile holding the product of A slice `ga` (m x k) and B slice `gb` (k x n), both
    row-major views of C-contiguous GM buffers: key = (A's buffer, row stride, byte column of the
    K slice, k, B's buffer, row stride, first row of the K slice, dtypes, super-tile row and
    column); box = (row, rows, column, columns) of the tile in the super-tile; where the
    super-tile lies in the buffers, for `_views` (built only when a super-tile is computed or
    first seen: most tiles are read from a kept product, and the views cost more than the key).
    None when a view is not such a slice, the tile is small (BLOCKED_MNK) or it straddles two
    super-tiles."""
    oa, ob = _owner(ga), _owner(gb)
    if oa is None or ob is None:
        return None
    isa, isb = ga.itemsize, gb.itemsize
    sa, sb = ga.strides[0], gb.strides[0]
    m, k = ga.shape
    n = gb.shape[1]
    if m < 16 or n < 16 or m * n * k < BLOCKED_MNK or ga.strides[1] != isa or gb.strides[1] != isb or sa <= 0 or sb <= 0:
        return None
    i0, ca = divmod(_addr(ga) - _addr(oa), sa)
    kb, cb = divmod(_addr(gb) - _addr(ob), sb)
    if ca + k * isa > sa or cb % isb:
        return None
    j0 = cb // isb
    rows = (oa.nbytes - ca - k * isa) // sa + 1  # rows of A's buffer holding the K slice
    cols = min(sb // isb, (ob.nbytes - (kb + k - 1) * sb) // isb)  # columns of B's buffer over it
    band = GRID_ROWS if k * isa == sa else GRID_ROWS // 2  # (a K piece: GRID_ROWS says why)
    wr, wc = i0 // band, j0 // GRID_COLS
    if (i0 + m - 1) // band != wr or (j0 + n - 1) // GRID_COLS != wc or i0 + m > rows or j0 + n > cols:
        return None
    r0, c0 = wr * band, wc * GRID_COLS
    key = (id(oa), sa, ca, k, id(ob), sb, kb, ga.dtype, gb.dtype, wr, wc)
    return key, (i0 - r0, m, j0 - c0, n), (oa, ob, ca, kb, r0, min(r0 + band, rows), c0, min(c0 + GRID_COLS, cols))


def _views(ga: np.ndarray, gb: np.ndarray, at: tuple) -> tuple:
    """The super-tile's A (rows x k) and B (k x columns) views, clipped to the buffers, and the
    byte intervals [first, last] of A's and B's buffers they read, for a tile `ga` x `gb` whose
    super-tile lies at `at` (`_super`)."""
    oa, ob, ca, kb, r0, r1, c0, c1 = at
    sa, sb, isb = ga.strides[0], gb.strides[0], gb.itemsize
    k = ga.shape[1]
    a = np.ndarray((r1 - r0, k), ga.dtype, oa, ca + r0 * sa, ga.strides)
    b = np.ndarray((k, c1 - c0), gb.dtype, ob, kb * sb + c0 * isb, gb.strides)
    pa, pb = _addr(a), _addr(b)
    spans = (pa, pa + (r1 - r0 - 1) * sa + k * ga.itemsize - 1, pb, pb + (k - 1) * sb + (c1 - c0) * isb - 1)
    return a, b, spans


def _region(tag: tuple, v: np.ndarray) -> tuple:
    """The region (row, column, rows, columns, row stride) of its buffer that 2-D view `v` with
    address tag `tag` (root, element offset, strides) covers (`_meet`, `_covers`)."""
    return (*divmod(tag[1], tag[2][0]), v.shape[0], v.shape[1], tag[2][0])


def _meet(a: tuple, b: tuple) -> bool:
    """Whether two regions (row, column, rows, columns, row stride) of one buffer share an
    element (regions of different row strides: assumed to)."""
    return a[4] != b[4] or (a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3])


def _covers(a: tuple, b: tuple) -> bool:
    """Whether region `a` (row, column, rows, columns, row stride) holds every element of region
    `b` of the same buffer (regions of different row strides: assumed not to)."""
    return a[4] == b[4] and a[0] <= b[0] and b[0] + b[2] <= a[0] + a[2] and a[1] <= b[1] and b[1] + b[3] <= a[1] + a[3]


def _plan(got: dict, ts: tuple, td: tuple, sh: tuple) -> tuple | None:
    """Where the recorded regions of an L1 buffer (`CubeDeferral.copies` of its root: region key
    -> entry) hold the 2-D box `sh` (rows, columns) at address tag `ts` (unit stride along rows)
    that an L1 -> L0 copy moves into a region of tag `td`: (td, sh, the destination's region
    key, ((region key, column in the box, then rows and columns of the buffer as `_cut` takes
    them) per piece, side by side)), or None when no regions not stale hold it side by side.
    One region holding the whole box (the usual case) needs no sorting: the regions not stale
    are disjoint (`_put`), so the one holding the box's first column is the one the column
    walk would take."""
    i0, j0 = divmod(ts[1], ts[2][0])  # the box of its L1 buffer (row-major 2-D)
    h, w = sh
    key = (td[1], sh, td[2])  # (the destination's region key: its shape is sh)
    for rk, e in got.items():
        r0, c0, rows, cols, _ = e[4]
        if e[3] is not None and r0 <= i0 and i0 + h <= r0 + rows and c0 <= j0 and j0 + w <= c0 + cols:
            return td, sh, key, ((rk, 0, i0, h, j0, j0 + w),)
    pieces = []
    at = j0  # the next column to find a recorded GM load for
    for rk, e in sorted(got.items(), key=lambda kv: kv[1][4][1]) if len(got) > 1 else got.items():
        r0, c0, rows, cols, _ = e[4]
        if r0 <= i0 and i0 + h <= r0 + rows and c0 <= at < c0 + cols and e[3] is not None:
            end = min(c0 + cols, j0 + w)
            pieces.append((rk, at - j0, i0, h, at, end))
            at = end
            if at == j0 + w:
                return td, sh, key, tuple(pieces)
    return None


def _cut(entry: tuple, i0: int, h: int, j0: int, j1: int) -> tuple:
    """(view, address tag) of rows [i0, i0 + h) and columns [j0, j1) of an L1 buffer, cut from
    the GM load a recorded region (`CubeDeferral.copies` entry) holds them from; the tag, when
    the load has one, is that of the box of the loaded view."""
    r0, c0 = entry[4][0], entry[4][1]
    _, _, g, gt = entry[3][0]
    a, b = i0 - r0, j0 - c0
    if gt is not None:
        gt = (gt[0], gt[1] + a * gt[2][0] + b * gt[2][1], gt[2])
    return g[a: a + h, b: b + j1 - j0], gt


def _flag(attr) -> bool:
    """An optional integer attribute of a copy (transpose, relu) set and not 0."""
    return attr is not None and attr.value.data != 0


def _owner(v: np.ndarray) -> np.ndarray | None:
    """The C-contiguous ndarray `v` views (a GM buffer), or None (its slices are not merged)."""
    o = v.base
    return o if type(o) is np.ndarray and o.flags.c_contiguous else None


def _addr(v: np.ndarray) -> int:
    """The address (bytes) of view `v`'s first element, kept per array object while a data walk
    runs (`_ADDRS`): ~64,000 calls in the 7B layer of benchmarks/numerics_speed.py, on ~24,000
    arrays (the GM buffers and the A slices of a GEMM are asked for again and again). An
    ndarray's data pointer never changes; the entry holds the array, so its id stays its own."""
    got = _ADDRS.get(id(v))
    if got is not None:  # (the entry holds its array: no other live array has its id)
        return got[1]
    a = data_pointer(v)
    if len(_ADDRS) >= ADDRS:
        _ADDRS.clear()
    _ADDRS[id(v)] = (v, a)
    return a


ADDRS = 1 << 14  # arrays `_addr` remembers at most (it forgets all then; and when a data walk ends)
_ADDRS: dict = {}  # id(array) -> (array, address)
