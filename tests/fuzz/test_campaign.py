"""benchmarks/fuzz_campaign.py end to end on a local Dask cluster: shards kept on disk and skipped
when run again, the accumulated table, and no hypothesis warning (a worker's heartbeats drew from
the global `random` while hypothesis drew cases: HypothesisDeprecationWarning "Do not use the
`random` module inside strategies ... from case=toml_cases()"). Marked slow: two Dask clusters
start (about a minute unloaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def campaign(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_campaign.py"), *args], capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.mark.slow
def test_campaign_resumes_and_accumulates(tmp_path: Path) -> None:
    first = campaign("--dir", str(tmp_path), "--fuzzers", "toml", "--cases", "40")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Hypothesis" not in first.stderr, first.stderr[-3000:]  # the workers' stderr comes here
    assert "1 shards of ascendir" in first.stdout and "40 cases accumulated" in first.stdout, first.stdout
    shard = json.loads((tmp_path / "toml" / "000000.json").read_text())
    assert sum(shard["kinds"].values()) == 40 and shard["index"] == 0 and len(shard["code"]) >= 40

    again = campaign("--dir", str(tmp_path), "--fuzzers", "toml", "--cases", "40")
    assert again.returncode == 0 and "0 shards of ascendir" in again.stdout, again.stdout + again.stderr[-2000:]
    table = campaign("--dir", str(tmp_path), "--fuzzers", "toml", "--cases", "40", "--table")
    row = next(line for line in table.stdout.splitlines() if line.startswith("| toml |"))
    assert row.split(" | ")[1] == "40", row
    assert f"toml: {shard['code'][:10]}" in table.stdout
    # a commit the shard's code does not contain: the shard no longer counts
    newer = campaign("--dir", str(tmp_path), "--fuzzers", "toml", "--since", "HEAD", "--table")
    if shard["code"].endswith("+"):  # run on a checkout with local changes: never counted under --since
        assert "0 cases accumulated" in newer.stdout, newer.stdout
    kept = campaign("--dir", str(tmp_path), "--fuzzers", "toml", "--since", "HEAD", "--bad-only", "--table")
    assert "40 cases accumulated" in kept.stdout, kept.stdout  # no bad outcome: it still counts
    other = campaign("--dir", str(tmp_path), "--fuzzers", "toml", "--cases", "40", "--seed", "1")
    assert other.returncode != 0 and "holds a campaign with" in other.stderr, other.stderr[-2000:]
