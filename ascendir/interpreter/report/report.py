"""The simulation report: per-kernel and chip totals as a JSON-ready dict.

Keys (units): cycles of the AI Core clock, seconds, bytes, flops, bytes/s.
    target, clock_hz, total_cycles, total_seconds, flops, tile_ops, bytes {level: bytes},
    pipe_busy {pipe: cycles summed over cores}, pipe_utilization {pipe: busy / (cycles × cores)},
    gm_bandwidth_Bps, l2_hit_rate (bytes of GM reads served by L2 / GM bytes read), cube_peak_fraction,
    kernels [...], assumptions (the cost model's approximations in force), schema_version, tool
    {name, version}. The whole report is described, field by field, by api/report.schema.json.
Each kernel: name, block_dim, core_type, cores_used, cycles, seconds, launch_cycles, pipe_busy,
    (pipe_busy_by_unit for mixed kernels), pipe_utilization, bytes, flops, tile_ops (DMA, cube,
    vector ops executed), vector_ops {rate class: element-ops of vector instructions; "f16" for
    elements of at most 2 bytes, "f32" for wider ones: the keys of ceilings.vector_flops_per_s},
    cube_peak_flops_per_s (chip cube peak for the dtypes of the kernel's mmads: flops over their
    cycles at each dtype's peak, on every AIC; absent without flops), gm_bandwidth_Bps,
    gm_share_Bpc (per-core GM rate cap), bandwidth_floor_applied (the kernel was stretched to the
    chip bandwidth bound), compute_bound_cycles, bandwidth_bound_cycles,
    cube_peak_fraction, extrapolated_iterations (timing-only loop iterations added as
    steady-state deltas instead of run, interpreter/accel/steady.py).
run_id: digest of the target, its clock and every launch's (name, block_dim, cycles): the trace
    of the same run carries it (trace.trace_document, "otherData"), so `ascendir report` can tell
    a trace of another run.
ceilings (the roofline of the chip, from its TOML): cube_flops_per_s {dtype: chip cube peak},
    vector_flops_per_s {f16, f32: one op per lane per cycle on every vector core}, hbm_Bps (nominal),
    hbm_sustained_Bps (hbm_Bps x memory.hbm_efficiency: the HBM roof a kernel reaches), l2_Bps.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ascendir.hardware.config import HardwareConfig
from ascendir.costmodel import LEVELS
from ascendir.interpreter.state import CUBE_PEAK_CYCLES, FLOPS, OPS, VECTOR_OPS, KernelRecord
from ascendir.interpreter.check.invariants import bounds

SCHEMA_VERSION = 1  # major version of api/report.schema.json: bump when a key is removed or retyped

MODEL_NOTES = (
    "GM bandwidth: each core group's GM path runs at min(path rate, HBM bandwidth / groups used); a kernel takes "
    "at least max(GM bytes / L2 bandwidth, HBM bytes / sustained HBM bandwidth = hbm_efficiency x peak) (floor, "
    "a hierarchical roofline); "
    "L2 model 'tile' = a GM tile read again within l2_bytes / HBM bandwidth cycles of its last access hits "
    "(L2 read rate, 50-cycle latency), 'none' = every GM read at HBM rate, 'hit' = every GM read hits L2",
    "set_flag waits until its source pipe has completed everything before it (GM latency included)",
    "flops are cube flops executed (partial tiles count as whole fractals)",
    "pipes are in-order queues; scalar issue is in program order without queue-depth limit",
    "cube peak fraction uses the f16 peak (2 x 16 x 16 x 16 MAC per cycle per AIC)",
    "timing-only: loops in a periodic steady state are extrapolated (per-period deltas of clocks, bytes, flops; "
    "GM accesses of skipped iterations replayed into L2 at extrapolated times; see interpreter/accel/steady.py)",
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
    tile_ops: int
    vector_ops: dict[str, float]
    gm_bandwidth_Bps: float
    gm_share_Bpc: float
    bandwidth_floor_applied: bool
    compute_bound_cycles: float
    bandwidth_bound_cycles: float
    cube_peak_fraction: float
    extrapolated_iterations: int = 0
    cube_peak_flops_per_s: float | None = None
    node: str | None = None  # the ONNX node(s) the launch computes
    pipe_capacity: dict[str, float] = field(default_factory=dict)  # pipe-cycles available (not reported)
    # what the launch adds to the device's time (not reported): its cycles, or for a comm kernel
    # in the background (MC2, timing/comm_stream.py) only its exposed part
    clock_cycles: float = 0.0

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        del d["pipe_capacity"], d["clock_cycles"]
        for key in ("pipe_busy_by_unit", "cube_peak_flops_per_s", "node"):
            if d[key] is None:
                del d[key]
        return d


def rate(x: float) -> float:
    """A ratio that is at most 1 in exact arithmetic: a sum of float cycles may put it 1 ulp above
    (1.0000000000000004), which the report schema's [0, 1] rejects. Larger excesses stay, to show."""
    return 1.0 if 1.0 < x <= 1.0 + 1e-9 else x


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
    # pipe-cycles available: cycles x cores x units that have the pipe (mixed: both have S/MTE2)
    units = {p: sum(1 for lb in by_label if _plain(lb) == p) for p in busy}
    capacity = {p: cycles * ncores * units[p] for p in busy}
    util = {p: rate(b / capacity[p]) if capacity[p] else 0.0 for p, b in busy.items()}
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
        tile_ops=int(rec.acct[OPS]),
        vector_ops={k: rec.acct[i] for k, i in VECTOR_OPS.items() if rec.acct[i]},
        gm_bandwidth_Bps=gm / seconds if seconds else 0.0,
        gm_share_Bpc=rec.gm_share,
        bandwidth_floor_applied=rec.bandwidth_floor > rec.timeline_cycles,
        compute_bound_cycles=compute,
        bandwidth_bound_cycles=bandwidth,
        cube_peak_fraction=rate(flops / (cycles * target.peak_flops_per_cycle("f16"))) if cycles else 0.0,
        extrapolated_iterations=rec.extrapolated_iterations,
        cube_peak_flops_per_s=flops / rec.acct[CUBE_PEAK_CYCLES] * target.num_aic * target.clock_hz if rec.acct[CUBE_PEAK_CYCLES] else None,
        pipe_capacity=capacity,
        node=rec.node,
        clock_cycles=rec.comm["exposed_cycles"] if rec.comm is not None and rec.comm.get("background") else cycles,
    )


@dataclass
class Report:
    target: str
    clock_hz: float
    peak_flops_per_cycle: float  # chip f16 cube peak
    l2_model: str
    kernels: list[KernelReport] = field(default_factory=list)

    def to_dict(self) -> dict:
        total = sum(k.clock_cycles for k in self.kernels)
        seconds = total / self.clock_hz
        byt: dict[str, float] = {}
        busy: dict[str, float] = {}
        capacity: dict[str, float] = {}
        for k in self.kernels:
            for lv, b in k.bytes.items():
                byt[lv] = byt.get(lv, 0.0) + b
            for p, b in k.pipe_busy.items():
                busy[p] = busy.get(p, 0.0) + b
                capacity[p] = capacity.get(p, 0.0) + k.pipe_capacity[p]
        flops = sum(k.flops for k in self.kernels)
        tile_ops = sum(k.tile_ops for k in self.kernels)
        gm = byt.get("gm_read", 0.0) + byt.get("gm_write", 0.0)
        peak = self.peak_flops_per_cycle
        return {
            "target": self.target,
            "clock_hz": self.clock_hz,
            "total_cycles": total,
            "total_seconds": seconds,
            "flops": flops,
            "tile_ops": tile_ops,
            "bytes": byt,
            "pipe_busy": busy,
            "pipe_utilization": {p: rate(busy[p] / capacity[p]) if capacity.get(p) else 0.0 for p in busy},
            "gm_bandwidth_Bps": gm / seconds if seconds else 0.0,
            "l2_hit_rate": rate(byt.get("l2_hit", 0.0) / byt["gm_read"]) if byt.get("gm_read") else 0.0,
            "cube_peak_fraction": rate(flops / (total * peak)) if total else 0.0,
            "kernels": [k.to_dict() for k in self.kernels],
            "l2_model": self.l2_model,
            "assumptions": list(MODEL_NOTES),
        }


def ceilings(target: HardwareConfig) -> dict:
    """Compute and bandwidth ceilings of `target` (flops/s, bytes/s): cube peak per dtype of the
    cube's k_per_cycle table, vector peak (vector bytes/cycle / element size on every vector core,
    reference §1.1 "peak vector"), HBM bandwidth, nominal and sustained (× memory.hbm_efficiency, the
    HBM roof of the simulated bandwidth floor), and L2 bandwidth (HBM × l2_bw_over_hbm)."""
    vec = target.num_aiv * target.vector.bytes_per_cycle * target.vector_clock_hz
    return {
        "cube_flops_per_s": {dt: target.peak_flops(dt) for dt in target.cube.k_per_cycle},
        "vector_flops_per_s": {"f16": vec / 2, "f32": vec / 4},
        "hbm_Bps": target.memory.hbm_bw_Bps,
        "hbm_sustained_Bps": target.memory.hbm_bw_Bps * target.memory.hbm_efficiency,
        "l2_Bps": target.memory.hbm_bw_Bps * target.memory.l2_bw_over_hbm,
    }


def run_id(target: HardwareConfig, kernels: list[KernelReport]) -> str:
    """16 hex digits identifying a run's results (see the module docstring)."""
    launches = [(k.name, k.block_dim, k.cycles) for k in kernels]
    return hashlib.sha256(json.dumps([target.name, target.clock_hz, launches]).encode()).hexdigest()[:16]


def build_report(records: list[KernelRecord], target: HardwareConfig) -> dict:
    kernels = [kernel_report(r, target) for r in records]
    rep = Report(target.name, target.clock_hz, target.peak_flops_per_cycle("f16"), target.memory.l2_model, kernels)
    return {"schema_version": SCHEMA_VERSION, "tool": tool(), **rep.to_dict(), "ceilings": ceilings(target),
            "run_id": run_id(target, kernels)}


def tool() -> dict:
    """{name, version} of what writes the report (the installed package's version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("ascendir")
    except PackageNotFoundError:  # run from a source tree never installed
        v = "unknown"
    return {"name": "ascendir", "version": v}
