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


# In a fresh interpreter (hypothesis cold, as in a runner forked from a Dask worker): the cases of
# each fuzzer's shard 0, hashed, drawn in a forked child before and after warm_hypothesis().
_SAME_CASES = r"""
import hashlib, json, os, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from fuzz import warm_cases  # tests/fuzz before benchmarks/fuzz.py
import fuzz_campaign as fc
warm_cases()

def digest(name):
    r, w = os.pipe()
    if os.fork() == 0:
        h, n = hashlib.sha256(), [0]
        def each(case):
            n[0] += 1
            h.update(repr((case.tool, case.argv, case.note)).encode())
            for k, v in sorted(case.files.items()):
                h.update(k.encode() + (v if isinstance(v, bytes) else b"<written>"))
        fc.shard_cases(name, fc.shard_seed(0, name, 0), 20, each)
        os.write(w, f"{n[0]} {h.hexdigest()}".encode())
        os._exit(0)
    os.close(w)
    out = os.read(r, 200).decode()
    os.wait()
    return out

cold = {n: digest(n) for n in fc.FUZZERS}
fc.warm_hypothesis()
print(json.dumps([cold, {n: digest(n) for n in fc.FUZZERS}]))
"""


@pytest.mark.sampled
def test_warm_hypothesis_keeps_the_cases() -> None:
    # the campaign warms hypothesis once in the process that forks the shard runners
    # (fuzz_campaign.warm_hypothesis): a shard must still draw exactly the cases it drew cold
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _SAME_CASES, str(ROOT / "tests"), str(ROOT / "benchmarks")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    cold, warm = json.loads(done.stdout.splitlines()[-1])
    assert all(v.startswith("20 ") for v in cold.values()), cold
    assert cold == warm
