"""The headline and breakdowns of the printed report (interpreter/report/headline.py, api/report_table.py):
latency, throughput, bound resource, launch overhead, time by kind, kernels grouped with their
launch count; readable at 80 and 160 columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascendir.api.cli import main
from ascendir.interpreter.report.headline import bound, bound_shares, by_kind, grouped, headline, kernel_kind
from cli_helpers import run_cli
from test_lowering_matmul import matmul_text

DATA = Path(__file__).parent / "data"
LLAMA = DATA / "llama_small" / "model.onnx"
REPORT = {"target": "t", "clock_hz": 1e9, "total_cycles": 1000.0, "total_seconds": 1e-6,
          "ceilings": {"hbm_Bps": 1e12, "l2_Bps": 4e12, "cube_flops_per_s": {"f16": 1e14}, "vector_flops_per_s": {"f16": 1e13}}}


def _kernel(name: str, cycles: float, **kw) -> dict:
    return {"name": name, "cycles": cycles, "launch_cycles": kw.pop("launch", 0.0), "bytes": kw.pop("bytes", {}),
            "pipe_utilization": kw.pop("util", {}), **kw}


def test_bound_resource_of_a_launch() -> None:
    assert bound(_kernel("mm_0", 100, util={"M": 0.9, "V": 0.1}), REPORT) == ("cube", 0.9)
    assert bound(_kernel("v_0", 100, util={"V": 0.7}), REPORT) == ("vector", 0.7)
    # 80 KB from HBM at 1e12 B/s and 1 GHz: 80 cycles of 100
    assert bound(_kernel("copy_0", 100, bytes={"gm_read": 40_000, "gm_write": 40_000}), REPORT) == ("HBM", pytest.approx(0.8))
    assert bound(_kernel("hit_0", 100, bytes={"gm_read": 300_000, "l2_hit": 300_000}), REPORT) == ("L2", pytest.approx(0.75))
    assert bound(_kernel("tiny_0", 100, launch=60), REPORT) == ("launch", 0.6)
    assert bound(_kernel("wait_0", 100, util={"M": 0.2}, launch=10), REPORT) == ("latency", 0.2)


def test_hbm_share_is_taken_against_the_sustained_bandwidth() -> None:
    """A chip that sustains 40 % of its nominal HBM bandwidth (memory.hbm_efficiency = 0.4): a
    copy moving 40 KB in 100 cycles runs at that roof (40 % of the nominal 1e12 B/s), HBM-bound,
    not latency-bound as against the nominal bandwidth."""
    rep = {**REPORT, "ceilings": {**REPORT["ceilings"], "hbm_sustained_Bps": 0.4e12}}
    copy = _kernel("copy_0", 100, bytes={"gm_read": 20_000, "gm_write": 20_000})
    assert bound(copy, rep) == ("HBM", pytest.approx(1.0))
    assert bound(copy, REPORT) == ("latency", pytest.approx(0.4))  # a report written without it


def test_a_kernel_at_the_sustained_hbm_roof_is_hbm_bound(tmp_path: Path) -> None:
    """End to end: on a chip of memory.hbm_efficiency = 0.01 a 512x1024x1024 fp16 matmul runs at
    the HBM floor (about 34x slower than on the 910B2 it copies); the report says HBM-bound (it
    said `latency 100 %`, the share taken against the nominal bandwidth: 1 %)."""
    chip = tmp_path / "slow_hbm.toml"
    text = (Path(__file__).parents[1] / "ascendir" / "hardware" / "chips" / "ascend910b2.toml").read_text()
    chip.write_text(text.replace('name = "ascend910b2"', 'name = "slow_hbm"').replace("hbm_efficiency = 0.80 ", "hbm_efficiency = 0.01 "))
    ir = tmp_path / "mm.mlir"
    ir.write_text(matmul_text((512, 1024), (1024, 1024), (512, 1024), "f16"))
    rep = tmp_path / "r.json"
    r = run_cli("run", ir, "--target", chip, "--timing-only", "--report", rep)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[2].startswith("bound by HBM"), r.output
    data = json.loads(rep.read_text())
    assert data["ceilings"]["hbm_sustained_Bps"] == pytest.approx(0.01 * data["ceilings"]["hbm_Bps"])


def test_shares_kinds_and_groups_add_up() -> None:
    kernels = [_kernel("matmul_0", 500, util={"M": 0.9}), _kernel("matmul_0", 300, util={"M": 0.9}),
               _kernel("matmul_1", 100, launch=80), _kernel("add_0", 100, util={"V": 0.1})]
    rep = {**REPORT, "kernels": kernels}
    assert bound_shares(rep) == [("cube", 0.8), ("launch", 0.1), ("latency", 0.1)]
    assert by_kind(rep) == [("matmul", 3, 900.0), ("add", 1, 100.0)]
    rows = grouped(rep)
    assert [(r["name"], r["launches"], r["cycles"]) for r in rows] == [("matmul_0", 2, 800.0), ("matmul_1", 1, 100.0), ("add_0", 1, 100.0)]
    assert kernel_kind("matmul_epilogue_12") == "matmul_epilogue" and kernel_kind("img2col") == "img2col"
    lines = headline({**rep, "workload": {"batch": 2, "tokens": 64}})
    assert lines[0] == "latency 1.00 µs: total 1,000 cycles at 1.00 GHz on t"
    assert lines[1] == "throughput 2,000,000 inferences/s (batch 2), 64,000,000 tokens/s"
    assert lines[2] == "bound by cube 80 % of the time; then launch 10 %, latency 10 %"
    assert lines[3] == "4 launches of 3 kernels; launch overhead 8.0 % of the time"


@pytest.fixture(scope="module")
def llama_report(tmp_path_factory) -> Path:
    rep = tmp_path_factory.mktemp("headline") / "r.json"
    r = run_cli("run", LLAMA, "--timing-only", "--report", rep)
    assert r.exit_code == 0, r.output
    return rep


@pytest.mark.parametrize("width", [80, 160])
def test_report_reads_at_80_and_160_columns(llama_report: Path, width: int) -> None:
    r = CliRunner().invoke(main, ["report", str(llama_report)], env={"COLUMNS": str(width)}, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(line) for line in lines) <= width
    data = json.loads(llama_report.read_text())
    assert lines[0].startswith("latency ") and lines[1].startswith("throughput ") and "tokens/s" in lines[1]
    assert lines[2].startswith("bound by ") and "launch overhead" in lines[3]
    assert "…" not in r.output  # no name cut short
    words = r.output.split()
    for row in grouped(data)[:25]:  # every kernel row whole, with its launch count
        assert row["name"] in words
    assert "flash_attention" in words and "time by kind" in r.output
    header = next(line for line in lines if line.split()[:2] == ["kernel", "n"])
    assert ("L2 hit" in header) == (width >= 100)  # narrow: fewer columns, names kept whole


def test_launches_carry_their_onnx_nodes(llama_report: Path) -> None:
    """Each launch names the ONNX node(s) it computes (a reused kernel too: layer 1's launch of the
    kernel lowered for layer 0 names layer 1's nodes); the grouped row lists both; from 140
    columns the kernel table shows them."""
    data = json.loads(llama_report.read_text())
    transposes = [k["node"] for k in data["kernels"] if k["name"] == "transpose_0"]
    assert transposes == ["/lm/model/layers.0/self_attn/Transpose", "/lm/model/layers.1/self_attn/Transpose"]
    # the FFN's first kernel (ffn_fused or ffn_up, as templates/ffn.py choose_plan picks)
    ffn = next(r for r in grouped(data) if r["name"] in ("ffn_fused_0", "ffn_up_0"))
    assert len(ffn["nodes"]) == 2 and all("mlp/gate_proj/MatMul" in n and "mlp/down_proj/MatMul" in n for n in ffn["nodes"])
    wide = CliRunner().invoke(main, ["report", str(llama_report)], env={"COLUMNS": "160"}).output
    assert "ONNX nodes" in wide and "layers.0/self_attn/Transpose" in wide
    assert "ONNX nodes" not in CliRunner().invoke(main, ["report", str(llama_report)], env={"COLUMNS": "100"}).output
