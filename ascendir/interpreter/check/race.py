"""Race detection between the pipes of one core (vector clocks; independent of timing).

Happens-before inside a core: program order within a pipe; set_flag(src→dst) → the matching
wait_flag (the waiting pipe inherits everything the setting pipe had done or inherited);
pipe_barrier(ALL) (every pipe inherits every other). pipe_barrier(P) orders P after its own
earlier ops only (program order already does). The scalar pipe issues ops in program order but
issue is not completion, so it gives no happens-before between other pipes, except through a
wait_flag(src -> S): the scalar unit stops there until the set, and every later op of its unit,
on any pipe, is issued after it, so every pipe of the unit inherits the set's clock (as
wait_flag_dev / CrossCoreWaitFlag stop the core's scalar unit, S2). A pipe held then (a wait
whose set comes later in program order: timing/holds.py) has ops queued that were issued before
the S wait: it inherits the clock only when its queue reaches the wait (the wait's `held` pipes
and their "join" steps), or a set from another unit releasing it would order those ops after
everything the S wait's set followed. Blocks on a core
start after the previous block finished, so each block starts with fresh clocks.

Every tile op records, per memref operand, the element range it touches in its root buffer
(the address tag the compiler propagates: root, element offset, strides); the last operand is
the one written (ascend convention: copy dst, mmad c, vector dest). A race is two ops on different
pipes touching overlapping bytes, one of them writing, with no happens-before between them: the
interpreter raises AscendirError naming the kernel, the buffer(s), both ops and both pipes.

What "the same bytes" means: an on-chip buffer with an `offset` (plan-memory, or hand-written)
sits at bytes [offset, offset + size) of its space (per AIV for UB: SUBBLOCK_ATTR), so accesses
are compared by physical byte range across every planned buffer of that space -- two buffers
planned onto the same bytes race like one buffer even though the interpreter keeps their data in
separate arrays. Buffers without an offset, and GM, are compared per buffer (their addresses are
not fixed in the IR). Within one buffer, overlap is exact for views with the same strides (boxes
per dim), else the [first, last] element interval (conservative); between two buffers sharing
bytes it is the byte interval (conservative). Kept per (buffer, pipe, read/write): the last few
distinct ranges accessed (older accesses of a pipe are ordered before its newer ones).

A launch's later blocks mostly repeat its first with other GM offsets: such a block follows the
checked block it repeats and checks its GM operands only (`RaceChecker`: same verdicts and
messages as checking every operand). In a data walk whose kernel makes the same on-chip accesses
along the same control decisions (check/uniform.py: structured control, on-chip operands
block-invariant, pipes fixed per op), a later block runs unchecked (the fast path) while its
decisions (scf.if branches, scf.for iterations and ends) are those of a checked block: its events are
then that block's, GM operands apart, which it logs; at the end (or at an error) the logged GM
accesses are checked with that block's rows on the buffers two pipes touched, one writing (on
the others none can race: read / read, or one pipe's program order). At the first decision that
differs it follows the checked block from the event there, the logged GM accesses given to the
follow first (`RaceChecker.reset`, `decide`, `finish`).

A cheap block's check of one GM buffer is proved once per shape of its accesses: the check of a
buffer's accesses at a block's end starts from no range of it (each block starts with fresh
ranges; GM keys hold one buffer's ranges) and reads, per access, the checked block's step (pipe,
clock row, name), the view's strides, shape and written bit, and its offset, only through
interval tests, equality of ranges and `views_overlap`: moving every offset by one shift changes
none of those outcomes when the shift is a multiple of each view's largest stride (the box
decomposition moves the index along it alike). So where a later cheap block following the same
checked block makes the same accesses to a buffer, offsets moved by such a shift (`_shifted`:
the same key), its check raises nothing, as the earlier block's did: it is skipped (the other
buffers' checks, in order, decide which race is raised first, as without the skip).

Only the final pass of a launch checks (the L2 recording pass runs the same program); GM races
between blocks on different cores are not checked (no cross-core sync is modelled). Numerics runs
always check, in the data walk of a launch (sim/kernel.py `_data_walk`: every op runs there, while
the timing-only twin that times the launch extrapolates loops); timing-only runs check when asked
(`check_races`, `ascendir run --check-races`): a race is a property of the program, and a sweep
should not pay for the check on every point.
"""

from __future__ import annotations

import math
from collections import deque

from ascendir.costmodel.buffer_lifetimes import views_overlap
from ascendir.errors import AscendirError
from ascendir.interpreter.timing.timeline import NPIPES, PIPE_INDEX

KEEP = 8  # distinct ranges remembered per (buffer, pipe, read/write)
REFS = 8  # checked blocks a launch's later blocks may follow (RaceChecker)
SNAP = 1024  # events between the on-chip states a checked block keeps (RaceChecker `_snap`)


def extent(tag: tuple, shape: tuple[int, ...]) -> tuple[int, int]:
    """[first, last] element of a view with address tag (root, offset, strides) and `shape`."""
    off, st = tag[1], tag[2]
    hi = off
    for s, t in zip(shape, st):
        if s == 0:
            return off, off - 1
        hi += (s - 1) * t
    return off, hi


class ChipBuffer:
    """Address root of one on-chip `ascend.alloc` (compiler.py): its name, and where it sits when
    placed: `phys` = (space, AIV subblock) or None when the alloc has no `offset`, `base` (bytes
    into the space), `isz` (bytes per element, packed), `nbytes`. Identity is the buffer."""

    __slots__ = ("text", "phys", "base", "isz", "nbytes")

    def __init__(self, text: str, phys: tuple | None, base: int, isz: float, nbytes: int):
        self.text, self.phys, self.base, self.isz, self.nbytes = text, phys, base, isz, nbytes

    def __repr__(self) -> str:
        return self.text


def describe(root) -> str:
    """Human name of an address root (compiler.py tags: on-chip ChipBuffer, GM input /
    weight (kind, name), GM allocation (int))."""
    if isinstance(root, ChipBuffer):
        if root.phys is not None:
            return f"{root.text} (bytes {root.base}..{root.base + root.nbytes - 1} of {root.phys[0]})"
        return root.text
    if isinstance(root, tuple) and len(root) == 2:
        return f"GM {root[0]} '{root[1]}'"
    return f"GM buffer #{root}"


def _meets(a: tuple, b: tuple, geometry: list) -> bool:
    """a, b = (lo, hi, offset, geometry id, root) with [lo, hi) in bytes of a placed space, or in
    elements of one unplanned buffer, and `geometry`[id] = (strides, shape), whose intervals meet
    (`_check` tests them before the call, inline: most pairs do not meet): True between two
    buffers, else views_overlap (per-dim boxes)."""
    if a[4] is not b[4]:
        return True
    (sa, ha), (sb, hb) = geometry[a[3]], geometry[b[3]]
    return views_overlap(a[2], sa, ha, b[2], sb, hb)


_END = (None, None, -1, None)  # the step after a checked block's last: matches no event


_EVENTS: dict = {}


def sync_event(kind: str, slot: int = -1, key: int = -1, held: tuple = ()) -> tuple:
    """The step a sync op records in a checked block (`RaceChecker.set` / `wait` /
    `barrier_all`): kind "set" (slot: the setting pipe), "wait" (slot: the waiting pipe; `held`:
    for a wait on S, the pipe slots of its unit held then, which inherit its clock at their
    "join" step), "join" (slot: such a held pipe, its queue at the S wait) or "barrier"; `key`
    the flag key. One object per value (a following block compares steps by identity)."""
    ev = (None, kind, slot, key, held)
    return _EVENTS.setdefault(ev, ev)


BARRIER = sync_event("barrier")  # pipe_barrier(ALL)


def _inherit(v: list, clock: list, active: list) -> None:
    """Clock row `v` joins `clock` (components `active`: every other is 0 in both until its slot
    accesses)."""
    for i in active:
        c = clock[i]
        if c > v[i]:
            v[i] = c


def _move(log: list, moves: list) -> None:
    """Move the tags of the runs `moves` ((first, end, root -> shift in elements)) of a cheap
    block's GM log `log` in place (RaceChecker.log_moved)."""
    for a, b, shifts in moves:
        get = shifts.get
        for j in range(a, b):
            log[j] = [((t[0], t[1] + get(t[0], 0), t[2]), shape, w) for t, shape, w in log[j]]


def _shifted(ref: list, acc: list) -> tuple:
    """What the check of one GM buffer's accesses `acc` ((log position, operand number, operand)
    in order) in a cheap block following checked block `ref` reads, but for a shift of every
    offset: the key of `RaceChecker.proved`. The offsets are relative to the first; the first
    modulo the least common multiple of the views' largest strides (`views_overlap` decomposes
    absolute offsets along the strides, largest first: a shift by a multiple of that stride
    moves every index along it alike and leaves the rest as they were)."""
    base = acc[0][2][0][1]
    m = 1
    for st in {o[0][2] for _, _, o in acc}:
        top = max(st, default=0)
        if top > 0:
            m = math.lcm(m, top)
    return (id(ref), base % m, tuple([(j, o[0][1] - base, o[0][2], o[1], o[2]) for j, _, o in acc]))


class RaceChecker:
    """Vector clocks of one core's pipes during one block, and the recent accesses per buffer.

    A recorded range is a flat tuple (lo, hi, offset, geometry id, root): its view's (strides,
    shape) pair is numbered once per checker (`geometry`), so that hashing a range (each access
    moves its range to the end of its dict) hashes ints and the root, not nested tuples. Only the
    slots that accessed something this block (`active`) can carry a nonzero clock component, so
    joins (`wait`) compare those only. The vector clocks of pending sets are kept per flag key
    (`queues`, FIFO as the flags).

    Blocks that repeat a checked block (`refs`, REFS at most per launch) follow it instead of
    checking their on-chip operands and running clocks. A checked block records its events in
    order: per access its step (its on-chip operands -- the (tag, shape, writes) whose root is a
    ChipBuffer --, its pipe's clock row after its epoch (a copy), its pipe slot, its op name),
    per sync op its `sync_event`. Every clock row at an event is a function of the events before
    it (program order epochs, set / wait / barrier joins; each block starts with fresh clocks and
    no pending set), so a block whose events so far are those of a checked block has that block's
    clocks at each of them: it runs none (set / wait / barrier compare their step only). The check
    of an on-chip range at one access reads only the pipe slot, that pipe's clock row, the range
    and the ranges recorded before under the same key (on-chip keys hold on-chip ranges only;
    ranges record the row's epoch and the op name). So a block whose events so far are the first
    events of a checked block, accesses compared on their pipes, names and on-chip operands, took
    on every on-chip key the decisions that block took, which raised nothing. Its GM operands
    (their offsets differ per block; GM keys hold GM ranges only) are checked in full, with the
    rows of the checked block's steps, lazily: while one pipe, or only reads, touched a GM buffer
    this block, none of those accesses can race, and they are checked (in order, recording
    them) when another access to it comes that could race (`_follow`, `_materialise`). At the
    first event that differs, the block switches to another checked block with the same prefix,
    or replays that prefix (`_diverge`: clocks, pending sets and on-chip ranges, the state a full
    check would hold then) and checks everything after in full, recording it, and becomes a
    checked block itself. Same verdicts and messages as checking every operand of every block
    (tests/test_interpreter_race.py compares both on racing and race-free kernels: `follow` False
    is the full check)."""

    follow = True  # False: check every operand of every block (the reference the tests compare with)

    __slots__ = ("kernel", "labels", "vc", "seen", "nslots", "keep", "active", "geo_ids", "geometry", "views",
                 "refs", "ref", "pos", "rec", "lazy", "queues", "block",
                 "frame", "ctl", "traces", "cheap", "cheap_ctl", "nctl", "gmlog", "gm_moves", "gm_steps", "tape", "ctl_vals",
                 "snaps", "cur", "phys_keys", "proved", "joins")

    def __init__(self, kernel: str, labels: list[str], nbuffers: int = 1, nflags: int = 1, frame=None):
        """`frame`: the data walk's Frame when its blocks may run unchecked while they take a
        checked block's control decisions (`reset`; check/uniform.py must hold), else None."""
        self.kernel = kernel
        # a placed space holds the ranges of all its buffers under one key: keep KEEP per buffer
        self.keep = KEEP * max(1, nbuffers)
        self.labels = labels
        self.nslots = len(labels)
        self.vc: list[list[int]] = []
        self.seen: dict = {}
        self.active: list[int] = []
        self.queues = [deque() for _ in range(max(1, nflags))]  # per flag key: clocks of pending sets
        self.joins: dict = {}  # held pipe slot -> clocks of the S waits its queue has still to reach
        self.geo_ids: dict = {}  # (strides, shape) -> its index in `geometry`
        self.geometry: list = []
        self.views: dict = {}  # (root, strides, shape) -> `_view`
        self.refs: list[list[tuple]] = []  # checked blocks of this launch (their events), the latest last
        self.ref: list[tuple] | None = None  # the checked block this block follows
        self.pos = 0  # events of this block so far, while it follows `ref`
        self.rec: list[tuple] | None = None  # this block's events, while it is checked in full
        # GM root -> [its one pipe, or -1: only reads; written; its accesses (step, operand)]
        # while a following block has not checked it yet (`_follow`)
        self.lazy: dict = {}
        self.block = 0
        self.frame = frame
        self.ctl: list | None = None  # this block's control decisions (value, events before it)
        self.traces: dict = {}  # id(checked block in `refs`) -> its control decisions
        self.cheap: list[tuple] | None = None  # the checked block a cheap block follows (`reset`)
        self.cheap_ctl: list = []  # its control decisions
        self.nctl = 0  # this cheap block's decisions so far
        self.gmlog: list | None = None  # a cheap block's GM operands, per access that has some
        # (first, end, root -> shift in elements): runs of `gmlog` whose tags are still to be moved
        # so (`log_moved`, `moved_log`)
        self.gm_moves: list = []
        self.ctl_vals: tuple | None = None  # (a `cheap_ctl`, its decisions' values): `ctl_values`
        self.gm_steps: dict = {}  # id(checked block) -> its steps with GM operands, their pipe slots
        self.tape: list | None = None  # while set, the calls made, in order (`play`)
        # id(checked block in `refs`) -> (it, {m: the on-chip state after its first m events}),
        # and the states of the block being checked in full (`cur`; `_snap`, `_diverge`)
        self.snaps: dict = {}
        self.cur: dict = {}
        self.phys_keys: set = set()  # the placed spaces accessed (on-chip keys of `seen` besides ChipBuffers)
        # `_shifted` keys of the GM buffers' accesses cheap blocks checked without a race (`finish`)
        # -> the checked block they followed
        self.proved: dict = {}

    def _view(self, root, st: tuple, shape: tuple) -> tuple:
        """(last element - first element, or -1 when empty; geometry id of (strides, shape); the
        placed space of `root` or None, and its base and bytes per element) of a view, kept in
        `views`."""
        span = 0
        for s, t in zip(shape, st):
            if s == 0:
                span = -1
                break
            span += (s - 1) * t
        g = self.geo_ids.get((st, shape))
        if g is None:
            g = self.geo_ids[(st, shape)] = len(self.geometry)
            self.geometry.append((st, shape))
        placed = type(root) is ChipBuffer and root.phys is not None
        if placed:
            self.phys_keys.add(root.phys)
        v = self.views[(root, st, shape)] = (span, g, root.phys, root.base, root.isz) if placed else (span, g, None, 0, 0)
        return v

    def reset(self, block: int = 0) -> bool:
        """Start block `block`: fresh clocks, ranges and pending sets; the block follows the checked
        block the last one followed or was (or is checked in full: the first block, `follow`
        False). True: the block runs cheap (`frame` given, the checked block's control decisions
        known): unchecked, its control decisions compared with the checked block's (`decide`)
        and its GM operands logged (`gmlog`) until one differs (`_wake`)."""
        n = self.nslots
        self.block = block
        self.vc = [[0] * n for _ in range(n)]
        self.seen = {}
        self.active = []
        for q in self.queues:
            q.clear()
        self.joins = {}
        rec = self.rec
        ref = self.ref
        cur = self.cur
        if (rec is None and ref is not None and self.frame is not None and self.ctl is not None and self.pos == len(ref)
                and self.ctl != self.traces.get(id(ref))):
            # the last block followed `ref` to its end on other decisions (the branches of a fused
            # Q / K / V GEMM: the same events): it is a checked block with those decisions, one
            # that later blocks deciding alike follow cheaply (a copy: `traces` is per list)
            rec = list(ref)
            cur = self.snaps.get(id(ref), (None, {}))[1]  # (the same events: the same states)
        if rec:  # the last block was checked in full (or followed one to its end) and raised nothing
            self.refs.append(rec)
            self.traces[id(rec)] = self.ctl
            self.snaps[id(rec)] = (rec, cur)
            if len(self.refs) > REFS:
                self.traces.pop(id(self.refs[0]), None)
                self.gm_steps.pop(id(self.refs[0]), None)
                self.snaps.pop(id(self.refs[0]), None)
                del self.refs[0]
            self.ref = rec
        self.cur = {}
        self.rec = None
        self.pos = 0
        self.lazy = {}
        self.cheap = self.gmlog = None
        self.gm_moves = []
        self.ctl = [] if self.follow else None
        if not self.follow or not self.refs:
            self.ref = None
            self.rec = [] if self.follow else None
        elif self.frame is not None:
            self.cheap, self.cheap_ctl, self.nctl, self.gmlog = self.ref, self.traces[id(self.ref)], 0, []
            return True
        return False

    # -- cheap blocks (reset): their events are the checked block's while their decisions are ----
    def decide(self, v) -> None:
        """A control decision of the data walk (an scf.if's branch; an scf.for iteration's start,
        True, or the loop's end, False: a block running fewer iterations than its checked block
        follows it cheaply to its own loop's end)."""
        if self.tape is not None:
            self.tape.append(v)
        c = self.cheap
        if c is not None:
            k = self.nctl
            t = self.cheap_ctl
            if k < len(t) and t[k][0] == v:
                self.nctl = k + 1
                return
            self._wake(v)
            return
        ctl = self.ctl
        if ctl is not None:
            ctl.append((v, self.pos if self.ref is not None else len(self.rec)))

    def _wake(self, v) -> None:
        """A cheap block's decision `v` differs from its checked block's: follow another checked
        block with these decisions, or follow this one from here (its events so far are this
        block's: check/uniform.py), its GM operands so far given to `_gm` in order."""
        k, ref, t = self.nctl, self.cheap, self.cheap_ctl
        for other in reversed(self.refs):
            ot = self.traces.get(id(other))
            if other is not ref and ot is not None and len(ot) > k and ot[k][0] == v and ot[:k] == t[:k]:
                self.cheap, self.cheap_ctl, self.nctl = other, ot, k + 1
                return
        log, steps = self.moved_log(), self._gm_steps(ref)[0]
        self.cheap = self.gmlog = None
        self.ref, self.pos = ref, t[k][1]
        self.ctl = t[:k] + [(v, self.pos)]
        for j, ops in enumerate(log):
            i = steps[j]
            self._gm(i, ref[i], ops)
        F = self.frame
        F.races, F.slow_path = self, True

    def ctl_values(self) -> list:
        """The values of the decisions of the checked block a cheap block follows (`cheap_ctl`,
        a list no one appends to once it is a trace), kept while it is the same list."""
        got = self.ctl_vals
        if got is None or got[0] is not self.cheap_ctl:
            got = self.ctl_vals = (self.cheap_ctl, [v for v, _ in self.cheap_ctl])
        return got[1]

    def log_moved(self, log: list, shifts: dict) -> None:
        """Log a cheap block's GM operands `log` (per access: [(tag, shape, writes)]) with each
        tag's element offset moved by its root's shift in `shifts` (root -> elements; a root not
        in it: 0). The move is made when a tag is read (`moved_log`): `finish` reads only the
        roots and write bits unless two pipes touched a GM buffer, one writing."""
        got = self.gmlog
        if shifts:
            self.gm_moves.append((len(got), len(got) + len(log), shifts))
        got.extend(log)

    def moved_log(self) -> list:
        """`gmlog` with every tag moved (`log_moved`)."""
        _move(self.gmlog, self.gm_moves)
        self.gm_moves = []
        return self.gmlog

    def _gm_steps(self, ref: list) -> tuple[list[int], list[int]]:
        """The steps of checked block `ref` that are accesses with GM operands, and their pipe
        slots."""
        got = self.gm_steps.get(id(ref))
        if got is None:
            steps = [i for i, s in enumerate(ref) if s[0] is not None and s[4]]
            got = self.gm_steps[id(ref)] = (steps, [ref[i][2] for i in steps])
        return got

    def finish(self, complete: bool) -> None:
        """End of a block (`complete`), or an error raised in it: a cheap block's GM accesses are
        checked, with the rows, pipes and names of its checked block's steps, on the buffers two
        pipes touched, one of them writing (on the others none can race), in order: what a full
        check raises first (on-chip ones cannot race: the checked block's did not)."""
        ref = self.cheap
        if ref is None:
            return
        log, steps = self.gmlog, self._gm_steps(ref)[0]
        if complete and (self.nctl != len(self.cheap_ctl) or len(log) != len(steps)):
            raise AssertionError(f"race check of @{self.kernel} block {self.block}: a cheap block ended apart from its checked block")
        moves, self.gm_moves = self.gm_moves, []
        self.cheap = self.gmlog = None
        # the GM roots two pipes touched, one writing (moving a tag keeps its root): from the
        # few distinct (root, pipe, writes) of the log, one set comprehension over it (a dict of
        # per-root state updated per entry was a third of a cheap block's check)
        pipes: dict = {}
        written = set()
        for r, p, w in {(o[0][0], p, o[2]) for ops, p in zip(log, self._gm_steps(ref)[1]) for o in ops}:
            pipes.setdefault(r, set()).add(p)
            if w:
                written.add(r)
        racy = {r for r in written if len(pipes[r]) > 1}
        if not racy:
            return
        moved = [None] * len(log)  # per access: root -> shift of its tags (`log_moved`), or None
        for a, b, shifts in moves:
            moved[a:b] = [shifts] * (b - a)
        # racy root -> its accesses (log position, operand number, operand moved), in order
        per = {r: [] for r in racy}
        for j, ops in enumerate(log):
            for k, o in enumerate(ops):
                got = per.get(o[0][0])
                if got is not None:
                    if moved[j] is not None:
                        t = o[0]
                        o = ((t[0], t[1] + moved[j].get(t[0], 0), t[2]), o[1], o[2])
                    got.append((j, k, o))
        # a root whose accesses repeat, shifted, those of a root an earlier cheap block following
        # `ref` checked without a race cannot race (`proved`: the module doc)
        proved = self.proved
        sigs = {r: _shifted(ref, acc) for r, acc in per.items()}
        left = {r for r, sig in sigs.items() if sig not in proved}
        if left:
            for j, _, o in sorted((e for r in left for e in per[r]), key=lambda e: (e[0], e[1])):
                _, row, pid, name, _ = ref[steps[j]]
                self._check(pid, row, [o], name, self.block)
        for r in left:
            proved[sigs[r]] = ref  # (holding `ref`: its id in the key stays its own)

    # -- sync ops: `ev` is the op's `sync_event` ------------------------------------------------
    def set(self, ev: tuple) -> None:
        """set_flag of pipe slot ev[2] on flag key ev[3]: its clock row is the pending set's."""
        if self.tape is not None:
            self.tape.append(ev)
        ref = self.ref
        if ref is not None:
            i = self.pos
            if i < len(ref) and ref[i] is ev:
                self.pos = i + 1
                return
            if not self._switch(ev):
                self._run(ev)
            return
        self._run(ev)

    def wait(self, ev: tuple) -> None:
        """wait_flag of pipe slot ev[2] on flag key ev[3]: joins the oldest pending set's clock."""
        self.set(ev)

    def barrier_all(self, ev: tuple = BARRIER) -> None:
        """pipe_barrier(ALL): every pipe's clock joins every other's."""
        self.set(ev)

    def play(self, tape: list, block: int) -> None:
        """Make the calls a `tape` recorded (access: (pid, operands, name); set / wait / barrier:
        its `sync_event`; decide: a bool), in order, in block `block`: what the ops that made
        them would do to the check (exec/data_loop_memo.py replays a loop's data and its tape).
        Raises as those calls raise."""
        for e in tape:
            if type(e) is bool:
                self.decide(e)
            elif e[0] is None:
                self.set(e)
            else:
                self.access(e[0], e[1], e[2], block)

    def _switch(self, ev: tuple) -> bool:
        """A following block's event `ev` is not `ref`'s next: follow another checked block with
        the same prefix and this event (True), or replay the prefix (`_diverge`; False)."""
        i, ref = self.pos, self.ref
        for other in reversed(self.refs):
            if other is not ref and len(other) > i and other[i] is ev and other[:i] == ref[:i]:
                self.ref = other
                self.pos = i + 1
                return True
        self._diverge(i)
        return False

    def _run(self, ev: tuple) -> None:
        """A sync event run on the clocks (checked in full), recorded."""
        kind, slot = ev[1], ev[2]
        vc = self.vc
        if kind == "set":
            self.queues[ev[3]].append(list(vc[slot]))
        elif kind == "wait":
            clock = self.queues[ev[3]].popleft()
            for w in (range(slot, slot + NPIPES) if slot % NPIPES == PIPE_INDEX["S"] else (slot,)):
                if w in ev[4]:
                    self.joins.setdefault(w, deque()).append(clock)
                else:
                    _inherit(vc[w], clock, self.active)
        elif kind == "join":
            _inherit(vc[slot], self.joins[slot].popleft(), self.active)
        else:
            j = [max(col) for col in zip(*vc)]
            self.vc = [list(j) for _ in range(self.nslots)]
        rec = self.rec
        if rec is not None:
            rec.append(ev)
            if not len(rec) % SNAP:
                self._snap()

    def access(self, pid: int, operands: list[tuple], name: str, block: int) -> None:
        """operands: (tag, shape, writes) of each memref operand of an op on pipe slot `pid`.
        Raises AscendirError naming both ops, pipes and the buffer(s) when it races (`_check`)."""
        if self.tape is not None:
            self.tape.append((pid, operands, name))
        ref = self.ref
        if ref is not None:
            i = self.pos
            try:
                step = ref[i]
            except IndexError:
                step = _END
            # (an op with no GM operand is equal to its on-chip operands)
            if operands == step[0] and pid == step[2] and name == step[3]:
                self.pos = i + 1
                return
            if self._follow(pid, operands, name, block, step):
                return
        self._full(pid, operands, name, block)

    def _full(self, pid: int, operands: list[tuple], name: str, block: int) -> None:
        """An access checked in full: its pipe's epoch, the check, its step recorded."""
        vc = self._tick(pid)
        self._check(pid, vc, operands, name, block)
        rec = self.rec
        if rec is not None:
            on = [o for o in operands if type(o[0][0]) is ChipBuffer]
            rec.append((on, vc[:], pid, name, len(operands) - len(on)))
            if not len(rec) % SNAP:
                self._snap()

    def _tick(self, pid: int) -> list[int]:
        """Advance pipe slot `pid`'s epoch (an access of it); its clock row."""
        vc = self.vc[pid]
        epoch = vc[pid] + 1
        vc[pid] = epoch
        if epoch == 1:
            self.active.append(pid)
        return vc

    def _follow(self, pid: int, operands: list[tuple], name: str, block: int, step: tuple) -> bool:
        """`access` of a following block whose access is not `step`, `ref`'s next: the same but
        for GM operands (checked lazily while one pipe, or only reads, touched a GM buffer this
        block: `lazy`; none of those accesses can race; True), or the first event that differs
        (another checked block with the same prefix is followed, True, or `_diverge`: False, the
        access is then checked in full)."""
        i = self.pos
        on = [o for o in operands if type(o[0][0]) is ChipBuffer]
        if not (on == step[0] and pid == step[2] and name == step[3]):
            ref = self.ref
            for other in reversed(self.refs):  # another checked block with this prefix, and this access
                if other is not ref and len(other) > i and other[i][0] == on and other[i][2] == pid \
                        and other[i][3] == name and other[:i] == ref[:i]:
                    self.ref = other
                    step = other[i]
                    break
            else:
                self._diverge(i)
                return False
        self.pos = i + 1
        if len(on) < len(operands):
            self._gm(i, step, [o for o in operands if type(o[0][0]) is not ChipBuffer])
        return True

    def _gm(self, i: int, step: tuple, operands: list[tuple]) -> None:
        """The GM `operands` of a following block's access, `ref`'s step `i` (`step`): checked
        with its row, or kept (`lazy`) while one pipe, or only reads, touched their buffer."""
        lazy = self.lazy
        row, pid, name, block = step[1], step[2], step[3], self.block
        for o in operands:
            root = o[0][0]
            w = o[2]
            got = lazy.get(root)
            if got is None:
                if root not in self.seen:  # first access to it this block
                    lazy[root] = [pid, w, [(i, o)]]
                    continue
            elif got[0] == pid or (not w and (got[0] < 0 or not got[1])):
                got[2].append((i, o))
                if got[0] != pid:
                    got[0] = -1
                if w:
                    got[1] = True
                continue
            else:
                self._materialise(root, block)
            self._check(pid, row, [o], name, block)

    def _materialise(self, root, block: int) -> None:
        """Check the accesses to GM `root` this block made while only one pipe, or only reads,
        touched it (none can race: the check records them, and raises nothing), so that it is
        checked in full from now on. (Their pipes, rows and names: those of `ref`'s steps.)"""
        ref = self.ref
        for i, o in self.lazy.pop(root)[2]:
            _, row, pid, name, _ = ref[i]
            self._check(pid, row, [o], name, block)

    def _diverge(self, n: int) -> None:
        """Replay this block's first `n` events (`ref`'s first `n` steps) as a full check would
        have run them: the clocks and pending sets, and the on-chip operands of the accesses
        checked (their GM operands were, or are now: `_materialise`; none of the replayed checks
        raises, `ref` having raised nothing on the same on-chip keys); then the rest of the block
        is checked in full, recorded (`rec`). (The replayed checks record their ranges without
        comparing them: they would raise nothing. A prefix is most of a block when a tile loop
        ends early near its end.)

        The replay starts from `ref`'s latest kept state at or before its step `n` (`_snap`):
        the clocks, pending sets and on-chip ranges after a checked block's first m events are
        a function of those events alone (each block starts from fresh clocks, no pending set
        and no range; GM keys hold GM ranges only), the replay's after this block's first m,
        the same events. A following block has run no clock and checked no on-chip operand
        before it diverges (`set`, `_follow`): its state holds GM ranges only, which stay."""
        for root in list(self.lazy):
            self._materialise(root, self.block)
        ref = self.ref
        self.ref = None
        kept = self.snaps.get(id(ref))
        self.cur = {} if kept is None else {m: s for m, s in kept[1].items() if m <= n}
        m = max(self.cur, default=0)
        if m:
            self._restore(self.cur[m])
        self.rec = ref[:m]
        for step in ref[m:n]:
            if step[0] is None:
                self._run(step)
            else:
                on, _, pid, name, _ = step
                self._check(pid, self._tick(pid), on, name, self.block, scan=False)
                rec = self.rec
                rec.append(step)
                if not len(rec) % SNAP:
                    self._snap()

    def _snap(self) -> None:
        """Keep the on-chip state after the events recorded so far (`rec`, SNAP of them more
        than at the last): the clocks, the active slots, the pending sets and joins and the
        on-chip keys' ranges, copied (`_diverge` restores them instead of replaying the events before)."""
        chip = self.phys_keys
        seen = {k: ({pk: dict(d) for pk, d in per.items()}, dict(latest)) for k, (per, latest) in self.seen.items()
                if type(k) is ChipBuffer or k in chip}
        self.cur[len(self.rec)] = ([row[:] for row in self.vc], self.active[:], [tuple(q) if q else () for q in self.queues], seen,
                                   {w: deque(q) for w, q in self.joins.items()})

    def _restore(self, state: tuple) -> None:
        """Take the on-chip state `_snap` kept (copied again: the check goes on from it)."""
        vc, active, queues, seen, joins = state
        self.joins = {w: deque(q) for w, q in joins.items()}
        self.vc = [row[:] for row in vc]
        self.active = active[:]
        for q, got in zip(self.queues, queues):
            q.clear()
            q.extend(got)
        for k, (per, latest) in seen.items():
            self.seen[k] = ({pk: dict(d) for pk, d in per.items()}, dict(latest))

    def _check(self, pid: int, vc: list[int], operands: list[tuple], name: str, block: int, scan: bool = True) -> None:
        """Check and record `operands` of an access by pipe slot `pid` whose clock row is `vc`
        (its epoch included); `scan` False: record them only (an access known to race with
        nothing: `_diverge`).

        Per (buffer or placed space, pipe, read/write) the recent ranges are an insertion-ordered
        dict range -> (epoch, op name): re-accessing a range moves it to the end (one lookup, not a
        scan of up to KEEP x buffers entries), so epochs increase along it and only the entries
        after the last epoch `pid` knows of, found from the end, can race; the latest epoch per
        (pipe, read/write) skips the pipes whose every access there is already ordered before."""
        epoch = vc[pid]
        seen = self.seen
        views = self.views
        entry = (epoch, name)
        for tag, shape, w in operands:
            root, off, st = tag[0], tag[1], tag[2]
            v = views.get((root, st, shape))
            if v is None:
                v = self._view(root, st, shape)
            span, g, phys, base, isz = v
            if span < 0:  # no element
                continue
            if phys is None:
                key = root
                rng = (off, off + span + 1, off, g, root)
            else:  # placed: compare bytes of the space, whichever buffer they belong to
                key = phys
                rng = (base + off * isz, base + (off + span + 1) * isz, off, g, root)
            lo, hi = rng[0], rng[1]
            got = seen.get(key)
            if got is None:
                got = seen[key] = ({}, {})
            per, latest = got
            for pk, last in (latest.items() if scan else ()):
                p = pk[0]
                known = vc[p]
                if last <= known or p == pid or not (pk[1] or w):
                    continue  # everything pipe p did there happens before this op, or both read
                # the entries after the last epoch this op knows of, newest first: the oldest one
                # that meets this range is the race reported (as made, oldest first)
                hit = None
                for e_rng, e in reversed(per[pk].items()):
                    if e[0] <= known:
                        break
                    if e_rng[0] < hi and lo < e_rng[1] and _meets(rng, e_rng, self.geometry):
                        hit = e_rng, e[1]
                if hit is not None:
                    e_rng, e_name = hit
                    pw = pk[1]
                    what = f"buffer {describe(root)}:"
                    if e_rng[4] is not root:
                        what = f"buffers {describe(e_rng[4])} and {describe(root)} share bytes:"
                    kinds = f"{'write' if pw else 'read'} / {'write' if w else 'read'}"
                    raise AscendirError(
                        f"race in kernel @{self.kernel} (block {block}): {what} {e_name} on "
                        f"{self.labels[p]} and {name} on {self.labels[pid]} touch overlapping "
                        f"{'elements' if phys is None else 'bytes'} "
                        f"({kinds}) with no set_flag/wait_flag or pipe_barrier ordering them"
                    )
            pk = (pid, w)
            d = per.get(pk)
            if d is None:
                per[pk] = {rng: entry}
            else:
                d.pop(rng, None)
                d[rng] = entry
                if len(d) > (KEEP if phys is None else self.keep):
                    del d[next(iter(d))]
            latest[pk] = epoch
