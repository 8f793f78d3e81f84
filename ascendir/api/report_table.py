"""Render a simulation report (the dict of `SimResult.report`) as rich tables.

Every screen fits the console's width without breaking a cell over lines: cells never wrap
(rich's `no_wrap`; a cell too long for what is left ends in an ellipsis), a table too wide drops
its optional columns in priority order (`_fitted`) until it fits, table titles stay on one line,
and lines of figures break only between figures (`_packed`). Tested at 80 and 160 columns.
"""

from __future__ import annotations

import re

from collections.abc import Sequence

from rich import box
from rich.console import Console, Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

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


def _packed(console: Console, parts: Sequence[str], sep: str = "   ") -> None:
    """Print `parts` joined by `sep`, as many on a line as fit the console: a part is never split."""
    line = ""
    for part in parts:
        if line and len(line) + len(sep) + len(part) > console.width:
            console.print(line, highlight=False, soft_wrap=True)
            line = part
        else:
            line = f"{line}{sep}{part}" if line else part
    if line:
        console.print(line, highlight=False, soft_wrap=True)


def _fitted(console: Console, title: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]],
            drop: Sequence[str] = (), **table: object) -> Group:
    """A table of `columns` ((name, justify)) and `rows` (one string per column) whose cells
    never wrap, without the columns of `drop` (in that order, first dropped first) that it takes
    to fit the console's width; the first column is never dropped (its cells end in an ellipsis
    when even that is too wide). The title is a line of its own above it: rich would wrap a
    title wider than its table."""
    keep = [c for c, _ in columns]

    def build(first_width: int | None) -> Table:
        t = Table(**table)
        for col, justify in columns:
            if col in keep:
                t.add_column(col, justify=justify, no_wrap=True, overflow="ellipsis", max_width=first_width if col == columns[0][0] else None)
        at = [i for i, (c, _) in enumerate(columns) if c in keep]
        for r in rows:
            t.add_row(*(r[i] for i in at))
        return t

    unbounded = console.options.update_width(1 << 16)  # (measuring within the width would clamp to it)
    for name in [None, *drop]:
        if name is not None:
            keep.remove(name)
        t = build(None)
        if Measurement.get(console, unbounded, t).maximum <= console.width:
            break
    else:  # still too wide: the first column's long cells end in an ellipsis, the figures stay whole
        first = Measurement.get(console, unbounded, t).maximum - max(len(r[0]) for r in rows)
        t = build(max(6, console.width - first))
    return Group(Text(title, style="table.title", no_wrap=True, overflow="ellipsis"), t)


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
        head, *rest = verdict_lines(verdict)
        # the head line names the reference file: a path is not broken over lines
        console.print(head, style=style, highlight=False, soft_wrap=True)
        for line in rest:  # an output's line breaks between its figures, never inside one
            _packed(console, re.split(r"(?<=,) | (?=\()", line), " ")


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
        _packed(console, extra)
    search = report.get("tiling_search")
    if isinstance(search, dict) and search:  # `ascendir run`: what choose-tiling scored
        parts = [f"{v.get('ops', 0)} {kind}{'s' if v.get('ops', 0) != 1 else ''} ({v.get('searches', 0)} searched, {v.get('candidates', 0):,} candidates)"
                 for kind, v in search.items() if isinstance(v, dict)]
        secs = sum(v.get("seconds", 0.0) for v in search.values() if isinstance(v, dict))
        _packed(console, ["choose-tiling", *(f"{p}," for p in parts[:-1]), *parts[-1:], f"scored in {secs:.3f} s"], " ")
    for d in report.get("declined") or []:  # fused regions their template did not take
        if isinstance(d, dict):
            console.print(f"[bold]declined[/] {d.get('region')}: {d.get('reason')} (lowered op by op)", highlight=False)
    if isinstance(report.get("moe"), list):  # MoE blocks: the routing of this run
        from ascendir.api.moe_report import moe_parts

        for parts in moe_parts(report["moe"]):
            _packed(console, parts, " ")


def _by_kind(report: dict, console: Console) -> None:
    """Time by op family / fused kind (the 12 costliest, the rest summed)."""
    from ascendir.interpreter.report.headline import by_kind

    total = report["total_cycles"]
    kinds = by_kind(report)
    rows = [[kind, str(n), f"{cycles:,.0f}", f"{100 * cycles / total:.1f}" if total else "-"] for kind, n, cycles in kinds[:12]]
    if len(kinds) > 12:
        rest = kinds[12:]
        rows.append([f"({len(rest)} more)", str(sum(r[1] for r in rest)), f"{sum(r[2] for r in rest):,.0f}",
                     f"{100 * sum(r[2] for r in rest) / total:.1f}" if total else "-"])
    cols = [("kind", "left"), ("launches", "right"), ("cycles", "right"), ("%", "right")]
    console.print(_fitted(console, "time by kind (op family or fused kind)", cols, rows, drop=("launches",), box=box.SIMPLE_HEAD))


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
    cols = ["n", "cores", "cycles", "%", "bound", "GM read"] + (["L2 hit"] if wide else []) + ["GM write"] + (["cube %"] if wide else [])
    nodes = console.width >= 140 and any(r["nodes"] for r in rows[:top])
    table = []
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
        table.append([r["name"], *cells])
    columns = [("kernel", "left"), *((c, "right") for c in cols), *([("ONNX nodes", "left")] if nodes else [])]
    # too narrow for the names: the optional columns go first, the kernel's name and cycles last
    drop = [c for c in ("ONNX nodes", "cube %", "L2 hit", "cores", "GM write", "bound", "GM read", "n", "%") if c in dict(columns)]
    console.print(_fitted(console, f"kernels (top {min(top, len(rows))} of {len(rows)}; n launches summed)", columns, table, drop,
                          box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True))


def _pipes(report: dict, console: Console) -> None:
    busy = report.get("pipe_busy", {})
    util = report.get("pipe_utilization", {})
    rows = [[p, f"{busy[p]:,.0f}", f"{100 * util[p]:.1f}" if p in util else "-"] for p in PIPES if p in busy]
    console.print(_fitted(console, "pipe busy (summed over cores; % of total cycles x cores used)",
                          [("pipe", "left"), ("busy cycles", "right"), ("busy %", "right")], rows))


def _levels(report: dict, console: Console) -> None:
    rows = [[lvl, bytes_text(report["bytes"][lvl])] for lvl in LEVELS if lvl in report.get("bytes", {})]
    console.print(_fitted(console, "bytes per memory level", [("level", "left"), ("bytes", "right")], rows))


def _footprint(report: dict, console: Console) -> None:
    fp = report.get("gm_footprint")
    if fp:
        rows = [[part, bytes_text(fp.get(part, 0))] for part in ("weights", "inputs", "outputs", "arena", "total")]
        console.print(_fitted(console, "peak GM footprint (plan-memory)", [("part", "left"), ("bytes", "right")], rows))
        console.print(f"live peak (lower bound of the total) {bytes_text(fp.get('live_peak', 0))}")


def _cluster(report: dict, console: Console) -> None:
    """A multi-device run (`cluster`): cycles per device, the collectives with their exposed
    part, bytes and busy % per link."""
    cl = report.get("cluster")
    if not cl:
        return
    if cl.get("symmetric"):
        _packed(console, ["symmetric ranks:", "rank 0 simulated, its peers mirrored", "(figures per device and link are rank 0's)"], " ")
    _packed(console, [f"{cl['devices']} devices on {cl['topology']}:", f"{cl['total_cycles']:,.0f} cycles (slowest device);",
                      f"communication {cl['comm_cycles']:,.0f} cycles,", f"exposed {cl['exposed_comm_cycles']:,.0f}"], " ")
    rows = [[str(d["device"]), f"{d['total_cycles']:,.0f}", f"{d['comm_cycles']:,.0f}",
             bytes_text(d["bytes"].get("gm_read", 0) + d["bytes"].get("gm_write", 0))] for d in cl["per_device"]]
    console.print(_fitted(console, "devices", [(c, "right") for c in ("device", "cycles", "comm cycles", "HBM bytes")], rows,
                          drop=("HBM bytes",)))
    if cl["collectives"]:
        rows = [[c["kernel"], str(c["group_size"]), f"{c['cycles']:,.0f}", f"{c['exposed_cycles']:,.0f}", f"{c['wait_cycles']:,.0f}",
                 bytes_text(c["bytes_sent"])] for c in cl["collectives"]]
        cols = [(c, "right" if c != "kernel" else "left") for c in ("kernel", "devices", "cycles", "exposed", "waiting", "bytes sent")]
        console.print(_fitted(console, "collectives (slowest device)", cols, rows, drop=("waiting", "devices", "bytes sent")))
    if cl["links"]:
        rows = [[f"{u['src']} -> {u['dst']}", u["domain"], bytes_text(u["bytes"]), f"{100 * u['busy_fraction']:.1f}"] for u in cl["links"]]
        cols = [(c, "right" if c in ("bytes", "busy %") else "left") for c in ("link", "domain", "bytes", "busy %")]
        console.print(_fitted(console, "links", cols, rows, drop=("domain",)))
