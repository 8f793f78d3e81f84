"""`insert-sync`: `ascend.set_flag` / `ascend.wait_flag` where one pipe must wait for another.

Each tile op runs on one pipe (copies by their (src, dst) spaces, `ascend.mmad` on M, vector ops on
V, `ascend.gather_rows` on MTE2, `memref.load/store` on S) and reads and writes byte ranges of
buffers (the last memref operand is the one written). Two ops on different pipes touching
overlapping bytes of one buffer, one of them writing, need a happens-before path: program order
within a pipe, set_flag -> its matching wait_flag (flags match first-in first-out per (src, dst,
event)), pipe_barrier ALL. Planned buffers (plan-memory `offset`) are compared by their bytes in
the space (per AIV for UB: each has its own), so two buffers that share bytes are ordered too.

910B mix kernels (core_type = #ascend.core_type<mix> on dav-c220, or a module naming no arch): a block is one AIC
and one or two AIVs, each with its own pipes, so a pipe here is a (unit, pipe) slot: copies run on
the unit owning their on-chip space (L1/L0A/L0B/L0C/BT/FB: AIC, UB: AIV), mmad on the AIC,
vector ops and gather_rows on an AIV, `subblock = 1` marks AIV 1's ops (interpreter
compiler.unit_of). Existing flags connect the units the interpreter gives them
(dialects/ascend/flag_placement.py: the `units` attribute, else the nearest op on the pipe). The
same analysis then finds conflicts within each unit and across units; the units share no buffer
but GM, so the latter are GM hand-offs (FixPipe L0C -> GM then MTE2 GM -> UB; MTE3 UB -> GM then
MTE2 GM -> L1) and the WARs of reused workspaces. Every flag inserted in a mix kernel names its
units (`units = #ascend.flag_units<aic -> aiv>`, <aiv1 -> aic>, <aiv -> aiv>, ...), since MTE2 and MTE3 exist on every
unit. pipe_barrier ALL orders the pipes of each unit among themselves only (each unit runs its
own instruction stream; the interpreter, which joins every unit, is never contradicted by
ordering less). A conflict between one pipe on two units (AIV 0's and AIV 1's MTE3 writing the
same GM bytes) has no flag (set_flag joins two different pipes): it is left, with a pass note
naming the kernel, both ops and the buffer. On a coupled chip (910A) a mix kernel is one unit.

Analysis: the kernel body is executed symbolically for the first and the last block (block-cyclic
tiles give the first block the most tiles and the last one the boundary tiles) -- index
arithmetic, subview offsets and `scf.if` conditions are evaluated exactly, each `scf.for` runs its
first `ITERATIONS` iterations (enough to see loop-carried dependences across ping-pong slots)
and its last `LAST` (boundary tiles, branches of the last iteration), the first ones extended so
that the iterations skipped between them are a whole number of the periods of the rings the
loop index selects (`j % 2`, `j % 3`: flags pair first-in first-out, so an odd skip on a 2-slot
ring would pair a wait for one slot with the set after the other, see _sampled) --
with a vector clock per pipe, as the interpreter's race detector does (interpreter/race.py).
Code neither block reaches gets no flags (the interpreter's race detector still checks it when
it runs). Every
unordered conflict (A on pipe P, then B on pipe Q) gets one flag pair, placed in the innermost
block holding both ops, at the ops of that block that contain them (a pipe is in order, so a set
after a loop still follows everything the loop put on P):

* A's op before B's op: a hand-off right before B's op (set then wait: the set also covers every
  op the src pipe was given up to there, so the other conflicts of the same pipes in between
  need no pair of their own);
* otherwise the dependence is carried by an enclosing `scf.for`: a set after A's op, a wait
  before B's, primed with one set before the outermost loop of the kernel around them and drained
  with one wait after it (each execution of the block waits then sets, so the pair stays balanced
  however often the block runs; priming outside every loop avoids a bubble per outer iteration),
  so every wait has an earlier set and every set is consumed (the Ascend C TQue pattern).

Event ids: hand-offs of a pipe pair share one id (a set immediately waited for is never
outstanding; in a mix kernel only hand-offs between the same units); any other pair takes the
lowest id of the (P, Q) pair not used in the kernel, of the 8 the hardware has (S6
EVENT_ID0-7), whatever units it connects (the interpreter matches a flag by pipes and id, so
one id connects one pair of units); more is an error naming the kernel. The analysis runs again after each round
of insertions (one pair per pipe pair per round, so an inserted pair that also orders another
conflict makes its own pair unnecessary) until no conflict is left.

Why the lowering templates keep their own flags: their queues (kernel_builder.Queue) encode
the pipeline each template was designed around -- one event pair per ping-pong slot selected by
the parity of a core's running chunk count, the priming outside the outermost loop, the
cross-unit workspace rings of mix kernels primed several times -- which a generic pass would
have to rediscover to do as well. On their kernels this pass proves that nothing is missing (it
inserts nothing: tests/test_insert_sync.py checks every corpus kernel, mix kernels included) and
is the tool for IR that has no flags (hand-written, or single-buffered loops that `double-buffer`
split into ping-pong slots).

Not analysed (left as they are): kernels whose control flow depends on data (a loop bound or
condition read from memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe, module_arch, space_of, subblock
from ascendir.dialects.ascend.flag_placement import UNIT_NAMES, flag_units
from ascendir.dialects.ascend.placement import Unit, default_unit, placement
from ascendir.dtypes import itemsize
from ascendir.errors import AscendirError
from ascendir.costmodel.buffer_lifetimes import dropped_dims as _dropped_dims, ranges_overlap as _overlap
from ascendir.dialects.ascend import FLAG_UNITS_ATTR, FlagUnitsAttr
from ascendir.hardware.config import arch_named
from ascendir.session import session_of
from ascendir.transforms.ascend.ir_level import require_ascend_ir

ITERATIONS = 4  # first iterations of each loop executed (at least): loop-carried distances 1..3 (ping-pong is 2)
LAST = 2  # and its last iterations (boundary tiles, last-iteration branches)
EVENTS = 8  # event ids per (src, dst) pipe pair (S6 EVENT_ID0-7)
KEEP = 16  # recent accesses remembered per (buffer, pipe, read/write)
MAX_ROUNDS = 64


class _Unknown(Exception):
    """The kernel's control flow depends on something the analysis cannot evaluate."""


@dataclass(frozen=True)
class Conflict:
    """Op `first` on pipe `src` and later op `second` on pipe `dst` touch the same bytes, one
    writing, with no happens-before between them. `units` = (unit of `first`, unit of `second`):
    0 = AIC (or the only unit of a non-mix kernel), 1 = AIV 0, 2 = AIV 1."""

    first: Operation
    second: Operation
    src: Pipe
    dst: Pipe
    units: tuple[int, int] = (0, 0)
    buffer: str = field(default="", compare=False)  # the buffer they share, for messages

    @property
    def slots(self) -> tuple[tuple[int, Pipe], tuple[int, Pipe]]:
        """((unit, pipe) of `first`, (unit, pipe) of `second`)."""
        return (self.units[0], self.src), (self.units[1], self.dst)

    def describe(self) -> str:
        """`ascend.copy on aic FIX then ascend.copy on aiv MTE2` (units named only when they differ)."""
        a, b = self.units
        if a == b:
            what = f"{self.first.name} on {self.src.value} then {self.second.name} on {self.dst.value}"
        else:
            what = f"{self.first.name} on {UNIT_NAMES[a]} {self.src.value} then {self.second.name} on {UNIT_NAMES[b]} {self.dst.value}"
        return f"{what} ({self.buffer})" if self.buffer else what


def op_pipe(op: Operation, arch: str | None) -> Pipe | None:
    """The pipe a memory-touching op runs on (`placement`), None for ops that touch no buffer
    (flags and barriers run on a pipe but touch none).

    Raises:
        VerifyException: a copy whose path `arch` lacks."""
    if isinstance(op, (ascend.FlagOp, ascend.PipeBarrierOp)):
        return None
    p = placement(op, arch)
    return None if p is None else p.pipe


def op_unit(op: Operation, pipe: Pipe) -> int:
    """The unit of a 910B mix kernel that runs `op` on `pipe` (0 = AIC, 1 = AIV 0, 2 = AIV 1), as
    the interpreter places it (compiler.unit_of): the unit `placement` gives (copies by their
    on-chip space, mmad on the AIC, vector ops and gather_rows on an AIV; `subblock` = 1: AIV 1),
    else the pipe's default unit (scalar loads/stores on the AIC)."""
    p = placement(op)
    unit = p.unit if p is not None and p.unit is not None else default_unit(pipe)
    return 0 if unit is Unit.AIC else 1 + subblock(op)


def split_units(kernel: ascend.KernelOp, arch: str | None = None) -> bool:
    """A mix kernel for split cube / vector cores (910B; also when the module names no arch): its
    AIC and AIVs have separate pipes, synchronised by flags naming their units (FLAG_UNITS_ATTR).
    On a coupled chip (910A) a mix kernel runs on one core, analysed like any other."""
    arch = module_arch(kernel) if arch is None else arch
    caps = arch_named(arch)
    return kernel.core_type.data == CoreType.MIX.value and caps is not None and caps.split_cores


def written(op: Operation) -> SSAValue | None:
    """The memref operand `op` writes (the others it reads)."""
    if isinstance(op, ascend.CopyOp):
        return op.dest
    if isinstance(op, ascend.MmadOp):
        return op.c
    if isinstance(op, memref.StoreOp):
        return op.memref
    return getattr(op, "dest", None)


@dataclass
class _View:
    """A window of a buffer: key (the buffer, or the space of planned buffers), byte offset,
    shape and strides in elements, element size."""

    key: object
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    size: int

    def range(self) -> tuple | None:
        """(lo, hi, offset, strides, shape) in bytes, for race._overlap; None when empty."""
        if any(s == 0 for s in self.shape):
            return None
        st = tuple(s * self.size for s in self.strides) + (1,)
        shape = self.shape + (self.size,)
        hi = self.offset + sum((n - 1) * s for n, s in zip(shape, st))
        return (self.offset, hi, self.offset, st, shape)


def _contiguous(shape) -> tuple[int, ...]:
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


@dataclass
class _Run:
    """One symbolic execution of a kernel body for one block index."""

    arch: str | None
    block_idx: int
    by_unit: bool = False  # a mix kernel on split cores: pipes are (unit, pipe) slots
    units: dict = field(default_factory=dict)  # flag op -> (src unit, dst unit) (flag_placement.flag_units)
    env: dict = field(default_factory=dict)
    vc: dict = field(default_factory=dict)  # (unit, pipe) -> {(unit, pipe): epoch}
    queues: dict = field(default_factory=dict)  # (src slot, dst slot, event) -> [clock]
    floor: dict = field(default_factory=dict)  # unit -> the clock its last pipe_barrier ALL gave every pipe
    seen: dict = field(default_factory=dict)  # key -> {(pipe, writes): [(epoch, range, op)]}
    conflicts: list = field(default_factory=list)
    found: set = field(default_factory=set)
    flags_run: set = field(default_factory=set)  # flag ops executed

    def clock(self, p: tuple[int, Pipe]) -> dict:
        c = self.vc.get(p)
        if c is None:  # a pipe's first op still follows the unit's last pipe_barrier ALL
            c = self.vc[p] = dict(self.floor.get(p[0], {}))
        return c

    def flag_key(self, op: ascend.FlagOp) -> tuple:
        su, du = self.units.get(op, (0, 0))
        return ((su, Pipe(op.src.data)), (du, Pipe(op.dst.data)), op.event.value.data)

    def val(self, v: SSAValue):
        if v not in self.env:
            raise _Unknown(f"value {v.name_hint or v} of {v.owner}")
        r = self.env[v]
        if r is None:
            raise _Unknown("a data-dependent value")
        return r

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
            lb, ub, st = self.val(op.lb), self.val(op.ub), self.val(op.step)
            trips = max(0, -(-(ub - lb) // st))
            for n in _sampled(trips, self.period(op)):
                self.env[op.body.block.args[0]] = lb + n * st
                self.block(op.body.block)
        elif isinstance(op, scf.IfOp):
            region = op.true_region if self.val(op.cond) else op.false_region
            if region.blocks:
                self.block(region.block)
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
                c = self.clock(key[1])
                for p, e in q.pop(0).items():
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
            self.env[op.result] = _View(key, off.value.data if off is not None else 0, tuple(t.get_shape()), _contiguous(t.get_shape()), itemsize(t.element_type))
        elif isinstance(op, ascend.ViewOp):
            src = self.val(op.source)
            shape = tuple(op.result.type.get_shape())
            self.env[op.result] = _View(src.key, src.offset, shape, _contiguous(shape), src.size)
        elif isinstance(op, memref.SubviewOp):
            self.subview(op)
        elif isinstance(op, ascend.BlockIdxOp):
            self.env[op.result] = self.block_idx
        else:
            pipe = op_pipe(op, self.arch)
            if pipe is not None:
                self.access(op, (op_unit(op, pipe) if self.by_unit else 0, pipe))
                for r in op.results:
                    self.env[r] = None  # a loaded scalar: data
            else:
                self.arith(op)

    def subview(self, op: memref.SubviewOp) -> None:
        src = self.val(op.source)
        dyn = {"offsets": iter(op.offsets), "sizes": iter(op.sizes), "strides": iter(op.strides)}

        def resolve(static, kind: str) -> list[int]:
            return [self.val(next(dyn[kind])) if s == DYNAMIC_INDEX else s for s in static.get_values()]

        offs, sizes, steps = resolve(op.static_offsets, "offsets"), resolve(op.static_sizes, "sizes"), resolve(op.static_strides, "strides")
        offset = src.offset + src.size * sum(o * s for o, s in zip(offs, src.strides))
        drop = _dropped_dims(sizes, list(op.result.type.get_shape()), len(sizes))
        keep = [d for d in range(len(sizes)) if d not in drop]
        self.env[op.result] = _View(
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
            self.env[op.result] = None if a is None or b is None else _CMP[op.predicate.value.data](a, b)
            return
        f = _ARITH.get(op.name)
        if f is None:
            for r in op.results:
                self.env[r] = None
            return
        args = [self.env.get(v) for v in op.operands]
        self.env[op.results[0]] = None if any(a is None for a in args) else f(*args)

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
                            self.conflicts.append(Conflict(e_op, op, p[1], pipe[1], (p[0], pipe[0]), _buffer_name(view.key)))
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


def _buffer_name(key: object) -> str:
    """`gm buffer %z` (a kernel argument or an alloc, by its space and name), or `ub bytes of
    AIV 1` for the buffers placed in a space (compared by bytes)."""
    if isinstance(key, tuple):
        space, sub = key
        return f"{space.value} bytes" + (f" of AIV {sub}" if sub else "")
    if isinstance(key, SSAValue):
        space = space_of(key.type).value if isinstance(key.type, MemRefType) else "?"
        return f"{space} buffer %{key.name_hint}" if key.name_hint else f"a {space} buffer"
    return str(key)


def _div(a: int, b: int) -> int:
    return a // b


_ARITH = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divui": _div,
    "arith.divsi": lambda a, b: int(a / b),
    "arith.floordivsi": _div,
    "arith.ceildivsi": lambda a, b: -(-a // b),
    "arith.ceildivui": lambda a, b: -(-a // b),
    "arith.remui": lambda a, b: a % b,
    "arith.remsi": lambda a, b: int(math.fmod(a, b)),
    "arith.minsi": min,
    "arith.minui": min,
    "arith.maxsi": max,
    "arith.maxui": max,
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
    "arith.select": lambda c, a, b: a if c else b,
    "arith.index_cast": lambda a: a,
}
_CMP = {
    0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b,
    4: lambda a, b: a > b, 5: lambda a, b: a >= b, 6: lambda a, b: a < b, 7: lambda a, b: a <= b,
    8: lambda a, b: a > b, 9: lambda a, b: a >= b,
}


def conflicts(kernel: ascend.KernelOp, executed: set | None = None, arch: str | None = None) -> list[Conflict] | None:
    """Unordered cross-pipe conflicts of `kernel` (see the module docstring); None when the kernel
    is not analysed (data-dependent control flow). `executed` receives the flag ops the analysis
    ran. In a 910B mix kernel a pipe is a (unit, pipe) slot and flags connect the units
    flag_placement.flag_units gives them, as in the interpreter. `arch`: the module's `ascend.arch`
    (read from the enclosing module when None; a detached clone has none)."""
    arch = module_arch(kernel) if arch is None else arch
    by_unit = split_units(kernel, arch)
    units = _flag_units(kernel, arch) if by_unit else {}
    found: list[Conflict] = []
    for block in sorted({0, kernel.block_dim.value.data - 1}):
        run = _Run(arch, block, by_unit, units)
        for a in kernel.body.block.args:
            t = a.type
            run.env[a] = _View(a, 0, tuple(t.get_shape()), _contiguous(t.get_shape()), itemsize(t.element_type))
        try:
            run.block(kernel.body.block)
        except _Unknown:
            return None
        found += [c for c in run.conflicts if c not in found]
        if executed is not None:
            executed |= run.flags_run
    return found


# ----------------------------------------------------------------------------------------------
# placement
# ----------------------------------------------------------------------------------------------
def _ancestors(op: Operation, stop: Operation) -> list[Operation]:
    """op, its parent op, ..., up to (excluding) `stop`."""
    out = [op]
    while (p := out[-1].parent_op()) is not None and p is not stop:
        out.append(p)
    return out


def _anchor(a: Operation, b: Operation, kernel: Operation) -> tuple[Operation, Operation]:
    """The ops holding a and b in the innermost block containing both."""
    ca, cb = _ancestors(a, kernel), _ancestors(b, kernel)
    blocks_b = {o.parent_block(): o for o in cb}
    for o in ca:
        blk = o.parent_block()
        if blk in blocks_b:
            return o, blocks_b[blk]
    raise AssertionError("ops of one kernel share its body block")


def _flag_units(kernel: ascend.KernelOp, arch: str | None) -> dict:
    """flag op -> (src unit, dst unit) of a split mix kernel, by the interpreter's rule
    (flag_placement.flag_units; scalar loads/stores are not placed there either)."""
    order = list(kernel.body.walk())
    placed = []
    for o in order:
        p = None if isinstance(o, (memref.LoadOp, memref.StoreOp)) else op_pipe(o, arch)
        placed.append(None if p is None else (p.value, op_unit(o, p)))
    return flag_units(order, placed)


def _used_events(kernel: ascend.KernelOp) -> dict[tuple[str, str], set[int]]:
    used: dict[tuple[str, str], set[int]] = {}
    for op in kernel.walk():
        if isinstance(op, ascend.FlagOp):
            used.setdefault((op.src.data, op.dst.data), set()).add(op.event.value.data)
    return used


def _handoff_only(kernel: ascend.KernelOp, key: tuple[str, str, int], units: tuple[int, int], resolved: dict) -> bool:
    """Every flag op of `key` is a hand-off (a set immediately followed by its wait): no set of
    the event is ever outstanding across other ops, so another hand-off may use it too -- between
    the same units (`resolved`: flag_placement.flag_units of a split mix kernel, else empty), since one
    (src, dst, event) connects one pair of units in a kernel."""
    for op in kernel.walk():
        if not isinstance(op, ascend.FlagOp) or (op.src.data, op.dst.data, op.event.value.data) != key:
            continue
        if resolved.get(op, (0, 0)) != units:
            return False
        other = op.next_op if isinstance(op, ascend.SetFlagOp) else op.prev_op
        want = ascend.WaitFlagOp if isinstance(op, ascend.SetFlagOp) else ascend.SetFlagOp
        if not isinstance(other, want) or (other.src.data, other.dst.data, other.event.value.data) != key:
            return False
    return True


def _insert(kernel: ascend.KernelOp, c: Conflict) -> None:
    """One flag pair ordering `c` (placement rules in the module docstring)."""
    a, b = _anchor(c.first, c.second, kernel)
    blk = a.parent_block()
    ops = list(blk.ops)
    forward = ops.index(a) < ops.index(b)
    by_unit = split_units(kernel)
    resolved = _flag_units(kernel, module_arch(kernel)) if by_unit else {}
    # ids per pipe pair whatever units they connect: the interpreter (and a set's waits) match a
    # flag by (src, dst, event), so one id must not connect two pairs of units
    used = sorted(_used_events(kernel).get((c.src.value, c.dst.value), set()))
    shared = [e for e in used if forward and _handoff_only(kernel, (c.src.value, c.dst.value, e), c.units, resolved)]
    free = shared + [e for e in range(EVENTS) if e not in used]
    if not free:
        raise AscendirError(
            f"insert-sync: kernel @{kernel.sym_name.data} needs more than {EVENTS} events for "
            f"{c.src.value} -> {c.dst.value} ({c.describe()})"
        )
    ev = free[0]

    def flag(kind: type) -> Operation:
        f = kind(c.src, c.dst, ev)
        if by_unit:  # MTE2 / MTE3 exist on every unit: name them (interpreter/kernel.py)
            f.attributes[FLAG_UNITS_ATTR] = FlagUnitsAttr(UNIT_NAMES[c.units[0]], UNIT_NAMES[c.units[1]])
        return f

    if forward:  # a hand-off: the set also covers the src pipe's ops up to b
        blk.insert_op_before(flag(ascend.SetFlagOp), b)
        blk.insert_op_before(flag(ascend.WaitFlagOp), b)
        return
    blk.insert_op_after(flag(ascend.SetFlagOp), a)
    blk.insert_op_before(flag(ascend.WaitFlagOp), b)
    loop = blk.parent_op()
    while loop is not None and loop is not kernel and not isinstance(loop, scf.ForOp):
        loop = loop.parent_op()
    if not isinstance(loop, scf.ForOp):
        raise AssertionError(f"insert-sync: {c.first.name} -> {c.second.name} goes backwards outside any loop")
    while loop.parent_op() is not kernel:  # prime once for the whole kernel: no bubble per outer iteration
        loop = loop.parent_op()
    outer = loop.parent_block()
    outer.insert_op_before(flag(ascend.SetFlagOp), loop)
    outer.insert_op_after(flag(ascend.WaitFlagOp), loop)


def _key(op: ascend.FlagOp) -> tuple[str, str, int]:
    return (op.src.data, op.dst.data, op.event.value.data)


def _unflaggable(found: list[Conflict]) -> int:
    """How many of `found` no flag can order (one pipe on two units, see insert_sync)."""
    return sum(c.src == c.dst for c in found)


def remove_redundant(kernel: ascend.KernelOp) -> int:
    """Remove every event (all set_flag / wait_flag ops of one (src, dst, id), so the rest stays
    balanced) whose ops the analysis all ran and whose removal leaves it without conflict (but
    those no flag can order, no more of them than before); returns how many events."""
    ran: set = set()
    arch = module_arch(kernel)
    found = conflicts(kernel, ran)
    if found is None or len(found) != _unflaggable(found):
        return 0
    left = len(found)
    removed = 0
    flags = [o for o in kernel.walk() if isinstance(o, ascend.FlagOp)]
    unseen = {_key(o) for o in flags if o not in ran}
    for key in sorted({_key(o) for o in flags} - unseen):
        trial = kernel.clone()
        for o in [o for o in trial.walk() if isinstance(o, ascend.FlagOp) and _key(o) == key]:
            o.detach()
            o.erase()
        got = conflicts(trial, arch=arch)
        if got is not None and len(got) == _unflaggable(got) <= left:
            for o in [o for o in kernel.walk() if isinstance(o, ascend.FlagOp) and _key(o) == key]:
                o.detach()
                o.erase()
            removed += 1
    return removed


def insert_sync(kernel: ascend.KernelOp, unfixed: list[Conflict] | None = None) -> int:
    """Insert the flag pairs `kernel` needs; returns how many (0 for kernels not analysed).

    A conflict between the same pipe of two units of a mix kernel (AIV 0's MTE3 and AIV 1's
    MTE3 writing one GM range) has no flag (set_flag needs two different pipes): it is left as
    it is and appended to `unfixed` (the pass leaves a note naming it).

    Raises:
        AscendirError: more than 8 events needed for one pipe pair."""
    added = 0
    for _ in range(MAX_ROUNDS):
        found = conflicts(kernel) or []
        fixable = [c for c in found if c.src != c.dst]
        if unfixed is not None:
            unfixed += [c for c in found if c.src == c.dst and c not in unfixed]
        if not fixable:
            return added
        done: set = set()
        for c in fixable:
            if c.slots not in done:
                done.add(c.slots)
                _insert(kernel, c)
                added += 1
    raise AscendirError(f"insert-sync: kernel @{kernel.sym_name.data}: conflicts left after {MAX_ROUNDS} rounds")


def shares_bytes(kernel: ascend.KernelOp) -> bool:
    """Two buffers of one space placed (plan-memory) on overlapping bytes."""
    spans: dict = {}
    for op in kernel.walk():
        if isinstance(op, ascend.AllocOp) and "offset" in op.attributes and space_of(op.result) != MemSpace.GM:
            lo = op.attributes["offset"].value.data
            sub = subblock(op)  # AIV 1's own UB
            spans.setdefault((space_of(op.result), sub), []).append((lo, lo + math.prod(op.result.type.get_shape()) * itemsize(op.result.type.element_type)))
    for lst in spans.values():
        lst.sort()
        if any(b[0] < a[1] for a, b in zip(lst, lst[1:])):
            return True
    return False


@dataclass(frozen=True)
class InsertSync(ModulePass):
    """Flags where a pipe really waits for another (see the module docstring).

    Without trust_flags, events the analysis shows to be redundant are removed afterwards
    (`remove_redundant`), so the kernel keeps flags only where a pipe really waits.

    trust_flags: analyse only kernels without flags and kernels whose buffers share bytes, and
    remove nothing (the lowering pipeline: the templates' flags are complete, which
    tests/test_insert_sync.py checks with this same analysis, so compiling a 32-layer model does
    not re-prove it per kernel)."""

    name = "insert-sync"
    trust_flags: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_ascend_ir(op, self.name)
        for k in list(op.ops):
            if not isinstance(k, ascend.KernelOp):
                continue
            if self.trust_flags and any(isinstance(o, ascend.FlagOp) for o in k.walk()) and not shares_bytes(k):
                continue
            unfixed: list[Conflict] = []
            insert_sync(k, unfixed)
            for c in unfixed:
                session_of(ctx).note(f"{self.name}: kernel @{k.sym_name.data}: {c.describe()} touch the same bytes unordered, "
                     "and no set_flag joins one pipe to itself on another unit (left as it is)")
            if not self.trust_flags:
                remove_redundant(k)
