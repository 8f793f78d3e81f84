"""The L2 prefetch of the weights on the AIVs: the matmul template's (tiling field prefetch = 1,
templates/matmul.py `_Prefetch`): same numbers as without it, a mix kernel whose AIC reads B
from L2, chosen by the cost model where the AICs stream weights from HBM (decode GEMVs,
prefill projections) and not where they are L2-fed anyway (square GEMMs); ffn_up's on its idle
second AIV (templates/ffn_up.py `prefetches`)."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.dialects import ascend
from ascendir.dialects.ascend import FLAG_UNITS_ATTR
from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.conversion.nn_to_ascend.tiling import Problem, Tiling, candidates, check_fits, estimate, parse_tiling, ranked, search
from lowering_harness import lower_text, rand, run_both
from test_choose_tiling import with_tiling
from test_lowering_matmul import epilogue_text, fuse, kernels, matmul_text
from test_matmul_nz_weight import weight_text

PLAIN = "m=16,n=128,k=64,l1_depth=4"


@pytest.mark.parametrize("m,k,n,extra", [(1, 1024, 768, ""), (40, 700, 333, ",split_k=2"), (48, 512, 512, ",swizzle=2")])
def test_prefetch_computes_the_same_numbers_and_reads_b_from_l2(m, k, n, extra):
    """Numerics (race-checked) identical to the plain kernel of the same tiling, both close to
    the nn reference; the prefetching kernel is a mix kernel and more of its reads hit L2 (on
    these small shapes it need not be faster: the cost model decides where it pays)."""
    inputs = {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16)}
    text = matmul_text((m, k), (k, n), (m, n), "f16")
    runs = {}
    for pf in (0, 1):
        ref, out, lowered = run_both(with_tiling(text, PLAIN + extra + f",prefetch={pf}"), inputs)
        np.testing.assert_allclose(out["y"].astype(np.float64), ref["y"].astype(np.float64), rtol=2e-2, atol=2e-2)
        cores = [kern.core_type.data for kern in kernels(lowered) if kern.sym_name.data.startswith("matmul_")
                 and not kern.sym_name.data.startswith("matmul_split_k")]
        assert cores == [ascend.CoreType.MIX if pf else ascend.CoreType.AIC]
        rep = simulate(lowered, None, {}, load_target("ascend910b2"), timing_only=True).report
        runs[pf] = out["y"], rep
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[1][1]["l2_hit_rate"] > runs[0][1]["l2_hit_rate"]


@pytest.mark.parametrize("act", [None, "silu"])
def test_prefetch_beside_an_aiv_epilogue_computes_the_same_numbers(act):
    """A residual (and SiLU) epilogue runs on AIV 0: AIV 1 alone prefetches every B chunk; the
    numbers (race-checked) are those of the kernel without prefetch, both close to the nn
    reference, and more of its reads hit L2."""
    text = fuse(epilogue_text(40, 700, 333, act, bias=True, dt="f16", residual=True))
    inputs = {"a": rand((40, 700), np.float16), "b": rand((700, 333), np.float16), "c": rand((333,), np.float16),
              "r": rand((40, 333), np.float16)}
    runs = {}
    for pf in (0, 1):
        ref, out, lowered = run_both(with_tiling(text, PLAIN + f",prefetch={pf}"), inputs)
        np.testing.assert_allclose(out["y"].astype(np.float64), ref["y"].astype(np.float64), rtol=2e-2, atol=2e-2)
        (kern,) = kernels(lowered)
        units = {op.attributes[FLAG_UNITS_ATTR] for op in kern.walk() if FLAG_UNITS_ATTR in op.attributes}
        assert kern.core_type.data == ascend.CoreType.MIX
        assert any("aiv1" in str(u) for u in units) == bool(pf) and not any("aiv->aic" in str(u).replace(" ", "") for u in units)
        runs[pf] = out["y"], simulate(lowered, None, {}, load_target("ascend910b2"), timing_only=True).report
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[1][1]["l2_hit_rate"] > runs[0][1]["l2_hit_rate"]


@pytest.mark.parametrize("text,spec", [
    (matmul_text((1, 1024), (1024, 768), (1, 768), "f16"), PLAIN + ",prefetch=1"),  # both AIVs, one parity each
    (matmul_text((40, 700), (700, 333), (40, 333), "f16"), PLAIN + ",split_k=2,prefetch=1"),
    (fuse(epilogue_text(40, 700, 333, "silu", bias=True, dt="f16", residual=True)), PLAIN + ",prefetch=1"),  # AIV 1 alone
    (matmul_text((200, 200), (200, 256), (200, 256), "f16"), "m=32,n=32,k=32,l1_depth=2,prefetch=1"),  # the A warm-up
    (matmul_text((512, 1024), (1024, 1024), (512, 1024), "f16"), "m=128,n=128,k=64,l1_depth=2,tail_split=3,prefetch=1"),
])
def test_prefetching_kernel_holds_no_pipe(text, spec, monkeypatch):
    """Each AIV's fill of a B chunk is emitted inside the AIC's walk, just before the AIC's
    wait for it (`_Prefetch.fill`): no cross-core wait comes before its set in program order, so
    neither walk holds a pipe (interpreter/timing/holds.py), in whatever form the kernel takes
    (two prefetching AIVs, split K, AIV 1 alone beside an AIV epilogue, the A warm-up, tail
    ranges). Emitted as each AIV's own walk after the AIC's part, every one of them held."""
    from ascendir.interpreter.timing import holds

    held = []
    block = holds.Holds.block

    def counted(self, *args):
        held.append(self.kernel)
        return block(self, *args)

    monkeypatch.setattr(holds.Holds, "block", counted)
    lowered = lower_text(with_tiling(text, spec))
    assert ascend.CoreType.MIX in [kern.core_type.data for kern in kernels(lowered)]
    simulate(lowered, None, {}, load_target("ascend910b2"), timing_only=True)
    assert held == []


@pytest.mark.sampled
def test_weight_gemm_prefetch_extrapolates_its_steady_state():
    """LLaMA-7B's down projection (M, N, K = 512, 4096, 11008, the tiling the search picks: B
    prefetched): without held pipes the timing walk extrapolates the steady state of its loops
    (it walked every iteration while the AIVs' walk came after the AIC's)."""
    hw = load_target("ascend910b2")
    best = search(Problem(1, 512, 4096, 11008, "f16", 2, b_nz=True), hw).best
    assert best.prefetch == 1
    rep = simulate(lower_text(with_tiling(weight_text(512, 11008, 4096), best.text())), None, {}, hw, timing_only=True).report
    (mm,) = [k for k in rep["kernels"] if k["name"].startswith("matmul") and "reduce" not in k["name"]]  # (+ a tail_split's reduction)
    assert mm["core_type"] == "mix" and mm["extrapolated_iterations"] > 0


def test_prefetch_field_is_checked():
    assert parse_tiling("m=16,prefetch=1") == {"m": 16, "prefetch": 1}
    with pytest.raises(AscendirError, match="prefetch=2 must be 0 or 1"):
        parse_tiling("prefetch=2")
    p = Problem(1, 16, 512, 512, "f16", 2)
    check_fits(p, Tiling(16, 128, 64, 4, prefetch=1), load_target("ascend910b2"))
    with pytest.raises(AscendirError, match="cannot prefetch B"):  # no AIVs beside the cube
        check_fits(p, Tiling(16, 128, 64, 4, prefetch=1), load_target("ascend910a"))
    with pytest.raises(AscendirError, match="cannot prefetch B"):  # ffn_up has its own prefetch
        check_fits(Problem(1, 16, 512, 512, "f16", 2, ffn_up=2), Tiling(16, 128, 64, 4, prefetch=1), load_target("ascend910b2"))
    # beside an AIV epilogue the second AIV prefetches alone: its scratch shares no UB with the epilogue's tiles
    check_fits(Problem(1, 16, 512, 512, "f16", 2, act="vsilu", residual=True, epilogue=True), Tiling(16, 128, 64, 4, prefetch=1),
               load_target("ascend910b2"))
    # a tiling without the field prints as before
    assert Tiling(16, 128, 64, 4).text() == "m=16,n=128,k=64,l1_depth=4,split_k=1,swizzle=1"
    assert "prefetch" not in str(Tiling(16, 128, 64, 4).to_attr())


def test_cost_model_prefetches_weight_streaming_and_tracks_simulation():
    """A decode GEMV (weights from HBM at the AIC's 32 B/cycle path) is prefetched and its
    estimate is within 10 % of the simulation."""
    hw = load_target("ascend910b2")
    p = Problem(1, 1, 4096, 4096, "f16", 2)
    res = search(p, hw)
    assert res.best.prefetch == 1
    assert res.estimate.cycles < 0.8 * estimate(p, Tiling(**{**res.best.__dict__, "prefetch": 0}), hw).cycles
    text = with_tiling(matmul_text((1, 4096), (4096, 4096), (1, 4096), "f16"), res.best.text())
    cycles = simulate(lower_text(text), None, {}, hw, timing_only=True).report["total_cycles"]
    assert abs(cycles / res.estimate.cycles - 1) < 0.10


@pytest.mark.sampled
def test_square_weight_gemm_prefetches_b_on_wide_tiles_and_runs_faster():
    """A square GEMM of a constant weight also reads every B panel from HBM once, at the AIC's
    32 B/cycle path: the search prefetches it (no margin for weights), on a tile whose B part is
    the larger (n >= m: the AIC still streams A and pays its first-read misses), and the
    simulated kernel is faster than the same tiling without prefetch; a runtime B keeps the
    margin (its best tiling without a tail split is the plain kernel; the tail split, offered on
    prefetching tilings, can carry one past it); no candidate of a problem with M >= N prefetches
    a tile with m > n."""
    hw = load_target("ascend910b2")
    p = Problem(1, 4096, 4096, 4096, "f16", 2, b_nz=True)
    best = search(p, hw).best
    assert best.prefetch == 1 and best.n >= best.m
    rt = Problem(1, 4096, 4096, 4096, "f16", 2)
    assert min((t for t in candidates(rt, hw, (1,)) if not t.tail_split), key=lambda t: ranked(rt, estimate(rt, t, hw), t)).prefetch == 0
    plain = Tiling(**{**best.__dict__, "prefetch": 0, "tail_split": 0})  # (tail splits ride on the prefetch)
    text = weight_text(4096, 4096, 4096)
    cyc = [simulate(lower_text(with_tiling(text, t.text())), None, {}, hw, timing_only=True).report["total_cycles"] for t in (best, plain)]
    # 910B2: 772,903 (tail_split 2) vs 798,003 cycles (l1_depth 4); 774,805 vs 794,733 at
    # l1_depth 5 before the search offered tail splits, 776,422 vs 802,543 while the L2's tied
    # misses went round-robin over the launch in the log's order (interpreter/timing/l2.py
    # L2Pass.settle, now per group of tied readers: other cores pay the plain kernel's misses)
    assert cyc[0] < 0.98 * cyc[1]
    assert not any(t.prefetch and t.m > t.n for t in candidates(p, hw, (1,)))
    assert any(t.prefetch and t.m > t.n for t in candidates(Problem(1, 512, 11008, 4096, "f16", 2), hw, (1,)))


def test_ffn_up_prefetches_on_its_idle_aiv_with_the_same_numbers(monkeypatch):
    """ffn_up (two-kernel FFN) with more than one row of tiles and a long K loop: AIV 1 prefetches the gate / up
    weights; outputs (race-checked) identical to the kernel without it, more L2 hits."""
    from ascendir.conversion.nn_to_ascend.templates import ffn_up
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.weights import WeightStore
    from lowering_harness import parse

    h, i, s = 2048, 256, 160
    x, g = f"tensor<1x{s}x{h}xf16>", f"tensor<1x{s}x{i}xf16>"
    text = f"""
func.func @main(%x: {x} {{onnx.name = "x"}}) -> ({x} {{onnx.name = "y"}}) {{
  %wg = nn.weight @wg : tensor<{h}x{i}xf16>
  %wu = nn.weight @wu : tensor<{h}x{i}xf16>
  %wd = nn.weight @wd : tensor<{i}x{h}xf16>
  %gt = nn.matmul %x, %wg : ({x}, tensor<{h}x{i}xf16>) -> {g}
  %a = nn.silu %gt : ({g}) -> {g}
  %u = nn.matmul %x, %wu : ({x}, tensor<{h}x{i}xf16>) -> {g}
  %m = nn.mul %a, %u : ({g}, {g}) -> {g}
  %y = nn.matmul %m, %wd : ({g}, tensor<{i}x{h}xf16>) -> {x}
  func.return %y : {x}
}}"""
    store = WeightStore()
    for name, shp in (("wg", (h, i)), ("wu", (h, i)), ("wd", (i, h))):
        store.add(name, (rand(shp) / np.sqrt(shp[0])).astype(np.float16))
    inputs = {"x": rand((1, s, h), np.float16)}
    hw = load_target("ascend910b2")
    runs = []
    real = ffn_up.prefetches
    for on in (True, False):
        monkeypatch.setattr(ffn_up, "prefetches", real if on else (lambda *a: False))
        module = parse(text)
        run_passes(module, parse_pipeline("O2", "O0"))
        lower(module, store, hw.name)
        names = [k.sym_name.data for k in kernels(module)]
        assert names[0].startswith("ffn_up")
        res = simulate(module, store, inputs, hw)
        runs.append((res.outputs["y"], res.report["l2_hit_rate"]))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] > runs[1][1]



@pytest.mark.parametrize("case", ["swiglu_decode", "swiglu_multi_tile"])
def test_ffn_fused_prefetches_on_its_idle_aiv_with_the_same_numbers(case, monkeypatch):
    """ffn_fused with AIV 1 prefetching the up chunks and every other Wd tile
    (`ffn_fused.prefetches`, its chunk threshold lowered so a small FFN takes it), on the forced
    tilings that walk the kernel's edges (partial chunks, ranges and Ho tiles, odd chunk counts):
    outputs (race-checked) identical to the kernel without it and close to run_nn, more L2 hits."""
    import ascendir.conversion.nn_to_ascend.templates.ffn as ffn
    from ascendir.conversion.nn_to_ascend.templates import ffn_fused
    from test_ffn_template import FORCED, _case, _feeds, _run

    tiling = ffn_fused.FusedTiling(**FORCED[case])
    monkeypatch.setattr(ffn, "choose_plan", lambda *a: ffn.Plan(tiling, None, None))
    monkeypatch.setattr(ffn_fused, "MIN_PREFETCH_CHUNKS", 1)
    real = ffn_fused.prefetches
    text, shapes = _case(case, "f32")
    feeds = _feeds(shapes, "f32")
    runs = []
    for on in (True, False):
        monkeypatch.setattr(ffn_fused, "prefetches", real if on else (lambda *a: False))
        want, got, names, module = _run(text, feeds, "ascend910b2")
        (kern, *_) = kernels(module)
        assert kern.sym_name.data.startswith("ffn_fused")
        units = {str(op.attributes[FLAG_UNITS_ATTR]) for op in kern.walk() if FLAG_UNITS_ATTR in op.attributes}
        assert any("aiv1" in u for u in units) == on
        rep = simulate(module, None, {}, load_target("ascend910b2"), timing_only=True).report
        runs.append((got, rep["l2_hit_rate"]))
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(runs[0][0], want, rtol=1e-3, atol=1e-4 * scale)
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] > runs[1][1]
