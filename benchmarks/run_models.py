"""Wall time of `ascendir run` on corpus models (numerics and timing-only), with the simulated
cycles and the max error against the onnxruntime reference.

    OPENBLAS_NUM_THREADS=1 python benchmarks/run_models.py [--models llama_small,llama_realistic]

Models are read from tests/data/ or $ASCENDIR_CORPUS (default /work/corpus); missing ones are
built with ../shared/corpus/build_corpus.py (needs its requirements, see that README).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import results  # noqa: E402  (benchmarks/results.py: --write-results)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ASCENDIR_CORPUS", "/work/corpus"))
BUILDER = ROOT.parent / "shared" / "corpus" / "build_corpus.py"


def find_model(name: str) -> Path:
    for base in (ROOT / "tests" / "data", CORPUS):
        if (base / name / "model.onnx").exists():
            return base / name
    print(f"building {name} into {CORPUS} ...", file=sys.stderr)
    subprocess.run([sys.executable, str(BUILDER), str(CORPUS), "--only", name], check=True)
    return CORPUS / name


def run(model_dir: Path, timing_only: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report, outputs = Path(tmp) / "r.json", Path(tmp) / "o.npz"
        cmd = [str(ROOT / ".venv" / "bin" / "ascendir"), "run", str(model_dir / "model.onnx"),
               "--inputs", str(model_dir / "reference.npz"), "--report", str(report)]
        cmd += ["--timing-only"] if timing_only else ["--outputs", str(outputs)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        wall = time.perf_counter() - t0
        rep = json.loads(report.read_text())
        err = None
        if not timing_only:
            ref = np.load(model_dir / "reference.npz")
            got = np.load(outputs)
            err = max(float(np.max(np.abs(got[k] - ref[f"output:{k}"]))) for k in got.files)
        return {"wall_s": wall, "cycles": rep["total_cycles"], "us": rep["total_seconds"] * 1e6, "max_abs_err": err}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp_small,llama_small,llama_small_dynamo,llama_realistic")
    results.add_flag(ap)
    args = ap.parse_args()
    print(f"{'model':24} {'mode':12} {'wall s':>8} {'cycles':>14} {'sim µs':>10} {'max |err|':>10}")
    for name in args.models.split(","):
        d = find_model(name)
        for timing_only in (False, True):
            r = run(d, timing_only)
            err = f"{r['max_abs_err']:.2e}" if r["max_abs_err"] is not None else "-"
            mode = "timing-only" if timing_only else "numerics"
            print(f"{name:24} {mode:12} {r['wall_s']:8.2f} {r['cycles']:14,.0f} {r['us']:10.1f} {err:>10}")


if __name__ == "__main__":
    with results.recorded("run_models"):
        main()
