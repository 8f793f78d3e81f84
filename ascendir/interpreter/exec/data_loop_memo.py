"""Whole executions of a deferred K loop reused by the data walk's later tiles.

In the data walk of a kernel whose cube data is deferred (deferred.py), a GEMM tile's K loop
(GM -> L1 copies, L1 -> L0A / L0B copies, mmads, flags) changes nothing but records: which GM
box each on-chip region holds, which pairs of GM views each L0C region sums, which GM spans the
records read. Every tile runs the same loop on other GM boxes, ~0.2 ms of Python per K step.
`DataLoopMemo` keeps one execution of such a loop and applies it to the next ones: the copies'
records the loop leaves and the terms its mmads add to sums, their GM views moved to the new
tile's addresses and their on-chip views to the running block's buffers. The terms go through
deferred.py's `_add` again, in their order, onto the sums the tile has then (the matmul
template's first K step runs before the loop, by L0C column halves, and the loop's first mmad
regroups those halves); the terms a region appends one K slice after the other, between the
adds that start, regroup or materialise sums, go as one term (`_appends`: the same runs of K, so
the same products), each such stretch only while its regions are there (`_add_all`).

When it is exact. Static (`plan`): the loop carries no values; every op in it is a scalar op,
a subview, a flag, scf, an mmad or a copy GM -> L1, L1 -> L0A / L0B, or GM into a buffer no
op reads (semantics.py `never_read`: the matmul's L2 prefetch); every GM copy reads a
subview of a GM buffer defined outside the loop whose dynamic offsets are the loop's address
values (loop_memo.memo_inputs: outside values used inside only as such offsets), and the copies
of one buffer are offset alike. At run time, an execution applies when these are as when it was
stored: every other outside value the loop reads (control values: scalars by value, buffers by
address tag, shape and dtype; a scalar the loop reads only through tests of outside values, as
the matmul template's `tile == the block's first tile`, by those tests' results), the flag
queues' lengths (the data walk's flags carry no times),
the copies' records on entry (per buffer: region keys, stale or not) and, while a block follows
a race-checked block's decisions (race.py `decide`), that those decisions are the stored ones.
Then the walk would run the same ops in the same order on views that differ only by address: GM
views by the address values times the buffers' strides (one shift per buffer), on-chip views by
the block's buffers. deferred.py's recording decides from regions of on-chip buffers and from
relations between GM views of one buffer (equal, following each other), which a common shift
keeps. So the copies' records it would leave are the stored ones so moved, and the terms it
would add are the stored ones so moved. In a block the race check follows in full (the first,
and those that leave their checked block's decisions: race.py), the loop's calls to the check
(accesses with their operands' tags, sets / waits, decisions) are the stored execution's, its
GM tags moved alike: they are stored with it (a tape) and a replay there makes them again
(RaceChecker.play), so the check raises what it would raise; a cheap block's are its checked
block's decisions (compared) and GM operands (logged), which a tape holds too (`_cheap_calls`:
the first block's executions serve the cheap blocks after it). An execution is stored only
when it ran with no pipe held (holds.py: a held pipe reorders the ops), in the mode it started
in (cheap, in full, no check), ran no op on its data (deferred.py `effects`: a fallback), read no
copy's record made before it (`watch`: what it left is its own; a stale mark of an earlier
record, which keeps that record's source, is refused too), kept its block's checked decisions,
and when every view it left rebuilds from its tag exactly (data address, shape, strides and,
for GM views, owner). tests/test_data_loop_memo.py compares outputs, reports and
race verdicts with the walk that runs every op.

Runs of ops. A tile of the matmul template runs its first L1 chunk by L0C column halves (two
loops of L1 -> L0 copies and mmads, no GM copy: no memo of their own, they read the chunk's L1
records), its middle chunks' K loop, then its last chunk by halves with a FixPipe after each.
The ops from the tile's first GM copy to its first FixPipe hold nothing but what a stored
execution may hold, so such a run of consecutive ops of a block (`run_memos`) has a memo too,
the same as a loop's with "the loop carries no values" read as "no value the run defines is
read after it" (a replay sets none): the run is one execution, its address values those outside
values used in it only as GM offsets (the tile's row and column). Its stretches of plain
appends come between the regroups of the L0C halves (`_appends`). Runs are taken only where
their key may repeat (`plan_run`: comparisons as tests), and a memo that
stores without replaying stops storing for the walk (`TRIES`): storing runs the K loop inside
with its own memo off.

Runs with FixPipes. A run may also hold FixPipes into GM (L0C -> GM copies), none inside a loop
of the run (`_in_loop`: a run holding the tile loop would be keyed by the block's tiles), so a
tile's whole iteration after its row and column are computed is one run (its leading scalar
ops left out, `_trimmed`: those values are then its address values; a column plus a constant
that only GM subviews read moves with the column, `_aliases`); where no such run plans, the
runs FixPipes cut are taken as before (`run_memos`). While such a run is stored, the deferral logs each FixPipe (deferred.py
`_fixpipe`) when all it does to the deferral is to materialise sums of its L0C regions: no
copy records of its buffers, no sums of its GM buffer, no recorded GM read (the run's own or
one made before it, `outer`) its write meets; any other data effect, or a sum materialised
elsewhere, counts in `effects` (refused). Such an execution is stored only when no sums are
held at its start and end: every sum the run adds is then materialised by its own FixPipes,
and `_sum` logged each with its runs of K (`_runs`, their views with tags). A replay then adds
no terms: per FixPipe, in order, it computes the logged runs' products into the L0C regions
(`CubeDeferral.sum_runs` on the views moved by the run's shifts: the sums the adds would have
recorded are the stored ones moved, so their runs are too; `_runs` decides from shapes, owners,
strides and relations between tags of one buffer, which a common shift keeps), runs the
FixPipe's semantics on its moved views and tells the deferral of the write (`_written`), as
`generic` does. The super-tile products (`_product`) are asked for in the walk's order, so they
are computed, kept and dropped as in the walk. What a replay checks first (`_moved_effects`,
else the run runs): no sums held and no recorded GM view of unknown address; each moved GM view
inside its buffer and its row (the walk's subview raises on a view past its row's end); no
FixPipe write meeting a recorded read made before the run (the walk would materialise
everything there). Its race-check calls (a tape, or a cheap block's decisions and GM log) hold
the FixPipes' accesses: made before the data effects, which raise nothing."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation

from ascendir.dialects import ascend
from ascendir.errors import AscendirError
from ascendir.interpreter.accel.loop_memo import _external, inputs_of, memo_inputs
from ascendir.interpreter.check.race import ChipBuffer
from ascendir.interpreter.exec.common import space_name
from ascendir.interpreter.exec.deferred import _UNKNOWN, _addr, _run_k, _run_term
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.exec.semantics import never_read
from ascendir.interpreter.exec.walk import OpTree, operands_of

VARIANTS = 4  # stored executions per loop (entry states, control values)
# executions a memo runs to store them (a refused one counting thrice) with no replay since, after
# which it stops storing for the rest of the data walk: storing runs the loop with the memos
# inside it off (`replay`), and a memo whose key changes every time (a matmul epilogue's runs, by
# which tests hold) or whose executions are refused (the tail-split tiles' K runs of a down
# projection, which leave stale L0B records made before them) would store in every tile
TRIES = 6
_FLAGS = (ascend.SetFlagOp, ascend.WaitFlagOp)
_MOVES = {("gm", "l1"), ("l1", "l0a"), ("l1", "l0b")}


def plan(loop: scf.ForOp, tree: OpTree) -> tuple[list, list, list] | None:
    """The static part of the module doc for `loop` (in a kernel whose ops are `tree`): None when
    it does not hold, else (control values, tests standing for other control values (`_tests`),
    address values, GM sources): source value -> [(dim, index of the address value offsetting
    it)] as a list of pairs (source, dims)."""
    if len(loop.body.block.args) != 1 or loop.results:
        return None
    return _planned(tree.walk(loop), 1, tree, lambda: memo_inputs(loop, tree))


def plan_run(run: list[Operation], tree: OpTree, fixpipes: bool = True) -> tuple[list, list, list] | None:
    """`plan` for a run of consecutive ops of one block (a tile's K loops with the copies and
    loops around them, up to its FixPipe: `run_memos`) instead of a loop: the same static part
    of the module doc, "carries no values" read as "no value defined in the run is used after
    it"; and, for its key to repeat at all, every test a comparison (a tile's row or column
    computed inside the run from the tile index would make every tile's key its own: each tile
    would run the run with the memos inside it off, to store it; `TRIES` bounds what other
    keys that never repeat cost). FixPipes into GM only where `fixpipes` (module doc, "Runs with
    FixPipes"). None when it does not hold."""
    lo, hi = tree.span(run[0])[0], tree.span(run[-1])[1]
    if any(_escapes(o, lo, hi, tree) for o in run):
        return None
    ops = tree.ops[lo:hi]
    planned = _planned(ops, 0, tree, lambda: _run_inputs(run, ops, tree), fixpipes=fixpipes)
    if planned is None or any(not isinstance(o, arith.CmpiOp) for o in planned[1]):
        return None
    return planned


def _escapes(op: Operation, lo: int, hi: int, tree: OpTree) -> bool:
    """Whether a result of `op` (an op of a block) is used by an op outside `tree.ops[lo:hi]`
    (the walks of a run of ops of that block: values defined in `op`'s regions are used only
    there)."""
    index = tree.index
    return any(not lo <= index(u.operation) < hi for r in op.results for u in r.uses)


def run_memos(ops: list[Operation], tree: OpTree) -> list[tuple[int, int, tuple]]:
    """The runs of consecutive ops of a block (`ops`, in order) that a memo replays whole
    (`plan_run`): (first index, index past the last, their plan) each, disjoint, in order.
    A run is a longest stretch of ops the module doc allows (scf.yield apart), cut before and
    after each op whose values are read after the run, holding a GM copy and at least two
    loops, branches or tile ops (one loop alone has its own memo, `plan`). The runs holding
    FixPipes, and where none holds an op, the runs of the stretches FixPipes cut (a tile whose
    whole iteration plans no run keeps the run up to its first FixPipe). (Per block of a kernel
    at compile: what each op's walk holds is counted once per tree, `_kinds`.)"""
    bad, strict, gm, loops = _kinds(tree)
    spans = [tree.span(o) for o in ops]
    plans: dict = {}
    if not ops or strict[spans[-1][1]] - strict[spans[0][0]] == bad[spans[-1][1]] - bad[spans[0][0]]:
        return _runs_of(ops, spans, tree, (bad, strict, gm, loops), bad, plans, ())  # (no FixPipe: the same runs either way)
    fx = [r for r in _runs_of(ops, spans, tree, (bad, strict, gm, loops), bad, plans, ()) if r[2][4]]
    return sorted(fx + _runs_of(ops, spans, tree, (bad, strict, gm, loops), strict, plans, fx), key=lambda r: r[0])


def _runs_of(ops: list[Operation], spans: list, tree: OpTree, kinds: tuple, cut: list[int], plans: dict, taken) -> list:
    """`run_memos` with the ops counted in `cut` (of `kinds`, `_kinds`: the ops a run may not
    hold, or those and FixPipes) cutting the stretches, none meeting the runs `taken`; `plans`:
    the plans of runs tried, by (first index, index past the last, whether it may hold
    FixPipes), shared between the two passes (a run without FixPipes plans alike in both)."""
    bad, strict, gm, loops = kinds
    out = []
    n, i = len(ops), 0
    fixpipes = cut is bad
    while i < n:
        j = i
        while j < n and type(ops[j]) is not scf.YieldOp and cut[spans[j][1]] == cut[spans[j][0]]:
            j += 1
        if j > i and gm[spans[j - 1][1]] > gm[spans[i][0]]:
            lo, hi = spans[i][0], spans[j - 1][1]
            start = i
            for k in range(i, j + 1):
                if k == j or _escapes(ops[k], lo, hi, tree):
                    run = ops[start:k]
                    if (run and gm[spans[k - 1][1]] > gm[spans[start][0]] and all(k <= a or b <= start for a, b, _ in taken)
                            and sum(1 for o in run if type(o) not in _LIGHT) >= 2):
                        a, b = spans[start][0], spans[k - 1][1]
                        key = (start, k, fixpipes and strict[b] - strict[a] != bad[b] - bad[a])
                        got = plans.get(key)
                        if got is None:
                            got = plans[key] = (0, None) if key[2] and loops[b] > loops[a] else _trimmed(run, tree, key[2])
                        if got[1] is not None:
                            out.append((start + got[0], k, got[1]))
                    start = k + 1
        i = j + 1
    return out


def _trimmed(run: list[Operation], tree: OpTree, fixpipes: bool) -> tuple[int, tuple | None]:
    """(leading ops left out, `plan_run`) of `run`, or of it without its leading scalar ops
    when it plans no run with them (a tile's row and column computed from its index: outside
    the run, its address values). A run holding FixPipes (a tile's whole iteration) is tried
    without them first: with them its key would hold the tile index."""
    lead = 0
    while lead < len(run) and type(run[lead]) in SCALAR_OPS:
        lead += 1
    tries = ((lead, 0) if fixpipes else (0, lead)) if lead else (0,)
    for t in tries:
        if t < len(run):
            planned = plan_run(run[t:], tree, fixpipes)
            if planned is not None:
                return t, planned
    return 0, None


def _kinds(tree: OpTree) -> tuple[list[int], list[int], list[int], list[int]]:
    """Running counts over `tree.ops` (entry i: among the first i ops) of the ops a stored
    execution may not hold (module doc, as `_planned` checks), of those and the FixPipes, of
    the copies reading GM and of the loops holding a FixPipe: what a walk holds is the
    difference at its span's ends. Once per tree."""
    def make():
        bad, strict, gm = [0], [0], [0]
        nb = nf = ng = 0
        light = _LIGHT_KINDS
        for o in tree.ops:
            t = type(o)
            if t is ascend.CopyOp:
                ng += space_name(o.source.type) == "gm"
                if _fixpipe(o):
                    nf += 1
                else:
                    nb += not _held_copy(o)
            elif t not in light:
                nb += 1
            bad.append(nb)
            strict.append(nb + nf)
            gm.append(ng)
        loops, nl = [0], 0  # (loops holding a FixPipe: a run holding one holds no run with FixPipes, `_in_loop`)
        for i, o in enumerate(tree.ops):
            if type(o) is scf.ForOp:
                j = tree.span(o)[1]
                nl += strict[j] - strict[i] != bad[j] - bad[i]
            loops.append(nl)
        return bad, strict, gm, loops
    return tree.derived("data_loop_memo.kinds", make)


_LIGHT = (*SCALAR_OPS, *_FLAGS, memref.SubviewOp)  # (ops a run's worth is not counted in)
_LIGHT_KINDS = frozenset((*_LIGHT, scf.ForOp, scf.IfOp, scf.YieldOp, ascend.MmadOp))  # (allowed ops but copies)


def _held_copy(o: ascend.CopyOp) -> bool:
    """Whether a stored execution may hold copy `o` (module doc): GM -> L1, L1 -> L0A / L0B, or
    GM into a buffer no op reads."""
    source, dest = operands_of(o)  # (xDSL's field: `o.source` is a chain of Python calls)
    src, dst = space_name(source.type), space_name(dest.type)
    return (src, dst) in _MOVES or (src == "gm" != dst and never_read(dest))


def _fixpipe(o: ascend.CopyOp) -> bool:
    """Whether copy `o` is a FixPipe into GM (L0C -> GM): a run may hold it (module doc)."""
    return space_name(o.source.type) == "l0c" and space_name(o.dest.type) == "gm"


def _in_loop(op: Operation, inside: set[int]) -> bool:
    """Whether `op` is nested in a loop among the ops of ids `inside` (a run's walks): a run
    holding a tile loop's FixPipes would be keyed by the block's tiles, never the same twice."""
    p = op.parent_op()
    while p is not None and id(p) in inside:
        if type(p) is scf.ForOp:
            return True
        p = p.parent_op()
    return False


def _run_inputs(run: list[Operation], ops: list[Operation], tree: OpTree) -> tuple:
    """loop_memo.memo_inputs of a run of ops (`plan_run`; `ops`: their walks): (control values,
    address values, GM copies), an address value plus a constant counting as the address value
    where only GM subviews' offsets use the sum (`_aliases`: a tile's second FixPipe writes its
    row at the tile's column plus the L0C half's width)."""
    defined: set[int] = set()
    for top in run:
        defined |= tree.defined(top)
    return inputs_of(ops, defined, tree, _aliases(ops, defined, tree))


def _aliases(ops: list[Operation], defined: set[int], tree: OpTree) -> dict:
    """id(op) -> x of the ops `x + c` among `ops` (their values' ids `defined`) of a value x
    defined outside them and a constant c whose results only GM subviews (of buffers defined
    outside) use, as dynamic offsets: the run's address values then move them alike."""
    out = {}
    for op in ops:
        if type(op) is not arith.AddiOp:
            continue
        x, c = op.lhs, op.rhs
        if type(x.owner) is arith.ConstantOp:
            x, c = c, x
        if id(x) in defined or type(c.owner) is not arith.ConstantOp or id(c) in defined:
            continue
        r = op.result
        ok = bool(r.uses)
        for u in r.uses:
            sv_op = u.operation
            sv = tree.subview(sv_op) if type(sv_op) is memref.SubviewOp else None
            if (sv is None or not sv.gm or id(sv.source) in defined or r is sv.source
                    or not any(r is o for o in sv.offsets) or any(r is v for v in sv_op.operands[1 + len(sv.offsets):])):
                ok = False
                break
        if ok:
            out[id(op)] = x
    return out


def _planned(ops: list[Operation], first: int, tree: OpTree, inputs, fixpipes: bool = False) -> tuple[list, list, list] | None:
    """`plan` of the ops `ops` (a loop walked, or a run's walks): None unless every op from
    `first` on (a loop's body: 1) is one the module doc allows (FixPipes into GM only where
    `fixpipes`: a run's) and some copy reads GM; `inputs()`: their memo inputs (control values,
    address values, GM copies)."""
    gm_copies = []
    for o in ops[first:]:
        t = type(o)
        if t in _LIGHT_KINDS:
            continue
        if t is not ascend.CopyOp:
            return None
        if _fixpipe(o):
            if not fixpipes:
                return None
            gm_copies.append(o)
            continue
        if not _held_copy(o):
            return None
        if space_name(o.source.type) == "gm":
            gm_copies.append(o)
    if not any(space_name(o.source.type) == "gm" for o in gm_copies):
        return None
    inside = {id(o) for o in ops}
    if any(_fixpipe(o) and _in_loop(o, inside) for o in gm_copies):
        return None
    ctrl, addr, copies = inputs()
    ctrl, tests = _tests(ctrl, ops, inside)
    sources: dict = {}
    for o in gm_copies:
        sv_op = (o.dest if _fixpipe(o) else o.source).owner
        if type(sv_op) is not memref.SubviewOp or id(sv_op) not in inside:
            return None
        sv = tree.subview(sv_op)
        src = sv.source
        if isinstance(src.owner, Operation) and id(src.owner) in inside:
            return None
        dims = sorted(copies[o][1]) if o in copies else []
        if sources.setdefault(src, dims) != dims:
            return None  # (copies of one buffer offset otherwise: no common shift)
    return ctrl, tests, addr, list(sources.items()), any(_fixpipe(o) for o in gm_copies)


def _tests(ctrl: list, ops: list[Operation], inside: set[int]) -> tuple[list, list]:
    """Control values the loop reads only as operands of scalar ops whose operands all come
    from outside it ("tests": the matmul template's `tile == the block's first tile`, evaluated
    again in every K step) reach the loop only through those tests' results, which then stand
    in the key for them: the loop runs alike for any such values that give its tests the same
    results. Returns (the other control values, the tests reading the values left out)."""
    users: dict = {}
    for o in ops:
        for v in operands_of(o):
            users.setdefault(v, []).append(o)

    def test(o: Operation) -> bool:
        return type(o) in SCALAR_OPS and all(_external(v, inside) for v in operands_of(o))
    out = {v for v in ctrl if not isinstance(v.type, MemRefType) and all(map(test, users.get(v, ())))}
    tests = {id(o): o for v in out for o in users[v]}
    return [v for v in ctrl if v not in out], list(tests.values())


class _Stored:
    """One stored execution: what keyed it, the address values it ran with and what it did."""

    __slots__ = ("key", "addr", "copies", "adds", "cut", "tail", "span", "flags", "decisions", "gmlog", "gmroots", "tape",
                 "plan", "chip_views", "moved", "fx")

    def __init__(self, key, addr, copies, adds, cut, tail, span, flags, decisions, gmlog, tape):
        # adds: the terms added to sums, stretches of appends joined, and cut: the stretches
        # (`_appends`); tail: the terms as the loop added them; decisions, gmlog: a cheap block's (race.py), and
        # the roots of gmlog's tags; tape: the race check's calls in a block checked in full;
        # flags: the flag queues' changes (`_flag_moves`)
        self.key, self.addr, self.copies, self.adds, self.cut, self.tail = key, addr, copies, adds, cut, tail
        self.span, self.flags, self.decisions, self.gmlog, self.tape = span, flags, decisions, gmlog, tape
        self.gmroots = None if gmlog is None else tuple({t[0]: None for ops in gmlog for t, _, _ in ops})
        self.plan = _plan_rebuild(self)
        self.chip_views: tuple | None = None  # (the `_Table.chips` views dict, `plan`'s on-chip views built there)
        # (index of a GM root in `plan`, its shift) -> (owner, base, the views of that root moved so)
        self.moved: dict = {}
        self.fx: tuple = ()  # its FixPipes (`_effects`): a replay runs them instead of adding its terms


class _Table(list):
    """Stored executions, and the GM views replays built (`views`: (root, element offset,
    strides, shape, dtype) -> (view, tag)): a GEMM's tiles share their A rows and B columns, so
    most of a replay's views were built by an earlier one; and the running block's on-chip
    buffers (`chips`: (their arrays, their bases as `DataLoopMemo._bases` gives them, the
    on-chip views replays built on them: (id(root), region key, dtype) -> view)), which a block's
    tiles share; and the GM sources' bases (`gm`: id(array) -> (the array, its address tag,
    `_base` of them)), the launch's buffers, asked for at every replay. All are of one data
    walk's buffers: emptied together (`clear`, at each walk's start)."""

    def __init__(self):
        super().__init__()
        self.views: dict = {}
        self.chips: tuple | None = None
        self.gm: dict = {}
        self.tries = 0  # executions run to be stored since the last replay (`TRIES`)

    def clear(self) -> None:
        super().clear()
        self.views.clear()
        self.chips = None
        self.gm.clear()
        self.tries = 0


class DataLoopMemo:
    """The stored executions of one eligible loop of a data walk (module doc). `table` is
    emptied when a data walk starts (Frame.memos): its views are of that launch's buffers.
    Generated code (data_codegen.py) runs `replay()`, and the loop between `start()` and
    `stop()` when it returns False."""

    __slots__ = ("F", "ctrl", "tests", "addr", "sources", "chips", "table", "fixpipes")

    def __init__(self, F, slot, planned: tuple, chip_allocs: list[int]):
        ctrl, tests, addr, sources, self.fixpipes = planned
        self.F = F
        self.ctrl = [slot(v) for v in ctrl]
        self.tests = [(SCALAR_OPS[type(o)](o), [slot(v) for v in o.operands]) for o in tests]
        self.addr = [slot(v) for v in addr]
        self.sources = [(slot(v), dims) for v, dims in sources]
        self.chips = chip_allocs  # slots of the kernel's on-chip allocs (their root -> this block's buffer)
        self.table = _Table()
        F.memos.append(self)

    def _key(self) -> tuple | None:
        """Control values (scalars by value, buffers by tag, shape and dtype) and the results
        of the tests standing for the others (`_tests`), flag queue lengths, the copies' records
        on entry (per buffer: region keys, stale or not), whether a race check follows the block
        (whether in full or cheaply is not keyed: `replay` asks a stored execution for what that
        mode needs); None when a buffer has no tag (nothing names it) or a test raises (the loop then
        runs, and raises its error itself)."""
        R, A, cube = self.F.values, self.F.gm_tags, self.F.cube
        try:
            vals = [fn(*[R[s] for s in args]) for fn, args in self.tests]
        except AscendirError:
            return None
        for s in self.ctrl:
            v = R[s]
            if isinstance(v, np.ndarray):
                if A[s] is None:
                    return None
                v = (A[s], v.shape, v.dtype)
            vals.append(v)
        shape = tuple([(id(r), tuple([(k, e[3] is None) for k, e in d.items()])) for r, d in cube.copies.items()])
        return tuple(vals), tuple(map(len, self.F.flags.queues)), shape, self.F.ctl is None

    def _bases(self, st: _Stored | None) -> dict | None:
        """Buffer root -> (owner array, byte offset of the root's element 0 in it, shift in
        elements): GM sources moved by the address values since `st` (None: not moved), this
        block's on-chip buffers; None when the shifts of one GM buffer disagree."""
        R, A = self.F.values, self.F.gm_tags
        bases: dict = {}
        known = self.table.gm
        for s, dims in self.sources:
            tag, x = A[s], R[s]
            got = known.get(id(x))
            if got is not None and got[0] is x and got[1] is tag:  # (held: the identities stay valid)
                b = got[2]
            else:
                b = _base(tag, x)
                known[id(x)] = (x, tag, b)
            if b is None:
                return None
            delta = 0
            if st is not None:
                for d, j in dims:
                    delta += tag[2][d] * (R[self.addr[j]] - st.addr[j])
            old = bases.setdefault(tag[0], (*b, delta))
            if old[2] != delta or old[0] is not b[0] or old[1] != b[1]:
                return None
        bases.update(self._chips()[0])
        return bases

    def _chips(self) -> tuple[dict, dict]:
        """(root -> (owner array, byte offset of the root's element 0 in it, 0) of the running
        block's on-chip buffers, the on-chip views replays built on them), kept while the
        buffers' slots hold the same arrays (`_Table`: the arrays stay alive, so theirs are the
        same addresses; a block allocates buffers of its own)."""
        R, A = self.F.values, self.F.gm_tags
        arrays = [R[s] for s in self.chips]
        got = self.table.chips
        if got is None or any([a is not b for a, b in zip(arrays, got[0])]):
            bases = {}
            for s in self.chips:
                b = _base(A[s], R[s])
                if b is not None:
                    bases[A[s][0]] = (*b, 0)
            got = self.table.chips = (arrays, bases, {})
        return got[1], got[2]

    # -- applying ---------------------------------------------------------------------------
    def replay(self) -> bool:
        """Apply a stored execution of the loop, as the module doc says when; False (nothing
        changed) when none applies."""
        F = self.F
        cube = F.cube
        if not self.table or cube is None or cube.watch is not None or (F.slow_path and not _full(F)):
            return False
        key = self._key()
        if key is None:
            return False
        ctl = F.ctl
        cheap = ctl is not None and F.races is None
        for st in self.table:
            if st.key != key:
                continue
            if F.races is not None:  # a block checked in full: the loop's calls to the check
                if st.tape is not None:
                    break
            elif cheap:  # a cheap block: the loop's decisions are its checked block's next ones
                ds, n = st.decisions, ctl.nctl
                if ctl.cheap is not None and ds is not None and ctl.ctl_values()[n:n + len(ds)] == ds:
                    break
            else:
                break
        else:
            return False
        bases = self._bases(st)
        if bases is None:
            return False
        try:
            chips = self.table.chips[2]  # (`_bases` made them the running block's)
            fx = _moved_effects(st.fx, bases, self.table.views, chips, cube) if st.fx else None
            copies, adds, span = _replayed(st, bases, self.table.views, chips)
            tape = _moved(st.tape, bases) if F.races is not None else None
            # (a cheap block's GM log moves its tags when the race check reads them: race.py; its
            # roots that move, a KeyError for one without a base)
            shifts = {r: d for r in st.gmroots if (d := bases[r][2])} if cheap else None
        except (KeyError, TypeError, ValueError):  # a view outside its buffer: run the loop
            return False
        cube.copies.update(copies)
        _union(cube.gm, span)
        queues = F.flags.queues
        for i, n in st.flags:
            q = queues[i]
            for _ in range(-n):
                q.popleft()
            for _ in range(n):
                q.append(0.0)
        if tape is not None:
            F.races.play(tape, F.block)
        elif cheap:
            ctl.nctl += len(st.decisions)
            ctl.log_moved(st.gmlog, shifts)
        if fx is not None:
            for sem, c, g, sums in fx:
                for acc, cv, runs in sums:
                    cube.sum_runs(acc, cv, runs)
                sem(c, g)
                if cube.spans:
                    cube._written(g)
        else:
            _add_all(cube, adds, st.cut, lambda o: _rebuild(st, bases, self.table.views, st.tail[o:], chips)[1])
        self.table.tries = 0
        return True

    # -- storing ----------------------------------------------------------------------------
    def start(self):
        """Before running the loop: what `stop` needs to store its execution (None: it will not).
        The deferral counts, in `effects`, every op run on its data and every read of a record
        made before the loop (`watch`: their ids), and logs the terms added to sums (`log`)."""
        F = self.F
        cube = F.cube
        full = _full(F)
        if cube is None or cube.watch is not None or (F.slow_path and not full):
            return None
        if self.table.tries >= TRIES:
            return None
        ctl = F.ctl
        key = self._key()
        if key is None or (ctl is not None and ctl.cheap is None and not full):
            return None
        self.table.tries += 3  # (1 once stored: `stop`)
        # (the records are held until `stop`: a freed one's id could name a new one)
        held = [e for d in cube.copies.values() for e in d.values()]
        cube.watch = {id(e) for e in held}
        cube.log = []
        cube.bent = []
        gm, cube.gm = cube.gm, {}  # (the loop's own spans, merged back by `stop`)
        if self.fixpipes and not cube.sums:  # (FixPipes logged, `stop`; with sums held, it stores none)
            cube.fx, cube.outer = [], gm
        R = F.values
        if full:
            F.races.tape = []
        return (key, [R[s] for s in self.addr], held, gm, cube.effects,
                None if ctl is None or full else (ctl.cheap, ctl.nctl, len(ctl.gmlog)), F.races, F.times_held)

    def stop(self, token) -> None:
        """After running the loop (from `start`'s token): store its execution when the module
        doc allows."""
        if token is None:
            return
        F = self.F
        cube = F.cube
        key, addr, held, gm, effects, ctl0, races, held0 = token
        entry, adds, bent, fx = cube.watch, cube.log, cube.bent, cube.fx
        cube.watch = cube.log = cube.fx = cube.outer = None
        cube.bent = []
        span, cube.gm = cube.gm, gm
        _union(gm, span)
        tape = None
        if races is not None:
            tape, races.tape = races.tape, None
            tape = _tape(tape)
        if None in span.values() or cube.effects != effects or (fx and cube.sums):
            return
        if (F.slow_path and not _full(F)) or F.races is not races or F.times_held != held0:
            return
        ctl = F.ctl
        decisions = gmlog = None
        if ctl0 is not None:
            if ctl is None or ctl.cheap is not ctl0[0] or ctl.nctl < ctl0[1]:
                return
            decisions = [v for v, _ in ctl.cheap_ctl[ctl0[1]: ctl.nctl]]
            gmlog = ctl.moved_log()[ctl0[2]:]
        elif tape is not None and ctl is not None:
            decisions, gmlog = _cheap_calls(tape[0])
        # a buffer's records are all the loop's or all untouched; the loop's are of its own copies
        # (`watch`), but a stale mark of an earlier record keeps that record's source
        srcs = {id(e[1]) for e in held}
        copies = {}
        for r, d in cube.copies.items():
            fresh = [id(e) not in entry for e in d.values()]
            if all(fresh):
                if any(e[3] is None and id(e[1]) in srcs for e in d.values()):
                    return
                copies[r] = dict(d)
            elif any(fresh):
                return
        items, stretches = _appends(adds, bent)
        st = _Stored(key, addr, copies, items, stretches, adds, {r: tuple(s) for r, s in span.items()},
                     _flag_moves(key[1], F.flags.queues), decisions, gmlog, tape)
        bases = self._bases(None)
        if bases is None or not _exact(st, bases):
            return
        if fx:
            st.fx = _effects(fx, bases)
            if st.fx is None:
                return
        self.table.tries -= 2
        if len(self.table) >= VARIANTS:
            del self.table[0]
        self.table.append(st)


def _flag_moves(entry: tuple, queues: list) -> tuple:
    """(queue index, sets left minus sets taken) of the flag queues a loop changed, from their
    lengths on entry (`entry`, as keyed) and now: a replay applies these alone (a kernel has
    tens of flag keys, a loop touches a few of them)."""
    return tuple((i, len(q) - n) for i, (n, q) in enumerate(zip(entry, queues)) if len(q) != n)


def _appends(adds: list, bent: list) -> tuple[list, tuple]:
    """A loop's logged adds (root, region key, L0C view, term, init) as (items, stretches): the
    adds with each stretch of plain appends between those in `bent` (deferred.py `_add`: the
    indices of the adds that started, regrouped or materialised sums) joined, and per stretch
    (its first item, past its last, the index in `adds` of its first add). A stretch's adds are
    appends, whatever the state, if their regions are there at its start: `_add` only starts,
    regroups or materialises sums at an `init` add or one whose region is missing, and an
    append removes no region (`_add_all` checks). Joined: the terms each region appends one
    after the other joined where `_runs` would join them (deferred.py `_joined`: the region's
    runs, hence its products, are the same), in the order of each region's first (regions'
    appends commute). A replay adds a few terms where the loop added one per mmad; a run of a
    tile's K loops (`run_memos`) regroups its L0C regions between its loops (the first and last
    L1 chunks by column halves), so its appends come in several stretches."""
    items: list = []
    stretches = []
    i = 0
    for b in [*bent, len(adds)]:
        if b > i:
            first = len(items)
            items += _joined_run(adds[i:b])
            stretches.append((first, len(items), i))
        if b < len(adds):
            items.append(adds[b])
        i = b + 1
    return items, tuple(stretches)


def _joined_run(adds: list) -> list:
    """Adds that all append to their regions, the terms of a region joined (`_appends`)."""
    joined: list = []
    ks: list = []  # per term of `joined`: its K when others joined it (`_run_k`; its views built at the end)
    last: dict = {}  # (root, region key) -> index in `joined` of the region's last term
    for add in adds:
        i = last.get(add[:2])
        if i is not None:
            t = joined[i][3]
            k = _run_k(t, t[0].shape[1] if ks[i] is None else ks[i], add[3])
            if k is not None:
                ks[i] = k
                continue
        last[add[:2]] = len(joined)
        joined.append(add)
        ks.append(None)
    return [a if k is None else (*a[:3], _run_term(a[3], k), False) for a, k in zip(joined, ks)]


def _add_all(cube, items: list, stretches: tuple, tail) -> None:
    """Add a replay's terms `items` (root, region key, L0C view, term, init; stretches of
    appends joined, `_appends`) to the sums of deferral `cube`, each stretch where every region
    it adds to is there at its start; else, from that stretch on, the terms as the loop added
    them (`tail(index of the stretch's first add)`)."""
    sums = cube.sums
    at = 0
    for a, b, o in stretches:
        add_each(cube, items[at:a])
        if any(k not in sums.get(root, ()) for root, k, *_ in items[a:b]):
            add_each(cube, tail(o))
            return
        at = a
    add_each(cube, items[at:])


def add_each(cube, adds) -> None:
    """Add the logged adds `adds` (root, region key, L0C view, term, init) to the sums of
    deferral `cube` in order, as the walk's mmads added them (deferred.py `_add`)."""
    add = cube._add
    for root, k, cv, term, init in adds:
        add(root, k, cv, (root, k[0], k[2]), term, init)


def _exact(st: _Stored, bases: dict) -> bool:
    """Whether `st`'s views rebuild from their tags as they are (module doc): what comparing
    `_rebuild`'s views with them (`_same`) gives, a GM view checked on its own fields (its
    owner is its root's, its data address and strides those of its tag) instead of built
    again: a stored K loop holds ~100 of them, and building each cost more than the check.
    `bases` are unmoved (`DataLoopMemo._bases(None)`: a moved tag is not the stored one)."""
    ok: dict = {}  # id(GM view) -> (view, tag, whether it rebuilds): a loop's records and terms share views

    def gm(g, t) -> bool:
        got = ok.get(id(g))
        if got is not None and got[1] == t:
            return got[2]
        o, base, delta = bases[t[0]]  # (`_rebuild` raises KeyError for a root without a base: refused)
        isz = g.itemsize
        good = (delta == 0 and g.base is o and g.strides == tuple([x * isz for x in t[2]])
                and _addr(g) == _addr(o) + base + t[1] * isz)
        ok[id(g)] = (g, t, good)
        return good

    def pieces(p) -> bool:
        return p is None or all([t is not None and gm(g, t) for _, _, g, t in p])

    chips: dict = {}
    try:
        for r, d in st.copies.items():
            for k, (fn, src, dst, p, box) in d.items():
                if type(src) is tuple:
                    good = pieces(src)
                else:  # a GM load's view: its tag is its piece's
                    good = p is not None and p[0][3] is not None and gm(src, p[0][3])
                if not (good and pieces(p) and _same(dst, _chip_view(bases, chips, r, k, dst), chip=True)):
                    return False
        for r, k, cv, (va, vb, sa, sb), _ in st.adds + st.tail:
            if sa is None or sb is None or not (gm(va, sa) and gm(vb, sb)):
                return False
            if not _same(cv, _chip_view(bases, chips, r, k, cv), chip=True):
                return False
        if not all([r in bases for r in st.span]):  # (`_rebuild` moves the spans by their roots' shifts)
            return False
    except (KeyError, TypeError, ValueError):
        return False
    # (a replay moves the GM log's tags by their roots' shifts: race.py `log_moved`)
    return st.gmlog is None or all(r in bases for r in st.gmroots)


def _effects(fx: list, bases: dict) -> tuple | None:
    """A stored run's FixPipe events (deferred.py `_fixpipe`) as a replay takes them, with its
    views as (root, element offset, element strides, shape, dtype) from their tags (`bases`:
    unmoved): (sem, L0C view, GM view, the sums it materialised: (accumulate, L0C view, runs:
    (A view, B view) each)) per FixPipe; None when a view does not rebuild from its tag exactly
    (`_exact`), or a GM view is no row band of a row-major buffer (`_moved_effects` checks a
    moved one's bounds)."""
    def gm(g, t):
        if t is None or len(t[2]) != 2 or t[2][1] != 1 or g.ndim != 2:
            raise KeyError(t)
        o, base, _ = bases[t[0]]
        isz = g.itemsize
        if (g.base is not o or g.strides != tuple([x * isz for x in t[2]]) or _addr(g) != _addr(o) + base + t[1] * isz
                or not _in_row(t[1], t[2][0], g.shape[1])):
            raise KeyError(t)
        return t[0], t[1], t[2], g.shape, g.dtype

    def chip(root, c):
        o, base, _ = bases[root]
        isz = c.itemsize
        off, r = divmod(_addr(c) - _addr(o) - base, isz)
        st = tuple([x // isz for x in c.strides])
        spec = (root, off, st, c.shape, c.dtype)
        if r or type(root) is not ChipBuffer or not _same(c, _spec_view(bases, spec, 0), chip=True):
            raise KeyError(root)
        return spec

    out = []
    try:
        for sem, c, g, tc, tg, sums in fx:
            runs = tuple((acc, chip(tc[0], cv), tuple((gm(ga, sa), gm(gb, sb)) for ga, gb, sa, sb in rs)) for acc, cv, rs in sums)
            out.append((sem, chip(tc[0], c), gm(g, tg), runs))
    except (KeyError, TypeError, ValueError):
        return None
    return tuple(out)


def _in_row(off: int, row: int, cols: int) -> bool:
    """Whether a band of `cols` columns starting at element `off` of a row-major buffer of `row`
    elements a row stays in one row (the walk's subview raises for a band past its row's end)."""
    return off % row + cols <= row


def _spec_view(bases: dict, spec: tuple, delta: int) -> np.ndarray:
    """The view (root, element offset, element strides, shape, dtype) `spec` with its offset moved
    by `delta` elements, on its root's memory in `bases` (raises KeyError for a root without a
    base, ValueError for a view outside the memory)."""
    root, off, st, shape, dt = spec
    o, base, _ = bases[root]
    isz = dt.itemsize
    return np.ndarray(shape, dt, o, base + (off + delta) * isz, tuple([x * isz for x in st]))


def _moved_effects(fx: tuple, bases: dict, views: dict, chips: dict, cube) -> list:
    """A stored run's FixPipes (`_effects`) with their GM views moved by their roots' shifts in
    `bases` (GM views shared through `views`, on-chip ones through `chips`, as `_rebuild`'s).
    Raises ValueError (the run then runs) when the deferral holds sums or a GM view of unknown
    address (what the stored FixPipes materialise would differ), a moved GM view leaves its
    row (the walk's subview raises there) or its buffer, or a FixPipe writes GM elements a
    recorded item made before the run reads (the walk would materialise everything there)."""
    if cube.sums or _UNKNOWN in cube.gm:
        raise ValueError("held sums")

    def gm(spec):
        root, off, st, shape, dt = spec
        delta = bases[root][2]
        k = (root, off + delta, st, shape, dt)
        got = views.get(k)
        if got is None:
            if off + delta < 0 or not _in_row(off + delta, st[0], shape[1]):
                raise ValueError("out of its row")
            got = views[k] = (_spec_view(bases, spec, delta), (root, off + delta, st))
        return got

    def chip(spec):
        k = (id(spec[0]), spec[1:])
        got = chips.get(k)
        if got is None:
            got = chips[k] = _spec_view(bases, spec, 0)
        return got

    out = []
    for sem, c, g, sums in fx:
        gv, gt = gm(g)
        if cube._meets_gm(gt, gv.shape):
            raise ValueError("meets a recorded read")
        out.append((sem, chip(c), gv, [(acc, chip(cv), [_run(gm(a), gm(b)) for a, b in rs]) for acc, cv, rs in sums]))
    return out


def _run(a: tuple, b: tuple) -> tuple:
    """A run of a sum (deferred.py `_runs`) from its A and B (view, tag) pairs."""
    return a[0], b[0], a[1], b[1]


def _chip_view(bases: dict, chips: dict, root, key: tuple, like: np.ndarray) -> np.ndarray:
    """The view of on-chip region `key` (element offset, shape, element strides) of buffer
    `root` (or of a GM root) with dtype `like`'s, built from `bases` (raises KeyError for a root
    without a base); kept in `chips` per (root, key, dtype) for an unmoved on-chip buffer (a GM
    root's view moves with its shift)."""
    k = (id(root), key, like.dtype)
    got = chips.get(k)
    if got is not None:
        return got
    o, base, delta = bases[root]
    isz = like.itemsize
    v = np.ndarray(key[1], like.dtype, o, base + key[0] * isz, tuple(x * isz for x in key[2]))
    if delta == 0 and type(root) is ChipBuffer:
        chips[k] = v
    return v


def _rebuild(st: _Stored, bases: dict, views: dict, terms: list, chips: dict) -> tuple[dict, list, dict]:
    """`st`'s records and the terms `terms` (of `st`: its adds or its tail) with every view
    rebuilt from its tag in `bases` (root -> (owner, byte offset of element 0, shift in
    elements); GM views built before in `views`, on-chip views in `chips`: see `_Table`; both
    of these `bases`): (copies, terms added (root, region key, L0C view, term, init), GM spans)."""
    memo: dict = {}

    def gm(g, t):
        if t is None:
            raise KeyError(t)
        o, base, delta = bases[t[0]]
        k = (t[0], t[1] + delta, t[2], g.shape, g.dtype)
        got = views.get(k)
        if got is None:
            isz = g.itemsize
            nt = (t[0], k[1], t[2])
            got = views[k] = (np.ndarray(g.shape, g.dtype, o, base + nt[1] * isz, tuple(x * isz for x in t[2])), nt)
        return got

    def pieces(p):
        if p is None:
            return None
        got = memo.get(id(p))
        if got is not None:
            return got
        out = tuple((c0, w, *gm(g, t)) for c0, w, g, t in p)
        memo[id(p)] = out
        return out

    copies = {}
    for r, d in st.copies.items():
        nd = {}
        for k, (fn, src, dst, p, box) in d.items():
            np_ = pieces(p)
            if type(src) is tuple:
                src2 = pieces(src)
            else:  # a GM load's view: its tag is its piece's
                src2 = gm(src, p[0][3] if p is not None else None)[0]
            nd[k] = (fn, src2, _chip_view(bases, chips, r, k, dst), np_, box)
        copies[r] = nd
    adds = []
    for r, k, cv, (va, vb, sa, sb), init in terms:
        a, ta = gm(va, sa)
        b, tb = gm(vb, sb)
        adds.append((r, k, _chip_view(bases, chips, r, k, cv), (a, b, ta, tb), init))
    span = {}
    for r, (lo, hi) in st.span.items():
        delta = bases[r][2]
        span[r] = (lo + delta, hi + delta)
    return copies, adds, span


def _plan_rebuild(st: _Stored) -> tuple:
    """What `_rebuild` does with `st`'s records and adds, laid out once for `_replayed`: the
    distinct GM views by root ((root, (element offset, element strides, shape, dtype, itemsize,
    byte strides) per view) per root; indices below count them in that order), the distinct pieces tuples (per piece: column, width, index of its GM view), the
    on-chip views (root, region key, dtype), the records per buffer (region key, then for one
    of them: fn, whether its source is a pieces tuple, the source's index (pieces or GM view),
    the on-chip view's index, the pieces' index or -1 (stale), box) and the adds (root, region
    key, index of the L0C view, of A's and B's GM views, init). A replay's rebuild is then one
    pass over each list instead of a call per view (about half the time of `_rebuild`'s)."""
    gms: list = []
    gidx: dict = {}
    pcs: list = []
    pidx: dict = {}
    chips: list = []
    cidx: dict = {}

    def gm(g, t) -> int:
        if t is None:
            return -1  # (`_rebuild` raises KeyError: `_exact` refused such an execution)
        k = (t[0], t[1], t[2], g.shape, g.dtype)
        j = gidx.get(k)
        if j is None:
            j = gidx[k] = len(gms)
            gms.append((*k, g.itemsize, tuple(x * g.itemsize for x in t[2])))
        return j

    def pieces(p) -> int:
        if p is None:
            return -1
        j = pidx.get(id(p))
        if j is None:
            j = pidx[id(p)] = len(pcs)
            pcs.append(tuple((c0, w, gm(g, t)) for c0, w, g, t in p))
        return j

    def chip(root, key, like) -> int:
        k = (root, key, like.dtype)
        j = cidx.get(k)
        if j is None:
            j = cidx[k] = len(chips)
            chips.append(k)
        return j

    recs = []
    for r, d in st.copies.items():
        out = []
        for k, (fn, src, dst, p, box) in d.items():
            if type(src) is tuple:
                srcref = (True, pieces(src))
            else:
                srcref = (False, gm(src, p[0][3] if p is not None else None))
            out.append((k, fn, *srcref, chip(r, k, dst), pieces(p), box))
        recs.append((r, tuple(out)))
    adds = [(r, k, chip(r, k, cv), gm(va, sa), gm(vb, sb), init) for r, k, cv, (va, vb, sa, sb), init in st.adds]
    # the GM views root by root (a replay moves each root's views by one shift, `_replayed`): indices remapped
    roots: dict = {}
    for j, g in enumerate(gms):
        roots.setdefault(g[0], []).append(j)
    at = {j: i for i, j in enumerate(j for js in roots.values() for j in js)}
    at[-1] = -1
    grouped = tuple((root, tuple(gms[j][1:] for j in js)) for root, js in roots.items())
    pcs = [tuple((c0, w, at[j]) for c0, w, j in pt) for pt in pcs]
    recs = [(r, tuple((k, fn, is_p, sj if is_p else at[sj], cj, pj, box) for k, fn, is_p, sj, cj, pj, box in out))
            for r, out in recs]
    adds = tuple((r, k, cj, at[ja], at[jb], init) for r, k, cj, ja, jb, init in adds)
    return grouped, tuple(pcs), tuple(chips), tuple(recs), adds


def _replayed(st: _Stored, bases: dict, views: dict, chips: dict) -> tuple[dict, list, dict]:
    """`_rebuild(st, bases, views, st.adds, chips)` from `st.plan` (`_plan_rebuild`): the
    same views (GM views built before taken from `views`), records and adds. The on-chip views
    are built once per block (`chips`: the running block's dict, `_Table`) and kept in
    `st.chip_views` while it is the running block's; a GM root's views moved by a shift are
    kept in `st.moved` (a GEMM's tiles share A's rows and B's columns: most replays find both
    roots' views there, one look-up each). Raises as `_rebuild` does."""
    grouped, pcs, cspecs, recs, adds = st.plan
    V = []
    moved = st.moved
    for i, (root, specs) in enumerate(grouped):
        o, base, delta = bases[root]
        got = moved.get((i, delta))
        if got is None or got[0] is not o or got[1] != base:
            vs = []
            for off, ste, shape, dt, isz, stb in specs:
                n = off + delta
                k = (root, n, ste, shape, dt)
                v = views.get(k)
                if v is None:
                    v = views[k] = (np.ndarray(shape, dt, o, base + n * isz, stb), (root, n, ste))
                vs.append(v)
            got = moved[(i, delta)] = (o, base, vs)
        V += got[2]
    V.append(None)  # (index -1, a view without a tag: `_exact` refuses what `_rebuild` cannot build)
    cv = st.chip_views
    if cv is None or cv[0] is not chips:
        C = []
        for root, key, dt in cspecs:
            o, base, _ = bases[root]
            isz = dt.itemsize
            C.append(np.ndarray(key[1], dt, o, base + key[0] * isz, tuple(x * isz for x in key[2])))
        if all(type(r) is ChipBuffer and bases[r][2] == 0 for r, _, _ in cspecs):
            st.chip_views = (chips, C)
    else:
        C = cv[1]
    P = []
    for pt in pcs:
        P.append(tuple([(c0, w, *V[j]) for c0, w, j in pt]))
    copies = {}
    for r, out in recs:
        nd = {}
        for k, fn, is_p, sj, cj, pj, box in out:
            nd[k] = (fn, P[sj] if is_p else V[sj][0], C[cj], P[pj] if pj >= 0 else None, box)
        copies[r] = nd
    out_adds = []
    for r, k, cj, ja, jb, init in () if st.fx else adds:  # (a run with FixPipes adds none: `replay`)
        a, b = V[ja], V[jb]
        out_adds.append((r, k, C[cj], (a[0], b[0], a[1], b[1]), init))
    span = {}
    for r, (lo, hi) in st.span.items():
        delta = bases[r][2]
        span[r] = (lo + delta, hi + delta)
    return copies, out_adds, span


def _union(gm: dict, spans: dict) -> None:
    """Widen the GM spans `gm` (CubeDeferral.gm: root -> [first, last] element) to hold `spans`
    (root -> (first, last), or None: deferred.py's _UNKNOWN, a GM view without a tag)."""
    for r, s in spans.items():
        got = gm.get(r)
        if s is None or got is None:
            gm[r] = None if s is None else [s[0], s[1]]
        else:
            got[0], got[1] = min(got[0], s[0]), max(got[1], s[1])


def _full(F) -> bool:
    """Whether the race check runs in full on the data walk's block (race.py: F.races set) with
    no pipe held (holds.py): a loop then makes the same calls to the check as the one stored
    in such a block, which a replay makes again (`_moved`, RaceChecker.play)."""
    return F.races is not None and F.hold is None


def _moved(tape: tuple | None, bases: dict) -> list:
    """A stored race-check tape (`_tape`) as its events (RaceChecker.play) with every operand's
    tag moved as its buffer's views are (`_shifted`): only the accesses with GM operands move
    (on-chip buffers are the running block's, shift 0); the others are the stored events.
    Raises KeyError for a root `bases` lacks (an on-chip buffer of another block), TypeError for
    no tape."""
    if tape is None:
        raise TypeError("no tape")
    events, roots, at = tape
    if not any([bases[r][2] for r in roots]):  # (a list: every root looked up)
        return events
    out = list(events)
    for i in at:
        e = out[i]
        out[i] = (e[0], _shifted(e[1], bases), e[2])
    return out


def _shifted(operands: list, bases: dict) -> list:
    """Race-check operands (tag, shape, writes) with each tag's element offset moved by its
    root's shift in `bases` (root -> (owner, offset, shift in elements); on-chip roots: 0)."""
    return [((t[0], t[1] + bases[t[0]][2], t[2]), shape, w) for t, shape, w in operands]


def _cheap_calls(events: list) -> tuple[list, list]:
    """What a cheap block running the loop of race-check tape `events` (a block checked in
    full ran it) would hand the check: its decisions, and per access with GM operands those
    operands (race.py `decide`, `gmlog`; tile_ops.py logs an op's GM operands with tags, in
    operand order, as it hands the check all its operands with tags). A cheap block's loop makes
    the calls of the stored one, GM tags moved, when its checked block's next decisions are the
    stored ones (`replay`): the blocks after the first then replay the first block's loops
    instead of running each of them once more to store them for their own mode."""
    decisions = [e for e in events if type(e) is bool]
    gmlog = []
    for e in events:
        if type(e) is tuple and e[0] is not None:
            gm = [o for o in e[1] if type(o[0][0]) is not ChipBuffer]
            if gm:
                gmlog.append(gm)
    return decisions, gmlog


def _tape(events: list) -> tuple:
    """A race-check tape as stored: its events (access: (pid, operands, name); set / wait /
    barrier: a `sync_event`; decide: a bool), the roots of its accesses' operands, and the
    indices of the accesses with GM operands (those `_moved` moves)."""
    roots = tuple({t[0]: None for e in events if type(e) is tuple and e[0] is not None for t, _, _ in e[1]})
    at = [i for i, e in enumerate(events)
          if type(e) is tuple and e[0] is not None and any([type(t[0]) is not ChipBuffer for t, _, _ in e[1]])]
    return events, roots, at


def _base(tag: tuple | None, x) -> tuple | None:
    """(owner array, byte offset in it of element 0 of the root of address tag `tag`) of buffer
    `x`, or None when `x` has no tag or its memory is not a C-contiguous ndarray's."""
    if tag is None or not isinstance(x, np.ndarray):
        return None
    o = x if x.base is None else x.base
    if type(o) is not np.ndarray or not o.flags.c_contiguous:
        return None
    return o, _addr(x) - _addr(o) - tag[1] * x.itemsize


def _same(a, b, chip: bool = False) -> bool:
    """Whether two record fields (views, pieces tuples or None) are the same views: data
    address, shape, strides, dtype and, but for on-chip views (`chip`: deferred.py asks GM views
    alone for their owner), owner."""
    if a is None or b is None:
        return a is b
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(
            x[0] == y[0] and x[1] == y[1] and _same(x[2], y[2]) and x[3] == y[3] for x, y in zip(a, b))
    return (type(b) is np.ndarray and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and (chip or a.base is b.base) and _addr(a) == _addr(b))
