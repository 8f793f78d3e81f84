"""The JSON report's published schema (ascendir/api/report.schema.json), checked with
`jsonschema`: every report `ascendir run` writes validates and is one `ascendir report` accepts;
it carries the tool version, model path and hash, target, pipeline, dtype and seed; every key a
report carries is described; `ascendir report --diff` says what changed."""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest

from ascendir.api.report_schema import SCHEMA_PATH, SCHEMA_VERSION, problem, schema
from ascendir.interpreter.report.report import rate
from cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data"
MLP = DATA / "mlp_small" / "model.onnx"


def test_the_schema_is_a_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_PATH.read_text()))
    assert schema()["properties"]["schema_version"]["const"] == SCHEMA_VERSION


def _described(rep: dict) -> list[str]:
    """Keys of `rep` (and of its kernels, verdict rows, ...) the schema does not describe."""
    props = schema()["properties"]
    missing = [k for k in rep if k not in props]
    kernel = props["kernels"]["items"]["properties"]
    missing += [f"kernels[].{k}" for kr in rep["kernels"] for k in kr if k not in kernel]
    for key in ("ceilings", "gm_footprint", "model", "tool", "verdict", "verify_numerics"):
        if key in rep:
            missing += [f"{key}.{k}" for k in rep[key] if k not in props[key]["properties"]]
    if "verdict" in rep:
        row = props["verdict"]["properties"]["outputs"]["items"]["properties"]
        missing += [f"verdict.outputs[].{k}" for r in rep["verdict"]["outputs"] for k in r if k not in row]
    return sorted(set(missing))


@pytest.mark.parametrize("name, extra", [
    ("mlp_small", ("--inputs", DATA / "mlp_small" / "reference.npz", "--verify-numerics")),
    ("llama_small", ("--timing-only", "--dtype", "fp16")),
    ("resnet_small", ("--timing-only", "--target", "910a", "--dtype", "fp16")),
    ("bert_small", ("--timing-only", "-O", "0", "--seed", "7")),
])
def test_every_report_run_writes_validates_and_report_accepts(tmp_path: Path, name: str, extra: tuple) -> None:
    model = DATA / name / "model.onnx"
    rep_path = tmp_path / "r.json"
    r = run_cli("run", model, "--report", rep_path, *extra)
    assert r.exit_code == 0, r.output
    rep = json.loads(rep_path.read_text())
    jsonschema.validate(rep, schema())
    assert _described(rep) == []
    assert rep["schema_version"] == SCHEMA_VERSION and rep["tool"] == {"name": "ascendir", "version": version("ascendir")}
    assert rep["model"] == {"path": str(model), "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
    assert rep["target"] == ("ascend910a" if "910a" in extra else "ascend910b2")
    assert rep["pipeline"].endswith(f"ascend-lowering{{target={rep['target']}}}")
    assert rep["dtype"] == ("fp16" if "fp16" in extra else "fp32")
    assert rep["seed"] == (None if "--inputs" in extra else (7 if "7" in extra else 0))
    assert "model" not in rep or isinstance(rep["model"], dict)  # the cost-model notes are `assumptions`
    assert rep["assumptions"] and all(isinstance(a, str) for a in rep["assumptions"])
    assert run_cli("report", rep_path).exit_code == 0


def test_a_report_of_lowered_ir_records_no_pipeline(tmp_path: Path) -> None:
    ir, rep = tmp_path / "m.mlir", tmp_path / "r.json"
    assert run_cli("compile", MLP, "-o", ir).exit_code == 0
    assert run_cli("run", ir, "--timing-only", "--report", rep).exit_code == 0
    data = json.loads(rep.read_text())
    jsonschema.validate(data, schema())
    assert data["pipeline"] is None and data["dtype"] is None


def test_old_and_future_reports_are_named(tmp_path: Path) -> None:
    rep = tmp_path / "r.json"
    assert run_cli("run", MLP, "--timing-only", "--report", rep).exit_code == 0
    data = json.loads(rep.read_text())
    old = {k: v for k, v in data.items() if k not in ("schema_version", "tool")}
    old["model"] = list(old.pop("assumptions"))  # as reports before schema 1 had it
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert_clean_error(run_cli("report", tmp_path / "old.json"), "no 'schema_version'", "run it again")
    (tmp_path / "new.json").write_text(json.dumps({**data, "schema_version": 2}))
    assert_clean_error(run_cli("report", tmp_path / "new.json"), "'schema_version' is 2", "reads report schema 1")


def test_problem_names_non_finite_figures_in_memory() -> None:
    rep = json.loads(json.dumps({"schema_version": 1, "target": "x", "clock_hz": 1.0, "total_cycles": 0, "total_seconds": 0,
                                 "kernels": [{"name": "k", "cycles": 1.0, "bytes": {}}]}))
    assert problem(rep) is None
    rep["kernels"][0]["cycles"] = float("inf")
    assert problem(rep) == "'kernels[0].cycles' is inf, not a finite non-negative number"


def test_rates_one_ulp_above_one_are_one() -> None:
    assert rate(1.0000000000000004) == 1.0 and rate(0.5) == 0.5 and rate(1.5) == 1.5


def test_diff_shows_kernels_and_pipes_that_changed(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json.gz"
    assert run_cli("run", MLP, "--timing-only", "--report", a).exit_code == 0
    assert run_cli("run", MLP, "--timing-only", "-O", "0", "--report", b).exit_code == 0
    ra = json.loads(a.read_text())
    r = run_cli("report", "--diff", a, b)
    assert r.exit_code == 0, r.output
    assert "pipeline" in r.output and "totals (B vs A)" in r.output
    assert "kernels that changed" in r.output and "ffn_up_0" in r.output and "new" in r.output  # mlp_small: two-kernel FFN
    assert "pipe busy cycles" in r.output and "MTE2" in r.output
    total = f"{ra['total_cycles']:,.0f}"
    assert total in r.output
    same = run_cli("report", "--diff", a, a)
    assert same.exit_code == 0 and "kernels: no change" in same.output and "pipes: no change" in same.output
    assert_clean_error(run_cli("report", "--diff", a), "--diff takes two reports")
    assert_clean_error(run_cli("report", a, b), "give one report")
