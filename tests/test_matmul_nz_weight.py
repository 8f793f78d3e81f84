"""Constant weights stored in NZ fractals (tiling.nz_weight, `#ascend.layout<nz>`): the plain
matmul's B, when it is an `nn.weight` only matmuls read, is loaded GM -> L1 as whole fractals
(CANN converts such weights to FRACTAL_NZ once, offline), so its loads pay the plain MTE2 head
instead of the nd2nz one. Same numbers as the ND kernel; faster; the estimate follows."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.conversion.nn_to_ascend.tiling import Problem, Tiling, estimate, nz_weight
from ascendir.dialects import ascend, nn
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from lowering_harness import parse, rand, run_both
from test_choose_tiling import with_tiling
from test_lowering_matmul import kernels

TILING = "m=32,n=64,k=32,l1_depth=2,split_k=1,swizzle=1"


def weight_text(m: int, k: int, n: int, extra: str = "") -> str:
    """y = x @ W with W an nn.weight; `extra` adds another use of @w (a tied weight)."""
    a, w, y = f"tensor<{m}x{k}xf16>", f"tensor<{k}x{n}xf16>", f"tensor<{m}x{n}xf16>"
    out = f'({y} {{onnx.name = "y"}})'
    body = f"""  %w = nn.weight @w : {w}
  %y = nn.matmul %x, %w : ({a}, {w}) -> {y}"""
    if extra == "tied":  # the same weight read by an elementwise op too: it must stay ND
        out = f'({y} {{onnx.name = "y"}}, {w} {{onnx.name = "z"}})'
        body += f"\n  %z = nn.add %w, %w : ({w}, {w}) -> {w}\n  func.return %y, %z : {y}, {w}"
        return f'func.func @main(%x: {a} {{onnx.name = "x"}}) -> {out} {{\n{body}\n}}'
    return f'func.func @main(%x: {a} {{onnx.name = "x"}}) -> {out} {{\n{body}\n  func.return %y : {y}\n}}'


def runtime_text(m: int, k: int, n: int) -> str:
    a, b, y = f"tensor<{m}x{k}xf16>", f"tensor<{k}x{n}xf16>", f"tensor<{m}x{n}xf16>"
    return (f'func.func @main(%x: {a} {{onnx.name = "x"}}, %w: {b} {{onnx.name = "w"}}) -> ({y} {{onnx.name = "y"}}) {{\n'
            f"  %y = nn.matmul %x, %w : ({a}, {b}) -> {y}\n  func.return %y : {y}\n}}")


def l1_layouts(module) -> list[str]:
    """Layouts of the GM -> L1 copies of the matmul kernel, in program order."""
    (kern,) = [k for k in kernels(module) if k.sym_name.data.startswith("matmul_")]
    return [op.layout.data.value for op in kern.walk() if isinstance(op, ascend.CopyOp) and op.layout is not None
            and ascend.space_of(op.dest).value == "l1"]


@pytest.mark.parametrize("m,k,n", [(64, 256, 128), (40, 200, 72)])
def test_weight_b_loads_whole_fractals_with_the_same_numbers(m, k, n):
    """A weight's B chunks are `nz` loads (A stays nd2nz); the outputs equal the runtime-B
    kernel's exactly (the interpreter keeps arrays logical), both close to the nn reference;
    the NZ kernel is faster (the B loads skip the 210-cycle nd2nz head, S4)."""
    x, w = rand((m, k), np.float16, 1), rand((k, n), np.float16, 2)
    ref, out, low = run_both(with_tiling(weight_text(m, k, n), TILING), {"x": x}, {"w": w})
    ref_rt, out_rt, low_rt = run_both(with_tiling(runtime_text(m, k, n), TILING), {"x": x, "w": w})
    np.testing.assert_allclose(out["y"].astype(np.float64), ref["y"].astype(np.float64), rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(out["y"], out_rt["y"])
    assert set(l1_layouts(low)) == {"nd2nz", "nz"} and l1_layouts(low).count("nz") == l1_layouts(low).count("nd2nz")
    assert set(l1_layouts(low_rt)) == {"nd2nz"}
    hw = load_target("ascend910b2")
    cyc = simulate(low, None, {}, hw, timing_only=True).report["total_cycles"]
    cyc_rt = simulate(low_rt, None, {}, hw, timing_only=True).report["total_cycles"]
    assert cyc < cyc_rt


def test_only_weights_read_as_matmul_b_are_nz():
    """nz_weight: an nn.weight read only as a matmul's B; a runtime B or a weight some other op
    also reads (a tied weight) stays ND."""
    def mm_of(text):
        return next(op for op in parse(text).walk() if isinstance(op, nn.MatmulOp))
    assert nz_weight(mm_of(weight_text(16, 64, 64)))
    assert not nz_weight(mm_of(weight_text(16, 64, 64, "tied")))
    assert not nz_weight(mm_of(runtime_text(16, 64, 64)))
    x, w = rand((16, 64), np.float16, 1), rand((64, 64), np.float16, 2)
    ref, out, low = run_both(with_tiling(weight_text(16, 64, 64, "tied"), "m=16,n=64,k=32,l1_depth=2,split_k=1,swizzle=1"), {"x": x}, {"w": w})
    np.testing.assert_allclose(out["y"].astype(np.float64), ref["y"].astype(np.float64), rtol=2e-2, atol=2e-2)
    assert set(l1_layouts(low)) == {"nd2nz"}


def test_estimate_charges_the_plain_head_to_nz_b_and_tracks_simulation():
    """The estimate of a b_nz problem drops B's nd2nz heads (MTE2 per L1 chunk: 210 + 27 instead
    of 2 x 210) and stays within 10 % of the simulated kernel, as the ND one does."""
    hw = load_target("ascend910b2")
    m = k = n = 1024
    t = Tiling(128, 256, 64, 4)
    nd, nz = estimate(Problem(1, m, n, k, "f16", 2), t, hw), estimate(Problem(1, m, n, k, "f16", 2, b_nz=True), t, hw)
    chunks = k // t.k_l1
    assert nd.parts["mte2"] - nz.parts["mte2"] == pytest.approx(chunks * (hw.startup["mte2_nd2nz"] - hw.startup["mte2"]))
    from lowering_harness import lower_text
    from ascendir.weights import WeightStore
    spec = "m=128,n=256,k=64,l1_depth=4,split_k=1,swizzle=1"
    for text, e in ((weight_text(m, k, n), nz), (runtime_text(m, k, n), nd)):
        low = lower_text(with_tiling(text, spec), "ascend910b2", WeightStore())
        sim = simulate(low, None, {}, hw, timing_only=True).report["total_cycles"]
        assert abs(e.cycles - sim) / sim < 0.10, (e.cycles, sim)


def fused_layer_text(m: int, h: int, i: int, tied: bool = False) -> str:
    """RMSNorm -> Q projection, o-projection + residual, RMSNorm -> SwiGLU FFN (f16): at -O2 a
    norm_matmul, a matmul_epilogue and an ffn region, each reading its weights as matmul B;
    `tied`: the down weight is also an output (another reader: it must stay ND)."""
    x, g, w, wi, wd = (f"tensor<1x{m}x{h}xf16>", f"tensor<1x{m}x{i}xf16>", f"tensor<{h}x{h}xf16>",
                       f"tensor<{h}x{i}xf16>", f"tensor<{i}x{h}xf16>")
    outs = f'{x} {{onnx.name = "y"}}' + (f', {wd} {{onnx.name = "z"}}' if tied else "")
    rets = f"%r2, %wd : {x}, {wd}" if tied else f"%r2 : {x}"
    return f"""func.func @main(%x: {x} {{onnx.name = "x"}}) -> ({outs}) {{
  %ln = nn.weight @ln : tensor<{h}xf16>
  %wq = nn.weight @wq : {w}
  %wo = nn.weight @wo : {w}
  %wg = nn.weight @wg : {wi}
  %wu = nn.weight @wu : {wi}
  %wd = nn.weight @wd : {wd}
  %n1 = nn.rms_norm %x, %ln {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, tensor<{h}xf16>) -> {x}
  %q = nn.matmul %n1, %wq : ({x}, {w}) -> {x}
  %o = nn.matmul %q, %wo : ({x}, {w}) -> {x}
  %r1 = nn.add %x, %o : ({x}, {x}) -> {x}
  %n2 = nn.rms_norm %r1, %ln {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, tensor<{h}xf16>) -> {x}
  %gt = nn.matmul %n2, %wg : ({x}, {wi}) -> {g}
  %a = nn.silu %gt : ({g}) -> {g}
  %u = nn.matmul %n2, %wu : ({x}, {wi}) -> {g}
  %mu = nn.mul %a, %u : ({g}, {g}) -> {g}
  %y = nn.matmul %mu, %wd : ({g}, {wd}) -> {x}
  %r2 = nn.add %r1, %y : ({x}, {x}) -> {x}
  func.return {rets}
}}"""


def _o2(text: str) -> str:
    from ascendir.driver import parse_pipeline, run_passes
    from lowering_harness import printed
    module = parse(text)
    run_passes(module, parse_pipeline("O2"))
    return printed(module)


@pytest.mark.sampled
@pytest.mark.parametrize("plan", ["two-kernel", "fused"])
def test_fused_kernels_load_weights_nz_with_the_same_numbers(plan, monkeypatch):
    """The weights of norm_matmul, matmul_epilogue and either FFN plan (ffn_up + ffn_down, or
    ffn_fused) are read as whole fractals: those kernels' weight loads are nz; outputs equal the
    same kernels with ND weights exactly (arrays stay logical) and the NZ layer is faster."""
    import ascendir.conversion.nn_to_ascend.templates.ffn as ffn
    import ascendir.conversion.nn_to_ascend.tiling as tiling_mod
    from test_ffn_plan import _force_plan
    m, h, i = 64, 256, 512
    _force_plan(plan, monkeypatch)
    text = _o2(fused_layer_text(m, h, i))
    x = rand((1, m, h), np.float16, 1)
    ws = {"ln": rand((h,), np.float16, 2), "wq": rand((h, h), np.float16, 3) / 8, "wo": rand((h, h), np.float16, 4) / 8,
          "wg": rand((h, i), np.float16, 5) / 8, "wu": rand((h, i), np.float16, 6) / 8, "wd": rand((i, h), np.float16, 7) / 8}

    def run():
        ffn._PLANS.clear()
        ref, out, low = run_both(text, {"x": x}, ws)
        loads = {}
        for k in kernels(low):
            for op in k.walk():
                if isinstance(op, ascend.CopyOp) and op.layout is not None and ascend.space_of(op.dest).value == "l1" \
                        and ascend.space_of(op.source).value == "gm":
                    loads.setdefault(k.sym_name.data.rsplit("_", 1)[0], set()).add(op.layout.data.value)
        return ref, out, low, loads

    ref, out, low, loads = run()
    np.testing.assert_allclose(out["y"].astype(np.float64), ref["y"].astype(np.float64), rtol=3e-2, atol=3e-2)
    ffn_kernels = ("ffn_up", "ffn_down") if plan == "two-kernel" else ("ffn_fused",)
    # the weights nz, the activations (A, h) converted on the way in
    assert loads == {**{k: {"nd2nz", "nz"} for k in ("norm_matmul", "matmul_epilogue", *ffn_kernels)}}, loads
    hw = load_target("ascend910b2")
    cyc = simulate(low, None, {}, hw, timing_only=True).report["total_cycles"]
    monkeypatch.setattr(tiling_mod, "nz_weight", lambda mm: False)
    monkeypatch.setattr(ffn, "nz_weight", lambda mm: False)
    _, out_nd, low_nd, loads_nd = run()
    assert set().union(*loads_nd.values()) == {"nd2nz"}
    np.testing.assert_array_equal(out["y"], out_nd["y"])
    assert cyc < simulate(low_nd, None, {}, hw, timing_only=True).report["total_cycles"]


def test_nz_weight_sees_through_regions_and_keeps_a_tied_weight_nd():
    """nz_weight of a matmul inside an nn.fused region follows its B block argument to the
    region's operand: the ffn's weights are NZ; the down weight, also returned as an output
    (a reader that is not a matmul), stays ND, and so do the other weights of its region (one
    layout per FFN), while the norm_matmul's stays NZ."""
    import ascendir.conversion.nn_to_ascend.templates.ffn as ffn
    from ascendir.conversion.nn_to_ascend.templates.ffn_region import parse_ffn
    for tied in (False, True):
        module = parse(_o2(fused_layer_text(64, 256, 512, tied)))
        got = {}
        for region in module.walk():
            if isinstance(region, nn.FusedOp):
                for mm in region.body.walk():
                    if isinstance(mm, nn.MatmulOp):
                        got.setdefault(str(region.kind.data), []).append(nz_weight(mm))
        assert got["norm_matmul"] == [True] and got["matmul_epilogue"] == [True]
        assert got["ffn"] == ([True, True, False] if tied else [True, True, True]), got
        (region,) = [r for r in module.walk() if isinstance(r, nn.FusedOp) and r.kind.data == "ffn"]
        problems = ffn.ffn_problems(parse_ffn(region, {a: a for a in region.body.block.args}))
        assert {p.b_nz for p in problems.values()} == {not tied}


def test_estimate_times_the_first_b_reread_at_the_first_rows_speed():
    """A weight larger than L2's residency window, read row-major by 128-row tiles (70B TP2
    prefill down projection, 2048 x 14336 x 8192 f16, B stored NZ): the first row of tiles reads
    B from HBM, so the second row's re-reads come too late and miss, and so do all later ones.
    The estimate timed that distance at the speed of L2 hits and put the tiling at 2.74 M
    cycles against 6.34 M simulated (the search picked it); it now follows the simulation."""
    from lowering_harness import lower_text
    from ascendir.weights import WeightStore
    hw = load_target("ascend910b2")
    m, k, n = 2048, 14336, 8192
    e = estimate(Problem(1, m, n, k, "f16", 2, b_nz=True), Tiling(128, 256, 64, 5), hw)
    assert e.parts["b_regroup_misses"] == 1.0
    low = lower_text(with_tiling(weight_text(m, k, n), "m=128,n=256,k=64,l1_depth=5,split_k=1,swizzle=1"), "ascend910b2", WeightStore())
    sim = simulate(low, None, {}, hw, timing_only=True).report["total_cycles"]
    assert abs(e.cycles - sim) / sim < 0.10, (e.cycles, sim)
