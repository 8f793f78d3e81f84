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

import numpy as np
from xdsl.dialects import memref
from xdsl.ir import Operation

from ascendir.dialects import ascend
from ascendir.dialects.ascend import FLAG_UNITS_ATTR, subblock
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.dialects.ascend.flag_placement import flag_units
from ascendir.interpreter.exec import batch_run, deferred, registry
from ascendir.interpreter.exec.batch_groups import MAX_BATCH
from ascendir.interpreter.exec.tape import Tape
from ascendir.interpreter.exec.census import Census
from ascendir.interpreter.exec.common import space_name
from ascendir.interpreter.exec.compiler import Compiler, KernelInfo, unit_of, zero_view
from ascendir.costmodel import LEVELS, CostEnv, bandwidth_bound_cycles, builtin_costs, copy_path, quantise, space_unit
from ascendir.interpreter.state import ACCT_SIZE, Frame, KernelRecord
from ascendir.interpreter.accel import memo
from ascendir.interpreter.timing.l2 import SHIFT, L2Pass
from ascendir.interpreter.check.race import RaceChecker
from ascendir.interpreter.check.uniform import uniform_blocks
from ascendir.interpreter.timing.timeline import NPIPES, PIPE_INDEX, PIPES, CoreState, FlagQueues
from ascendir.interpreter.check.capacity import check_capacity, check_units
from ascendir.interpreter.exec.walk import OpTree, _is_a, walk_ops
from ascendir.interpreter.exec.scalar_units import scalar_units


def _copy_pipe(path: tuple) -> tuple[str, str | None, bool]:
    """(pipe, unit, touches GM) of a copy of copy_path `path`, known before running as a built-in
    tile op's (`_type_pipe`): the static pipe of the op."""
    src, dst, pipe = path
    return pipe.value, space_unit(src if src != "gm" else dst), "gm" in (src, dst)


@functools.cache
def _type_pipe(t: type) -> tuple[str, str, bool] | str | None:
    """(pipe, unit, touches GM) of the ops of class `t` when the class decides it (their static
    pipe), "copy" for copies (their path decides: `_copy_pipe`), None for ops that are no
    built-in tile op. (Per class: the pre-walk asks it of every op of the kernel.)"""
    if _is_a(t, ascend.CopyOp):
        return "copy"
    if _is_a(t, ascend.MmadOp):
        return "M", "aic", False
    if _is_a(t, ascend.GatherRowsOp):
        return "MTE2", "aiv", True
    if _is_a(t, ascend.VectorOp):
        return "V", "aiv", False
    return None


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


def _memo_id(ids: memo.LaunchMemo, op: ascend.KernelOp, ops: list[Operation]) -> int:
    """An id of the kernel body, equal for the kernels given ids by `ids` (the launch memo of a
    module program, maybe shared with other programs) whose `_body_key`s are equal. The op names
    in program order tell most kernels apart; the full key (the costly part, a tenth of compiling
    a matmul kernel) is built only for kernels that share their names with an earlier one
    (`ids.body_ids`: names -> [kernel op, its ops, its key or None, id])."""
    group = ids.body_ids.setdefault(tuple(o.name for o in ops[1:]), [])
    if not group:
        group.append([op, ops, None, ids.nbodies])
    else:
        key = _body_key(op, ops)
        for entry in group:
            if entry[2] is None:
                entry[2] = _body_key(entry[0], entry[1])
            if entry[2] == key:
                return entry[3]
        group.append([op, ops, key, ids.nbodies])
    ids.nbodies += 1
    return ids.nbodies - 1


def _through(name: str) -> property:
    """An attribute of a view read from and written to its module program `_m`."""
    return property(lambda self: getattr(self._m, name), lambda self, value: setattr(self._m, name, value))


class _TimingOnly:
    """Module program `m` seen as timing-only: what the timing-only twins of its kernels compile
    against and launch on (one per module program, `timing_view`). The chip clock and the L2 are
    `m`'s (the twin's launches are the numerics run's timing); the launch memo is its own
    (`LaunchMemo.timing` of `m`'s: its entries are timing-only launches, keyed by the numerics
    kernels' body ids, which the twins take over), bound like a timing-only run's; no fp32 GM
    copies; no race check (the data walk checks: it runs every op, `KernelProgram._data_walk`)."""

    timing_only = True
    shadows = None
    check_races = False

    def __init__(self, m):
        self._m = m
        if m.memo_ids.timing is None:  # (shared by the runs sharing `m`'s memo: generate's steps)
            m.memo_ids.timing = memo.LaunchMemo()
        self.memo_ids = m.memo_ids.timing
        self.memo_ids.bind((m.target, True, m.trace, False, m.accel))
        self.memo = self.memo_ids.entries if m.accel.launch_memo else None

    def __getattr__(self, name: str):
        return getattr(self._m, name)

    # written through to `m`: the twins advance the module's clock and count its memo hits
    clock = _through("clock")
    memo_hits = _through("memo_hits")


def timing_view(m) -> _TimingOnly:
    """The timing-only view of module program `m` its kernels' twins share (made on first use)."""
    v = m.__dict__.get("_timing_view")
    if v is None:
        v = m.__dict__["_timing_view"] = _TimingOnly(m)
    return v


class KernelProgram:
    """One compiled `ascend.kernel`."""

    def __init__(self, m, op: ascend.KernelOp, like: KernelProgram | None = None, tree: OpTree | None = None):
        """Compile `op` for module program `m`. `like`: the numerics program of `op` whose
        timing-only twin this is (`_twin`): its pre-walk facts (op tree, units, flag and scalar
        units, memo id) hold for the twin too and are taken over rather than computed again.
        `tree`: OpTree(op) when the caller built it (chip.py), else it is built here.

        Raises: AscendirError (capacity, units, ops the interpreter cannot run)."""
        t = m.target
        self.name = op.sym_name.data
        self.block_dim = op.block_dim.value.data
        self.core_type = op.core_type.data
        self.m = m
        self.op = op
        self.twin: KernelProgram | None = None  # timing-only twin of a numerics kernel (`_split`)
        self.ncores = t.cores(self.core_type)
        if like is not None:
            for name in ("nunits", "labels", "gm_reads", "env", "_facts", "nchip", "memo_text"):
                setattr(self, name, getattr(like, name))
        else:
            self._prewalk(m, op, tree if tree is not None else OpTree(op))
        ends, tree, scalar_units_, costs, paths, op_units = self._facts
        self.arg_types = list(op.body.block.arg_types)
        self.data: tuple | None = None  # the data walk's (frame, argument slots, body, flag count), compiled on first use
        self.batched = False  # the data walk records its tile ops, then computes them batched (`_data_compile`)
        # a numerics launch whose path cannot depend on data nor mint GM roots (the cases the memo
        # keys) runs two walks: its timing-only twin gives the record (timing, L2, race check,
        # trace, launch memo: a timing-only launch's), the data walk the outputs (`_split`); in a
        # cluster one walk does both, its L2 recording pass run by the twin (`_record`).
        # Accel.none() keeps the single walk doing both: the reference the split is tested against
        self.two_walks = not m.timing_only and self.memo_text is not None and m.accel.steady
        self.frame = Frame()
        self._info = KernelInfo(self.name, self.nunits, self.env, ends, {}, quantise(t.startup["scalar_alu"]), m.timing_only,
                                tree=tree, scalar_units=scalar_units_, op_units=op_units, costs=costs, paths=paths)
        self._comp = Compiler(m, self.frame, self._info)
        self.arg_slots = [self._comp.slot(a) for a in op.body.block.args]
        self.body: list | None = None
        self.nflags = 1
        if self.two_walks:  # a split launch runs the twin's body and the data walk's, never this one
            self._twin()  # (compiled now: what cannot run is an error of the compile, as without the split)
        else:
            self._compile()

    def close(self) -> None:
        """Break this program's reference cycles (chip.py ModuleProg.close): its frames' loop
        memos hold the frames, its shared cost functions their CostEnv (costmodel.shared_cost);
        its twin's too."""
        for F in (self.frame, self.data[0] if self.data is not None else None):
            if F is not None:
                F.memos.clear()
        self.env.functions.clear()
        if self.twin is not None:
            self.twin.close()

    def _compile(self) -> None:
        """Compile the body (`body`, `nflags`): at construction, or on the first single-walk launch
        of a kernel that would split (`two_walks`) but runs in a cluster."""
        if self.body is None:
            self.body = self._comp.block(self.op.body.block)
            self.nflags = max(1, len(self._info.flag_keys))

    def _prewalk(self, m, op: ascend.KernelOp, tree: OpTree) -> None:
        """The facts compiling `op` needs before its body: capacity and unit checks, units and
        pipe labels, whether it reads GM, its cost environment, flag and scalar units, the chip
        buffers it allocates, its launch memo id (None when not memoised). `tree`: OpTree(op)."""
        t = m.target
        ops = tree.ops  # the kernel op, then its body in program order
        check_capacity(op, t, ops)
        # pre-walk: static pipes/units of tile ops, GM streams, flag unit resolution
        order = ops[1:]
        self.nunits = 1
        second = any(subblock(o) for o in order) or any(
            _is_a(type(o), ascend.FlagOp) and FLAG_UNITS_ATTR in o.attributes and "aiv1" in o.attributes[FLAG_UNITS_ATTR].units
            for o in order
        )
        if second and not t.arch.split_cores:
            # a coupled core (910A, 310P) has one UB and one vector unit: AIV 1's buffers would
            # get a UB of their own (capacity is counted per subblock) that the chip lacks
            raise AscendirError(f"kernel @{self.name}: work on AIV 1 (subblock = 1) but {t.name} ({t.arch}) has no "
                                "separate vector cores: cube and vector share one core and one UB")
        if self.core_type == "mix" and t.arch.split_cores:
            if second and t.aiv_per_aic < 2:
                raise AscendirError(f"kernel @{self.name}: work on AIV 1 but {t.name} has {t.aiv_per_aic} AIV per AIC")
            self.nunits = 3 if second else 2
        units_ = ("aic", "aiv", "aiv1")[: self.nunits]
        self.labels = list(PIPES) if self.nunits == 1 else [f"{u}.{p}" for u in units_ for p in PIPES]

        # one pass for the per-op facts below (each its own pass over a 3,700-op kernel added up);
        # `statics` in `order`'s order (the passes below read it along `order`: no op hashed)
        paths: dict[Operation, tuple] = {}
        statics: list[tuple | None] = []
        gm_alloc = data_control = False
        self.nchip = 0
        loads = not m.timing_only  # (memref.load reads data in numerics runs only)
        for o in order:
            ty = type(o)
            fixed = _type_pipe(ty)
            if fixed == "copy":
                path = paths[o] = copy_path(o, t)
                fixed = _copy_pipe(path)
            statics.append(fixed)
            if fixed is None:
                if _is_a(ty, ascend.AllocOp):
                    if space_name(o.result.type) == "gm":
                        gm_alloc = True
                    else:
                        self.nchip += 1
                elif _is_a(ty, ascend.GetValueOp) or loads and _is_a(ty, memref.LoadOp):
                    data_control = True
        if t.arch.split_cores and self.core_type in ("aic", "aiv"):
            check_units(op, order, dict(zip(order, statics)), t)
        self.gm_reads = t.memory.l2_model == "tile" and any(p[0] == "gm" for p in paths.values())
        groups = min(self.block_dim, self.ncores)  # a mixed kernel's AIC + AIVs share one slice
        self.env = CostEnv(t, t.hbm_bytes_per_cycle / groups)
        units = self._flag_units(order, statics)
        # what the kernel's compiles share (`_data_compile`, the twin's): the tile ops' cost functions too
        scalar_units_, op_units = self._scalar_units(order, statics, units, tree)
        # each flag's (source slot, destination slot, event), read once for both compiles (KernelInfo.flag_ends)
        ends = {}
        for o, (su, du) in units.items():
            p = o.properties  # (what o.src, o.dst and o.event read, each through a Python descriptor call)
            ends[o] = (su * NPIPES + PIPE_INDEX[p["src"].data], du * NPIPES + PIPE_INDEX[p["dst"].data], p["event"].value.data)
        self._facts = (ends, tree, scalar_units_, {}, paths, op_units)
        # memo key (memo.py): an id of the kernel without its name. None when launches with the same
        # text and argument aliasing may run differently: fresh GM roots of its own (`gm_alloc`),
        # or scalars read from data steering the control flow (`data_control`: memref.load in
        # numerics mode; ascend.get_value in timing-only runs too, a routed group list)
        self.memo_text = None if gm_alloc or data_control else _memo_id(m.memo_ids, op, ops)

    def _scalar_units(self, order: list[Operation], statics: list, flags: dict, tree: OpTree) -> tuple[dict, dict]:
        """(The units running each scalar op of a mix kernel (exec/scalar_units.py), from the
        units of the ops whose unit is known: tile ops by pipe and subblock, flags both ends,
        scalar loads / stores of on-chip buffers the owner of the space; any other `ascend` op
        without results (a comm op, a barrier, a registered op of run-time pipe) every unit;
        the flags' and static-pipe tile ops' units as bit masks, KernelInfo.op_units). Both
        empty on a single unit. `statics`: the static pipe of each op of `order` (`_type_pipe`,
        `_copy_pipe`; None: none), in order. `tree`:
        the kernel's OpTree (its ops: the kernel op, then `order`)."""
        if self.nunits == 1:
            return {}, {}
        every = (1 << self.nunits) - 1
        anchored: dict[Operation, int] = {}
        fixed: dict[Operation, int] = {}  # the flags' and static tile ops' masks (KernelInfo.op_units)
        for o, static in zip(order, statics):
            if _is_a(type(o), ascend.FlagOp):
                su, du = flags[o]
                anchored[o] = fixed[o] = 1 << su | 1 << du
            elif static:
                pipe, unit, _ = static
                anchored[o] = fixed[o] = 1 << unit_of(pipe, unit, self.nunits, subblock(o))
            elif _is_a(type(o), (memref.LoadOp, memref.StoreOp)):
                space = space_name(o.memref.type)
                if space != "gm":
                    root = o.memref.owner  # the buffer's alloc (through its views): its AIV
                    while isinstance(root, Operation) and root.operands and not _is_a(type(root), ascend.AllocOp):
                        root = root.operands[0].owner
                    aiv = 1 + subblock(root) if isinstance(root, Operation) else 1
                    anchored[o] = 1 if space_unit(space) == "aic" else 1 << min(aiv, self.nunits - 1)
            elif o.name.startswith("ascend.") and not o.results:
                anchored[o] = every
        return scalar_units(order, anchored, tree), fixed

    def _flag_units(self, order: list[Operation], statics: list) -> dict[Operation, tuple[int, int]]:
        """(src unit, dst unit) of every flag op (`flag_units`; all 0 on a single unit). `statics`:
        the static pipe of each op of `order` (None: none), in order."""
        if self.nunits == 1:
            return {o: (0, 0) for o in order if _is_a(type(o), ascend.FlagOp)}
        placed = [(s[0], unit_of(s[0], s[1], 2, subblock(o))) if s else None for o, s in zip(order, statics)]
        return flag_units(order, placed)

    def run(self, args: list[np.ndarray], tags: list | None = None) -> KernelRecord:
        """Run every block; `tags` are the GM address tags of `args` (l2.py), None if unknown."""
        F, R = self.frame, self.frame.values
        tags = tags if tags is not None else [None] * len(args)
        for i, (s, a, ty, tag) in enumerate(zip(self.arg_slots, args, self.arg_types, tags)):
            if tuple(a.shape) != tuple(ty.get_shape()):
                raise AscendirError(f"ascend.launch @{self.name}: argument {i} has shape {a.shape}, kernel expects {tuple(ty.get_shape())}")
            R[s] = a
            F.gm_tags[s] = tag
        if self.two_walks and self.m.comm is None:  # (in a cluster, devices write each other's GM mid-launch)
            return self._split(args, tags)
        self._compile()
        F.kernel_start = self.m.clock
        F.l2 = self.m.l2
        # the fp32 copies of GM buffers (exec/wide.py) live for one launch; in a cluster another
        # device may write this device's GM while the launch runs, so none are kept there
        F.shadows = self.m.shadows if self.m.comm is None else None
        if F.shadows is not None:
            F.shadows.clear()
        if F.l2 is not None:
            F.l2.commit()  # accesses so far belong to earlier kernels (l2.py)
        F.flags = FlagQueues(self.nflags)
        F.may_extrapolate = self.m.extrapolate
        key = None
        if self.memo_text is not None and self.m.memo is not None and all(t is not None for t in tags):
            key = (self.memo_text, memo.pattern(tags))
            launches = self.m.memo.setdefault(key, memo.Launches([]))
            for hit in reversed(launches.stored()):  # only timing-only runs store any
                if (hit.owner is None or hit.owner is self.m) and self._reuse(hit, tags):
                    self.m.memo_hits += 1
                    return self._finish(memo.restore_cores(hit.cores), F, list(hit.acct), hit.skipped, hit.trace)
        if self.gm_reads and key is not None and launches.misses is not None:
            F.l2_pass = L2Pass.settled(self.m.l2.window, launches.misses)
        elif self.gm_reads and self.two_walks:
            F.l2_pass = self._record(args, tags)
            if key is not None:
                launches.misses = F.l2_pass.misses
        elif self.gm_reads:
            # recording pass: who reads which GM tile when (l2.py); no numerics, no trace
            F.l2_pass = L2Pass(self.m.l2.window)
            F.numerics_on = False
            F.trace = F.flows = None
            # from time 0: the pass reads no chip state, and absolute times would round ties
            # differently per launch, so identical launches could get different designations
            F.kernel_start = 0.0
            try:
                self._blocks(tracing=False)
            finally:
                F.numerics_on = True
                F.kernel_start = self.m.clock
            F.l2_pass.settle(self.m.l2)
            if key is not None:
                launches.misses = F.l2_pass.misses
        tracing = self.m.trace
        race = self.m.check_races and not (key is not None and launches.race_free)
        if race:  # the final pass checks races (race.py); once per memo key: same ops, same layout
            F.races = RaceChecker(self.name, self.labels, self.nchip, self.nflags)
        F.trace = [] if tracing else None
        F.flows = [] if tracing else None
        F.flow_queues = FlagQueues(self.nflags) if tracing else None
        l2 = self.m.l2
        store = key is not None and self.m.timing_only
        if store:
            F.launch_gm_log = []
            F.first_writes = {}
            if F.l2_pass is not None and self.gm_reads:
                F.l2_pass.checks = []
            h0, m0 = (l2.hits, l2.misses) if l2 is not None else (0, 0)
        try:
            cores = self._blocks(tracing)
        finally:
            log, F.launch_gm_log = F.launch_gm_log, None
            wfirst, F.first_writes = F.first_writes, None
            F.races = F.hold = None
            F.slow_path = False
            if F.shadows is not None:
                F.shadows.clear()
        if key is not None and race:
            launches.race_free = True
        if store:
            checks = F.l2_pass.checks if (F.l2_pass is not None and self.gm_reads) else []
            hits, misses = ((l2.hits - h0), (l2.misses - m0)) if l2 is not None else (0, 0)
            launches.add(memo.Later(
                memo.snapshot_cores(cores), list(F.acct), F.skipped, hits, misses, tags, l2, F.kernel_start, checks,
                [(k, t, w) for k, (t, w) in wfirst.items()], log, self.m, (F.trace, F.flows) if tracing else None,
            ))
            if F.l2_pass is not None:
                F.l2_pass.checks = None
        return self._finish(cores, F)

    def _split(self, args: list[np.ndarray], tags: list) -> KernelRecord:
        """A numerics launch as two walks (`split`): the timing-only twin (`_twin`) runs the launch
        on zero views of `args` with their address tags `tags`, as a timing-only run would (L2
        recording and timed passes with the steady-state speed-ups and the launch memo, the
        trace) and its record is this launch's; then the data walk (`_data_walk`)
        computes the outputs and checks races, its GEMMs' super-tiles cut to the rows the twin's
        L2 recording pass saw read (exec/census.py; none when the twin recorded nothing: a
        launch-memo hit). Same record as the single walk (timing reads no data
        in these kernels), same outputs and race verdicts (the same semantics and accesses in the
        same order)."""
        twin = self._twin()
        twin.frame.l2_pass = None  # (a launch-memo hit sets none: then no census)
        rec = twin.run([zero_view(a.shape, a.dtype) for a in args], tags)
        cube, p = self._data_compile()[0].cube, twin.frame.l2_pass
        if cube is not None:  # the recording pass's reads tell which rows its GEMMs ask for (exec/census.py)
            reads = None if p is None or self.m.l2 is None else p.reads
            cube.census = None if reads is None else Census(*reads, SHIFT, self.m.l2.stream_of, args, tags)
        if p is not None:
            p.reads = None
        self._data_walk(args, tags)
        return rec

    def _twin(self) -> KernelProgram:
        """This kernel's timing-only twin, compiled from this kernel's pre-walk facts. (Kernels of
        equal bodies share its timing through the twins' launch memo; each keeps a twin of its own,
        whose errors name it.)"""
        if self.twin is None:
            self.twin = KernelProgram(timing_view(self.m), self.op, like=self)
        return self.twin

    def _record(self, args: list[np.ndarray], tags: list) -> L2Pass:
        """The settled L2 recording pass of a numerics launch, run by this kernel's timing-only
        twin (`_twin`): the pass moves no data, so the twin's steady-state loop
        speed-ups (accel/) give it the designation the full pass would, at timing-only cost; the
        numerics run then executes every op once instead of twice. (A launch that could `_split` but
        runs in a cluster, where other devices write this one's GM mid-launch.)"""
        twin = self._twin()
        F = twin.frame
        for s, a, tag in zip(twin.arg_slots, args, tags):
            F.values[s] = zero_view(a.shape, a.dtype)
            F.gm_tags[s] = tag
        # from time 0, as the recording pass in `run`
        F.kernel_start = 0.0
        F.l2 = self.m.l2
        F.flags = FlagQueues(twin.nflags)
        F.may_extrapolate = True
        F.l2_pass = L2Pass(self.m.l2.window)
        F.numerics_on = False  # (what tells a tile op it records: writes go to the pass, not the L2)
        F.trace = F.flows = None
        try:
            twin._blocks(tracing=False)
        finally:
            p, F.l2_pass = F.l2_pass, None
        p.settle(self.m.l2)
        return p

    def _data_walk(self, args: list[np.ndarray], tags: list) -> None:
        """Every block's data effect on `args` (address tags `tags`): the body compiled with
        KernelInfo.data_only (tile ops run their semantics, scalar ops charge nothing), blocks in
        order, each in program order except where a wait_flag holds its pipe until a later set
        (holds.py), as in the single walk. Races are checked (race.py) once per launch memo key,
        as there: every op runs, so the checker sees every access. A kernel whose ops touch data only
        through tile ops defers its cube data (exec/deferred.py `eligible`): copies into L1 / L0A /
        L0B and mmads are recorded and each L0C tile computed when read, per K run (blocks of
        super-tile products, dropped when the walk ends). Any other kernel whose ops read data
        only in tile ops (`batched`) runs its blocks recording their tile ops (exec/tape.py),
        then computes them a window of blocks at a time, runs of blocks of equal ops an op at a
        time for all of them (exec/batch_run.py: the same bits, the same errors but where one block
        both races and hits a data error: tests/test_breaker26_regressions.py)."""
        F, slots, body, nflags, uniform = self._data_compile()
        for s, a, tag in zip(slots, args, tags):
            F.values[s] = a
            F.gm_tags[s] = tag
        launches = None
        if self.m.memo is not None and all(t is not None for t in tags):
            launches = self.m.memo.setdefault((self.memo_text, memo.pattern(tags)), memo.Launches([]))
        race = self.m.check_races and not (launches is not None and launches.race_free)
        if race:
            F.races = F.ctl = RaceChecker(self.name, self.labels, self.nchip, nflags, F if uniform else None)
        F.shadows = self.m.shadows
        if F.shadows is not None:
            F.shadows.clear()
        F.flags = FlagQueues(nflags)
        # a kernel whose blocks' paths read no data records its blocks' tile ops first, then
        # computes them, consecutive blocks of equal ops together (exec/batch_run.py)
        F.tape = Tape(MAX_BATCH) if self.batched else None
        try:
            try:
                self._blocks(False, F, body)
            except Exception:
                # the plain walk computes the data of the blocks before a block's own error (and of
                # that block up to it) first: their data errors come first
                tape, F.tape = F.tape, None
                if tape is not None:  # (the window's blocks: the failing one is its last)
                    batch_run.run(tape.take())
                raise
            if F.tape is not None:
                tape, F.tape = F.tape, None
                batch_run.run(tape.take())
        finally:
            F.tape = None
            F.races = F.ctl = F.hold = None
            F.slow_path = False
            if F.cube is not None:
                F.cube.drop()
            if F.shadows is not None:
                F.shadows.clear()
        if race and launches is not None:
            launches.race_free = True

    def _data_compile(self) -> tuple:
        """The data walk's program (`data`: frame, argument slots, body, flag count, whether later
        blocks may run the race check cheaply), compiled on the first call: the body with
        KernelInfo.data_only, cube data deferred when `deferred.eligible`."""
        if self.data is None:
            ends, tree, scalar_units, costs, paths, op_units = self._facts
            frame = Frame()
            if deferred.eligible(tree.ops[1:], registry.SEMANTICS):
                frame.cube = deferred.CubeDeferral(frame.gm_tags)
            # (no cube deferral: its records are per block; memo_text: no data steers the blocks' paths)
            self.batched = frame.cube is None and self.memo_text is not None and batch_run.batchable(tree.ops[1:])
            info = KernelInfo(self.name, self.nunits, self.env, ends, {}, 0.0, False, tree=tree, scalar_units=scalar_units,
                              op_units=op_units, data_only=True, costs=costs, paths=paths, batched=self.batched)
            comp = Compiler(self.m, frame, info)
            block = self.op.body.block
            slots = [comp.slot(a) for a in block.args]
            # later blocks may run unchecked while they take a checked block's decisions (race.py)
            builtin = builtin_costs()  # (a built-in cost gives an op one pipe whatever its operands)
            # (decided per op class, of the few classes the kernel's thousands of ops have)
            tile = {t: (builtin.get(t) is registry.COSTS[t]) if t in registry.COSTS and t in registry.SEMANTICS else None
                    for t in set(map(type, tree.ops))}
            uniform = uniform_blocks(tree.ops[1:], lambda o: tile[type(o)])
            self.data = (frame, slots, comp.block(block), max(1, len(info.flag_keys)), uniform)
        return self.data

    def _reuse(self, hit: memo.Memo, tags: list) -> bool:
        """Apply a stored launch when every L2 check gives the same outcome (memo.py)."""
        l2 = self.m.l2
        return l2 is None or hit.apply(tags, l2, self.m.clock)

    def _blocks(self, tracing: bool, F: Frame | None = None, body: list | None = None) -> list[CoreState]:
        """Run blocks 0..block_dim-1 in order on fresh cores (waves on cores = b % ncores); `F`,
        `body`: the data walk's (`_data_walk`), else this program's."""
        F = F if F is not None else self.frame
        body = body if body is not None else self.body
        nslots = NPIPES * self.nunits
        cores = [CoreState(i, nslots) for i in range(min(self.block_dim, self.ncores))]
        F.acct = [0.0] * ACCT_SIZE
        F.skipped = 0
        F.dcaches = {}  # every launch (and pass) starts with cold scalar DCaches (timing/dcache.py)
        for stored in F.memos:  # stored loop executions are per pass: a launch's report depends on it alone
            stored.table.clear()
        races = F.ctl if F.ctl is not None else F.races  # (F.ctl: a data walk's, F.races None in its cheap blocks)
        tape = F.tape
        for b in range(self.block_dim):
            core = cores[b % len(cores)]
            core.start_block()
            F.core = core
            F.block = b
            if tape is not None:
                tape.begin(b)
            F.flags.reset()
            F.hold = None
            if F.cube is not None:  # fresh on-chip buffers: nothing recorded is read (exec/deferred.py)
                F.cube.reset(F.shadows)
            if races is not None:
                F.races = None if races.reset(b) else races
            F.slow_path = F.races is not None
            if tracing:
                F.flow_queues.reset()
            try:
                for f in body:
                    f()
            except Exception:
                if races is not None:  # a race before the error is what a full check raises
                    races.finish(False)
                raise
            if races is not None:
                races.finish(True)
            if F.hold is not None:  # a pipe still waits for a set that never came (holds.py)
                err = F.hold.deadlock(b)
                F.hold, F.slow_path = None, False
                raise err
            if tape is not None:
                if b == 0 and len(tape.blocks[0]) < batch_run.MIN_OPS:
                    # blocks of few tile ops gain nothing batched: block 0's run now, the rest as written
                    batch_run.run(tape.take())
                    F.tape = tape = None
                elif tape.full():  # a window of blocks recorded: computed (exec/tape.py)
                    batch_run.run(tape.take())
        return cores

    def _finish(self, cores, F, acct: list[float] | None = None, skipped: int | None = None, trace: tuple | None = None) -> KernelRecord:
        """The record of the launch that ran (from F), or of a stored one applied (`acct`,
        `skipped` and its slices `trace`: (events, flows), None when not traced)."""
        events, flows = (F.trace or [], F.flows or []) if acct is None else (trace or ([], []))
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
            # quantised like every duration (costmodel/quantum.py): the chip clock, where later
            # kernels start, stays a multiple of the quantum
            launch_cycles=quantise(self.m.target.kernel_launch_cycles),
            gm_share=self.env.gm_share,
            bandwidth_floor=quantise(bandwidth_bound_cycles(
                acct[LEVELS.index("gm_read")], acct[LEVELS.index("gm_write")], self.m.target, acct[LEVELS.index("l2_hit")],
                acct[LEVELS.index("l2_write")],
            )),
            events=events,
            flows=flows,
            extrapolated_iterations=F.skipped,
        )
        self.m.clock += rec.cycles
        return rec
