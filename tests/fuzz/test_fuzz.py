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


@pytest.mark.sampled
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


def test_reached_names_the_parsers_a_case_got_past() -> None:
    # the "past parsing" share of the tables (harness.REACHED): a model that imports reaches the
    # importer's end, bytes that are no model do not; a bad option stops in the command line
    from .harness import Case
    from .toml_cases import tiny_model

    good = run_case(Case("ascendir", ("compile", "m.onnx", "--emit", "nn"), {"m.onnx": tiny_model()}))
    junk = run_case(Case("ascendir", ("compile", "m.onnx", "--emit", "nn"), {"m.onnx": b"junk"}))
    option = run_case(Case("ascendir", ("run", "m.onnx", "--no-such-option"), {"m.onnx": tiny_model()}))
    tiling = run_case(Case("ascendir", ("run", "m.onnx", "--timing-only", "--tiling", "m=16"), {"m.onnx": tiny_model()}))
    ir = run_case(Case("ascendir-opt", ("in.mlir",), {"in.mlir": b"func.func @"}))
    assert (good.kind, junk.kind, option.kind, ir.kind) == ("success", "clean", "clean", "clean")
    assert {"cli", "onnx"} <= good.reached and "onnx" not in junk.reached and "cli" in junk.reached
    assert not option.reached and "ir" not in ir.reached and "tiling" in tiling.reached
