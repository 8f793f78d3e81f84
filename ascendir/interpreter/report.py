"""The simulation report: per-kernel and chip totals as a JSON-ready dict.

Keys (units): cycles of the AI Core clock, seconds, bytes, flops, bytes/s.
    target, clock_hz, total_cycles, total_seconds, flops, bytes {level: bytes},
    pipe_busy {pipe: cycles summed over cores}, pipe_utilization {pipe: busy / (cycles × cores)},
    gm_bandwidth_Bps, cube_peak_fraction, kernels [...], model (approximations in force).
Each kernel: name, block_dim, core_type, cores_used, cycles, seconds, launch_cycles, pipe_busy,
    (pipe_busy_by_unit for mixed kernels), pipe_utilization, bytes, flops, gm_bandwidth_Bps,
    gm_share_Bpc (per-stream GM rate cap), compute_bound_cycles, bandwidth_bound_cycles,
    cube_peak_fraction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter.cost import LEVELS
from ascendir.interpreter.executor import FLOPS, KernelRecord
from ascendir.interpreter.invariants import bounds

MODEL_NOTES = (
    "GM bandwidth: each GM stream (core x engine) gets min(path rate, HBM bandwidth / concurrent streams); "
    "no L2 model yet (every GM access at HBM rate)",
    "pipes are in-order queues; scalar issue is in program order without queue-depth limit",
    "cube peak fraction uses the f16 peak (2 x 16 x 16 x 16 MAC per cycle per AIC)",
)


@dataclass
class KernelReport:
    name: str
    block_dim: int
    core_type: str
    cores_used: int
    cycles: float
    seconds: float
    launch_cycles: float
    pipe_busy: dict[str, float]
    pipe_busy_by_unit: dict[str, float] | None
    pipe_utilization: dict[str, float]
    bytes: dict[str, float]
    flops: float
    gm_bandwidth_Bps: float
    gm_share_Bpc: float
    compute_bound_cycles: float
    bandwidth_bound_cycles: float
    cube_peak_fraction: float

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        if d["pipe_busy_by_unit"] is None:
            del d["pipe_busy_by_unit"]
        return d


def _plain(label: str) -> str:
    return label.split(".", 1)[-1]


def kernel_report(rec: KernelRecord, target: HardwareConfig) -> KernelReport:
    cycles = rec.cycles
    by_label: dict[str, float] = {}
    for i, label in enumerate(rec.pipe_labels):
        b = sum(c.busy[i] for c in rec.cores)
        if b:
            by_label[label] = b
    busy: dict[str, float] = {}
    for label, b in by_label.items():
        busy[_plain(label)] = busy.get(_plain(label), 0.0) + b
    ncores = len(rec.cores)
    slots = ncores * (2 if any("." in lb for lb in rec.pipe_labels) else 1)
    util = {p: b / (cycles * slots) if cycles else 0.0 for p, b in busy.items()}
    byt = {lv: rec.acct[i] for i, lv in enumerate(LEVELS) if rec.acct[i]}
    flops = rec.acct[FLOPS]
    gm = byt.get("gm_read", 0.0) + byt.get("gm_write", 0.0)
    seconds = cycles / target.clock_hz
    compute, bandwidth = bounds(rec, target)
    return KernelReport(
        name=rec.name,
        block_dim=rec.block_dim,
        core_type=rec.core_type,
        cores_used=ncores,
        cycles=cycles,
        seconds=seconds,
        launch_cycles=rec.launch_cycles,
        pipe_busy=busy,
        pipe_busy_by_unit=by_label if any("." in lb for lb in rec.pipe_labels) else None,
        pipe_utilization=util,
        bytes=byt,
        flops=flops,
        gm_bandwidth_Bps=gm / seconds if seconds else 0.0,
        gm_share_Bpc=rec.gm_share,
        compute_bound_cycles=compute,
        bandwidth_bound_cycles=bandwidth,
        cube_peak_fraction=flops / (cycles * target.peak_flops_per_cycle("f16")) if cycles else 0.0,
    )


@dataclass
class Report:
    target: str
    clock_hz: float
    kernels: list[KernelReport] = field(default_factory=list)

    def to_dict(self) -> dict:
        total = sum(k.cycles for k in self.kernels)
        seconds = total / self.clock_hz
        byt: dict[str, float] = {}
        busy: dict[str, float] = {}
        slot_cycles: dict[str, float] = {}
        for k in self.kernels:
            for lv, b in k.bytes.items():
                byt[lv] = byt.get(lv, 0.0) + b
            for p, b in k.pipe_busy.items():
                busy[p] = busy.get(p, 0.0) + b
                slot_cycles[p] = slot_cycles.get(p, 0.0) + b / k.pipe_utilization[p] if k.pipe_utilization.get(p) else slot_cycles.get(p, 0.0)
        flops = sum(k.flops for k in self.kernels)
        gm = byt.get("gm_read", 0.0) + byt.get("gm_write", 0.0)
        peak = self._peak_per_cycle
        return {
            "target": self.target,
            "clock_hz": self.clock_hz,
            "total_cycles": total,
            "total_seconds": seconds,
            "flops": flops,
            "bytes": byt,
            "pipe_busy": busy,
            "pipe_utilization": {p: busy[p] / slot_cycles[p] if slot_cycles.get(p) else 0.0 for p in busy},
            "gm_bandwidth_Bps": gm / seconds if seconds else 0.0,
            "cube_peak_fraction": flops / (total * peak) if total else 0.0,
            "kernels": [k.to_dict() for k in self.kernels],
            "model": list(MODEL_NOTES),
        }

    _peak_per_cycle: float = 1.0


def build_report(records: list[KernelRecord], target: HardwareConfig) -> dict:
    rep = Report(target.name, target.clock_hz, [kernel_report(r, target) for r in records])
    rep._peak_per_cycle = target.peak_flops_per_cycle("f16")
    return rep.to_dict()
