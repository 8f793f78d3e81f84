"""Every corpus model through import → -O2 → convert-nn-to-ascend → interpreter, against its
onnxruntime reference: wall time per phase (s), simulated cycles and µs on the target, and the
max abs / rel error of the outputs (pass = fp32 rtol 1e-3, atol 1e-4).

    OPENBLAS_NUM_THREADS=1 python benchmarks/corpus.py [--models resnet18,llama_realistic] [--target 910b2]

Models come from tests/data/ (and its families/) or $ASCENDIR_CORPUS (default /work/corpus, built by
../shared/corpus/build_corpus.py; see benchmarks/run_models.py to build missing ones).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ascendir.driver import compile_model  # noqa: E402
from ascendir.frontends.onnx import import_onnx  # noqa: E402
from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)

CORPUS = Path(os.environ.get("ASCENDIR_CORPUS", "/work/corpus"))


def corpus_models() -> list[str]:
    manifest = CORPUS / "manifest.json"
    if manifest.exists():
        return [m["name"] for m in json.loads(manifest.read_text())["models"]]
    return sorted(p.name for p in (ROOT / "tests" / "data").iterdir() if (p / "model.onnx").exists())


def find(name: str) -> Path:
    for base in (ROOT / "tests" / "data", ROOT / "tests" / "data" / "families", CORPUS):
        if (base / name / "model.onnx").exists():
            return base / name
    raise SystemExit(f"{name}: not in tests/data or {CORPUS}")


def measure(name: str, target: str) -> dict:
    d = find(name)
    with np.load(d / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    t0 = time.perf_counter()
    import_onnx(d / "model.onnx")
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    module, weights = compile_model(d / "model.onnx", target, opt_level="O2")  # imports again
    t_compile = time.perf_counter() - t0 - t_import
    t0 = time.perf_counter()
    result = simulate(module, weights, inputs, load_target(target))
    t_sim = time.perf_counter() - t0
    abs_err = rel_err = 0.0
    ok = True
    for k, want in expected.items():
        got = result.outputs[k].astype(np.float64)
        diff = np.abs(got - want)
        abs_err = max(abs_err, float(diff.max(initial=0.0)))
        rel_err = max(rel_err, float((diff / np.maximum(np.abs(want), 1e-6)).max(initial=0.0)))
        ok &= bool(np.allclose(got, want, rtol=1e-3, atol=1e-4))
    rep = result.report
    return {
        "model": name, "import_s": t_import, "compile_s": max(t_compile, 0.0), "simulate_s": t_sim,
        "cycles": rep["total_cycles"], "us": rep["total_seconds"] * 1e6, "kernels": len(rep["kernels"]),
        "max_abs_err": abs_err, "max_rel_err": rel_err, "ok": ok,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated (default: every corpus model)")
    ap.add_argument("--target", default="ascend910b2")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    results.add_flag(ap)
    args = ap.parse_args()
    names = args.models.split(",") if args.models else corpus_models()
    table(names, args)


def table(names: list[str], args: argparse.Namespace) -> None:
    """Measure `names` and print one row each; exit 1 when one is beyond the tolerance."""
    w = max([24, *map(len, names)])  # the name column fits the longest name
    head = f"{'model':{w}} {'import s':>8} {'compile s':>9} {'sim s':>7} {'cycles':>12} {'sim µs':>9} {'kern':>5} {'max|abs|':>9} {'max rel':>9}  ok"
    print(head)
    rows = []
    for name in names:
        r = measure(name, args.target)
        rows.append(r)
        print(
            f"{name:{w}} {r['import_s']:8.2f} {r['compile_s']:9.2f} {r['simulate_s']:7.2f} {r['cycles']:12,.0f} "
            f"{r['us']:9.1f} {r['kernels']:5d} {r['max_abs_err']:9.2e} {r['max_rel_err']:9.2e}  {'yes' if r['ok'] else 'NO'}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if not all(r["ok"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    with results.recorded("corpus"):
        main()
