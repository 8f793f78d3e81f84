"""The ascend-dialect interpreter: numerics (numpy) + cycle timeline + report + trace.

    from ascendir.interpreter import simulate
    res = simulate(module, weights, {"x": x}, load_target("ascend910b2"))
    res.outputs["y"], res.report["total_cycles"], res.trace_events

`register_op(op_class, semantics=..., cost=...)` adds ops (see exec/registry.py).

Layout (each layer imports only those below it; op cycles come from ascendir.costmodel):
* exec/    what each op does: the closure compiler, tile-op numerics, scalar ops, the op registry,
           the nn reference interpreter
* timing/  per-core pipe and flag queues, held pipes, the chip L2
* accel/   speed-ups equal to the run without them, switched by `Accel`
* check/   races, invariants, capacity and unit placement
* sim/     one kernel launch (kernel.py), one device (chip.py), N devices (cluster.py)
* report/  the report dict and the Chrome trace
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp

from ascendir.costmodel import CostEnv, OpCost
from ascendir.errors import AscendirError
from ascendir.dialects.ascend import KernelOp
from ascendir.costmodel.memory import check_module_gm_fits
from ascendir.hardware.config import HardwareConfig, load_target
from ascendir.interpreter.accel import Accel
from ascendir.interpreter.accel.memo import LaunchMemo
from ascendir.interpreter.check.invariants import check
from ascendir.interpreter.exec.registry import register_op
from ascendir.interpreter.report.report import build_report
from ascendir.interpreter.report.trace import TraceWriter, cluster_trace_events
from ascendir.interpreter.sim.chip import ModuleProg, compile_module, gc_paused
from ascendir.hardware.topology import Link, Topology, load_topology
from ascendir.interpreter.sim.cluster import Cluster, cluster_report
from ascendir.weights import WeightStore

__all__ = [
    "simulate", "SimResult", "register_op", "OpCost", "CostEnv", "compile_module", "ModuleProg", "build_report", "Accel",
    "LaunchMemo", "Cluster", "Link", "Topology", "simulate_cluster",
]


@dataclass
class SimResult:
    """outputs: @main results by onnx.name (out{i} when unnamed); report: see report.py;
    trace_events: Chrome trace events (empty unless `trace=True`).

    Prints as one line per output (name, shape, dtype) and the headline, never whole arrays;
    `summary()` is that text, shown by rich (`__rich__`) and notebooks (`_repr_html_`) too."""

    outputs: dict[str, np.ndarray]
    report: dict
    trace_events: list[dict] = field(default_factory=list)

    def summary(self, top: int = 5) -> str:
        """The headline (latency, throughput, bound resource, launch overhead: report/headline.py),
        the cycles of the `top` costliest kernel kinds, and each output's shape and dtype."""
        from ascendir.interpreter.report.headline import by_kind, headline

        total = self.report["total_cycles"] or 1.0
        lines = headline(self.report)
        kinds = by_kind(self.report)[:top]
        if kinds:
            lines.append("time by kind: " + ", ".join(f"{kind} {100 * c / total:.0f} % ({n})" for kind, n, c in kinds))
        for name, arr in self.outputs.items():
            lines.append(f"output {name}: {'x'.join(map(str, arr.shape)) or 'scalar'} {arr.dtype}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        outs = ", ".join(f"{n}: {'x'.join(map(str, a.shape)) or 'scalar'} {a.dtype}" for n, a in self.outputs.items())
        return (f"SimResult({self.report['total_cycles']:,.0f} cycles on {self.report['target']}, outputs {{{outs}}}, "
                f"{len(self.trace_events)} trace events)")

    def __rich__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.summary())}</pre>"


def simulate(
    module: ModuleOp,
    weights: WeightStore | None,
    inputs: dict[str, np.ndarray],
    target: HardwareConfig | str | None = None,
    timing_only: bool = False,
    trace: bool | TraceWriter = False,
    extrapolate: bool = True,
    check_races: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
    accel: Accel | None = None,
    moe_routing: Mapping[str, np.ndarray] | None = None,
    launch_memo: LaunchMemo | None = None,
) -> SimResult:
    """Run `module` (ascend kernels + host func.func @main) on `target`.

    Inputs are keyed by the onnx.name of @main's arguments (arg{i} when unnamed) and cast to the
    argument memref dtypes. In timing-only mode no data moves (inputs may be empty; outputs are
    zero views), and loops in steady state are extrapolated unless `extrapolate=False` (see
    interpreter/accel/steady.py). Invariants are checked on every kernel launch. Races between the
    pipes of a core (interpreter/check/race.py) are checked with numerics, and in timing-only mode when
    `check_races=True`. `progress(done, total)` is called after each kernel launch (total: the
    ascend.launch ops of @main). `accel` picks the speed-ups (interpreter/accel; default all of
    them; `extrapolate=False` turns the steady-state ones off). `trace`: True keeps the Chrome
    trace in SimResult.trace_events; a TraceWriter (report/trace.py) gets each launch's slices as
    the launch ends (a file written as the run goes; the caller closes it with the report).
    `moe_routing`: in timing-only mode, MoE block (its TopK node, api/moe_report.py) -> TopK
    indices [tokens, k], the routing the grouped MatMuls follow (with numerics they follow the
    data); a block without one is routed uniformly and the report's `assumptions` say so.
    `launch_memo`: identical launches of earlier runs given the same memo (on the same target,
    with the same options) are reused too, exactly as within one run (accel/memo.py).

    Raises:
        AscendirError: unsupported op, capacity overflow (on chip, or the GM footprint above the
            target's HBM: plan-memory's, or for IR never planned the one it would give), deadlock, bad inputs, invariant violation.
    """
    if accel is not None and not isinstance(accel, Accel):
        raise AscendirError(f"accel must be an ascendir.interpreter.Accel (e.g. Accel(steady=False)), got {accel!r}")
    hw = load_target(target)
    # before any work: IR planned for another chip (a larger HBM), or never planned
    fp = check_module_gm_fits(module, hw)
    writer = trace if isinstance(trace, TraceWriter) else (TraceWriter(hw) if trace else None)
    # one pause of the cyclic collector (sim/chip.py gc_paused) from the compile to the program's
    # close: the program's objects are then freed (they hold no reference cycles) before the
    # collector resumes, rather than traversed by its passes
    with gc_paused(accel is None or accel.gc_pause):
        prog = compile_module(module, hw, weights, timing_only=timing_only, trace=writer is not None, extrapolate=extrapolate,
                              check_races=check_races, accel=accel, moe_routing=moe_routing, launch_memo=launch_memo)
        prog.trace_sink = writer
        prog.progress = progress
        try:
            with np.errstate(all="ignore"):  # padded tiles divide zeros by zeros; hardware does not trap
                outputs, records = prog.run(inputs)
            assumed = prog.assumed
        finally:  # (a run that raises leaves its program to reference counting too)
            prog.close()
        del prog
    for r in records:
        check(r, hw)
    report = build_report(records, hw)
    dtypes = {op.sym_name.data: kernel_dtype(op) for op in module.ops if isinstance(op, KernelOp)}
    for k in report["kernels"]:
        k["dtype"] = dtypes.get(k["name"])
    if fp is not None:
        report["gm_footprint"] = fp
    report["assumptions"] += assumed
    return SimResult(outputs, report, writer.events if writer is not None and writer.events is not None else [])


def simulate_cluster(
    modules: list[ModuleOp],
    weights: list[WeightStore | None],
    inputs: list[dict[str, np.ndarray]],
    target: HardwareConfig | str | None = None,
    topology: Topology | str | None = None,
    timing_only: bool = False,
    trace: bool = False,
    accel: Accel | None = None,
    symmetric: bool = False,
    moe_routing=None,
) -> list[SimResult]:
    """Run device d's `modules[d]` with `weights[d]` on `inputs[d]`, the devices joined by
    `topology` (sim/cluster.py; a name or file, default the 8-NPU Atlas 800 A2). An SPMD run
    passes the same module for every device.

    Returns one SimResult per device. Each report is that device's (kernels, bytes, pipes) with
    `total_cycles` / `total_seconds` of the whole cluster (its slowest device) and a `cluster`
    section (cluster.cluster_report: per device, per link, per collective); the trace events
    (`trace=True`, on the first result) hold a process per device and one for the links.
    `symmetric` (timing-only, one module whose collectives span every device over one kind of
    link: sim/cluster.symmetric_ranks) simulates rank 0 alone, its peers mirrored: one result.
    `moe_routing` (timing-only): MoE block name -> its TopK indices, for every device (as simulate).

    Raises:
        AscendirError: as simulate, plus a deadlock across devices, a group the topology cannot
            run, more devices than the topology has.
    """
    hw = load_target(target)
    topo = load_topology(topology)
    for m in modules:
        check_module_gm_fits(m, hw)
    cl = Cluster(modules, weights, hw, topo, timing_only=timing_only, accel=accel, symmetric=symmetric, moe_routing=moe_routing)
    cl.trace = trace
    try:
        runs = cl.run(inputs)
    finally:
        for dev in cl.devices:
            dev.close()
    reports = []
    for m, run in zip(modules, runs):
        for r in run.records:
            check(r, hw)
        rep = build_report(run.records, hw)
        dtypes = {op.sym_name.data: kernel_dtype(op) for op in m.ops if isinstance(op, KernelOp)}
        for k in rep["kernels"]:
            k["dtype"] = dtypes.get(k["name"])
        reports.append(rep)
    summary = cluster_report(runs, cl.links, reports, len(modules))
    results = []
    for rep, run in zip(reports, runs):
        rep["total_cycles"] = summary["total_cycles"]
        rep["total_seconds"] = summary["total_cycles"] / hw.clock_hz
        rep["cluster"] = summary
        results.append(SimResult(run.outputs, rep))
    if trace:
        results[0].trace_events = cluster_trace_events([r.records for r in runs], cl.links.spans or {}, hw)
    return results


def kernel_dtype(op: KernelOp) -> str | None:
    """The element type a kernel's data moves in (the report's `dtype`): the narrowest float
    element type of its GM arguments (an f16 matmul with an f32 split-K workspace is "f16"; fp32
    accumulation in L0C is implied for every float kernel), else the first argument's element
    type; None without memref arguments."""
    rank = {"f16": 0, "bf16": 0, "f32": 1, "f64": 2}
    elems = [str(t.element_type) for t in op.function_type.inputs.data if isinstance(t, MemRefType)]
    floats = sorted((e for e in elems if e in rank), key=lambda e: rank[e])
    return floats[0] if floats else (elems[0] if elems else None)
