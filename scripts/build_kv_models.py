"""Build the small KV-cache decoder models of tests/data/kv/NAME with their reference generation.

    /work/.venv-corpus/bin/python scripts/build_kv_models.py [OUT=tests/data/kv] [--only NAME]

(tests/data/kv/, not tests/data/: the corpus tests run every tests/data/NAME/model.onnx as it is,
and these need `generate`'s feeding.)

Needs torch + transformers (the corpus venv, ../shared/corpus/requirements.txt); the product and
its tests never do. Follows ../shared/corpus/build_corpus.py's recipe (seeded transformers init,
eager attention, its `scrub`), with the KV cache in the graph:

* dynamic-cache form (`<family>`, TorchScript exporter; `llama_dynamo`, the dynamo
  exporter): inputs `input_ids` [batch, seq] int64, `attention_mask` [batch, past+seq] int64,
  `past_key.L` / `past_value.L` [batch, kv_heads, past, head_dim] float32; outputs `logits`
  [batch, seq, vocab] and `present_key.L` / `present_value.L` [batch, kv_heads, past+seq,
  head_dim]. One model serves the prefill (past = 0) and every decode step (seq = 1).
* static-cache form (`llama_static`, TorchScript): transformers' StaticCache, inputs
  `input_ids` [1, 1], `cache_position` [1] and the cache at a fixed 16 positions, updated in
  place (ScatterElements); every axis static. `ascendir generate` refuses it and names the axis it
  needs free (no reference data: nothing to compare).

reference.npz holds onnxruntime's step-by-step greedy generation: `input:input_ids` (the prompt),
`generated_ids` [batch, new_tokens] int64, `final_logits` [batch, vocab] (the logits of the last
step, which picked the last generated token).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, "/work/shared/corpus")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import build_corpus as bc  # noqa: E402
import torch  # noqa: E402

PROMPT, NEW, BATCH = 6, 4, 2
CONFIGS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", 401,
              dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                   rms_norm_eps=1e-5, tie_word_embeddings=False)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", 402,
              dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                   rms_norm_eps=1e-6, tie_word_embeddings=False)),
    "mistral": ("MistralConfig", "MistralForCausalLM", 403,
                dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=256,
                     rms_norm_eps=1e-6, sliding_window=None, tie_word_embeddings=False)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", 404,
             dict(vocab_size=256, n_positions=256, n_embd=64, n_layer=2, n_head=4,
                  activation_function="gelu_new", layer_norm_epsilon=1e-5)),
}


def make_lm(family):
    import transformers
    cfg_name, cls_name, seed, kw = CONFIGS[family]
    cfg = getattr(transformers, cfg_name)(use_cache=True, **kw)
    torch.manual_seed(seed)
    lm = getattr(transformers, cls_name)._from_config(cfg, attn_implementation="eager").eval()
    return lm, cfg, seed


def kv_shape(cfg):
    heads = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layer
    return layers, kv, hidden // heads


class DynamicKV(torch.nn.Module):
    """(input_ids, attention_mask, past_key.0, past_value.0, ...) -> (logits, present_key.0, ...)."""

    def __init__(self, lm, layers):
        super().__init__()
        self.lm, self.layers = lm, layers

    def forward(self, input_ids, attention_mask, *past):
        from transformers import DynamicCache
        cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(self.layers)],
                             config=self.lm.config)
        past_len = past[0].shape[2]
        position_ids = (torch.arange(input_ids.shape[1]) + past_len).unsqueeze(0).expand(input_ids.shape[0], -1)
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      past_key_values=cache, use_cache=True, return_dict=True)
        pkv = out.past_key_values
        flat = []
        for i in range(self.layers):
            layer = pkv.layers[i]
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def names(layers):
    ins = ["input_ids", "attention_mask"] + [f"past_{w}.{i}" for i in range(layers) for w in ("key", "value")]
    outs = ["logits"] + [f"present_{w}.{i}" for i in range(layers) for w in ("key", "value")]
    return ins, outs


def export_dynamic(family, path: Path, exporter: str):
    lm, cfg, seed = make_lm(family)
    layers, kv, hd = kv_shape(cfg)
    mod = DynamicKV(lm, layers).eval()
    ins, outs = names(layers)
    rng = np.random.default_rng(seed)
    b, s, p = 2, 3, 5  # none of them 0 or 1: the trace keeps no special case
    ids = torch.from_numpy(rng.integers(1, cfg.vocab_size, (b, s)))
    mask = torch.ones((b, p + s), dtype=torch.int64)
    past = [torch.from_numpy(rng.standard_normal((b, kv, p, hd)).astype(np.float32)) for _ in range(2 * layers)]
    args = (ids, mask, *past)
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"}, "logits": {0: "batch", 1: "seq"}}
    for n in ins[2:]:
        dyn[n] = {0: "batch", 2: "past"}
    for n in outs[1:]:
        dyn[n] = {0: "batch", 2: "total"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(mod, args, str(path), input_names=ins, output_names=outs, opset_version=17,
                              dynamic_axes=dyn, dynamo=False, do_constant_folding=True)
        else:
            B = S = P = T = torch.export.Dim.DYNAMIC
            shapes = {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: T},
                      "past": tuple({0: B, 2: P} for _ in past)}
            with bc.quiet():
                torch.onnx.export(mod, args, str(path), input_names=ins, output_names=outs, opset_version=18,
                                  dynamic_shapes=shapes, dynamo=True, external_data=False, optimize=True, verbose=False)
    return layers, kv, hd, cfg.vocab_size, seed


STATIC_LEN = 16


class StaticKV(torch.nn.Module):
    """transformers' StaticCache form: (input_ids, cache_position, past_key.0, ...) with every
    cache tensor [batch, kv_heads, STATIC_LEN, head_dim], written in place (index_copy_ ->
    ScatterElements); -> (logits, present_key.0, ...), the same fixed shapes."""

    def __init__(self, lm, kv, hd):
        super().__init__()
        self.lm, self.kv, self.hd = lm, kv, hd

    def forward(self, input_ids, cache_position, *past):
        from transformers import StaticCache
        cache = StaticCache(config=self.lm.config, max_cache_len=STATIC_LEN)
        cache.early_initialization(input_ids.shape[0], self.kv, self.hd, torch.float32, torch.device("cpu"))
        for i, layer in enumerate(cache.layers):
            layer.keys, layer.values = past[2 * i].clone(), past[2 * i + 1].clone()
        out = self.lm(input_ids=input_ids, cache_position=cache_position, position_ids=cache_position.unsqueeze(0),
                      past_key_values=cache, use_cache=True, return_dict=True)
        flat = []
        for layer in cache.layers:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def export_static(family, path: Path):
    lm, cfg, seed = make_lm(family)
    layers, kv, hd = kv_shape(cfg)
    ins, outs = names(layers)
    ins[1] = "cache_position"
    args = (torch.ones((1, 1), dtype=torch.int64), torch.tensor([5]),
            *[torch.zeros(1, kv, STATIC_LEN, hd) for _ in range(2 * layers)])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(StaticKV(lm, kv, hd).eval(), args, str(path), input_names=ins, output_names=outs,
                          opset_version=17, dynamo=False, do_constant_folding=True)


def finish(path: Path):
    import onnx
    m = onnx.load(str(path))
    bc.scrub(m)
    assert not bc.has_path(m)
    onnx.save(m, str(path))


def generate_ort(path: Path, prompt: np.ndarray, new: int, layers: int, kv: int, hd: int):
    """Greedy step-by-step generation with onnxruntime: the reference of `ascendir generate`."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    b = prompt.shape[0]
    past = {f"past_{w}.{i}": np.zeros((b, kv, 0, hd), np.float32) for i in range(layers) for w in ("key", "value")}
    ids, total, out = prompt, 0, []
    for _ in range(new):
        total += ids.shape[1]
        feeds = {"input_ids": ids, "attention_mask": np.ones((b, total), np.int64), **past}
        res = sess.run(None, feeds)
        logits = res[0][:, -1]
        nxt = logits.argmax(-1).astype(np.int64)
        out.append(nxt)
        past = {f"past_{w}.{i}": res[1 + 2 * i + j] for i in range(layers) for j, w in enumerate(("key", "value"))}
        ids = nxt[:, None]
    return np.stack(out, 1), logits


def build(name, family, exporter, out: Path):
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / "model.onnx"
    layers, kv, hd, vocab, seed = export_dynamic(family, path, exporter)
    finish(path)
    rng = np.random.default_rng(seed + 1)
    prompt = rng.integers(1, vocab, (BATCH, PROMPT)).astype(np.int64)
    gen, logits = generate_ort(path, prompt, NEW, layers, kv, hd)
    np.savez(d / "reference.npz", **{"input:input_ids": prompt, "generated_ids": gen, "final_logits": logits})
    print(name, path.stat().st_size, gen.tolist())


MODELS = {
    "llama": ("llama", "torchscript"),
    "qwen2": ("qwen2", "torchscript"),
    "mistral": ("mistral", "torchscript"),
    "gpt2": ("gpt2", "torchscript"),
    "llama_dynamo": ("llama", "dynamo"),
}

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = Path(args[0]) if args else Path("tests/data/kv")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if only in (None, "llama_static"):  # no reference: generate refuses it (its cache axis is static)
        (out / "llama_static").mkdir(parents=True, exist_ok=True)
        export_static("llama", out / "llama_static" / "model.onnx")
        finish(out / "llama_static" / "model.onnx")
        print("llama_static", (out / "llama_static" / "model.onnx").stat().st_size)
    for name, (fam, exp) in MODELS.items():
        if only and name != only:
            continue
        try:
            build(name, fam, exp, out)
        except Exception as e:  # say which exporter/form fails and why, keep going
            print(f"{name}: FAILED: {type(e).__name__}: {bc.sanitize(str(e))[:400]}")
