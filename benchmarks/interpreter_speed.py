"""Interpreter speed: tile ops per second (timing-only and with numerics) on generated tiled
matmul kernels, wall time of a LLaMA-7B-shaped 32-layer prefill-512 model (timing-only) and of
one such layer with numerics, and the speed ratio against xDSL's own interpreter.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/interpreter_speed.py [--quick] [--layers 32]

Tile ops = DMA copies + mmads + vector ops executed, extrapolated or reused
(report["tile_ops"]; interpreter/accel/steady.py: steady-state jumps, nested, and whole loop executions
applied again); scalar index math, loop control and flags run too but are not counted. Every run
compiles a fresh program, so identical-launch reuse (interpreter/accel/memo.py) never serves a repeat;
each figure is the minimum over `--repeat` runs (wall time, and the process CPU time beside it:
the machine may be shared; tile-ops/s per wall second, and per CPU second in brackets).
Timing-only runs do not check races (interpreter/check/race.py; `check_races=True` would), numerics
runs do.
Goals (issue #5): ≥ 1 M tile-ops/s timing-only, 32-layer 7B prefill-512 timing-only ≤ 30 s,
one 7B layer with numerics ≤ 30 s.
Figures: docs/results.md (`--write-results` writes this script's section there).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import compile_module  # noqa: E402
from ascendir.interpreter import build_report  # noqa: E402
from ascendir.interpreter.testing import matmul_ir, parse  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import fusion  # noqa: E402  (7B-shaped layer builder)
import results  # noqa: E402  (benchmarks/results.py: --write-results)


def best_of(fn, repeat: int) -> tuple[float, float]:
    """Minimum wall and minimum process CPU seconds of `repeat` calls of fn. A call's memory
    management is in its time: `simulate` leaves (almost) no objects in reference cycles
    (sim/chip.py `ModuleProg.close`; c20e03f left ~300,000 after a 7B layer, ~0.4-0.5 s to collect,
    in no call's time), so its program is freed as it returns. The collection before each call,
    outside its time, takes what else earlier calls left in cycles (a caller's own objects), which
    the collector's next full pass would otherwise charge to whichever later call allocates enough."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def tile_ops_per_s(hw, n: int, t: int, timing_only: bool, repeat: int, extrapolate: bool = True) -> tuple[tuple[float, float], dict, float]:
    module = parse(matmul_ir(n, n, n, tm=t, tn=t, tk=t, block_dim=hw.num_aic, nbuf=2))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    feeds = {} if timing_only else {"a": a, "b": b}
    out: list = []

    def once() -> None:
        prog = compile_module(module, hw, None, timing_only=timing_only, extrapolate=extrapolate)
        out.append(prog.run(feeds))

    dt = best_of(once, repeat)
    outputs, records = out[-1]
    rep = build_report(records, hw)
    err = 0.0 if timing_only else float(np.abs(outputs["c"] - a.astype(np.float32) @ b.astype(np.float32)).max())
    return dt, rep, err


def model_text(layers: int, s: int) -> str:
    """`layers` chained 7B-shaped decoder layers (fusion.layer_ir), weights renamed per layer."""
    one = fusion.layer_ir(s, s)
    head, rest = one.split("{", 1)
    body, _ret = rest.rsplit("func.return", 1)
    lines = []
    for i in range(layers):
        b = body.replace("@", f"@l{i}_").replace("%", f"%l{i}_")
        b = b.replace(f"%l{i}_x", "%x" if i == 0 else f"%l{i - 1}_r2")
        lines.append(b)
    x = fusion.t(1, s, fusion.H)
    return f"{head}{{{''.join(lines)}  func.return %l{layers - 1}_r2 : {x}\n}}"


def lowered(text: str, hw):
    from xdsl.parser import Parser

    from ascendir.session import make_context
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.weights import WeightStore

    module = Parser(make_context(), "builtin.module {" + text + "\n}").parse_module()
    weights = WeightStore()
    run_passes(module, parse_pipeline(None, "O2"))
    lower(module, weights, hw.name)
    return module, weights


def xdsl_ratio(n: int, repeat: int) -> tuple[float, float]:
    """Scalar loop nest (n×n iterations of muli + addi, carried sum) on xDSL's Interpreter and
    on ours (host function, same IR): minimum wall seconds each over `repeat` runs."""
    from xdsl.interpreter import Interpreter
    from xdsl.interpreters.arith import ArithFunctions
    from xdsl.interpreters.func import FuncFunctions
    from xdsl.interpreters.scf import ScfFunctions

    text = f"""builtin.module {{
  func.func @main() -> index {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = arith.constant {n} : index
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (index) {{
      %r2 = scf.for %j = %c0 to %n step %c1 iter_args(%a2 = %acc) -> (index) {{
        %p = arith.muli %i, %j : index
        %s = arith.addi %a2, %p : index
        scf.yield %s : index
      }}
      scf.yield %r2 : index
    }}
    func.return %r : index
  }}
}}"""
    module = parse(text)
    expect = sum(i * j for i in range(n) for j in range(n))

    def xdsl() -> None:
        interp = Interpreter(module)
        for impl in (ArithFunctions(), ScfFunctions(), FuncFunctions()):
            interp.register_implementations(impl)
        (got,) = interp.call_op("main", ())
        got = got.value.data if hasattr(got, "value") else got  # xDSL returns index results as IntegerAttr
        assert got == expect, (got, expect)

    prog = compile_module(module, load_target("ascend910b2"), None, timing_only=True)

    def ours() -> None:
        outs, _ = prog.run({})
        assert outs["out0"] == expect

    return best_of(xdsl, repeat)[0], best_of(ours, repeat)[0]


def seconds(wall: float, cpu: float) -> str:
    return f"{wall:.2f} s (CPU {cpu:.2f} s)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096, help="timing-only matmul size")
    ap.add_argument("--numerics-size", type=int, default=1024)
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the minimum is printed")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="skip the 32-layer and numerics-layer runs")
    results.add_flag(ap)
    args = ap.parse_args()
    hw = load_target("ascend910b2")
    t = args.tile
    print(f"target {hw.name}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, minimum of {args.repeat} runs")
    summary = []
    for n, timing_only, ex in ((args.size, True, True), (args.size, True, False), (args.numerics_size, False, True)):
        (dt, cpu), rep, err = tile_ops_per_s(hw, n, t, timing_only, args.repeat, ex)
        ops = rep["tile_ops"]
        mode = ("timing-only" + ("" if ex else ", no extrapolation")) if timing_only else "numerics"
        skipped = sum(k["extrapolated_iterations"] for k in rep["kernels"])
        print(f"  matmul {n}^3 fp16 {t}^3 tiles, {mode}: {seconds(dt, cpu)}, {ops} tile ops -> {ops / dt:,.0f} tile-ops/s "
              f"({ops / cpu:,.0f} per CPU s), "
              f"{rep['total_cycles']:,.0f} cycles, {skipped} loop iterations extrapolated"
              + (f", max |error| vs numpy fp32 {err:.2e}" if not timing_only else ""))
        if ex:
            summary.append((f"tile-ops/s {mode}", f"{ops / dt:,.0f}", "≥ 1,000,000" if timing_only else "-"))

    n_x = 150
    t_xdsl, t_ours = xdsl_ratio(n_x, args.repeat)
    print(f"  scalar scf.for nest {n_x}x{n_x} (muli + addi, carried sum): xdsl.interpreter {t_xdsl:.3f} s, "
          f"ascendir {t_ours:.3f} s -> {t_xdsl / t_ours:.1f}x")
    summary.append(("speed vs xdsl.interpreter", f"{t_xdsl / t_ours:.1f}x", "-"))
    if not args.quick:
        t0 = time.perf_counter()
        module, _ = lowered(model_text(args.layers, 512), hw)
        t_lower = time.perf_counter() - t0
        out: list = []

        def run_model(module=module) -> None:
            prog = compile_module(module, hw, None, timing_only=True)
            out.append((prog, prog.run({})[1]))

        dt, cpu = best_of(run_model, args.repeat)
        prog, records = out[-1]
        rep = build_report(records, hw)
        print(f"  LLaMA-7B-shaped {args.layers} layers prefill 512, timing-only: compile + simulate {seconds(dt, cpu)} "
              f"(nn build + O2 + lowering {t_lower:.1f} s, once), {len(records)} launches, "
              f"{prog.memo_hits} reused, {rep['tile_ops']:,} tile ops, {rep['total_cycles']:,.0f} cycles")
        summary.append((f"7B {args.layers} layers prefill 512 timing-only", f"{dt:.1f} s", "≤ 30 s"))

        # one layer alone: its 12 kernels (attention, norms, FFN) are all simulated, none is a
        # launch reused from an earlier layer as in the 32-layer figure
        one, _ = lowered(model_text(1, 512), hw)
        dt, cpu = best_of(lambda: run_model(one), args.repeat)
        prog, records = out[-1]
        rep = build_report(records, hw)
        print(f"  one 7B-shaped layer prefill 512, timing-only: {seconds(dt, cpu)}, {len(records)} launches, "
              f"{prog.memo_hits} reused, {rep['tile_ops']:,} tile ops -> {rep['tile_ops'] / dt:,.0f} tile-ops/s")
        summary.append(("tile-ops/s one 7B layer timing-only", f"{rep['tile_ops'] / dt:,.0f}", "-"))

        from ascendir.interpreter import simulate
        from ascendir.weights import WeightStore

        module, _ = lowered(fusion.layer_ir(512, 512), hw)
        rng = np.random.default_rng(0)
        weights = WeightStore()
        for op in module.walk():
            if op.name == "ascend.weight":
                sym = op.sym.root_reference.data
                shape = tuple(op.result.type.get_shape())
                if sym not in weights:
                    weights.add(sym, (rng.standard_normal(shape) * 0.02).astype(np.float16))
        x = rng.standard_normal((1, 512, fusion.H)).astype(np.float16)
        res: list = []
        dt, cpu = best_of(lambda: res.append(simulate(module, weights, {"arg0": x}, hw)), max(1, args.repeat - 1))
        r = res[-1].report
        print(f"  one 7B-shaped layer prefill 512 with numerics: {seconds(dt, cpu)}, {r['tile_ops']:,} tile ops "
              f"({r['tile_ops'] / dt:,.0f} tile-ops/s), {r['total_cycles']:,.0f} cycles")
        summary.append(("one 7B layer prefill 512 numerics", f"{dt:.1f} s", "≤ 30 s"))
    print("summary (issue #5 goals):")
    for what, got, goal in summary:
        print(f"  {what:<42} {got:>12}   goal {goal}")


if __name__ == "__main__":
    with results.recorded("interpreter_speed"):
        main()
