"""Start-up time of the CLIs: wall time of `ascendir --help` (goal, issue 21: under 0.3 s), beside
the bare interpreter's (`python -c pass`) on the same machine, minimum and median over --repeat
runs (the machine may be shared: the minimum is the figure).

    .venv/bin/python benchmarks/cli_startup.py [--repeat 20]

`tests/test_cli_startup.py` checks what keeps it fast without timing anything: `--help` imports
none of numpy, xDSL, rich, onnx or jsonschema.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def wall(cmd: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rows = [("python -c pass", [sys.executable, "-c", "pass"]), ("ascendir --help", [str(BIN / "ascendir"), "--help"]),
            ("ascendir run --help", [str(BIN / "ascendir"), "run", "--help"]), ("ascendir-opt --help", [str(BIN / "ascendir-opt"), "--help"])]
    print(f"{'command':<22} {'min s':>7} {'median s':>9}")
    for name, cmd in rows:
        t = wall(cmd, args.repeat)
        print(f"{name:<22} {min(t):>7.3f} {statistics.median(t):>9.3f}")


if __name__ == "__main__":
    main()
