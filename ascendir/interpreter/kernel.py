"""A compiled `ascend.kernel`: capacity check, cost environment, body closures, and its launch.

Blocks 0..block_dim-1 run in order; block b runs on core b % cores (cores = num_aic for aic and mix
kernels, num_aiv for aiv kernels) after that core's previous block has finished (waves).
Mixed kernels (910B) give every block one AIC unit and one AIV unit with separate pipes, and a
second AIV unit when the kernel puts work on it (SUBBLOCK_ATTR = 1): a 910B group is 1 AIC + 2 AIV
(S1 aiv_per_aic, S2 KERNEL_TYPE_MIX_AIC_1_2), each AIV with its own pipes and its own UB. That an
op touches only the UB buffers of its own AIV is a rule of the ascend.kernel verifier (the IR
contradicts itself otherwise, on any chip): modules reach the interpreter verified (IR text is
verified when parsed, the driver verifies after lowering), so it is not checked again here.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from xdsl.dialects import memref
from xdsl.ir import Operation

from ascendir.dialects import ascend
from ascendir.dialects.ascend import FLAG_UNITS_ATTR, space_of, subblock
from ascendir.dtypes import packed_nbytes
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.dialects.ascend.placement import Unit, pipe_unit
from ascendir.interpreter.compiler import Compiler, KernelInfo, np_dtype, unit_of
from ascendir.interpreter.cost import LEVELS, CostEnv, bandwidth_bound_cycles, copy_path, space_unit
from ascendir.interpreter.state import ACCT_SIZE, Frame, KernelRecord
from ascendir.interpreter import memo
from ascendir.interpreter.l2 import L2Pass
from ascendir.interpreter.race import RaceChecker
from ascendir.interpreter.timeline import NPIPES, PIPES, CoreState, FlagQueues
from ascendir.interpreter.walk import OpTree, walk_ops


@functools.cache
def _is_a(cls: type, base: type) -> bool:
    """issubclass(cls, base), remembered per pair of classes: the pre-walks ask it of every op of
    the kernel, and isinstance on xDSL's op classes (ABCs) runs Python code at every call."""
    return issubclass(cls, base)


def _static_pipe(op: Operation, target: HardwareConfig) -> tuple[str, str | None, bool] | None:
    """(pipe, unit, touches GM) of a built-in tile op known before running, else None."""
    if _is_a(type(op), ascend.CopyOp):
        src, dst, pipe = copy_path(op, target)
        return pipe.value, space_unit(src if src != "gm" else dst), "gm" in (src, dst)
    if _is_a(type(op), ascend.MmadOp):
        return "M", "aic", False
    if _is_a(type(op), ascend.GatherRowsOp):
        return "MTE2", "aiv", True
    if _is_a(type(op), ascend.VectorOp):
        return "V", "aiv", False
    return None


def _check_capacity(kernel: ascend.KernelOp, target: HardwareConfig, ops: list[Operation] | None = None) -> None:
    """Every on-chip space fits; UB is counted per AIV (SUBBLOCK_ATTR), each AIV having its own.
    A placed buffer (`offset`, bytes into its space) starts at a multiple of the space's address
    alignment (target `align`: L1/UB 32 B, L0A/L0B 512 B, L0C/BT/FB 64 B; reference §2 "buffer
    address alignment", S3) and ends inside the space. Placed buffers may share bytes (plan-memory
    reuses the bytes of dead buffers; hand-written IR may reuse them behind flags): whether two of
    them are used concurrently is a race, which race.py finds by byte range at run time.

    Raises:
        AscendirError: a space the target lacks, a misaligned or negative offset, or too many bytes.
    """
    need: dict[tuple[str, int], int] = {}
    planned: dict[tuple[str, int], int] = {}  # space -> end of the highest buffer placed by plan-memory
    for op in ops if ops is not None else walk_ops(kernel):
        if _is_a(type(op), ascend.AllocOp):
            t = op.result.type
            space = space_of(t).value
            if space == "gm":
                continue
            key = (space, subblock(op))
            nbytes = packed_nbytes(np_dtype(t), math.prod(t.get_shape()))
            align = target.align.get(space, 1)
            if "offset" in op.attributes:  # placed by plan-memory: buffers may share bytes
                off = op.attributes["offset"].value.data
                if off < 0 or off % align:
                    desc = "x".join(map(str, t.get_shape())) + f"x{t.element_type}"
                    raise AscendirError(
                        f"kernel @{kernel.sym_name.data}: ascend.alloc of {space} buffer {desc} at offset = {off}: "
                        + ("negative offset" if off < 0 else
                           f"{space} addresses on {target.name} are aligned to {align} B (offset % {align} = {off % align})")
                    )
                planned[key] = max(planned.get(key, 0), off + nbytes)
            need[key] = need.get(key, 0) + -(-nbytes // align) * align
    need.update(planned)
    for (space, sub), n in need.items():
        if space not in target.buffers:
            raise AscendirError(f"kernel @{kernel.sym_name.data}: {target.name} has no {space} buffer")
        if n > target.buffers[space]:
            if (space, sub) in planned:
                how = "the end of the highest buffer plan-memory placed"
            else:
                _raise_plan_error(kernel, target)
                how = (f"summed over every ascend.alloc, aligned to {target.align.get(space, 1)} B; plan-memory "
                       "(ascendir-opt -p plan-memory) would let buffers with disjoint lifetimes share bytes")
            whose = f" of AIV {sub}" if sub else ""
            raise AscendirError(
                f"kernel @{kernel.sym_name.data}: {space} buffers{whose} need {n} bytes but {target.name} has "
                f"{target.buffers[space]} bytes of {space} per core ({how})"
            )


def _raise_plan_error(kernel: ascend.KernelOp, target: HardwareConfig) -> None:
    """For unplanned buffers that overflow a space: raise plan-memory's error when its placement
    (buffers with disjoint lifetimes sharing bytes) cannot fit them either: it names the buffer,
    the bytes needed vs available and the largest tile that fits. Returns when plan-memory would
    fit them (the caller then says the sum overflows)."""
    from ascendir.transforms.plan_memory import plan_kernel

    try:
        plan_kernel(kernel.clone(), target)
    except AscendirError as e:
        raise AscendirError(str(e).removeprefix("plan-memory: ")) from None


def _check_units(kernel: ascend.KernelOp, order: list[Operation], statics: dict, target: HardwareConfig) -> None:
    """On a split chip (910B) an aic kernel runs on cube cores only (L1/L0/BT/FB, cube, MTE1/FIX)
    and an aiv kernel on vector cores only (UB, vector unit); a mix kernel has both.

    Raises:
        AscendirError: a buffer or op of the other unit, naming the kernel and the op.
    """
    core = kernel.core_type.data
    for o in order:
        if _is_a(type(o), ascend.AllocOp):
            space = space_of(o.result.type).value
            unit = None if space == "gm" else space_unit(space)
            what = f"a {space} buffer"
        else:
            unit = statics[o][1] if statics.get(o) else None
            what = o.name
        if unit is not None and unit != core:
            raise AscendirError(
                f"kernel @{kernel.sym_name.data} ({core}): {what} needs an {unit} core; {target.name} "
                f"({target.arch}) has separate cube (aic) and vector (aiv) cores (use core_type = #ascend.core_type<mix>)"
            )


# Optional attribute of set_flag / wait_flag in a 910B mix kernel naming the units it connects,
# "aic->aiv" / "aiv->aic" / "aic->aic" / "aiv->aiv", when the pipes alone (MTE2, MTE3, S exist on
# both) leave it ambiguous. Without it the nearest op on the pipe decides (see flag_units).
# (ascend.FLAG_UNITS_ATTR; the flag verifier checks its form)
_UNIT_INDEX = {"aic": 0, "aiv": 1, "aiv0": 1, "aiv1": 2}
UNIT_NAMES = ("aic", "aiv", "aiv1")  # unit index -> its name in FLAG_UNITS_ATTR


def flag_units(order: list[Operation], placed: list[tuple[str, int] | None]) -> dict[Operation, tuple[int, int]]:
    """(src unit, dst unit) of every flag op of a mixed kernel (units: 0 = AIC, 1 = AIV 0, 2 = AIV 1).

    `order` is the kernel body in walk (program) order, `placed[i]` the (pipe, unit) of the tile
    op order[i] or None. FLAG_UNITS_ATTR decides when present. Otherwise MTE2/MTE3/S exist on
    both units: take the unit of the nearest op on that pipe (before a set, after a wait), else
    the partner pipe's unit, else AIC. A set and its waits must agree: the first resolution of a
    (src pipe, dst pipe, event) wins for every flag op of that triple (so one triple connects one
    pair of units in a kernel). insert-sync resolves flags with this same rule."""
    res: dict[Operation, tuple[int, int]] = {}

    def fixed(p: str) -> int | None:
        u = pipe_unit(p)  # placement: M / MTE1 / FIX the AIC's, V an AIV's, the rest both
        return None if u is None else 0 if u is Unit.AIC else 1

    def nearest(i: int, p: str, step: int) -> int | None:
        j = i + step
        while 0 <= j < len(order):
            if placed[j] is not None and placed[j][0] == p:
                return placed[j][1]
            j += step
        return None

    by_name: dict[tuple[str, str, int], tuple[int, int]] = {}
    for i, o in enumerate(order):
        if not _is_a(type(o), ascend.FlagOp):
            continue
        s, d = o.src.data, o.dst.data
        hint = o.attributes.get(FLAG_UNITS_ATTR)
        if hint is not None:  # explicit "aic->aiv" etc. (cross-unit hand-offs of mix kernels)
            su, du = (_UNIT_INDEX[u] for u in hint.data.split("->"))
            res[o] = by_name.setdefault((s, d, o.event.value.data), (su, du))
            continue
        su = fixed(s)
        if su is None:
            su = nearest(i, s, -1)
            su = nearest(i, s, +1) if su is None else su
        du = fixed(d)
        if du is None:
            du = nearest(i, d, +1)
            du = nearest(i, d, -1) if du is None else du
        if su is None:
            su = du if du is not None else 0
        if du is None:
            du = su
        res[o] = by_name.setdefault((s, d, o.event.value.data), (su, du))
    return res


def _body_key(op: ascend.KernelOp, ops: list[Operation] | None = None) -> tuple:
    """The kernel without its name as a tuple (equal for kernels whose bodies print the same):
    per op in walk order its name, operands (numbered values), result types, attributes,
    properties and region shapes. About 30x cheaper than printing the kernel. `ops`: walk_ops(op)
    when the caller has it."""
    ids: dict = {}

    def vid(v) -> int:
        return ids.setdefault(v, len(ids))

    out = []
    for o in ops if ops is not None else walk_ops(op):
        named = o is op
        attrs = tuple(sorted((k, v) for k, v in o.attributes.items() if not (named and k == "sym_name")))
        props = tuple(sorted((k, v) for k, v in o.properties.items() if not (named and k == "sym_name")))
        regions = tuple(tuple((tuple(vid(a) for a in b.args), tuple(a.type for a in b.args), len(b.ops)) for b in r.blocks) for r in o.regions)
        out.append((o.name, tuple(vid(v) for v in o.operands), tuple(vid(r) for r in o.results), tuple(r.type for r in o.results), attrs, props, regions))
    return tuple(out)


def _memo_id(m, op: ascend.KernelOp, ops: list[Operation]) -> int:
    """An id of the kernel body, equal for the kernels of module program `m` whose `_body_key`s
    are equal. The op names in program order tell most kernels apart; the full key (the costly
    part, a tenth of compiling a matmul kernel) is built only for kernels that share their names
    with an earlier one (`m.body_ids`: names -> [kernel op, its ops, its key or None, id])."""
    group = m.body_ids.setdefault(tuple(o.name for o in ops[1:]), [])
    if not group:
        group.append([op, ops, None, m.nbodies])
    else:
        key = _body_key(op, ops)
        for entry in group:
            if entry[2] is None:
                entry[2] = _body_key(entry[0], entry[1])
            if entry[2] == key:
                return entry[3]
        group.append([op, ops, key, m.nbodies])
    m.nbodies += 1
    return m.nbodies - 1


class KernelProgram:
    """One compiled `ascend.kernel`."""

    def __init__(self, m, op: ascend.KernelOp):
        t = m.target
        self.name = op.sym_name.data
        self.block_dim = op.block_dim.value.data
        self.core_type = op.core_type.data
        self.m = m
        tree = OpTree(op)
        ops = tree.ops  # the kernel op, then its body in program order
        _check_capacity(op, t, ops)
        self.ncores = t.cores(self.core_type)
        # pre-walk: static pipes/units of tile ops, GM streams, flag unit resolution
        order = ops[1:]
        self.nunits = 1
        second = any(subblock(o) for o in order) or any(
            _is_a(type(o), ascend.FlagOp) and FLAG_UNITS_ATTR in o.attributes and "aiv1" in o.attributes[FLAG_UNITS_ATTR].data
            for o in order
        )
        if second and not t.split:
            # a coupled core (910A, 310P) has one UB and one vector unit: AIV 1's buffers would
            # get a UB of their own (capacity is counted per subblock) that the chip lacks
            raise AscendirError(f"kernel @{self.name}: work on AIV 1 (subblock = 1) but {t.name} ({t.arch}) has no "
                                "separate vector cores: cube and vector share one core and one UB")
        if self.core_type == "mix" and t.split:
            if second and t.aiv_per_aic < 2:
                raise AscendirError(f"kernel @{self.name}: work on AIV 1 but {t.name} has {t.aiv_per_aic} AIV per AIC")
            self.nunits = 3 if second else 2
        units_ = ("aic", "aiv", "aiv1")[: self.nunits]
        self.labels = list(PIPES) if self.nunits == 1 else [f"{u}.{p}" for u in units_ for p in PIPES]

        statics = {o: _static_pipe(o, t) for o in order}
        if t.split and self.core_type in ("aic", "aiv"):
            _check_units(op, order, statics, t)
        self.gm_reads = t.memory.l2_model == "tile" and any(
            _is_a(type(o), ascend.CopyOp) and copy_path(o, t)[0] == "gm" for o in order
        )
        groups = min(self.block_dim, self.ncores)  # a mixed kernel's AIC + AIVs share one slice
        gm_share = t.hbm_bytes_per_cycle / groups
        env = CostEnv(t, gm_share)
        units = self._flag_units(order, statics)
        self.frame = Frame()
        info = KernelInfo(self.name, self.nunits, env, units, {}, float(t.startup["scalar_alu"]), m.timing_only, tree=tree)
        comp = Compiler(m, self.frame, info)
        block = op.body.block
        self.arg_slots = [comp.slot(a) for a in block.args]
        self.arg_types = list(block.arg_types)
        self.body = comp.block(block)
        self.nflags = max(1, len(info.flag_keys))
        self.env = env
        # memo key (memo.py): an id of the kernel without its name. None when launches with the same
        # text and argument aliasing may run differently: fresh GM roots of its own, or scalars
        # read from data (memref.load) steering the control flow in numerics mode
        gm_alloc = any(_is_a(type(o), ascend.AllocOp) and space_of(o.result.type).value == "gm" for o in order)
        data_control = not m.timing_only and any(_is_a(type(o), memref.LoadOp) for o in order)
        self.nchip = sum(_is_a(type(o), ascend.AllocOp) and space_of(o.result.type).value != "gm" for o in order)
        self.memo_text = None if gm_alloc or data_control else _memo_id(m, op, ops)

    def _flag_units(self, order: list[Operation], statics: dict) -> dict[Operation, tuple[int, int]]:
        """(src unit, dst unit) of every flag op (`flag_units`; all 0 on a single unit)."""
        if self.nunits == 1:
            return {o: (0, 0) for o in order if _is_a(type(o), ascend.FlagOp)}
        placed = [(statics[o][0], unit_of(statics[o][0], statics[o][1], 2, subblock(o))) if statics.get(o) else None for o in order]
        return flag_units(order, placed)

    def run(self, args: list[np.ndarray], tags: list | None = None) -> KernelRecord:
        """Run every block; `tags` are the GM address tags of `args` (l2.py), None if unknown."""
        F, R = self.frame, self.frame.R
        tags = tags if tags is not None else [None] * len(args)
        for i, (s, a, ty, tag) in enumerate(zip(self.arg_slots, args, self.arg_types, tags)):
            if tuple(a.shape) != tuple(ty.get_shape()):
                raise AscendirError(f"ascend.launch @{self.name}: argument {i} has shape {a.shape}, kernel expects {tuple(ty.get_shape())}")
            R[s] = a
            F.A[s] = tag
        F.t0 = self.m.clock
        F.l2 = self.m.l2
        if F.l2 is not None:
            F.l2.commit()  # accesses so far belong to earlier kernels (l2.py)
        F.flags = FlagQueues(self.nflags)
        F.extrap = self.m.extrapolate
        key = None
        if self.memo_text is not None and self.m.memo is not None and not self.m.trace and all(t is not None for t in tags):
            key = (self.memo_text, memo.pattern(tags))
            launches = self.m.memo.setdefault(key, memo.Launches([]))
            for hit in reversed(launches.variants):  # only timing-only runs store any
                if self._reuse(hit, tags):
                    self.m.memo_hits += 1
                    return self._finish(memo.restore_cores(hit.cores), F, list(hit.acct), hit.skipped)
        if self.gm_reads and key is not None and launches.misses is not None:
            F.l2p = L2Pass.settled(self.m.l2.window, launches.misses)
        elif self.gm_reads:
            # recording pass: who reads which GM tile when (l2.py); no numerics, no trace
            F.l2p = L2Pass(self.m.l2.window)
            F.sem_on = False
            F.trace = F.flows = None
            # from time 0: the pass reads no chip state, and absolute times would round ties
            # differently per launch, so identical launches could get different designations
            F.t0 = 0.0
            try:
                self._blocks(tracing=False)
            finally:
                F.sem_on = True
                F.t0 = self.m.clock
            F.l2p.settle()
            if key is not None:
                launches.misses = F.l2p.misses
        tracing = self.m.trace
        race = self.m.check_races and not (key is not None and launches.race_free)
        if race:  # the final pass checks races (race.py); once per memo key: same ops, same layout
            F.rc = RaceChecker(self.name, self.labels, self.nchip)
            F.rcq = FlagQueues(self.nflags)
        F.trace = [] if tracing else None
        F.flows = [] if tracing else None
        F.flowq = FlagQueues(self.nflags) if tracing else None
        l2 = self.m.l2
        store = key is not None and self.m.timing_only
        if store:
            F.launchlog = []
            F.wfirst = {}
            if F.l2p is not None and self.gm_reads:
                F.l2p.checks = []
            h0, m0 = (l2.hits, l2.misses) if l2 is not None else (0, 0)
        try:
            cores = self._blocks(tracing)
        finally:
            log, F.launchlog = F.launchlog, None
            wfirst, F.wfirst = F.wfirst, None
            F.rc = F.rcq = F.hold = None
            F.slow = False
        if key is not None and race:
            launches.race_free = True
        if store:
            roots = {}
            for i, t in enumerate(tags):
                roots.setdefault(t[0], i)
            checks = F.l2p.checks if (F.l2p is not None and self.gm_reads) else []
            launches.add(memo.Memo(
                memo.snapshot_cores(cores), list(F.acct), F.skipped, checks,
                [(k, t, w) for k, (t, w) in wfirst.items()], log,
                (l2.hits - h0) if l2 is not None else 0, (l2.misses - m0) if l2 is not None else 0, roots, F.t0,
            ))
            if F.l2p is not None:
                F.l2p.checks = None
        return self._finish(cores, F)

    def _reuse(self, hit: memo.Memo, tags: list) -> bool:
        """Apply a stored launch when every L2 check gives the same outcome (memo.py)."""
        l2, t0 = self.m.l2, self.m.clock
        if l2 is None:
            return True
        old = hit.t0
        for k, t, h in hit.checks:
            if l2.resident_before(hit.remap(k, tags, l2), t0 + (t - old), t0) != h:
                return False
        for k, t, w in hit.wchecks:
            if l2.dirty_at(hit.remap(k, tags, l2), t0 + (t - old)) != w:
                return False
        for k, t, rd in hit.accesses:
            if isinstance(k, np.ndarray):
                k, t = hit.remap_many(k, tags, l2), t0 + (t - old)
                l2.write_many(k[rd], t[rd])
                l2.store_many(k[~rd], t[~rd])
            elif rd:
                l2.write(hit.remap(k, tags, l2), t0 + (t - old))
            else:
                l2.store(hit.remap(k, tags, l2), t0 + (t - old))
        l2.hits += hit.hits
        l2.misses += hit.misses
        return True

    def _blocks(self, tracing: bool) -> list[CoreState]:
        """Run blocks 0..block_dim-1 in order on fresh cores (waves on cores = b % ncores)."""
        F = self.frame
        nslots = NPIPES * self.nunits
        cores = [CoreState(i, nslots) for i in range(min(self.block_dim, self.ncores))]
        F.acct = [0.0] * ACCT_SIZE
        F.skipped = 0
        body = self.body
        for memo in F.memos:  # stored loop executions are per pass: a launch's report depends on it alone
            memo.table.clear()
        for b in range(self.block_dim):
            core = cores[b % len(cores)]
            core.start_block()
            F.core = core
            F.block = b
            F.flags.reset()
            F.hold = None
            F.slow = F.rc is not None
            if F.rc is not None:
                F.rc.reset()
                F.rcq.reset()
            if tracing:
                F.flowq.reset()
            for f in body:
                f()
            if F.hold is not None:  # a pipe still waits for a set that never came (holds.py)
                err = F.hold.deadlock(b)
                F.hold, F.slow = None, False
                raise err
        return cores

    def _finish(self, cores, F, acct: list[float] | None = None, skipped: int | None = None) -> KernelRecord:
        if acct is not None:
            F.acct, F.skipped = acct, skipped
        acct = F.acct
        rec = KernelRecord(
            name=self.name,
            block_dim=self.block_dim,
            core_type=self.core_type,
            pipe_labels=self.labels,
            cores=cores,
            acct=F.acct,
            launch_cycles=float(self.m.target.kernel_launch_cycles),
            gm_share=self.env.gm_share,
            bandwidth_floor=bandwidth_bound_cycles(
                acct[LEVELS.index("gm_read")], acct[LEVELS.index("gm_write")], self.m.target, acct[LEVELS.index("l2_hit")],
                acct[LEVELS.index("l2_write")],
            ),
            events=F.trace or [],
            flows=F.flows or [],
            extrapolated_iterations=F.skipped,
        )
        self.m.clock += rec.cycles
        return rec
