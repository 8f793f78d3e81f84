"""Fuzzers of ascendir's inputs (issue 23): hypothesis strategies of cases (`onnx_cases`,
`ir_cases`, `toml_cases`, `cli_cases`, `tiling_cases`) and the capped worker that runs and classifies one case
(`harness`). CI runs a sample (test_fuzz.py); benchmarks/fuzz.py runs many and prints the table."""

from __future__ import annotations


def fuzzers() -> dict:
    """Fuzzer name -> a function returning its hypothesis strategy of `harness.Case`s."""
    from .cli_cases import cli_cases
    from .ir_cases import ir_cases
    from .onnx_cases import onnx_cases
    from .tiling_cases import tiling_cases
    from .toml_cases import toml_cases

    return {"onnx": onnx_cases, "ir": ir_cases, "toml": toml_cases, "cli": cli_cases, "tiling": tiling_cases}
