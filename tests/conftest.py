"""The share of heavy cases a whole-suite run takes (`sampled` marker).

The suite must finish in 15 minutes on CI's 2 cores; its heavy cases (whole models simulated
with numerics, generation runs, property sweeps) alone take twice that on a 2 GHz machine. A run
of the whole suite (`scripts/test.sh`, `.ci/run`: pytest given no paths) therefore takes 1 in
SHARE of the `sampled` cases, chosen by a hash of the case's id and the commit (`git rev-parse
HEAD`), so the same commit always runs the same cases and successive commits cover them all.
Naming a file or a test runs every case it holds; `ASCENDIR_SAMPLE=all` runs every case of the
whole suite, `ASCENDIR_SAMPLE=<text>` samples with that text instead of the commit, and `-m
sampled` runs only the sampled cases, all of them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

SHARE = 5  # a whole-suite run takes 1 in SHARE of the sampled cases


@functools.cache
def _seed(root: Path) -> str:
    """ASCENDIR_SAMPLE, else the checkout's commit, else "" (no git: still one fixed sample);
    asked once per process (the header and the collection both need it)."""
    env = os.environ.get("ASCENDIR_SAMPLE")
    if env:
        return env
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def picked(nodeid: str, seed: str) -> bool:
    """Whether a whole-suite run sampled by `seed` takes the sampled case `nodeid`."""
    return int(hashlib.sha256(f"{seed}:{nodeid}".encode()).hexdigest()[:8], 16) % SHARE == 0


def _whole_suite(config: pytest.Config) -> bool:
    return config.args_source == pytest.Config.ArgsSource.TESTPATHS and "sampled" not in (config.option.markexpr or "")


def pytest_report_header(config: pytest.Config) -> str | None:
    if not _whole_suite(config):
        return None
    seed = _seed(config.rootpath)
    if seed == "all":
        return "sampled cases: all (ASCENDIR_SAMPLE=all)"
    return f"sampled cases: 1 in {SHARE}, chosen by {seed[:12] or 'no commit'} (ASCENDIR_SAMPLE=all runs every one)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _whole_suite(config):
        return
    seed = _seed(config.rootpath)
    if seed == "all":
        return
    keep, drop = [], []
    for item in items:
        (keep if item.get_closest_marker("sampled") is None or picked(item.nodeid, seed) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
