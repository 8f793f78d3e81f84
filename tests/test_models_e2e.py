"""Corpus models end to end: ONNX → nn → fusion → ascend → interpreter, against the
onnxruntime reference outputs shipped with each model (fp32: rtol 1e-3, atol 1e-4)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ascendir.driver import compile_model
from ascendir.hardware import load_target
from ascendir.interpreter import simulate

DATA = Path(__file__).parent / "data"
CORPUS = Path(os.environ.get("ASCENDIR_CORPUS", "/work/corpus"))
# Transformers only in the corpus (too large for tests/data): O0 and O2 through every template.
CORPUS_ONLY = ["mixtral_small", "llama_realistic"]
MODELS = [
    "mlp_small", "llama_small", "llama_small_dynamo", "bert_small", "gpt2_small", "vit_small",
    "resnet_small", "mobilenet_block_small", "mixtral_moe_block_small",
    # MoE blocks of scripts/build_moe_models.py, both exporters: Qwen2-MoE (shared expert),
    # DeepSeek-V3 (sigmoid, group-limited routing, normalised top-k, shared expert)
    "qwen2_moe_block_small", "qwen2_moe_block_small_dynamo",
    "deepseek_v3_moe_block_small", "deepseek_v3_moe_block_small_dynamo",
]


def _reference(name: str, root: Path = DATA) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(root / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        outputs = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    return inputs, outputs


@pytest.mark.parametrize("opt_level", ["O0", "O2"])
@pytest.mark.parametrize("name", MODELS)
def test_model_matches_onnxruntime(name: str, opt_level: str, root: Path = DATA) -> None:
    module, weights = compile_model(root / name / "model.onnx", "ascend910b2", opt_level=opt_level)
    inputs, expected = _reference(name, root)
    result = simulate(module, weights, inputs, load_target("ascend910b2"))
    assert set(result.outputs) == set(expected)
    for k, want in expected.items():
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-3, atol=1e-4, err_msg=f"{name} output {k}")
    report = result.report
    assert report["total_cycles"] > 0
    assert all(k["cycles"] > 0 for k in report["kernels"])


@pytest.mark.slow
@pytest.mark.parametrize("opt_level", ["O0", "O2"])
@pytest.mark.parametrize("name", CORPUS_ONLY)
def test_corpus_model_matches_onnxruntime(name: str, opt_level: str) -> None:
    if not (CORPUS / name / "model.onnx").exists():
        pytest.skip(f"{name} not in {CORPUS}")
    test_model_matches_onnxruntime(name, opt_level, CORPUS)


def test_fusion_reduces_cycles_on_mlp() -> None:
    inputs, _ = _reference("mlp_small")
    hw = load_target("ascend910b2")
    cycles = {}
    for level in ("O0", "O2"):
        module, weights = compile_model(DATA / "mlp_small" / "model.onnx", hw.name, opt_level=level)
        cycles[level] = simulate(module, weights, inputs, hw, timing_only=True).report["total_cycles"]
    assert cycles["O2"] < cycles["O0"], cycles
