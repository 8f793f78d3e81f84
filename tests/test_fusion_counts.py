"""What -O2 finds in each small corpus model, for the kinds of fuse-ffn, fuse-conv-activation and
fuse-elementwise, so a matcher that silently stops matching an exporter's form fails here; every
pass is checked as --verify-numerics does (the nn module run before and after it on the model's
reference inputs; the lowered numerics are test_models_e2e's)."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

from ascendir.dialects import nn
from ascendir.driver import parse_pipeline, run_passes
from ascendir.frontends.onnx import import_onnx

DATA = Path(__file__).parent / "data"
KINDS = ("ffn", "conv_activation", "elementwise")
EXPECTED = {
    # RoPE: x*cos + rotate_half(x)*sin for q and k of each layer
    "llama_small": {"ffn": 2, "elementwise": 4},
    "llama_small_dynamo": {"ffn": 2, "elementwise": 4},
    # the MLP behind Gemm-with-Reshape (Conv1D export)
    "gpt2_small": {"ffn": 2},
    "bert_small": {"ffn": 2, "elementwise": 1},
    "vit_small": {"ffn": 2},
    "mlp_small": {"ffn": 1},
    # the gathered-weight experts, and act * up inside them: the ffn template declines this form,
    # so fuse-ffn gives its body the regions it lowers op by op with (split_projections)
    "mixtral_moe_block_small": {"ffn": 1, "elementwise": 1},
    # the same, plus the shared expert's SwiGLU (a plain ffn); the routers' elementwise chains
    # (DeepSeek-V3's group-limited router is one moe_gating region: the elementwise chain left is
    # the experts' index fix, twice in the dynamo export)
    "qwen2_moe_block_small": {"ffn": 2, "elementwise": 2},
    "qwen2_moe_block_small_dynamo": {"ffn": 2, "elementwise": 3},  # fuse-moe-experts drops the 2nd expert-id chain
    "deepseek_v3_moe_block_small": {"ffn": 2, "elementwise": 1},
    "deepseek_v3_moe_block_small_dynamo": {"ffn": 2, "elementwise": 2},
    # conv + ReLU / ReLU6 after fold-batchnorm; residual add + ReLU
    "resnet_small": {"conv_activation": 5, "elementwise": 4},
    "mobilenet_block_small": {"conv_activation": 4},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_o2_fusions_found_and_verified(name: str) -> None:
    module, weights = import_onnx(DATA / name / "model.onnx")
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
    run_passes(module, parse_pipeline(None, "O2"), weights, inputs)
    found = collections.Counter(op.kind.data for op in module.walk() if isinstance(op, nn.FusedOp))
    assert {k: found[k] for k in KINDS if found[k]} == EXPECTED[name]
