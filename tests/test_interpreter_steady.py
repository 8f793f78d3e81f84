"""Steady-state extrapolation of uniform loops (interpreter/accel/steady.py): timing-only results with
extrapolation match a full simulation (every iteration run) within 1 % in cycles, exactly in
bytes, flops, tile ops and L2 hits, on double-buffered and single-buffered matmuls (odd sizes,
partial tiles, per-core tile loops that extrapolate around their K loops with a period > 1 and
reuse whole K-loop executions across tiles and blocks), streaming vector kernels (with a partial
last tile), a lowered mixed (AIC + AIV) kernel, a flash-attention kernel and SwiGLU FFNs (prefill
projections, fused decode kernel)."""

from __future__ import annotations

import pytest

from ascendir.session import make_context
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import add_ir, matmul_ir, parse
from ascendir.transforms.nn.fuse_matmul_epilogue import FuseMatmulEpilogue
from lowering_harness import lower_text, printed
from lowering_harness import parse as parse_nn

HW = load_target("ascend910b2")


def _mixed_kernel(k: int = 4096):
    m, n = 256, 512
    a, b, o = f"tensor<{m}x{k}xf16>", f"tensor<{k}x{n}xf16>", f"tensor<{m}x{n}xf16>"
    text = f"""
func.func @main(%a: {a} {{onnx.name = "a"}}, %b: {b} {{onnx.name = "b"}}) -> ({o} {{onnx.name = "y"}}) {{
  %m = nn.matmul %a, %b : ({a}, {b}) -> {o}
  %z = nn.silu %m : ({o}) -> {o}
  func.return %z : {o}
}}"""
    module = parse_nn(text)
    FuseMatmulEpilogue().apply(make_context(), module)
    lowered = lower_text(printed(module))
    assert any(op.name == "ascend.kernel" and op.core_type.data == "mix" for op in lowered.ops)
    return lowered


def _flash_attention(sq: int = 2048, skv: int = 2048, causal: bool = False):
    from test_flash_attention import attention_ir, compile_attention

    return compile_attention(attention_ir(1, 1, 1, sq, skv, 128, 128, causal, dt="f16"), "ascend910b2")


def _swiglu_ffn(tokens: int, hidden: int, inter: int):
    from test_ffn_template import gated_ir
    from xdsl.parser import Parser

    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.weights import WeightStore

    module = Parser(make_context(), gated_ir(tokens, hidden, inter, "f16")).parse_module()
    run_passes(module, parse_pipeline("fuse-ffn"))
    lower(module, WeightStore(), "ascend910b2")
    return module


def _extra_work_in_last_iteration():
    # the last iteration runs one more vector op (a condition on the iv, a checked value): the jump
    # may skip it only as what it is, so tile ops and cycles must still match the full run
    ub = "memref<64x256xf16, #ascend<space ub>>"
    return parse(f"""builtin.module {{
  ascend.kernel @k() attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {ub}
    %b = ascend.alloc : {ub}
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c63 = arith.constant 63 : index
    %c64 = arith.constant 64 : index
    scf.for %i = %c0 to %c64 step %c1 {{
      ascend.vadd %a, %a, %b : {ub}, {ub}, {ub}
      %last = arith.cmpi eq, %i, %c63 : index
      scf.if %last {{
        ascend.vexp %b, %b : {ub}, {ub}
      }}
    }}
    ascend.return
  }}
  func.func @main() {{
    ascend.launch @k() : 
    func.return
  }}
}}""")


CASES = {
    "matmul_double_buffered": lambda: parse(matmul_ir(512, 4096, 4096, tm=128, tn=256, tk=64, l1_k=256, block_dim=24)),
    "matmul_single_buffered_long_k": lambda: parse(matmul_ir(256, 256, 8192, tm=128, tn=128, tk=128, block_dim=4, nbuf=1)),
    "matmul_partial_tiles": lambda: parse(matmul_ir(300, 260, 5000, tm=128, tn=128, tk=128, block_dim=6)),
    "add_streaming": lambda: parse(add_ir(65536, 256, 16, block_dim=8)),
    "add_partial_last_tile": lambda: parse(add_ir(65530, 256, 16, block_dim=8, nbuf=1)),
    "mixed_matmul_silu": _mixed_kernel,
    # K = 4000: the last L1 K step is partial; its size (min(step, K - k)) is computed in the
    # ping-pong scf.if and used only as a size and an inner loop bound: it must be checked
    "mixed_matmul_partial_k": lambda: _mixed_kernel(4000),
    # 256 tiles over 24 cores: the tile loop's addresses repeat their step every 2 iterations
    "matmul_nested_tile_loop": lambda: parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24)),
    "matmul_odd_nested": lambda: parse(matmul_ir(1000, 1500, 700, tm=64, tn=64, tk=64, block_dim=20)),
    # 256-key blocks: at 2048 queries the tile search splits the KV loop too short for a steady state
    "flash_attention": lambda: _flash_attention(3072, 4096),
    # the pipelined KV loop (S(j+2) preload, 2-slot ring offsets computed inside scf.if)
    "flash_attention_long_kv": lambda: _flash_attention(3072, 8192),
    "flash_attention_causal": lambda: _flash_attention(4096, 4096, causal=True),
    "swiglu_ffn_prefill": lambda: _swiglu_ffn(512, 1024, 2816),
    "swiglu_ffn_fused_decode": lambda: _swiglu_ffn(1, 2048, 5632),  # ffn_fused + ffn_reduce kernels
    "extra_work_in_last_iteration": _extra_work_in_last_iteration,
}


# Kernels whose loops `uniform_loop` rejects today, with the reason; the comparison still runs (and
# must agree exactly), and the entry must go once extrapolation engages.
NOT_EXTRAPOLATED: dict[str, str] = {}


@pytest.mark.sampled
@pytest.mark.parametrize("case", list(CASES))
def test_extrapolation_matches_full_simulation(case):
    module = CASES[case]()
    full = simulate(module, None, {}, HW, timing_only=True, extrapolate=False).report
    fast = simulate(module, None, {}, HW, timing_only=True).report
    skipped = sum(k["extrapolated_iterations"] for k in fast["kernels"])
    if case in NOT_EXTRAPOLATED:
        assert skipped == 0, f"{case} extrapolates now: drop it from NOT_EXTRAPOLATED"
    else:
        assert skipped > 0, "extrapolation never engaged: the comparison would be vacuous"
    assert all(k["extrapolated_iterations"] == 0 for k in full["kernels"])
    assert fast["total_cycles"] == full["total_cycles"]
    for kf, kx in zip(full["kernels"], fast["kernels"]):
        assert kx["cycles"] == kf["cycles"], kf["name"]
    assert fast["tile_ops"] == full["tile_ops"]
    assert fast["flops"] == full["flops"]
    for level, b in full["bytes"].items():
        assert fast["bytes"].get(level, 0.0) == b, level
    for p, b in full["pipe_busy"].items():
        assert fast["pipe_busy"][p] == b, p
    assert fast.get("l2_hit_rate") == full.get("l2_hit_rate")


def test_trace_keeps_extrapolation_and_shows_it():
    """A traced run extrapolates as an untraced one (same cycles, same iterations skipped); the
    skipped iterations are one "extrapolated" slice per pipe, and the bytes of all slices add up
    to the report's (report/trace.py, accel/loop_driver.py `_extrapolated`)."""
    plain = simulate(CASES["add_streaming"](), None, {}, HW, timing_only=True)
    res = simulate(CASES["add_streaming"](), None, {}, HW, timing_only=True, trace=True)
    assert res.report["total_cycles"] == plain.report["total_cycles"]
    skipped = [k["extrapolated_iterations"] for k in res.report["kernels"]]
    assert skipped == [k["extrapolated_iterations"] for k in plain.report["kernels"]] and all(skipped)
    spans = [e for e in res.trace_events if e["ph"] == "X" and e["pid"] > 0]
    extrapolated = [e for e in spans if e.get("cat") == "extrapolated"]
    assert {e["name"] for e in extrapolated} >= {f"{op} ×{skipped[0] // 8} iterations" for op in ("GM->UB", "vadd", "UB->GM")}
    for level, total in res.report["bytes"].items():
        assert sum(e["args"].get(level, 0.0) for e in spans) == pytest.approx(total, rel=1e-12)


def test_numerics_mode_extrapolates_timing_only():
    """A numerics run times on the kernel's timing-only twin (kernel.py `_split`), which
    extrapolates like a timing-only run, and computes every element in the data walk, which
    skips nothing (every row of the output, distinct inputs per row)."""
    import numpy as np

    module = parse(add_ir(4096, 64, 8, block_dim=4))
    x = (np.arange(4096 * 64) % 2048).reshape(4096, 64).astype(np.float16)  # (exact in fp16)
    y = np.ones((4096, 64), np.float16)
    res = simulate(module, None, {"x": x, "y": y}, HW)
    timing = simulate(module, None, {}, HW, timing_only=True)
    assert res.report["total_cycles"] == timing.report["total_cycles"]
    skipped = [k["extrapolated_iterations"] for k in res.report["kernels"]]
    assert skipped == [k["extrapolated_iterations"] for k in timing.report["kernels"]] and sum(skipped) > 0
    np.testing.assert_array_equal(res.outputs["z"], x + y)


def _chained_adds(n: int, fresh: tuple[int, ...] = ()) -> str:
    """n launches of the same streaming add kernel, each reading the previous result (the first
    launch's output is read back from L2 by the second: memo checks must see it); launch i in
    `fresh` reads the input %wi instead (never read before: its reads miss)."""
    text = add_ir(4096, 256, 16, block_dim=8)
    t = "memref<4096x256xf16, #ascend<space gm>>"
    head, main = text.split("  func.func @main")
    body = [f"    %z0 = ascend.alloc : {t}", f"    ascend.launch @add(%x, %y, %z0) : {t}, {t}, {t}"]
    for i in range(1, n):
        a = f"%w{i}" if i in fresh else f"%z{i - 1}"
        body += [f"    %z{i} = ascend.alloc : {t}", f"    ascend.launch @add({a}, %y, %z{i}) : {t}, {t}, {t}"]
    args = ", ".join(f'%{a}: {t} {{onnx.name = "{a}"}}' for a in ["x", "y", *(f"w{i}" for i in fresh)])
    return (head + f'  func.func @main({args}) -> ({t} {{onnx.name = "z"}}) {{\n'
            + "\n".join(body) + f"\n    func.return %z{n - 1} : {t}\n  }}\n}}\n")


def _memo_vs_plain(text_or_module) -> tuple[tuple, tuple]:
    """(report, memo hits, L2 hits, L2 misses) without and with launch reuse."""
    from ascendir.interpreter import compile_module
    from ascendir.interpreter.report.report import build_report

    module = parse(text_or_module) if isinstance(text_or_module, str) else text_or_module
    out = []
    for memo in (False, True):
        prog = compile_module(module, HW, None, timing_only=True)
        if not memo:
            prog.memo = None
        _, recs = prog.run({})
        out.append((build_report(recs, HW), prog.memo_hits, prog.l2.hits, prog.l2.misses))
    return out[0], out[1]


def test_memo_ids_equal_exactly_for_equal_bodies():
    """Launch reuse is keyed by a kernel body id (kernel._memo_id): kernels whose bodies are equal
    up to their names share it, kernels with the same ops but another value or attribute do not
    (their op names agree, so the full body keys decide), other kernels get their own."""
    from ascendir.interpreter import compile_module

    text = add_ir(4096, 256, 16, block_dim=8)
    head, main = text.split("  func.func @main")
    kernel = head.split("\n", 1)[1]  # after "builtin.module {"
    same = kernel.replace("@add(", "@add_same(")
    other_const = kernel.replace("@add(", "@add_c(").replace("%cTR = arith.constant 16", "%cTR = arith.constant 32")
    other_attr = kernel.replace("@add(", "@add_a(").replace("block_dim = 8 :", "block_dim = 4 :")
    fewer = add_ir(4096, 256, 16, block_dim=8, nbuf=1).split("  func.func @main")[0].split("\n", 1)[1].replace("@add(", "@add_1(")
    module = parse("builtin.module {\n" + other_const + kernel + other_attr + same + fewer + "  func.func @main" + main)
    ids = {k: p.memo_text for k, p in compile_module(module, HW, None, timing_only=True).kernels.items()}
    assert ids["add"] == ids["add_same"]
    assert len({ids["add"], ids["add_c"], ids["add_a"], ids["add_1"]}) == 4


def test_identical_launches_reused_exactly():
    (plain, h0, hits0, miss0), (memo, h1, hits1, miss1) = _memo_vs_plain(_chained_adds(4))
    assert h0 == 0 and h1 >= 2  # launches 2.. have the same aliasing pattern and L2 outcomes
    assert memo == plain  # exact: every cycle, byte and L2 count
    assert (hits1, miss1) == (hits0, miss0)


def test_launch_variants_and_kept_miss_designation_exact():
    # launches 2 and 4 read fresh inputs: their L2 checks differ from launch 1's, so launch 2 runs
    # (with the kept miss designation, no recording pass); launches 3 and 5 read the previous
    # output like launch 1 did and match that older stored variant, launch 4 matches launch 2's
    (plain, _, hits0, miss0), (memo, h1, hits1, miss1) = _memo_vs_plain(_chained_adds(6, fresh=(2, 4)))
    assert h1 == 3
    assert memo == plain
    assert (hits1, miss1) == (hits0, miss0)


def test_numerics_launches_share_timing_exactly():
    # a numerics run times its launches on the timing-only twins (kernel.py `_split`), whose
    # launch memo reuses identical launches as a timing-only run does; the numerics run's own
    # memo keeps only race verdicts (no stored launch): with the memo off, the same results
    from dataclasses import replace

    import numpy as np

    from ascendir.interpreter import Accel, compile_module
    from ascendir.interpreter.report.report import build_report

    module = parse(_chained_adds(4, fresh=(2,)))
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((4096, 256)).astype(np.float16) for k in ("x", "y", "w2")}
    got = []
    for memo in (False, True):
        prog = compile_module(module, HW, None, accel=replace(Accel(), launch_memo=memo))
        outs, recs = prog.run(feeds)
        got.append((build_report(recs, HW), outs["z"], prog.l2.hits, prog.l2.misses))
        if memo:
            assert prog.memo_hits >= 1 and all(v.race_free and not v.variants for v in prog.memo.values())
        else:
            assert prog.memo_hits == 0
    (plain, z0, *l2_0), (shared, z1, *l2_1) = got
    assert shared == plain and l2_1 == l2_0
    np.testing.assert_array_equal(z1, z0)
    np.testing.assert_array_equal(z0, feeds["w2"] + feeds["y"] + feeds["y"])  # launches 2, 3 (f16 adds)


def full_and_fast(module) -> list[tuple[dict, int, int]]:
    """(report, L2 hits, L2 misses) of a full simulation, then of an extrapolated one."""
    from ascendir.interpreter import compile_module
    from ascendir.interpreter.report.report import build_report

    got = []
    for ex in (False, True):
        prog = compile_module(module, HW, None, timing_only=True, extrapolate=ex)
        _, recs = prog.run({})
        got.append((build_report(recs, HW), prog.l2.hits, prog.l2.misses))
    return got


def test_nested_extrapolation_keeps_l2_counters_exact():
    # the benchmark's shape scaled down: every core's tile loop extrapolates (period 2: 24 cores
    # over 16 tile columns), K loops are reused across tiles and blocks, and the skipped reads
    # are replayed into the L2 as arrays; hits and misses must be those of the full simulation
    (full, h0, m0), (fast, h1, m1) = full_and_fast(parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24)))
    assert (h1, m1) == (h0, m0) and m0 > 0 and h0 > m0
    assert sum(k["extrapolated_iterations"] for k in fast["kernels"]) > 0
    assert fast["total_cycles"] == full["total_cycles"]


def test_block_level_loop_skips_its_memo(monkeypatch):
    # a matmul's tile loop (`scf.for %t = %bid ...`, nested in no loop) runs once per block and its
    # key holds the block index: loop_memo.never_again marks it, and in the timed pass it never builds
    # a key nor stores (the K loop inside still does; in the recording pass its xblock.BlockMemo
    # needs the key); the result is the same as with the memo in use
    from ascendir.interpreter import compile_module
    from ascendir.interpreter.report.report import build_report
    from ascendir.interpreter.accel.loop_memo import LoopMemo

    module = parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24))
    entered = []
    enter = LoopMemo.enter
    monkeypatch.setattr(LoopMemo, "enter", lambda self, F, R: entered.append((self, F.l2_pass.recording)) or enter(self, F, R))
    got = []
    for force in (False, True):
        prog = compile_module(module, HW, None, timing_only=True)
        memos = [m for m in prog.kernels["matmul"].frame.memos if type(m) is LoopMemo]
        tile = [m for m in memos if m.once]
        assert len(tile) == 1 and len(memos) > 1  # the tile loop; the K loop (and its inner loops) not
        tile = tile[0]
        if force:
            tile.once = False
        entered.clear()
        _, recs = prog.run({})
        got.append(build_report(recs, HW))
        assert any(m is not tile for m, rec in entered if not rec)
        assert any(m is tile for m, rec in entered if not rec) == force
    assert got[0] == got[1]


def _rewrites(n: int) -> str:
    """n launches of the streaming add kernel on fresh inputs (every read misses alike), all
    writing the same output: launch 1's writes go to HBM, later ones rewrite tiles still dirty in
    L2 (l2.py), so their write outcomes, not their reads, tell the launches apart."""
    text = add_ir(4096, 256, 16, block_dim=8)
    t = "memref<4096x256xf16, #ascend<space gm>>"
    head, main = text.split("  func.func @main")
    ins = [f"{p}{i}" for i in range(n) for p in ("a", "b")]
    body = [f"    %z = ascend.alloc : {t}"]
    body += [f"    ascend.launch @add(%a{i}, %b{i}, %z) : {t}, {t}, {t}" for i in range(n)]
    args = ", ".join(f'%{a}: {t} {{onnx.name = "{a}"}}' for a in ins)
    return (head + f'  func.func @main({args}) -> ({t} {{onnx.name = "z"}}) {{\n'
            + "\n".join(body) + f"\n    func.return %z : {t}\n  }}\n}}\n")


def test_launch_reuse_checks_write_outcomes():
    (plain, _, hits0, miss0), (memo, h1, hits1, miss1) = _memo_vs_plain(_rewrites(3))
    k = plain["kernels"]
    assert k[1]["cycles"] < k[0]["cycles"]  # the rewrite is absorbed by L2
    assert h1 == 1  # launch 3 matches launch 2, not launch 1
    assert memo == plain
    assert (hits1, miss1) == (hits0, miss0)


@pytest.mark.sampled
def test_launch_reuse_exact_on_7b_shaped_layers():
    # two 7B-shaped decoder layers (256 tokens) launch the same kernels at different chip times;
    # the L2 recording pass runs from time 0 so both get one miss designation (absolute times
    # rounded near-ties differently: layer 2's norm_matmul disagreed with a plain run by 0.4 %)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from interpreter_speed import lowered, model_text

    module, _ = lowered(model_text(2, 256), HW)
    (plain, _, *l2_plain), (memo, hits, *l2_memo) = _memo_vs_plain(module)
    assert hits >= len(plain["kernels"]) // 2  # every launch of layer 2 at least
    assert memo == plain and l2_memo == l2_plain


@pytest.mark.sampled
def test_extrapolation_matches_full_simulation_on_a_7b_shaped_layer():
    # the lowered templates at 7B shapes (K = 4096 in L1 steps of 320: a partial last step whose
    # size is computed in a ping-pong branch) run through every mechanism of steady.py at once
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from interpreter_speed import lowered, model_text

    module, _ = lowered(model_text(1, 512), HW)
    full = simulate(module, None, {}, HW, timing_only=True, extrapolate=False).report
    fast = simulate(module, None, {}, HW, timing_only=True).report
    assert sum(k["extrapolated_iterations"] for k in fast["kernels"]) > 0
    assert fast["tile_ops"] == full["tile_ops"]
    for kf, kx in zip(full["kernels"], fast["kernels"]):
        assert kx["tile_ops"] == kf["tile_ops"], kf["name"]
        assert kx["cycles"] == kf["cycles"], kf["name"]
    assert fast["total_cycles"] == full["total_cycles"]


def test_launch_memo_shared_by_runs_of_other_modules_exactly():
    """A LaunchMemo given to several compiled modules (generate's decode steps) serves a launch
    of one with a launch stored by another: the second module's first launch (in a memo of its
    own always simulated) is reused, and its report equals a run without any reuse; a memo
    bound to one target refuses another."""
    import pytest

    from ascendir.hardware import load_target
    from ascendir.interpreter import LaunchMemo, compile_module
    from ascendir.interpreter.report.report import build_report

    first, second = parse(_chained_adds(3)), parse(_chained_adds(4, fresh=(2,)))
    shared = LaunchMemo()
    compile_module(first, HW, None, timing_only=True, launch_memo=shared).run({})
    prog = compile_module(second, HW, None, timing_only=True, launch_memo=shared)
    hits = []
    run = prog.kernels["add"].run

    def noting(*a, **k):
        h = prog.memo_hits
        r = run(*a, **k)
        hits.append(prog.memo_hits > h)
        return r

    prog.kernels["add"].run = noting
    _, recs = prog.run({})
    assert hits[0] and sum(hits) >= 3, hits
    plain = compile_module(second, HW, None, timing_only=True)
    plain.memo = None
    _, recs0 = plain.run({})
    assert build_report(recs, HW) == build_report(recs0, HW)
    assert (prog.l2.hits, prog.l2.misses) == (plain.l2.hits, plain.l2.misses)
    with pytest.raises(ValueError, match="one target"):
        compile_module(first, load_target("ascend910a"), None, timing_only=True, launch_memo=shared)
