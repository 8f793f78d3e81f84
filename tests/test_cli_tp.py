"""`ascendir run MODEL --tp N [--sequence-parallel]`: the model sharded by shard-tensor-parallel
after the -O pipeline, each rank lowered with its weight store, all ranks run on the topology with
the collectives executed; rank 0's outputs against onnxruntime; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data"


@pytest.mark.sampled
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


def test_topology_chip_is_the_default_target(tmp_path: Path) -> None:
    """--topology a3-supernode-16 without --target simulates its own chip (ascend910_93 dies),
    not the default 910B2 on A3 links (what run / generate did before); an explicit --target wins."""
    import json

    from ascendir.hardware.topology import load_topology

    chip = load_topology("a3-supernode-16").chip
    assert chip != "ascend910b2"
    moe = Path(__file__).parent / "data" / "qwen2_moe_block_small" / "model.onnx"
    kv = Path(__file__).parent / "data" / "kv" / "llama" / "model.onnx"
    for cmd, extra, want in (("run", ("--ep", 2), chip), ("run", ("--ep", 2, "--target", "910b2"), "ascend910b2"),
                             ("generate", ("--tp", 2, "--prompt-len", 4, "--new-tokens", 2), chip)):
        r = tmp_path / f"{cmd}{len(extra)}.json"
        model = moe if cmd == "run" else kv
        res = run_cli(cmd, model, "--timing-only", "--topology", "a3-supernode-16", "--report", r, *extra)
        assert res.exit_code == 0, res.output
        assert json.loads(r.read_text())["target"] == want, (cmd, extra)
