"""Tensor parallelism and MC2 on LLaMA-2-7B- and 70B-shaped decoder layers (fp16, Ascend 910B2,
Atlas 800 A2: 8 NPUs on an HCCS full mesh), timing-only.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/tp.py [--models 7b,70b] [--tps 1,2,4,8]
        [--phases prefill,decode1,decode32] [--sp-phases prefill] [--skip 70b:prefill:1,...]
        [--no-model-run] [--write-results]

Per layer shape, phase and TP degree: the layer sharded by shard-tensor-parallel (Megatron:
column-parallel Q/K/V and gate/up, row-parallel o_proj and down_proj each ending in an
all_reduce), lowered twice from the same -O2 module: *unfused* (each MatMul, then a separate
all_reduce comm kernel) and *MC2* (pipelines.AFTER_SHARD: fuse-matmul-allreduce and the SP
fusions, the chunk count chosen by the cost model for the topology), then simulated on the
topology (symmetric ranks: rank 0 simulated, its peers mirrored). For the --sp-phases (prefill)
a second table shards with sequence parallelism: norms and residuals on the token shard, an
all_gather before the column-parallel MatMuls and a reduce_scatter after the row-parallel ones;
MC2 there is AllGatherMatmul / MatmulReduceScatter (1 .. TP stages). Columns: cycles per layer
of one device, the communication (comm kernels' cycles) and its exposed part (not hidden behind
compute), the async comm launches by MC2 kind (0: the cost model kept every region in one
chunk, the unfused sequence), the device's HBM bytes, MC2's speed-up over unfused, the speed-up
of the MC2 layer over the first TP of the table (TP1: unsharded), and the wall time of the row
(both lowerings and simulations). Then the LLaMA-2-7B-shaped 32-layer model
(benchmarks/llama7b_shape_only.py's, seq 128) timing-only on one device and at TP8 (-O2, MC2):
the simulator's wall time (goal: TP8 at most 2x the single device).

Shapes: 7B hidden 4096, 32 heads, 32 KV heads, MLP 11008; 70B hidden 8192, 64 heads, 8 KV heads
(GQA: KV heads replicated once TP exceeds 8), MLP 28672; head dim 128. Prefill: one sequence of
2048 tokens (causal). Decode: batch 1 or 32 new tokens as one row block; their attention is over
themselves only (no KV cache is read: the cache's bytes would add the same to unfused and MC2,
split by TP like the heads), so decode figures are the projections, norms and collectives.
RoPE is left out (elementwise, the same at every level).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from xdsl.parser import Parser  # noqa: E402
from xdsl.passes import PassPipeline  # noqa: E402

import results  # noqa: E402  (benchmarks/results.py: --write-results)
from ascendir.driver import lower, parse_pipeline, run_passes, simulate_ranks  # noqa: E402
from ascendir.hardware import load_target  # noqa: E402
from ascendir.pipelines import after_shard  # noqa: E402
from ascendir.session import make_context  # noqa: E402
from ascendir.transforms.nn.shard_tensor_parallel import shard_module  # noqa: E402
from ascendir.weights import WeightStore  # noqa: E402

TARGET, TOPOLOGY = "ascend910b2", "atlas800-a2"
MODELS = {"7b": (4096, 32, 32, 11008), "70b": (8192, 64, 8, 28672)}
PHASES = {"prefill": 2048, "decode1": 1, "decode32": 32}
D = 128


def t(*dims: int) -> str:
    return f"tensor<{'x'.join(map(str, dims))}xf16>"


def layer_ir(h: int, heads: int, kv: int, mlp: int, s: int) -> str:
    """One decoder layer on s tokens: RMSNorm, Q/K/V (GQA: kv heads), causal attention, o_proj,
    residual, RMSNorm, SwiGLU, residual."""
    x, q4, kv4, g = t(1, s, h), t(1, heads, s, D), t(1, kv, s, D), t(1, s, mlp)
    hk = kv * D
    return f"""
func.func @main(%x: {x}) -> {x} {{
  %ln = nn.weight @ln : {t(h)}
  %wq = nn.weight @wq : {t(h, h)}
  %wk = nn.weight @wk : {t(h, hk)}
  %wv = nn.weight @wv : {t(h, hk)}
  %wo = nn.weight @wo : {t(h, h)}
  %wg = nn.weight @wg : {t(h, mlp)}
  %wu = nn.weight @wu : {t(h, mlp)}
  %wd = nn.weight @wd : {t(mlp, h)}
  %n1 = nn.rms_norm %x, %ln {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, {t(h)}) -> {x}
  %q0 = nn.matmul %n1, %wq : ({x}, {t(h, h)}) -> {x}
  %q1 = nn.reshape %q0 : ({x}) -> {t(1, s, heads, D)}
  %q = nn.transpose %q1 {{perm = array<i64: 0, 2, 1, 3>}} : ({t(1, s, heads, D)}) -> {q4}
  %k0 = nn.matmul %n1, %wk : ({x}, {t(h, hk)}) -> {t(1, s, hk)}
  %k1 = nn.reshape %k0 : ({t(1, s, hk)}) -> {t(1, s, kv, D)}
  %k = nn.transpose %k1 {{perm = array<i64: 0, 2, 1, 3>}} : ({t(1, s, kv, D)}) -> {kv4}
  %v0 = nn.matmul %n1, %wv : ({x}, {t(h, hk)}) -> {t(1, s, hk)}
  %v1 = nn.reshape %v0 : ({t(1, s, hk)}) -> {t(1, s, kv, D)}
  %v = nn.transpose %v1 {{perm = array<i64: 0, 2, 1, 3>}} : ({t(1, s, kv, D)}) -> {kv4}
  %o = nn.attention %q, %k, %v {{num_heads = {heads} : i64, num_kv_heads = {kv} : i64, causal = true, scale = 0.0883883461 : f32}} : ({q4}, {kv4}, {kv4}) -> {q4}
  %o1 = nn.transpose %o {{perm = array<i64: 0, 2, 1, 3>}} : ({q4}) -> {t(1, s, heads, D)}
  %o2 = nn.reshape %o1 : ({t(1, s, heads, D)}) -> {x}
  %o3 = nn.matmul %o2, %wo : ({x}, {t(h, h)}) -> {x}
  %r1 = nn.add %x, %o3 : ({x}, {x}) -> {x}
  %n2 = nn.rms_norm %r1, %ln {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, {t(h)}) -> {x}
  %gt = nn.matmul %n2, %wg : ({x}, {t(h, mlp)}) -> {g}
  %a = nn.silu %gt : ({g}) -> {g}
  %u = nn.matmul %n2, %wu : ({x}, {t(h, mlp)}) -> {g}
  %m = nn.mul %a, %u : ({g}, {g}) -> {g}
  %y = nn.matmul %m, %wd : ({g}, {t(mlp, h)}) -> {x}
  %r2 = nn.add %r1, %y : ({x}, {x}) -> {x}
  func.return %r2 : {x}
}}"""


def _sharded(text: str, tp: int, mc2: bool, sp: bool):
    module = Parser(make_context(), "builtin.module {" + text + "\n}").parse_module()
    run_passes(module, parse_pipeline(None, "O2", TARGET))
    stores = [WeightStore()]
    if tp > 1:
        module, stores = shard_module(module, WeightStore(), tp, sp, TARGET)
        if mc2:
            run_passes(module, PassPipeline(after_shard("O2")))
    lower(module, stores[0], TARGET, topology=TOPOLOGY)
    return module, stores


def _mc2_regions(module) -> str:
    """The MC2 launches' chunk counts: 'kind xC' per fused region kind (from the comm kernels'
    names: mc2_all_reduce_*, mc2_all_gather_*, mc2_reduce_scatter_* launched async)."""
    count: dict[str, int] = {}
    for op in module.walk():
        if op.name == "ascend.launch" and "ascend.async" in op.attributes:
            kind = str(op.properties.get("callee") or op.attributes.get("callee")).split("mc2_")[-1].rsplit("_", 1)[0]
            count[kind] = count.get(kind, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(count.items())) or "-"


def measure(text: str, tp: int, mc2: bool, sp: bool = False) -> dict:
    """Cycles, comm and exposed comm cycles, HBM bytes of one device; the async comm launches."""
    module, stores = _sharded(text, tp, mc2, sp)
    regions = sum(1 for op in module.walk() if op.name == "ascend.launch" and "ascend.async" in op.attributes)
    res = simulate_ranks([module] * tp, stores, [{}] * tp, TARGET, TOPOLOGY, timing_only=True)
    rep = res.report
    cl = rep.get("cluster") or {}
    hbm = rep["bytes"]["gm_read"] + rep["bytes"]["gm_write"]
    return {"cycles": rep["total_cycles"], "comm": cl.get("comm_cycles", 0.0), "exposed": cl.get("exposed_comm_cycles", 0.0),
            "hbm": hbm, "async": regions, "kinds": _mc2_regions(module)}


def layers(models: list[str], phases: list[str], tps: list[int], skip: set[tuple[str, str, int]], sp_phases: set[str]) -> None:
    hw = load_target(TARGET)
    us = 1e6 / hw.clock_hz
    single: dict[str, dict] = {}
    for name in models:
        h, heads, kv, mlp = MODELS[name]
        for phase in phases:
            s = PHASES[phase]
            text = layer_ir(h, heads, kv, mlp, s)
            run = [tp for tp in tps if (name, phase, tp) not in skip]
            for sp in ([False, True] if phase in sp_phases else [False]):
                how = ("sequence parallel: AllGather before the column-parallel, ReduceScatter after the row-parallel "
                       "MatMuls; MC2 = AllGatherMatmul / MatmulReduceScatter" if sp else
                       "AllReduce after the row-parallel MatMuls; MC2 = MatmulAllReduce")
                print(f"\n### LLaMA-{name.upper()}-shaped layer, {phase} ({s} token{'s' if s > 1 else ''}), {how}\n")
                print("| TP | unfused cycles | comm | exposed | MC2 cycles | comm | exposed | async comm launches | HBM MiB / device | "
                      f"MC2 vs unfused | MC2 speed-up over TP{run[0]} | simulated in |")
                print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
                base = None
                for tp in run:
                    t0 = time.perf_counter()
                    if tp == 1:  # unsharded: the same layer in both tables
                        u = m = single.get(text) or single.setdefault(text, measure(text, 1, False))
                    else:
                        u, m = measure(text, tp, False, sp), measure(text, tp, True, sp)
                    base = base or u["cycles"]
                    wall = time.perf_counter() - t0
                    print(f"| {tp} | {u['cycles']:,.0f} ({u['cycles'] * us:,.1f} µs) | {u['comm']:,.0f} | {u['exposed']:,.0f} | "
                          f"{m['cycles']:,.0f} ({m['cycles'] * us:,.1f} µs) | {m['comm']:,.0f} | {m['exposed']:,.0f} | "
                          f"{m['async']} ({m['kinds']}) | {m['hbm'] / 2**20:,.1f} | {u['cycles'] / m['cycles']:.3f}x | "
                          f"{base / m['cycles']:.2f}x | {wall:.0f} s |", flush=True)


def model_run(layers_: int, seq: int) -> None:
    """The 7B-shaped model: timing-only wall time on one device vs TP8 (rank 0 simulated)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from llama7b_shape_only import build

    from ascendir.driver import compile_model

    with tempfile.TemporaryDirectory() as tmp:
        path, _ = build(Path(tmp), layers_, seq, "float16")
        print(f"\n### LLaMA-2-7B-shaped model, {layers_} layers, seq {seq}, timing-only wall time\n")
        print("| run | simulated cycles | compile s | simulate s |")
        print("|---|---:|---:|---:|")
        walls = {}
        for tp in (1, 8):
            t0 = time.perf_counter()
            module, weights = compile_model(path, TARGET, opt_level="O2", emit="nn", shape_only=True)
            stores = [weights]
            if tp > 1:
                module, stores = shard_module(module, weights, tp, False, TARGET)
                run_passes(module, PassPipeline(after_shard("O2")))
            lower(module, stores[0], TARGET, topology=TOPOLOGY)
            t1 = time.perf_counter()
            res = simulate_ranks([module] * tp, stores, [{}] * tp, TARGET, TOPOLOGY, timing_only=True)
            t2 = time.perf_counter()
            walls[tp] = t2 - t1
            print(f"| {'single device' if tp == 1 else f'TP{tp} (MC2)'} | {res.report['total_cycles']:,.0f} | {t1 - t0:.1f} | {t2 - t1:.1f} |",
                  flush=True)
        ratio = walls[8] / walls[1]
        print(f"\nTP8 / single-device simulate wall time: {ratio:.2f}x (goal <= 2x: {'met' if ratio <= 2 else 'NOT met'})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="7b,70b")
    ap.add_argument("--phases", default="prefill,decode1,decode32")
    ap.add_argument("--tps", default="1,2,4,8")
    ap.add_argument("--skip", default="", help="model:phase:tp runs left out, comma-separated (e.g. 70b:prefill:1)")
    ap.add_argument("--sp-phases", default="prefill",
                    help="phases also run sequence-parallel (the token rows split over the devices: prefill; a decode "
                         "step's 1 or 32 rows are too few to split 8 ways into whole cube fractals)")
    ap.add_argument("--no-model-run", action="store_true", help="skip the 32-layer wall-time run")
    ap.add_argument("--model-layers", type=int, default=32)
    ap.add_argument("--model-seq", type=int, default=128)
    results.add_flag(ap)
    args = ap.parse_args()
    print(f"{TARGET} on {TOPOLOGY}, fp16, timing-only; cycles per layer of one device (symmetric ranks)")
    skip = {(m, p, int(t)) for m, p, t in (x.split(":") for x in args.skip.split(",") if x)}
    if skip:
        print("left out: " + ", ".join(f"{m} {p} TP{t}" for m, p, t in sorted(skip)))
    layers(args.models.split(","), args.phases.split(","), [int(x) for x in args.tps.split(",")], skip,
           set(filter(None, args.sp_phases.split(","))))
    if not args.no_model_run:
        model_run(args.model_layers, args.model_seq)


if __name__ == "__main__":
    with results.recorded("tp"):
        main()
