"""register_op for pass authors, mixed (AIC + AIV) kernels, host views/subviews, erf accuracy,
interpreter speed floor."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def
from xdsl.parser import Parser

from ascendir.session import make_context
from ascendir.hardware import load_target
from ascendir.interpreter import OpCost, register_op, simulate
from ascendir.interpreter.exec.special import erf
from ascendir.interpreter.testing import matmul_ir, parse

HW = load_target("ascend910b2")


@irdl_op_definition
class TripleOp(IRDLOperation):
    name = "testx.vtriple"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"


def gm(shape, dt="f32"):
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space gm>>"


def ub(shape, dt="f32"):
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space ub>>"


def test_register_op():
    def semantics(op):
        def run(src, dst):
            dst[...] = src * 3

        return run

    def cost(op, env):
        assert env.target is HW

        def run(src, dst):
            return OpCost("V", cycles=1000.0, bytes={"ub": dst.nbytes})

        return run

    register_op(TripleOp, semantics=semantics, cost=cost)
    s = (4, 16)
    text = f"""
builtin.module {{
  ascend.kernel @k(%x: {gm(s)}, %y: {gm(s)}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {ub(s)}
    ascend.copy %x, %a : {gm(s)}, {ub(s)}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    testx.vtriple %a, %a : {ub(s)}, {ub(s)}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %a, %y : {ub(s)}, {gm(s)}
    ascend.return
  }}
  func.func @main(%x: {gm(s)}) -> {gm(s)} {{
    %y = ascend.alloc : {gm(s)}
    ascend.launch @k(%x, %y) : {gm(s)}, {gm(s)}
    func.return %y : {gm(s)}
  }}
}}
"""
    ctx = make_context()
    ctx.load_dialect(Dialect("testx", [TripleOp]))
    mod = Parser(ctx, text).parse_module()
    x = np.arange(64, dtype=np.float32).reshape(s)
    res = simulate(mod, None, {"arg0": x}, HW)
    np.testing.assert_array_equal(res.outputs["out0"], 3 * x)
    k = res.report["kernels"][0]
    assert k["pipe_busy"]["V"] == 1000.0
    assert k["cycles"] > 1000.0 + HW.kernel_launch_cycles


MIX = f"""
builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">}} {{
  ascend.kernel @mm_relu(%a: {gm((32, 32), "f16")}, %b: {gm((32, 32), "f16")}, %w: {gm((32, 32))}, %y: {gm((32, 32))}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<mix>}} {{
    %l1a = ascend.alloc : memref<32x32xf16, #ascend<space l1>>
    %l1b = ascend.alloc : memref<32x32xf16, #ascend<space l1>>
    %l0a = ascend.alloc : memref<32x32xf16, #ascend<space l0a>>
    %l0b = ascend.alloc : memref<32x32xf16, #ascend<space l0b>>
    %l0c = ascend.alloc : memref<32x32xf32, #ascend<space l0c>>
    %u = ascend.alloc : {ub((32, 32))}
    ascend.copy %a, %l1a {{layout = #ascend.layout<nd2nz>}} : {gm((32, 32), "f16")}, memref<32x32xf16, #ascend<space l1>>
    ascend.copy %b, %l1b {{layout = #ascend.layout<nd2nz>}} : {gm((32, 32), "f16")}, memref<32x32xf16, #ascend<space l1>>
    ascend.set_flag MTE2 -> MTE1, 0
    ascend.wait_flag MTE2 -> MTE1, 0
    ascend.copy %l1a, %l0a : memref<32x32xf16, #ascend<space l1>>, memref<32x32xf16, #ascend<space l0a>>
    ascend.copy %l1b, %l0b : memref<32x32xf16, #ascend<space l1>>, memref<32x32xf16, #ascend<space l0b>>
    ascend.set_flag MTE1 -> M, 0
    ascend.wait_flag MTE1 -> M, 0
    ascend.mmad %l0a, %l0b, %l0c {{init = true}} : memref<32x32xf16, #ascend<space l0a>>, memref<32x32xf16, #ascend<space l0b>>, memref<32x32xf32, #ascend<space l0c>>
    ascend.set_flag M -> FIX, 0
    ascend.wait_flag M -> FIX, 0
    ascend.copy %l0c, %w : memref<32x32xf32, #ascend<space l0c>>, {gm((32, 32))}
    ascend.set_flag FIX -> MTE2, 0
    ascend.wait_flag FIX -> MTE2, 0
    ascend.copy %w, %u : {gm((32, 32))}, {ub((32, 32))}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.vrelu %u, %u : {ub((32, 32))}, {ub((32, 32))}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %u, %y : {ub((32, 32))}, {gm((32, 32))}
    ascend.return
  }}
  func.func @main(%a: {gm((32, 32), "f16")}, %b: {gm((32, 32), "f16")}) -> {gm((32, 32))} {{
    %w = ascend.alloc : {gm((32, 32))}
    %y = ascend.alloc : {gm((32, 32))}
    ascend.launch @mm_relu(%a, %b, %w, %y) : {gm((32, 32), "f16")}, {gm((32, 32), "f16")}, {gm((32, 32))}, {gm((32, 32))}
    func.return %y : {gm((32, 32))}
  }}
}}
"""


def test_mixed_kernel_units_and_cross_unit_flags():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    res = simulate(parse(MIX), None, {"arg0": a, "arg1": b}, HW, trace=True)
    np.testing.assert_allclose(res.outputs["out0"], np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0), rtol=1e-5, atol=1e-5)
    k = res.report["kernels"][0]
    units = k["pipe_busy_by_unit"]
    # the AIC's MTE2 (GM->L1) and the AIV's MTE2 (GM->UB) are separate engines
    assert {"aic.MTE2", "aiv.MTE2", "aic.MTE1", "aic.M", "aic.FIX", "aiv.V", "aiv.MTE3"} <= set(units)
    assert k["pipe_busy"]["MTE2"] == units["aic.MTE2"] + units["aiv.MTE2"]
    # strictly sequential chain: the kernel takes at least the sum of the chain's pipes
    assert k["cycles"] - k["launch_cycles"] >= sum(v for p, v in units.items() if not p.endswith(".S"))
    procs = {e["pid"]: e["args"]["name"] for e in res.trace_events if e["ph"] == "M" and e["name"] == "process_name"}
    names = {f"{procs[e['pid']]} {e['args']['name']}" for e in res.trace_events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"AIC+AIV 0 aic.FIX", "AIC+AIV 0 aiv.MTE2"} <= names


def test_host_views_and_subviews():
    text = f"""
builtin.module {{
  ascend.kernel @neg(%x: {gm((4, 8))}, %y: {gm((4, 8))}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %u = ascend.alloc : {ub((4, 8))}
    ascend.copy %x, %u : {gm((4, 8))}, {ub((4, 8))}
    ascend.pipe_barrier ALL
    ascend.vneg %u, %u : {ub((4, 8))}, {ub((4, 8))}
    ascend.pipe_barrier ALL
    ascend.copy %u, %y : {ub((4, 8))}, {gm((4, 8))}
    ascend.return
  }}
  func.func @main(%x: {gm((32,))} {{onnx.name = "x"}}) -> (memref<2x8xf32, strided<[8, 1], offset: 8>, #ascend<space gm>> {{onnx.name = "top"}}, {gm((4, 8))} {{onnx.name = "all"}}) {{
    %v = ascend.view %x : {gm((32,))} to {gm((4, 8))}
    %y = ascend.alloc : {gm((4, 8))}
    ascend.launch @neg(%v, %y) : {gm((4, 8))}, {gm((4, 8))}
    %t = memref.subview %y[1, 0] [2, 8] [1, 1] : {gm((4, 8))} to memref<2x8xf32, strided<[8, 1], offset: 8>, #ascend<space gm>>
    func.return %t, %y : memref<2x8xf32, strided<[8, 1], offset: 8>, #ascend<space gm>>, {gm((4, 8))}
  }}
}}
"""
    x = np.arange(32, dtype=np.float32)
    res = simulate(parse(text), None, {"x": x}, HW)
    np.testing.assert_array_equal(res.outputs["all"], -x.reshape(4, 8))
    np.testing.assert_array_equal(res.outputs["top"], -x.reshape(4, 8)[1:3])


def test_erf_accuracy():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 2.5, -2.5, np.inf, -np.inf, 1e-30]])
    ref = np.array([math.erf(v) for v in x])
    assert np.max(np.abs(erf(x) - ref)) < 1e-14
    assert np.isnan(erf(np.array([np.nan]))[0])
    assert erf(np.float32(0.5).reshape(1)).dtype == np.float64


def test_streaming_vector_kernel_hits_the_chip_bandwidth_floor():
    from ascendir.interpreter.testing import add_ir

    x = np.random.default_rng(5).standard_normal((100, 64)).astype(np.float16)
    y = np.random.default_rng(6).standard_normal((100, 64)).astype(np.float16)
    res = simulate(parse(add_ir(100, 64, 16, block_dim=3)), None, {"x": x, "y": y}, HW)
    np.testing.assert_array_equal(res.outputs["z"], x + y)

    single = simulate(parse(add_ir(4096, 1024, 16, block_dim=48, nbuf=1)), None, {}, HW, timing_only=True).report
    double = simulate(parse(add_ir(4096, 1024, 16, block_dim=48, nbuf=2)), None, {}, HW, timing_only=True).report
    assert double["total_cycles"] < single["total_cycles"]
    k = double["kernels"][0]
    assert k["cores_used"] == 48 and k["core_type"] == "aiv"
    # 48 AIVs reading and writing at once exceed HBM: the kernel is stretched to GM bytes / the
    # bandwidth the chip sustains (memory.hbm_efficiency of the peak, fitted on calibration V7)
    gm = k["bytes"]["gm_read"] + k["bytes"]["gm_write"]
    assert gm == 3 * 4096 * 1024 * 2
    assert k["bandwidth_floor_applied"]
    assert k["cycles"] - k["launch_cycles"] == pytest.approx(gm / HW.hbm_sustained_bytes_per_cycle)
    assert k["gm_bandwidth_Bps"] == pytest.approx(HW.memory.hbm_efficiency * HW.memory.hbm_bw_Bps, rel=0.02)
    assert k["gm_share_Bpc"] == pytest.approx(HW.hbm_bytes_per_cycle / 48)


def test_l2_hit_model_bounds_matmul_time():
    from ascendir.errors import AscendirError

    mod = parse(matmul_ir(1024, 1024, 1024, tm=128, tn=256, tk=64, l1_k=256, block_dim=24))
    none = simulate(mod, None, {}, HW.with_l2_model("none"), timing_only=True).report
    hit = simulate(mod, None, {}, HW.with_l2_model("hit"), timing_only=True).report
    tile = simulate(mod, None, {}, HW, timing_only=True).report
    assert (none["l2_model"], hit["l2_model"], tile["l2_model"]) == ("none", "hit", "tile")
    assert hit["total_cycles"] < tile["total_cycles"] < none["total_cycles"]
    assert hit["bytes"]["gm_read"] == none["bytes"]["gm_read"] == tile["bytes"]["gm_read"]
    assert none["l2_hit_rate"] == 0.0 and hit["l2_hit_rate"] == 1.0
    with pytest.raises(AscendirError, match="unknown L2 model"):
        HW.with_l2_model("magic")


def test_tile_op_count():
    rep = simulate(parse(matmul_ir(64, 64, 64, tm=32, tn=32, tk=32, block_dim=2)), None, {}, HW, timing_only=True).report
    # per (m, n, k): 2 GM->L1, 2 L1->L0, 1 mmad; per (m, n): 1 FixPipe
    assert rep["tile_ops"] == rep["kernels"][0]["tile_ops"] == 2 * 2 * 2 * 5 + 2 * 2


def test_invariant_violations_raise():
    from ascendir.errors import AscendirError
    from ascendir.interpreter.check.invariants import check
    from ascendir.interpreter.state import ACCT_SIZE, FLOPS, KernelRecord
    from ascendir.interpreter.timing.timeline import PIPES, CoreState

    core = CoreState(0, len(PIPES))
    core.free[2] = 100.0
    core.busy[2] = 150.0  # busier than the kernel is long
    rec = KernelRecord("k", 1, "aic", list(PIPES), [core], [0.0] * ACCT_SIZE, 0.0, 1.0)
    with pytest.raises(AscendirError, match="invariant: kernel @k core 0 pipe M busy 150.0 > kernel cycles 100.0"):
        check(rec, HW)
    core.busy[2] = 50.0
    rec.acct[FLOPS] = 1e12  # 1 TFLOP in 100 cycles: below the compute bound
    with pytest.raises(AscendirError, match="below its compute bound"):
        check(rec, HW)


def test_negative_cost_from_a_registered_op_raises():
    from ascendir.errors import AscendirError

    def bad_cost(op, env):
        return lambda src, dst: OpCost("V", cycles=-5.0)

    register_op(TripleOp, cost=bad_cost)
    s = (4, 16)
    text = f"""
builtin.module {{
  ascend.kernel @k(%x: {gm(s)}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {ub(s)}
    testx.vtriple %a, %a : {ub(s)}, {ub(s)}
    ascend.return
  }}
  func.func @main(%x: {gm(s)}) {{
    ascend.launch @k(%x) : {gm(s)}
    func.return
  }}
}}
"""
    ctx = make_context()
    ctx.load_dialect(Dialect("testx", [TripleOp]))
    with pytest.raises(AscendirError, match="testx.vtriple in kernel @k: negative or NaN duration"):
        simulate(Parser(ctx, text).parse_module(), None, {}, HW, timing_only=True)


def _mix_with_vector_group_loop(shared: bool) -> str:
    """MIX's kernel plus an AIV loop over the rows lo..hi of a group list read with
    ascend.get_value from GM (as a grouped MatMul's SwiGLU epilogue reads it). `shared`: the loop
    also holds an AIC copy, so both units run it."""
    g = "memref<3xi64, #ascend<space gm>>"
    l1 = "memref<16x32xf16, #ascend<space l1>>"
    xs = "memref<16x32xf32, strided<[32, 1], offset: ?>, #ascend<space gm>>"
    xh = "memref<16x32xf16, strided<[32, 1], offset: ?>, #ascend<space gm>>"
    aic = f"""
      %xh = memref.subview %h[%r, 0] [16, 32] [1, 1] : {gm((64, 32), "f16")} to {xh}
      ascend.copy %xh, %l1x {{layout = #ascend.layout<nd2nz>}} : {xh}, {l1}""" if shared else ""
    body = MIX.split("    ascend.return\n  }\n  func.func")[0]
    body = body.replace(f"%y: {gm((32, 32))}) attributes",
                        f"%y: {gm((32, 32))}, %g: {g}, %x: {gm((64, 32))}, %z: {gm((64, 32))}, %h: {gm((64, 32), 'f16')}) attributes")
    return body + f"""    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %l1x = ascend.alloc : {l1}
    %v = ascend.alloc : {ub((16, 32))}
    %lo = ascend.get_value %g[%c0] : {g}
    %hi = ascend.get_value %g[%c1] : {g}
    scf.for %r = %lo to %hi step %c16 {{
      %xs = memref.subview %x[%r, 0] [16, 32] [1, 1] : {gm((64, 32))} to {xs}
      %zs = memref.subview %z[%r, 0] [16, 32] [1, 1] : {gm((64, 32))} to {xs}
{aic}
      ascend.copy %xs, %v : {xs}, {ub((16, 32))}
      ascend.set_flag MTE2 -> V, 1
      ascend.wait_flag MTE2 -> V, 1
      ascend.vrelu %v, %v : {ub((16, 32))}, {ub((16, 32))}
      ascend.set_flag V -> MTE3, 1
      ascend.wait_flag V -> MTE3, 1
      ascend.copy %v, %zs : {ub((16, 32))}, {xs}
      ascend.set_flag MTE3 -> MTE2, 1
      ascend.wait_flag MTE3 -> MTE2, 1
    }}
    ascend.return
  }}
  func.func @main(%a: {gm((32, 32), "f16")}, %b: {gm((32, 32), "f16")}, %g: {g}, %x: {gm((64, 32))}, %h: {gm((64, 32), "f16")}) -> {gm((64, 32))} {{
    %w = ascend.alloc : {gm((32, 32))}
    %y = ascend.alloc : {gm((32, 32))}
    %z = ascend.alloc : {gm((64, 32))}
    ascend.launch @mm_relu(%a, %b, %w, %y, %g, %x, %z, %h) : {gm((32, 32), "f16")}, {gm((32, 32), "f16")}, {gm((32, 32))}, {gm((32, 32))}, {g}, {gm((64, 32))}, {gm((64, 32))}, {gm((64, 32), "f16")}
    func.return %z : {gm((64, 32))}
  }}
}}
"""


def test_mixed_kernel_scalar_reads_charge_the_unit_that_runs_them():
    # 910B: the AIC and the AIVs are separate cores, each with its own scalar unit running its
    # own program (dav-c220-cube / dav-c220-vec). A group-list read and the loop it bounds that
    # only the AIV's ops need cost the AIV's scalar unit, not the AIC's (before: every unit's S
    # pipe paid every ascend.get_value, so the cube stalled on the vector side's GM reads).
    from ascendir.costmodel.ops import get_value_cycles
    from ascendir.dialects import ascend as asc

    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    h = rng.standard_normal((64, 32)).astype(np.float16)
    g = np.array([16, 64, 64], np.int64)  # rows 16..63: three row tiles
    busy = {}
    for shared in (False, True):
        mod = parse(_mix_with_vector_group_loop(shared))
        read = next(o for o in mod.walk() if isinstance(o, asc.GetValueOp))
        res = simulate(mod, None, {"arg0": a, "arg1": b, "arg2": g, "arg3": x, "arg4": h}, HW)
        want = np.zeros_like(x)
        want[16:] = np.maximum(x[16:], 0)
        np.testing.assert_array_equal(res.outputs["out0"], want)
        busy[shared] = res.report["kernels"][0]["pipe_busy_by_unit"]
    # g[0] and g[1] share a 64-B DCache line: a GM read, then a scalar load (timing/dcache.py)
    two_reads = get_value_cycles(read, HW) + get_value_cycles(read, HW, hit=True)
    assert busy[False]["aiv.S"] >= two_reads
    # only its own few scalar ops (flags, none here): the report lists no idle pipe
    assert busy[False].get("aic.S", 0.0) < two_reads / 4
    # the AIC copies rows inside the loop too: it reads the bounds and runs the loop as well
    assert busy[True]["aic.S"] >= two_reads
    assert busy[True]["aiv.S"] >= two_reads
