"""Precision policy: each corpus model compiled with --dtype fp32 / fp16 / bf16 and run on its
onnxruntime (fp32) reference inputs; per model the worst output error relative to the output's
largest |value|, max |got - want| / max |want|, next to the bound tests/test_precision.py holds
it to (8 units of roundoff: fp16 8 · 2^-11, bf16 8 · 2^-8; the test's docstring says why).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/precision.py [--models mlp_small,bert_small]

Models: tests/data/ (910B2, -O2, numerics). Integer outputs must be equal and are not listed.
A model the compiler refuses under a dtype (its clean error: e.g. float values cast to integers,
which need float32 arithmetic) shows `refused` in that column, its reason below the table.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from ascendir.driver import compile_model  # noqa: E402
from ascendir.errors import AscendirError  # noqa: E402
from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
DTYPES = ("fp32", "fp16", "bf16")
BOUND = {"fp16": 8 * 2.0**-11, "bf16": 8 * 2.0**-8}


def worst_error(name: str, dtype: str) -> float:
    """max over float outputs of max |got - want| / max |want| (float64)."""
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    hw = load_target("ascend910b2")
    module, weights = compile_model(DATA / name / "model.onnx", hw.name, dtype=dtype)
    outputs = simulate(module, weights, inputs, hw).outputs
    worst = 0.0
    for k, want in expected.items():
        if want.dtype.kind != "f":
            continue
        w = want.astype(np.float64)
        worst = max(worst, float(np.max(np.abs(outputs[k].astype(np.float64) - w)) / np.max(np.abs(w))))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated (default: every model of tests/data)")
    results.add_flag(ap)
    args = ap.parse_args()
    names = args.models.split(",") if args.models else sorted(p.name for p in DATA.iterdir() if (p / "model.onnx").exists())
    print(f"{'model':36} " + " ".join(f"{d:>9}" for d in DTYPES) + "   (max |error| / max |reference|, 910B2, -O2)")
    worst = dict.fromkeys(BOUND, 0.0)
    refused = []
    for name in names:
        errs: dict[str, float | None] = {}
        for d in DTYPES:
            try:
                errs[d] = worst_error(name, d)
            except AscendirError as e:
                errs[d] = None
                refused.append(f"{name}: {e}")
        for d in BOUND:
            if errs[d] is not None:
                worst[d] = max(worst[d], errs[d])
        print(f"{name:36} " + " ".join("  refused" if errs[d] is None else f"{errs[d]:9.1e}" for d in DTYPES), flush=True)
    for line in refused:
        print(f"refused: {line}")
    for d, b in BOUND.items():
        print(f"{d}: worst {worst[d]:.1e} = {worst[d] / (b / 8):.1f} units of roundoff; bound {b:.1e} (8 units): "
              + ("within" if worst[d] <= b else "EXCEEDED"))


if __name__ == "__main__":
    with results.recorded("precision"):
        main()
