"""Render a simulation report (the dict of `SimResult.report`) as rich tables."""

from __future__ import annotations

from rich import box
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


def compact_bytes(n: float) -> str:
    """Bytes in at most 6 characters (`1.2M`, `194K`, `40B`): the per-kernel table at 80 columns."""
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.0f}{unit}" if unit == "B" or abs(n) >= 100 else f"{n:.1f}{unit}"
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
    """Print the verdict (when the run had expected outputs), the headline (latency,
    throughput, bound resource, launch overhead:
    interpreter/report/headline.py), time by kernel kind, the kernels grouped by kernel (the `top` costliest),
    pipe busy %, bytes per memory level and the GM footprint. At most `console.width` columns:
    below 100 the per-kernel table drops its L2-hit and cube % columns, never a kernel's name."""
    _verdict(report, console)
    _headline(report, console)
    _by_kind(report, console)
    _kernels(report, console, top)
    _pipes(report, console)
    _levels(report, console)
    _footprint(report, console)
    _cluster(report, console)


def _verdict(report: dict, console: Console) -> None:
    """The first lines: were the outputs right? (only when the run had expected outputs)"""
    verdict = report.get("verdict")
    if verdict:
        from ascendir.api.verdict import lines as verdict_lines

        style = "bold green" if verdict["status"] == "pass" else "bold red"
        for i, line in enumerate(verdict_lines(verdict)):
            # the head line names the reference file: a path is not broken over lines
            console.print(line, style=style if i == 0 else None, highlight=False, soft_wrap=i == 0)


def _headline(report: dict, console: Console) -> None:
    """Latency, throughput, bound resource (interpreter/report/headline.py), bandwidth, cube peak, L2
    hits, what choose-tiling scored and the declined regions."""
    from ascendir.interpreter.report.headline import headline

    lines = headline(report)
    console.print(f"[bold]{lines[0]}[/]", highlight=False)
    for line in lines[1:]:
        console.print(line, highlight=False)
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
        console.print("   ".join(extra), highlight=False)
    search = report.get("tiling_search")
    if isinstance(search, dict) and search:  # `ascendir run`: what choose-tiling scored
        parts = [f"{v.get('ops', 0)} {kind}{'s' if v.get('ops', 0) != 1 else ''} ({v.get('searches', 0)} searched, {v.get('candidates', 0):,} candidates)"
                 for kind, v in search.items() if isinstance(v, dict)]
        secs = sum(v.get("seconds", 0.0) for v in search.values() if isinstance(v, dict))
        console.print(f"[bold]choose-tiling[/] {', '.join(parts)} scored in {secs:.3f} s", highlight=False)
    for d in report.get("declined") or []:  # fused regions their template did not take
        if isinstance(d, dict):
            console.print(f"[bold]declined[/] {d.get('region')}: {d.get('reason')} (lowered op by op)", highlight=False)
    if isinstance(report.get("moe"), list):  # MoE blocks: the routing of this run
        from ascendir.api.moe_report import moe_lines

        for line in moe_lines(report["moe"]):
            console.print(line, highlight=False)


def _by_kind(report: dict, console: Console) -> None:
    """Time by op family / fused kind (the 12 costliest, the rest summed)."""
    from ascendir.interpreter.report.headline import by_kind

    total = report["total_cycles"]
    kinds = by_kind(report)
    t = Table(title="time by kind (op family or fused kind)", box=box.SIMPLE_HEAD)
    for col in ("kind", "launches", "cycles", "%"):
        t.add_column(col, justify="left" if col == "kind" else "right", no_wrap=True)
    for kind, n, cycles in kinds[:12]:
        t.add_row(kind, str(n), f"{cycles:,.0f}", f"{100 * cycles / total:.1f}" if total else "-")
    if len(kinds) > 12:
        rest = kinds[12:]
        t.add_row(f"({len(rest)} more)", str(sum(r[1] for r in rest)), f"{sum(r[2] for r in rest):,.0f}",
                  f"{100 * sum(r[2] for r in rest) / total:.1f}" if total else "-")
    console.print(t)


def _node_tail(name: str, room: int) -> str:
    """The trailing components of an exporter's node path that fit `room` characters (the end
    names the node: /model/layers.0/mlp/down_proj/MatMul → layers.0/mlp/down_proj/MatMul)."""
    if len(name) <= room:
        return name
    parts = name.split("/")
    out = parts[-1]
    for p in reversed(parts[:-1]):
        if len(p) + 1 + len(out) > room:
            break
        out = f"{p}/{out}"
    return out[-room:]


def _kernels(report: dict, console: Console, top: int) -> None:
    """The `top` costliest kernels, launches of one kernel grouped; below 100 columns without
    the L2-hit and cube % columns, from 140 with the ONNX nodes of each kernel's launches."""
    from ascendir.interpreter.report.headline import grouped

    total = report["total_cycles"]
    rows = grouped(report)
    wide = console.width >= 100
    size = bytes_text if wide else compact_bytes
    t = Table(title=f"kernels (top {min(top, len(rows))} of {len(rows)}; n launches summed)", box=box.SIMPLE_HEAD,
              pad_edge=False, collapse_padding=True)
    names = max((len(r["name"]) for r in rows[:top]), default=6)
    t.add_column("kernel", min_width=min(names, 32), overflow="fold")
    cols = ["n", "cores", "cycles", "%", "bound", "GM read"] + (["L2 hit"] if wide else []) + ["GM write"] + (["cube %"] if wide else [])
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    nodes = console.width >= 140 and any(r["nodes"] for r in rows[:top])
    if nodes:
        t.add_column("ONNX nodes", no_wrap=True, max_width=40)
    for r in rows[:top]:
        resource, share = r["bound"]
        cells = [str(r["launches"]), f"{r.get('block_dim', '')} {r.get('core_type', '')}", f"{r['cycles']:,.0f}",
                 f"{100 * r['cycles'] / total:.1f}" if total else "-", f"{resource} {100 * share:.0f}%" if wide else resource,
                 size(r["bytes"].get("gm_read", 0))]
        if wide:
            cells.append(_l2(r["bytes"]))
        cells.append(size(r["bytes"].get("gm_write", 0)))
        if wide:
            peak_f = report.get("ceilings", {}).get("cube_flops_per_s", {}).get("f16")
            cells.append(f"{100 * r['flops'] / (r['cycles'] / report['clock_hz'] * peak_f):.1f}"
                         if peak_f and r["cycles"] and r["flops"] else "-")
        if nodes:
            first = r["nodes"][0].split(", ")[0] if r["nodes"] else "-"
            more = sum(len(n.split(", ")) for n in r["nodes"]) - 1
            tail = f" +{more}" if more > 0 else ""
            cells.append(_node_tail(first, 40 - len(tail)) + tail)
        t.add_row(r["name"], *cells)
    console.print(t)


def _pipes(report: dict, console: Console) -> None:
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


def _levels(report: dict, console: Console) -> None:
    levels = Table(title="bytes per memory level")
    levels.add_column("level")
    levels.add_column("bytes", justify="right")
    for lvl in LEVELS:
        if lvl in report.get("bytes", {}):
            levels.add_row(lvl, bytes_text(report["bytes"][lvl]))
    console.print(levels)


def _footprint(report: dict, console: Console) -> None:
    fp = report.get("gm_footprint")
    if fp:
        gm = Table(title="peak GM footprint (plan-memory)")
        gm.add_column("part")
        gm.add_column("bytes", justify="right")
        for part in ("weights", "inputs", "outputs", "arena", "total"):
            gm.add_row(part, bytes_text(fp.get(part, 0)))
        console.print(gm)
        console.print(f"live peak (lower bound of the total) {bytes_text(fp.get('live_peak', 0))}")


def _cluster(report: dict, console: Console) -> None:
    """A multi-device run (`cluster`): cycles per device, the collectives with their exposed
    part, bytes and busy % per link."""
    cl = report.get("cluster")
    if not cl:
        return
    if cl.get("symmetric"):
        console.print("symmetric ranks: rank 0 simulated, its peers mirrored (figures per device and link are rank 0's)")
    console.print(f"{cl['devices']} devices on {cl['topology']}: {cl['total_cycles']:,.0f} cycles (slowest device); "
                  f"communication {cl['comm_cycles']:,.0f} cycles, exposed {cl['exposed_comm_cycles']:,.0f}")
    dev = Table(title="devices")
    for c in ("device", "cycles", "comm cycles", "HBM bytes"):
        dev.add_column(c, justify="right")
    for d in cl["per_device"]:
        hbm = d["bytes"].get("gm_read", 0) + d["bytes"].get("gm_write", 0)
        dev.add_row(str(d["device"]), f"{d['total_cycles']:,.0f}", f"{d['comm_cycles']:,.0f}", bytes_text(hbm))
    console.print(dev)
    if cl["collectives"]:
        co = Table(title="collectives (slowest device)")
        for c in ("kernel", "devices", "cycles", "exposed", "waiting", "bytes sent"):
            co.add_column(c, justify="right" if c != "kernel" else "left")
        for c in cl["collectives"]:
            co.add_row(c["kernel"], str(c["group_size"]), f"{c['cycles']:,.0f}", f"{c['exposed_cycles']:,.0f}",
                       f"{c['wait_cycles']:,.0f}", bytes_text(c["bytes_sent"]))
        console.print(co)
    if cl["links"]:
        ln = Table(title="links")
        for c in ("link", "domain", "bytes", "busy %"):
            ln.add_column(c, justify="right" if c in ("bytes", "busy %") else "left")
        for u in cl["links"]:
            ln.add_row(f"{u['src']} -> {u['dst']}", u["domain"], bytes_text(u["bytes"]), f"{100 * u['busy_fraction']:.1f}")
        console.print(ln)
