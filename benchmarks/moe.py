"""A MoE layer's expert GEMMs on 910B2, fp16: grouped vs gathered vs dense-all-experts.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/moe.py [--routing uniform|skew=A|FILE]
        [--target ascend910b2] [--sim-tokens 1,16,64,256,2048] [--fused-swiglu auto|always|never]
        [--ep 8 --ep-tokens 1,16,64,256,2048] [--write-results]

Two layers: Mixtral-8x7B-shaped (hidden 4096, expert intermediate 14336, 8 experts, top-2) and
DeepSeek-V3-shaped (hidden 7168, expert intermediate 2048, 256 routed experts, top-8, one
shared expert), at prefill 2048 tokens and decode batch 1 / 16 / 64 / 256. Per row: experts
touched by the routing, cycles (AI Core clock) and expert-weight GM bytes read under

* grouped: GroupedMatmul over the tokens sorted by expert (what issue 18 builds),
* gathered: ascendir's lowering of the batched-expert export today (weights gathered per routed
  token, then batched MatMul; its gathered-weight intermediate in GM shown as `gather GM`),
* dense: every expert on every token.

The first table holds the analytic estimates of ascendir.conversion.nn_to_ascend.moe_cost (the
matmul tiling model's per-group estimates, tiling.estimate). The shared expert's cycles are the
same under all three and printed apart. The routing is the stated assumption (seeded; default
uniform), never real router output.

The second table simulates the routed experts of one layer and their weighted combine
(timing-only, the routing given to the run as --moe-routing gives it; the layer's input is the
tokens, repeated top-k times by an expand as HF's export does): the experts as -O2 lowers a
recognised block (moe_experts: MoeInitRouting with the sorted rows gathered from the tokens,
GroupedMatmul gate+up, SwiGLU, GroupedMatmul down, then MoeFinalizeRouting reading the
expert-major rows through the inverse permutation), as the gathered lowering runs them (HF's
export lowered op by op: the tokens expanded, expert weights gathered per routed pair, batched
MatMuls, SwiGLU; the same combine kernel), and dense (every
expert on every token: two batched MatMuls over the E experts, SwiGLU between; no combine). `weight GB` there: the grouped MatMuls'
expert-weight bytes (the report's moe section: each touched expert once per row tile of its
group). A gathered intermediate beyond HBM cannot run (`> HBM`). `--sim-tokens` picks the token
counts simulated (MoeInitRouting of prefill 2048 of the DeepSeek-V3 layer, 16,384 routed pairs,
runs on many AIVs: its arrays exceed one AIV's UB).

The third table runs the routed experts of one layer under expert parallelism (`--ep`, default 8
devices of `--topology`, shard-expert-parallel: nn.moe_distribute_dispatch / combine) at
`--ep-tokens` (decode 1, 16, 64, 256 and prefill 2048 by default): the slowest device's cycles against
the single device's, the all-to-all
(dispatch + combine comm kernels: cycles, exposed part, their streams' waits for peers summed
over the streams, bytes over the links) and the all_gather
that rebuilds the replicated rows. Token counts whose routed pairs do not split EP ways say so.

Beside each simulated row, the layer's router after its MatMul (benchmarks/moe_router.py, as the
ONNX importer writes it; fp32, as HF runs the routers), timing-only: `router cyc` as -O2 lowers
it (fuse-moe-gating: one moe_gating kernel, ops-transformer's MoeGatingTopKSoftmax for Mixtral's
softmax top-2, MoeGatingTopK with 8 groups, top-4 groups, top-8 for DeepSeek-V3's group-limited
router) and `op by op` (fuse-elementwise only: the topk, reduce, gather and elementwise kernels).

A model check closes the output: today's gathered lowering of small MoE layers (the gathers and
batched MatMuls alone, lowered by ascendir and simulated timing-only) against moe_cost.gathered.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

from ascendir.conversion.nn_to_ascend.moe_cost import MoeShape, dense, gathered, grouped, shared_cycles  # noqa: E402
from ascendir.costmodel.moe_routing import make_routing, parse_routing, tokens_per_expert  # noqa: E402
from ascendir.errors import AscendirError  # noqa: E402
from ascendir.hardware import load_target  # noqa: E402
import moe_router  # noqa: E402  (benchmarks/moe_router.py: the routers as exported)
import results  # noqa: E402  (benchmarks/results.py: --write-results)

LAYERS = {
    "Mixtral-8x7B": MoeShape(hidden=4096, inter=14336, experts=8, top_k=2),
    "DeepSeek-V3": MoeShape(hidden=7168, inter=2048, experts=256, top_k=8, shared=1),
}
TOKENS = (("prefill", 2048), ("decode", 1), ("decode", 16), ("decode", 64), ("decode", 256))
DTYPE = "f16"


CHECK = """
func.func @main(%x: tensor<{p}x{h}x1x{t}>, %m: tensor<{p}x{i}x1x{t}>, %ids: tensor<{p}xi64>) -> (tensor<{p}x{i2}x1x{t}>, tensor<{p}x{h}x1x{t}>) {{
  %wgu = nn.weight @gate_up : tensor<{e}x{i2}x{h}x{t}>
  %gu = nn.gather %wgu, %ids {{axis = 0 : i64}} : (tensor<{e}x{i2}x{h}x{t}>, tensor<{p}xi64>) -> tensor<{p}x{i2}x{h}x{t}>
  %a = nn.matmul %gu, %x : (tensor<{p}x{i2}x{h}x{t}>, tensor<{p}x{h}x1x{t}>) -> tensor<{p}x{i2}x1x{t}>
  %wd = nn.weight @down : tensor<{e}x{h}x{i}x{t}>
  %d = nn.gather %wd, %ids {{axis = 0 : i64}} : (tensor<{e}x{h}x{i}x{t}>, tensor<{p}xi64>) -> tensor<{p}x{h}x{i}x{t}>
  %b = nn.matmul %d, %m : (tensor<{p}x{h}x{i}x{t}>, tensor<{p}x{i}x1x{t}>) -> tensor<{p}x{h}x1x{t}>
  func.return %a, %b : tensor<{p}x{i2}x1x{t}>, tensor<{p}x{h}x1x{t}>
}}
"""


def model_check(hw) -> None:
    """Simulated (timing-only) vs analytic cycles of today's gathered lowering on small layers."""
    from xdsl.parser import Parser

    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate
    from ascendir.session import make_context

    print("\nmodel check: gathered lowering (gathers + batched MatMuls), simulated timing-only vs moe_cost.gathered")
    for tokens, s, t in ((64, MoeShape(128, 128, 8, 2), "f32"), (16, MoeShape(512, 256, 16, 4), "f16")):
        pairs = tokens * s.top_k
        text = CHECK.format(p=pairs, h=s.hidden, i=s.inter, i2=2 * s.inter, e=s.experts, t=t)
        module = Parser(make_context(), text).parse_module()
        run_passes(module, parse_pipeline(f"choose-tiling{{target={hw.name}}}", "O0", hw.name, None), None)
        lower(module, None, hw.name)
        sim = simulate(module, None, {}, hw, timing_only=True).report["total_cycles"]
        est = gathered(s, tokens, t, hw).cycles
        print(f"  {tokens} tokens, H {s.hidden}, I {s.inter}, {s.experts} experts top-{s.top_k}, {t}: simulated "
              f"{sim:,.0f}, analytic {est:,.0f} ({100 * (est - sim) / sim:+.1f} %)")


EXPERTS = """
func.func @main(%xt: tensor<{n}x{h}x{t}>, %ids: tensor<{r}xi64>, %w: tensor<{r}x1x{t}>) -> tensor<{n}x{h}x{t}> {{
  %xr = nn.reshape %xt : (tensor<{n}x{h}x{t}>) -> tensor<{n}x1x{h}x{t}>
  %xx = nn.expand %xr : (tensor<{n}x1x{h}x{t}>) -> tensor<{n}x{k}x{h}x{t}>
  %x = nn.reshape %xx : (tensor<{n}x{k}x{h}x{t}>) -> tensor<{r}x{h}x1x{t}>
  %wgu = nn.weight @gate_up : tensor<{e}x{i2}x{h}x{t}>
  %gu = nn.gather %wgu, %ids {{axis = 0 : i64}} : (tensor<{e}x{i2}x{h}x{t}>, tensor<{r}xi64>) -> tensor<{r}x{i2}x{h}x{t}>
  %wd = nn.weight @down : tensor<{e}x{h}x{i}x{t}>
  %d = nn.gather %wd, %ids {{axis = 0 : i64}} : (tensor<{e}x{h}x{i}x{t}>, tensor<{r}xi64>) -> tensor<{r}x{h}x{i}x{t}>
  %a = nn.matmul %gu, %x : (tensor<{r}x{i2}x{h}x{t}>, tensor<{r}x{h}x1x{t}>) -> tensor<{r}x{i2}x1x{t}>
  %hh = nn.reshape %a : (tensor<{r}x{i2}x1x{t}>) -> tensor<{r}x{i2}x{t}>
  %g = nn.slice %hh {{starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}x{t}>) -> tensor<{r}x{i}x{t}>
  %u = nn.slice %hh {{starts = array<i64: 0, {i}>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}x{t}>) -> tensor<{r}x{i}x{t}>
  %s = nn.silu %g : (tensor<{r}x{i}x{t}>) -> tensor<{r}x{i}x{t}>
  %m = nn.mul %s, %u : (tensor<{r}x{i}x{t}>, tensor<{r}x{i}x{t}>) -> tensor<{r}x{i}x{t}>
  %mr = nn.reshape %m : (tensor<{r}x{i}x{t}>) -> tensor<{r}x{i}x1x{t}>
  %y = nn.matmul %d, %mr : (tensor<{r}x{h}x{i}x{t}>, tensor<{r}x{i}x1x{t}>) -> tensor<{r}x{h}x1x{t}>
  %y2 = nn.reshape %y : (tensor<{r}x{h}x1x{t}>) -> tensor<{r}x{h}x{t}>
  %p = nn.mul %y2, %w : (tensor<{r}x{h}x{t}>, tensor<{r}x1x{t}>) -> tensor<{r}x{h}x{t}>
  %q = nn.reshape %p : (tensor<{r}x{h}x{t}>) -> tensor<{n}x{k}x{h}x{t}>
  %o = nn.reduce_sum %q {{axes = array<i64: 1>, keepdims = false}} : (tensor<{n}x{k}x{h}x{t}>) -> tensor<{n}x{h}x{t}>
  func.return %o : tensor<{n}x{h}x{t}>
}}
"""
DENSE = """
func.func @main(%xt: tensor<{e}x{h}x{n}x{t}>) -> tensor<{e}x{h}x{n}x{t}> {{
  %wgu = nn.weight @gate_up : tensor<{e}x{i2}x{h}x{t}>
  %a = nn.matmul %wgu, %xt : (tensor<{e}x{i2}x{h}x{t}>, tensor<{e}x{h}x{n}x{t}>) -> tensor<{e}x{i2}x{n}x{t}>
  %g = nn.slice %a {{starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}} : (tensor<{e}x{i2}x{n}x{t}>) -> tensor<{e}x{i}x{n}x{t}>
  %u = nn.slice %a {{starts = array<i64: 0, {i}, 0>, steps = array<i64: 1, 1, 1>}} : (tensor<{e}x{i2}x{n}x{t}>) -> tensor<{e}x{i}x{n}x{t}>
  %s = nn.silu %g : (tensor<{e}x{i}x{n}x{t}>) -> tensor<{e}x{i}x{n}x{t}>
  %m = nn.mul %s, %u : (tensor<{e}x{i}x{n}x{t}>, tensor<{e}x{i}x{n}x{t}>) -> tensor<{e}x{i}x{n}x{t}>
  %wd = nn.weight @down : tensor<{e}x{h}x{i}x{t}>
  %y = nn.matmul %wd, %m : (tensor<{e}x{h}x{i}x{t}>, tensor<{e}x{i}x{n}x{t}>) -> tensor<{e}x{h}x{n}x{t}>
  func.return %y : tensor<{e}x{h}x{n}x{t}>
}}
"""


def _simulate(text: str, hw, grouped: bool, routing=None) -> dict | str:
    """The report of `text` lowered (fuse-ffn, [moe_experts], fuse-elementwise, choose-tiling)
    and simulated timing-only, or why it cannot run."""
    from xdsl.parser import Parser

    from ascendir.conversion.nn_to_ascend.templates import moe_experts
    from ascendir.dialects import nn
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate
    from ascendir.patterns import top_level_ops
    from ascendir.session import make_context

    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline("fuse-ffn", "O0", hw.name, None), None)
    if grouped:
        ffn = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == "ffn"]
        moe_experts.fuse(moe_experts.match(ffn[0]), "layer")
    run_passes(module, parse_pipeline(f"fuse-moe-finalize-routing,fuse-elementwise,choose-tiling{{target={hw.name}}}", "O0",
                                      hw.name, None), None)
    try:
        lower(module, None, hw.name)
        return simulate(module, None, {}, hw, timing_only=True, moe_routing={"layer": routing} if grouped else None).report
    except AscendirError as e:
        return "> HBM" if "HBM" in str(e) else f"error: {e}"


def _router(name: str, tokens: int) -> str:
    """The router of layer `name` (LAYERS) for `tokens` tokens, fp32 nn IR text."""
    s = LAYERS[name]
    if s.experts == 256:  # DeepSeek-V3: n_group 8, topk_group 4
        return moe_router.grouped_router(tokens, s.experts, 8, 4, s.top_k, "f32")
    return moe_router.softmax_router(tokens, s.experts, s.top_k, "f32")


def _simulate_router(text: str, hw, fused: bool) -> dict | str:
    """The report of a router lowered as -O2 does (fuse-moe-gating when `fused`, then
    fuse-elementwise, choose-tiling) and simulated timing-only, or why it cannot run."""
    from xdsl.parser import Parser

    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate
    from ascendir.session import make_context

    module = Parser(make_context(), text).parse_module()
    passes = ("fuse-moe-gating," if fused else "") + f"fuse-elementwise,choose-tiling{{target={hw.name}}}"
    run_passes(module, parse_pipeline(passes, "O0", hw.name, None), None)
    try:
        lower(module, None, hw.name)
        return simulate(module, None, {}, hw, timing_only=True).report
    except AscendirError as e:
        return f"error: {e}"


def simulated(hw, spec, tokens: list[int]) -> None:
    """The second table of the module docstring."""
    from ascendir.conversion.nn_to_ascend.templates.grouped_matmul import row_tile

    from ascendir.conversion.nn_to_ascend.templates.moe_experts import FUSE_SWIGLU

    print("\nsimulated (timing-only, fp16): the routed experts of one layer, cycles of all their kernels; "
          f"GMM = the two grouped MatMuls; SwiGLU fused into the first: {FUSE_SWIGLU}")
    for name, s in LAYERS.items():
        print(f"\n{name}:")
        print(f"  {'tokens':>6s} {'touched':>7s} | {'grouped cyc':>12s} {'GMM cyc':>11s} {'weight GB':>9s} | "
              f"{'gathered cyc':>13s} | {'dense cyc':>12s} | {'router cyc':>10s} {'op by op':>9s} | "
              f"{'grouped µs':>10s} {'sim s':>6s}")
        for t in tokens:
            t0 = time.perf_counter()
            idx = make_routing(spec, t, s.top_k, s.experts)
            counts = tokens_per_expert(idx, s.experts)
            r = t * s.top_k
            fmt = dict(r=r, n=t, k=s.top_k, h=s.hidden, i=s.inter, i2=2 * s.inter, e=s.experts, t=DTYPE)
            g = _simulate(EXPERTS.format(**fmt), hw, True, idx)
            ga = _simulate(EXPERTS.format(**fmt), hw, False)
            d = _simulate(DENSE.format(**fmt), hw, False)
            rf, ru = (_simulate_router(_router(name, t), hw, fused) for fused in (True, False))
            bm = row_tile(r, s.experts)
            wb = int((-(-counts // bm)).sum()) * s.expert_bytes(DTYPE)

            def cyc(rep) -> str:
                return f"{rep['total_cycles']:,.0f}" if isinstance(rep, dict) else rep

            gmm = sum(k["cycles"] for k in g["kernels"] if k["name"].startswith("grouped_matmul")) if isinstance(g, dict) else 0
            us = g["total_cycles"] * 1e6 / hw.clock_hz if isinstance(g, dict) else float("nan")
            print(f"  {t:6d} {int((counts > 0).sum()):7d} | {cyc(g):>12s} {gmm:11,.0f} {_gb(wb)} | {cyc(ga):>13s} | "
                  f"{cyc(d):>12s} | {cyc(rf):>10s} {cyc(ru):>9s} | {us:10.1f} {time.perf_counter() - t0:6.1f}")


def _simulate_ep(text: str, hw, routing, ep: int, topology: str) -> dict | str:
    """The report (rank 0's, with the cluster section) of `text` with its routed experts over
    `ep` devices (shard-expert-parallel after moe_experts, as `ascendir run --ep`), timing-only
    on `topology` with `routing`, or why it cannot run."""
    from xdsl.parser import Parser

    from ascendir.conversion.nn_to_ascend.templates import moe_experts
    from ascendir.dialects import nn
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate_cluster
    from ascendir.patterns import top_level_ops
    from ascendir.session import make_context
    from ascendir.transforms.nn.shard_expert_parallel import shard_expert_parallel

    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline("fuse-ffn", "O0", hw.name, None), None)
    ffn = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == "ffn"]
    moe_experts.fuse(moe_experts.match(ffn[0]), "layer")
    run_passes(module, parse_pipeline(f"fuse-moe-finalize-routing,fuse-elementwise,choose-tiling{{target={hw.name}}}", "O0",
                                      hw.name, None), None)
    try:
        shard_expert_parallel(module, ep)
        lower(module, None, hw.name)
        res = simulate_cluster([module] * ep, [None] * ep, [{}] * ep, hw, topology, timing_only=True,
                               moe_routing={"layer": routing})
        return res[0].report
    except AscendirError as e:
        return f"error: {e}"


def expert_parallel(hw, spec, tokens: list[int], ep: int, topology: str) -> None:
    """The third table: the routed experts of one layer under expert parallelism."""
    print(f"\nexpert parallel (timing-only, fp16): the routed experts of one layer over EP {ep} ({topology}); "
          "each device brings 1/EP of the routed pairs, dispatches them to the experts' devices, combines them back "
          "and all-gathers them (its inputs are replicated); cycles of the slowest device; all-to-all = dispatch + "
          "combine comm kernels, exposed = the part no compute overlaps (all of it: they run between the kernels), "
          "stream wait = cycles its per-peer streams spent waiting for peers' handshakes, summed over the streams "
          "(not wall time: the routing's load imbalance, a device whose experts got more rows reaching the combine "
          "later); MB sent over the links by all devices")
    for name, s in LAYERS.items():
        print(f"\n{name} (EP {ep}: {s.experts // ep} experts per device):")
        print(f"  {'tokens':>6s} | {'1 device cyc':>12s} | {'EP cyc':>11s} {'speed-up':>8s} | {'all-to-all':>10s} "
              f"{'exposed':>10s} {'stream wait':>11s} {'MB sent':>8s} | {'all_gather':>10s} | {'sim s':>6s}")
        for t in tokens:
            t0 = time.perf_counter()
            idx = make_routing(spec, t, s.top_k, s.experts)
            fmt = dict(r=t * s.top_k, n=t, k=s.top_k, h=s.hidden, i=s.inter, i2=2 * s.inter, e=s.experts, t=DTYPE)
            one = _simulate(EXPERTS.format(**fmt), hw, True, idx)
            rep = _simulate_ep(EXPERTS.format(**fmt), hw, idx, ep, topology)
            if not isinstance(rep, dict):
                print(f"  {t:6d} | {rep}")
                continue
            colls = rep["cluster"]["collectives"]
            a2a = [c for c in colls if c["kernel"].startswith("moe_distribute")]
            ag = sum(c["cycles"] for c in colls if c["kernel"].startswith("all_gather"))
            total = rep["cluster"]["total_cycles"]
            single = one["total_cycles"] if isinstance(one, dict) else float("nan")
            print(f"  {t:6d} | {single:12,.0f} | {total:11,.0f} {single / total:7.2f}x | "
                  f"{sum(c['cycles'] for c in a2a):10,.0f} {sum(c['exposed_cycles'] for c in a2a):10,.0f} "
                  f"{sum(c['wait_cycles'] for c in a2a):11,.0f} {sum(c['bytes_sent'] for c in a2a) / 1e6:8.2f} | "
                  f"{ag:10,.0f} | {time.perf_counter() - t0:6.1f}")


def _gb(b: float) -> str:
    return f"{b / 1e9:9.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="ascend910b2")
    ap.add_argument("--routing", default="uniform", help="uniform, skew=A or an .npz with indices [T, k]")
    ap.add_argument("--sim-tokens", default="1,16,64,256,2048",
                    help="token counts of the simulated table (comma-separated; empty: none)")
    ap.add_argument("--fused-swiglu", choices=("auto", "always", "never"), default="auto",
                    help="SwiGLU in the gate/up GroupedMatmul of the simulated grouped rows: the cost model's "
                         "choice (auto), wherever it fits (always), or its own kernel (never)")
    ap.add_argument("--ep-tokens", default="1,16,64,256,2048",
                    help="token counts of the expert-parallel table (comma-separated; empty: none)")
    ap.add_argument("--ep", type=int, default=8, help="devices of the expert-parallel table")
    ap.add_argument("--topology", default="atlas800-a2", help="topology of the expert-parallel table")
    results.add_flag(ap)
    args = ap.parse_args()
    from ascendir.conversion.nn_to_ascend.templates import moe_experts

    moe_experts.FUSE_SWIGLU = args.fused_swiglu
    try:
        spec = parse_routing(args.routing)
    except AscendirError as e:
        ap.error(str(e))
    hw = load_target(args.target)
    us = 1e6 / hw.clock_hz
    print(f"{hw.name}, {DTYPE}, routing: {spec.text()} (seeded), HBM {hw.memory.hbm_bw_Bps / 1e12:.2f} TB/s, "
          f"{hw.memory.hbm_bytes / 1e9:.0f} GB (a gathered intermediate beyond it cannot run)")
    print("cycles of the routed-expert GEMMs (gate+up [H, 2I], down [I, H]); weight GB = expert-weight bytes read")
    for name, s in LAYERS.items():
        print(f"\n{name}: H {s.hidden}, I {s.inter}, {s.experts} experts, top-{s.top_k}"
              + (f", {s.shared} shared expert" if s.shared else "")
              + f"; {s.expert_bytes(DTYPE) / 1e6:.1f} MB per expert")
        print(f"  {'phase':8s} {'tokens':>6s} {'touched':>7s} | {'grouped cyc':>12s} {'weight GB':>9s} | "
              f"{'gathered cyc':>13s} {'weight GB':>9s} {'gather GM':>9s} | {'dense cyc':>12s} {'weight GB':>9s} | "
              f"{'grouped µs':>10s} {'shared cyc':>11s}")
        for phase, t in TOKENS:
            counts = tokens_per_expert(make_routing(spec, t, s.top_k, s.experts), s.experts)
            g, ga, d = grouped(s, counts, DTYPE, hw), gathered(s, t, DTYPE, hw), dense(s, t, DTYPE, hw)
            print(f"  {phase:8s} {t:6d} {int((counts > 0).sum()):7d} | {g.cycles:12,.0f} {_gb(g.weight_bytes)} | "
                  f"{ga.cycles:13,.0f} {_gb(ga.weight_bytes)} {_gb(ga.gm_bytes_peak)} | {d.cycles:12,.0f} "
                  f"{_gb(d.weight_bytes)} | {g.cycles * us:10.1f} {shared_cycles(s, t, DTYPE, hw):11,.0f}")
    simulated(hw, spec, [int(x) for x in args.sim_tokens.split(",") if x])
    expert_parallel(hw, spec, [int(x) for x in args.ep_tokens.split(",") if x], args.ep, args.topology)
    model_check(hw)


if __name__ == "__main__":
    with results.recorded("moe"):
        main()
