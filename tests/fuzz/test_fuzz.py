"""A fixed sample of every fuzzer (derandomized, so CI sees the same cases each run): each case
must end in success or a clean one-line error, within the time and memory caps.
benchmarks/fuzz.py runs many more and prints the outcome table."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from . import fuzzers
from .harness import BAD_KINDS, run_case

# cases per fuzzer in CI (the ONNX importer has the largest input space)
SAMPLE = {"onnx": 100, "ir": 80, "toml": 40, "cli": 60, "tiling": 40}


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_fuzz_sample(name: str) -> None:
    strategy = fuzzers()[name]()

    @settings(max_examples=SAMPLE[name], derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def case_is_handled(case) -> None:
        outcome = run_case(case, timeout=30, mem_mb=2048)
        assert outcome.kind not in BAD_KINDS, f"{outcome.kind} ({outcome.seconds:.1f} s, {outcome.rss_mb:.0f} MB): {outcome.message}\n  case: {case.describe()}"

    case_is_handled()
