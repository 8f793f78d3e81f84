"""Compile the ops of one program (host function or kernel body) into closures over a register list.

Each SSA value gets a slot in `Frame.values`; each op becomes a zero-argument closure reading and writing
slots, so running a program is `for f in body: f()`. Tile ops (copy, mmad, vector, gather and any
op added with `register_op`) call their semantics (skipped in timing-only mode), look their cost
up in a per-op cache keyed by operand shapes, and advance the core's pipe clocks (timeline.py).
Scalar ops (arith, subview, loop control) charge `startup.scalar_alu` cycles on the S pipe.
A wait_flag issued before its set_flag holds its destination pipe, whose later ops queue until the
set runs (holds.py); tile ops test one flag (`Frame.slow_path`) for that and the race checker.

In timing-only mode `Compiler.for_` runs loops that `steady.uniform_loop` accepts through
`steady.SteadyLoop`: once two consecutive periods advance the core state by the same delta, the
remaining whole periods are added as a multiple of it; a whole execution of such a loop entered
again from the same relative state is applied from `loop_memo.LoopMemo` (see steady.py for the
conditions and the L2 treatment). Tile ops, flags and barriers count in `Frame.s_clock_decisions` when an S
clock decided a start (LoopMemo leaves the S clock out of its key when it decided nothing).
"""

from __future__ import annotations

import dataclasses

from collections.abc import Callable

from xdsl.dialects import func, memref, scf
from xdsl.ir import Block, Operation, SSAValue

from ascendir.costmodel import quantise
from ascendir.dialects import ascend
from ascendir.dialects.ascend.ops_scalar import MOE_BLOCK_ATTR
from ascendir.errors import AscendirError
from ascendir.interpreter.exec import registry
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.state import Frame
from ascendir.interpreter.accel.loop_driver import SteadyFor
from ascendir.interpreter.exec.common import (  # noqa: F401  (re-exported: sim/, insert-sync)
    AIC_PIPES, AIV_PIPES, Closure, KernelInfo, Return, np_dtype, unit_of, zero_view,
)
from ascendir.interpreter.exec.data_codegen import DataCodegen
from ascendir.interpreter.exec.memref_ops import MemrefOps
from ascendir.interpreter.exec.scalar_codegen import ScalarCodegen
from ascendir.interpreter.exec.scf_ops import ScfOps
from ascendir.interpreter.exec.sync_ops import SyncOps
from ascendir.interpreter.exec.tile_ops import TileOps


# ----------------------------------------------------------------------------------------------
# compiling a region
# ----------------------------------------------------------------------------------------------
class Compiler(ScalarCodegen, DataCodegen, TileOps, ScfOps, SteadyFor, MemrefOps, SyncOps):
    """Compiles the ops of one program (host function or kernel) into closures over `frame.values`.

    The op families live in their own modules, mixed in here: scalar runs (scalar_codegen.py), tile
    ops (tile_ops.py), scf (scf_ops.py) and its accelerated loop driver (accel/loop_driver.py),
    the data walk's blocks as generated code (data_codegen.py),
    buffers and views (memref_ops.py), block index and sync (sync_ops.py)."""

    def __init__(self, module, frame: Frame, kernel: KernelInfo | None):
        self.m = module
        self.F = frame
        self.k = kernel
        # id(value) -> its slot: what `slot` looks up (an xDSL value's hash is Python code, an
        # int's is not; compiling asks for the slots of every operand of every op); `_values`
        # (slot -> value) holds the values, so their ids stay theirs
        self._ids: dict[int, int] = {}
        self._values: list[SSAValue] = []
        # (cost function, AIV subblock) of the tile ops whose cost is a built-in one -> their
        # (pipe slot, S slot), resolved once per compile (tile_ops.py `_data_tile`)
        self.fixed_pipes: dict[tuple, tuple[int, int]] = {}
        # (class, operand ids) of the tile ops compiled -> (attributes, properties, closure) of
        # each shared closure (tile_ops.py `tile`)
        self.same_tiles: dict[tuple, list] = {}

    # -- slots ------------------------------------------------------------------------------
    def slot(self, v: SSAValue) -> int:
        s = self._ids.get(id(v))
        if s is None:
            s = self._ids[id(v)] = len(self._values)
            self._values.append(v)
            self.F.values.append(None)
            self.F.gm_tags.append(None)
        return s

    def block(self, block: Block) -> list[Closure]:
        """Closures of the ops of `block`, in order; runs of consecutive scalar ops become one
        closure (`scalar_run`). A data walk's block is one generated closure (data_codegen.py)."""
        if self.k is not None and self.k.data_only:
            return [self.data_block(block)]
        out: list[Closure] = []
        run: list[Operation] = []
        tree = self.k.tree if self.k is not None else None
        for op in tree.block_ops(block) if tree is not None else block.ops:
            if type(op) in SCALAR_OPS:
                run.append(op)
                continue
            if run:
                out.append(self.scalar_run(run))
                run = []
            c = self.op(op)
            if c is not None:
                out.append(c)
        if run:
            out.append(self.scalar_run(run))
        return out

    # -- dispatch ---------------------------------------------------------------------------
    def op(self, op: Operation) -> Closure | None:
        t = type(op)
        if t in SCALAR_OPS:
            return self.scalar_run([op])
        if t in registry.COSTS and t in registry.SEMANTICS and self.k is not None:
            return self.tile(op)
        h = _HANDLERS.get(t)
        if h is None:
            where = f"kernel @{self.k.name}" if self.k else "the host function"
            if t in registry.COSTS or t in registry.SEMANTICS:
                if self.k is None:
                    raise AscendirError(f"{op.name} in {where}: tile ops run inside ascend.kernel only")
                raise AscendirError(f"{op.name} in {where}: needs both semantics and cost (register_op)")
            raise AscendirError(f"{op.name} in {where}: the interpreter does not support this op")
        return h(self, op)


    # -- host-only ops ----------------------------------------------------------------------
    def launch(self, op: ascend.LaunchOp) -> Closure:
        R = self.F.values
        name = op.callee.root_reference.data
        if name not in self.m.kernels:
            raise AscendirError(f"ascend.launch @{name}: no such ascend.kernel")
        kp = self.m.kernels[name]
        args = [self.slot(v) for v in op.args]
        if len(args) != len(kp.arg_slots):
            raise AscendirError(f"ascend.launch @{name}: {len(args)} arguments, kernel takes {len(kp.arg_slots)}")
        m = self.m
        A = self.F.gm_tags
        node = op.node.data if op.node is not None else None
        routed = m.kernel_ops[name].attributes.get(MOE_BLOCK_ATTR) if m.timing_only else None

        background = ASYNC_ATTR in op.attributes
        keep = op.attributes[OVERLAP_ATTR].value.data if OVERLAP_ATTR in op.attributes else 0
        comm_kernel = getattr(kp, "is_comm", False)  # sim/comm.py: runs on the SDMA engines
        if background and not comm_kernel:
            raise AscendirError(f"ascend.launch @{name}: {ASYNC_ATTR} launches a comm kernel in the background; @{name} computes")

        def run() -> None:
            try:
                stream = m.stream
                if background:
                    rec = kp.run([R[a] for a in args], [A[a] for a in args], background=True)
                elif not stream.pending:
                    rec = kp.run([R[a] for a in args], [A[a] for a in args])
                else:  # timing/comm_stream.py: wait for the comm kernels this one may not overlap
                    m.clock = stream.join(m.clock, keep)
                    t0 = m.clock
                    rec = kp.run([R[a] for a in args], [A[a] for a in args])
                    if not comm_kernel and stream.pending:
                        rec = _share_hbm(m, rec, t0)
                        stream.computed(t0, m.clock)
                if routed is not None:  # no data moved: the routing of the run stands in (sim/chip.py)
                    for a, v in zip(args[1:], m.routed_outputs(routed.data, R[args[0]].size)):
                        R[a] = v
                # a launch memo may hand the same record to identical launches of other nodes
                m.records.append(rec if rec.node == node else dataclasses.replace(rec, node=node))
                if m.trace_sink is not None:  # streamed: the record keeps no slices
                    m.trace_sink.launch(m.records[-1])
            except AscendirError as e:  # data errors (e.g. a gather index) name the launch too
                if f"@{name}" in str(e):
                    raise
                raise AscendirError(f"kernel @{name}: {e}") from None
            if m.progress is not None:
                m.progress(len(m.records), m.launches)

        return run

    def group_rank(self, op: ascend.GroupRankOp) -> Closure:
        """`ascend.group_rank` in the host function (an MC2 template's rank-dependent chunk): this
        device's position in the group (a comm kernel evaluates its own: sim/comm.py)."""
        if self.k is not None:
            raise AscendirError(f"ascend.group_rank in kernel @{self.k.name}: only comm kernels and the host function ask for the rank")
        R, m, out, ranks = self.F.values, self.m, self.slot(op.result), op.group.ranks

        def run() -> None:
            me = m.comm.device if m.comm is not None else 0
            if me not in ranks:
                raise AscendirError(f"ascend.group_rank: device {me} is not in group {list(ranks)}")
            R[out] = ranks.index(me)

        return run

    def ret(self, op: func.ReturnOp) -> Closure:
        R = self.F.values
        vals = [self.slot(v) for v in op.arguments]

        def run() -> None:
            raise Return([R[v] for v in vals])

        return run




ASYNC_ATTR = "ascend.async"
OVERLAP_ATTR = "ascend.overlap"


def _share_hbm(m, rec, t0: float):
    """Compute kernel `rec`, started at `t0` beside background comm kernels, stretched to move its
    own HBM floor's bytes plus the comm bytes of its window at the chip's sustained HBM bandwidth
    (timing/comm_stream.py; the floor's HBM roof, hbm_sustained_bytes_per_cycle); the device
    clock follows."""
    extra = m.stream.hbm_bytes_during(t0, t0 + rec.cycles) / m.target.hbm_sustained_bytes_per_cycle
    floor = quantise(rec.bandwidth_floor + extra)
    if floor <= rec.body_cycles:
        return rec
    new = dataclasses.replace(rec, bandwidth_floor=floor)
    m.clock += new.cycles - rec.cycles
    return new


def _noop(self: Compiler, op: Operation) -> None:
    return None


_HANDLERS: dict[type, Callable[[Compiler, Operation], Closure | None]] = {
    scf.ForOp: Compiler.for_,
    scf.IfOp: Compiler.if_,
    scf.YieldOp: _noop,
    ascend.AllocOp: Compiler.alloc,
    ascend.WeightOp: Compiler.weight,
    ascend.ViewOp: Compiler.view,
    memref.SubviewOp: Compiler.subview,
    memref.LoadOp: Compiler.load,
    memref.StoreOp: Compiler.store,
    ascend.GetValueOp: Compiler.get_value,
    ascend.BlockIdxOp: Compiler.block_idx,
    ascend.SetFlagOp: Compiler.set_flag,
    ascend.WaitFlagOp: Compiler.wait_flag,
    ascend.PipeBarrierOp: Compiler.barrier,
    ascend.ReturnOp: _noop,
    ascend.LaunchOp: Compiler.launch,
    ascend.GroupRankOp: Compiler.group_rank,
    func.ReturnOp: Compiler.ret,
}
