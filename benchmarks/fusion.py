"""What fusion buys on a LLaMA-2-7B-shaped decoder layer (hidden 4096, 32 heads, MLP 11008, f16)
on Ascend 910B2, timing-only: simulated cycles, GM bytes read + written, peak GM footprint and %
of cube peak for -O0, each fusion pass alone and -O2, at prefill (512 tokens) and decode (1 token,
attending to a 512-token context given as K/V inputs); then causal attention alone at
1k/4k/8k/16k tokens, naive (decompose-attention: scores and probabilities through GM) vs
FlashAttention (fuse-attention), and a decode step (1 query over the same context lengths);
then per kernel of both -O2 layers its cycles against its own floor and the pipe it waits on
(`kernel_table`); then the nn.fused regions -O2 finds in every corpus model (tests/data and
/work/corpus), by kind.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fusion.py [--target ascend910b2] [--quick]
        [--seqs 1024,4096,8192,16384] [--attention-only] [--corpus-only]

"GM MiB saved vs O0" is O0's GM bytes read + written minus the config's (negative: it moves
more, e.g. the fused FFN's L2-resident AIC <-> AIV hand-offs and fp32 partials); each FFN table's
title says what any lowering must move (weights, x, y) and how big the [s, I] intermediate is.

"Peak GM" is plan-memory's live peak: the largest sum of live GM buffers (inputs, weights,
intermediates, workspaces) over the launch sequence of the lowered host function (a buffer lives
from its first to its last launch), i.e. the device memory the layer needs, not the traffic.

The layer is written directly in the nn dialect (already in recomposed form: nn.rms_norm,
nn.attention, nn.silu), so -O0 lowers attention the unfused way (decompose-attention) and the
FFN as three matmuls + two vector kernels. `--quick` runs the FFN block only.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import collections  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from ascendir.session import make_context  # noqa: E402
from ascendir.driver import lower, parse_pipeline, run_passes  # noqa: E402
from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
from ascendir.pipelines import PASSES  # noqa: E402
from ascendir.weights import WeightStore  # noqa: E402
from xdsl.parser import Parser  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)

H, HEADS, D, MLP = 4096, 32, 128, 11008
# -O0, each fusion pass alone (the ones registered: fuse-elementwise lands separately), -O2.
FUSIONS = ("fuse-matmul-epilogue", "fuse-norm-matmul", "fuse-ffn", "fuse-attention", "fuse-elementwise")
CONFIGS = {"O0": "", **{f: f for f in FUSIONS if f in PASSES}, "O2": "O2"}
CORPUS_ROOTS = (Path(__file__).resolve().parent.parent / "tests" / "data", Path("/work/corpus"))


def t(*dims: int) -> str:
    return f"tensor<{'x'.join(map(str, dims))}xf16>"


def ffn_ir(s: int) -> str:
    """SwiGLU FFN of one layer on s tokens (the block fuse-ffn targets)."""
    x, g = t(1, s, H), t(1, s, MLP)
    return f"""
func.func @main(%x: {x}) -> {x} {{
  %wg = nn.weight @wg : {t(H, MLP)}
  %wu = nn.weight @wu : {t(H, MLP)}
  %wd = nn.weight @wd : {t(MLP, H)}
  %gt = nn.matmul %x, %wg : ({x}, {t(H, MLP)}) -> {g}
  %a = nn.silu %gt : ({g}) -> {g}
  %u = nn.matmul %x, %wu : ({x}, {t(H, MLP)}) -> {g}
  %m = nn.mul %a, %u : ({g}, {g}) -> {g}
  %y = nn.matmul %m, %wd : ({g}, {t(MLP, H)}) -> {x}
  func.return %y : {x}
}}"""


def layer_ir(s: int, ctx_len: int) -> str:
    """One decoder layer: RMSNorm, Q/K/V/O projections, attention over ctx_len keys (the new
    tokens' K/V when s == ctx_len, else K/V of the context passed in), residual, RMSNorm, SwiGLU,
    residual. RoPE is left out (a vector op per Q/K element; the same at every level)."""
    x, q4, kv4, g = t(1, s, H), t(1, HEADS, s, D), t(1, HEADS, ctx_len, D), t(1, s, MLP)
    prefill = s == ctx_len
    kv_args = "" if prefill else f", %kc: {kv4}, %vc: {kv4}"
    kv = (
        f"""  %k0 = nn.matmul %n1, %wk : ({x}, {t(H, H)}) -> {x}
  %k1 = nn.reshape %k0 : ({x}) -> {t(1, s, HEADS, D)}
  %k = nn.transpose %k1 {{perm = array<i64: 0, 2, 1, 3>}} : ({t(1, s, HEADS, D)}) -> {q4}
  %v0 = nn.matmul %n1, %wv : ({x}, {t(H, H)}) -> {x}
  %v1 = nn.reshape %v0 : ({x}) -> {t(1, s, HEADS, D)}
  %v = nn.transpose %v1 {{perm = array<i64: 0, 2, 1, 3>}} : ({t(1, s, HEADS, D)}) -> {q4}"""
        if prefill
        else "  %k = nn.identity %kc : ({kv4}) -> {kv4}\n  %v = nn.identity %vc : ({kv4}) -> {kv4}".format(kv4=kv4)
    )
    return f"""
func.func @main(%x: {x}{kv_args}) -> {x} {{
  %ln = nn.weight @ln : {t(H)}
  %wq = nn.weight @wq : {t(H, H)}
  %wk = nn.weight @wk : {t(H, H)}
  %wv = nn.weight @wv : {t(H, H)}
  %wo = nn.weight @wo : {t(H, H)}
  %wg = nn.weight @wg : {t(H, MLP)}
  %wu = nn.weight @wu : {t(H, MLP)}
  %wd = nn.weight @wd : {t(MLP, H)}
  %n1 = nn.rms_norm %x, %ln {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, {t(H)}) -> {x}
  %q0 = nn.matmul %n1, %wq : ({x}, {t(H, H)}) -> {x}
  %q1 = nn.reshape %q0 : ({x}) -> {t(1, s, HEADS, D)}
  %q = nn.transpose %q1 {{perm = array<i64: 0, 2, 1, 3>}} : ({t(1, s, HEADS, D)}) -> {q4}
{kv}
  %o = nn.attention %q, %k, %v {{num_heads = {HEADS} : i64, num_kv_heads = {HEADS} : i64, causal = {"true" if prefill else "false"}, scale = 0.0883883461 : f32}} : ({q4}, {kv4}, {kv4}) -> {q4}
  %o1 = nn.transpose %o {{perm = array<i64: 0, 2, 1, 3>}} : ({q4}) -> {t(1, s, HEADS, D)}
  %o2 = nn.reshape %o1 : ({t(1, s, HEADS, D)}) -> {x}
  %o3 = nn.matmul %o2, %wo : ({x}, {t(H, H)}) -> {x}
  %r1 = nn.add %x, %o3 : ({x}, {x}) -> {x}
  %n2 = nn.rms_norm %r1, %ln {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, {t(H)}) -> {x}
  %gt = nn.matmul %n2, %wg : ({x}, {t(H, MLP)}) -> {g}
  %a = nn.silu %gt : ({g}) -> {g}
  %u = nn.matmul %n2, %wu : ({x}, {t(H, MLP)}) -> {g}
  %m = nn.mul %a, %u : ({g}, {g}) -> {g}
  %y = nn.matmul %m, %wd : ({g}, {t(MLP, H)}) -> {x}
  %r2 = nn.add %r1, %y : ({x}, {x}) -> {x}
  func.return %r2 : {x}
}}"""


def attention_ir(sq: int, skv: int, causal: bool = True) -> str:
    """Attention alone: q [1, 32, sq, 128], k/v [1, 32, skv, 128] (causal aligned to the last
    query, as a decode step over a KV cache)."""
    q4, kv4 = t(1, HEADS, sq, D), t(1, HEADS, skv, D)
    return f"""
func.func @main(%q: {q4}, %k: {kv4}, %v: {kv4}) -> {q4} {{
  %o = nn.attention %q, %k, %v {{num_heads = {HEADS} : i64, num_kv_heads = {HEADS} : i64, causal = {"true" if causal else "false"}, scale = 0.0883883461 : f32}} : ({q4}, {kv4}, {kv4}) -> {q4}
  func.return %o : {q4}
}}"""


def useful_flops(sq: int, skv: int) -> float:
    """Flops the causal attention of `attention_ir` needs (no masked work): QKᵀ and P·V, 2·D each
    per visible (query, key) pair; query i (of sq, aligned to the last key) sees skv - sq + i + 1
    keys. %cube "useful" divides these, %cube the mmad flops executed (masked columns of the
    diagonal blocks included)."""
    pairs = sq * (skv - sq) + sq * (sq + 1) // 2
    return 4.0 * D * HEADS * pairs


def measure(text: str, pipeline: str, hw) -> dict:
    module = Parser(make_context(), "builtin.module {" + text + "\n}").parse_module()
    weights = WeightStore()
    run_passes(module, parse_pipeline(pipeline or None, "O0"))
    nfused = sum(1 for op in module.walk() if op.name == "nn.fused")
    lower(module, weights, hw.name)
    t0 = time.perf_counter()
    rep = simulate(module, weights, {}, hw, timing_only=True).report
    return {
        "cycles": rep["total_cycles"],
        "gm": rep["bytes"].get("gm_read", 0) + rep["bytes"].get("gm_write", 0),
        "gm_read": rep["bytes"].get("gm_read", 0),
        "gm_write": rep["bytes"].get("gm_write", 0),
        "peak_gm": rep["gm_footprint"]["live_peak"],
        "peak": rep.get("cube_peak_fraction", 0.0),
        "fused": nfused,
        "wall": time.perf_counter() - t0,
    }


def measure_kernels(text: str, hw) -> dict:
    """The -O2 timing-only report of `text` (its `kernels` list is what kernel_table prints)."""
    module = Parser(make_context(), "builtin.module {" + text + "\n}").parse_module()
    weights = WeightStore()
    run_passes(module, parse_pipeline("O2", "O0"))
    lower(module, weights, hw.name)
    return simulate(module, weights, {}, hw, timing_only=True).report


def kernel_table(name: str, rep: dict, hw) -> None:
    """Per kernel of one layer's report: cycles, share of the layer, its own floor max(flops
    executed / cube peak, HBM bytes / HBM bandwidth) with HBM bytes = GM reads not served by L2
    + GM writes (the kernel's own traffic; the layer's roofline counts must-move bytes once),
    cycles over that floor, and what it waits on: its busiest pipe (unit.pipe, busy cycles per
    core over the kernel's cycles) and the cube's (M) share."""
    total = rep["total_cycles"]
    peak, hbm = hw.peak_flops_per_cycle("f16"), hw.hbm_bytes_per_cycle
    print(f"\n{name}: {total:,.0f} cycles by kernel (-O2)")
    print(f"  {'kernel':<22} {'cores':<8} {'cycles':>10} {'share':>6} {'floor':>10} {'x floor':>8}  busiest pipe     cube (M)")
    for k in rep["kernels"]:
        b = k["bytes"]
        floor = max(k["flops"] / peak, (b.get("gm_read", 0) - b.get("l2_hit", 0) + b.get("gm_write", 0)) / hbm)
        busy = k.get("pipe_busy_by_unit") or k["pipe_busy"]
        per = {p: v / max(k["cores_used"], 1) / k["cycles"] for p, v in busy.items() if not p.endswith("S")}
        top = max(per, key=per.get) if per else "-"
        cube = per.get("aic.M", per.get("M", 0.0))
        print(f"  {k['name']:<22} {k['core_type']:<4}x{k['block_dim']:<3} {k['cycles']:>10,.0f} {100 * k['cycles'] / total:5.1f}% "
              f"{floor:>10,.0f} {k['cycles'] / floor if floor else 0:>7.2f}x  {top:<9} {100 * per.get(top, 0):4.0f}%  {100 * cube:5.0f}%",
              flush=True)


def row(label: str, r: dict, base: dict | None = None) -> str:
    speed = f"{base['cycles'] / r['cycles']:.2f}x" if base else "1.00x"
    saved = (base["gm"] - r["gm"]) / 2**20 if base else 0.0
    return (f"| {label:24s} | {r['cycles']:>13,.0f} | {speed:>6s} | {r['gm_read'] / 2**20:>8,.1f} | "
            f"{r['gm_write'] / 2**20:>8,.1f} | {saved:>+8,.1f} | "
            f"{r['peak_gm'] / 2**20:>8,.1f} | {100 * r['peak']:5.1f} | {r['fused']:>5d} |")


def ffn_bytes(s: int) -> str:
    """What any FFN lowering must move through GM on s tokens (weights once, x in, y out) next
    to the size of the [s, MLP] intermediate a fusion can keep out of GM (f16, MiB)."""
    weights, xy, h = 3 * H * MLP * 2, 2 * s * H * 2, s * MLP * 2
    return (f"must move: weights {mib(weights)} + x, y {mib(xy)} = {mib(weights + xy)} MiB; "
            f"the [{s}, {MLP}] intermediate is {h / 2**20:,.2f} MiB per pass over it")


def mib(x: float) -> str:
    return f"{x / 2**20:,.1f}"


def corpus_fusions() -> dict[str, collections.Counter]:
    """{model: Counter(fused kind -> count)} at -O2 for every model.onnx under CORPUS_ROOTS (a
    name in several roots counted once)."""
    from ascendir.driver import compile_model

    found: dict[str, collections.Counter] = {}
    for root in CORPUS_ROOTS:
        for folder in sorted(root.glob("*/model.onnx")):
            name = folder.parent.name
            if name in found:
                continue
            module, _ = compile_model(folder, "ascend910b2", opt_level="O2", emit="nn")
            found[name] = collections.Counter(op.kind.data for op in module.walk() if op.name == "nn.fused")
    return found


def print_corpus_table() -> None:
    found = corpus_fusions()
    kinds = sorted({k for c in found.values() for k in c})
    print("\nnn.fused regions found at -O2 per corpus model\n| model | " + " | ".join(kinds) + " | total |\n"
          "|---|" + "---:|" * (len(kinds) + 1))
    for name, c in found.items():
        print(f"| {name} | " + " | ".join(str(c.get(k, 0)) for k in kinds) + f" | {sum(c.values())} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="ascend910b2")
    ap.add_argument("--quick", action="store_true", help="FFN block only")
    ap.add_argument("--attention-only", action="store_true", help="the attention sweep only")
    ap.add_argument("--seqs", default="1024,4096,8192,16384", help="attention sweep lengths")
    ap.add_argument("--corpus-only", action="store_true", help="the corpus fusion-count table only")
    results.add_flag(ap)
    args = ap.parse_args()
    if args.corpus_only:
        print_corpus_table()
        return
    hw = load_target(args.target)
    head = ("| config                   |        cycles | speed  | GM MiB read | GM MiB written | GM MiB saved vs O0 | peak GM MiB | %cube | fused |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    blocks = [("FFN (SwiGLU) prefill 512", ffn_ir(512), 512), ("FFN (SwiGLU) decode 1", ffn_ir(1), 1)]
    if not args.quick:
        blocks += [("layer prefill 512", layer_ir(512, 512), 0), ("layer decode 1 (ctx 512)", layer_ir(1, 512), 0)]
    if args.attention_only:
        blocks = []
    for title, text, tokens in blocks:
        print(f"\n{title} on {hw.name}" + (f" ({ffn_bytes(tokens)})" if tokens else "") + f"\n{head}")
        base = None
        for label, pipe in CONFIGS.items():
            try:
                r = measure(text, pipe, hw)
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"| {label:24s} | failed: {type(e).__name__}: {' '.join(str(e).split())[:120]} |")
                continue
            base = base or r
            print(row(label, r, base), flush=True)
    if args.quick:
        return
    if not args.attention_only:
        for title, text in (("layer prefill 512", layer_ir(512, 512)), ("layer decode 1 (ctx 512)", layer_ir(1, 512))):
            kernel_table(title, measure_kernels(text, hw), hw)
    print(f"\nattention alone (32 heads x 128, f16) on {hw.name}: naive = decompose-attention (O0), "
          "flash = fuse-attention\n"
          "| shape | naive cycles | naive GM MiB r+w | naive peak GM MiB | flash cycles | flash GM MiB r+w | "
          "flash peak GM MiB | speed | flash %cube | flash %cube useful |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    seqs = [int(x) for x in args.seqs.split(",")]
    for label, sq_of in (("prefill causal", lambda s: s), ("decode 1 query", lambda s: 1)):
        for s in seqs:
            res = {}
            for name, pipe in (("naive", ""), ("flash", "fuse-attention")):
                try:
                    res[name] = measure(attention_ir(sq_of(s), s), pipe, hw)
                except Exception as e:  # noqa: BLE001 - report and go on
                    res[name] = {"error": f"{type(e).__name__}: {' '.join(str(e).split())[:80]}"}
            n, f = res["naive"], res["flash"]
            cells = []
            for r in (n, f):
                cells += ["failed: " + r["error"], "", ""] if "error" in r else [f"{r['cycles']:,.0f}", mib(r["gm"]), mib(r["peak_gm"])]
            speed = f"{n['cycles'] / f['cycles']:.2f}x" if "error" not in n and "error" not in f else ""
            cube = f"{100 * f['peak']:.1f}" if "error" not in f else ""
            useful = f"{100 * useful_flops(sq_of(s), s) / (f['cycles'] * hw.peak_flops_per_cycle('f16')):.1f}" if "error" not in f else ""
            print(f"| {label} {s} | " + " | ".join(cells) + f" | {speed} | {cube} | {useful} |", flush=True)
    print_corpus_table()


if __name__ == "__main__":
    with results.recorded("fusion"):
        main()
