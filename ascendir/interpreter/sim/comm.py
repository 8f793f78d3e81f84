"""A compiled comm kernel: an `ascend.kernel` holding the comm ops of ops_comm.py (built by the
collective template), run on the device's SDMA engines rather than its AI Cores.

The body is straight line: `ascend.group_rank`, index `arith`, `memref.subview` of GM arguments,
`ascend.get_value` (a count or offset read from a GM argument: the expert-parallel dispatch's
data-dependent sizes; free, and zeros in a timing-only run) and the comm ops. One launch walks it with the device's `DeviceComm` (the cluster's side of the
device: its id, peers' launches, notifies, the link timelines; sim/cluster.py), which a run on a
single device lacks: a comm kernel over more than one device then is an error naming the kernel.

Timing (cycles, common clock of the cluster): the kernel starts at the device clock. Its work on
behalf of each peer is one stream (HCCL runs a mesh step on one stream per peer), in order:
a remote copy starts when the stream and the link are free and ends when its last byte lands
(timing/links.py); a notify record is issued after the stream's earlier copies and costs
`hccl.notify_record_us`, seen by the peer after the link latency; a notify wait ends at
max(stream, the record seen) + `hccl.notify_wait_us`. `comm_reduce` joins every stream and
takes its HBM bytes at the chip's HBM bandwidth (INF: the vector cores' sum runs at HBM speed).
The kernel ends when every stream has, and takes at least its HBM bytes (read here, landed here)
at the chip's HBM bandwidth: the copies share the HBM of both ends.

A kernel marked `aiv_rows` (ops_comm.AIV_ROWS_ATTR: the expert-parallel dispatch / combine) has
its rows moved by the die's vector cores, as the vendor's kernels do (DeepEP-Ascend's
CamMoeDispatchNormal / CamMoeCombineNormal, ops-transformer's MoeDistributeDispatch / Combine:
AIV-only kernels, one DataCopyPad per row in and one out, the rows dealt evenly over all AIVs).
Each copy's rows cost `aiv_row_cycles` on one AIV; the AIVs are a pool that takes the copies in
issue order, rows spread over all of them (the copy's work / AIV count: a fluid pool, so a copy
of fewer rows than AIVs is charged its share, not one row's latency); a remote copy also crosses
its link with no transport head and no per-flow cap (Links.transfer `by_cores`), and ends when
both the pool and the link are done. A copy within the device is pool work only.

A comm kernel's cycles are all *exposed* (nothing computes beside it), `wait_cycles` is the part
of them spent waiting for peers' records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, MemRefType
from xdsl.ir import Operation

from ascendir.costmodel import LEVELS, quantise
from ascendir.dialects import ascend
from ascendir.dialects.ascend import COMM_OPS
from ascendir.dialects.ascend.ops_comm import AIV_ROW_MODES, AIV_ROWS_ATTR
from ascendir.errors import AscendirError
from ascendir.interpreter.exec.walk import _is_a
from ascendir.interpreter.state import ACCT_SIZE, KernelRecord
from ascendir.interpreter.timing.links import Links
from ascendir.interpreter.timing.timeline import NPIPES, PIPES, CoreState

_INDEX_OPS = {
    arith.AddiOp: lambda a, b: a + b, arith.SubiOp: lambda a, b: a - b, arith.MuliOp: lambda a, b: a * b,
    arith.DivUIOp: lambda a, b: a // b, arith.RemUIOp: lambda a, b: a % b,
}


STATUS_FLAG_BYTES = 32  # one status flag per row of a "barrier" copy: a 32-B block (cam_moe_combine_normal.h UB_32_ALIGN)


def aiv_row_cycles(target, row_bytes: float, mode: str) -> float:
    """Cycles one AIV spends on one row of `row_bytes` bytes of an `aiv_rows` comm kernel.

    A row is a DataCopyPad GM -> UB (MTE2: `startup.mte2` + bytes / `rates.gm_to_ub`, and the GM
    read latency) and one UB -> GM (MTE3: `startup.mte3` + bytes / `rates.ub_to_gm`, and the GM
    write latency: a remote store is a GM write of the peer's HBM); S1 rates, S4 heads, S5
    latencies, all from the target file (docs/hardware-reference.md §Rates, §Startup, §Memory).
    `mode` "barrier" (CamMoeCombineNormal's send loop: load, store, PipeBarrier<PIPE_ALL>, then a
    32-B status flag to the peer): load + store + both latencies + the flag's store head and bytes
    (the flag lands while the next row loads). "pipelined" (CamMoeDispatchNormal's ShareToOutput:
    a two-slot queue, the next row loading while this one stores): the longer of the two pipes'
    parts, each with its own latency. The link's bandwidth is not in it (Links.transfer).

    Raises:
        ValueError: an unknown `mode`."""
    load = target.startup["mte2"] + row_bytes / target.rate("gm", "ub") + target.memory.gm_read_latency
    store = target.startup["mte3"] + row_bytes / target.rate("ub", "gm") + target.memory.gm_write_latency
    if mode == "barrier":
        return load + store + target.startup["mte3"] + STATUS_FLAG_BYTES / target.rate("ub", "gm")
    if mode == "pipelined":
        return max(load, store)
    raise ValueError(f"aiv_rows mode {mode!r} (one of {', '.join(AIV_ROW_MODES)})")


def _rows(a: np.ndarray) -> tuple[int, int]:
    """(rows, bytes per row) of a copy's source: every dim but the last is rows."""
    if a.ndim == 0:
        return 1, a.dtype.itemsize
    return int(np.prod(a.shape[:-1])), a.shape[-1] * a.dtype.itemsize


def is_comm_kernel(op: ascend.KernelOp, ops: list[Operation] | None = None) -> bool:
    """A kernel holding a comm op is a comm kernel. `ops`: the kernel's ops (walk.OpTree.ops)
    when the caller has them (chip.py: the tree the kernel's compile then reads), else a plain
    walk. (_is_a: isinstance on xDSL's op classes (ABCs) is Python code; asked per class, of the
    few classes a kernel's thousands of ops have.)"""
    if ops is not None:
        return any(_is_a(t, COMM_OPS) for t in set(map(type, ops)))
    todo = [op]
    while todo:
        o = todo.pop()
        if _is_a(type(o), COMM_OPS):
            return True
        for region in o.regions:
            for block in region.blocks:
                x = block.first_op
                while x is not None:
                    todo.append(x)
                    x = x.next_op
    return False


@dataclass
class Launch:
    """One launch of a comm kernel on one device: its GM arguments (what peers write into) and
    the bytes peers wrote into this device during it."""

    args: list[np.ndarray]
    received: float = 0.0


class DeviceComm(Protocol):
    """The cluster's side of one device (sim/cluster.py implements it)."""

    device: int
    links: Links

    def enter(self, kernel: str, args: list[np.ndarray]) -> tuple[tuple[str, int], Launch]: ...

    def peer_launch(self, peer: int, key: tuple[str, int], what: str) -> Launch: ...

    def post(self, peer: int, time: float) -> None: ...

    def take(self, peer: int, what: str, group: tuple[int, ...]) -> float: ...


class CommKernelProgram:
    """One compiled comm kernel of module program `m` (chip.ModuleProg)."""

    is_comm = True  # the host's launch tells it from a compute kernel by this

    def __init__(self, m, op: ascend.KernelOp):
        self.m = m
        self.name = op.sym_name.data
        block = op.body.block
        self.arg_types: list[MemRefType] = list(block.arg_types)
        self.arg_slots = list(range(len(block.args)))
        self.args = list(block.args)
        self.ops: list[Operation] = []
        self.groups = set()
        mode = op.attributes.get(AIV_ROWS_ATTR)
        self.aiv_rows: str | None = mode.data if mode is not None else None
        if self.aiv_rows is not None and self.aiv_rows not in AIV_ROW_MODES:
            raise AscendirError(f"kernel @{self.name}: {AIV_ROWS_ATTR} = {self.aiv_rows!r} (one of {', '.join(AIV_ROW_MODES)})")
        for o in block.ops:
            if isinstance(o, (ascend.ReturnOp, ascend.BlockIdxOp)):
                continue
            if not isinstance(o, (*COMM_OPS, arith.ConstantOp, memref.SubviewOp, ascend.GetValueOp, *_INDEX_OPS)):
                raise AscendirError(f"kernel @{self.name}: {o.name} in a comm kernel (straight-line comm ops, index arith and subviews only)")
            if isinstance(o, COMM_OPS) and hasattr(o, "group"):
                self.groups.add(o.group.ranks)
            self.ops.append(o)

    def run(self, args: list[np.ndarray], tags: list | None = None, background: bool = False) -> KernelRecord:
        """One launch on `args`, from max(device clock, the comm stream free); `background`
        (`ascend.async`, timing/comm_stream.py): the device clock stays, the stream advances."""
        m = self.m
        comm: DeviceComm | None = getattr(m, "comm", None)
        n = max((len(g) for g in self.groups), default=1)
        if comm is None:
            raise AscendirError(f"kernel @{self.name}: a collective over {n} devices; run the module on a cluster "
                                f"(ascendir run --devices {n})")
        for i, (a, ty) in enumerate(zip(args, self.arg_types)):
            if tuple(a.shape) != tuple(ty.get_shape()):
                raise AscendirError(f"ascend.launch @{self.name}: argument {i} has shape {a.shape}, kernel expects {tuple(ty.get_shape())}")
        t0 = max(m.clock, m.stream.free)
        me = comm.device
        key, launch = comm.enter(self.name, args)
        links, hccl = comm.links, comm.links.topology.hccl
        rec_c, wait_c = links.cycles(hccl.notify_record_us), links.cycles(hccl.notify_wait_us)
        # value -> numpy view (memrefs: with (argument index, index tuple) to find a peer's copy)
        V: dict = {}
        where: dict = {}
        for i, (a, arr) in enumerate(zip(self.args, args)):
            V[a] = arr
            where[a] = (i, ())
        streams: dict[int, float] = {}
        main = t0
        waited = 0.0
        sent = read = 0.0
        pool = t0  # the AIVs' clock in an aiv_rows kernel
        aivs = m.target.cores("aiv")
        numerics = not m.timing_only
        for o in self.ops:
            if isinstance(o, arith.ConstantOp):
                V[o.result] = o.value.value.data if isinstance(o.value, IntegerAttr) else o.value
            elif type(o) in _INDEX_OPS:
                V[o.result] = _INDEX_OPS[type(o)](V[o.lhs], V[o.rhs])
            elif isinstance(o, ascend.GetValueOp):
                V[o.result] = int(V[o.source][tuple(V[i] for i in o.indices)])
            elif isinstance(o, ascend.GroupRankOp):
                ranks = o.group.ranks
                if me not in ranks:
                    raise AscendirError(f"kernel @{self.name}: device {me} runs a collective over devices {list(ranks)} "
                                        "but is not in its group")
                V[o.result] = ranks.index(me)
            elif isinstance(o, memref.SubviewOp):
                idx = self._subview(o, V)
                V[o.result] = V[o.source][idx]
                i, outer = where[o.source]
                where[o.result] = (i, outer + (idx,))
            elif isinstance(o, ascend.RemoteCopyOp):
                src, peer = V[o.source], o.group.ranks[V[o.peer]]
                nbytes = src.size * src.dtype.itemsize
                read += nbytes
                s = streams.get(peer, main)
                if self.aiv_rows is not None:
                    rows, row_bytes = _rows(src)
                    pool = max(pool, s) + rows * aiv_row_cycles(m.target, row_bytes, self.aiv_rows) / aivs
                if peer == me:
                    dst = V[o.dest]
                    streams[peer] = pool if self.aiv_rows is not None else links.local_copy(nbytes, s)
                    launch.received += nbytes
                else:
                    plaunch = comm.peer_launch(peer, key, f"kernel @{self.name}: remote copy to device {peer}")
                    i, path = where[o.dest]
                    dst = plaunch.args[i]
                    for idx in path:
                        dst = dst[idx]
                    if self.aiv_rows is not None:
                        streams[peer] = max(links.transfer(me, peer, nbytes, s, by_cores=True), pool)
                    else:
                        streams[peer] = links.transfer(me, peer, nbytes, s)
                    plaunch.received += nbytes
                    sent += nbytes
                if numerics:
                    dst[...] = src.reshape(dst.shape)
            elif isinstance(o, ascend.NotifyRecordOp):
                peer = o.group.ranks[V[o.peer]]
                t = streams.get(peer, main) + rec_c
                comm.post(peer, t + links.latency(me, peer))
                streams[peer] = t
            elif isinstance(o, ascend.NotifyWaitOp):
                peer = o.group.ranks[V[o.peer]]
                seen = comm.take(peer, f"kernel @{self.name} waits for a notify from device {peer}", o.group.ranks)
                s = streams.get(peer, main)
                if seen > s:
                    waited += seen - s
                streams[peer] = max(s, seen) + wait_c
            elif isinstance(o, ascend.CommReduceOp):
                stack, dst = V[o.stack], V[o.dest]
                t = max([main, *streams.values()])
                nb = stack.size * stack.dtype.itemsize + dst.size * dst.dtype.itemsize
                read += stack.size * stack.dtype.itemsize
                t += nb / m.target.hbm_sustained_bytes_per_cycle
                main = t
                streams = {p: t for p in streams}
                if numerics:
                    acc = np.float32 if stack.dtype.kind == "f" and stack.dtype.itemsize < 4 else stack.dtype
                    dst[...] = stack.astype(acc).sum(axis=0, dtype=acc).reshape(dst.shape).astype(dst.dtype)
        # the SDMA engines read and write this device's HBM: the kernel takes at least its HBM bytes
        # (what it read, what landed here) at the chip's sustained HBM bandwidth (the roof of
        # costmodel.bandwidth_bound_cycles); a multiple of the quantum, as every duration
        # (costmodel/quantum.py), so the device clock stays one
        hbm_floor = (read + launch.received) / m.target.hbm_sustained_bytes_per_cycle
        body = quantise(max(max([main, *streams.values()]) - t0, hbm_floor))
        core = CoreState(0, NPIPES)
        core.free = [body] * NPIPES
        core.done = [body] * NPIPES
        acct = [0.0] * ACCT_SIZE
        acct[LEVELS.index("gm_read")] = read
        acct[LEVELS.index("gm_write")] = launch.received
        rec = KernelRecord(
            name=self.name, block_dim=1, core_type="aiv", pipe_labels=list(PIPES), cores=[core], acct=acct,
            launch_cycles=0.0, gm_share=m.target.hbm_bytes_per_cycle,
            comm={"device": me, "start_cycle": t0, "cycles": body, "exposed_cycles": body, "wait_cycles": waited,
                  "bytes_sent": sent, "group_size": n, "hbm_bytes": read + launch.received, "background": background},
        )
        if background:
            m.stream.background(rec)
        else:
            m.clock = t0 + rec.cycles
            m.stream.free = m.clock
        return rec

    @staticmethod
    def _subview(o: memref.SubviewOp, V: dict) -> tuple:
        def vals(static, dyn):
            it = iter(dyn)
            return [V[next(it)] if s == DYNAMIC_INDEX else s for s in static.get_values()]

        offs, sizes, strides = vals(o.static_offsets, o.offsets), vals(o.static_sizes, o.sizes), vals(o.static_strides, o.strides)
        if len(o.result.type.get_shape()) != len(offs):
            raise AscendirError(f"{o.name} in a comm kernel: rank-reducing subviews are not supported")
        return tuple(slice(a, a + (s - 1) * st + 1 if s else a, st) for a, s, st in zip(offs, sizes, strides))
