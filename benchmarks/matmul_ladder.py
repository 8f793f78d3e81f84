"""The matmul optimisation ladder on the interpreter: cycles and % of cube peak, 4096³ fp16, 910B2.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/matmul_ladder.py [--n 4096] [--target ascend910b2]

Rungs (timing-only, default L2 model "tile"):
  1. naive: single-buffered 128 x 128 tiles (testing.matmul_ir nbuf=1)
  2. double-buffered: ping-pong L1 / L0A / L0B, 128 x 128
  3. double-buffered, 128 x 256 output tiles (fewer A bytes per flop)
  4. ascendir's lowering of an ONNX MatMul (double-buffered template, default tiling)
Swizzled traversal and a searched tiling (`choose-tiling`) are not implemented yet.
Reference §7 V9 [S17] on real 910B2: naive ≈ 50 % of torch.matmul, double buffering ≈ 2x naive,
+ block swizzle ≈ 90 % of torch.matmul (torch.matmul ≈ 90 % of peak, V5).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
from ascendir.interpreter.testing import matmul_ir, parse  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--target", default="ascend910b2")
    args = ap.parse_args()
    n, hw = args.n, load_target(args.target)
    rungs = [
        ("naive (1 buffer, 128x128)", lambda: parse(matmul_ir(n, n, n, tm=128, tn=128, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=1, out_dtype="f16"))),
        ("double-buffered 128x128", lambda: parse(matmul_ir(n, n, n, tm=128, tn=128, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=2, out_dtype="f16"))),
        ("double-buffered 128x256", lambda: parse(matmul_ir(n, n, n, tm=128, tn=256, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=2, out_dtype="f16"))),
        ("ascendir lowering", lambda: _lowered(n, args.target)),
    ]
    print(f"{n}^3 fp16 matmul on {hw.name} (L2 model {hw.memory.l2_model}), peak {hw.peak_flops('f16') / 1e12:.1f} TFLOPS")
    for label, build in rungs:
        mod = build()
        t0 = time.perf_counter()
        rep = simulate(mod, None, {}, hw, timing_only=True).report
        wall = time.perf_counter() - t0
        print(f"  {label:<28} {rep['total_cycles']:>12,.0f} cycles  {100 * rep['cube_peak_fraction']:5.1f} % of cube peak  "
              f"L2 hit {100 * rep['l2_hit_rate']:5.1f} %  ({wall:.1f} s)")


def _lowered(n: int, target: str):
    from ascendir.interpreter.calibration import _onnx_module
    from onnx import TensorProto, helper

    t = TensorProto.FLOAT16
    return _onnx_module(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        [helper.make_tensor_value_info("a", t, [n, n]), helper.make_tensor_value_info("b", t, [n, n])],
        [helper.make_tensor_value_info("c", t, [n, n])],
        target,
    )


if __name__ == "__main__":
    main()
