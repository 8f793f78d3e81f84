"""N devices joined by a topology: each device is one chip (chip.py) with its own cores, L2 and
HBM, running its own module (an SPMD module: the same one on every device, each with its own
weights and inputs); comm kernels (comm.py) join them over the topology's links (timing/links.py).

How devices run: one Python thread per device, of which exactly one runs at any moment (a baton
passed in device order), so a run is deterministic. A device runs until it must wait for a peer
(a notify not yet recorded, or a peer that has not reached the collective it writes into), then
hands the baton on. When every device still running waits and none of them can go on, the run
is a deadlock across devices: an error naming what each device waits for (never a hang).
Time is common to all devices (cycles of the chip clock from the start of the run); a notify
carries the time it is seen at, so the order in which devices are simulated does not change any
figure. Each directed link has one sender, whose transfers reach it in that sender's program
order.

Results: per device its outputs and kernel records; the links' bytes and busy time; the
collectives with their time and the part of it exposed (cluster_report).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from ascendir.costmodel.moe_routing import parse_ep_block
from ascendir.dialects.ascend import KernelOp
from ascendir.dialects.ascend.ops_scalar import MOE_BLOCK_ATTR
from ascendir.dialects.ascend.attrs import DeviceGroupAttr
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.hardware.topology import Topology
from ascendir.interpreter.accel import Accel
from ascendir.interpreter.sim.chip import ModuleProg, compile_module
from ascendir.interpreter.sim.comm import Launch
from ascendir.interpreter.state import KernelRecord
from ascendir.interpreter.timing.links import Links
from ascendir.weights import WeightStore


@dataclass
class DeviceRun:
    """What one device of a cluster run gave: @main's outputs and its kernel launch records."""

    outputs: dict[str, np.ndarray]
    records: list[KernelRecord] = field(default_factory=list)


class _Abort(Exception):
    """Another device failed: this one stops."""


class Scheduler:
    """The baton of a cluster run: which device's thread may run now."""

    def __init__(self, n: int):
        self.n = n
        self.cv = threading.Condition()
        self.turn: int | None = 0
        self.done = [False] * n
        self.blocked: dict[int, tuple[int, str]] = {}  # device -> (progress seen, what it waits for)
        self.progress = 0  # bumped by anything that may unblock a device
        self.error: BaseException | None = None

    def wait_turn(self, d: int) -> None:
        with self.cv:
            while self.turn != d and self.error is None:
                self.cv.wait()
            if self.error is not None:
                raise _Abort()

    def _pass(self, d: int) -> None:
        for k in range(1, self.n + 1):
            e = (d + k) % self.n
            if not self.done[e]:
                self.turn = e
                self.cv.notify_all()
                return
        self.turn = None
        self.cv.notify_all()

    def finish(self, d: int) -> None:
        with self.cv:
            self.done[d] = True
            self.blocked.pop(d, None)
            self.progress += 1
            self._pass(d)

    def fail(self, e: BaseException) -> None:
        with self.cv:
            if self.error is None:
                self.error = e
            self.cv.notify_all()

    def block_until(self, d: int, ready, what: str) -> None:
        """Hand the baton on until `ready()`; a round in which no device can go on is a deadlock.

        Raises:
            AscendirError: the deadlock, naming what each waiting device waits for."""
        while not ready():
            with self.cv:
                self.blocked[d] = (self.progress, what)
                live = [e for e in range(self.n) if not self.done[e]]
                if all(e in self.blocked and self.blocked[e][0] == self.progress for e in live):
                    waits = "; ".join(f"device {e}: {self.blocked[e][1]}" for e in live)
                    gone = [e for e in range(self.n) if self.done[e]]
                    tail = f" (finished: devices {', '.join(map(str, gone))})" if gone else ""
                    raise AscendirError(f"deadlock across devices: {waits}{tail}")
                self._pass(d)
            self.wait_turn(d)
        with self.cv:
            self.blocked.pop(d, None)


class _DeviceComm:
    """The cluster's side of device `device` (comm.DeviceComm)."""

    def __init__(self, cluster: _Run, device: int):
        self.run = cluster
        self.device = device
        self.links = cluster.links
        self.count: dict[str, int] = defaultdict(int)

    def enter(self, kernel: str, args: list[np.ndarray]) -> tuple[tuple[str, int], Launch]:
        key = (kernel, self.count[kernel])
        self.count[kernel] += 1
        launch = Launch(args)
        self.run.launches[(self.device, key)] = launch
        self.run.sched.progress += 1
        return key, launch

    def peer_launch(self, peer: int, key: tuple[str, int], what: str) -> Launch:
        L = self.run.launches
        if self.run.mirror:  # timing-only: no data lands; what peers send me mirrors what I send
            return L[(self.device, key)]
        self.run.sched.block_until(self.device, lambda: (peer, key) in L,
                                   f"{what}, which has not reached launch {key[1] + 1} of @{key[0]}")
        return L[(peer, key)]

    def post(self, peer: int, time: float) -> None:
        self.run.notes[(self.device, peer)].append(time)
        self.run.sched.progress += 1

    def take(self, peer: int, what: str, group: tuple[int, ...]) -> float:
        if self.run.mirror:
            return self._mirrored(peer, what, group)
        q, k = self.run.notes[(peer, self.device)], (peer, self.device)
        used = self.run.used
        self.run.sched.block_until(self.device, lambda: len(q) > used[k], what)
        used[k] += 1
        return q[used[k] - 1]


    def _mirrored(self, peer: int, what: str, group: tuple[int, ...]) -> float:
        """Symmetric ranks: the k-th record `peer` makes here is seen when this device's k-th
        record to its mirror peer is (group position 2·me - peer): the peer's stream towards this
        device is this device's stream towards the mirror, shifted by the rank rotation."""
        n, i, j = len(group), group.index(self.device), group.index(peer)
        mirror = group[(2 * i - j) % n]
        q, k = self.run.notes[(self.device, mirror)], (peer, self.device)
        if len(q) <= self.run.used[k]:
            raise AscendirError(f"{what}: with symmetric ranks it needs record {self.run.used[k] + 1} of this device to "
                                f"device {mirror} first (the collective is not rank-symmetric: simulate every device)")
        self.run.used[k] += 1
        return q[self.run.used[k] - 1]


class _Run:
    """The shared state of one cluster run."""

    def __init__(self, n: int, links: Links, mirror: bool = False):
        self.mirror = mirror  # symmetric ranks: one device simulated, its peers mirrored
        self.sched = Scheduler(n)
        self.links = links
        self.launches: dict = {}
        self.notes: dict[tuple[int, int], list[float]] = defaultdict(list)
        self.used: dict[tuple[int, int], int] = defaultdict(int)


class Cluster:
    """`len(modules)` chips of `target` joined by `topology`: device d runs `modules[d]` with
    `weights[d]` (an SPMD run passes the same module for every device).

    Raises:
        AscendirError: more devices than the topology holds, module and weight counts that
            differ, a collective whose group the topology cannot run (Topology.check_group), or
            any error of compile_module on a device's module."""

    def __init__(self, modules: list[ModuleOp], weights: list[WeightStore | None], target: HardwareConfig, topology: Topology,
                 timing_only: bool = False, accel: Accel | None = None, trace: bool = False, symmetric: bool = False,
                 moe_routing=None):
        n = len(modules)
        if len(weights) != n:
            raise AscendirError(f"a cluster of {n} devices needs {n} weight stores, got {len(weights)}")
        if not 1 <= n <= topology.devices:
            raise AscendirError(f"{n} devices do not fit topology {topology.name} ({topology.devices} devices)")
        self.topology = topology
        self.target = target
        self.trace = trace
        self.size = n
        for m in modules:
            check_groups(m, topology, n)
        if symmetric and not (timing_only and symmetric_ranks(modules, topology)):
            raise AscendirError("symmetric ranks need a timing-only run of one module whose every collective spans all "
                                "devices over links of one kind")
        self.symmetric = symmetric
        # every simulated device has its own program (its own clock, L2, buffers); symmetric: rank 0 only
        self.devices: list[ModuleProg] = [
            compile_module(m, target, w, timing_only=timing_only, accel=accel, moe_routing=moe_routing)  # (the trace has a track per device, no pipes)
            for m, w in zip(modules[:1] if symmetric else modules, weights)
        ]
        self.links: Links | None = None

    def run(self, inputs: list[dict[str, np.ndarray]]) -> list[DeviceRun]:
        """Run every device on its inputs (device order); returns one DeviceRun per device.

        Raises:
            AscendirError: a deadlock across devices, or any error of a device's run (the first
                device's in device order)."""
        if len(inputs) != self.size:
            raise AscendirError(f"a cluster of {self.size} devices needs {self.size} input dicts, got {len(inputs)}")
        n = len(self.devices)
        self.links = Links(self.topology, self.target.clock_hz, trace=self.trace)
        run = _Run(n, self.links, mirror=self.symmetric)
        results: list[DeviceRun | None] = [None] * n
        errors: list[BaseException | None] = [None] * n

        def body(d: int) -> None:
            dev = self.devices[d]
            dev.comm = _DeviceComm(run, d)
            try:
                run.sched.wait_turn(d)
                with np.errstate(all="ignore"):  # per thread: padded tiles divide zeros by zeros
                    results[d] = DeviceRun(*dev.run(inputs[d]))
                run.sched.finish(d)
            except _Abort:
                pass
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                errors[d] = e
                run.sched.fail(e)
            finally:
                dev.comm = None

        old = threading.stack_size()
        threading.stack_size(64 << 20)  # the interpreter's closures nest deeply on big kernels
        try:
            threads = [threading.Thread(target=body, args=(d,), name=f"ascendir-device-{d}") for d in range(n)]
        finally:
            threading.stack_size(old)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        err = run.sched.error
        if err is not None:
            raise err
        return results  # type: ignore[return-value]


def symmetric_ranks(modules: list[ModuleOp], topology: Topology) -> bool:
    """Whether simulating rank 0 alone gives every rank's timing: one module for every device,
    every device group of it spanning all `len(modules)` devices, each group's pairs joined by
    one link domain (so every rank sees the same links), and no expert-parallel launch (each rank
    routes its own rows)."""
    n = len(modules)
    if any(m is not modules[0] for m in modules):
        return False
    for op in modules[0].walk():
        block = op.attributes.get(MOE_BLOCK_ATTR)
        if block is not None and parse_ep_block(block.data) is not None:  # each rank routes its own rows
            return False
        g = op.properties.get("group")
        if isinstance(g, DeviceGroupAttr):
            if sorted(g.ranks) != list(range(n)):
                return False
            if len({topology.domain(a, b).name for a in g.ranks for b in g.ranks if a != b}) > 1:
                return False
    return True


def check_groups(module: ModuleOp, topology: Topology, devices: int) -> None:
    """Every device group of `module` (nn collectives, or the comm ops of its kernels) must be
    runnable on `topology` by `devices` devices.

    Raises:
        AscendirError: one line naming the op: a group larger than the topology, a device it
            lacks or does not join to the others, or a device outside the run."""
    seen = set()
    for top in module.ops:
        kernel = top.sym_name.data if isinstance(top, KernelOp) else None
        for op in top.walk():
            g = op.properties.get("group")
            if not isinstance(g, DeviceGroupAttr) or g.ranks in seen:
                continue
            seen.add(g.ranks)
            what = f"kernel @{kernel}" if kernel else op.name
            topology.check_group(g.ranks, what)
            if max(g.ranks) >= devices:
                raise AscendirError(f"{what}: group {list(g.ranks)} needs device {max(g.ranks)}, the run has {devices} devices")


def cluster_report(runs: list[DeviceRun], links: Links, reports: list[dict], devices: int | None = None) -> dict:
    """The multi-device part of a run report: devices, topology, total cycles (the slowest
    device), per device its cycles and bytes, per link bytes and busy fraction, per collective
    (comm kernel launch) its cycles on the slowest device, the exposed part and the wait.
    `devices` above len(runs): a symmetric run (rank 0 simulated; per device and links: its own)."""
    total = max((r["total_cycles"] for r in reports), default=0.0)
    colls: dict[tuple[str, int], dict] = {}
    for d, run in enumerate(runs):
        count: dict[str, int] = defaultdict(int)
        for rec in run.records:
            if rec.comm is None:
                continue
            k = (rec.name, count[rec.name])
            count[rec.name] += 1
            c = colls.setdefault(k, {"kernel": rec.name, "launch": k[1], "group_size": rec.comm["group_size"], "cycles": 0.0,
                                     "exposed_cycles": 0.0, "wait_cycles": 0.0, "bytes_sent": 0.0})
            c["cycles"] = max(c["cycles"], rec.comm["cycles"])
            c["exposed_cycles"] = max(c["exposed_cycles"], rec.comm["exposed_cycles"])
            c["wait_cycles"] = max(c["wait_cycles"], rec.comm["wait_cycles"])
            c["bytes_sent"] += rec.comm["bytes_sent"]
    comm_total = sum(c["cycles"] for c in colls.values())
    return {
        "devices": devices if devices is not None else len(runs),
        "symmetric": devices is not None and devices != len(runs),
        "topology": links.topology.name,
        "total_cycles": total,
        "per_device": [
            {"device": d, "total_cycles": r["total_cycles"], "bytes": r["bytes"],
             "comm_cycles": sum(rec.comm["cycles"] for rec in run.records if rec.comm is not None)}
            for d, (r, run) in enumerate(zip(reports, runs))
        ],
        "links": links.report(total),
        "collectives": sorted(colls.values(), key=lambda c: (c["kernel"], c["launch"])),
        "comm_cycles": comm_total,
        "exposed_comm_cycles": sum(c["exposed_cycles"] for c in colls.values()),
    }
