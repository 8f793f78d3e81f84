"""Runtime state shared by the compiled closures (`Frame`) and the raw record of a kernel launch."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ascendir.costmodel import LEVELS
from ascendir.interpreter.timing.timeline import CoreState, FlagQueues

FLOPS = len(LEVELS)  # index of the flop counter in Frame.acct
OPS = FLOPS + 1  # index of the tile-op counter
VECTOR_OPS = {"f16": OPS + 1, "f32": OPS + 2}  # vector element-ops per rate class (cost.OpCost.vector_ops)
CUBE_PEAK_CYCLES = OPS + 3  # cycles the cube flops take at their dtype's peak (cost.OpCost.cube_peak_cycles)
ACCT_SIZE = OPS + 4
EXTRAPOLATED = " iterations"  # how the name of a trace slice of iterations not run one by one ends ("mmad ×96 iterations")


class Frame:
    """Mutable state the closures of one program share."""

    __slots__ = ("values", "gm_tags", "core", "flags", "flow_queues", "acct", "trace", "flows", "block", "flow_ids", "kernel_start", "l2", "l2_pass", "numerics_on", "gm_log", "cost_log", "may_extrapolate", "skipped", "launch_gm_log", "first_writes", "races", "ctl", "s_clock_decisions", "memos", "hold", "slow_path", "times_held", "shadows", "dcaches", "cube", "tape")

    def __init__(self, nslots: int = 0):
        self.values: list = [None] * nslots
        # GM address tag per slot: (root, element offset, element strides) or None (l2.py)
        self.gm_tags: list = [None] * nslots
        self.kernel_start = 0.0  # chip time (cycles) at which the running kernel started
        self.l2 = None  # l2.L2Cache when the L2 model is "tile"
        self.l2_pass = None  # l2.L2Pass of the running kernel (who pays each miss)
        self.numerics_on = True  # False during the L2 recording pass: numerics are not run twice
        self.core: CoreState | None = None
        self.flags: FlagQueues | None = None
        self.flow_queues: FlagQueues | None = None
        self.acct: list[float] = [0.0] * ACCT_SIZE
        self.trace: list | None = None
        self.flows: list | None = None
        self.block = 0
        self.flow_ids = itertools.count()
        # steady-state extrapolation (steady.py): GM accesses and cost entries of the running
        # block, recorded only while a candidate loop is sampling (None otherwise)
        self.gm_log: list | None = None
        self.cost_log: list | None = None
        self.may_extrapolate = True  # timing-only loops may be extrapolated
        self.skipped = 0  # loop iterations extrapolated instead of run in the current pass
        self.launch_gm_log: list | None = None  # (tile key, time, is read) of every GM access, for memo.py
        # tile key -> (time, outcome) of the launch's first explicit write of it (memo.py)
        self.first_writes: dict | None = None
        self.races = None  # race.RaceChecker of the running pass (None: not checking)
        self.ctl = None  # a data walk's RaceChecker, also while a block runs unchecked (race.py `reset`)
        self.s_clock_decisions = 0  # times an S clock decided a start or kept a clock (loop_memo.LoopMemo)
        self.memos: list = []  # loop_memo.LoopMemo / xblock.BlockMemo of every loop of the program, emptied per pass
        self.hold = None  # holds.Holds while a pipe waits for a set later in program order
        self.slow_path = False  # rc or hold is set: tile ops test this one flag (holds.py)
        self.times_held = 0  # times a pipe was held (steady.py loops stop jumping when it changes)
        # (core index, S slot) -> timing/dcache.ScalarDCache of the running pass (cold per launch)
        self.dcaches: dict = {}
        self.shadows = None  # wide.GmShadows of the running numerics launch (None: GM reads convert per tile)
        self.cube = None  # deferred.CubeDeferral of a data walk that defers its cube data (None: ops run as written)
        self.tape = None  # exec/tape.Tape while a batched data walk records its tile ops (None: ops run)


@dataclass
class KernelRecord:
    """What one kernel launch did (raw; report.py turns it into the report dict)."""

    name: str
    block_dim: int
    core_type: str
    pipe_labels: list[str]  # label of each pipe slot ("M", or "aic.MTE2" in mixed kernels)
    cores: list[CoreState]
    acct: list[float]  # bytes per LEVELS, then flops, then tile ops executed
    launch_cycles: float
    gm_share: float  # bytes/cycle cap of a core's GM path
    bandwidth_floor: float = 0.0  # chip GM bytes / chip bandwidth, cycles
    events: list = field(default_factory=list)  # (core, slot, start, cycles, name, ((LEVELS index, bytes), ...))
    # set_flag ("s") / wait_flag ("f"): (phase, core, slot, peer slot, event id, start, end, flow id);
    # [start, end] is the time the pipe `slot` spent in the instruction (trace.py)
    flows: list = field(default_factory=list)
    extrapolated_iterations: int = 0  # loop iterations added as steady-state deltas (steady.py)
    node: str | None = None  # the ONNX node(s) of the launch (its onnx.node), for the report
    comm: dict | None = None  # a comm kernel's collective figures (sim/comm.py), None for compute kernels

    @property
    def timeline_cycles(self) -> float:
        """When the last pipe of the last core finished (cycles from the kernel start)."""
        return max((c.end() for c in self.cores), default=0.0)

    @property
    def body_cycles(self) -> float:
        """Kernel time without launch overhead: the timeline, stretched to the chip bandwidth floor."""
        return max(self.timeline_cycles, self.bandwidth_floor)

    @property
    def cycles(self) -> float:
        return self.body_cycles + self.launch_cycles
