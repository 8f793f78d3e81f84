"""fuse-norm-matmul + the norm_matmul template: RMSNorm / LayerNorm feeding Q/K/V-like
projections, lowered to a norm kernel and ONE grouped cube kernel, simulated and compared with
the numpy nn reference (f16: rtol/atol 2e-2, f32: 1e-3 / 1e-4)."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.session import make_context
from ascendir.dialects import ascend
from ascendir.transforms.nn.fuse_norm_matmul import FuseNormMatmul
from lowering_harness import check, parse, printed, rand


def qkv_text(rows: int, h: int, nq: int, nkv: int, dt: str, layer: bool, late_bias: bool = False) -> str:
    """norm(x) then q = n·Wq, k = n·Wk + bk, v = n·Wv (GQA-like: nkv < nq); with `late_bias`
    k's bias add comes after v's matmul (the region then yields q, v, k)."""
    def t(*s):
        return f"tensor<{'x'.join(map(str, s))}x{dt}>"

    x = t(1, rows, h)
    bias = f"%k = nn.add %k0, %bk : ({t(1, rows, nkv)}, {t(nkv)}) -> {t(1, rows, nkv)}"
    norm = (
        f"%n = nn.layer_norm %x, %g, %b {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, {t(h)}, {t(h)}) -> {x}"
        if layer else
        f"%n = nn.rms_norm %x, %g {{axis = 2 : i64, epsilon = 1.0e-05 : f32}} : ({x}, {t(h)}) -> {x}"
    )
    return f"""
func.func @main(%x: {x} {{onnx.name = "x"}}) -> ({t(1, rows, nq)} {{onnx.name = "q"}}, {t(1, rows, nkv)} {{onnx.name = "k"}}, {t(1, rows, nkv)} {{onnx.name = "v"}}) {{
  %g = nn.weight @g : {t(h)}
  %b = nn.weight @b : {t(h)}
  %wq = nn.weight @wq : {t(h, nq)}
  %wk = nn.weight @wk : {t(h, nkv)}
  %bk = nn.weight @bk : {t(nkv)}
  %wv = nn.weight @wv : {t(h, nkv)}
  {norm}
  %q = nn.matmul %n, %wq : ({x}, {t(h, nq)}) -> {t(1, rows, nq)}
  %k0 = nn.matmul %n, %wk : ({x}, {t(h, nkv)}) -> {t(1, rows, nkv)}
  {"" if late_bias else bias}
  %v = nn.matmul %n, %wv : ({x}, {t(h, nkv)}) -> {t(1, rows, nkv)}
  {bias if late_bias else ""}
  func.return %q, %k, %v : {t(1, rows, nq)}, {t(1, rows, nkv)}, {t(1, rows, nkv)}
}}"""


def _weights(h: int, nq: int, nkv: int, dtype) -> dict[str, np.ndarray]:
    scale = 1 / np.sqrt(h)
    return {
        "g": (1 + 0.1 * rand((h,), seed=1)).astype(dtype), "b": (0.1 * rand((h,), seed=2)).astype(dtype),
        "wq": (scale * rand((h, nq), seed=3)).astype(dtype), "wk": (scale * rand((h, nkv), seed=4)).astype(dtype),
        "bk": rand((nkv,), seed=5).astype(dtype), "wv": (scale * rand((h, nkv), seed=6)).astype(dtype),
    }


def fused(text: str) -> str:
    module = parse(text)
    FuseNormMatmul().apply(make_context(), module)
    return printed(module)


@pytest.mark.parametrize(
    "target,dt,layer,rows,late_bias",
    [("ascend910b2", "f16", False, 300, False), ("ascend910b2", "f32", True, 37, True),
     ("ascend910a", "f16", True, 45, False), ("ascend910b2", "f16", False, 1, False)],
)
def test_norm_matmul_matches_reference(target, dt, layer, rows, late_bias):
    h, nq, nkv = 96, 160, 48
    dtype = np.float16 if dt == "f16" else np.float32
    text = fused(qkv_text(rows, h, nq, nkv, dt, layer, late_bias))
    assert text.count("nn.fused(") == 1 and 'kind = #nn.fused_kind<norm_matmul>' in text
    tol = dict(rtol=2e-2, atol=2e-2) if dt == "f16" else {}
    lowered = check(text, {"x": rand((1, rows, h), dtype)}, _weights(h, nq, nkv, dtype), target=target, **tol)
    names = [op.sym_name.data for op in lowered.ops if isinstance(op, ascend.KernelOp)]
    assert names == ["norm_matmul_norm_0", "norm_matmul_0"], names
    assert printed(lowered).count("ascend.launch") == 2


@pytest.mark.parametrize("target", ["ascend910b2", "ascend910a"])
def test_norm_reshape_gelu_and_residual(target):
    """GPT-2's LayerNorm → reshape → Gemm + bias + GELU (one projection: its own mix epilogue
    kernel after the norm kernel), and LLaMA's RMSNorm → two projections, one with a residual
    (not groupable: one kernel each)."""
    text = """
func.func @main(%x: tensor<1x40x96xf16> {onnx.name = "x"}, %s: tensor<40x48xf16> {onnx.name = "s"}) -> (tensor<40x200xf16> {onnx.name = "y"}, tensor<40x48xf16> {onnx.name = "r"}, tensor<40x48xf16> {onnx.name = "p"}) {
  %g = nn.weight @g : tensor<96xf16>
  %b = nn.weight @b : tensor<96xf16>
  %w = nn.weight @w : tensor<96x200xf16>
  %c = nn.weight @c : tensor<200xf16>
  %w2 = nn.weight @w2 : tensor<96x48xf16>
  %n = nn.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x40x96xf16>, tensor<96xf16>, tensor<96xf16>) -> tensor<1x40x96xf16>
  %f = nn.reshape %n : (tensor<1x40x96xf16>) -> tensor<40x96xf16>
  %m = nn.matmul %f, %w : (tensor<40x96xf16>, tensor<96x200xf16>) -> tensor<40x200xf16>
  %y0 = nn.add %m, %c : (tensor<40x200xf16>, tensor<200xf16>) -> tensor<40x200xf16>
  %y = nn.gelu %y0 : (tensor<40x200xf16>) -> tensor<40x200xf16>
  %x2 = nn.reshape %x : (tensor<1x40x96xf16>) -> tensor<40x96xf16>
  %n2 = nn.rms_norm %x2, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<40x96xf16>, tensor<96xf16>) -> tensor<40x96xf16>
  %r0 = nn.matmul %n2, %w2 : (tensor<40x96xf16>, tensor<96x48xf16>) -> tensor<40x48xf16>
  %r = nn.add %s, %r0 : (tensor<40x48xf16>, tensor<40x48xf16>) -> tensor<40x48xf16>
  %p = nn.matmul %n2, %w2 : (tensor<40x96xf16>, tensor<96x48xf16>) -> tensor<40x48xf16>
  func.return %y, %r, %p : tensor<40x200xf16>, tensor<40x48xf16>, tensor<40x48xf16>
}"""
    text = fused(text)
    assert text.count('kind = #nn.fused_kind<norm_matmul>') == 2
    w = _weights(96, 200, 48, np.float16)
    weights = {"g": w["g"], "b": w["b"], "w": w["wq"], "c": rand((200,), np.float16, seed=9), "w2": w["wk"]}
    inputs = {"x": rand((1, 40, 96), np.float16), "s": rand((40, 48), np.float16, seed=8)}
    lowered = check(text, inputs, weights, target=target, rtol=2e-2, atol=2e-2)
    names = [op.sym_name.data for op in lowered.ops if isinstance(op, ascend.KernelOp)]
    assert names == ["norm_matmul_norm_0", "norm_matmul_0", "norm_matmul_norm_1", "norm_matmul_1", "norm_matmul_2"], names


def test_layer_norm_with_statistics_results_is_not_fused():
    """LayerNormalization's Mean / InvStdDev results are used outside: the norm stays unfused."""
    text = qkv_text(8, 64, 64, 32, "f32", layer=True).replace(
        "%n = nn.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>",
        "%n, %mean, %inv = nn.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f32} : (tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<1x8x64xf32>, tensor<1x8x1xf32>, tensor<1x8x1xf32>)",
    )
    assert "%mean" in text
    assert "nn.fused" not in fused(text)
