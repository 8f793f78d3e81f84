"""Plots of a simulation (matplotlib, the optional `plots` extra): a roofline and a pipe timeline.

    roofline.png / .svg   each kernel launch as a point: arithmetic intensity (cube flops per byte
                          of GM traffic, reads + writes) vs achieved flops/s, under the chip's
                          compute ceilings (cube per dtype, vector f16/f32) and its HBM and L2
                          bandwidth ceilings (report key `ceilings`, from the target TOML)
    timeline.png / .svg   per core and pipe, the busy intervals of a Chrome trace
                          (`ascendir run --trace`), kernel launches shaded and labeled

Kernels without cube flops (vector-only) have no intensity on this axis: they are drawn on the
bottom edge at their GM traffic, marked as such.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from ascendir.errors import AscendirError
from ascendir.outputs import atomic_write

INSTALL_HINT = "pip install 'ascendir[plots]'"
FORMATS = ("png", "svg")
MAX_CORES = 4  # timeline rows: the first cores only (SPMD blocks look alike); all pipes of each
SYNC = "sync"  # category of interpreter/trace.py's set_flag / wait_flag slices (not drawn as work)
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
    """Check (before any work) that `directory` can hold the plots; create it if only it is missing.

    Raises:
        AscendirError: it is a file, its parent folder does not exist, or it is not writable.
    """
    if directory.exists() and not directory.is_dir():
        raise AscendirError(f"--plots {directory}: not a directory")
    if not directory.exists():
        if not directory.parent.is_dir():
            raise AscendirError(f"--plots {directory}: directory {directory.parent} does not exist")
        try:
            directory.mkdir()
        except OSError as e:
            raise AscendirError(f"--plots {directory}: {e.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise AscendirError(f"--plots {directory}: permission denied")


def _save(plt, fig, stem: Path) -> list[Path]:
    out = []
    for fmt in FORMATS:
        path = stem.with_suffix(f".{fmt}")
        atomic_write(path, lambda p, fmt=fmt: fig.savefig(p, format=fmt, dpi=120))
        out.append(path)
    plt.close(fig)
    return out


def roofline(report: dict, stem: Path) -> list[Path]:
    """Write STEM.png and STEM.svg: the kernels of `report` against its `ceilings`. Returns the paths.

    Raises:
        AscendirError: matplotlib missing; the report has no `ceilings` (written before they existed).
    """
    plt = require_matplotlib()
    ceil = report.get("ceilings")
    if not isinstance(ceil, dict):
        raise AscendirError("the report has no 'ceilings' (re-run `ascendir run --report` to write them)")
    points = []
    for k in report["kernels"]:
        b = k["bytes"]
        gm = b.get("gm_read", 0.0) + b.get("gm_write", 0.0)
        sec = k.get("seconds") or k["cycles"] / report["clock_hz"]
        points.append((k["name"], k.get("flops", 0.0), gm, sec, k["cycles"], k.get("core_type", "")))
    by_value: dict[float, list[str]] = {}  # equal peaks (f16 and bf16) share one line
    for unit, table in (("cube", ceil["cube_flops_per_s"]), ("vector", ceil["vector_flops_per_s"])):
        for dt, v in table.items():
            if unit == "vector" or dt in ("f16", "bf16", "f32", "s8"):
                by_value.setdefault(v, []).append(f"{unit} {dt}")
    peaks = sorted(((" / ".join(names), v) for v, names in by_value.items()), key=lambda kv: -kv[1])
    ai = [f / g for _, f, g, _, _, _ in points if f and g]
    lo = min(ai + [0.1]) / 4
    hi = max(ai + [2 * max(v for _, v in peaks) / ceil["hbm_Bps"]]) * 4
    fig, ax = plt.subplots(figsize=(9, 6))
    x = [lo, hi]
    for label, bw, style in (("HBM", ceil["hbm_Bps"], "-"), ("L2", ceil["l2_Bps"], "--")):
        top = max(v for _, v in peaks)
        knee = top / bw
        ax.plot([lo, knee], [lo * bw, top], "k" + style, lw=1.2)
        ax.annotate(f"{label} {bw / 1e9:,.0f} GB/s", (lo * 1.3, lo * 1.3 * bw), rotation=0, fontsize=8, va="bottom")
    for label, v in peaks:
        ax.plot([v / ceil["hbm_Bps"], hi], [v, v], color="gray" if label.startswith("vector") else "k", lw=1)
        ax.annotate(f"{label} {v / 1e12:,.1f} TFLOP/s", (hi, v), fontsize=8, ha="right", va="bottom")
    total = sum(p[4] for p in points) or 1.0
    floor = min([v for _, v in peaks] + [f / s for _, f, _, s, _, _ in points if f and s]) / 20
    ranked = sorted(points, key=lambda p: -p[4])
    named = {id(p) for p in ranked[:LABELED]}
    markers = {"aic": "o", "aiv": "s", "mix": "D"}
    shown = set()
    for p in points:
        name, f, g, sec, cyc, core = p
        if not sec:
            continue
        size = 20 + 400 * cyc / total
        if f and g:
            xy, color, lab = (f / g, f / sec), "C0", "kernel (cube flops)"
        else:  # vector-only: GM bytes per second shown at the floor
            xy, color, lab = (lo * 1.5, floor), "C1", "no cube flops (bottom edge)"
        ax.scatter(*xy, s=size, marker=markers.get(core, "o"), color=color, alpha=0.6, edgecolors="k",
                   label=None if lab in shown else lab)
        shown.add(lab)
        if id(p) in named:
            ax.annotate(name, xy, fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = plt.FuncFormatter(lambda v, _: f"{v:g}")  # no mathtext: its layout is most of the drawing time
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlim(lo, hi)
    ax.set_ylim(floor / 2, max(v for _, v in peaks) * 3)
    ax.set_xlabel("arithmetic intensity (cube flop / byte of GM traffic)")
    ax.set_ylabel("achieved flop/s")
    ax.set_title(f"roofline, {report['target']} ({len(points)} kernel launches; marker area ~ cycles; o aic, s aiv, D mix)")
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
    """Write STEM.png and STEM.svg from Chrome trace `events` (trace.py's format): one row per
    (core, pipe) for the first `max_cores` cores, busy intervals merged below the plot's
    resolution, kernel launches as labeled bands. Returns the paths.

    Raises:
        AscendirError: matplotlib missing; the trace has no pipe spans.
    """
    plt = require_matplotlib()
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    launches = [e for e in events if e.get("ph") == "X" and e.get("pid") == 0]
    rows: dict[tuple[int, str, str], list[tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") != "X" or e.get("pid", 0) == 0 or e.get("cat") == SYNC:  # set/wait_flag: not work
            continue
        name = threads.get((e["pid"], e["tid"]))
        if name is None:
            continue
        _, core, label = name.split(" ", 2)  # "core 3 aiv.MTE2"
        if int(core) >= max_cores:
            continue
        rows.setdefault((int(core), *label.rpartition(".")[::2]), []).append((e["ts"], e["dur"]))
    if not rows:
        raise AscendirError("the trace has no pipe spans to draw (is it a trace of `ascendir run --trace`?)")
    end = max(s + d for r in rows.values() for s, d in r)
    if launches:
        end = max(end, max(e["ts"] + e["dur"] for e in launches))
    order = sorted(rows, key=lambda k: (k[0], k[1], list(PIPE_COLORS).index(k[2]) if k[2] in PIPE_COLORS else 99))
    fig, ax = plt.subplots(figsize=(14, min(2 + 0.22 * len(order), 40)))
    for i, key in enumerate(order):
        spans = _merge(rows[key], end / 4000)
        ax.broken_barh(spans, (i - 0.4, 0.8), color=PIPE_COLORS.get(key[2], "k"), lw=0)
    for j, e in enumerate(launches):
        ax.axvspan(e["ts"], e["ts"] + e["dur"], color="k", alpha=0.04 if j % 2 else 0.09, lw=0)
        if e["dur"] > end / 60:
            ax.text(e["ts"] + e["dur"] / 2, -0.6, e["name"], fontsize=7, ha="center", va="bottom")
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"core {c} {u + '.' if u else ''}{p}" for c, u, p in order], fontsize=6)
    ax.set_ylim(len(order), -1.5)
    ax.set_xlim(0, end)
    ax.set_xlabel("time (µs)")
    ncores = len({e["tid"] // 32 for e in events if e.get("ph") == "X" and e.get("pid", 0) > 0})
    shown = len({k[0] for k in order})
    ax.set_title(f"pipe timeline (cores 0-{shown - 1} of {ncores}; {len(launches)} kernel launches; busy intervals per pipe)")
    fig.tight_layout()
    return _save(plt, fig, stem)


def write_plots(report: dict, trace_events: list[dict] | None, directory: Path) -> list[Path]:
    """roofline.{png,svg} in `directory`, and timeline.{png,svg} when `trace_events` are given.

    Raises:
        AscendirError: matplotlib missing, or a file cannot be written.
    """
    paths = roofline(report, directory / "roofline")
    if trace_events is not None:
        paths += pipe_timeline(trace_events, directory / "timeline")
    return paths
