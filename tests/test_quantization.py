"""Quantized ONNX: the quantized ops against onnxruntime (integers exactly), the int8 cube path,
and models quantized by onnxruntime's own tools (tests/data/quant, scripts/build_quant_models.py)
end to end through the CLI. The integer ops are also checked against numpy's exact integer
arithmetic: onnxruntime's own u8 x s8 kernels saturate on some x86-64 CPUs (verdict.py
`onnxruntime_u8s8_exact`)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ascendir.api.verdict import onnxruntime_u8s8_exact
from ascendir.driver import compile_model, lower
from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from tests.cli_helpers import run_cli
from tests.test_models_e2e import DATA

QUANT = DATA / "quant"
QUANT_MODELS = ["mlp_qdq", "mlp_nbits4", "resnet_qdq", "llama_dynamic", "cnn_dynamic", "transformer_qdq"]
TARGET = "ascend910b2"


def _model(nodes, inputs, outputs, inits=(), opset=21, domains=()):
    graph = helper.make_graph(nodes, "q", inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=imports, ir_version=10)


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ort_exact(*dtypes) -> bool:
    """Whether onnxruntime computes an integer op of these operand dtypes exactly here."""
    return not (np.dtype(dtypes[0]) == np.uint8 and np.dtype(dtypes[1]) == np.int8) or onnxruntime_u8s8_exact()


def _requantize_ref(acc: np.ndarray, multiplier, zero_point, dtype) -> np.ndarray:
    """saturate(rint(float32(acc) * multiplier) + zero_point): ONNX's QLinear requantization,
    float32 multiplier (the scales' product over y's scale, in float32, as onnxruntime)."""
    info = np.iinfo(dtype)
    v = np.rint(acc.astype(np.float32) * np.asarray(multiplier, np.float32)) + np.float32(zero_point)
    return np.clip(v, info.min, info.max).astype(dtype)


def _conv_integer_ref(x, w, zx, zw, pads, group) -> np.ndarray:
    """ConvInteger in exact integers (int64): sum over each window of (x - zx) (w - zw), the
    padding reading zx; pads as ONNX's [top, left, bottom, right], stride and dilation 1."""
    xp = np.pad(x.astype(np.int64) - np.int64(zx), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    wz = w.astype(np.int64) - np.int64(zw)
    o, cg, kh, kw = w.shape
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))  # n, c, ho, wo, kh, kw
    og = o // group
    return np.concatenate([np.einsum("nchwij,ocij->nohw", win[:, g * cg:(g + 1) * cg], wz[g * og:(g + 1) * og])
                           for g in range(group)], axis=1)


def _ascendir(model, feeds, opt_level="O0"):
    module, weights = import_onnx(model)
    lower(module, weights, TARGET)
    return module, simulate(module, weights, feeds, load_target(TARGET))


def _matmul_integer_model(m, k, n, a_dt, b_dt, a_zp, b_zp, b_const):
    a_t = TensorProto.UINT8 if a_dt == np.uint8 else TensorProto.INT8
    b_t = TensorProto.UINT8 if b_dt == np.uint8 else TensorProto.INT8
    rng = np.random.default_rng(k)
    # values in the upper half of their range and small zero points: the sums pass 2^24
    b = rng.integers(np.iinfo(b_dt).max // 2, np.iinfo(b_dt).max + 1, (k, n)).astype(b_dt)
    inits = [numpy_helper.from_array(a_zp, "za"), numpy_helper.from_array(b_zp, "zb")]
    inputs = [helper.make_tensor_value_info("a", a_t, [m, k])]
    if b_const:
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", b_t, [k, n]))
    node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
    model = _model([node], inputs, [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])], inits, opset=13)
    a = rng.integers(np.iinfo(a_dt).max // 2, np.iinfo(a_dt).max + 1, (m, k)).astype(a_dt)
    feeds = {"a": a} if b_const else {"a": a, "b": b}
    return model, feeds


@pytest.mark.parametrize(
    "a_dt, b_dt, per_channel, b_const",
    [(np.uint8, np.int8, False, True), (np.uint8, np.uint8, True, True), (np.int8, np.int8, True, False), (np.uint8, np.int8, True, False)],
)
def test_matmul_integer_is_exact_on_the_int8_cube(a_dt, b_dt, per_channel, b_const) -> None:
    # K = 4096: sums pass 2^24, beyond float32's exact integers: only an int32 accumulate matches
    m, k, n = 24, 4096, 48
    rng = np.random.default_rng(1)
    a_zp = np.asarray(rng.integers(0, 20) if a_dt == np.uint8 else rng.integers(-10, 10), a_dt)
    b_zp = (rng.integers(0, 20, n) if b_dt == np.uint8 else rng.integers(-10, 10, n)).astype(b_dt) if per_channel else np.asarray(3, b_dt)
    model, feeds = _matmul_integer_model(m, k, n, a_dt, b_dt, a_zp, b_zp, b_const)
    module, result = _ascendir(model, feeds)
    b = feeds["b"] if "b" in feeds else numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "b"))
    want = (feeds["a"].astype(np.int64) - a_zp.astype(np.int64)) @ (b.astype(np.int64) - b_zp.astype(np.int64))
    np.testing.assert_array_equal(result.outputs["y"], want)
    if _ort_exact(a_dt, b_dt):
        np.testing.assert_array_equal(_ort(model, feeds)[0], want)
    assert np.abs(want).max() > 2**24  # the case float32 accumulation would get wrong
    # the product ran as an s8 mmad with an int32 L0C
    text = str(module)
    assert "ascend.mmad" in text and "xi32, #ascend<space l0c>>" in text


def test_qlinear_matmul_matches_onnxruntime() -> None:
    m, k, n = 16, 256, 32
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (2, m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    inits = [
        numpy_helper.from_array(np.asarray(0.02, np.float32), "sa"), numpy_helper.from_array(np.asarray(131, np.uint8), "za"),
        numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.asarray(0.01, np.float32), "sb"),
        numpy_helper.from_array(np.asarray(0, np.int8), "zb"), numpy_helper.from_array(np.asarray(1.7, np.float32), "sy"),
        numpy_helper.from_array(np.asarray(120, np.uint8), "zy"),
    ]
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("a", TensorProto.UINT8, list(a.shape))],
                   [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, m, n])], inits)
    _, result = _ascendir(model, {"a": a})
    acc = (a.astype(np.int64) - 131) @ b.astype(np.int64)
    want = _requantize_ref(acc, np.float32(0.02) * np.float32(0.01) / np.float32(1.7), 120, np.uint8)
    np.testing.assert_array_equal(result.outputs["y"], want)
    if _ort_exact(np.uint8, np.int8):
        np.testing.assert_array_equal(_ort(model, {"a": a})[0], want)
    assert 0 < np.count_nonzero((want > 0) & (want < 255))  # not all saturated


@pytest.mark.parametrize("fill", [0.0, 3.0, -2.0])
def test_dynamic_quantize_linear_of_a_constant_matches_onnxruntime(fill: float) -> None:
    """A constant x (all zeros: max = min after widening to 0) gives onnxruntime's scale, 1.0
    (onnx's reference evaluator says 1 / 255), and its zero point; the quantized values agree."""
    x = np.full((2, 8), fill, np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 8]),
                    helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                    helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
    _, result = _ascendir(model, {"x": x})
    for name, want in zip(("y", "s", "z"), _ort(model, {"x": x})):
        np.testing.assert_array_equal(result.outputs[name], want, err_msg=name)


def test_quantize_dequantize_blocked_int4_match_onnxruntime() -> None:
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32) * 3
    scale = (np.abs(x).reshape(4, 2, 32).max(-1) / 7).astype(np.float32)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=32)
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=32)
    z = helper.make_tensor("z", TensorProto.INT4, [4, 2], [1, -2, 0, 3, -1, 0, 2, -3])  # int4 zero points
    model = _model([q, dq], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])],
                   [numpy_helper.from_array(scale, "s"), z])
    _, result = _ascendir(model, {"x": x})
    want = _ort(model, {"x": x})[0]
    np.testing.assert_array_equal(result.outputs["y"], want)


def test_conv_integer_beyond_exact_fp32_is_refused() -> None:
    """A runtime weight takes the fp32 convolution, exact only below 2^24: refused past it."""
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 512, 8, 8]),
                            helper.make_tensor_value_info("w", TensorProto.UINT8, [4, 512, 3, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 4, 6, 6])], opset=13)
    with pytest.raises(AscendirError, match=r"ConvInteger '#0 -> y': a window of 4608 products .* could exceed 2\^24"):
        import_onnx(model)


def test_conv_integer_past_2_24_is_exact_on_the_int8_cube() -> None:
    """A constant weight takes the int8 cube (int32 accumulate): sums of 4608 products of
    255 x 200 (past 2^24, where the fp32 path was refused) equal onnxruntime's exactly."""
    w = np.full((4, 512, 3, 3), 200, np.uint8)
    w[1] = 0
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 512, 8, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 4, 6, 6])], [numpy_helper.from_array(w, "w")], opset=13)
    x = np.full((1, 512, 8, 8), 255, np.uint8)
    x[..., 0] = 3
    module, result = _ascendir(model, {"x": x})
    want = _ort(model, {"x": x})[0]
    assert np.abs(want).max() > 2**24
    np.testing.assert_array_equal(result.outputs["y"], want)
    assert "xi8, #ascend<space l0a>>" in str(module)  # the s8 mmad


@pytest.mark.parametrize(("x_dt", "w_dt", "zx", "zw", "pads", "group"), [
    (np.uint8, np.int8, 131, 0, [1, 1, 1, 1], 1),
    (np.uint8, np.uint8, 7, 200, [1, 0, 2, 1], 1),  # asymmetric pads, uint8 weight zero point
    (np.int8, np.int8, -5, 3, [0, 0, 0, 0], 1),
    (np.uint8, np.int8, 200, 0, [1, 1, 1, 1], 2),  # grouped
])
def test_int8_conv_zero_points_and_padding_match_onnxruntime(x_dt, w_dt, zx, zw, pads, group) -> None:
    """ConvInteger and QLinearConv on the int8 cube: zero points (shifted uint8 included), padding
    that reads x's zero point, groups; ConvInteger equals onnxruntime exactly, QLinearConv too
    (int32 accumulator + int32 bias, requantized in float32)."""
    rng = np.random.default_rng(11)
    c, o = 16, 8
    w = rng.integers(np.iinfo(w_dt).min, np.iinfo(w_dt).max + 1, (o, c // group, 3, 3)).astype(w_dt)
    x = rng.integers(np.iinfo(x_dt).min, np.iinfo(x_dt).max + 1, (2, c, 9, 7)).astype(x_dt)
    x_t = TensorProto.UINT8 if x_dt == np.uint8 else TensorProto.INT8
    ho, wo = 9 + pads[0] + pads[2] - 2, 7 + pads[1] + pads[3] - 2
    zs = [numpy_helper.from_array(np.asarray(zx, x_dt), "zx"), numpy_helper.from_array(np.asarray(zw, w_dt), "zw")]
    feeds = {"x": x}
    ci = _model([helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], pads=pads, group=group)],
                [helper.make_tensor_value_info("x", x_t, list(x.shape))], [helper.make_tensor_value_info("y", TensorProto.INT32, [2, o, ho, wo])],
                [numpy_helper.from_array(w, "w"), *zs], opset=13)
    _, result = _ascendir(ci, feeds)
    acc = _conv_integer_ref(x, w, zx, zw, pads, group)
    np.testing.assert_array_equal(result.outputs["y"], acc)
    if _ort_exact(x_dt, w_dt):
        np.testing.assert_array_equal(_ort(ci, feeds)[0], acc)
    bias = rng.integers(-5000, 5000, o).astype(np.int32)
    scales = [numpy_helper.from_array(np.asarray(v, np.float32), n) for v, n in ((0.02, "sx"), (0.003, "sw"), (1.9, "sy"))]
    ql = _model([helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["y"], pads=pads, group=group)],
                [helper.make_tensor_value_info("x", x_t, list(x.shape))], [helper.make_tensor_value_info("y", x_t, [2, o, ho, wo])],
                [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b"), numpy_helper.from_array(np.asarray(10, x_dt), "zy"), *zs, *scales],
                opset=13)
    _, result = _ascendir(ql, feeds)
    want = _requantize_ref(acc + bias.reshape(-1, 1, 1), np.float32(0.02) * np.float32(0.003) / np.float32(1.9), 10, x_dt)
    np.testing.assert_array_equal(result.outputs["y"], want)
    if _ort_exact(x_dt, w_dt):
        np.testing.assert_array_equal(_ort(ql, feeds)[0], want)
    info = np.iinfo(x_dt)
    assert 0 < np.count_nonzero((want > info.min) & (want < info.max))  # not all saturated


def test_matmul_nbits_refuses_g_idx() -> None:
    k, n, block = 64, 16, 32
    b = np.zeros((n, 2, 16), np.uint8)
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.ones(n * 2, np.float32), "s"),
             numpy_helper.from_array(np.arange(k, dtype=np.int32)[::-1].copy(), "g")]
    node = helper.make_node("MatMulNBits", ["a", "b", "s", "", "g"], ["y"], domain="com.microsoft", K=k, N=n, bits=4, block_size=block)
    model = _model([node], [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, k])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], inits, domains=["com.microsoft"])
    with pytest.raises(AscendirError, match=r"MatMulNBits '#0 -> y': g_idx \(act-order\) reordering is not supported"):
        import_onnx(model)


def test_int8_matmul_runs_at_the_s8_rate() -> None:
    """An int8 matmul's mmads take the s8 K step (32 per cycle on 910B2, S5 in the chip TOML),
    half the M-pipe cycles of the same fp16 product."""
    m, k, n = 128, 2048, 256

    def m_pipe(dt, onnx_t):
        if dt == np.int8:
            node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
            out_t = TensorProto.INT32
        else:
            node = helper.make_node("MatMul", ["a", "b"], ["y"])
            out_t = onnx_t
        model = _model([node], [helper.make_tensor_value_info("a", onnx_t, [m, k]), helper.make_tensor_value_info("b", onnx_t, [k, n])],
                       [helper.make_tensor_value_info("y", out_t, [m, n])], opset=13)
        feeds = {"a": np.ones((m, k), dt), "b": np.ones((k, n), dt)}
        _, result = _ascendir(model, feeds)
        return sum(kr["pipe_busy"].get("M", 0) for kr in result.report["kernels"])

    s8, f16 = m_pipe(np.int8, TensorProto.INT8), m_pipe(np.float16, TensorProto.FLOAT16)
    assert 0 < s8 < 0.6 * f16


@pytest.mark.sampled
@pytest.mark.parametrize("opt_level", ["O0", "O2"])
@pytest.mark.parametrize("name", QUANT_MODELS)
def test_quantized_model_matches_onnxruntime(name: str, opt_level: str) -> None:
    """Models quantized by onnxruntime.quantization: outputs equal onnxruntime's within float32
    rounding (rtol 1e-5, atol 1e-6; the integer paths inside are exact)."""
    module, weights = compile_model(QUANT / name / "model.onnx", TARGET, opt_level=opt_level)
    with np.load(QUANT / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    result = simulate(module, weights, inputs, load_target(TARGET))
    for k, want in expected.items():
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-5, atol=1e-6, err_msg=f"{name} output {k}")


def test_quantized_models_are_small_and_quantized() -> None:
    for name in QUANT_MODELS:
        path = QUANT / name / "model.onnx"
        assert path.stat().st_size < 600_000, name
        ops = {n.op_type for n in onnx.load(str(path)).graph.node}
        assert ops & {"QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "MatMulNBits"}, name


@pytest.mark.sampled
def test_cli_runs_a_dynamically_quantized_llama(tmp_path) -> None:
    ref = QUANT / "llama_dynamic" / "reference.npz"
    out = tmp_path / "out.npz"
    r = run_cli("run", QUANT / "llama_dynamic" / "model.onnx", "--inputs", ref, "--outputs", out)
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(out)["logits"], np.load(ref)["output:logits"], rtol=1e-5, atol=1e-6)


@pytest.mark.sampled
def test_check_ort_on_a_qdq_model_is_the_onnx_graph(tmp_path) -> None:
    """--check-ort's reference is the ONNX graph node by node (onnxruntime's optimisations off):
    on transformer_qdq's seeded random inputs, onnxruntime's default QDQ fusion requantises one
    step differently (4e-3 in the logits) and the exact result was a FAIL."""
    r = run_cli("run", QUANT / "transformer_qdq" / "model.onnx", "-O0", "--check-ort", "--report", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    import json

    (out,) = json.loads((tmp_path / "r.json").read_text())["verdict"]["outputs"]
    assert out["status"] == "pass" and out["max_abs_err"] == 0.0, out


def test_qdq_gemm_runs_as_an_int8_product() -> None:
    """quantize_static's QDQ around each Gemm of mlp_qdq becomes one int8 x int8 -> int32 matmul
    (onnxruntime's MatMulIntegerToFloat), not a float32 product of dequantized values; the
    per-channel int8 weights stay int8 in the WeightStore (a quarter of the fp32 bytes)."""
    from ascendir.dialects import nn

    module, weights = import_onnx(onnx.load(str(QUANT / "mlp_qdq" / "model.onnx")))
    mms = [op for op in module.walk() if isinstance(op, nn.MatmulOp)]
    assert len(mms) == 3
    assert all(str(op.lhs.type.element_type) == "i8" and str(op.result.type.element_type) == "i32" for op in mms)
    w = [op for op in module.walk() if isinstance(op, nn.WeightOp) and str(op.result.type.element_type) == "i8"]
    assert sum(math.prod(op.result.type.get_shape()) for op in w) == 784 * 300 + 300 * 100 + 100 * 10


def _qdq_matmul_fp16(m, k, n):
    rng = np.random.default_rng(5)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    inits = [numpy_helper.from_array(np.asarray(0.02, np.float16), "sx"), numpy_helper.from_array(np.asarray(0, np.int8), "zx"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array((rng.random(n) * 0.01 + 0.001).astype(np.float16), "sw")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=1), helper.make_node("MatMul", ["xd", "wd"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [m, k])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [m, n]), helper.make_tensor_value_info("xq", TensorProto.INT8, [m, k])],
                   inits)
    return model, {"x": rng.standard_normal((m, k)).astype(np.float16)}, (w, inits[0], inits[3])


def test_qdq_matmul_fp16_is_the_exact_product_rounded_once() -> None:
    """A float16 model's QDQ MatMul (fp16 scales) runs as the int8 product scaled in float32 and
    rounded once to fp16: within fp16 rounding (rtol 1e-3) of the exact sx·sw·(xq @ w), where
    onnxruntime's fp16 product of dequantized values strays further; the quantized activation
    equals onnxruntime's exactly."""
    model, feeds, (w, sx, sw) = _qdq_matmul_fp16(16, 256, 64)
    module, result = _ascendir(model, feeds)
    y_ort, xq_ort = _ort(model, feeds)
    np.testing.assert_array_equal(result.outputs["xq"], xq_ort)
    exact = (xq_ort.astype(np.float64) @ w.astype(np.float64)) * float(numpy_helper.to_array(sx)) * numpy_helper.to_array(sw).astype(np.float64)
    got = result.outputs["y"]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=1e-3, atol=1e-3)
    assert np.abs(got - exact).max() < np.abs(y_ort.astype(np.float64) - exact).max()
    assert "xi8, #ascend<space l0a>>" in str(module)


def test_choose_tiling_tiles_int8_matmuls_without_split_k() -> None:
    """choose-tiling searches int8 products too (their partial sums are int32: never split K)."""
    from ascendir.dialects import nn
    from ascendir.driver import _parse_pipeline, run_passes

    model, _, _ = _qdq_matmul_fp16(1, 4096, 4096)  # a decode-shaped product: split K would pay in fp16
    module, weights = import_onnx(model)
    run_passes(module, _parse_pipeline(None, "O2"), weights)
    (mm,) = [op for op in module.walk() if isinstance(op, nn.MatmulOp)]
    assert mm.tiling is not None and mm.tiling.data["split_k"].value.data == 1


@pytest.mark.parametrize("opt_level", ["O0", "O2"])
def test_matmul_integer_with_an_int32_bias_is_not_fused(opt_level: str, tmp_path) -> None:
    """MatMulInteger + Add of an int32 row: fuse-matmul-epilogue leaves integer products alone
    (their L0C is int32), so the add runs after the product and the result is exact."""
    rng = np.random.default_rng(0)
    b = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    bias = rng.integers(-1000, 1000, (32,)).astype(np.int32)
    nodes = [helper.make_node("MatMulInteger", ["a", "b"], ["acc"]), helper.make_node("Add", ["acc", "bias"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("a", TensorProto.INT8, [16, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [16, 32])],
                   [numpy_helper.from_array(b, "b"), numpy_helper.from_array(bias, "bias")], opset=13)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    a = rng.integers(-128, 128, (16, 64)).astype(np.int8)
    module, weights = compile_model(path, TARGET, opt_level=opt_level)
    result = simulate(module, weights, {"a": a}, load_target(TARGET))
    np.testing.assert_array_equal(result.outputs["y"], _ort(model, {"a": a})[0])


def test_dtype_fp16_on_an_activation_quantized_model_is_refused() -> None:
    """QuantizeLinear's rounding needs float32: --dtype fp16 would quantize to other integers, so
    it is refused with the node; a weight-only model (MatMulNBits) converts as any fp32 model."""
    with pytest.raises(AscendirError, match=r"--dtype fp16: the model quantizes float32 values to integers \(ui8 by 'input_QuantizeLinear'\)"):
        compile_model(QUANT / "mlp_qdq" / "model.onnx", TARGET, dtype="fp16")
    module, weights = compile_model(QUANT / "mlp_nbits4" / "model.onnx", TARGET, dtype="fp16")
    with np.load(QUANT / "mlp_nbits4" / "reference.npz") as ref:
        result = simulate(module, weights, {"input": ref["input:input"]}, load_target(TARGET))
        np.testing.assert_allclose(result.outputs["output"].astype(np.float32), ref["output:output"], rtol=1e-2, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# weight-only (antiquant): nn.weight_quant_matmul
# ---------------------------------------------------------------------------------------------
def _nbits_model(m, k, n, bits, block, zero_points, elem=TensorProto.FLOAT, seed=0):
    """One MatMulNBits [m, k] x [k, n] with random packed weights, scales and (packed) zero points."""
    rng = np.random.default_rng(seed)
    nb = -(-k // block)
    dt = np.float16 if elem == TensorProto.FLOAT16 else np.float32
    inits = [numpy_helper.from_array(rng.integers(0, 256, (n, nb, block * bits // 8), dtype=np.uint8), "b"),
             numpy_helper.from_array((rng.random(n * nb) * 0.05 + 0.01).astype(dt), "s")]
    ins = ["a", "b", "s"]
    if zero_points:
        inits.append(numpy_helper.from_array(rng.integers(0, 256, (n * -(-nb * bits // 8),), dtype=np.uint8), "z"))
        ins.append("z")
    node = helper.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=k, N=n, bits=bits, block_size=block)
    model = _model([node], [helper.make_tensor_value_info("a", elem, [m, k])], [helper.make_tensor_value_info("y", elem, [m, n])],
                   inits, domains=["com.microsoft"])
    return model, {"a": rng.standard_normal((m, k)).astype(dt)}


@pytest.mark.parametrize(("m", "k", "n", "bits", "block", "zero_points"), [
    (3, 80, 48, 4, 32, True),  # K not a multiple of the block: a partial last group
    (2, 1024, 64, 8, 512, False),  # a group longer than the kernel's K chunk
    (16, 256, 40, 4, 16, False),
])
def test_matmul_nbits_is_antiquant_and_matches_onnxruntime(m, k, n, bits, block, zero_points) -> None:
    """4 / 8-bit MatMulNBits keep the weight int4 / int8 (nn.weight_quant_matmul) and equal
    onnxruntime within float32 rounding: the same dequantised weight, a float product (its sums
    in another order: atol 1e-6 of the largest output)."""
    model, feeds = _nbits_model(m, k, n, bits, block, zero_points)
    module, result = _ascendir(model, feeds)
    assert "ascend.kernel @weight_quant_matmul" in str(module)
    want = _ort(model, feeds)[0]
    # float32 products summed in another order over K: rounding relative to the outputs' scale
    np.testing.assert_allclose(result.outputs["y"], want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def _weight_only_qdq_mlp(w_dt, per_column, zero_point, transpose=False):
    """x [8, 64] float32 -> DequantizeLinear(int8 / uint8 W1) MatMul -> Relu -> Gemm with a
    DequantizeLinear(W2) (transB when `transpose`): weight-only QDQ, float activations."""
    rng = np.random.default_rng(7)
    lo, hi = np.iinfo(w_dt).min, np.iinfo(w_dt).max
    w1 = rng.integers(lo, hi + 1, (64, 48)).astype(w_dt)
    w2 = rng.integers(lo, hi + 1, (16, 48) if transpose else (48, 16)).astype(w_dt)
    s1 = (rng.random(48) * 0.01 + 0.001).astype(np.float32) if per_column else np.asarray(0.004, np.float32)
    s2 = (rng.random(16) * 0.01 + 0.001).astype(np.float32) if per_column else np.asarray(0.003, np.float32)
    zp = (lambda n: rng.integers(lo // 4, hi // 4 + 1, n).astype(w_dt) if per_column else np.asarray(hi // 5, w_dt)) if zero_point \
        else (lambda n: np.zeros(n, w_dt) if per_column else np.asarray(0, w_dt))
    inits = [numpy_helper.from_array(a, nm) for a, nm in ((w1, "w1"), (s1, "s1"), (zp(48), "z1"), (w2, "w2"), (s2, "s2"), (zp(16), "z2"))]
    nodes = [
        helper.make_node("DequantizeLinear", ["w1", "s1", "z1"], ["w1f"], axis=1),
        helper.make_node("MatMul", ["x", "w1f"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("DequantizeLinear", ["w2", "s2", "z2"], ["w2f"], axis=0 if transpose else 1),
        helper.make_node("Gemm", ["hr", "w2f"], ["y"], transB=int(transpose)),
    ]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])], inits)
    return model, {"x": rng.standard_normal((8, 64)).astype(np.float32)}


@pytest.mark.parametrize(("w_dt", "per_column", "zero_point", "transpose"), [
    (np.int8, True, False, False), (np.int8, False, True, True), (np.uint8, True, True, False), (np.uint8, False, True, True),
])
def test_weight_only_qdq_mlp_is_antiquant_and_matches_onnxruntime(w_dt, per_column, zero_point, transpose) -> None:
    """DequantizeLinear of a constant int8 / uint8 weight feeding a MatMul / Gemm with float
    activations: nn.weight_quant_matmul over an int8 weight (uint8 shifted by 128, the shift in the
    offset), equal to onnxruntime's float product over the dequantised weight."""
    model, feeds = _weight_only_qdq_mlp(w_dt, per_column, zero_point, transpose)
    module, weights = import_onnx(model)
    mms = [op for op in module.walk() if op.name == "nn.weight_quant_matmul"]
    assert len(mms) == 2 and all(str(op.weight.type.element_type) == "i8" for op in mms)
    lower(module, weights, TARGET)
    result = simulate(module, weights, feeds, load_target(TARGET))
    np.testing.assert_allclose(result.outputs["y"], _ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_antiquant_weights_cross_hbm_narrow() -> None:
    """A decode-shaped fp16 GEMV [1, 4096] x [4096, 4096]: W8 moves one byte per weight over HBM
    and W4 half a byte (their difference is exactly K·N/2 bytes; the dequantised fp16 tiles go
    through an L2-resident workspace whose first writes add the same to both), so both move far
    fewer bytes than the fp16 MatMul (measured: 33.6 MB fp16, 23.3 MB W8, 15.0 MB W4) and take
    fewer cycles (90.0 K fp16, 41.0 K W8, 42.5 K W4: bound by the workspace's L2 round trip)."""
    k, n = 4096, 4096

    def run(bits):
        if bits == 16:
            w = np.zeros((k, n), np.float16)
            model = _model([helper.make_node("MatMul", ["a", "w"], ["y"])], [helper.make_tensor_value_info("a", TensorProto.FLOAT16, [1, k])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, n])], [numpy_helper.from_array(w, "w")])
            feeds = {"a": np.zeros((1, k), np.float16)}
        else:
            model, feeds = _nbits_model(1, k, n, bits, 128, False, TensorProto.FLOAT16)
        module, weights = import_onnx(model)
        lower(module, weights, TARGET)
        b = simulate(module, weights, feeds, load_target(TARGET), timing_only=True).report
        return b["total_cycles"], b["bytes"]["gm_read"] - b["bytes"].get("l2_hit", 0) + b["bytes"]["gm_write"] - b["bytes"].get("l2_write", 0)

    (c16, h16), (c8, h8), (c4, h4) = run(16), run(8), run(4)
    fp16_weight = k * n * 2
    assert h16 >= fp16_weight
    assert abs((h8 - h4) - k * n / 2) < 0.02 * k * n / 2, (h8, h4)
    assert h8 < 0.75 * h16 and h4 < 0.5 * h16, (h16, h8, h4)
    assert c8 < 0.6 * c16 and c4 < 0.6 * c16, (c16, c8, c4)


@pytest.mark.parametrize("target", ["ascend910b2", "ascend910a"])
def test_matmul_nbits_fp16_antiquant_on_both_architectures(target) -> None:
    """fp16 W4 with zero points: the split-core mix kernel (910B) and the coupled-core kernel
    (910A, output through UB) give the nn reference's values exactly (the dequantised weight is
    one rounding in fp16, the product an fp32 accumulation), within one fp16 ulp of onnxruntime."""
    from ascendir.interpreter.exec.nn_reference import run_nn

    model, feeds = _nbits_model(4, 256, 96, 4, 32, True, TensorProto.FLOAT16)
    module, weights = import_onnx(model)
    want = run_nn(module, weights, feeds)["y"]
    lower(module, weights, target)
    got = simulate(module, weights, feeds, load_target(target)).outputs["y"]
    np.testing.assert_array_equal(got, want)
    ort_y = _ort(model, feeds)[0].astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), ort_y, rtol=0, atol=float(np.spacing(np.abs(ort_y).max().astype(np.float16))))


def test_prefill_antiquant_dequantises_an_l1_chunk_in_several_ub_passes() -> None:
    """fp16 W8 [512, 512] x [512, 1536] (four row blocks, whole 256-row L1 chunks): the AIVs
    dequantise each chunk in passes of 64 rows (what fits UB twice) so the cube loads 256-row
    chunks, half the nd2nz start-ups of 128-row ones (the 7B prefill-512 layer: W8A16 1.21x ->
    1.06x the fp16 cycles); values within one fp16 ulp of onnxruntime."""
    model, feeds = _nbits_model(512, 512, 1536, 8, 128, True, TensorProto.FLOAT16)
    module, weights = import_onnx(model)
    lower(module, weights, TARGET)
    text = str(module)
    assert "memref<256x256xf16, #ascend<space l1>>" in text and "memref<64x256xi8, #ascend<space ub>>" in text
    got = simulate(module, weights, feeds, load_target(TARGET)).outputs["y"].astype(np.float32)
    ort_y = _ort(model, feeds)[0].astype(np.float32)
    np.testing.assert_allclose(got, ort_y, rtol=0, atol=float(np.spacing(np.abs(ort_y).max().astype(np.float16))))


def test_int8_conv_with_a_runtime_zero_point_pads_with_it() -> None:
    """ConvInteger whose x zero point is a graph input (DynamicQuantizeLinear's): x is padded with
    it at run time before the int8 conv; equal to onnxruntime exactly."""
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, (8, 16, 3, 3)).astype(np.int8)
    x = rng.integers(0, 256, (1, 16, 6, 6)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "zx"], ["y"], pads=[1, 2, 0, 1], strides=[2, 1])
    model = _model([node], [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 16, 6, 6]), helper.make_tensor_value_info("zx", TensorProto.UINT8, [])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 8, 3, 7])], [numpy_helper.from_array(w, "w")], opset=13)
    feeds = {"x": x, "zx": np.asarray(77, np.uint8)}
    module, result = _ascendir(model, feeds)
    np.testing.assert_array_equal(result.outputs["y"], _ort(model, feeds)[0])
    assert "xi8, #ascend<space l0a>>" in str(module)


def test_qdq_conv_runs_on_the_int8_cube() -> None:
    """resnet_qdq's QDQ Convs become int8 convolutions (s8 mmad), its output still equal to
    onnxruntime's (test_quantized_model_matches_onnxruntime)."""
    module, _ = compile_model(QUANT / "resnet_qdq" / "model.onnx", TARGET, opt_level="O2")
    convs = [k for k in str(module).split("ascend.kernel @")[1:] if k.startswith("conv")]
    assert convs and all("xi8, #ascend<space l0a>>" in k for k in convs)


# ---------------------------------------------------------------------------------------------
# weight-only (antiquant) under tensor parallelism
# ---------------------------------------------------------------------------------------------
def _nbits_mlp(k=64, hidden=128, n=64, block=32, seed=5):
    """x [8, k] -> MatMulNBits (4-bit, blocks of `block`, zero points) -> Relu -> MatMulNBits -> y
    [8, n]: under --tp 2 the first splits by columns, the second by rows (hidden / 2 rows are
    whole blocks)."""
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], "x"
    for i, (kk, nn_) in enumerate(((k, hidden), (hidden, n))):
        nb = kk // block
        inits += [numpy_helper.from_array(rng.integers(0, 256, (nn_, nb, block // 2), dtype=np.uint8), f"b{i}"),
                  numpy_helper.from_array((rng.random(nn_ * nb) * 0.05 + 0.01).astype(np.float32), f"s{i}"),
                  numpy_helper.from_array(rng.integers(0, 256, (nn_ * -(-nb // 2),), dtype=np.uint8), f"z{i}")]
        nodes.append(helper.make_node("MatMulNBits", [x, f"b{i}", f"s{i}", f"z{i}"], [f"h{i}"], domain="com.microsoft",
                                      K=kk, N=nn_, bits=4, block_size=block))
        x = f"h{i}"
        if i == 0:
            nodes.append(helper.make_node("Relu", [x], ["r0"]))
            x = "r0"
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, k])],
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [8, n])], inits, domains=["com.microsoft"])
    return model, {"x": rng.standard_normal((8, k)).astype(np.float32)}


def _sharded_antiquant(path, tp):
    """The model at `path` after -O2 and shard-tensor-parallel: (weight shape, scale shape) per
    nn.weight_quant_matmul, and the collectives' op names."""
    from ascendir.transforms.nn.shard_tensor_parallel import shard_module

    module, weights = compile_model(path, TARGET, opt_level="O2", emit="nn")
    sharded, _ = shard_module(module, weights, tp)
    mms = [(tuple(op.weight.type.get_shape()), tuple(op.scale.type.get_shape())) for op in sharded.walk()
           if op.name == "nn.weight_quant_matmul"]
    return mms, [op.name for op in sharded.walk() if op.name.startswith("nn.all_")]


@pytest.mark.parametrize("build, want_mms", [
    (lambda: _nbits_mlp(), [((64, 64), (2, 64)), ((64, 64), (2, 64))]),  # column (N 128 / 2), row (K 128 / 2: 2 of 4 blocks)
    (lambda: _weight_only_qdq_mlp(np.int8, True, True), [((64, 24), (1, 24)), ((24, 16), (1, 16))]),  # per-channel: row, scale replicated
])
def test_antiquant_splits_under_tp_and_equals_onnxruntime(tmp_path, build, want_mms) -> None:
    """nn.weight_quant_matmul is split as the fp16 MatMul is (it was replicated: every rank read
    the whole int4 / int8 weight): column-parallel (weight, scales and zero points by columns),
    then row-parallel (by rows, the scales by their groups, or replicated when per-channel),
    one all_reduce. `run --tp 2` (the ranks lowered and simulated) equals onnxruntime without
    graph optimisations (its optimised QDQ path rounds differently: the one-device run differs
    from it by 3e-3 as much), as the one-device tests above compare."""
    model, feeds = build()
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    mms, colls = _sharded_antiquant(path, 2)
    assert mms == want_mms and colls == ["nn.all_reduce"]
    np.savez(tmp_path / "in.npz", **feeds)
    r = run_cli("run", path, "--tp", "2", "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz")
    assert r.exit_code == 0, r.output
    want = _ort(model, feeds)[0]
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out[model.graph.output[0].name], want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_antiquant_corpus_model_under_tp_equals_onnxruntime(dtype: str) -> None:
    """The corpus MatMulNBits MLP (784 -> 300 -> 100 -> 10, 4-bit blocks of 32) at --tp 2: the
    first antiquant splits by columns (150 of 300 per rank); the next ones' 150 / 50 rows per
    rank are no whole blocks of 32, so their input is all-gathered and they split by columns
    too. Equals onnxruntime (the sharded, lowered ranks)."""
    mms, _ = _sharded_antiquant(QUANT / "mlp_nbits4" / "model.onnx", 2)
    assert [m[0] for m in mms] == [(784, 150), (300, 50), (100, 5)]
    r = run_cli("run", QUANT / "mlp_nbits4" / "model.onnx", "--tp", "2", "--dtype", dtype, "--check-ort")
    assert r.exit_code == 0 and r.output.startswith("PASS"), r.output


def test_forced_split_k_on_an_int8_matmul_names_int8_at_choose_tiling() -> None:
    """--tiling split_k=2 on mlp_qdq's int8 Gemms: choose-tiling refuses it on the first one,
    naming int8 and suggesting split_k=1 (was: the first two accepted, then the third refused for
    its K chunks, or with k=32 the lowering's 'an int8 matmul cannot split K' on the 28th matmul);
    the suggestion runs and matches onnxruntime."""
    from tests.cli_helpers import assert_clean_error

    model = QUANT / "mlp_qdq" / "model.onnx"
    for spec in ("split_k=2", "split_k=2,k=32"):
        line = assert_clean_error(run_cli("run", model, "-O0", "--tiling", spec), "nn.matmul #0 ('/0/Gemm')", "int8", "split_k=1")
        assert "cannot split K = " not in line
    r = run_cli("run", model, "-O0", "--check-ort", "--tiling", "split_k=1,k=32")
    assert r.exit_code == 0 and r.stdout.startswith("PASS"), r.output


def test_dtype_on_ir_text_is_refused(tmp_path) -> None:
    """`--dtype fp16` on IR text was ignored: the IR ran in its own (f32) types and a quantizing
    model's fp16 refusal was skipped. It is refused, naming the flag and the file, in `run` and
    `compile`; fp32 (no change) still runs."""
    from tests.cli_helpers import assert_clean_error

    ir = tmp_path / "q.mlir"
    r = run_cli("compile", QUANT / "mlp_qdq" / "model.onnx", "--emit", "nn", "-o", ir)
    assert r.exit_code == 0, r.output
    for cmd in (["run", ir, "--dtype", "fp16"], ["compile", ir, "--dtype", "bf16", "-o", tmp_path / "o.mlir"]):
        assert_clean_error(run_cli(*cmd), f"--dtype {cmd[3]} applies to .onnx models", str(ir), "carries its own types")
    assert not (tmp_path / "o.mlir").exists()
    r = run_cli("run", ir, "--dtype", "fp32")
    assert r.exit_code == 0 and "cycles" in r.output, r.output
