"""The matmul optimisation ladder on the interpreter: cycles and % of cube peak, 4096³ fp16, 910B2.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/matmul_ladder.py [--n 4096] [--target ascend910b2]

Rungs (timing-only, default L2 model "tile"):
  1. naive: single-buffered 128 x 256 tiles, the tile of S17's step1_baseline.py (matmul_ir nbuf=1)
     the same with its flags removed and ping-ponged by the double-buffer + insert-sync passes
  2. double-buffered: ping-pong L1 / L0A / L0B, 128 x 128
  3. double-buffered, 128 x 256 output tiles (fewer A bytes per flop)
  4. ascendir's lowering of an ONNX MatMul, the template's heuristic tiling (-O0: no choose-tiling)
  5. the same + block swizzle (groups of 4 tile rows, column by column; `--tiling ...,swizzle=4`)
  6. the tiling choose-tiling picks (-O2), with its analytic estimate
`--m/--k` change the shape (e.g. --n 16384 --k 2048 shows the L2 effect of swizzling, reference
§4.5 V10: 30.9 % hit without, 93.7 % with swizzle on 910B2 [S17]).
Reference §7 V9 [S17] on real 910B2: naive ≈ 50 % of torch.matmul, double buffering ≈ 2x naive,
+ block swizzle ≈ 90 % of torch.matmul (torch.matmul ≈ 90 % of peak, V5).

Then the kernel-efficiency table of issue 22 (skip it with --no-table): fp16 on the target at -O2,
the matmul a weight (`nn.weight`, as in a model; stored in NZ fractals, tiling.nz_weight), timing-only; each row against its goal and the
figure this script printed at commit 84c8fa4 (before the issue-22 work, `BEFORE`):
  * GEMMs M x N x K: useful FLOPs 2·M·N·K over cycles x cube peak (goal ≥ 90 % big, ≥ 80 % the
    LLaMA-7B prefill-512 projections: q/k/v/o 512x4096x4096, gate/up 512x11008x4096, down 512x4096x11008);
  * decode GEMVs (M = 1, 16): must-move bytes (A, B, C once, f16) over cycles x HBM bytes/cycle (goal ≥ 75 %);
  * the LLaMA-7B-shaped layer of benchmarks/fusion.py (prefill 512; decode 1 token over a 512 context):
    cycles over its roofline max(useful FLOPs / cube peak, must-move bytes / HBM), where useful FLOPs
    are the projections and attention (causal: the lower triangle, s·(s+1)/2 score entries per head)
    and must-move bytes the weights, x in and out, and (decode) the K/V context read once
    (goal ≤ 1.3x prefill, ≤ 1.2x decode).
Then, per layer, where it loses against its roofline: each kernel's cycles, share of the layer and
floor max(flops executed / cube peak, HBM bytes / HBM bandwidth) with the HBM bytes = GM reads not
served by L2 + GM writes (the kernel's own traffic; the layer's roofline counts must-move bytes once).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
from ascendir.interpreter.testing import matmul_ir, parse  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096, help="M = N (and K unless --k)")
    ap.add_argument("--k", type=int, default=None)
    ap.add_argument("--target", default="ascend910b2")
    ap.add_argument("--no-table", action="store_true", help="the ladder only, no issue-22 efficiency table")
    results.add_flag(ap)
    args = ap.parse_args()
    n, hw = args.n, load_target(args.target)
    k = args.k or n
    from ascendir.conversion.nn_to_ascend.tiling import Problem, search

    chosen = search(Problem(1, n, n, k, "f16", 2), hw)
    heur = _heuristic(n, k, hw)
    rungs = [
        ("naive (1 buffer, 128x256, S17 step 1)", lambda: parse(matmul_ir(n, n, k, tm=128, tn=256, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=1, out_dtype="f16"))),
        ("  naive, flags stripped, then -p double-buffer,insert-sync", lambda: _passes_ping_pong(n, k, hw)),
        ("double-buffered 128x128", lambda: parse(matmul_ir(n, n, k, tm=128, tn=128, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=2, out_dtype="f16"))),
        ("double-buffered 128x256", lambda: parse(matmul_ir(n, n, k, tm=128, tn=256, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=2, out_dtype="f16"))),
        (f"lowering, heuristic {heur}", lambda: _lowered(n, k, args.target, heur, "O0")),
        ("  + swizzle 4", lambda: _lowered(n, k, args.target, heur + ",swizzle=4", "O0")),
        (f"choose-tiling {chosen.best.text()}", lambda: _lowered(n, k, args.target, None, "O2")),
    ]
    print(f"{n}x{n}x{k} fp16 matmul on {hw.name} (L2 model {hw.memory.l2_model}), peak {hw.peak_flops('f16') / 1e12:.1f} TFLOPS; "
          f"choose-tiling scored {chosen.scored:,} candidates in {chosen.seconds:.2f} s, estimate {chosen.estimate.cycles:,.0f} cycles")
    for label, build in rungs:
        mod = build()
        t0 = time.perf_counter()
        rep = simulate(mod, None, {}, hw, timing_only=True).report
        wall = time.perf_counter() - t0
        print(f"  {label:<66} {rep['total_cycles']:>12,.0f} cycles  {100 * rep['cube_peak_fraction']:5.1f} % of cube peak  "
              f"L2 hit {100 * rep['l2_hit_rate']:5.1f} %  ({wall:.1f} s)")
    if not args.no_table:
        efficiency_table(hw)


# Figures this script printed at 84c8fa4 (main before issue 22's kernel work), 910B2: the "before"
# column of the efficiency table (% of cube peak, % of HBM, x roofline as the rows say).
BEFORE = {
    "4096x4096x4096": 82.1, "8192x8192x8192": 88.2, "14336x4096x4096": 85.5,
    "512x4096x4096": 51.9, "512x11008x4096": 59.5, "512x4096x11008": 46.3,
    "1x4096x4096": 61.7, "1x11008x4096": 68.4, "1x4096x11008": 71.4,
    "16x4096x4096": 56.1, "16x11008x4096": 69.6, "16x4096x11008": 70.2,
    "layer prefill 512": 1.98, "layer decode 1 (ctx 512)": 1.56,
}
GEMMS = (("4096x4096x4096", 90), ("8192x8192x8192", 90), ("14336x4096x4096", 90),
         ("512x4096x4096", 80), ("512x11008x4096", 80), ("512x4096x11008", 80))
GEMVS = tuple((f"{m}x{nk}", 75) for m in (1, 16) for nk in ("4096x4096", "11008x4096", "4096x11008"))


def _weight_matmul_ir(m: int, n: int, k: int) -> str:
    def t(*d: int) -> str:
        return f"tensor<{'x'.join(map(str, d))}xf16>"
    return f"""
func.func @main(%x: {t(m, k)}) -> {t(m, n)} {{
  %w = nn.weight @w : {t(k, n)}
  %y = nn.matmul %x, %w : ({t(m, k)}, {t(k, n)}) -> {t(m, n)}
  func.return %y : {t(m, n)}
}}"""


def _layer_roofline(s: int, ctx: int, hw) -> float:
    """Roofline cycles of fusion.py's layer_ir(s, ctx) (see the module docstring), f16."""
    from fusion import D, H, HEADS, MLP

    prefill = s == ctx
    proj = (4 if prefill else 2) * H * H + 3 * H * MLP  # decode: K/V come from the cache
    scores = HEADS * (s * (s + 1) // 2 if prefill else s * ctx)
    flops = 2 * s * proj + 2 * 2 * scores * D
    moved = 2 * (proj + H + 2 * s * H + (0 if prefill else 2 * HEADS * ctx * D))
    return max(flops / hw.peak_flops_per_cycle("f16"), moved / hw.hbm_bytes_per_cycle)


def efficiency_table(hw) -> None:
    from fusion import layer_ir, measure

    print(f"\nissue 22 kernel efficiency on {hw.name}, fp16, -O2, weights as nn.weight (before = at 84c8fa4)")
    print(f"  {'shape':<28} {'cycles':>12}  {'metric':<12} {'before':>7} {'now':>7}  goal")
    peak, hbm = hw.peak_flops_per_cycle("f16"), hw.hbm_bytes_per_cycle
    for shapes, what in ((GEMMS, "cube"), (GEMVS, "HBM")):
        for name, goal in shapes:
            m, n, k = map(int, name.split("x"))
            r = measure(_weight_matmul_ir(m, n, k), "O2", hw)
            if what == "cube":
                now = 100 * 2 * m * n * k / peak / r["cycles"]
            else:
                now = 100 * 2 * (m * k + k * n + m * n) / hbm / r["cycles"]
            met = "met" if now >= goal else "NOT met"
            print(f"  {name:<28} {r['cycles']:>12,.0f}  % of {what:<7} {BEFORE[name]:>6.1f}% {now:>6.1f}%  ≥ {goal} % {met}", flush=True)
    for name, s, ctx, goal in (("layer prefill 512", 512, 512, 1.3), ("layer decode 1 (ctx 512)", 1, 512, 1.2)):
        r = measure(layer_ir(s, ctx), "O2", hw)
        now = r["cycles"] / _layer_roofline(s, ctx, hw)
        met = "met" if now <= goal else "NOT met"
        print(f"  {name:<28} {r['cycles']:>12,.0f}  x roofline   {BEFORE[name]:>6.2f}x {now:>6.2f}x  ≤ {goal}x {met}", flush=True)
    for name, s, ctx in (("layer prefill 512", 512, 512), ("layer decode 1 (ctx 512)", 1, 512)):
        layer_kernels(name, layer_ir(s, ctx), hw)


def layer_kernels(name: str, text: str, hw) -> None:
    """The per-kernel table of one layer at -O2 (fusion.kernel_table)."""
    from fusion import kernel_table, measure_kernels

    kernel_table(name, measure_kernels(text, hw), hw)


def _passes_ping_pong(n: int, k: int, hw):
    """Rung 1's single-buffered kernel with every flag removed, then the double-buffer and
    insert-sync passes: the ping-pong of rung 3 derived by the compiler instead of written by hand."""
    from ascendir.dialects import ascend
    from ascendir.transforms.ascend.double_buffer import double_buffer
    from ascendir.transforms.ascend.insert_sync import insert_sync

    mod = parse(matmul_ir(n, n, k, tm=128, tn=256, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=1, out_dtype="f16"))
    for kern in [op for op in mod.ops if isinstance(op, ascend.KernelOp)]:
        for flag in [op for op in kern.walk() if isinstance(op, ascend.FlagOp)]:
            flag.detach()
            flag.erase()
        double_buffer(kern, hw)
        insert_sync(kern)
    return mod


def _heuristic(n: int, k: int, hw) -> str:
    """The matmul template's own heuristic tiling (templates/matmul.py heuristic_tiling) as text."""
    from xdsl.dialects.builtin import f16
    from xdsl.ir import Block

    from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
    from ascendir.conversion.nn_to_ascend.templates.matmul import heuristic_tiling

    t = heuristic_tiling(LoweringContext(hw, Block()), n, n, k, f16)
    return f"m={t.m},n={t.n},k={t.k},l1_depth={t.l1_depth}"


def _lowered(n: int, k: int, target: str, tiling: str | None, opt: str):
    import tempfile
    from pathlib import Path

    import onnx
    from onnx import TensorProto, helper

    from ascendir.driver import compile_model

    t = TensorProto.FLOAT16
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
        [helper.make_tensor_value_info("a", t, [n, k]), helper.make_tensor_value_info("b", t, [k, n])],
        [helper.make_tensor_value_info("c", t, [n, n])],
    )
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "mm.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        module, _ = compile_model(p, target, opt_level=opt, tiling=tiling)
    return module


if __name__ == "__main__":
    with results.recorded("matmul_ladder"):
        main()
