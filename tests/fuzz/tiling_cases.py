"""Fuzz cases for forced tilings (`--tiling m=..,n=..,k=..,l1_depth=..,split_k=..,swizzle=..,prefetch=..,
tail_split=..,br=..,bc=..`): a matmul of aligned and of odd shapes, one whose tiles leave a partial
wave (tail_split's case), and a flash attention, each field from the edges of what
fits (0, 1, odd sizes, buffer-sized, 2^31, 2^62, negative), on chips of both architectures, in
`ascendir run` (timing-only and with numerics) and `compile`."""

from __future__ import annotations

import functools

import numpy as np
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from .harness import Case
from .toml_cases import tiny_model

KEYS = ["m", "n", "k", "l1_depth", "split_k", "swizzle", "prefetch", "tail_split", "br", "bc"]
ALIGNED = [16, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 4096]  # most draws: past the alignment checks, into the fit ones
EDGES = [0, 1, 2, 3, 4, 8, 15, 17, 33, 65536, 2**31, 2**62, -16]


@functools.cache
def odd_matmul() -> bytes:
    """x[2, 33, 70] @ W[70, 45]: no dimension a multiple of 16 (padding, partial tiles)."""
    w = np.random.default_rng(1).standard_normal((70, 45)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "odd",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 33, 70])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 33, 45])],
                              initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@functools.cache
def wave_matmul() -> bytes:
    """x[256, 512] @ W[512, 256]: whole tiles that leave a partial wave on 24 AICs, K of several
    L1 chunks (prefetch and tail_split can be honoured)."""
    w = np.random.default_rng(2).standard_normal((512, 256)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "wave",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 256])],
                              initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def attention_ir(dt: str) -> bytes:
    """nn.attention of q[1, 4, 40, 32] over k, v[1, 2, 72, 32] (grouped heads, odd sequence lengths), causal."""
    q, kv = f"tensor<1x4x40x32x{dt}>", f"tensor<1x2x72x32x{dt}>"
    return f"""builtin.module {{
func.func @main(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{
  %o = nn.attention %q, %k, %v {{num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = true, scale = 0.1767767 : f32}} : ({q}, {kv}, {kv}) -> {q}
  func.return %o : {q}
}}
}}
""".encode()


@st.composite
def tiling_cases(draw) -> Case:
    model = draw(st.sampled_from(["tiny.onnx", "odd.onnx", "wave.onnx", "attn.mlir"]))
    fields = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=6, unique=True))
    value = st.one_of(st.sampled_from(ALIGNED), st.sampled_from(ALIGNED), st.sampled_from(ALIGNED), st.sampled_from(EDGES),
                      st.integers(1, 300))
    parts = [f"{k}={draw(value)}" for k in fields]
    spec = ",".join(parts)
    argv = [draw(st.sampled_from(["run", "run", "compile"])), model, "--tiling", spec]
    if argv[0] == "run" and draw(st.booleans()):
        argv.append("--timing-only")
    if argv[0] == "compile":
        argv += ["--emit", "ascend", "-o", "out.mlir"]
    argv += ["--target", draw(st.sampled_from(["910b2", "910b2", "910a", "310p", "ascend910_93"]))]
    if model != "attn.mlir":
        argv += ["--dtype", draw(st.sampled_from(["fp32", "fp16", "bf16"]))]
    files = {"tiny.onnx": tiny_model(), "odd.onnx": odd_matmul(), "wave.onnx": wave_matmul(), "attn.mlir": attention_ir(draw(st.sampled_from(["f16", "f32"])))}
    return Case("ascendir", tuple(argv), files, f"tiling {spec} on {model}")
