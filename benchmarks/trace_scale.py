"""`ascendir run --trace` at scale: the LLaMA-2-7B-shaped model of benchmarks/llama7b_shape_only.py
(32 layers, 128 tokens, f16, --shape-only: timing-only, no weight byte read) run without a trace,
with --trace t.json and with --trace t.json.gz: wall time, peak RSS, trace size, and the overhead
ratio against the run without a trace.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/trace_scale.py [--layers 32] [--seq 128] [--short 4]

Each run is its own `ascendir run` process; its wall time, CPU time (user + system) and peak RSS
(maximum resident set size) come from getrusage(RUSAGE_CHILDREN) around it, taken in a fresh wrapper process per run
so one run's peak does not hide the next's. `--short N` also traces an N-layer model: a trace
streamed to disk has about the same peak RSS for N and 32 layers (memory independent of the
trace's length). Goal (issue 21): the traced run <= 3x the run without a trace, bounded memory
(before: 229 s and 6.7 GB against 6 s and 129 MB without a trace, a 1 GB file).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import results  # noqa: E402  (benchmarks/results.py: --write-results)
from llama7b_shape_only import build  # noqa: E402

GOAL = 3.0
# run argv as a child and print its exit status, wall seconds, CPU seconds and peak RSS (KiB) as JSON
_MEASURE = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
wall = time.perf_counter() - t0
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([rc, wall, u.ru_utime + u.ru_stime, u.ru_maxrss]))
"""


def measure(argv: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of the command `argv`.

    Raises:
        SystemExit: the command failed."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, check=True).stdout
    rc, wall, cpu, kib = json.loads(out.strip().splitlines()[-1])
    if rc:
        raise SystemExit(f"{' '.join(argv)} failed with exit code {rc}")
    return wall, cpu, kib / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--short", type=int, default=4, help="also trace a model of this many layers (0: no)")
    results.add_flag(ap)
    args = ap.parse_args()
    exe = str(Path(sys.executable).with_name("ascendir"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sizes = [args.layers] + ([args.short] if args.short else [])
        models = {}
        for n in sizes:
            (tmp / f"m{n}").mkdir()
            models[n], _ = build(tmp / f"m{n}", n, args.seq, "float16")
        print(f"model: LLaMA-2-7B-shaped, seq {args.seq}, f16, --shape-only (timing-only), target ascend910b2")
        print("wall times stretch with the machine's load (shared); CPU time (user + system) is the steadier measure")
        print(f"{'layers':>6}  {'trace':<16} {'wall s':>7} {'CPU s':>6} {'x no trace (CPU)':>16} {'peak RSS MiB':>12} {'file MiB':>9}")
        ratios = {}
        for n in sizes:
            base = [exe, "run", str(models[n]), "--shape-only"]
            wall0, cpu0, rss0 = measure(base)
            print(f"{n:>6}  {'none':<16} {wall0:>7.1f} {cpu0:>6.1f} {1.0:>16.2f} {rss0:>12.0f} {'-':>9}")
            for name in ("t.json", "t.json.gz") if n == args.layers else ("t.json",):
                path = tmp / name
                wall, cpu, rss = measure([*base, "--trace", str(path)])
                size = path.stat().st_size / 2**20
                ratios[(n, name)] = (cpu / cpu0, wall / wall0, rss)
                print(f"{n:>6}  {'--trace ' + name.removeprefix('t'):<16} {wall:>7.1f} {cpu:>6.1f} {cpu / cpu0:>16.2f} {rss:>12.0f} {size:>9.0f}")
                path.unlink()
        ratio, wall_ratio, rss = ratios[(args.layers, "t.json")]
        print(f"summary (issue 21 goal: --trace <= {GOAL:g}x the run without, bounded memory; before: 229 s / 6 s = 38x, 6.7 GB):")
        print(f"  {args.layers} layers --trace overhead {ratio:.2f}x CPU ({wall_ratio:.2f}x wall), goal <= {GOAL:g}x: "
              f"{'met' if ratio <= GOAL else 'NOT met'}")
        if args.short:
            short = ratios[(args.short, "t.json")][2]
            print(f"  peak RSS with --trace: {args.short} layers {short:.0f} MiB, {args.layers} layers {rss:.0f} MiB "
                  f"({rss / short:.2f}x for {args.layers / args.short:.0f}x the launches)")


if __name__ == "__main__":
    with results.recorded("trace_scale"):
        main()
