"""Model families as users bring them (issue 19): tiny OCR (DBNet, CRNN), detection (YOLO),
segmentation (UNet, DeepLab), speech (LSTM VAD, Whisper encoder), vision (EfficientNet,
ResNet-50, Swin, ConvNeXt) and text (DeBERTa-v2, BLOOM, T5 encoder) models of
scripts/build_family_models.py, through import -> -O2 -> ascend -> interpreter against their
onnxruntime references (fp32: rtol 1e-3, atol 1e-4). -O0 runs every one too, marked slow.

Not here: EfficientNet's TorchScript export (it writes the logits' batch dim as a symbol, which
the corpus checks refuse); tests/data/families/manifest.json says how each model was made."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ascendir.driver import compile_model
from ascendir.hardware import load_target
from ascendir.interpreter import simulate

FAMILIES = Path(__file__).parent / "data" / "families"
MODELS = sorted(json.loads((FAMILIES / "manifest.json").read_text()))


def _check(name: str, opt_level: str) -> None:
    module, weights = compile_model(FAMILIES / name / "model.onnx", "ascend910b2", opt_level=opt_level)
    with np.load(FAMILIES / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    result = simulate(module, weights, inputs, load_target("ascend910b2"))
    assert set(result.outputs) == set(expected)
    for k, want in expected.items():
        assert np.std(want) > 0, f"{name}: reference output {k} is constant: no test"
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-3, atol=1e-4, err_msg=f"{name} output {k}")
    assert result.report["total_cycles"] > 0


def test_every_family_is_here() -> None:
    families = {n.removesuffix("_dynamo").removesuffix("_small") for n in MODELS}
    assert families == {"bloom", "convnext", "crnn", "dbnet", "deberta", "deeplab", "efficientnet", "lstm_vad",
                        "resnet50", "swin", "t5_encoder", "unet", "whisper_encoder", "yolo"}


@pytest.mark.sampled
@pytest.mark.parametrize("name", MODELS)
def test_family_matches_onnxruntime(name: str) -> None:
    _check(name, "O2")


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_family_matches_onnxruntime_unfused(name: str) -> None:
    _check(name, "O0")
