"""Every speed-up of interpreter/accel is switchable (`Accel`) and gives the results of the run
without it, bit for bit: each test runs a workload with a switch on and off, checks that the
mechanism did fire in the run with it (a spy on its hit path, or its own counter), and compares
the two runs with ==: every kernel's cycles, per-pipe busy cycles, bytes, flops and tile ops, the
total, the L2 hit and miss counters and, with numerics, every output tensor.

Why == holds: durations enter the timeline as multiples of the cycle quantum
(costmodel/quantum.py), so the timeline's sums are exact and their order does not matter; a
steady-state jump's m x period delta is then the plain run's sum of the m periods, and a stored
loop execution moved in time is the same sums shifted. Before the quantum, steady + loop_memo
agreed only to ~1e-17 relative (4096^3 timing-only: 1565469.0181817967 with them, ...7594 without).
The one report figure that differs by design is `extrapolated_iterations` (what the speed-ups
skipped), left out of the comparison.

Workloads: a 2048x2048x1024 matmul on 24 cores (per-core tile loops with a period > 1: remap; K
loops reused across tiles: loop memo; and across blocks: xblock), the 4096^3 timing-only matmul of
benchmarks/interpreter_speed.py, and the corpus models of tests/data (O2, 910B2), timing-only
(where the speed-ups run) and with numerics.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ascendir.api.moe_report import moe_section
from ascendir.driver import compile_model
from ascendir.hardware import load_target
from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.interpreter.accel import loop_memo, remap, xblock
from ascendir.interpreter.sim import kernel
from ascendir.interpreter.testing import add_ir, matmul_ir, parse
from test_interpreter_steady import _chained_adds

HW = load_target("ascend910b2")
ALL = Accel()
DATA = Path(__file__).parent / "data"
CORPUS = sorted(p.name for p in DATA.iterdir() if (p / "model.onnx").exists())

# the run without a switch: it off, and what needs it (Accel's doc: xblock needs loop_memo and
# remap; steady=False stops the loop driver that runs the other three)
WITHOUT = {
    "steady": replace(ALL, steady=False),
    "loop_memo": replace(ALL, loop_memo=False, xblock=False),
    "remap": replace(ALL, remap=False, xblock=False),
    "xblock": replace(ALL, xblock=False),
    "launch_memo": replace(ALL, launch_memo=False),
    "gc_pause": replace(ALL, gc_pause=False),
}

# corpus models on which each switch fires in a timing-only run (asserted, so a change that stops
# one from firing shows here); mobilenet_block_small gets none of them and is covered by the
# all-on / all-off comparison below
# (the MoE models' gathered-weight experts, what -O1 lowers, are the corpus' remap and xblock case;
# -O2 lowers them as grouped MatMuls, whose loops are data-dependent: none of the loop speed-ups)
GATHERED = "mixtral_moe_block_small@O1"
FIRES_ON = {
    # gpt2_small left these two when its fused kernels took NZ weights (no repeated loop body)
    "steady": [GATHERED, "mlp_small", "resnet_small"],
    "loop_memo": ["mlp_small", "resnet_small"],
    "remap": [GATHERED],
    "xblock": [GATHERED],
    "launch_memo": ["bert_small", "gpt2_small", "llama_small", "vit_small"],
    "gc_pause": ["llama_small"],
}


class Fired:
    """Counts the hit paths of every mechanism during one run (spies on the class methods whose
    true result is a reuse that happened; the steady jump and launch reuse count themselves)."""

    HOOKS = {"loop_memo": [(loop_memo.LoopMemo, "reuse"), (loop_memo.LoopMemo, "prefix")],
             "remap": [(remap.Remap, "tables")], "xblock": [(xblock.BlockMemo, "reuse")]}

    def __init__(self, monkeypatch):
        self.n: dict[str, int] = {}
        for switch, hooks in self.HOOKS.items():
            for cls, name in hooks:
                monkeypatch.setattr(cls, name, self._wrap(switch, getattr(cls, name)))
        self.n["gc_pause"] = 0
        run = kernel.KernelProgram.run

        def run_noting_gc(prog, *a, **k):  # a launch ran with the cyclic collector paused
            self.n["gc_pause"] += not gc.isenabled()
            return run(prog, *a, **k)

        monkeypatch.setattr(kernel.KernelProgram, "run", run_noting_gc)

    def _wrap(self, switch: str, orig):
        def wrapped(*a, **k):
            r = orig(*a, **k)
            if r:
                self.n[switch] = self.n.get(switch, 0) + 1
            return r

        return wrapped

    def run(self, module, accel: Accel, feeds: dict | None = None, routing: dict | None = None) -> tuple[dict, dict]:
        """(what the run gives: report, L2 counters, outputs; how often each mechanism fired).
        `routing`: a timing-only run's MoE routing (that of the numerics run's feeds)."""
        was = gc.isenabled()
        gc.enable()  # (gc_pause has something to pause)
        self.n = dict.fromkeys(self.n, 0)
        try:
            prog = compile_module(module, HW, None, timing_only=feeds is None, accel=accel, moe_routing=routing)
            outs, recs = prog.run(feeds or {})
        finally:
            if not was:
                gc.disable()
        rep = build_report(recs, HW)
        fired = dict(self.n, steady=sum(k["extrapolated_iterations"] for k in rep["kernels"]), launch_memo=prog.memo_hits)
        for k in rep["kernels"]:
            del k["extrapolated_iterations"]  # what was skipped: differs by design
        l2 = (prog.l2.hits, prog.l2.misses) if prog.l2 is not None else None
        return {"report": rep, "l2": l2, "outputs": outs if feeds is not None else None}, fired


def assert_identical(on: dict, off: dict, what: str) -> None:
    """The two runs' results are equal, bit for bit: cycles first (the clearest failure), then
    every kernel, then everything."""
    a, b = on["report"], off["report"]
    assert a["total_cycles"] == b["total_cycles"], what
    assert [k["cycles"] for k in a["kernels"]] == [k["cycles"] for k in b["kernels"]], what
    assert [k["pipe_busy"] for k in a["kernels"]] == [k["pipe_busy"] for k in b["kernels"]], what
    assert a == b, what  # every figure of the report (bytes, flops, tile ops, ceilings, ...)
    assert on["l2"] == off["l2"], what
    if on["outputs"] is not None:
        assert on["outputs"].keys() == off["outputs"].keys()
        for name, x in on["outputs"].items():
            np.testing.assert_array_equal(x, off["outputs"][name], err_msg=f"{what}: output {name}")


class _Corpus(dict):
    """NAME[@LEVEL] -> each corpus model lowered (O2, 910B2; NAME@O1 at O1), its inputs and its
    MoE routing on them (what a timing-only run is given, so it times what the numerics run
    does); lowered at its first use, since a whole-suite run samples the tests of some models."""

    def __missing__(self, key: str) -> tuple:
        name, _, level = key.partition("@")
        with np.load(DATA / name / "reference.npz") as ref:
            feeds = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        module, weights = compile_model(DATA / name / "model.onnx", "ascend910b2", opt_level=level or "O2")
        nn_module, nn_weights = compile_model(DATA / name / "model.onnx", emit="nn", opt_level="O0")
        got = moe_section(nn_module, nn_weights, feeds, "reference.npz", None)
        self[key] = out = (module, weights, feeds, got[1] if got is not None else None)
        return out


@pytest.fixture(scope="module")
def corpus() -> _Corpus:
    return _Corpus()


MATMULS = {
    # 24 cores over 16 tile columns: per-core tile loops with a period > 1 (remap), K loops reused
    # across tiles (loop memo) and blocks (xblock)
    "matmul 2048x2048x1024": lambda: matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24),
    # benchmarks/interpreter_speed.py's timing-only matmul (~8,200 iterations extrapolated)
    "matmul 4096^3": lambda: matmul_ir(4096, 4096, 4096, tm=128, tn=128, tk=128, block_dim=HW.num_aic, nbuf=2),
}


@pytest.fixture(scope="module")
def matmuls() -> dict:
    return {name: parse(make()) for name, make in MATMULS.items()}


@pytest.mark.parametrize("switch", sorted(WITHOUT))
@pytest.mark.parametrize("workload", sorted(MATMULS))
def test_switch_on_matmul_gives_identical_results(monkeypatch, matmuls, switch, workload):
    fired = Fired(monkeypatch)
    on, n_on = fired.run(matmuls[workload], ALL)
    off, n_off = fired.run(matmuls[workload], WITHOUT[switch])
    if switch != "launch_memo":  # one launch: nothing to reuse (tested on the corpus and below)
        assert n_on[switch] > 0, f"{switch} never fired on {workload}: the test would prove nothing"
    assert n_off[switch] == 0
    assert_identical(on, off, f"{workload}, {switch} on vs off")


@pytest.mark.parametrize("switch, model", [(s, m) for s in sorted(FIRES_ON) for m in FIRES_ON[s]])
def test_switch_on_corpus_model_gives_identical_results(monkeypatch, corpus, switch, model):
    fired = Fired(monkeypatch)
    module, _, _, routing = corpus[model]
    on, n_on = fired.run(module, ALL, routing=routing)
    off, n_off = fired.run(module, WITHOUT[switch], routing=routing)
    assert n_on[switch] > 0, f"{switch} never fired on {model}: the test would prove nothing"
    assert n_off[switch] == 0
    assert_identical(on, off, f"{model} timing-only, {switch} on vs off")


@pytest.mark.sampled
@pytest.mark.parametrize("model", CORPUS)
def test_every_speed_up_on_vs_none_on_corpus_model(monkeypatch, corpus, model):
    """All speed-ups against none, timing-only and with numerics (outputs compared too)."""
    fired = Fired(monkeypatch)
    module, weights, feeds, routing = corpus[model]
    on, _ = fired.run(module, ALL, routing=routing)
    off, n_off = fired.run(module, Accel.none(), routing=routing)
    assert not any(n_off.values())
    assert_identical(on, off, f"{model} timing-only, every speed-up vs none")
    num = {}
    for name, accel in (("on", ALL), ("off", Accel.none())):
        prog = compile_module(module, HW, weights, timing_only=False, accel=accel)
        with np.errstate(all="ignore"):  # (as simulate: padded tiles divide zeros by zeros)
            outs, recs = prog.run(feeds)
        rep = build_report(recs, HW)
        for k in rep["kernels"]:  # the split walks' timing is the twin's, which extrapolates (kernel.py `_split`)
            del k["extrapolated_iterations"]
        num[name] = {"report": rep, "l2": (prog.l2.hits, prog.l2.misses) if prog.l2 is not None else None, "outputs": outs}
    assert_identical(num["on"], num["off"], f"{model} numerics, every speed-up vs none")
    # timing-only and numerics runs time alike: the speed-ups of the first change nothing
    assert num["on"]["report"]["total_cycles"] == on["report"]["total_cycles"]


def test_every_speed_up_fires_on_the_4096_matmul(monkeypatch, matmuls):
    """The 4096^3 matmul exercises every loop speed-up at once (the comparison above is per
    switch): all on against none."""
    fired = Fired(monkeypatch)
    on, n_on = fired.run(matmuls["matmul 4096^3"], ALL)
    assert all(n_on[s] > 0 for s in ("steady", "loop_memo", "remap", "xblock", "gc_pause")), n_on
    off, _ = fired.run(matmuls["matmul 4096^3"], Accel.none())
    assert_identical(on, off, "matmul 4096^3, every speed-up vs none")


def test_launch_memo_switch_gives_identical_reports(monkeypatch):
    fired = Fired(monkeypatch)
    module = parse(_chained_adds(6, fresh=(2, 4)))
    on, n_on = fired.run(module, ALL)
    assert n_on["launch_memo"] >= 2
    off, n_off = fired.run(module, WITHOUT["launch_memo"])
    assert n_off["launch_memo"] == 0
    assert_identical(on, off, "chained adds, launch_memo on vs off")


def test_extrapolate_false_is_steady_off(matmuls):
    prog = compile_module(matmuls["matmul 2048x2048x1024"], HW, None, timing_only=True, extrapolate=False)
    assert prog.accel == replace(ALL, steady=False)


def test_numerics_identical_with_and_without_every_speed_up(monkeypatch):
    # numerics runs time on the timing-only twin with every speed-up (kernel.py `_split`), or in
    # one walk with none: same reports, same outputs
    fired = Fired(monkeypatch)
    module = parse(_chained_adds(3, fresh=(2,)))
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((4096, 256)).astype(np.float16) for k in ("x", "y", "w2")}
    on, _ = fired.run(module, ALL, feeds)
    off, _ = fired.run(module, Accel.none(), feeds)
    assert_identical(on, off, "chained adds with numerics, every speed-up vs none")


def test_none_runs_every_iteration(monkeypatch):
    fired = Fired(monkeypatch)
    _, n = fired.run(parse(add_ir(4096, 64, 8, block_dim=4)), Accel.none())
    assert not any(n.values()), n


def test_gc_restored_after_compile_and_run(matmuls):
    was = gc.isenabled()
    prog = compile_module(matmuls["matmul 2048x2048x1024"], HW, None, timing_only=True, accel=ALL)
    assert gc.isenabled() == was
    prog.run({})
    assert gc.isenabled() == was


@pytest.mark.sampled
def test_identical_layers_checked_and_recorded_once_with_numerics(monkeypatch):
    """32 chained decoder layers (benchmarks/fusion.py's 7B layer at small sizes, each with
    weights of its own) with numerics. A launch identical to an earlier one -- the same kernel
    body (kernel._body_key: ops, operands, result types, attributes, so the same tiling) and the
    same aliasing of its arguments (memo.pattern) -- reuses that launch's timing walk (the
    timing-only twin's launch memo, kernel.py `_split`: race verdict, L2 recording and timed
    passes) instead of running it again; every op's numerics still run (the data walk), since
    the weights differ. With launch_memo off the timing walk runs per launch: outputs and
    reports are equal."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fusion
    import interpreter_speed
    import numerics_speed

    from ascendir.interpreter.check import race

    for name, v in (("H", 64), ("HEADS", 2), ("D", 32), ("MLP", 128)):
        monkeypatch.setattr(fusion, name, v)
    layers, s = 32, 16
    module, _ = interpreter_speed.lowered(interpreter_speed.model_text(layers, s), HW)
    weights = numerics_speed.random_weights(module)
    x = np.random.default_rng(3).standard_normal((1, s, 64)).astype(np.float16)
    n = {"race": 0, "timing": 0}
    checker, blocks = race.RaceChecker.__init__, kernel.KernelProgram._blocks

    def checking(self, *a, **k):
        n["race"] += 1
        checker(self, *a, **k)

    def walking(self, *a, **k):  # a pass of the timing walk (recording or timed), not the data walk
        n["timing"] += self.m.timing_only
        return blocks(self, *a, **k)

    monkeypatch.setattr(race.RaceChecker, "__init__", checking)
    monkeypatch.setattr(kernel.KernelProgram, "_blocks", walking)
    runs, counts = {}, {}
    for name, accel in (("on", ALL), ("off", WITHOUT["launch_memo"])):
        n.update(race=0, timing=0)
        prog = compile_module(module, HW, weights, accel=accel)
        with np.errstate(all="ignore"):
            outs, recs = prog.run({"arg0": x})
        rep = build_report(recs, HW)
        runs[name] = {"report": rep, "l2": (prog.l2.hits, prog.l2.misses), "outputs": outs}
        counts[name] = dict(n, launches=len(recs))
    on, off = counts["on"], counts["off"]
    assert on["launches"] == off["launches"] >= 10 * layers
    assert off["race"] == off["launches"]  # without reuse: every launch checked
    assert 0 < on["race"] * layers <= 2 * off["race"], counts  # with it: about one layer's worth
    assert 0 < on["timing"] * layers <= 2 * off["timing"], counts
    assert_identical(runs["on"], runs["off"], "32 small layers with numerics, launch_memo on vs off")


def test_split_kernels_compile_their_twin_and_no_single_walk_body(monkeypatch):
    """Numerics: a kernel that splits (kernel.py `_split`) compiles its timing-only twin with it,
    from its own pre-walk facts (no second pre-walk: capacity, units, memo id), and no single-walk
    body (only a launch in a cluster would run one). Two kernels of one body (`@add`, `@add_b`,
    launched in turn) share their timing through the twins' launch memo; each record carries its
    own kernel's name, and outputs and reports equal the single walk's (Accel.none())."""
    text = _chained_adds(4)
    head, main = text.split("  func.func @main")
    kernel_text = head[head.index("  ascend.kernel @add("):]
    launches = iter(range(4))
    main = "\n".join(line.replace("@add(", "@add_b(") if "ascend.launch" in line and next(launches) % 2 else line
                     for line in main.split("\n"))
    module = parse(head + kernel_text.replace("@add(", "@add_b(") + "  func.func @main" + main)
    compiled, prewalks = [], []
    init, prewalk = kernel.KernelProgram.__init__, kernel.KernelProgram._prewalk

    def counting(self, m, op, **kw):
        compiled.append(m.timing_only)
        init(self, m, op, **kw)

    def counting_prewalk(self, m, op, tree):
        prewalks.append(m.timing_only)
        prewalk(self, m, op, tree)

    monkeypatch.setattr(kernel.KernelProgram, "__init__", counting)
    monkeypatch.setattr(kernel.KernelProgram, "_prewalk", counting_prewalk)
    rng = np.random.default_rng(4)
    feeds = {k: rng.standard_normal((4096, 256)).astype(np.float16) for k in ("x", "y")}
    prog = compile_module(module, HW, None)
    a, b = prog.kernels["add"], prog.kernels["add_b"]
    assert a.two_walks and b.two_walks and a.memo_text == b.memo_text
    assert compiled == [False, True, False, True] and prewalks == [False, False]  # each kernel, then its twin
    assert a.twin.body is not None and a.body is None and b.body is None
    runs = {}
    for name, p in (("on", prog), ("none", compile_module(module, HW, None, accel=Accel.none()))):
        outs, recs = p.run(feeds)
        assert [r.name for r in recs] == ["add", "add_b", "add", "add_b"]
        rep = build_report(recs, HW)
        for k in rep["kernels"]:
            del k["extrapolated_iterations"]  # what was skipped: differs by design
        runs[name] = {"report": rep, "l2": (p.l2.hits, p.l2.misses), "outputs": outs}
    assert prog.memo_hits == 2  # launch 2 (@add) reuses launch 1's (@add_b) timing, launch 3 launch 2's
    assert_identical(runs["on"], runs["none"], "@add and @add_b with numerics, split vs one walk")
