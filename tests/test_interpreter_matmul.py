"""Tiled matmul kernels (GM→L1 nd2nz, L1→L0A/L0B, mmad over K, FixPipe out, flags) vs numpy,
and the timing model on them: invariants, double buffering, timing-only = numerics cycles."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import matmul_ir, parse

HW = load_target("ascend910b2")
RNG = np.random.default_rng(0)


def _run(m, n, k, dtype=np.float16, **kw):
    mod = parse(matmul_ir(m, n, k, **kw))
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    res = simulate(mod, None, {"a": a, "b": b}, HW)
    return res, a.astype(np.float32) @ b.astype(np.float32)


@pytest.mark.parametrize(
    "shape, tiles, nbuf, block_dim, l1_k",
    [
        ((50, 70, 90), (32, 32, 32), 1, 4, None),
        ((50, 70, 90), (32, 32, 32), 2, 4, None),
        ((17, 33, 40), (16, 32, 16), 2, 3, None),
        ((128, 64, 256), (64, 64, 64), 2, 30, None),  # more blocks than tiles and than cores (waves)
        ((100, 48, 16), (32, 16, 16), 1, 1, None),  # one block does everything
        ((50, 70, 200), (32, 32, 16), 2, 4, 64),  # L1 holds 4 K-steps; the last chunk is partial
        ((33, 20, 100), (16, 16, 32), 1, 2, 96),
    ],
)
def test_matmul_odd_shapes(shape, tiles, nbuf, block_dim, l1_k):
    (m, n, k), (tm, tn, tk) = shape, tiles
    res, ref = _run(m, n, k, tm=tm, tn=tn, tk=tk, nbuf=nbuf, block_dim=block_dim, l1_k=l1_k)
    out = res.outputs["c"]
    assert out.dtype == np.float32 and out.shape == (m, n)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


def test_fixpipe_narrowing_and_relu():
    res, ref = _run(40, 40, 48, tm=32, tn=32, tk=16, out_dtype="f16", relu=True, block_dim=2)
    out = res.outputs["c"]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32), np.maximum(ref, 0), rtol=2e-3, atol=2e-3)


def test_bf16_inputs_and_output():
    res, ref = _run(32, 48, 64, dtype=ml_dtypes.bfloat16, tm=32, tn=16, tk=32, in_dtype="bf16", out_dtype="bf16", block_dim=3)
    out = res.outputs["c"]
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=1e-2, atol=1e-1)


def test_fp32_mmad_is_four_times_slower_on_the_cube():
    r16, _ = _run(64, 64, 64, tm=64, tn=64, tk=64, block_dim=1)
    r32, ref = _run(64, 64, 64, dtype=np.float32, tm=64, tn=64, tk=64, in_dtype="f32", block_dim=1)
    np.testing.assert_allclose(r32.outputs["c"], ref, rtol=1e-5, atol=1e-4)
    m16 = r16.report["kernels"][0]["pipe_busy"]["M"]
    m32 = r32.report["kernels"][0]["pipe_busy"]["M"]
    # 4x4 fractals x ceil(64/16)=4 k-steps vs ceil(64/4)=16, + 20 start-up (S5)
    assert (m16, m32) == (4 * 4 * 4 + 20, 4 * 4 * 16 + 20)


def test_report_fields_and_invariants():
    res, _ = _run(96, 80, 72, tm=32, tn=32, tk=32, block_dim=5)
    rep = res.report
    for key in ("target", "clock_hz", "total_cycles", "total_seconds", "kernels", "bytes", "pipe_busy", "gm_bandwidth_Bps", "cube_peak_fraction"):
        assert key in rep
    assert rep["target"] == "ascend910b2" and rep["clock_hz"] == HW.clock_hz
    assert rep["total_seconds"] == pytest.approx(rep["total_cycles"] / HW.clock_hz)
    (k,) = rep["kernels"]
    assert (k["name"], k["block_dim"], k["core_type"], k["cores_used"]) == ("matmul", 5, "aic", 5)
    for key in ("gm_read", "gm_write", "l1", "l0a", "l0b", "l0c"):
        assert k["bytes"][key] > 0
    assert k["bytes"]["gm_read"] == k["bytes"]["l1"]  # every GM read lands in L1
    assert k["bytes"]["gm_write"] == 96 * 80 * 4  # each output element written once, f32
    assert k["flops"] == 2 * 96 * 96 * 96  # padded to whole 32-tiles: 3 x 3 x 3 tiles of 32^3
    cycles = k["cycles"]
    for p, busy in k["pipe_busy"].items():
        assert 0 < busy <= cycles * k["cores_used"]
        assert 0 < k["pipe_utilization"][p] <= 1
    assert cycles >= max(k["compute_bound_cycles"], k["bandwidth_bound_cycles"])
    assert 0 < rep["cube_peak_fraction"] < 1
    json.dumps(rep)


def test_timing_only_gives_identical_cycles():
    text = matmul_ir(200, 136, 300, tm=64, tn=64, tk=64, block_dim=7)
    a = RNG.standard_normal((200, 300)).astype(np.float16)
    b = RNG.standard_normal((300, 136)).astype(np.float16)
    full = simulate(parse(text), None, {"a": a, "b": b}, HW)
    fast = simulate(parse(text), None, {}, HW, timing_only=True)
    assert fast.report == full.report
    assert fast.outputs["c"].shape == (200, 136)


def test_double_buffering_overlaps_pipes():
    kw = dict(tm=64, tn=64, tk=64, block_dim=4)
    single = simulate(parse(matmul_ir(256, 256, 1024, nbuf=1, **kw)), None, {}, HW, timing_only=True).report
    double = simulate(parse(matmul_ir(256, 256, 1024, nbuf=2, **kw)), None, {}, HW, timing_only=True).report
    assert double["total_cycles"] < single["total_cycles"]
    # same work either way
    assert double["bytes"] == single["bytes"] and double["flops"] == single["flops"]
    k1, k2 = single["kernels"][0], double["kernels"][0]
    per_core = {p: b / k1["cores_used"] for p, b in k1["pipe_busy"].items()}
    # With one L1/L0 buffer, MTE2 of step i+1 waits for MTE1 of step i to free L1, so MTE1 is
    # serialised with the (dominant) MTE2; ping-pong buffers hide it completely.
    assert single["total_cycles"] - double["total_cycles"] >= 0.9 * per_core["MTE1"]
    # both kernels take at least the busiest pipe, and the single-buffered one at least MTE2 + MTE1
    assert k2["cycles"] >= max(per_core.values())
    assert k1["cycles"] >= per_core["MTE2"] + per_core["MTE1"]


def test_waves_when_blocks_exceed_cores():
    kw = dict(tm=32, tn=32, tk=32, nbuf=2)
    hw = HW.with_l2_model("none")  # waves only: second-wave re-reads hitting L2 are tested in test_interpreter_l2
    one_wave = simulate(parse(matmul_ir(32 * 24, 32, 64, block_dim=24, **kw)), None, {}, hw, timing_only=True).report
    two_waves = simulate(parse(matmul_ir(32 * 48, 32, 64, block_dim=48, **kw)), None, {}, hw, timing_only=True).report
    assert two_waves["kernels"][0]["cores_used"] == 24
    body1 = one_wave["total_cycles"] - HW.kernel_launch_cycles
    body2 = two_waves["total_cycles"] - HW.kernel_launch_cycles
    assert body2 == pytest.approx(2 * body1, rel=0.05)


def test_trace_events():
    res = simulate(parse(matmul_ir(64, 64, 64, tm=32, tn=32, tk=32, block_dim=2)), None, {}, HW, timing_only=True, trace=True)
    ev = res.trace_events
    json.dumps({"traceEvents": ev})
    spans = [e for e in ev if e["ph"] == "X" and e["pid"] > 0]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    names = {f"{procs[e['pid']]} {e['args']['name']}" for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    # a process per core (910B2 splits cube and vector cores), a thread per pipe
    assert {"AIC 0 MTE2", "AIC 0 MTE1", "AIC 0 M", "AIC 0 FIX", "AIC 1 M", "host kernel launches"} <= names
    # slices say what they do, with their bytes
    assert {"mmad", "GM->L1", "L1->L0A", "L1->L0B", "L0C->GM"} <= {e["name"] for e in spans}
    loads = [e for e in spans if e["name"] == "GM->L1"]
    assert loads and all(e["args"]["gm_read"] == e["args"]["l1"] == 32 * 32 * 2 for e in loads)  # a 32x32 f16 tile
    assert {e["args"].get("l2_hit", 0) for e in loads} == {0, 32 * 32 * 2}  # the other block's tiles hit in L2
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    starts = [e for e in ev if e["ph"] == "s"]
    finishes = [e for e in ev if e["ph"] == "f"]
    assert starts and len(starts) == len(finishes)
    assert {e["id"] for e in finishes} <= {e["id"] for e in starts}
    # the last span ends by the kernel's end: its launch slice, whose end is the report's total on
    # the trace's 1-ns grid (trace.Grid: every instant rounded to whole ns by the same function)
    end = max(e["ts"] + e["dur"] for e in spans)
    (launch,) = [e for e in ev if e["ph"] == "X" and e["pid"] == 0]
    assert end <= launch["ts"] + launch["dur"] == round(res.report["total_seconds"] * 1e9) / 1000
    assert simulate(parse(matmul_ir(64, 64, 64, tm=32, tn=32, tk=32)), None, {}, HW, timing_only=True).trace_events == []
