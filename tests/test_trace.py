"""The Chrome / Perfetto trace of `ascendir run --trace` (interpreter/report/trace.py): valid
Trace Event Format, written as the run goes (gzip for .gz), the same as the in-memory trace,
a process per core whose pipe tracks run on across launches.

Perfetto's trace processor cannot run here (its Python package downloads the
trace_processor_shell binary at first use, and this machine is offline), so the file is checked
against the Trace Event Format (the format document of the Chrome tracing project: the phases
"X" complete, "M" metadata, "C" counter, "s" / "f" flow) written down as a JSON Schema below, and
the track rules Perfetto's JSON importer applies (tests/test_plots.py `_flow_binding_problems`)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import jsonschema
import pytest

from cli_helpers import run_cli
from test_plots import _flow_binding_problems

DATA = Path(__file__).parent / "data"
NUM = {"type": "number"}
INT = {"type": "integer", "minimum": 0}
COMMON = {"name": {"type": "string"}, "pid": INT, "cat": {"type": "string"}}
TRACE_EVENT_FORMAT = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"properties": {"ph": {"const": "X"}, **COMMON, "tid": INT, "ts": {"type": "number", "minimum": 0},
                            "dur": {"type": "number", "minimum": 0}, "args": {"type": "object"}},
             "required": ["ph", "name", "pid", "tid", "ts", "dur"], "additionalProperties": False},
            {"properties": {"ph": {"const": "M"}, **COMMON, "tid": INT,
                            "name": {"enum": ["process_name", "thread_name", "process_sort_index", "thread_sort_index"]},
                            "args": {"type": "object", "minProperties": 1, "maxProperties": 1}},
             "required": ["ph", "name", "pid", "args"], "additionalProperties": False},
            {"properties": {"ph": {"const": "C"}, **COMMON, "ts": NUM, "args": {"type": "object", "additionalProperties": NUM}},
             "required": ["ph", "name", "pid", "ts", "args"], "additionalProperties": False},
            {"properties": {"ph": {"enum": ["s", "f"]}, **COMMON, "tid": INT, "ts": NUM, "id": INT, "bp": {"const": "e"}},
             "required": ["ph", "name", "pid", "tid", "ts", "id"], "additionalProperties": False},
        ]}},
        "otherData": {"type": "object"},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
    },
}


@pytest.mark.sampled
def test_streamed_trace_is_valid_and_matches_the_run(tmp_path: Path) -> None:
    """llama_small timing-only (launches the memo repeats): the .gz file is
    valid Trace Event Format, a process per core with one track per pipe over every launch,
    slices named by what they do with their bytes, their launches matching the report's."""
    trace, report = tmp_path / "t.json.gz", tmp_path / "r.json"
    r = run_cli("run", DATA / "llama_small" / "model.onnx", "--timing-only", "--trace", trace, "--report", report)
    assert r.exit_code == 0, r.output
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    jsonschema.validate(doc, TRACE_EVENT_FORMAT)
    rep = json.loads(report.read_text())
    assert doc["otherData"]["run_id"] == rep["run_id"]
    events = doc["traceEvents"]
    assert _flow_binding_problems(events) == []
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs[0] == "host" and len(set(procs.values())) == len(procs)
    assert {n.rsplit(" ", 1)[0] for n in procs.values()} >= {"host", "AIC", "AIV"}
    launches = [e for e in events if e["ph"] == "X" and e["pid"] == 0]
    assert [(e["name"], e["args"]["cycles"]) for e in launches] == [(k["name"], k["cycles"]) for k in rep["kernels"]]
    assert [e["args"]["launch"] for e in launches] == list(range(len(launches)))
    # a core's pipe track holds slices of several launches (continuous across them)
    core = next(p for p, n in procs.items() if n == "AIV 0")
    spans = [e for e in events if e["ph"] == "X" and e["pid"] == core and e.get("cat") != "sync"]
    within = {i for e in spans for i, l in enumerate(launches) if l["ts"] <= e["ts"] <= l["ts"] + l["dur"]}
    assert len(within) > 1
    names = {e["name"] for e in events if e["ph"] == "X" and e["pid"] > 0 and e.get("cat") is None}
    assert {"GM->UB", "UB->GM", "GM->L1", "L1->L0A", "L1->L0B", "mmad"} <= names
    assert not any(n.startswith("ascend.") for n in names)
    # bytes of every slice add up to the report's (extrapolated ones: test_interpreter_steady.py)
    slices = [e for e in events if e["ph"] == "X" and e["pid"] > 0]
    for level in ("gm_read", "gm_write", "l2_hit"):
        assert abs(sum(e["args"].get(level, 0.0) for e in slices) - rep["bytes"][level]) <= 1e-9 * rep["bytes"][level]


def test_file_equals_the_in_memory_trace(tmp_path: Path) -> None:
    """The streamed file holds what simulate(trace=True) keeps (same events, same order)."""
    from ascendir.driver import compile_model
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.interpreter.report.trace import TraceWriter

    module, weights = compile_model(DATA / "mlp_small" / "model.onnx", "ascend910b2")
    hw = load_target("ascend910b2")
    kept = simulate(module, weights, {}, hw, timing_only=True, trace=True)
    with (tmp_path / "t.json").open("wb") as f:
        w = TraceWriter(hw, f)
        res = simulate(module, weights, {}, hw, timing_only=True, trace=w)
        w.close(res.report)
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["traceEvents"] == kept.trace_events and res.trace_events == []
    assert doc["otherData"]["run_id"] == res.report["run_id"] == kept.report["run_id"]
