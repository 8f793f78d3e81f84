"""`ascendir report --diff A.json B.json`: what changed between two runs.

Kernels are matched by name (a kernel launched n times is one row, its cycles summed over the
launches, its count shown); pipes by name. Changes are B relative to A: Δ = B - A, Δ% = Δ / A.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ascendir.api.report_table import PIPES, bytes_text

# the run's settings and provenance: a difference here explains the figures' differences
SETTINGS = (("tool", "version"), ("model", "path"), ("model", "sha256"), ("target",), ("clock_hz",), ("pipeline",), ("dtype",),
            ("seed",), ("timing_only",), ("l2_model",))


def _get(report: dict, key: tuple[str, ...]):
    v = report
    for k in key:
        v = v.get(k) if isinstance(v, dict) else None
    return v


def kernels_by_name(report: dict) -> dict[str, tuple[int, float]]:
    """name -> (launches, cycles summed over them), in order of first launch."""
    out: dict[str, tuple[int, float]] = {}
    for k in report["kernels"]:
        n, c = out.get(k["name"], (0, 0.0))
        out[k["name"]] = (n + 1, c + k["cycles"])
    return out


def _pct(a: float, b: float) -> str:
    if a == b:
        return "0 %"
    return f"{100 * (b - a) / a:+.1f} %" if a else "new"


def _signed(x: float) -> str:
    return f"{x:+,.0f}"


def diff(a: dict, b: dict) -> dict:
    """The changes from report `a` to report `b` as data: settings {key: (a, b)}, totals {name:
    (a, b)}, kernels [(name, (count, cycles) in a or None, in b or None)] changed only, pipes {pipe:
    (busy a, busy b)} changed only."""
    settings = {".".join(k): (_get(a, k), _get(b, k)) for k in SETTINGS if _get(a, k) != _get(b, k)}
    totals = {
        "cycles": (a["total_cycles"], b["total_cycles"]),
        "µs": (a["total_seconds"] * 1e6, b["total_seconds"] * 1e6),
        "launches": (len(a["kernels"]), len(b["kernels"])),
        "GM read": (a.get("bytes", {}).get("gm_read", 0.0), b.get("bytes", {}).get("gm_read", 0.0)),
        "GM write": (a.get("bytes", {}).get("gm_write", 0.0), b.get("bytes", {}).get("gm_write", 0.0)),
        "cube flops": (a.get("flops", 0.0), b.get("flops", 0.0)),
    }
    ka, kb = kernels_by_name(a), kernels_by_name(b)
    kernels = [(n, ka.get(n), kb.get(n)) for n in dict.fromkeys([*ka, *kb]) if ka.get(n) != kb.get(n)]
    kernels.sort(key=lambda r: -abs((r[2] or (0, 0.0))[1] - (r[1] or (0, 0.0))[1]))
    pa, pb = a.get("pipe_busy", {}), b.get("pipe_busy", {})
    pipes = {p: (pa.get(p, 0.0), pb.get(p, 0.0)) for p in [*PIPES, *sorted((set(pa) | set(pb)) - set(PIPES))]
             if p in pa or p in pb}
    pipes = {p: v for p, v in pipes.items() if v[0] != v[1]}
    return {"settings": settings, "totals": totals, "kernels": kernels, "pipes": pipes}


def render(a: dict, b: dict, names: tuple[str, str], console: Console, top: int = 25) -> None:
    """Print the diff of `a` and `b` (files `names`): settings that differ, totals, the `top`
    kernels whose cycles or launch count changed most, and the pipes whose busy cycles changed."""
    d = diff(a, b)
    console.print(f"[bold]A[/] {names[0]}   [bold]B[/] {names[1]}", highlight=False)
    for key, (x, y) in d["settings"].items():
        console.print(f"[bold]{key}[/] {x} → {y}", highlight=False)
    t = Table(title="totals (B vs A)")
    for col in ("", "A", "B", "Δ", "Δ %"):
        t.add_column(col, justify="left" if not col else "right")
    for name, (x, y) in d["totals"].items():
        fmt = bytes_text if name.startswith("GM") else (lambda v: f"{v:,.2f}" if name == "µs" else f"{v:,.0f}")
        t.add_row(name, fmt(x), fmt(y), fmt(y - x) if not name.startswith("GM") else ("-" if x == y else f"{'+' if y > x else '-'}{bytes_text(abs(y - x))}"),
                  _pct(x, y))
    console.print(t)
    if not d["kernels"]:
        console.print("kernels: no change (same names, launches and cycles)")
    else:
        k = Table(title=f"kernels that changed ({min(top, len(d['kernels']))} of {len(d['kernels'])}, by |Δ cycles|)")
        for col in ("kernel", "launches", "cycles A", "cycles B", "Δ", "Δ %"):
            k.add_column(col, justify="left" if col == "kernel" else "right", overflow="fold")
        for name, x, y in d["kernels"][:top]:
            (na, ca), (nb, cb) = x or (0, 0.0), y or (0, 0.0)
            k.add_row(name, f"{na} → {nb}" if na != nb else str(na), f"{ca:,.0f}" if x else "-", f"{cb:,.0f}" if y else "-",
                      _signed(cb - ca), _pct(ca, cb) if x else "new")
        console.print(k)
    if not d["pipes"]:
        console.print("pipes: no change")
        return
    p = Table(title="pipe busy cycles (summed over cores)")
    for col in ("pipe", "A", "B", "Δ %", "util A", "util B"):
        p.add_column(col, justify="left" if col == "pipe" else "right")
    ua, ub = a.get("pipe_utilization", {}), b.get("pipe_utilization", {})
    for name, (x, y) in d["pipes"].items():
        p.add_row(name, f"{x:,.0f}", f"{y:,.0f}", _pct(x, y),
                  f"{100 * ua[name]:.1f} %" if name in ua else "-", f"{100 * ub[name]:.1f} %" if name in ub else "-")
    console.print(p)
