"""The headline of a report and its breakdowns, computed from the report dict alone (so `ascendir
report` shows them for a saved file as `run` does).

Bound resource of a launch: the one it needs the largest share of its cycles at peak:
* cube: M pipe busy / (cycles x cores used) (pipe_utilization.M),
* vector: V pipe busy likewise (pipe_utilization.V),
* HBM: (GM bytes read - L2 hits + GM bytes written) / ceilings.hbm_sustained_Bps (the nominal
  bandwidth x memory.hbm_efficiency, what a kernel can reach; hbm_Bps in a report without it),
  in cycles / cycles,
* L2: L2-hit bytes / ceilings.l2_Bps likewise,
* launch: launch_cycles / cycles.
A launch that needs none of them for half its cycles or more is bound by `latency` (dependency
chains, pipe hand-offs and copy latencies, not a rate). The run's bound resource is the one whose
launches take the largest share of the total cycles.
The kind of a kernel is its name without the trailing `_<n>` (`matmul_epilogue_3` ->
`matmul_epilogue`): the op family or fused kind whose template emitted it.
"""

from __future__ import annotations

import re

RESOURCES = ("cube", "vector", "HBM", "L2", "launch", "latency")
LATENCY_BELOW = 0.5  # a launch needing no resource for this share of its cycles is latency-bound


def kernel_kind(name: str) -> str:
    return re.sub(r"_\d+$", "", name)


def bound(kernel: dict, report: dict) -> tuple[str, float]:
    """(resource, share of the launch's cycles it needs at peak) of one launch: for `latency`, the
    share of the resource it needs most; ("-", 0) for a launch of 0 cycles."""
    cycles = kernel["cycles"]
    if not cycles:
        return "-", 0.0
    util = kernel.get("pipe_utilization", {})
    shares = {"cube": util.get("M", 0.0), "vector": util.get("V", 0.0),
              "launch": kernel.get("launch_cycles", 0.0) / cycles}
    ceilings = report.get("ceilings")
    if ceilings:
        b = kernel["bytes"]
        hit = b.get("l2_hit", 0.0)
        hbm = max(0.0, b.get("gm_read", 0.0) - hit) + b.get("gm_write", 0.0)
        shares["HBM"] = hbm / ceilings.get("hbm_sustained_Bps", ceilings["hbm_Bps"]) * report["clock_hz"] / cycles
        shares["L2"] = hit / ceilings["l2_Bps"] * report["clock_hz"] / cycles
    resource, share = max(shares.items(), key=lambda kv: kv[1])
    return ("latency", share) if share < LATENCY_BELOW else (resource, share)


def bound_shares(report: dict) -> list[tuple[str, float]]:
    """(resource, share of total cycles in launches it bounds), largest first."""
    total = report["total_cycles"] or 1.0
    by: dict[str, float] = {}
    for k in report["kernels"]:
        r, _ = bound(k, report)
        by[r] = by.get(r, 0.0) + k["cycles"]
    return sorted(((r, c / total) for r, c in by.items() if c), key=lambda t: -t[1])


def by_kind(report: dict) -> list[tuple[str, int, float]]:
    """(kind, launches, cycles), most cycles first."""
    out: dict[str, tuple[int, float]] = {}
    for k in report["kernels"]:
        n, c = out.get(kernel_kind(k["name"]), (0, 0.0))
        out[kernel_kind(k["name"])] = (n + 1, c + k["cycles"])
    return sorted(((kind, n, c) for kind, (n, c) in out.items()), key=lambda t: -t[2])


def grouped(report: dict) -> list[dict]:
    """Launches of the same kernel as one row: name, launches, cycles and bytes summed, the
    ONNX nodes of its launches (distinct, in launch order), the bound resource of its costliest
    launch; most cycles first."""
    rows: dict[str, dict] = {}
    for k in report["kernels"]:
        row = rows.setdefault(k["name"], {"name": k["name"], "launches": 0, "cycles": 0.0, "bytes": {}, "flops": 0.0,
                                          "block_dim": k.get("block_dim"), "core_type": k.get("core_type"), "_peak": -1.0,
                                          "nodes": []})
        row["launches"] += 1
        if k.get("node") and k["node"] not in row["nodes"]:
            row["nodes"].append(k["node"])
        row["cycles"] += k["cycles"]
        row["flops"] += k.get("flops", 0.0)
        for lv, b in k["bytes"].items():
            row["bytes"][lv] = row["bytes"].get(lv, 0.0) + b
        if k["cycles"] > row["_peak"]:
            row["_peak"] = k["cycles"]
            row["bound"] = bound(k, report)
    out = sorted(rows.values(), key=lambda r: -r["cycles"])
    for r in out:
        del r["_peak"]
    return out


def throughput(report: dict) -> list[str]:
    """Inferences/s (and tokens/s when the run's workload has a sequence axis) as text."""
    secs = report["total_seconds"]
    work = report.get("workload") or {}
    if not secs:
        return []
    batch = work.get("batch") or 1  # 0: a model of empty inputs still runs once
    out = [f"{batch / secs:,.0f} inferences/s" + (f" (batch {batch})" if batch != 1 else "")]
    if work.get("tokens"):
        out.append(f"{work['tokens'] / secs:,.0f} tokens/s")
    return out


def headline(report: dict) -> list[str]:
    """The first lines of the report: latency and throughput, the bound resource with its share
    of time, the launch overhead's share."""
    total = report["total_cycles"]
    launches = len(report["kernels"])
    kernels = len({k["name"] for k in report["kernels"]})
    lines = [f"latency {report['total_seconds'] * 1e6:,.2f} µs: total {total:,.0f} cycles at {report['clock_hz'] / 1e9:.2f} GHz "
             f"on {report['target']}"]
    tp = throughput(report)
    if tp:
        lines.append("throughput " + ", ".join(tp))
    shares = bound_shares(report)
    if shares:
        first, rest = shares[0], shares[1:4]
        more = "; then " + ", ".join(f"{r} {100 * s:.0f} %" for r, s in rest) if rest else ""
        lines.append(f"bound by {first[0]} {100 * first[1]:.0f} % of the time{more}")
    launch = sum(k.get("launch_cycles", 0.0) for k in report["kernels"])
    if total:
        lines.append(f"{launches} launches of {kernels} kernels; launch overhead {100 * launch / total:.1f} % of the time")
    return lines
