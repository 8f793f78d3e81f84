"""Seeing a simulation: --plots (roofline + pipe timeline, PNG and SVG), the trace's flag flows
and GM bandwidth counter track, the error without matplotlib, and the launch progress callback."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import matmul_ir, parse
from ascendir.interpreter.report.trace import GM_COUNTER
from cli_helpers import assert_clean_error, run_cli

MLP = Path(__file__).parent / "data" / "mlp_small" / "model.onnx"
PLOTS = ("roofline.png", "roofline.svg", "timeline.png", "timeline.svg")


def _check_plots(directory: Path) -> None:
    for name in PLOTS:
        data = (directory / name).read_bytes()
        assert len(data) > 1000, name
        if name.endswith(".png"):
            assert data.startswith(b"\x89PNG"), name
        else:
            assert b"<svg" in data[:1000], name


def test_run_plots_trace_and_report_plots(tmp_path: Path) -> None:
    report, trace = tmp_path / "r.json", tmp_path / "t.json"
    r = run_cli("run", MLP, "--timing-only", "--report", report, "--trace", trace, "--plots", tmp_path / "plots")
    assert r.exit_code == 0, r.output
    _check_plots(tmp_path / "plots")
    events = json.loads(trace.read_text())["traceEvents"]
    # flags as flow arrows: every finish has its start
    starts = {e["id"] for e in events if e["ph"] == "s"}
    finishes = {e["id"] for e in events if e["ph"] == "f"}
    assert finishes and finishes <= starts
    # GM bandwidth counter: integrating it over time gives the report's GM bytes
    rep = json.loads(report.read_text())
    counter = sorted((e for e in events if e["ph"] == "C"), key=lambda e: e["ts"])
    assert counter and all(e["name"] == GM_COUNTER and e["pid"] == 0 for e in counter)
    moved = sum((a["args"]["HBM GB/s"] + a["args"]["L2 hit GB/s"]) * 1e3 * (b["ts"] - a["ts"]) for a, b in zip(counter, counter[1:]))
    assert moved == pytest.approx(rep["bytes"]["gm_read"] + rep["bytes"]["gm_write"], rel=1e-3)
    assert sum(e["args"]["L2 hit GB/s"] for e in counter) > 0
    # the same plots from the files
    r = run_cli("report", report, "--trace", trace, "--plots", tmp_path / "again")
    assert r.exit_code == 0, r.output
    _check_plots(tmp_path / "again")


def test_plots_without_matplotlib(tmp_path: Path, monkeypatch) -> None:
    real = importlib.import_module

    def no_matplotlib(name, *a, **k):
        if name.split(".")[0] == "matplotlib":
            raise ImportError(f"No module named '{name}'")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", no_matplotlib)
    for args in (("run", MLP, "--timing-only"), ("report", tmp_path / "r.json")):
        assert_clean_error(run_cli(*args, "--plots", tmp_path / "plots"), "--plots needs matplotlib", "pip install 'ascendir[plots]'")
    assert not (tmp_path / "plots").exists()  # checked before any work


def test_plots_bad_directory(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert_clean_error(run_cli("run", MLP, "--plots", f), "not a directory")
    assert_clean_error(run_cli("run", MLP, "--plots", tmp_path / "missing" / "plots"), "does not exist")
    assert_clean_error(run_cli("report", tmp_path / "r.json", "--trace", tmp_path / "t.json"), "--trace is read for", "--plots")


def test_progress_called_per_launch() -> None:
    seen = []
    res = simulate(parse(matmul_ir(64, 64, 64, tm=32, tn=32, tk=32, block_dim=2)), None, {}, load_target("ascend910b2"),
                   timing_only=True, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 1)] and len(res.report["kernels"]) == 1


def _perfetto_ns(us: float) -> int:
    """Perfetto's JSON importer: a float µs value becomes llround(µs × 1000) ns (ts and dur alike)."""
    return int(math.floor(us * 1000.0 + 0.5))


def _partial_overlaps(spans: list[tuple], track) -> list[str]:
    """Strict: (start, end, name) spans must nest or be disjoint (touching allowed), no tolerance."""
    problems = []
    spans = sorted(spans, key=lambda x: (x[0], -x[1]))
    open_: list[tuple] = []  # enclosing slices, innermost last
    for s1, e1, n1 in spans:
        while open_ and open_[-1][1] <= s1:  # ended: closed left, open right
            open_.pop()
        if open_ and e1 > open_[-1][1]:
            s0, e0, n0 = open_[-1]
            problems.append(f"{track}: {n0} [{s0!r}, {e0!r}] partly overlaps {n1} [{s1!r}, {e1!r}]")
        open_.append((s1, e1, n1))
    return problems


def _flow_binding_problems(events: list[dict]) -> list[str]:
    """What keeps a viewer from drawing the flag arrows of `events` (Chrome JSON trace format):
    a flow event ("s", or "f" with bp "e") must lie in an "X" slice of its own pid/tid, and the
    slice it lies in when imported in (ts, file order) must be its own set_flag / wait_flag slice
    (Perfetto binds the topmost open slice of the track); slices of a track must nest or be
    disjoint (Perfetto drops a partial overlap), strictly: in the float µs of the file (ts + dur)
    and in the integer ns Perfetto makes of ts and dur separately; ids must be numbers (a string
    id is read as hex)."""
    problems = []
    by_track: dict[tuple, list[tuple[float, float, str]]] = {}
    for e in events:
        if e.get("ph") == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
            ns = _perfetto_ns(e["ts"])
            by_track.setdefault(("ns", e["pid"], e["tid"]), []).append((ns, ns + _perfetto_ns(e["dur"]), e["name"]))
    for track, spans in by_track.items():
        problems += _partial_overlaps(spans, track)
    for i, e in enumerate(events):
        if e.get("ph") not in ("s", "f"):
            continue
        if not isinstance(e.get("id"), int):
            problems.append(f"flow id {e.get('id')!r} is not an integer")
        if e["ph"] == "f" and e.get("bp") != "e":
            problems.append(f"flow end {e['id']} does not bind its enclosing slice")
        spans = by_track.get((e["pid"], e["tid"]), [])
        if not any(s <= e["ts"] <= end for s, end, _ in spans):
            problems.append(f"flow {e['ph']} {e['id']} at {e['ts']} has no enclosing slice on {(e['pid'], e['tid'])}")
        own = events[i - 1]
        want = "set_flag" if e["ph"] == "s" else "wait_flag"
        if not (own.get("ph") == "X" and own["name"].startswith(want) and (own["pid"], own["tid"]) == (e["pid"], e["tid"])
                and own["ts"] == e["ts"]):
            problems.append(f"flow {e['ph']} {e['id']} does not follow its {want} slice")
    return problems


def test_flag_flows_bind_to_slices() -> None:
    """Every flag arrow end lies in a set_flag / wait_flag slice of its pipe (llama_small: flags
    set at kernel start and waits on idle pipes had none, so Perfetto dropped ~half the arrows),
    and those slices leave the op slices of their track intact."""
    from ascendir.driver import compile_model

    module, weights = compile_model(Path(__file__).parent / "data" / "llama_small" / "model.onnx", "ascend910b2")
    events = simulate(module, weights, {}, load_target("ascend910b2"), timing_only=True, trace=True).trace_events
    flows = [e for e in events if e.get("ph") in ("s", "f")]
    assert len(flows) > 1000
    assert _flow_binding_problems(events) == []
    starts = [e["id"] for e in flows if e["ph"] == "s"]
    assert sorted(starts) == sorted(e["id"] for e in flows if e["ph"] == "f") and len(set(starts)) == len(starts)
    # the waits that blocked their pipe show for how long; the pipe timeline does not draw them as work
    waits = [e for e in events if e.get("cat") == "sync" and e["name"].startswith("wait_flag")]
    assert any(e["dur"] > 0 for e in waits) and any(e["dur"] == 0 for e in waits)
    assert all(e["args"]["cycles"] >= 0 for e in waits)


def _report(kernels: list[dict]) -> dict:
    return {"target": "t", "clock_hz": 1e9, "kernels": kernels,
            "ceilings": {"cube_flops_per_s": {"f16": 300e12, "f32": 75e12}, "vector_flops_per_s": {"f16": 10e12, "f32": 5e12},
                         "hbm_Bps": 1e12, "l2_Bps": 5e12}}


def test_roofline_places_each_kernel_by_its_own_figures(tmp_path: Path) -> None:
    from ascendir.api.plots import roofline, roofline_points

    gm = {"gm_read": 2e6, "gm_write": 1e6}
    rep = _report([
        {"name": "add", "cycles": 1e4, "seconds": 1e-5, "bytes": gm, "flops": 0.0, "vector_ops": {"f32": 0.25e6}},
        {"name": "gelu", "cycles": 2e4, "seconds": 2e-5, "bytes": gm, "flops": 0.0, "vector_ops": {"f32": 3e6}},
        {"name": "mixed", "cycles": 1e4, "seconds": 1e-5, "bytes": gm, "flops": 0.0, "vector_ops": {"f16": 1e6, "f32": 1e6}},
        {"name": "mm", "cycles": 1e4, "seconds": 1e-5, "bytes": gm, "flops": 3e9, "cube_peak_flops_per_s": 75e12},
        {"name": "copy", "cycles": 1e3, "seconds": 1e-6, "bytes": gm, "flops": 0.0, "vector_ops": {}},
    ])
    points, skipped = roofline_points(rep)
    at = {p.name: p for p in points}
    assert skipped == 1 and set(at) == {"add", "gelu", "mixed", "mm"}
    # vector-only kernels: element-ops per GM byte and per second, under the vector peak
    assert (at["add"].unit, at["add"].intensity, at["add"].achieved) == ("vector", 0.25e6 / 3e6, 0.25e6 / 1e-5)
    assert (at["gelu"].intensity, at["gelu"].achieved) == (1.0, 3e6 / 2e-5)
    assert at["add"].peak == at["gelu"].peak == 5e12
    assert at["add"].roof == pytest.approx(0.25e6 / 3e6 * 1e12)  # bandwidth-bound at its intensity
    assert at["mixed"].peak == pytest.approx(2e6 / (1e6 / 10e12 + 1e6 / 5e12))  # time-weighted f16/f32 mix
    # cube kernels under the peak of their own dtype (f32 here), not the f16 one
    assert (at["mm"].unit, at["mm"].intensity, at["mm"].achieved, at["mm"].peak) == ("cube", 1e3, 3e14, 75e12)
    assert at["mm"].roof == 75e12
    paths = roofline(rep, tmp_path / "roofline")
    assert [p.name for p in paths] == ["roofline.png", "roofline.svg"] and all(p.stat().st_size > 1000 for p in paths)


def test_report_carries_vector_ops_and_cube_peak() -> None:
    """A simulated model's vector-only kernels have vector element-ops (and so distinct roofline
    points), its cube kernels the cube peak of their dtype."""
    from ascendir.driver import compile_model
    from ascendir.api.plots import roofline_points

    hw = load_target("ascend910b2")
    module, weights = compile_model(Path(__file__).parent / "data" / "llama_small" / "model.onnx", "ascend910b2")
    rep = simulate(module, weights, {}, hw, timing_only=True).report
    vector = [k for k in rep["kernels"] if not k["flops"] and k["vector_ops"]]
    cube = [k for k in rep["kernels"] if k["flops"]]
    assert vector and cube
    assert all(k["cube_peak_flops_per_s"] == hw.peak_flops("f32") for k in cube)  # an fp32 model
    points, _ = roofline_points(rep)
    assert len({(p.intensity, p.achieved) for p in points if p.unit == "vector"}) >= 5


def test_failed_runs_leave_no_plots_directory(tmp_path: Path) -> None:
    """--plots DIR is made only when the plots are written: a run or report that fails leaves no
    (empty) DIR, and a drawing that fails halfway removes what it wrote."""
    import numpy as np
    import onnx
    from onnx import helper

    from onnx_builders import make_model

    big = tmp_path / "big.onnx"
    onnx.save(make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], {"x": np.zeros((2, 300000), np.float32)}, ["y"]), big)
    assert_clean_error(run_cli("run", big, "--timing-only", "--plots", tmp_path / "newplots"), "nn.softmax", "UB")
    assert not (tmp_path / "newplots").exists()

    report = tmp_path / "r.json"
    assert run_cli("run", MLP, "--timing-only", "--report", report).exit_code == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert_clean_error(run_cli("report", report, "--trace", bad, "--plots", tmp_path / "p3"), "cannot read trace")
    assert not (tmp_path / "p3").exists()
    # the roofline is drawn, then the timeline fails (the run's trace without its pipe spans):
    # both the files and the folder go
    trace = tmp_path / "t.json"
    assert run_cli("run", MLP, "--timing-only", "--report", report, "--trace", trace).exit_code == 0
    doc = json.loads(trace.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e["ph"] == "X" and e["pid"] > 0)]
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(doc))
    assert_clean_error(run_cli("report", report, "--trace", empty, "--plots", tmp_path / "p4"), "no pipe spans")
    assert not (tmp_path / "p4").exists()
    # an existing folder keeps what it had, and gets nothing new
    (tmp_path / "p5").mkdir()
    (tmp_path / "p5" / "notes.txt").write_text("mine")
    assert_clean_error(run_cli("report", report, "--trace", empty, "--plots", tmp_path / "p5"), "no pipe spans")
    assert [p.name for p in (tmp_path / "p5").iterdir()] == ["notes.txt"]
