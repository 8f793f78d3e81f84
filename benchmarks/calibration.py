"""Predicted vs measured for the validation measurements of reference §7 (V1-V14, V18, V20-V24):
error per case, median and worst |error|.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/calibration.py [--quick]

Same as `ascendir calibrate`. Every prediction uses the shipped target TOMLs as they are: nothing
is fitted per case (ascendir/api/calibration.py documents how each figure is made
comparable with the published one).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402

from rich.console import Console  # noqa: E402

import results  # noqa: E402
from ascendir.api import calibration  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the small cases")
    results.add_flag(ap)
    args = ap.parse_args()
    rows = calibration.run(args.quick, progress=lambda vid: print(f"  simulating {vid} ...", file=sys.stderr, flush=True))
    # wide enough that the table is not wrapped when stdout is a file (docs/results.md)
    calibration.render(rows, Console(width=180))


if __name__ == "__main__":
    with results.recorded("calibration"):
        main()
