"""The dependence analysis of insert-sync: the kernel body executed symbolically for the first
and the last block with a vector clock per (unit, pipe), as the interpreter's race detector does;
every cross-pipe access of the same bytes, one writing, with no happens-before is a `Conflict`.
Which iterations of a loop run: `_sampled` (the package docstring says why); which outcomes of
control flow that depends on data: `_data_trips`, `_Run.data_counts` (with bounds.py),
`_Run.choose` and `conflicts`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, MemRefType
from xdsl.ir import Block, Operation, SSAValue

from ascendir.costmodel.buffer_lifetimes import dropped_dims as _dropped_dims, ranges_overlap as _overlap
from ascendir.dialects import ascend
from ascendir.dialects.ascend import Pipe, module_arch, space_of, subblock
from ascendir.dialects.ir_checks import loop_range
from ascendir.dtypes import itemsize
from ascendir.errors import AscendirError
from ascendir.transforms.ascend.insert_sync.bounds import UNBOUNDED, decide, interval, trip_counts
from ascendir.transforms.ascend.insert_sync.conflict import Conflict
from ascendir.transforms.ascend.insert_sync.ops import kernel_flag_units, op_pipe, op_unit, split_units, written
from ascendir.transforms.ascend.insert_sync.symbolic import ARITH, CMP, View, buffer_name, contiguous

ITERATIONS = 4  # first iterations of each loop executed (at least): loop-carried distances 1..3 (ping-pong is 2)
LAST = 2  # and its last iterations (boundary tiles, last-iteration branches)
KEEP = 16  # recent accesses remembered per (buffer, pipe, read/write)
MAX_RUNS = 64  # executions per block index of a kernel with data-dependent control flow (beyond: not analysed)


class _Unknown(Exception):
    """The kernel's control flow depends on something the analysis cannot evaluate."""


@dataclass
class _Run:
    """One symbolic execution of a kernel body for one block index."""

    arch: str | None
    block_idx: int
    by_unit: bool = False  # a mix kernel on split cores: pipes are (unit, pipe) slots
    units: dict = field(default_factory=dict)  # flag op -> (src unit, dst unit) (flag_placement.flag_units)
    env: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)  # value that is data (None in env) -> its interval (bounds.py), when bounded
    vc: dict = field(default_factory=dict)  # (unit, pipe) -> {(unit, pipe): epoch}
    queues: dict = field(default_factory=dict)  # (src slot, dst slot, event) -> [clock]
    floor: dict = field(default_factory=dict)  # unit -> the clock its last pipe_barrier ALL gave every pipe
    seen: dict = field(default_factory=dict)  # key -> {(pipe, writes): [(epoch, range, op)]}
    conflicts: list = field(default_factory=list)
    found: set = field(default_factory=set)
    flags_run: set = field(default_factory=set)  # flag ops executed
    choices: dict = field(default_factory=dict)  # data-dependent site (scf.for / scf.if) -> its option in this run
    sites: dict = field(default_factory=dict)  # data-dependent sites reached, in order -> how many options
    visits: dict = field(default_factory=dict)  # data-dependent site -> times reached so far
    widths: dict = field(default_factory=dict)  # data-dependent site -> how many options (all runs of the block)
    static: dict = field(default_factory=dict)  # op -> what does not change between runs (its slot, flag key, ...)
    periods: dict = field(default_factory=dict)  # loop -> period (this run)

    def clock(self, p: tuple[int, Pipe]) -> dict:
        c = self.vc.get(p)
        if c is None:  # a pipe's first op still follows the unit's last pipe_barrier ALL
            c = self.vc[p] = dict(self.floor.get(p[0], {}))
        return c

    def flag_key(self, op: ascend.FlagOp) -> tuple:
        key = self.static.get(op)
        if key is None:
            su, du = self.units.get(op, (0, 0))
            key = self.static[op] = ((su, Pipe(op.src.data)), (du, Pipe(op.dst.data)), op.event.value.data)
        return key

    def slot(self, op: Operation) -> tuple[int, Pipe] | None:
        """The (unit, pipe) running memory-touching `op`, None for other ops (cached: the runs of
        a kernel execute the same ops many times)."""
        if op in self.static:
            return self.static[op]
        pipe = op_pipe(op, self.arch)
        slot = self.static[op] = None if pipe is None else (op_unit(op, pipe) if self.by_unit else 0, pipe)
        return slot

    def val(self, v: SSAValue):
        r = self.maybe(v)
        if r is None:
            raise _Unknown("a data-dependent value")
        return r

    def maybe(self, v: SSAValue):
        """The value of `v`, None when it depends on data (a loaded scalar)."""
        if v not in self.env:
            raise _Unknown(f"value {v.name_hint or v} of {v.owner}")
        return self.env[v]

    def set(self, v: SSAValue, value, span: tuple = UNBOUNDED) -> None:
        """`v` takes `value`; when that is None (data), `span` is the interval it lies in."""
        self.env[v] = value
        if value is None and span != UNBOUNDED:
            self.bounds[v] = span
        else:
            self.bounds.pop(v, None)

    def span(self, v: SSAValue) -> tuple:
        """The interval of index value `v`: one point when known, its bounds when data."""
        x = self.env.get(v)
        if isinstance(x, int):
            return (x, x)
        return self.bounds.get(v, UNBOUNDED) if x is None else UNBOUNDED

    def choose(self, site: Operation, options: int) -> int:
        """This visit's outcome of data-dependent `site` (`options` outcomes, the last of which
        alternates the others visit by visit): the run's choice for the site, 0 by default (see
        `conflicts`, which runs the other choices). The number of outcomes a site has is the same
        at every visit of every run of a block (`widths`, shared): with bounds (bounds.py) it
        could differ, and the runs would miss outcomes: then the kernel is not analysed."""
        if self.widths.setdefault(site, options) != options:
            raise _Unknown(f"{site.name} has {options} outcomes here, {self.widths[site]} elsewhere")
        self.sites.setdefault(site, options)
        k = self.choices.get(site, 0)
        n = self.visits[site] = self.visits.get(site, -1) + 1
        return n % (options - 1) if k == options - 1 else k

    def period(self, loop: scf.ForOp) -> int:
        """The lcm of the constant divisors of the remainders `loop`'s body takes of values
        computed from its induction variable (the slot of a ring: `j % 2` picks a ping-pong
        slot), 1 when there are none. Divisors are read from the env or their constant op."""
        tainted = {loop.body.block.args[0]}
        period = 1
        for o in loop.body.walk():
            if isinstance(o, scf.ForOp) and any(v in tainted for v in (o.lb, o.ub, o.step)):
                tainted.add(o.body.block.args[0])
            if not any(v in tainted for v in o.operands):
                continue
            tainted.update(o.results)
            if isinstance(o, (arith.RemUIOp, arith.RemSIOp)) and o.lhs in tainted and o.rhs not in tainted:
                d = self.env.get(o.rhs)
                if d is None and isinstance(o.rhs.owner, arith.ConstantOp) and isinstance(o.rhs.owner.value, IntegerAttr):
                    d = o.rhs.owner.value.value.data
                if isinstance(d, int) and d > 1:
                    period = math.lcm(period, d)
        return period

    # -- execution ---------------------------------------------------------------------------
    def block(self, b: Block) -> None:
        for op in b.ops:
            self.op(op)

    def op(self, op: Operation) -> None:
        if isinstance(op, scf.ForOp):
            self.loop(op)
        elif isinstance(op, scf.IfOp):
            cond = self.maybe(op.cond)
            if cond is None:  # taken, not taken, or alternately (from taken)
                cond = self.choose(op, 3) == 0
            region = op.true_region if cond else op.false_region
            results = [None] * len(op.results)
            if region.blocks:
                self.block(region.block)
                y = region.block.last_op
                if isinstance(y, scf.YieldOp):
                    results = [self.env.get(v) for v in y.operands]
            for r, v in zip(op.results, results):
                self.set(r, v)
        elif isinstance(op, (scf.YieldOp, ascend.ReturnOp)):
            pass
        elif isinstance(op, ascend.SetFlagOp):
            self.flags_run.add(op)
            key = self.flag_key(op)
            self.queues.setdefault(key, []).append(dict(self.clock(key[0])))
        elif isinstance(op, ascend.WaitFlagOp):
            self.flags_run.add(op)
            key = self.flag_key(op)
            q = self.queues.get(key)
            if q:  # an unmatched wait orders nothing (conservative)
                got = q.pop(0)
                u, pipe = key[1]
                if pipe == Pipe.S:  # the scalar unit stops, and it issues all the unit's later ops:
                    # every pipe of the unit follows the set, those it has not used yet too (check/race.py)
                    self.floor[u] = floor = dict(self.floor.get(u, {}))
                    clocks = [c for s, c in self.vc.items() if s[0] == u] + [floor]
                else:
                    clocks = [self.clock(key[1])]
                for c in clocks:
                    for p, e in got.items():
                        c[p] = max(c.get(p, 0), e)
        elif isinstance(op, ascend.PipeBarrierOp):
            if op.pipe.data == "ALL":
                # each core orders its own pipes: the AIC and the AIVs of a mix kernel run their
                # own instruction streams, so a barrier orders nothing across them (the
                # interpreter joins every unit, which this never contradicts: it only orders less)
                for u in {s[0] for s in self.vc} | set(self.floor):
                    joined = dict(self.floor.get(u, {}))
                    mine = [s for s in self.vc if s[0] == u]
                    for s in mine:
                        for p, e in self.vc[s].items():
                            joined[p] = max(joined.get(p, 0), e)
                    for s in mine:
                        self.vc[s] = dict(joined)
                    self.floor[u] = joined
        elif isinstance(op, ascend.AllocOp):
            t = op.result.type
            off = op.attributes.get("offset")
            # placed buffers are compared by bytes of their space; each AIV has its own UB
            key = (space_of(t), subblock(op)) if off is not None else op.result
            self.env[op.result] = View(key, off.value.data if off is not None else 0, tuple(t.get_shape()), contiguous(t.get_shape()), itemsize(t.element_type))
        elif isinstance(op, ascend.ViewOp):
            src = self.val(op.source)
            shape = tuple(op.result.type.get_shape())
            self.env[op.result] = View(src.key, src.offset, shape, contiguous(shape), src.size)
        elif isinstance(op, memref.SubviewOp):
            self.subview(op)
        elif isinstance(op, ascend.BlockIdxOp):
            self.env[op.result] = self.block_idx
        else:
            slot = self.slot(op)
            if slot is not None:
                self.access(op, slot)
                for r in op.results:
                    self.set(r, None)  # a loaded scalar: data
            else:
                self.arith(op)

    def loop(self, op: scf.ForOp) -> None:
        """Sampled iterations (`_sampled`) of a loop with known bounds; with a bound or step read
        from data, the run's choice among `_data_trips` (all iterations executed), its induction
        variable data too unless its start and step are known. Carried values (iter_args)
        follow the executed iterations; after skipped ones they are unknown (data)."""
        lb, ub, st = self.maybe(op.lb), self.maybe(op.ub), self.maybe(op.step)
        period = self.periods.get(op)
        if period is None:  # divisors are constants or set before the loop: once per run
            period = self.periods[op] = self.period(op)
        if lb is None or ub is None or st is None:
            counts = self.data_counts(op, period)
            iters: list[int] = list(range(counts[0] if len(counts) == 1 else counts[self.choose(op, len(counts) + 1)]))
        else:
            iters = _sampled(len(loop_range(lb, ub, st)), period)  # a step of 0 or less: refused as the run refuses it
        iv, args = op.body.block.args[0], op.body.block.args[1:]
        carried = [self.maybe(v) for v in op.iter_args]
        prev = -1
        for n in iters:
            if n != prev + 1:
                carried = [None] * len(carried)
            prev = n
            if lb is None or st is None:  # data: from the lowest start to below the highest bound
                self.set(iv, None, (self.span(op.lb)[0], self.span(op.ub)[1] - 1) if isinstance(st, int) and st > 0 else UNBOUNDED)
            else:
                self.set(iv, lb + n * st)
            for a, v in zip(args, carried):
                self.set(a, v)
            self.block(op.body.block)
            y = op.body.block.last_op
            carried = [self.env.get(v) for v in y.operands] if isinstance(y, scf.YieldOp) else []
        for r, v in zip(op.results, carried):
            self.set(r, v)

    def data_counts(self, op: scf.ForOp, period: int) -> list[int]:
        """The trip counts to run data-bound loop `op` for: those of `_data_trips` its bounds
        allow (bounds.trip_counts): a loop that runs at most once needs its 0 and 1 only (the
        MoE N-tile loop), one that runs at least twice no 0 or 1. A bound between 2 and the
        longest count keeps the long counts (they stand for every longer one, `_data_trips`)."""
        counts = _data_trips(period)
        st = self.maybe(op.step)
        if not isinstance(st, int) or st <= 0:
            return counts
        least, most = trip_counts(self.span(op.lb), self.span(op.ub), st)
        short = [c for c in counts if c <= 1 and least <= c <= most]
        return short + [c for c in counts if c > 1] if most > 1 else short

    def subview(self, op: memref.SubviewOp) -> None:
        src = self.val(op.source)
        dyn = {"offsets": iter(op.offsets), "sizes": iter(op.sizes), "strides": iter(op.strides)}

        def resolve(static, kind: str) -> list[int]:
            return [self.val(next(dyn[kind])) if s == DYNAMIC_INDEX else s for s in static.get_values()]

        try:
            offs, sizes, steps = resolve(op.static_offsets, "offsets"), resolve(op.static_sizes, "sizes"), resolve(op.static_strides, "strides")
        except _Unknown:  # a window placed by data (a block table's entry): it may be anywhere in its source
            self.env[op.result] = src
            return
        offset = src.offset + src.size * sum(o * s for o, s in zip(offs, src.strides))
        drop = _dropped_dims(sizes, list(op.result.type.get_shape()), len(sizes))
        keep = [d for d in range(len(sizes)) if d not in drop]
        self.env[op.result] = View(
            src.key, offset, tuple(sizes[d] for d in keep), tuple(src.strides[d] * steps[d] for d in keep), src.size
        )

    def arith(self, op: Operation) -> None:
        if not op.results:
            return
        if isinstance(op, arith.ConstantOp):
            self.env[op.result] = op.value.value.data if isinstance(op.value, IntegerAttr) else None
            return
        if isinstance(op, arith.CmpiOp):
            a, b = self.env.get(op.lhs), self.env.get(op.rhs)
            pred = op.predicate.value.data
            # data compared with a bound it cannot cross is decided (bounds.py)
            self.env[op.result] = decide(pred, self.span(op.lhs), self.span(op.rhs)) if a is None or b is None else CMP[pred](a, b)
            return
        f = ARITH.get(op.name)
        if f is None:
            for r in op.results:
                self.set(r, None)
            return
        args = [self.env.get(v) for v in op.operands]
        if any(a is None for a in args):
            lo, hi = interval(op, [self.span(v) for v in op.operands], args)
            self.set(op.results[0], lo if lo == hi and not math.isinf(lo) else None, (lo, hi))  # one possible value: known
        else:
            self.set(op.results[0], f(*args))

    def access(self, op: Operation, pipe: tuple[int, Pipe]) -> None:
        out = written(op)
        c = self.clock(pipe)
        epoch = c[pipe] = c.get(pipe, 0) + 1
        for v in op.operands:
            if not isinstance(v.type, MemRefType):
                continue
            view = self.val(v)
            rng = view.range()
            if rng is None:
                continue
            w = v is out
            per = self.seen.setdefault(view.key, {})
            for (p, pw), entries in per.items():
                if p == pipe or not (pw or w):
                    continue
                known = c.get(p, 0)
                for e_epoch, e_rng, e_op in entries:
                    if e_epoch > known and _overlap(rng, e_rng):
                        k = (e_op, op, p, pipe)
                        if k not in self.found:
                            self.found.add(k)
                            self.conflicts.append(Conflict(e_op, op, p[1], pipe[1], (p[0], pipe[0]), buffer_name(view.key)))
            lst = per.setdefault((pipe, w), [])
            lst.append((epoch, rng, op))
            if len(lst) > KEEP:
                del lst[0]


def _sampled(trips: int, period: int = 1) -> list[int]:
    """The iterations of a `trips`-iteration loop the analysis executes: the first ITERATIONS and
    the last LAST, with the head extended (by fewer than `period` iterations) so that the skipped
    middle is a whole number of periods.

    Why: the state after the head stands for the state before the tail only if the skipped
    iterations would have brought it back to the same shape. Flags pair first-in first-out, so a
    wait in the tail takes the set that a skipped wait would have taken; with the skip a multiple
    of every ring the index selects (`period`), that set came after the same slot's last write
    in the head, as the real one comes after that slot's last write before the tail. An odd skip
    on a two-slot ring pairs the wait for slot 1 with the set after slot 0's write: a conflict
    that no real execution has (the causal FlashAttention KV loop of 7 iterations, 4 + 2 run)."""
    head = min(trips, ITERATIONS)
    if trips - LAST > head:
        head += (trips - LAST - head) % period
    return [*range(head), *range(max(head, trips - LAST), trips)]



def _data_trips(period: int) -> list[int]:
    """The trip counts a loop whose bound is data is executed for (one per run): 0 (the code
    after it meets the code before it directly: a flag set before, waited after), 1 (one body
    between them, no loop-carried pairing), and ITERATIONS + LAST + r for each remainder r of
    the loop's ring `period` (every loop-carried distance `_sampled` looks at, the ring left in
    each of its slots at the exit, where the drains after the loop pair with it). Longer runs
    repeat the steady state `_sampled` stands for. A remainder by more than ITERATIONS is taken
    for a block-cyclic deal of work (`% block_dim`), not a ring of slots: no extra counts. The
    run's last option alternates these counts visit by visit (an empty iteration of an outer
    loop next to a full one)."""
    ring = period if period <= ITERATIONS else 1
    return [0, 1, *(ITERATIONS + LAST + r for r in range(ring))]


def conflicts(kernel: ascend.KernelOp, executed: set | None = None, arch: str | None = None) -> list[Conflict] | None:
    """Unordered cross-pipe conflicts of `kernel` (see the module docstring), the union over the
    runs of each block index: one run per combination of the outcomes of the data-dependent
    sites (`_Run.choose`: a data-bound loop's `_data_trips`, a data branch taken / not / alternately)
    the runs reach. None when the kernel is not analysed: a value the execution cannot model, or
    more than MAX_RUNS combinations for a block. `executed` receives the flag ops the analysis
    ran. In a 910B mix kernel a pipe is a (unit, pipe) slot and flags connect the units
    flag_placement.flag_units gives them, as in the interpreter. `arch`: the module's `ascend.arch`
    (read from the enclosing module when None; a detached clone has none)."""
    arch = module_arch(kernel) if arch is None else arch
    by_unit = split_units(kernel, arch)
    units = kernel_flag_units(kernel, arch) if by_unit else {}
    found: list[Conflict] = []
    static: dict = {}
    for block in sorted({0, kernel.block_dim.value.data - 1}):
        pending: list[dict] = [{}]
        widths: dict = {}
        for _ in range(MAX_RUNS):
            if not pending:
                break
            choices = pending.pop()
            run = _Run(arch, block, by_unit, units, choices=choices, static=static, widths=widths)
            for a in kernel.body.block.args:
                t = a.type
                run.env[a] = View(a, 0, tuple(t.get_shape()), contiguous(t.get_shape()), itemsize(t.element_type))
            try:
                run.block(kernel.body.block)
            except _Unknown:
                return None
            except AscendirError as e:
                raise AscendirError(f"insert-sync: kernel @{kernel.sym_name.data}: {e}") from None
            found += [c for c in run.conflicts if c not in found]
            if executed is not None:
                executed |= run.flags_run
            # every combination of the outcomes of the data-dependent sites this run reached,
            # once: a site first reached here (it took outcome 0) gets a run per other outcome
            fixed = dict(choices)
            for site, n in run.sites.items():
                if site not in fixed:
                    pending += [{**fixed, site: k} for k in range(1, n)]
                    fixed[site] = 0
        if pending:
            return None  # more than MAX_RUNS combinations: not analysed
    return found

