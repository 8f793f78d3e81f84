"""Flash attention: the tile search's estimate (templates/flash_attention.estimate_cycles) next
to the simulated kernel, per (shape, tile), and the tile the search picks.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fa_estimate.py [--long]

Shapes: LLaMA-2-7B-shaped heads (D = 128, f16, ascend910b2), prefill causal and not from 512
queries, decode (1 and 16 queries over a long cache), a GQA prefill (32 query heads on 8 K/V
heads); --long adds 4096 and 8192 (about a minute of simulation each).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import math  # noqa: E402

from xdsl.parser import Parser  # noqa: E402

from ascendir.conversion.nn_to_ascend.templates import flash_attention as fa  # noqa: E402
from ascendir.driver import lower, parse_pipeline, run_passes  # noqa: E402
from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
from ascendir.session import make_context  # noqa: E402
from ascendir.weights import WeightStore  # noqa: E402

D = 128
# (hq, hkv, sq, skv, causal, [(br, bc), ...])
SHAPES = [
    (32, 32, 512, 512, True, [(128, 64), (128, 96), (128, 128), (128, 256), (64, 128)]),
    (32, 32, 512, 512, False, [(128, 64), (128, 96), (128, 128), (128, 256)]),
    (32, 32, 1024, 1024, True, [(128, 96), (128, 128), (128, 256)]),
    (32, 32, 2048, 2048, True, [(128, 128), (128, 256)]),
    (32, 32, 1, 512, True, [(1, 128)]),
    (32, 32, 1, 4096, True, [(1, 128)]),
    (32, 32, 16, 4096, True, [(16, 128)]),
    (32, 8, 512, 512, True, [(32, 64), (32, 96), (32, 128)]),
]
LONG = [
    (32, 32, 4096, 4096, True, [(128, 128), (128, 256)]),
    (32, 32, 4096, 4096, False, [(128, 256)]),
    (32, 32, 8192, 8192, True, [(128, 128), (128, 256)]),
]


def attention_ir(hq: int, hkv: int, sq: int, skv: int, causal: bool) -> str:
    def t(*s: int) -> str:
        return f"tensor<{'x'.join(map(str, s))}xf16>"

    q, kv = t(1, hq, sq, D), t(1, hkv, skv, D)
    return f"""builtin.module {{
func.func @main(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{
  %o = nn.attention %q, %k, %v {{num_heads = {hq} : i64, num_kv_heads = {hkv} : i64, causal = {str(causal).lower()}, scale = {1 / math.sqrt(D)} : f32}} : ({q}, {kv}, {kv}) -> {q}
  func.return %o : {q}
}}
}}"""


def simulated(hw, hq: int, hkv: int, sq: int, skv: int, causal: bool, br: int, bc: int) -> float:
    module = Parser(make_context(), attention_ir(hq, hkv, sq, skv, causal)).parse_module()
    run_passes(module, parse_pipeline("fuse-attention,choose-tiling", "O0", hw.name, f"br={br},bc={bc}"))
    lower(module, WeightStore(), hw.name)
    return simulate(module, WeightStore(), {}, hw, timing_only=True).report["total_cycles"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--long", action="store_true", help="add 4096 and 8192 queries")
    args = ap.parse_args()
    hw = load_target("ascend910b2")
    print(f"flash attention estimate vs simulation on {hw.name} (f16, D = {D})\n"
          "| sq | skv | causal | heads q/kv | br,bc | simulated | estimate | est/sim | search picks |\n"
          "|---:|---:|:-:|:-:|:-:|---:|---:|---:|:-:|")
    for hq, hkv, sq, skv, causal, tiles in SHAPES + (LONG if args.long else []):
        s = fa.Shape(1, hkv, hq // hkv, sq, skv, D, D, 2, None, causal)
        pick = fa.search(s, hw)[0].text()
        for br, bc in tiles:
            est = s.cycles(hw, s.tiling(hw, br, bc))
            sim = simulated(hw, hq, hkv, sq, skv, causal, br, bc)
            print(f"| {sq} | {skv} | {'y' if causal else 'n'} | {hq}/{hkv} | {br},{bc} | {sim:,.0f} | {est:,.0f} | {est / sim:.2f} | {pick} |",
                  flush=True)


if __name__ == "__main__":
    main()
