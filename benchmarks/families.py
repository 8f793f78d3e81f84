"""The model families of tests/data/families (scripts/build_family_models.py: OCR, detection,
segmentation, speech, vision and text models at tiny widths) through import -> -O2 -> ascend ->
interpreter against their onnxruntime references: pass, max error, wall time per phase (s) and
simulated cycles on the target (benchmarks/corpus.py's measurement).

    OPENBLAS_NUM_THREADS=1 python benchmarks/families.py [--models swin_small,yolo_small] [--target 910b2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402
import results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated (default: every family model)")
    ap.add_argument("--target", default="ascend910b2")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    results.add_flag(ap)
    args = ap.parse_args()
    manifest = json.loads((ROOT / "tests" / "data" / "families" / "manifest.json").read_text())
    corpus.table(args.models.split(",") if args.models else sorted(manifest), args)


if __name__ == "__main__":
    with results.recorded("families"):
        main()
