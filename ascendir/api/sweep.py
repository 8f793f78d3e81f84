"""`ascendir sweep`: one model over a grid of targets, tilings, precisions and tensor-parallel
degrees, each point compiled and simulated (timing-only unless asked), the results as one table
(CSV or JSON) and a plot. A point with tp > 1 takes the path of `ascendir run --tp`
(driver.lower_tensor_parallel, then every rank on the sweep's topology, default atlas800-a2:
MC2's chunk counts are chosen for its links): its latency is the cluster's, collectives included.

The points run on local worker processes by default (`concurrent.futures`), or on a Dask
cluster when given its scheduler's address (`--scheduler tcp://host:8786`; `dask-local` starts
a throw-away local cluster): the points are independent, so they spread over machines as they
are. A point that fails (a tiling that does not fit, a chip the model cannot be split for) is
a row with its one-line error, not the end of the sweep.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ascendir.errors import AscendirError

# The columns of the table, in order; `error` is empty for a point that ran.
COLUMNS = ("target", "tiling", "dtype", "tp", "total_cycles", "latency_us", "inferences_per_s", "bound", "bound_share",
           "launches", "error")


@dataclass(frozen=True)
class Point:
    """One point of the grid: the chip (name or TOML path), the forced tiling (None: searched),
    the precision policy (fp32, fp16, bf16) and the tensor-parallel degree (devices)."""

    target: str
    tiling: str | None
    dtype: str
    tp: int = 1


def grid(targets: Sequence[str], tilings: Sequence[str | None], dtypes: Sequence[str], tps: Sequence[int] = (1,)) -> list[Point]:
    """Every combination, targets outermost, tp innermost.

    Raises:
        AscendirError: an empty axis, the same value twice on one axis, a tp below 1."""
    for name, axis in (("--target", targets), ("--tiling", tilings), ("--dtype", dtypes), ("--tp", tps)):
        if not axis:
            raise AscendirError(f"sweep: {name} has no value")
        if len(set(axis)) != len(axis):
            raise AscendirError(f"sweep: {name} lists a value twice")
    if any(tp < 1 for tp in tps):
        raise AscendirError(f"sweep: --tp takes degrees >= 1, got {', '.join(map(str, tps))}")
    return [Point(t, ti, d, tp) for t, ti, d, tp in itertools.product(targets, tilings, dtypes, tps)]


def run_point(model: str, point: Point, timing_only: bool = True, seed: int = 0, topology: str | None = None) -> dict:
    """Compile `model` for `point` and simulate it; the table row (COLUMNS). Runs in a worker:
    everything it needs comes in its arguments, and an AscendirError becomes the row's `error`.
    `topology` (a name or TOML path; None: atlas800-a2) joins the devices of a tp > 1 point."""
    from ascendir.driver import compile_model, lower_tensor_parallel, random_inputs, simulate_ranks
    from ascendir.pipelines import after_shard
    from ascendir.interpreter import simulate
    from ascendir.interpreter.report.headline import bound_shares

    row = {**asdict(point), "tiling": point.tiling or "searched"}
    try:
        shape_only = timing_only and Path(model).suffix == ".onnx"
        if point.tp == 1:
            module, weights = compile_model(model, point.target, tiling=point.tiling, dtype=point.dtype, shape_only=shape_only)
            inputs = {} if timing_only else random_inputs(module, seed)
            result = simulate(module, weights, inputs, point.target, timing_only=timing_only)
        else:  # as `ascendir run --tp`: every rank on the same inputs
            module, weights = compile_model(model, point.target, tiling=point.tiling, dtype=point.dtype, shape_only=shape_only,
                                            emit="nn")
            inputs = {} if timing_only else random_inputs(module, seed)
            module, stores = lower_tensor_parallel(module, weights, point.tp, point.target,
                                                   after_shard=after_shard("O2"), topology=topology)
            result = simulate_ranks([module] * point.tp, stores, [inputs] * point.tp, point.target, topology, timing_only)
    except AscendirError as e:
        return {**row, "error": str(e)}
    r = result.report
    shares = bound_shares(r)
    return {**row, "total_cycles": round(r["total_cycles"], 3), "latency_us": round(r["total_seconds"] * 1e6, 3),
            "inferences_per_s": round(1.0 / r["total_seconds"], 3) if r["total_seconds"] else None,
            "bound": shares[0][0] if shares else "-", "bound_share": round(shares[0][1], 4) if shares else 0.0,
            "launches": len(r["kernels"]), "error": ""}


def run_sweep(model: str, points: Sequence[Point], scheduler: str = "local", jobs: int = 1, timing_only: bool = True,
              seed: int = 0, done: Callable[[dict], None] | None = None, connect_timeout: float = 20.0,
              topology: str | None = None) -> list[dict]:
    """Run every point; rows in the order of `points`. `scheduler`: `local` (`jobs` worker
    processes; 1 runs in this process), `dask-local` (a local Dask cluster of `jobs` workers) or
    a Dask scheduler address (given up on after `connect_timeout` seconds). `done(row)` is called
    as each row arrives. `topology`: as run_point's.

    Raises:
        AscendirError: a Dask scheduler asked for without dask installed, or one that cannot be
            reached."""
    args = [(model, p, timing_only, seed, topology) for p in points]
    rows: list[dict | None] = [None] * len(points)

    def arrived(i: int, row: dict) -> None:
        rows[i] = row
        if done is not None:
            done(row)

    if scheduler == "local" and jobs <= 1:
        for i, a in enumerate(args):
            arrived(i, run_point(*a))
    elif scheduler == "local":
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_point, *a): i for i, a in enumerate(args)}
            for f in as_completed(futures):
                arrived(futures[f], f.result())
    else:
        _run_on_dask(args, scheduler, jobs, arrived, connect_timeout)
    return [r for r in rows if r is not None]


def _run_on_dask(args: list[tuple], scheduler: str, jobs: int, arrived: Callable[[int, dict], None], timeout: float) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise AscendirError("sweep: a Dask scheduler needs dask.distributed (pip install 'ascendir[sweep]')") from None
    cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True, dashboard_address=None) \
        if scheduler == "dask-local" else None
    try:
        try:
            client = Client(cluster if cluster is not None else scheduler, timeout=f"{timeout}s")
        except (OSError, TimeoutError, ValueError) as e:
            raise AscendirError(f"sweep: cannot reach the Dask scheduler {scheduler}: {' '.join(str(e).split())}") from None
        with client:
            futures = [client.submit(run_point, *a, pure=False) for a in args]
            index = {f.key: i for i, f in enumerate(futures)}
            for f in as_completed(futures):
                arrived(index[f.key], f.result())
    finally:
        if cluster is not None:
            cluster.close()


def table_text(rows: Sequence[dict], fmt: str) -> str:
    """The rows as CSV (header first) or as a JSON document {"columns": [...], "rows": [...]}."""
    if fmt == "json":
        return json.dumps({"columns": list(COLUMNS), "rows": [{c: r.get(c) for c in COLUMNS} for r in rows]}, indent=1) + "\n"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def plot(rows: Sequence[dict], path: Path, model: str) -> None:
    """A horizontal bar per point: its latency in µs, failed points marked; PNG or SVG by suffix.

    Raises:
        AscendirError: matplotlib missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise AscendirError("sweep --plot needs matplotlib (pip install 'ascendir[plots]')") from None
    tp = any(r.get("tp", 1) > 1 for r in rows)
    labels = [f"{r['target']} · {r['dtype']} · {r['tiling']}" + (f" · tp {r.get('tp', 1)}" if tp else "") for r in rows]
    values = [r.get("latency_us") or 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.35 * len(rows)))
    bars = ax.barh(range(len(rows)), values, color=["tab:red" if r.get("error") else "tab:blue" for r in rows])
    for b, r in zip(bars, rows):
        ax.text(b.get_width(), b.get_y() + b.get_height() / 2, " failed" if r.get("error") else f" {r['bound']}",
                va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("latency (µs, simulated)")
    ax.set_title(f"ascendir sweep: {Path(model).name}", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    from ascendir.api.outputs import write_output

    write_output(path, lambda f: f.write(buf.getvalue()), "plot")
