"""The CLI through click's CliRunner: compile, run, report, and bad input (one line, exit 2,
no traceback, no output file left behind)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import onnx
from onnx import TensorProto, helper

from ascendir.api.report_schema import schema
from cli_helpers import assert_clean_error as _assert_clean_error
from cli_helpers import run_cli as _run

DATA = Path(__file__).parent / "data"
MLP = DATA / "mlp_small" / "model.onnx"



def test_compile_emit_nn_and_ascend(tmp_path: Path) -> None:
    r = _run("compile", MLP, "--emit", "nn")
    assert r.exit_code == 0, r.output
    assert "nn.matmul" in r.output and "nn.weight @" in r.output
    # weights are referenced, never printed: no literal longer than a small constant
    assert all(len(line) < 10_000 for line in r.output.splitlines())
    out = tmp_path / "mlp.mlir"
    r = _run("compile", MLP, "-o", out)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "ascend.kernel" in text and "ascend.mmad" in text and "ascend.launch" in text
    assert (tmp_path / "mlp.weights.npz").exists()


def test_run_onnx_matches_reference(tmp_path: Path) -> None:
    ref = np.load(DATA / "mlp_small" / "reference.npz")
    outputs, report = tmp_path / "out.npz", tmp_path / "report.json"
    trace = tmp_path / "trace.json"
    r = _run("run", MLP, "--inputs", DATA / "mlp_small" / "reference.npz", "--outputs", outputs, "--report", report, "--trace", trace)
    assert r.exit_code == 0, r.output
    assert "cycles" in r.output
    got = np.load(outputs)["output"]
    np.testing.assert_allclose(got, ref["output:output"], rtol=1e-3, atol=1e-4)
    rep = json.loads(report.read_text())
    jsonschema.validate(rep, schema())  # the published schema, not a hand-written check
    assert rep["total_cycles"] > 0 and rep["kernels"]
    for k in rep["kernels"]:
        assert {"name", "cycles", "pipe_busy", "bytes"} <= set(k)
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)


def test_compiled_ir_runs_with_its_weights(tmp_path: Path) -> None:
    out = tmp_path / "mlp.mlir"
    assert _run("compile", MLP, "-o", out).exit_code == 0
    res = tmp_path / "o.npz"
    r = _run("run", out, "--inputs", DATA / "mlp_small" / "reference.npz", "--outputs", res)
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(res)["output"], np.load(DATA / "mlp_small" / "reference.npz")["output:output"], rtol=1e-3, atol=1e-4)


def test_timing_only_matches_numerics_cycles(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert _run("run", MLP, "--report", a).exit_code == 0
    assert _run("run", MLP, "--timing-only", "--report", b).exit_code == 0
    assert json.loads(a.read_text())["total_cycles"] == json.loads(b.read_text())["total_cycles"]


def test_report_command(tmp_path: Path) -> None:
    rep = tmp_path / "r.json"
    assert _run("run", MLP, "--timing-only", "--report", rep).exit_code == 0
    r = _run("report", rep)
    assert r.exit_code == 0 and "kernels" in r.output
    assert "peak GM footprint" in r.output and "arena" in r.output


def test_report_rejects_the_trace_of_another_run(tmp_path: Path) -> None:
    """report and trace carry the run's id; `report --trace` of another run is one line, exit 2
    (files without the id: the trace's kernel launches are compared with the report's)."""
    runs = {}
    for name, model in (("mlp", MLP), ("mlp_o0", MLP)):
        rep, trace = tmp_path / f"{name}.json", tmp_path / f"{name}.trace.json"
        extra = ("-O", "0") if name.endswith("o0") else ()
        assert _run("run", model, "--timing-only", *extra, "--report", rep, "--trace", trace).exit_code == 0
        runs[name] = (rep, trace)
    (rep, trace), (rep2, trace2) = runs["mlp"], runs["mlp_o0"]
    assert json.loads(rep.read_text())["run_id"] == json.loads(trace.read_text())["otherData"]["run_id"]
    assert _run("report", rep, "--trace", trace, "--plots", tmp_path / "ok").exit_code == 0
    _assert_clean_error(_run("report", rep, "--trace", trace2, "--plots", tmp_path / "p"), "not the trace of the run of", "run id")
    assert not (tmp_path / "p").exists()
    old_rep, old_trace = tmp_path / "old.json", tmp_path / "old.trace.json"
    data = json.loads(rep.read_text())
    del data["run_id"]
    old_rep.write_text(json.dumps(data))
    old_trace.write_text(json.dumps({"traceEvents": json.loads(trace2.read_text())["traceEvents"]}))
    _assert_clean_error(_run("report", old_rep, "--trace", old_trace, "--plots", tmp_path / "p"), "kernel launches", "the report has")
    old_trace.write_text(json.dumps({"traceEvents": json.loads(trace.read_text())["traceEvents"]}))
    assert _run("report", old_rep, "--trace", old_trace, "--plots", tmp_path / "ok2").exit_code == 0


def test_report_rejects_impossible_figures(tmp_path: Path) -> None:
    rep = tmp_path / "r.json"
    assert _run("run", MLP, "--timing-only", "--report", rep).exit_code == 0
    good = json.loads(rep.read_text())

    def check(change, *fragments: str, plots: bool = False) -> None:
        data = json.loads(json.dumps(good))
        change(data)
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data))
        extra = ("--plots", tmp_path / "p") if plots else ()
        _assert_clean_error(_run("report", bad, *extra), "is not a report of", *fragments)
        assert not (tmp_path / "p").exists()

    check(lambda d: d.update(clock_hz=0), "'clock_hz' is 0", "positive")
    check(lambda d: d.update(clock_hz=-1.8e9), "'clock_hz'")
    check(lambda d: d.update(total_cycles=float("nan")), "'total_cycles'", "finite")
    check(lambda d: d.update(total_cycles=d["total_cycles"] * 2), "not the sum of its kernels")
    check(lambda d: d.update(total_seconds=d["total_seconds"] * 2), "total_cycles / clock_hz")
    check(lambda d: d["kernels"][0].update(cycles=-5.0), "kernels[0]")
    check(lambda d: d["kernels"][1]["bytes"].update(gm_read=-1.0), "kernels[1]", "bytes.gm_read")
    check(lambda d: d["ceilings"].update(hbm_Bps=0), "'ceilings.hbm_Bps' is 0", "positive")
    # the whole structure (api/report.schema.json): types, finiteness, signs, rates in [0, 1]
    check(lambda d: d.update(gm_footprint="x"), "'gm_footprint' is 'x', not an object")
    check(lambda d: d["gm_footprint"].update(arena=-3), "'gm_footprint.arena' is -3", "non-negative integer")
    check(lambda d: d["kernels"][0].update(vector_ops="x"), "'kernels[0].vector_ops' is 'x'", plots=True)
    check(lambda d: d.update(flops=float("inf")), "'flops' is inf", "finite")
    check(lambda d: d["kernels"][0].update(flops=float("inf")), "'kernels[0].flops' is inf")
    check(lambda d: d["bytes"].update({lv: -1 for lv in d["bytes"]}), "'bytes.gm_read' is -1", "non-negative")
    check(lambda d: d.update(l2_hit_rate=7), "'l2_hit_rate' is 7", "[0, 1]")
    check(lambda d: d["pipe_utilization"].update(M=1.5), "'pipe_utilization.M' is 1.5", "[0, 1]")
    check(lambda d: d["tiling_search"]["matmul"].update(ops=-1), "'tiling_search.matmul.ops' is -1")
    check(lambda d: d["tiling_search"]["matmul"].update(seconds=-5), "'tiling_search.matmul.seconds' is -5")
    check(lambda d: d["kernels"][0].update(name=5), "'kernels[0].name' is 5, not a string")
    check(lambda d: d.update(target=5), "'target' is 5, not a string")
    check(lambda d: d["kernels"][1].pop("cycles"), "no 'kernels[1].cycles'")
    check(lambda d: d.update(kernels={}), "'kernels' is {}, not a list")


def test_report_gm_footprint(tmp_path: Path) -> None:
    """plan-memory's GM footprint in the JSON report: weights are the model's initializers, the
    total is the sum of its parts and at least the live peak."""
    import onnx
    from onnx import numpy_helper

    rep = tmp_path / "r.json"
    assert _run("run", MLP, "--timing-only", "--report", rep).exit_code == 0
    fp = json.loads(rep.read_text())["gm_footprint"]
    model = onnx.load(MLP)
    assert fp["weights"] == sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    assert fp["total"] == fp["weights"] + fp["inputs"] + fp["outputs"] + fp["arena"]
    assert fp["inputs"] > 0 and fp["outputs"] > 0 and fp["arena"] > 0
    assert fp["live_peak"] <= fp["total"]


def test_target_910a(tmp_path: Path) -> None:
    r = _run("run", MLP, "--timing-only", "--target", "910a")
    # fp32 has no cube path on 910A: the error must name the op, not crash.
    assert r.exit_code in (0, 2), r.output
    if r.exit_code == 2:
        _assert_clean_error(r, "910")


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------
def test_truncated_protobuf(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(MLP.read_bytes()[:5000])
    out = tmp_path / "o.mlir"
    r = _run("compile", bad, "-o", out)
    _assert_clean_error(r, "bad.onnx")
    assert not out.exists() and not list(tmp_path.glob(".o.mlir*"))


def _model(nodes, inputs, outputs, domain_ops=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs)
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in domain_ops]
    return helper.make_model(g, opset_imports=opsets)


def test_unknown_op(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    m = _model([helper.make_node("FancyOp", ["x"], ["y"], name="fancy_1", domain="com.example")], [x], [y], ["com.example"])
    p = tmp_path / "u.onnx"
    onnx.save(m, p)
    out = tmp_path / "u.mlir"
    r = _run("compile", p, "-o", out)
    _assert_clean_error(r, "FancyOp", "fancy_1")
    assert not out.exists()


def test_dynamic_dim_needs_pin(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    p = tmp_path / "d.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y]), p)
    _assert_clean_error(_run("compile", p), "'x'", "batch")
    r = _run("run", p, "--input-shape", "x=4x3", "--timing-only")
    assert r.exit_code == 0, r.output


def test_inputs_pin_dynamic_dims(tmp_path: Path) -> None:
    """Issue 19: --input-shape was demanded even when --inputs holds arrays whose shapes say it
    all; the fed arrays now pin the dynamic dims (an explicit pin still wins and is checked)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    p = tmp_path / "d.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y]), p)
    feed = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    np.savez(tmp_path / "in.npz", x=feed)
    r = _run("run", p, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz")
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_array_equal(out["y"], np.maximum(feed, 0))
    _assert_clean_error(_run("run", p, "--inputs", tmp_path / "in.npz", "--input-shape", "x=2x3"), "'x'", "(4, 3)")


def test_declared_output_shape_mismatch_is_a_warning(tmp_path: Path) -> None:
    """Issue 19: outputs declared with a -1 dim (as exporters write) were rejected, and so was
    a declared shape the graph does not compute; onnxruntime runs such models, so ascendir
    does with the computed shape: -1 is an open dim, a contradiction one `warning:` line."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    p = tmp_path / "o.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 3])]), p)
    r = _run("run", p, "--timing-only")
    assert r.exit_code == 0 and "warning" not in r.output, r.output
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 3])]), p)
    r = _run("run", p, "--timing-only")
    assert r.exit_code == 0, r.output
    assert "warning: output 'y': the model declares shape [5, 3] but import computed [2, 3]" in r.output


def test_ir_that_fails_to_verify(tmp_path: Path) -> None:
    p = tmp_path / "bad.mlir"
    p.write_text(
        "func.func @main(%a: memref<32x32xf16, #ascend<space ub>>, %b: memref<32x32xf16, #ascend<space l0b>>,"
        " %c: memref<32x32xf32, #ascend<space l0c>>) {\n"
        "  ascend.mmad %a, %b, %c {init = true} : memref<32x32xf16, #ascend<space ub>>,"
        " memref<32x32xf16, #ascend<space l0b>>, memref<32x32xf32, #ascend<space l0c>>\n"
        "  func.return\n}\n"
    )
    out = tmp_path / "o.npz"
    r = _run("run", p, "--outputs", out)
    _assert_clean_error(r, "ascend.mmad")
    assert not out.exists()


def test_bad_target_and_pipeline() -> None:
    _assert_clean_error(_run("run", MLP, "--target", "910z"), "910z")
    _assert_clean_error(_run("compile", MLP, "-p", "no-such-pass"), "no-such-pass")


def test_missing_input_key(tmp_path: Path) -> None:
    p = tmp_path / "in.npz"
    np.savez(p, wrong=np.zeros(3))
    _assert_clean_error(_run("run", MLP, "--inputs", p), "input")


def test_unreadable_file(tmp_path: Path) -> None:
    _assert_clean_error(_run("compile", tmp_path / "nope.onnx"), "nope.onnx")


def test_calibrate_quick_prints_errors():
    from click.testing import CliRunner

    from ascendir.api.cli import main

    res = CliRunner().invoke(main, ["calibrate", "--quick"])
    assert res.exit_code == 0, res.output
    assert "V7" in res.output and "V13" in res.output and "median |error|" in res.output


def _matmul_ir(tmp_path: Path) -> Path:
    t = "tensor<256x512xf16>"
    src = tmp_path / "mm.mlir"
    src.write_text(f"""func.func @main(%a: {t}, %b: tensor<512x256xf16>) -> tensor<256x256xf16> {{
  %y = nn.matmul %a, %b : ({t}, tensor<512x256xf16>) -> tensor<256x256xf16>
  func.return %y : tensor<256x256xf16>
}}""")
    return src


def test_choose_tiling_search_is_reported(tmp_path: Path) -> None:
    """Candidates scored and seconds of choose-tiling: a stderr line of compile, the report of run
    (JSON `tiling_search` and the table), a note of ascendir-opt. Only benchmarks printed them."""
    import re

    from ascendir.api.opt import main as opt_main

    src = _matmul_ir(tmp_path)
    r = _run("compile", src, "--emit", "nn", "-o", tmp_path / "nn.mlir")
    assert r.exit_code == 0, r.output
    assert re.search(r"^choose-tiling: 1 matmul \(1 searched, [1-9][\d,]* candidates scored\) in \d+\.\d+ s$", r.stderr, re.M), r.stderr
    report = tmp_path / "r.json"
    r = _run("run", src, "--timing-only", "--report", report)
    assert r.exit_code == 0, r.output
    search = json.loads(report.read_text())["tiling_search"]
    assert set(search) == {"matmul"} and search["matmul"]["ops"] == 1 and search["matmul"]["searches"] == 1
    assert search["matmul"]["candidates"] > 100 and 0 < search["matmul"]["seconds"] < 60
    assert re.search(r"choose-tiling 1 matmul \(1 searched, [\d,]+ candidates\) scored in", r.stdout), r.stdout
    r = _run("report", report)
    assert "choose-tiling 1 matmul" in r.stdout
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        opt_main([str(src), "-p", "choose-tiling"])
    assert re.match(r"ascendir-opt: note: choose-tiling: 1 matmul \(1 searched, [\d,]+ candidates scored\) in ", err.getvalue())


def test_run_of_too_big_ir_names_the_buffer_and_the_largest_fit() -> None:
    """`ascendir run` on a kernel whose buffers overflow L1 said only "l1 buffers need 655360
    bytes ... (summed over every ascend.alloc)"; it now gives plan-memory's message."""
    src = Path(__file__).parent / "filecheck" / "plan-memory" / "errors_too_big.mlir"
    _assert_clean_error(
        _run("run", src, "--timing-only"),
        "error: kernel @too_big: L1 buffer 256x512xf16 (262144 B) does not fit: 655360 B of L1 needed, 524288 B available "
        "on ascend910b2; largest tile that fits: 128x512xf16",
    )


def test_pipeline_target_and_level_mismatches_are_errors(tmp_path: Path) -> None:
    """choose-tiling{target=ascend910a} under the default --target tiled for the 910A and
    simulated the 910B2; ascend-level passes in the nn pipeline did nothing. Both are errors now."""
    src = _matmul_ir(tmp_path)
    _assert_clean_error(_run("run", src, "--timing-only", "-p", "choose-tiling{target=ascend910a}"),
                        "choose-tiling{target=ascend910a} contradicts --target ascend910b2")
    _assert_clean_error(_run("compile", src, "--emit", "nn", "--target", "910b4", "-p", "decompose-attention{target=ascend910b2}"),
                        "contradicts --target ascend910b4")
    r = _run("run", src, "--timing-only", "--target", "910a", "-p", "choose-tiling{target=ascend910a}")
    assert r.exit_code == 0, r.output
    for p in ("plan-memory", "insert-sync", "double-buffer", "O2,plan-memory"):
        _assert_clean_error(_run("compile", src, "-p", p), f"{p.split(',')[-1]} is an ascend-level pass", "ascendir-opt")
        _assert_clean_error(_run("run", src, "--timing-only", "-p", p), "ascend-level pass")


def test_closed_stdout_ends_quietly_like_sigpipe():
    # `ascendir run m.onnx | head` when head has gone: no traceback, no "internal error", the
    # status of a tool killed by SIGPIPE (the report file is written before the table)
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "ascendir.api.cli", "run", str(MLP), "--timing-only"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the first line is printed: the simulation takes longer
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGPIPE, err.decode()
    assert err.decode().strip() == ""


def test_lowering_leaves_no_double_buffer_notes() -> None:
    """compile runs double-buffer on every kernel (lowering's pipeline, quiet): the templates'
    kernels have flags, which is no news to the user; an explicit -p double-buffer notes it."""
    r = _run("compile", MLP)
    assert r.exit_code == 0 and "note: double-buffer" not in r.output, r.output[-400:]


def test_bf16_outputs_are_float32_in_the_npz(tmp_path: Path) -> None:
    """--dtype bf16 --outputs: np.savez stored the bf16 arrays as raw |V2 bytes plain numpy cannot
    compute with; they are written as float32 (exact upcast: every value is still a bf16)."""
    import ml_dtypes

    out = tmp_path / "o.npz"
    ref = DATA / "mlp_small" / "reference.npz"
    r = _run("run", MLP, "--dtype", "bf16", "--inputs", ref, "--outputs", out)
    assert r.exit_code == 0, r.output
    got = np.load(out, allow_pickle=False)["output"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.astype(ml_dtypes.bfloat16).astype(np.float32), got)  # bf16 values
    from test_precision import BOUND, relative_to_max_error  # the README's bf16 error bound

    assert relative_to_max_error(got, np.load(ref)["output:output"]) <= BOUND["bf16"]


def test_numpy_native_upcasts_ml_dtypes_exactly() -> None:
    import ml_dtypes

    from ascendir.dtypes import numpy_native

    for t, native in ((ml_dtypes.bfloat16, np.float32), (ml_dtypes.float8_e4m3fn, np.float32), (ml_dtypes.float4_e2m1fn, np.float32),
                      (ml_dtypes.int4, np.int8), (ml_dtypes.uint4, np.uint8), (ml_dtypes.int2, np.int8)):
        x = np.arange(-2, 3).astype(t) if np.dtype(t) != np.dtype(ml_dtypes.uint4) else np.arange(5).astype(t)
        y = numpy_native(x)
        assert y.dtype == native and np.array_equal(y.astype(t), x), t
    f = np.ones(3, np.float16)
    assert numpy_native(f) is f
