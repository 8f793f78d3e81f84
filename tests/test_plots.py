"""Seeing a simulation: --plots (roofline + pipe timeline, PNG and SVG), the trace's flag flows
and GM bandwidth counter track, the error without matplotlib, and the launch progress callback."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import matmul_ir, parse
from ascendir.interpreter.trace import GM_COUNTER
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
