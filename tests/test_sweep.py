"""`ascendir sweep` (api/sweep.py): the grid, rows equal to single `run`s of the same point, the
CSV / JSON table and plot, and the same rows from a local Dask cluster (dask.distributed)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from ascendir.api import sweep as sw
from ascendir.errors import AscendirError
from tests.cli_helpers import assert_clean_error, run_cli

MODEL = Path(__file__).parent / "data" / "mlp_small" / "model.onnx"
POINTS = sw.grid(["ascend910b2", "ascend310p"], [None, "m=16,n=64"], ["fp16"])


def test_grid_axes():
    assert [(p.target, p.tiling) for p in POINTS] == [
        ("ascend910b2", None), ("ascend910b2", "m=16,n=64"), ("ascend310p", None), ("ascend310p", "m=16,n=64")]
    with pytest.raises(AscendirError, match="--dtype lists a value twice"):
        sw.grid(["ascend910b2"], [None], ["fp16", "fp16"])


@pytest.fixture(scope="module")
def local_rows() -> list[dict]:
    return sw.run_sweep(str(MODEL), POINTS)


def test_rows_equal_single_runs(tmp_path: Path, local_rows: list[dict]):
    """Each row is what `ascendir run --timing-only` of that point reports."""
    for p, row in zip(POINTS, local_rows):
        assert not row["error"]
        args = ["run", MODEL, "--timing-only", "--shape-only", "--target", p.target, "--dtype", p.dtype,
                "--report", tmp_path / "r.json"] + (["--tiling", p.tiling] if p.tiling else [])
        assert run_cli(*args).exit_code == 0
        report = json.loads((tmp_path / "r.json").read_text())
        assert row["total_cycles"] == round(report["total_cycles"], 3)
        assert row["launches"] == len(report["kernels"])
    assert local_rows[0]["total_cycles"] != local_rows[2]["total_cycles"]  # two chips, two timings


@pytest.mark.sampled
def test_dask_local_cluster_gives_the_same_rows(local_rows: list[dict]):
    """The points on a local Dask cluster of two worker processes: the same table."""
    pytest.importorskip("distributed")
    rows = sw.run_sweep(str(MODEL), POINTS, scheduler="dask-local", jobs=2)
    assert rows == local_rows


def test_cli_writes_table_and_plot(tmp_path: Path):
    res = run_cli("sweep", MODEL, "--target", "910b2", "--tiling", "m=16,n=64", "--tiling", "m=512,n=512,k=512,l1_depth=4",
                  "--dtype", "fp16", "-o", tmp_path / "t.csv", "--plot", tmp_path / "t.png")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert [r["tiling"] for r in rows] == ["m=16,n=64", "m=512,n=512,k=512,l1_depth=4"]
    assert float(rows[0]["total_cycles"]) > 0 and not rows[0]["error"]
    assert "needs 8388608 bytes of L1" in rows[1]["error"]  # a point that does not fit is a row, not the end
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run_cli("sweep", MODEL, "--dtype", "fp16", "-o", tmp_path / "t.json").exit_code == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["columns"] == list(sw.COLUMNS) and len(doc["rows"]) == 1


def test_cli_bad_input_is_one_line(tmp_path: Path):
    assert_clean_error(run_cli("sweep", MODEL, "--tiling", "m=64,k=1000000"), "bad --tiling", "k=1000000")
    assert_clean_error(run_cli("sweep", tmp_path / "none.onnx"), "none.onnx", "no such file")
    with pytest.raises(AscendirError, match="^sweep: cannot reach the Dask scheduler tcp://127.0.0.1:9: "):
        sw.run_sweep(str(MODEL), POINTS[:1], scheduler="tcp://127.0.0.1:9", connect_timeout=1.0)


@pytest.mark.sampled
def test_tp_axis_equals_run_tp(tmp_path: Path):
    """`sweep --tp 1,2`: the tp=2 row is what `ascendir run --tp 2 --timing-only` reports (the
    same path: driver.lower_tensor_parallel, the ranks on atlas800-a2), collectives included."""
    llama = Path(__file__).parent / "data" / "llama_small" / "model.onnx"
    res = run_cli("sweep", llama, "--tp", "1,2", "-o", tmp_path / "t.json")
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [r["tp"] for r in rows] == [1, 2] and not any(r["error"] for r in rows)
    for r in rows:
        args = ["run", llama, "--timing-only", "--shape-only", "--report", tmp_path / "r.json"] + (["--tp", str(r["tp"])] if r["tp"] > 1 else [])
        assert run_cli(*args).exit_code == 0
        report = json.loads((tmp_path / "r.json").read_text())
        assert r["total_cycles"] == round(report["total_cycles"], 3) and r["launches"] == len(report["kernels"])
    assert rows[0]["total_cycles"] != rows[1]["total_cycles"]
    assert_clean_error(run_cli("sweep", llama, "--tp", "1,x"), "--tp takes degrees like 1,2,4")



@pytest.mark.sampled
def test_topology_equals_run_topology(tmp_path: Path):
    """`sweep --tp 2 --topology FILE`: the row is what `ascendir run --tp 2 --topology FILE
    --timing-only` reports, not the default topology's (the file's links are 50x slower: a test
    fixture, not a machine); a bad --topology is one line before any point runs."""
    llama = Path(__file__).parent / "data" / "llama_small" / "model.onnx"
    shipped = Path(sw.__file__).parents[1] / "hardware" / "topologies" / "atlas800-a2.toml"
    slow = tmp_path / "slow.toml"
    slow.write_text(shipped.read_text().replace('name = "atlas800-a2"', 'name = "slow"')
                    .replace("per_peer_GBps = 56.0", "per_peer_GBps = 1.12").replace("total_GBps = 392.0", "total_GBps = 7.84")
                    .replace("sdma_GBps = 19.3", "sdma_GBps = 0.386"))
    rows = {}
    for topo in (None, str(slow)):
        res = run_cli("sweep", llama, "--tp", "2", "-o", tmp_path / "t.json", *(["--topology", topo] if topo else []))
        assert res.exit_code == 0, res.output
        (rows[topo],) = json.loads((tmp_path / "t.json").read_text())["rows"]
        assert not rows[topo]["error"]
    args = ["run", llama, "--timing-only", "--shape-only", "--tp", "2", "--topology", slow, "--report", tmp_path / "r.json"]
    assert run_cli(*args).exit_code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert rows[str(slow)]["total_cycles"] == round(report["total_cycles"], 3)
    assert rows[str(slow)]["total_cycles"] > rows[None]["total_cycles"]
    assert_clean_error(run_cli("sweep", llama, "--tp", "2", "--topology", "nosuch"), "nosuch")
    assert_clean_error(run_cli("sweep", llama, "--topology", "atlas800-a2"), "--topology joins the devices of --tp points")
    assert_clean_error(run_cli("sweep", llama, "--tp", "2,16", "--topology", "atlas800-a2"), "--tp 16 does not fit topology atlas800-a2")


def test_report_names_a_sweep_table(tmp_path: Path) -> None:
    """`report` on a sweep's JSON table said "no 'target'"; it names the file as a sweep table."""
    table = tmp_path / "t.json"
    table.write_text(sw.table_text([{c: None for c in sw.COLUMNS}], "json"))
    for args in (("report", table), ("report", "--diff", table, table)):
        assert_clean_error(run_cli(*args), "is a table of `ascendir sweep`")
