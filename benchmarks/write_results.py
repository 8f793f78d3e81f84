"""Regenerate docs/results.md: run the quick form of every benchmark script that has one, each
with --write-results (benchmarks/results.py), one after the other.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/write_results.py [--only calibration,corpus] [--full]

`--full` runs the complete forms instead, the scripts without a quick form included (hours on a
2-core machine). A script that fails leaves its section as it was and is named at the end; the
exit code is then 1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import results

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated section names (default: all)")
    ap.add_argument("--full", action="store_true", help="the complete runs, not the quick forms")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(results.SECTIONS)
    unknown = [n for n in names if n not in results.SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(results.SECTIONS)}")
    if not results.RESULTS.exists():
        results.RESULTS.write_text(results._skeleton())
    failed = []
    for name in names:
        s = results.SECTIONS[name]
        argv = s.full if args.full else s.quick
        if argv is None:
            print(f"{name}: no quick form, skipped (run: {results.command(name, s.full)})", file=sys.stderr)
            continue
        print(f"{name}: {results.command(name, argv)}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, str(HERE / f"{name}.py"), *argv, results.FLAG],
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL).returncode
        print(f"{name}: exit {rc} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        if rc:
            failed.append(name)
    if failed:
        sys.exit(f"failed (sections left as they were): {', '.join(failed)}")


if __name__ == "__main__":
    main()
