"""Render a simulation report (the dict of `SimResult.report`) as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

LEVELS = ("gm_read", "l2_hit", "gm_write", "l1", "l0a", "l0b", "l0c", "ub")
PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")


def bytes_text(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def _l2(byts: dict) -> str:
    """L2-hit bytes of a kernel's GM reads and their share ("-" without GM reads)."""
    rd = byts.get("gm_read", 0)
    if not rd:
        return "-"
    hit = byts.get("l2_hit", 0)
    return f"{bytes_text(hit)} ({100 * hit / rd:.0f} %)"


def render(report: dict, console: Console, top: int = 25) -> None:
    """Print the summary, per-kernel table (the `top` costliest kernels), pipe busy % and bytes
    per memory level."""
    total = report["total_cycles"]
    console.print(
        f"[bold]target[/] {report['target']}   [bold]total[/] {total:,.0f} cycles = "
        f"{report['total_seconds'] * 1e6:,.2f} µs at {report['clock_hz'] / 1e9:.2f} GHz   "
        f"[bold]kernels[/] {len(report['kernels'])}"
    )
    bw = report.get("gm_bandwidth_Bps")
    peak = report.get("cube_peak_fraction")
    extra = []
    if bw is not None:
        extra.append(f"achieved GM bandwidth {bw / 1e9:,.1f} GB/s")
    if peak is not None:
        extra.append(f"cube peak {100 * peak:.2f} %")
    if report.get("bytes", {}).get("gm_read"):
        extra.append(f"L2 hits {bytes_text(report['bytes'].get('l2_hit', 0))} ({100 * report.get('l2_hit_rate', 0.0):.1f} % of GM reads)")
    if extra:
        console.print("   ".join(extra))
    search = report.get("tiling_search")
    if isinstance(search, dict) and search:  # `ascendir run`: what choose-tiling scored
        parts = [f"{v.get('ops', 0)} {kind}{'s' if v.get('ops', 0) != 1 else ''} ({v.get('searches', 0)} searched, {v.get('candidates', 0):,} candidates)"
                 for kind, v in search.items() if isinstance(v, dict)]
        secs = sum(v.get("seconds", 0.0) for v in search.values() if isinstance(v, dict))
        console.print(f"[bold]choose-tiling[/] {', '.join(parts)} scored in {secs:.3f} s")
    for d in report.get("declined") or []:  # fused regions their template did not take
        if isinstance(d, dict):
            console.print(f"[bold]declined[/] {d.get('region')}: {d.get('reason')} (lowered op by op)")

    kernels = sorted(report["kernels"], key=lambda k: -k["cycles"])
    t = Table(title=f"kernels (top {min(top, len(kernels))} of {len(kernels)} by cycles)")
    for col in ("kernel", "cores", "cycles", "%", "cube %", "GM read", "L2 hit", "GM write"):
        t.add_column(col, justify="left" if col == "kernel" else "right")
    for k in kernels[:top]:
        t.add_row(
            k["name"],
            f"{k.get('block_dim', '')} {k.get('core_type', '')}",
            f"{k['cycles']:,.0f}",
            f"{100 * k['cycles'] / total:.1f}" if total else "-",
            f"{100 * k['cube_peak_fraction']:.1f}" if k.get("cube_peak_fraction") is not None else "-",
            bytes_text(k["bytes"].get("gm_read", 0)),
            _l2(k["bytes"]),
            bytes_text(k["bytes"].get("gm_write", 0)),
        )
    console.print(t)

    busy = report.get("pipe_busy", {})
    pipes = Table(title="pipe busy (summed over cores, % of total cycles x cores used)")
    pipes.add_column("pipe")
    pipes.add_column("busy cycles", justify="right")
    pipes.add_column("busy %", justify="right")
    util = report.get("pipe_utilization", {})
    for p in PIPES:
        if p in busy:
            pipes.add_row(p, f"{busy[p]:,.0f}", f"{100 * util[p]:.1f}" if p in util else "-")
    console.print(pipes)

    levels = Table(title="bytes per memory level")
    levels.add_column("level")
    levels.add_column("bytes", justify="right")
    for lvl in LEVELS:
        if lvl in report.get("bytes", {}):
            levels.add_row(lvl, bytes_text(report["bytes"][lvl]))
    console.print(levels)

    fp = report.get("gm_footprint")
    if fp:
        gm = Table(title="peak GM footprint (plan-memory)")
        gm.add_column("part")
        gm.add_column("bytes", justify="right")
        for part in ("weights", "inputs", "outputs", "arena", "total"):
            gm.add_row(part, bytes_text(fp.get(part, 0)))
        console.print(gm)
        console.print(f"live peak (lower bound of the total) {bytes_text(fp.get('live_peak', 0))}")
