"""choose-tiling: candidates scored and search time per model, and the chosen tiling of the
4096³ / §7 V-shapes with its analytic estimate next to the simulated cycles.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/tiling_search.py [--models a,b] [--no-sim]

Corpus models (tests/data/, then $ASCENDIR_CORPUS, default /work/corpus) are imported and run
through the -O2 nn pipeline up to choose-tiling; per model: matmuls, candidates scored, search
seconds. Shapes: the estimate of the chosen tiling and of the template's default heuristic, and
(unless --no-sim) both simulated timing-only, so the estimate's error and the gain are visible.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("ASCENDIR_CORPUS", "/work/corpus"))

SHAPES = [  # (label, m, n, k, dtype, target)
    ("4096^3 f16", 4096, 4096, 4096, "f16", "ascend910b2"),
    ("V3 2304x5120x1536", 2304, 5120, 1536, "bf16", "ascend910b2"),
    ("V5 14336x4096x4096", 14336, 4096, 4096, "bf16", "ascend910b2"),
    ("V6b 8192^3 f32", 8192, 8192, 8192, "f32", "ascend910b2"),
    ("V14a gate 16x5120->17408", 16, 17408, 5120, "bf16", "ascend910b1"),
    ("V14c down 16x17408->5120", 16, 5120, 17408, "bf16", "ascend910b1"),
]


def models(names: list[str] | None) -> list[Path]:
    found = {}
    for base in (ROOT / "tests" / "data", CORPUS):
        if base.is_dir():
            for d in sorted(base.iterdir()):
                if (d / "model.onnx").exists() and d.name not in found:
                    found[d.name] = d
    return [found[n] for n in (names or found) if n in found]


def search_model(path: Path) -> tuple[int, int, float]:
    """(matmuls, candidates scored, seconds) of choose-tiling on one model after -O2's fusions."""
    from ascendir.driver import parse_pipeline, run_passes
    from ascendir.frontends.onnx import import_onnx
    from ascendir.hardware import load_target
    from ascendir.transforms.nn.choose_tiling import ChooseTiling, annotate

    module, weights = import_onnx(path / "model.onnx", None)
    pipe = parse_pipeline(None, "O2")
    passes = tuple(p for p in pipe.passes if not isinstance(p, ChooseTiling))
    from xdsl.passes import PassPipeline

    run_passes(module, PassPipeline(passes), weights)
    stats: list = []
    t0 = time.perf_counter()
    annotate(module, load_target("ascend910b2"), stats=stats)
    secs = time.perf_counter() - t0
    return len(stats), sum(r.scored for _, _, r in stats if r is not None), secs


def simulate_shape(m, n, k, dtype, target, tiling: str | None) -> dict:
    import onnx
    from onnx import TensorProto, helper

    from ascendir.driver import compile_model
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate

    t = {"f16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16, "f32": TensorProto.FLOAT}[dtype]
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
        [helper.make_tensor_value_info("a", t, [m, k]), helper.make_tensor_value_info("b", t, [k, n])],
        [helper.make_tensor_value_info("c", t, [m, n])],
    )
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "mm.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        module, _ = compile_model(p, target, opt_level="O0", tiling=tiling)
    return simulate(module, None, {}, load_target(target), timing_only=True).report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated corpus model names (default: all found)")
    ap.add_argument("--no-sim", action="store_true", help="estimates only")
    results.add_flag(ap)
    args = ap.parse_args()
    from ascendir.hardware import load_target
    from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
    from ascendir.conversion.nn_to_ascend.templates.matmul import heuristic_tiling as heuristic
    from ascendir.conversion.nn_to_ascend.tiling import Problem, Tiling, estimate, search
    from xdsl.dialects.builtin import bf16, f16, f32
    from xdsl.ir import Block

    print("choose-tiling per corpus model (910B2, after -O2 fusions)")
    print(f"  {'model':<26} {'matmuls':>7} {'scored':>9} {'search s':>9}")
    for path in models(args.models.split(",") if args.models else None):
        try:
            n, scored, secs = search_model(path)
            print(f"  {path.name:<26} {n:>7} {scored:>9,} {secs:>9.3f}")
        except Exception as e:  # a model another engineer's frontend work does not import yet
            print(f"  {path.name:<26} skipped: {' '.join(str(e).split())[:100]}")

    print("\nshapes: chosen tiling vs the template's heuristic (estimate / simulated cycles)")
    for label, m, n, k, dt, tgt in SHAPES:
        hw = load_target(tgt)
        p = Problem(1, m, n, k, dt, 4 if dt == "f32" else 2)
        res = search(p, hw)
        ctx = LoweringContext(hw, Block())
        h = heuristic(ctx, m, n, k, {"f16": f16, "bf16": bf16, "f32": f32}[dt])
        ht = Tiling(h.m, h.n, h.k, h.l1_depth)
        he = estimate(p, ht, hw)
        line = (f"  {label:<26} {tgt:<12} chosen {res.best.text():<48} est {res.estimate.cycles:>12,.0f}  "
                f"[{res.scored:,} scored, {res.seconds:.2f} s]\n"
                f"  {'':<26} {'':<12} default {ht.text():<47} est {he.cycles:>12,.0f}")
        if not args.no_sim:
            t0 = time.perf_counter()
            rc = simulate_shape(m, n, k, dt, tgt, res.best.text())
            rh = simulate_shape(m, n, k, dt, tgt, ht.text())
            peak = hw.peak_flops_per_cycle(dt)
            f = lambda r: 2.0 * m * n * k / (r["total_cycles"] * peak)  # noqa: E731
            line += (f"\n  {'':<26} {'':<12} simulated: chosen {rc['total_cycles']:,.0f} ({100 * f(rc):.1f} % peak, est "
                     f"{res.estimate.cycles / rc['total_cycles'] - 1:+.1%}), default {rh['total_cycles']:,.0f} "
                     f"({100 * f(rh):.1f} % peak, est {he.cycles / rh['total_cycles'] - 1:+.1%}) "
                     f"({time.perf_counter() - t0:.0f} s)")
        print(line, flush=True)


if __name__ == "__main__":
    with results.recorded("tiling_search"):
        main()
