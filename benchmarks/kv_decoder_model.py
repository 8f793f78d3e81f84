"""A LLaMA-2-7B- or Qwen2-7B-shaped decoder with its KV cache as graph inputs and outputs, built
with onnx.helper (no torch), every weight external data in one sparse file (no disk blocks):
for `ascendir generate --shape-only` figures (benchmarks/serve.py).

Signature (frontends/onnx/kv_cache.py): input_ids [batch, seq] int64, past_key.L /
past_value.L [batch, kv_heads, past, 128]; outputs logits [batch, seq, vocab] and
present_key.L / present_value.L [batch, kv_heads, past + seq, 128] (Concat of past and new along
axis 2, as both exporters write it). GQA repeats each K/V head n_heads / kv_heads times
(Unsqueeze, Expand, Reshape: transformers' repeat_kv). Left out as in llama7b_shape_only.py, and
said so: RoPE (elementwise on Q/K) and the causal mask (an Add over [seq, past + seq] scores; a
decode step of one token needs none). Neither changes a weight, a matmul shape or the cache
traffic.

Shapes (from the models' config.json on the Hugging Face hub):
* llama2-7b: hidden 4096, 32 heads, 32 KV heads, MLP 11008, vocab 32000, 32 layers.
* qwen2-7b: hidden 3584, 28 heads, 4 KV heads, MLP 18944, vocab 152064, 28 layers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

SHAPES = {
    "llama2-7b": dict(hidden=4096, heads=32, kv_heads=32, mlp=11008, vocab=32000, layers=32),
    "qwen2-7b": dict(hidden=3584, heads=28, kv_heads=4, mlp=18944, vocab=152064, layers=28),
}
HEAD_DIM = 128
ALIGN = 4096


def build(folder: Path, name: str, layers: int | None = None, dtype: str = "float16") -> Path:
    """Write model.onnx + weights.bin (sparse) into `folder`; returns the model's path."""
    s = SHAPES[name]
    H, NH, KV, MLP, V = s["hidden"], s["heads"], s["kv_heads"], s["mlp"], s["vocab"]
    L = layers if layers is not None else s["layers"]
    elem = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.FLOAT
    itemsize = 2 if dtype == "float16" else 4
    nodes, inits, ext, offset = [], [], [], [0]

    def weight(n: str, dims: tuple[int, ...]) -> str:
        t = TensorProto(name=n, data_type=elem, dims=list(dims), data_location=TensorProto.EXTERNAL)
        nbytes = int(np.prod(dims)) * itemsize
        for k, v in (("location", "weights.bin"), ("offset", str(offset[0])), ("length", str(nbytes))):
            t.external_data.add(key=k, value=v)
        offset[0] += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        ext.append(t)
        return n

    def node(op: str, ins: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def ints(n: str, values: list[int]) -> str:
        inits.append(helper.make_tensor(n, TensorProto.INT64, [len(values)], values))
        return n

    inits.append(helper.make_tensor("eps", elem, [], [1e-5]))
    inits.append(helper.make_tensor("scale", elem, [], [1.0 / np.sqrt(HEAD_DIM)]))
    q_shape, kv_shape = ints("q_shape", [0, 0, NH, HEAD_DIM]), ints("kv_shape", [0, 0, KV, HEAD_DIM])
    merged, rep = ints("merged_shape", [0, 0, H]), ints("rep_shape", [1, 1, NH // KV, 1, 1])
    rep_merged, ax2 = ints("rep_merged", [0, NH, -1, HEAD_DIM]), ints("axis2", [2])

    def rms(x: str, p: str) -> str:
        sq = node("Mul", [x, x], f"{p}.sq")
        std = node("Sqrt", [node("Add", [node("ReduceMean", [sq], f"{p}.mean", axes=[-1], keepdims=1), "eps"], f"{p}.ve")], f"{p}.std")
        return node("Mul", [node("Div", [x, std], f"{p}.normed"), weight(f"{p}.weight", (H,))], f"{p}.out")

    def linear(x: str, p: str, k: int, n: int) -> str:
        return node("MatMul", [x, weight(f"{p}.weight", (k, n))], f"{p}.out")

    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    outs = []
    x = node("Gather", [weight("embed_tokens.weight", (V, H)), "input_ids"], "embed", axis=0)
    for i in range(L):
        p = f"layers.{i}"
        h = rms(x, f"{p}.input_norm")
        q = node("Transpose", [node("Reshape", [linear(h, f"{p}.q_proj", H, NH * HEAD_DIM), q_shape], f"{p}.q4")], f"{p}.q", perm=[0, 2, 1, 3])
        cache = []
        for w, proj in (("key", "k_proj"), ("value", "v_proj")):
            new = node("Transpose", [node("Reshape", [linear(h, f"{p}.{proj}", H, KV * HEAD_DIM), kv_shape], f"{p}.{w}4")],
                       f"{p}.{w}_new", perm=[0, 2, 1, 3])
            ins.append(helper.make_tensor_value_info(f"past_{w}.{i}", elem, ["batch", KV, "past", HEAD_DIM]))
            full = node("Concat", [f"past_{w}.{i}", new], f"present_{w}.{i}", axis=2)
            outs.append(helper.make_tensor_value_info(full, elem, ["batch", KV, "total", HEAD_DIM]))
            if NH != KV:  # repeat_kv: [b, kv, L, d] -> [b, kv, rep, L, d] -> [b, heads, L, d]
                full = node("Reshape", [node("Expand", [node("Unsqueeze", [full, ax2], f"{p}.{w}_u"), rep], f"{p}.{w}_x"), rep_merged], f"{p}.{w}_rep")
            cache.append(full)
        k, v = cache
        kt = node("Transpose", [k], f"{p}.kt", perm=[0, 1, 3, 2])
        s = node("Mul", [node("MatMul", [q, kt], f"{p}.qk"), "scale"], f"{p}.scaled")
        a = node("MatMul", [node("Softmax", [s], f"{p}.probs", axis=-1), v], f"{p}.ctx")
        a = node("Reshape", [node("Transpose", [a], f"{p}.ctx_t", perm=[0, 2, 1, 3]), merged], f"{p}.ctx_merged")
        x = node("Add", [x, linear(a, f"{p}.o_proj", NH * HEAD_DIM, H)], f"{p}.attn_residual")
        h = rms(x, f"{p}.post_norm")
        g = linear(h, f"{p}.gate_proj", H, MLP)
        m = node("Mul", [node("Mul", [g, node("Sigmoid", [g], f"{p}.sig")], f"{p}.silu"), linear(h, f"{p}.up_proj", H, MLP)], f"{p}.swiglu")
        x = node("Add", [x, linear(m, f"{p}.down_proj", MLP, H)], f"{p}.mlp_residual")
    logits = node("MatMul", [rms(x, "norm"), weight("lm_head.weight", (H, V))], "logits")
    outs.insert(0, helper.make_tensor_value_info(logits, elem, ["batch", "seq", V]))
    graph = helper.make_graph(nodes, f"{name}_kv", ins, outs, inits + ext)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save(model, str(path))
    with open(folder / "weights.bin", "wb") as f:
        f.truncate(offset[0])
    return path
