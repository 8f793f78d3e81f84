"""Numerics speed against the numpy floor: one LLaMA-7B-shaped decoder layer (prefill 512, fp16
on 910B2, benchmarks/fusion.py `layer_ir`) simulated with numerics, and the same layer's MatMuls
(Q, K, V, O: 512x4096x4096; gate, up: 512x4096x11008; down: 512x11008x4096) in fp32 numpy,
measured in the same run; then `--layers` such layers chained, with numerics.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/numerics_speed.py [--layers 32] [--repeat 2]

The floor is what any simulator that computes these products in fp32 must pay: 2 * 207 GFLOP
through single-thread BLAS. The simulation computes the same products tile by tile (mmad), the
attention, norms and elementwise kernels besides, checks races between pipes and accounts
cycles. Each figure is the minimum over `--repeat` runs of wall seconds and of the process CPU
seconds (the machine may be shared: the ratio is taken on CPU seconds). Goal (issue #22 part 3):
one layer ≤ 2x its floor. The chained layers get weights of their own; their figure is per layer.
Figures: docs/results.md (`--write-results` writes this script's section there).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
from ascendir.weights import WeightStore  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import fusion  # noqa: E402  (7B-shaped layer builder)
import results  # noqa: E402  (benchmarks/results.py: --write-results)
from interpreter_speed import best_of, lowered, model_text, seconds  # noqa: E402

S = 512  # prefill tokens


def random_weights(module, seed: int = 0) -> WeightStore:
    """Every `ascend.weight` of `module` filled with N(0, 0.02^2) fp16 values."""
    rng = np.random.default_rng(seed)
    weights = WeightStore()
    for op in module.walk():
        if op.name == "ascend.weight":
            sym = op.sym.root_reference.data
            if sym not in weights:
                weights.add(sym, (rng.standard_normal(tuple(op.result.type.get_shape())) * 0.02).astype(np.float16))
    return weights


def floor(weights: WeightStore, x: np.ndarray, prefix: str = "") -> float:
    """Seconds of the layer's seven MatMuls in fp32 numpy (inputs converted beforehand, not timed)."""
    def w(name: str) -> np.ndarray:
        return np.asarray(weights[prefix + name], np.float32)

    a = x.reshape(S, fusion.H).astype(np.float32)
    g = np.zeros((S, fusion.MLP), np.float32)
    pairs = [(a, w(n)) for n in ("wq", "wk", "wv", "wo", "wg", "wu")] + [(g, w("wd"))]
    t0 = time.process_time()
    for p, q in pairs:
        p @ q
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32, help="chained layers of the last figure (0: skip it)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure; the minimum is printed")
    results.add_flag(ap)
    args = ap.parse_args()
    hw = load_target("ascend910b2")
    print(f"target {hw.name}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, minimum of {args.repeat} runs")
    module, _ = lowered(fusion.layer_ir(S, S), hw)
    weights = random_weights(module)
    x = np.random.default_rng(1).standard_normal((1, S, fusion.H)).astype(np.float16)
    t_floor = min(floor(weights, x) for _ in range(args.repeat))
    print(f"  numpy floor: the layer's 7 MatMuls in fp32 (4x 512x4096x4096, 2x 512x4096x11008, 512x11008x4096): "
          f"CPU {t_floor:.2f} s")
    res: list = []
    dt, cpu = best_of(lambda: res.append(simulate(module, weights, {"arg0": x}, hw)), args.repeat)
    r = res[-1].report
    print(f"  one 7B-shaped layer prefill {S} with numerics: {seconds(dt, cpu)}, {r['tile_ops']:,} tile ops, "
          f"{r['total_cycles']:,.0f} cycles -> {cpu / t_floor:.2f}x the floor (CPU)")
    summary = [("one 7B layer numerics / numpy floor (CPU)", f"{cpu / t_floor:.2f}x", "≤ 2x")]
    if args.layers:
        many, _ = lowered(model_text(args.layers, S), hw)
        wm = random_weights(many)
        t0, c0 = time.perf_counter(), time.process_time()
        rm = simulate(many, wm, {"arg0": x}, hw)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        f_all = sum(floor(wm, x, f"l{i}_") for i in range(args.layers))
        rep = rm.report
        print(f"  {args.layers} chained layers with numerics: {seconds(dt, cpu)} ({cpu / args.layers:.2f} s CPU per layer), "
              f"{len(rep['kernels'])} launches, {rep['total_cycles']:,.0f} cycles; their MatMuls in numpy CPU {f_all:.1f} s "
              f"-> {cpu / f_all:.2f}x")
        summary.append((f"{args.layers} layers numerics / numpy floor (CPU)", f"{cpu / f_all:.2f}x", "-"))
    print("summary (issue #22 part 3):")
    for what, got, goal in summary:
        print(f"  {what:<46} {got:>8}   goal {goal}")


if __name__ == "__main__":
    with results.recorded("numerics_speed"):
        main()
