#!/usr/bin/env python3
"""Build the small MoE test models of tests/data (Qwen2-MoE and DeepSeek-V3 MoE blocks).

    /work/.venv-corpus/bin/python scripts/build_moe_models.py OUT [--corpus DIR]

Uses the corpus tooling (../shared/corpus/build_corpus.py: export, scrub, onnx checks,
onnxruntime vs torch on two input sets, reference.npz) with transformers configs and seeded
random weights. Each block is exported with both torch exporters; one that fails is reported
with its reason and left out. Needs torch + transformers (the corpus venv); the product and
its tests never do.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def _block(bc, spec, cls_name, cfg_kwargs, tokens, hidden, exporter, block_of):
    import torch
    import transformers
    cfg = getattr(transformers, cls_name.replace("ForCausalLM", "Config"))(use_cache=False, **cfg_kwargs)
    torch.manual_seed(spec.seed)
    lm = getattr(transformers, cls_name)._from_config(
        cfg, attn_implementation="eager", experts_implementation="batched_mm").eval()
    block = block_of(lm)
    with torch.no_grad():  # non-zero router biases so that a dropped bias shows in the outputs
        for name, p in block.named_buffers():
            if "correction_bias" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(spec.seed)) * 0.1)
    rng = np.random.default_rng(spec.seed)
    return bc.Built(
        module=bc.MoEBlockOnly(block).eval(),
        inputs={"hidden_states": rng.standard_normal((1, tokens, hidden)).astype(np.float32)},
        alt_inputs={"hidden_states": rng.standard_normal((1, tokens, hidden)).astype(np.float32)},
        output_names=["moe_output"], exporter=exporter, opset=18 if exporter == "dynamo" else 17,
        source={"kind": "transformers", "library": f"transformers {bc.hf_version()}", "class": cls_name,
                "config": cfg_kwargs, "experts_implementation": "batched_mm",
                "weights": f"random (transformers init), torch.manual_seed({spec.seed})",
                "wrapper": "MoEBlockOnly: hidden_states -> MoE output", "moe_export_note": bc.MOE_EXPORT_NOTE,
                "torch_params": bc.count_torch_params(block)},
    )


QWEN2_MOE = dict(vocab_size=256, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                 shared_expert_intermediate_size=128, num_experts=16, num_experts_per_tok=4,
                 norm_topk_prob=False, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                 max_position_embeddings=256, decoder_sparse_step=1, mlp_only_layers=[])
# DeepSeek-V3's routing at small scale: sigmoid scores + correction bias, 4 groups of which the
# best 2 (by the sum of each group's top-2) are kept, top-4 of 16 fine-grained experts,
# normalised weights times routed_scaling_factor, one shared expert.
DEEPSEEK_V3 = dict(vocab_size=256, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                   n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2, n_shared_experts=1,
                   routed_scaling_factor=2.5, norm_topk_prob=True, first_k_dense_replace=0,
                   num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
                   q_lora_rank=None, kv_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16,
                   v_head_dim=32, max_position_embeddings=256)

MODELS = {
    "qwen2_moe_block_small": ("Qwen2MoeForCausalLM", QWEN2_MOE, 411,
                              "A single Qwen2MoeSparseMoeBlock (softmax top-4 of 16 experts, un-normalised, "
                              "sigmoid-gated shared expert), 64 tokens x hidden 128"),
    "deepseek_v3_moe_block_small": ("DeepseekV3ForCausalLM", DEEPSEEK_V3, 421,
                                    "A single DeepseekV3MoE (sigmoid + correction bias, group-limited top-4 of 16 "
                                    "experts in 4 groups keep 2, normalised x 2.5, one shared expert), "
                                    "64 tokens x hidden 128"),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "corpus")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    sys.path.insert(0, str(a.corpus))
    import build_corpus as bc
    results = {}
    for name, (cls_name, cfg, seed, desc) in MODELS.items():
        if a.only and name not in a.only.split(","):
            continue
        # dynamo writes opset-18 nodes (Split num_outputs): exported at opset 18, as llama_small_dynamo
        for exporter, suffix in (("torchscript", ""), ("dynamo", "_dynamo")):
            spec = bc.Spec(name + suffix, "small", "moe", seed, desc, None)
            spec.build = lambda s, c=cls_name, k=cfg, e=exporter: _block(
                bc, s, c, k, 64, 128, e, lambda lm: lm.model.layers[0].mlp)
            entry, failure = bc.build_one(spec, a.out, rel_tol=1e-4)
            results[spec.name] = entry or failure
    (a.out / "moe_manifest.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
