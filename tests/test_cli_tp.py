"""`ascendir run MODEL --tp N [--sequence-parallel]`: the model sharded by shard-tensor-parallel
after the -O pipeline, each rank lowered with its weight store, all ranks run on the topology with
the collectives executed; rank 0's outputs against onnxruntime; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("model, args", [("llama_small", ["--tp", "2"]), ("llama_small", ["--tp", "2", "--sequence-parallel"]),
                                         ("gpt2_small", ["--tp", "4"])])
def test_tp_run_equals_onnxruntime(tmp_path: Path, model: str, args: list[str]):
    r = run_cli("run", DATA / model / "model.onnx", *args, "--check-ort", "--report", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("PASS")
    report = json.loads((tmp_path / "r.json").read_text())
    tp = int(args[1])
    assert report["cluster"]["devices"] == tp and report["cluster"]["topology"] == "atlas800-a2"
    assert report["cluster"]["comm_cycles"] > 0 and report["cluster"]["collectives"]
    assert f"shard-tensor-parallel{{tp={tp}" in report["pipeline"]


def test_tp_errors_are_one_line():
    llama = DATA / "llama_small" / "model.onnx"
    assert_clean_error(run_cli("run", llama, "--tp", "8", "--timing-only"), "4 query heads do not split over 8 devices")
    assert_clean_error(run_cli("run", llama, "--sequence-parallel"), "--sequence-parallel", "give --tp N")
    assert_clean_error(run_cli("run", llama, "--tp", "2", "--devices", "4"), "--tp 2 runs on 2 devices; --devices 4 differs")
    # an explicit --devices 1 is not the default: it contradicts --tp 2 as any other count does
    assert_clean_error(run_cli("run", llama, "--tp", "2", "--devices", "1"), "--tp 2 runs on 2 devices; --devices 1 differs")
