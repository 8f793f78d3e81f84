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


def warm_cases() -> None:
    """Fill the generators' caches once (the IR seeds, lowered; the chips' TOMLs; the tiny and
    odd-shaped models; the report and zip-bomb files): a process that forks a runner per shard
    calls it first, so no runner makes them again (the IR seeds alone cost ~3 s)."""
    from . import cli_cases, ir_cases, onnx_cases, tiling_cases, toml_cases

    ir_cases.seeds()
    toml_cases.chips()
    toml_cases.tiny_model()
    tiling_cases.odd_matmul()
    cli_cases.report_json()
    cli_cases._bomb()
    for name in onnx_cases.MODELS:
        onnx_cases._model_bytes(name)
