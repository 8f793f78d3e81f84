"""A LLaMA-2-7B-shaped decoder layer on 910B2, fp16 vs weight/activation-quantized forms as
onnxruntime's quantizers write them: cycles, weight bytes, HBM bandwidth use.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/quant.py [--ctx 1024] [--prefill 512] [--write-results]

The layer (onnx.helper, no torch; hidden 4096, 32 heads of 128, SwiGLU 11008): RMSNorm, Q/K/V/O
projections, attention over a KV cache given as inputs (decode: 1 query over `--ctx` cached
positions; prefill: `--prefill` tokens, causal), SwiGLU MLP, residual adds (RoPE and the cache
append left out: elementwise work that changes neither weights nor matmul shapes). The seven
projections come in four forms:

* fp16   MatMul over float16 weights
* W8A8   quantize_static's QDQ: QuantizeLinear / DequantizeLinear of the activation (one fp16
         scale) and DequantizeLinear of an int8 weight (per output channel) around each MatMul;
         ascendir runs it as an int8 x int8 -> int32 cube matmul (s8 mmad, 2x the f16 K step)
* W8A16  com.microsoft MatMulNBits, bits 8, block 128
* W4A16  com.microsoft MatMulNBits, bits 4, block 128
         both run as `nn.weight_quant_matmul` (antiquant, templates/antiquant.py): the weight
         stays int8 / int4 in GM, the AIVs dequantise it chunk by chunk into a GM workspace (L2),
         the AIC multiplies in fp16

Weights are external data in a sparse file: compiled --shape-only, simulated timing-only.
`weight bytes` is what the WeightStore holds for the projections (packed: int4 at half a byte),
i.e. what crosses HBM; `HBM bytes` is GM bytes read - L2 hits + GM bytes written - writes that
stayed in L2 (the run's whole traffic: weights, KV cache, activations, workspaces' first writes);
HBM % is those bytes / time / HBM bandwidth (910B2 TOML).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import results  # noqa: E402  (benchmarks/results.py: --write-results)

H, HEADS, D, MLP = 4096, 32, 128, 11008
BLOCK = 128  # MatMulNBits block along K (onnxruntime's default is 128 for its 4-bit quantizer in GenAI builds)
FORMS = ("fp16", "W8A8", "W8A16", "W4A16")
ALIGN = 4096


class _External:
    """Initializers whose bytes live at increasing offsets of one sparse data file."""

    def __init__(self, location: str):
        self.location, self.offset, self.tensors = location, 0, []

    def add(self, name: str, elem: int, dims: tuple[int, ...], itemsize: float) -> str:
        t = TensorProto(name=name, data_type=elem, dims=list(dims), data_location=TensorProto.EXTERNAL)
        nbytes = int(np.prod(dims) * itemsize)
        for k, v in (("location", self.location), ("offset", str(self.offset)), ("length", str(nbytes))):
            t.external_data.add(key=k, value=v)
        self.offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        self.tensors.append(t)
        return name


def build(folder: Path, form: str, seq: int, ctx: int) -> Path:
    """model.onnx + weights.bin (sparse) of one layer in `form`; `seq` query tokens over `ctx`
    key positions (decode: seq 1; prefill: ctx = seq, causal)."""
    f16 = TensorProto.FLOAT16
    ext = _External("weights.bin")
    nodes, inits = [], []

    def node(op, ins, out, domain=None, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, domain=domain, **attrs))
        return out

    def const(name, value, elem=f16):
        inits.append(helper.make_tensor(name, elem, [], [value]))
        return name

    def ints(name, values):
        inits.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], values))
        return name

    eps, scale = const("eps", 1e-5), const("scale", 1.0 / np.sqrt(D))
    act_scale, act_zp = const("act_scale", 0.05), const("act_zp", 0, TensorProto.INT8)

    def linear(x: str, p: str, k: int, n: int) -> str:
        if form == "fp16":
            return node("MatMul", [x, ext.add(f"{p}.weight", f16, (k, n), 2)], f"{p}.out")
        if form == "W8A8":
            xq = node("QuantizeLinear", [x, act_scale, act_zp], f"{p}.xq")
            xd = node("DequantizeLinear", [xq, act_scale, act_zp], f"{p}.xd")
            w = ext.add(f"{p}.weight_quantized", TensorProto.INT8, (k, n), 1)
            ws = ext.add(f"{p}.weight_scale", f16, (n,), 2)
            wd = node("DequantizeLinear", [w, ws], f"{p}.wd", axis=1)
            return node("MatMul", [xd, wd], f"{p}.out")
        bits = 8 if form == "W8A16" else 4
        nb = k // BLOCK
        b = ext.add(f"{p}.weight_Q{bits}", TensorProto.UINT8, (n, nb, BLOCK * bits // 8), 1)
        s = ext.add(f"{p}.weight_scales", f16, (n * nb,), 2)
        return node("MatMulNBits", [x, b, s], f"{p}.out", domain="com.microsoft", K=k, N=n, bits=bits, block_size=BLOCK)

    def rms(x: str, p: str) -> str:
        w = ext.add(f"{p}.weight", f16, (H,), 2)
        mean = node("ReduceMean", [node("Mul", [x, x], f"{p}.sq"), last], f"{p}.mean", keepdims=1)
        std = node("Sqrt", [node("Add", [mean, eps], f"{p}.var_eps")], f"{p}.std")
        return node("Mul", [node("Div", [x, std], f"{p}.normed"), w], f"{p}.out")

    q_shape, merged, last = ints("q_shape", [1, seq, HEADS, D]), ints("merged", [1, seq, H]), ints("last", [-1])
    x = "hidden"
    h = rms(x, "input_norm")
    q = node("Transpose", [node("Reshape", [linear(h, "q_proj", H, H), q_shape], "q.split")], "q", perm=[0, 2, 1, 3])
    linear(h, "k_proj", H, H)  # the new token's K and V: appended to the cache (left out, see above)
    linear(h, "v_proj", H, H)
    kt = node("Transpose", ["k_cache"], "k_cache_t", perm=[0, 1, 3, 2])
    s = node("Mul", [node("MatMul", [q, kt], "qk"), scale], "scores")
    if seq > 1:
        mask = np.triu(np.full((seq, ctx), -1e4, np.float16), 1)
        inits.append(helper.make_tensor("causal_mask", f16, [seq, ctx], mask.tobytes(), raw=True))
        s = node("Add", [s, "causal_mask"], "masked")
    a = node("MatMul", [node("Softmax", [s], "probs", axis=-1), "v_cache"], "ctx")
    a = node("Reshape", [node("Transpose", [a], "ctx_t", perm=[0, 2, 1, 3]), merged], "ctx_merged")
    x = node("Add", [x, linear(a, "o_proj", H, H)], "attn_residual")
    h = rms(x, "post_norm")
    g = linear(h, "gate_proj", H, MLP)
    m = node("Mul", [node("Mul", [g, node("Sigmoid", [g], "gate_sig")], "silu"), linear(h, "up_proj", H, MLP)], "swiglu")
    out = node("Add", [x, linear(m, "down_proj", MLP, H)], "mlp_residual")
    graph = helper.make_graph(
        nodes, f"llama7b_layer_{form}",
        [helper.make_tensor_value_info("hidden", f16, [1, seq, H]),
         helper.make_tensor_value_info("k_cache", f16, [1, HEADS, ctx, D]),
         helper.make_tensor_value_info("v_cache", f16, [1, HEADS, ctx, D])],
        [helper.make_tensor_value_info(out, f16, [1, seq, H]),
         helper.make_tensor_value_info("k_proj.out", f16, [1, seq, H]),
         helper.make_tensor_value_info("v_proj.out", f16, [1, seq, H])],
        inits + ext.tensors,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    path = folder / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))
    with open(folder / "weights.bin", "wb") as f:
        f.truncate(ext.offset)
    return path


def measure(form: str, seq: int, ctx: int, target_name: str) -> dict:
    from ascendir.driver import compile_model
    from ascendir.dtypes import packed_nbytes
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate

    target = load_target(target_name)
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp), form, seq, ctx)
        module, weights = compile_model(path, target_name, shape_only=True)
        res = simulate(module, weights, {}, target, timing_only=True)
    proj = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    wbytes = sum(packed_nbytes(weights[n].dtype, weights[n].size) for n in weights if n.startswith(proj))
    rep = res.report
    b = rep["bytes"]
    hbm = b["gm_read"] - b.get("l2_hit", 0.0) + b["gm_write"] - b.get("l2_write", 0.0)
    return {"cycles": rep["total_cycles"], "weight_bytes": wbytes, "hbm_bytes": hbm,
            "hbm_pct": 100.0 * hbm / rep["total_seconds"] / rep["ceilings"]["hbm_Bps"], "m_busy": rep["pipe_busy"].get("M", 0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ctx", type=int, default=1024, help="decode: cached positions")
    ap.add_argument("--prefill", type=int, default=512, help="prefill: tokens (0: skip)")
    ap.add_argument("--target", default="ascend910b2")
    results.add_flag(ap)
    args = ap.parse_args()
    cases = [("decode", 1, args.ctx)] + ([("prefill", args.prefill, args.prefill)] if args.prefill else [])
    for phase, seq, ctx in cases:
        print(f"\n{phase}: {seq} token(s) over {ctx} positions, one layer, {args.target}, timing-only\n")
        print("| form | cycles | vs fp16 | projection weight bytes | HBM bytes | vs fp16 | HBM % | cube M-pipe busy (cycles, all cores) |")
        print("|---|---|---|---|---|---|---|---|")
        base = None
        for form in FORMS:
            t0 = time.perf_counter()
            r = measure(form, seq, ctx, args.target)
            base = base or r
            print(f"| {form} | {r['cycles']:,.0f} | {r['cycles'] / base['cycles']:.2f}x | {r['weight_bytes'] / 2**20:,.1f} MiB "
                  f"| {r['hbm_bytes'] / 2**20:,.1f} MiB | {r['hbm_bytes'] / base['hbm_bytes']:.2f}x "
                  f"| {r['hbm_pct']:.0f} % | {r['m_busy']:,.0f} |", flush=True)
            print(f"  ({form}: {time.perf_counter() - t0:.0f} s wall)", file=__import__("sys").stderr)
    print("\nW8A16 / W4A16: antiquant (nn.weight_quant_matmul): the weights cross HBM as int8 / int4 and are "
          "dequantised on the AIVs; the fp16 tiles reach the cube through a per-core GM workspace that stays in L2.")


if __name__ == "__main__":
    with results.recorded("quant"):
        main()
