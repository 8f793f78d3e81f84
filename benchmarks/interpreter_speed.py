"""Interpreter speed: tile ops per second, timing-only and with numerics, on a generated tiled
matmul kernel (default 1024^3 fp16, 128^3 tiles, double buffered, 24 blocks on 910B2).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/interpreter_speed.py [--size 1024] [--tile 128]

Tile ops = DMA copies + mmads + vector ops executed (report["tile_ops"]); scalar index math,
loop control and flags run too but are not counted.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter.executor import compile_module  # noqa: E402
from ascendir.interpreter.report import build_report  # noqa: E402
from ascendir.interpreter.testing import matmul_ir, parse  # noqa: E402


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, t = args.size, args.tile
    hw = load_target("ascend910b2")
    t0 = time.perf_counter()
    module = parse(matmul_ir(n, n, n, tm=t, tn=t, tk=t, block_dim=hw.num_aic, nbuf=2))
    t_parse = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    print(f"tiled matmul {n}^3 fp16, {t}^3 tiles, {hw.num_aic} blocks, target {hw.name}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    print(f"  parse + verify IR: {t_parse:.3f} s")
    for timing_only in (True, False):
        t0 = time.perf_counter()
        prog = compile_module(module, hw, None, timing_only=timing_only)
        t_compile = time.perf_counter() - t0
        feeds = {} if timing_only else {"a": a, "b": b}
        result: list = []
        dt = best_of(lambda: result.append(prog.run(feeds)), args.repeat)
        outputs, records = result[-1]
        rep = build_report(records, hw)
        ops = rep["tile_ops"]
        mode = "timing-only" if timing_only else "numerics   "
        print(f"  {mode}: compile {t_compile * 1e3:.1f} ms, run {dt:.3f} s, {ops} tile ops ({ops / dt:,.0f} tile-ops/s), "
              f"{rep['total_cycles']:,.0f} cycles")
        if not timing_only:
            err = np.abs(outputs["c"] - a.astype(np.float32) @ b.astype(np.float32)).max()
            print(f"  numerics max |error| vs numpy fp32: {err:.2e}")


if __name__ == "__main__":
    main()
