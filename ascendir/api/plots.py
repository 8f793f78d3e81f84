"""Plots of a simulation (matplotlib, the optional `plots` extra): a roofline and a pipe timeline.

    roofline.png / .svg   each kernel launch as a point: arithmetic intensity (ops per byte of GM
                          traffic, reads + writes) vs achieved ops/s, under the chip's compute
                          ceilings (cube per dtype, vector f16/f32) and its HBM and L2 bandwidth
                          ceilings (report key `ceilings`, from the target TOML). Ops are cube
                          flops, or for launches without any, vector element-ops (report key
                          `vector_ops`), each kind against its own peak (roofline_points)
    timeline.png / .svg   a row per core (a lane per pipe, colors in the legend), the busy
                          intervals of a Chrome trace (`ascendir run --trace`), kernel launches
                          shaded and the wide ones named
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import NamedTuple

from ascendir.errors import AscendirError
from ascendir.api.outputs import write_output

INSTALL_HINT = "pip install 'ascendir[plots]'"
FORMATS = ("png", "svg")
MAX_CORES = 4  # timeline rows: the first cores of each kind only (SPMD blocks look alike); all pipes of each
SYNC = "sync"  # category of interpreter/report/trace.py's set_flag / wait_flag slices (not drawn as work)
LABELED = 8  # roofline: names of the costliest kernels
PIPE_COLORS = {"S": "#7f7f7f", "V": "#2ca02c", "M": "#d62728", "MTE1": "#9467bd", "MTE2": "#1f77b4",
               "MTE3": "#ff7f0e", "FIX": "#8c564b"}


def require_matplotlib():
    """matplotlib.pyplot on the non-interactive Agg backend.

    Raises:
        AscendirError: matplotlib is not installed (names the extra to install).
    """
    try:
        mpl = importlib.import_module("matplotlib")
    except ImportError:
        raise AscendirError(f"--plots needs matplotlib, which is not installed: {INSTALL_HINT}") from None
    mpl.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def prepare_dir(directory: Path) -> None:
    """Check (before any work) that `directory` can hold the plots: an existing writable folder,
    or a missing one in a writable folder. Creates nothing: write_plots makes it when it writes,
    so a run that fails leaves no empty plots folder behind.

    Raises:
        AscendirError: it is a file, its parent folder does not exist, or it is not writable.
    """
    if directory.exists() and not directory.is_dir():
        raise AscendirError(f"--plots {directory}: not a directory")
    folder = directory if directory.exists() else directory.parent
    if not directory.exists() and not folder.is_dir():
        raise AscendirError(f"--plots {directory}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise AscendirError(f"--plots {directory}: permission denied")


def _save(plt, fig, stem: Path) -> list[Path]:
    out = []
    for fmt in FORMATS:
        path = stem.with_suffix(f".{fmt}")
        write_output(path, lambda f, fmt=fmt: fig.savefig(f, format=fmt, dpi=120))
        out.append(path)
    plt.close(fig)
    return out


class RooflinePoint(NamedTuple):
    """One kernel launch on the roofline. unit "cube" (ops = cube flops) or "vector" (ops =
    vector element-ops, for launches without cube flops); intensity in ops per byte of GM traffic
    (reads + writes); achieved in ops/s; peak the compute ceiling that applies (ops/s: the cube
    peak of the launch's mmad dtypes, or the vector peak of its element mix); roof = min(peak, intensity × HBM
    bandwidth), the bound at its intensity."""

    name: str
    unit: str
    intensity: float
    achieved: float
    peak: float
    roof: float
    cycles: float
    core_type: str


def roofline_points(report: dict) -> tuple[list[RooflinePoint], int]:
    """The launches of `report` placed by their own figures, and how many could not be (no GM
    traffic, no cube flops nor vector ops — e.g. pure copies — or zero time).

    A launch with cube flops is a cube point: flops / GM bytes, flops / s, under the cube peak of
    its dtypes (report key `cube_peak_flops_per_s`; the f16 peak for reports without it).
    Otherwise its vector element-ops (report key `vector_ops`) make it a vector point under the
    vector peak of its mix: ops / Σ(ops of class c / peak of c) over the rate classes f16 / f32.

    Raises:
        AscendirError: the report has no `ceilings` (written before they existed).
    """
    ceil = report.get("ceilings")
    if not isinstance(ceil, dict):
        raise AscendirError("the report has no 'ceilings' (re-run `ascendir run --report` to write them)")
    cube_peak = ceil["cube_flops_per_s"].get("f16") or max(ceil["cube_flops_per_s"].values())
    vec_peak = ceil["vector_flops_per_s"]
    hbm = ceil["hbm_Bps"]
    points, skipped = [], 0
    for k in report["kernels"]:
        b = k["bytes"]
        gm = b.get("gm_read", 0.0) + b.get("gm_write", 0.0)
        sec = k.get("seconds") or k["cycles"] / report["clock_hz"]
        flops = k.get("flops", 0.0)
        vops = {c: n for c, n in (k.get("vector_ops") or {}).items() if n and c in vec_peak}
        if flops:
            unit, ops, peak = "cube", flops, k.get("cube_peak_flops_per_s") or cube_peak
        elif vops:
            unit, ops = "vector", sum(vops.values())
            peak = ops / sum(n / vec_peak[c] for c, n in vops.items())
        else:
            skipped += 1
            continue
        if not (gm and sec):
            skipped += 1
            continue
        x = ops / gm
        points.append(RooflinePoint(k["name"], unit, x, ops / sec, peak, min(peak, x * hbm), k["cycles"], k.get("core_type", "")))
    return points, skipped


def roofline(report: dict, stem: Path) -> list[Path]:
    """Write STEM.png and STEM.svg: the kernels of `report` (roofline_points) against its
    `ceilings`: cube peaks per dtype (black), vector peaks f16 / f32 (gray), HBM and L2 bandwidth.
    The costliest launches are named with their share of the roof at their intensity. Returns the paths.

    Raises:
        AscendirError: matplotlib missing; the report has no `ceilings`.
    """
    plt = require_matplotlib()
    points, skipped = roofline_points(report)
    ceil = report["ceilings"]
    by_value: dict[float, list[str]] = {}  # equal peaks (f16 and bf16) share one line
    for unit, table in (("cube", ceil["cube_flops_per_s"]), ("vector", ceil["vector_flops_per_s"])):
        for dt, v in table.items():
            if unit == "vector" or dt in ("f16", "bf16", "f32", "s8"):
                by_value.setdefault(v, []).append(f"{unit} {dt}")
    peaks = sorted(((" / ".join(names), v) for v, names in by_value.items()), key=lambda kv: -kv[1])
    top = max(v for _, v in peaks)
    xs = [p.intensity for p in points]
    lo = min(xs + [min(v for _, v in peaks) / ceil["hbm_Bps"]]) / 4
    hi = max(xs + [2 * top / ceil["hbm_Bps"]]) * 4
    floor = min([v for _, v in peaks] + [p.achieved for p in points]) / 4
    fig, ax = plt.subplots(figsize=(9, 6))
    for label, bw, style in (("HBM", ceil["hbm_Bps"], "-"), ("L2", ceil["l2_Bps"], "--")):
        start = max(lo, floor / bw)
        ax.plot([start, top / bw], [start * bw, top], "k" + style, lw=1.2)
        ax.annotate(f"{label} {bw / 1e9:,.0f} GB/s", (start * 1.3, start * 1.3 * bw), fontsize=8, va="bottom")
    for label, v in peaks:
        ax.plot([v / ceil["hbm_Bps"], hi], [v, v], color="gray" if label.startswith("vector") else "k", lw=1)
        ax.annotate(f"{label} {v / 1e12:,.1f} TOP/s", (hi, v), fontsize=8, ha="right", va="bottom")
    total = sum(p.cycles for p in points) or 1.0
    named = {id(p) for p in sorted(points, key=lambda p: -p.cycles)[:LABELED]}
    markers = {"aic": "o", "aiv": "s", "mix": "D"}
    style = {"cube": ("C0", "cube kernel (flop)"), "vector": ("C1", "vector-only kernel (element-op)")}
    shown = set()
    for p in points:
        color, lab = style[p.unit]
        ax.scatter(p.intensity, p.achieved, s=20 + 400 * p.cycles / total, marker=markers.get(p.core_type, "o"), color=color,
                   alpha=0.6, edgecolors="k", label=None if lab in shown else lab)
        shown.add(lab)
        if id(p) in named:
            ax.annotate(f"{p.name} ({100 * p.achieved / p.roof:.0f} % of roof)", (p.intensity, p.achieved), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = plt.FuncFormatter(lambda v, _: f"{v:g}")  # no mathtext: its layout is most of the drawing time
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlim(lo, hi)
    ax.set_ylim(floor / 2, top * 3)
    ax.set_xlabel("arithmetic intensity (op / byte of GM traffic; cube: flop, vector-only: element-op)")
    ax.set_ylabel("achieved op/s")
    note = f"; {skipped} without ops or GM traffic not shown" if skipped else ""
    ax.set_title(f"roofline, {report['target']} ({len(points)} kernel launches{note}; marker area ~ cycles; o aic, s aiv, D mix)",
                 fontsize=9)
    if points:
        ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.tight_layout()
    return _save(plt, fig, stem)


def _merge(intervals: list[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    """(start, duration) intervals merged where they overlap or are less than `gap` apart."""
    out: list[list[float]] = []
    for s, d in sorted(intervals):
        if out and s <= out[-1][0] + out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], s + d - out[-1][0])
        else:
            out.append([s, d])
    return [(s, d) for s, d in out]


def pipe_timeline(events: list[dict], stem: Path, max_cores: int = MAX_CORES) -> list[Path]:
    """Write STEM.png and STEM.svg from Chrome trace `events` (interpreter/report/trace.py's
    format: a process per core, a thread per pipe): one row per core for the first `max_cores`
    cores of each kind (AIC, AIV, ...), its pipes as lanes of the row colored as the legend says,
    busy intervals merged below the plot's resolution, iterations not run one by one (category
    "extrapolated") lighter, kernel launches as alternating bands named where they are wide
    enough. Returns the paths.

    Raises:
        AscendirError: matplotlib missing; the trace has no pipe spans.
    """
    plt = require_matplotlib()
    from matplotlib.patches import Patch

    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    launches = [e for e in events if e.get("ph") == "X" and e.get("pid") == 0]
    cores: dict[str, list[int]] = {}
    for pid, name in sorted(procs.items()):
        if pid != 0:
            cores.setdefault(name.rsplit(" ", 1)[0], []).append(pid)
    shown = {pid for pids in cores.values() for pid in pids[:max_cores]}
    lanes: dict[int, dict[str, dict[bool, list[tuple[float, float]]]]] = {}
    for e in events:
        if e.get("ph") != "X" or e.get("pid", 0) not in shown or e.get("cat") == SYNC:  # set/wait_flag: not work
            continue
        label = threads.get((e["pid"], e["tid"]))
        if label is None:
            continue
        lane = lanes.setdefault(e["pid"], {}).setdefault(label, {False: [], True: []})
        lane[e.get("cat") == "extrapolated"].append((e["ts"], e["dur"]))
    if not lanes:
        raise AscendirError("the trace has no pipe spans to draw (is it a trace of `ascendir run --trace`?)")
    end = max(s + d for pl in lanes.values() for lane in pl.values() for part in lane.values() for s, d in part)
    if launches:
        end = max(end, max(e["ts"] + e["dur"] for e in launches))

    def pipe_of(label: str) -> str:
        return label.rpartition(".")[2]

    def order(label: str) -> tuple:
        return (label.rpartition(".")[0], list(PIPE_COLORS).index(pipe_of(label)) if pipe_of(label) in PIPE_COLORS else 99)

    rows = [pid for pid in sorted(lanes)]
    fig, ax = plt.subplots(figsize=(14, 2.2 + 0.75 * len(rows)))
    for i, pid in enumerate(rows):
        labels = sorted(lanes[pid], key=order)
        h = 0.8 / len(labels)
        for j, label in enumerate(labels):
            y = i - 0.4 + j * h
            color = PIPE_COLORS.get(pipe_of(label), "k")
            for extrapolated, spans in lanes[pid][label].items():
                if spans:
                    ax.broken_barh(_merge(spans, end / 4000), (y, h * 0.9), color=color, lw=0, alpha=0.45 if extrapolated else 1.0)
    bands = [e for e in launches if e["dur"] > end / 40]
    for j, e in enumerate(launches):
        ax.axvspan(e["ts"], e["ts"] + e["dur"], color="k", alpha=0.04 if j % 2 else 0.09, lw=0)
    for j, e in enumerate(bands):  # names of the wide launches, on two alternating lines
        ax.text(e["ts"] + e["dur"] / 2, -0.55 - 0.35 * (j % 2), e["name"], fontsize=7, ha="center", va="bottom", clip_on=True)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([procs.get(pid, str(pid)) for pid in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -1.3)
    ax.set_xlim(0, end)
    ax.set_xlabel("time (µs)")
    used = sorted({pipe_of(label) for pl in lanes.values() for label in pl}, key=lambda p: list(PIPE_COLORS).index(p) if p in PIPE_COLORS else 99)
    handles = [Patch(color=PIPE_COLORS.get(p, "k"), label=p) for p in used]
    if any(lane[True] for pl in lanes.values() for lane in pl.values()):
        handles.append(Patch(color="gray", alpha=0.45, label="extrapolated iterations"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=len(handles), fontsize=8, frameon=False)
    total = {kind: len(pids) for kind, pids in cores.items()}
    of = ", ".join(f"{min(n, max_cores)} of {n} {kind}" for kind, n in total.items())
    ax.set_title(f"pipe timeline: {of} cores, {len(launches)} kernel launches (a row per core, a lane per pipe; "
                 f"{len(bands)} widest launches named)", fontsize=9)
    fig.tight_layout()
    return _save(plt, fig, stem)


def write_plots(report: dict, trace_events: list[dict] | None, directory: Path) -> list[Path]:
    """roofline.{png,svg} in `directory`, and timeline.{png,svg} when `trace_events` are given.
    The directory is created here if missing; on failure the files this call added (and the
    directory, if it made it) are removed.

    Raises:
        AscendirError: matplotlib missing, the report or trace cannot be drawn, or a file cannot
            be written.
    """
    stems = ["roofline"] + (["timeline"] if trace_events is not None else [])
    created = not directory.exists()
    if created:
        try:
            directory.mkdir()
        except OSError as e:
            raise AscendirError(f"--plots {directory}: {e.strerror}") from None
    new = [directory / f"{stem}.{fmt}" for stem in stems for fmt in FORMATS if not (directory / f"{stem}.{fmt}").exists()]
    try:
        paths = roofline(report, directory / "roofline")
        if trace_events is not None:
            paths += pipe_timeline(trace_events, directory / "timeline")
    except BaseException:
        for p in new:
            p.unlink(missing_ok=True)
        if created:
            try:
                directory.rmdir()
            except OSError:  # something else appeared in it meanwhile: not ours to remove
                pass
        raise
    return paths
