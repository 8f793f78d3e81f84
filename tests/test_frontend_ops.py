"""One test per ONNX op the frontend converts or folds: a tiny model run by onnxruntime, imported,
run by `run_nn`, compared (fp32: rtol 1e-5, atol 1e-6; exact for integer/bool/data movement).

Opset variants are covered where an attribute became an input (Reduce*, Squeeze/Unsqueeze, Split,
Clip, Softmax semantics before 13)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from ascendir.dialects import nn
from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from ascendir.interpreter.exec.nn_reference import run_nn
from onnx_builders import check_against_onnxruntime, compute_ops, make_model

RNG = np.random.default_rng(7)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def node(op: str, inputs: list[str], outputs: list[str] | None = None, **attrs) -> "helper.NodeProto":
    outputs = outputs or ["y"]
    return helper.make_node(op, inputs, outputs, name=f"{op.lower()}_{outputs[0]}", **attrs)


# ----------------------------------------------------------------------------------------------
# elementwise
# ----------------------------------------------------------------------------------------------
UNARY = {
    "Relu": "nn.relu", "Sigmoid": "nn.sigmoid", "Tanh": "nn.tanh", "Exp": "nn.exp", "Log": "nn.log",
    "Sqrt": "nn.sqrt", "Reciprocal": "nn.reciprocal", "Neg": "nn.neg", "Abs": "nn.abs", "Erf": "nn.erf",
    "Sin": "nn.sin", "Cos": "nn.cos", "Floor": "nn.floor", "Ceil": "nn.ceil",
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op: str) -> None:
    x = randn(2, 3, 8) * 3
    if op in ("Log", "Sqrt", "Reciprocal"):
        x = np.abs(x) + 0.1
    check_against_onnxruntime(make_model([node(op, ["x"])], {"x": x}, ["y"]), {"x": x}, expect_ops=[UNARY[op]])


def test_not() -> None:
    x = RNG.random((3, 5)) > 0.5
    model = make_model([node("Not", ["x"])], {"x": x}, ["y"])
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.not"])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate: str) -> None:
    x = randn(4, 16) * 3
    model = make_model([node("Gelu", ["x"], approximate=approximate)], {"x": x}, ["y"], opset=20)
    module = check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.gelu"])
    gelu = next(op for op in module.walk() if isinstance(op, nn.GeluOp))
    assert gelu.approximate.data == approximate


def test_leaky_relu() -> None:
    x = randn(3, 7)
    model = make_model([node("LeakyRelu", ["x"], alpha=0.2)], {"x": x}, ["y"])
    check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.leaky_relu"])


BINARY = {
    "Add": "nn.add", "Sub": "nn.sub", "Mul": "nn.mul", "Div": "nn.div", "Pow": "nn.pow",
}
COMPARISON = {
    "Equal": "nn.equal", "Less": "nn.less", "LessOrEqual": "nn.less_equal", "Greater": "nn.greater",
    "GreaterOrEqual": "nn.greater_equal",
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_broadcasting(op: str) -> None:
    a, b = randn(2, 3, 4), randn(3, 1)
    if op == "Pow":
        a = np.abs(a) + 0.5
    model = make_model([node(op, ["a", "b"])], {"a": a, "b": b}, ["y"])
    check_against_onnxruntime(model, {"a": a, "b": b}, expect_ops=[BINARY[op]])


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_with_initializer(op: str) -> None:
    a, w = randn(2, 5), np.abs(randn(5)) + 0.5
    model = make_model([node(op, ["a", "w"])], {"a": np.abs(a) + 0.5}, ["y"], initializers={"w": w})
    check_against_onnxruntime(model, {"a": np.abs(a) + 0.5}, expect_ops=[BINARY[op]])


@pytest.mark.parametrize("op", sorted(COMPARISON))
def test_comparison(op: str) -> None:
    a = RNG.integers(-3, 3, (4, 6)).astype(np.float32)
    b = RNG.integers(-3, 3, (6,)).astype(np.float32)
    model = make_model([node(op, ["a", "b"])], {"a": a, "b": b}, ["y"])
    check_against_onnxruntime(model, {"a": a, "b": b}, exact=True, expect_ops=[COMPARISON[op]])


@pytest.mark.parametrize("op", ["And", "Or"])
def test_logical(op: str) -> None:
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((1, 4)) > 0.5
    model = make_model([node(op, ["a", "b"])], {"a": a, "b": b}, ["y"])
    check_against_onnxruntime(model, {"a": a, "b": b}, exact=True, expect_ops=[f"nn.{op.lower()}"])


def test_integer_div_truncates_toward_zero() -> None:
    a = np.array([7, -7, 7, -7, 0, 9], np.int64)
    b = np.array([2, 2, -2, -2, 3, -4], np.int64)
    model = make_model([node("Div", ["a", "b"])], {"a": a, "b": b}, ["y"])
    check_against_onnxruntime(model, {"a": a, "b": b}, exact=True, expect_ops=["nn.div"])


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_mod(dtype) -> None:
    a = np.array([7, -7, 7, -7, 0, 9], dtype)
    b = np.array([2, 3, -2, -3, 3, -4], dtype)
    model = make_model([node("Mod", ["a", "b"])], {"a": a, "b": b}, ["y"])
    check_against_onnxruntime(model, {"a": a, "b": b}, exact=True, expect_ops=["nn.mod"])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_mod_fmod_takes_the_dividend_sign(dtype) -> None:
    a = np.array([-4.3, 7.2, 5.0, 4.3, -7.2, 8.0, -9.0]).astype(dtype)
    b = np.array([2.1, -3.4, 8.0, -2.1, 3.4, 5.0, 2.0]).astype(dtype)
    model = make_model([node("Mod", ["a", "b"], fmod=1)], {"a": a, "b": b}, ["y"])
    check_against_onnxruntime(model, {"a": a, "b": b}, exact=True, expect_ops=["nn.fmod"])


def test_float_mod_takes_the_divisor_sign_with_ieee_edge_cases() -> None:
    # onnxruntime refuses fmod=0 on floats; the ONNX reference (and Python's %) is np.mod.
    a = np.array([-4.3, 7.2, 0.0, -3.0, 3.0, -1.0, 1.0, np.inf, 1.0, np.nan], np.float32)
    b = np.array([2.1, -3.4, -2.0, np.inf, np.inf, -np.inf, -np.inf, 2.0, 0.0, 2.0], np.float32)
    module, weights = import_onnx(make_model([node("Mod", ["a", "b"])], {"a": a, "b": b}, ["y"]))
    assert compute_ops(module) == ["nn.mod"]
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_array_equal(run_nn(module, weights, {"a": a, "b": b})["y"], np.mod(a, b))


def test_pow_with_integer_exponent_input() -> None:
    # ONNX lets the exponent type differ from the base; nn.pow gets a cast.
    x, e = np.abs(randn(3, 4)) + 0.5, np.array([1, 2, 3, 0], np.int64)
    model = make_model([node("Pow", ["x", "e"])], {"x": x, "e": e}, ["y"])
    check_against_onnxruntime(model, {"x": x, "e": e}, expect_ops=["nn.pow", "nn.cast"])


def test_pow_with_integer_exponent_constant() -> None:
    x = randn(3, 4)
    model = make_model([node("Pow", ["x", "e"])], {"x": x}, ["y"], initializers={"e": np.array(2, np.int64)})
    module = check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.pow"])
    assert "nn.cast" not in compute_ops(module)  # the constant exponent is converted at import


@pytest.mark.parametrize("op", ["Max", "Min", "Sum"])
def test_variadic(op: str) -> None:
    a, b, c = randn(2, 3), randn(3), randn(1, 3)
    model = make_model([node(op, ["a", "b", "c"])], {"a": a, "b": b, "c": c}, ["y"])
    expect = {"Max": "nn.max", "Min": "nn.min", "Sum": "nn.add"}[op]
    check_against_onnxruntime(model, {"a": a, "b": b, "c": c}, expect_ops=[expect])


def test_where() -> None:
    c, x, y = RNG.random((2, 1, 4)) > 0.5, randn(3, 4), randn(2, 3, 1)
    model = make_model([node("Where", ["c", "x", "z"])], {"c": c, "x": x, "z": y}, ["y"])
    check_against_onnxruntime(model, {"c": c, "x": x, "z": y}, exact=True, expect_ops=["nn.where"])


@pytest.mark.parametrize(
    "src, to, onnx_to",
    [
        (np.float32, np.int64, TensorProto.INT64),
        (np.int64, np.float32, TensorProto.FLOAT),
        (np.float32, np.bool_, TensorProto.BOOL),
        (np.int64, np.bool_, TensorProto.BOOL),
        (np.float32, np.float16, TensorProto.FLOAT16),
        (np.int64, np.int32, TensorProto.INT32),
    ],
)
def test_cast(src, to, onnx_to) -> None:
    x = (randn(4, 5) * 5).astype(src)
    model = make_model([node("Cast", ["x"], to=onnx_to)], {"x": x}, ["y"])
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.cast"])


def test_cast_to_same_type_is_forwarded() -> None:
    x = randn(2, 3)
    model = make_model([node("Cast", ["x"], ["c"], to=TensorProto.FLOAT), node("Relu", ["c"])], {"x": x}, ["y"])
    module = check_against_onnxruntime(model, {"x": x})
    assert compute_ops(module) == ["nn.relu"]


def test_cast_like() -> None:
    x, like = randn(2, 3) * 4, np.zeros(1, np.int32)
    model = make_model([node("CastLike", ["x", "t"])], {"x": x, "t": like}, ["y"])
    check_against_onnxruntime(model, {"x": x, "t": like}, exact=True, expect_ops=["nn.cast"])


@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 0.3), (-0.2, None)])
def test_clip_opset13_inputs(bounds) -> None:
    x = randn(4, 6)
    inits, names = {}, ["x"]
    for key, bound in zip(("lo", "hi"), bounds):
        if bound is not None:
            inits[key] = np.array(bound, np.float32)
        names.append(key if bound is not None else "")
    model = make_model([node("Clip", names)], {"x": x}, ["y"], initializers=inits, opset=13)
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.clip"])


@pytest.mark.parametrize("names, expect", [
    (["x", "lo", "hi"], ["nn.max", "nn.min"]), (["x", "", "hi"], ["nn.min"]), (["x", "lo"], ["nn.max"]),
])
def test_clip_runtime_bounds(names, expect) -> None:
    x = randn(4, 6)
    feeds = {"x": x} | {k: np.array(v, np.float32) for k, v in (("lo", 0.4), ("hi", -0.1)) if k in names}
    model = make_model([node("Clip", names)], feeds, ["y"], opset=13)
    module = check_against_onnxruntime(model, feeds, exact=True)
    assert compute_ops(module) == expect


def test_clip_opset6_attributes() -> None:
    x = randn(4, 6)
    model = make_model([node("Clip", ["x"], min=-0.25, max=0.75)], {"x": x}, ["y"], opset=6)
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.clip"])


def test_clip_integer() -> None:
    x = RNG.integers(-10, 10, (3, 5)).astype(np.int64)
    inits = {"lo": np.array(-3, np.int64), "hi": np.array(4, np.int64)}
    model = make_model([node("Clip", ["x", "lo", "hi"])], {"x": x}, ["y"], initializers=inits)
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.max", "nn.min"])


# ----------------------------------------------------------------------------------------------
# matrix products
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((4, 8), (8, 5)), ((2, 3, 4, 8), (8, 5)), ((2, 1, 4, 8), (3, 8, 5)), ((8,), (2, 8, 5)), ((2, 4, 8), (8,))],
)
def test_matmul(a_shape, b_shape) -> None:
    a, b = randn(*a_shape), randn(*b_shape)
    model = make_model([node("MatMul", ["a", "b"])], {"a": a, "b": b}, ["y"])
    check_against_onnxruntime(model, {"a": a, "b": b}, expect_ops=["nn.matmul"])


def test_matmul_with_weight() -> None:
    a, w = randn(3, 16), randn(16, 80)  # 5 KiB: a weight, not an inline constant
    model = make_model([node("MatMul", ["a", "w"])], {"a": a}, ["y"], initializers={"w": w})
    module = check_against_onnxruntime(model, {"a": a}, expect_ops=["nn.matmul"])
    assert [op.weight_name for op in module.walk() if isinstance(op, nn.WeightOp)] == ["w"]


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_gemm_transposes(trans_a: int, trans_b: int) -> None:
    a = randn(6, 4) if trans_a else randn(4, 6)
    b = randn(5, 6) if trans_b else randn(6, 5)
    c = randn(5)
    model = make_model([node("Gemm", ["a", "b", "c"], transA=trans_a, transB=trans_b)], {"a": a, "b": b, "c": c}, ["y"])
    module = check_against_onnxruntime(model, {"a": a, "b": b, "c": c}, expect_ops=["nn.matmul", "nn.add"])
    assert compute_ops(module).count("nn.transpose") == trans_a + trans_b


def test_gemm_weight_transpose_is_folded() -> None:
    a, w, bias = randn(4, 32), randn(40, 32), randn(40)
    model = make_model([node("Gemm", ["a", "w", "b"], transB=1)], {"a": a}, ["y"], initializers={"w": w, "b": bias})
    module = check_against_onnxruntime(model, {"a": a})
    assert compute_ops(module) == ["nn.matmul", "nn.add"]
    # initializers are weights whatever their size: neither is printed into the IR
    assert [op.weight_name for op in module.walk() if isinstance(op, nn.WeightOp)] == ["w.T", "b"]


def test_small_initializer_is_a_weight_but_scalar_is_inline() -> None:
    a, w, eps = randn(2, 3), randn(3, 2), np.array(1e-5, np.float32)
    model = make_model([node("MatMul", ["a", "w"], ["m"]), node("Add", ["m", "eps"])], {"a": a}, ["y"], initializers={"w": w, "eps": eps})
    module = check_against_onnxruntime(model, {"a": a})
    assert [op.weight_name for op in module.walk() if isinstance(op, nn.WeightOp)] == ["w"]
    assert any(isinstance(op, nn.ConstantOp) for op in module.walk())


@pytest.mark.parametrize("c_is_constant", [False, True])
def test_gemm_alpha_beta(c_is_constant: bool) -> None:
    a, b, c = randn(4, 6), randn(6, 5), randn(4, 5)
    gemm = node("Gemm", ["a", "b", "c"], alpha=0.5, beta=2.0)
    feeds = {"a": a, "b": b} | ({} if c_is_constant else {"c": c})
    model = make_model([gemm], feeds, ["y"], initializers={"c": c} if c_is_constant else None)
    module = check_against_onnxruntime(model, feeds, expect_ops=["nn.matmul", "nn.add"])
    # alpha scales the product; beta * C is folded when C is a constant
    assert compute_ops(module).count("nn.mul") == (1 if c_is_constant else 2)


def test_gemm_without_c() -> None:
    a, b = randn(4, 6), randn(6, 5)
    model = make_model([node("Gemm", ["a", "b"])], {"a": a, "b": b}, ["y"])
    module = check_against_onnxruntime(model, {"a": a, "b": b})
    assert compute_ops(module) == ["nn.matmul"]


# ----------------------------------------------------------------------------------------------
# softmax, normalization, reductions
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax_opset13(axis: int) -> None:
    x = randn(3, 4, 5) * 4
    model = make_model([node("Softmax", ["x"], axis=axis)], {"x": x}, ["y"], opset=13)
    check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.softmax"])


def test_softmax_opset11_coerces_to_2d() -> None:
    # Before opset 13, Softmax(axis=1) on [3, 4, 5] normalizes over the 20 trailing elements.
    x = randn(3, 4, 5) * 4
    model = make_model([node("Softmax", ["x"], axis=1)], {"x": x}, ["y"], opset=11)
    check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.softmax", "nn.reshape"])


@pytest.mark.parametrize("axis, with_bias", [(-1, True), (-1, False), (1, True)])
def test_layer_normalization(axis: int, with_bias: bool) -> None:
    x = randn(2, 6, 16) * 2 + 1
    norm_shape = x.shape[axis:] if axis >= 0 else x.shape[axis:]
    inits = {"s": randn(*norm_shape)} | ({"b": randn(*norm_shape)} if with_bias else {})
    ln = node("LayerNormalization", ["x", "s", "b"] if with_bias else ["x", "s"], axis=axis, epsilon=1e-3)
    model = make_model([ln], {"x": x}, ["y"], initializers=inits)
    check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.layer_norm"])


@pytest.mark.parametrize("axis, dtype", [(-1, np.float32), (1, np.float32), (0, np.float16)])
def test_layer_normalization_mean_and_inv_std_dev(axis: int, dtype) -> None:
    x = (randn(2, 6, 16) * 2 + 1).astype(dtype)
    inits = {"s": randn(*x.shape[axis:]).astype(dtype)}
    ln = node("LayerNormalization", ["x", "s"], ["y", "mean", "inv_std"], axis=axis, epsilon=1e-3)
    model = make_model([ln], {"x": x}, ["y", "mean", "inv_std"], initializers=inits)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    check_against_onnxruntime(model, {"x": x}, rtol=tol, atol=tol, expect_ops=["nn.layer_norm"])


def test_batch_normalization_runtime_statistics() -> None:
    feeds = {"x": randn(2, 3, 4, 5), "s": randn(3), "b": randn(3), "m": randn(3), "v": np.abs(randn(3)) + 0.5}
    model = make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-2)], feeds, ["y"], opset=15)
    check_against_onnxruntime(model, feeds, expect_ops=["nn.rsqrt"])


def test_batch_normalization_training_mode_running_statistics() -> None:
    feeds = {"x": randn(2, 3, 4, 5) * 2 + 1, "m": randn(3), "v": np.abs(randn(3)) + 0.5}
    inits = {"s": randn(3), "b": randn(3)}
    bn = node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1, momentum=0.8)
    model = make_model([bn], feeds, ["y", "rm", "rv"], initializers=inits, opset=15)
    check_against_onnxruntime(model, feeds, rtol=1e-5, atol=1e-5, expect_ops=["nn.reduce_mean"])


def test_batch_normalization_inference() -> None:
    x = randn(2, 3, 5, 5)
    inits = {"s": randn(3), "b": randn(3), "m": randn(3), "v": np.abs(randn(3)) + 0.5}
    model = make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)], {"x": x}, ["y"], initializers=inits, opset=15)
    module = check_against_onnxruntime(model, {"x": x})
    assert compute_ops(module) == ["nn.mul", "nn.add"]


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean_axes_attribute_or_input(opset: int, keepdims: int) -> None:
    x = randn(2, 3, 4)
    if opset < 18:
        nodes, inits = [node("ReduceMean", ["x"], axes=[-1, 0], keepdims=keepdims)], {}
    else:
        nodes, inits = [node("ReduceMean", ["x", "axes"], keepdims=keepdims)], {"axes": np.array([-1, 0], np.int64)}
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits, opset=opset)
    module = check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.reduce_mean"])
    op = next(op for op in module.walk() if isinstance(op, nn.ReduceMeanOp))
    assert list(op.axes.get_values()) == [0, 2]


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_mean_without_axes_reduces_all(opset: int) -> None:
    x = randn(2, 3, 4)
    model = make_model([node("ReduceMean", ["x"])], {"x": x}, ["y"], opset=opset)
    check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.reduce_mean"])


def test_reduce_noop_with_empty_axes_forwards() -> None:
    x = randn(2, 3)
    model = make_model([node("ReduceSum", ["x"], noop_with_empty_axes=1), node("Relu", ["y"], ["z"])], {"x": x}, ["z"], opset=13)
    module = check_against_onnxruntime(model, {"x": x})
    assert compute_ops(module) == ["nn.relu"]


@pytest.mark.parametrize(
    "op, opset",
    [("ReduceSum", 11), ("ReduceSum", 13), ("ReduceMax", 13), ("ReduceMax", 18), ("ReduceMin", 18), ("ReduceProd", 18)],
)
def test_reductions(op: str, opset: int) -> None:
    x = randn(3, 4, 5)
    as_input = opset >= (13 if op == "ReduceSum" else 18)
    if as_input:
        nodes, inits = [node(op, ["x", "axes"], keepdims=0)], {"axes": np.array([1], np.int64)}
    else:
        nodes, inits = [node(op, ["x"], axes=[1], keepdims=0)], {}
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits, opset=opset)
    expect = "nn." + {"ReduceSum": "reduce_sum", "ReduceMax": "reduce_max", "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod"}[op]
    check_against_onnxruntime(model, {"x": x}, expect_ops=[expect])


@pytest.mark.parametrize("op, expect", [("GlobalAveragePool", "nn.reduce_mean"), ("GlobalMaxPool", "nn.reduce_max")])
def test_global_pool(op: str, expect: str) -> None:
    x = randn(2, 3, 5, 4)
    check_against_onnxruntime(make_model([node(op, ["x"])], {"x": x}, ["y"]), {"x": x}, expect_ops=[expect])


@pytest.mark.parametrize("largest", [1, 0])
def test_topk(largest: int) -> None:
    x = RNG.integers(0, 6, (4, 9)).astype(np.float32)  # ties: the lower index wins
    model = make_model(
        [node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=largest)], {"x": x},
        ["v", "i"], initializers={"k": np.array([3], np.int64)},
    )
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.topk"])


# ----------------------------------------------------------------------------------------------
# convolution and pooling
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "attrs, in_c, out_c, kernel, with_bias",
    [
        ({}, 3, 4, (3, 3), True),
        ({"pads": [1, 2, 0, 1], "strides": [2, 1]}, 3, 4, (3, 2), False),
        ({"dilations": [2, 2], "pads": [2, 2, 2, 2]}, 2, 3, (3, 3), True),
        ({"group": 4, "pads": [1, 1, 1, 1]}, 4, 4, (3, 3), True),  # depthwise
        ({"group": 2}, 4, 6, (1, 1), False),
        ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, 3, 4, (4, 4), True),
        ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, 3, 4, (4, 4), True),
        ({"auto_pad": "VALID", "strides": [3, 2]}, 3, 4, (3, 3), True),
    ],
)
def test_conv2d(attrs, in_c, out_c, kernel, with_bias: bool) -> None:
    x = randn(2, in_c, 9, 8)
    inits = {"w": randn(out_c, in_c // attrs.get("group", 1), *kernel)} | ({"b": randn(out_c)} if with_bias else {})
    conv = node("Conv", ["x", "w", "b"] if with_bias else ["x", "w"], **attrs)
    check_against_onnxruntime(make_model([conv], {"x": x}, ["y"], initializers=inits), {"x": x}, expect_ops=["nn.conv2d"])


def test_conv1d_runs_as_conv2d() -> None:
    x = randn(2, 3, 11)
    conv = node("Conv", ["x", "w", "b"], pads=[1, 2], strides=[2])
    inits = {"w": randn(5, 3, 4), "b": randn(5)}
    check_against_onnxruntime(make_model([conv], {"x": x}, ["y"], initializers=inits), {"x": x}, expect_ops=["nn.conv2d"])


def test_conv_with_runtime_weight() -> None:
    x, w = randn(1, 2, 6, 6), randn(3, 2, 3, 3)
    model = make_model([node("Conv", ["x", "w"], pads=[1, 1, 1, 1])], {"x": x, "w": w}, ["y"])
    check_against_onnxruntime(model, {"x": x, "w": w}, expect_ops=["nn.conv2d"])


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("MaxPool", {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1}),
        ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 1]}),
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
        ("AveragePool", {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1}),
        ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0], "ceil_mode": 1, "count_include_pad": 1}),
    ],
)
def test_pool2d(op: str, attrs) -> None:
    x = randn(2, 3, 9, 8)
    model = make_model([node(op, ["x"], **attrs)], {"x": x}, ["y"], opset=19)
    check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.pool2d"])


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("MaxPool", {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [1, 1, 0, 0, 1, 1], "dilations": [1, 2, 1]}),
        ("AveragePool", {"kernel_shape": [3, 2, 3], "strides": [2, 2, 2], "pads": [1, 0, 1, 1, 0, 0], "ceil_mode": 1}),
        ("AveragePool", {"kernel_shape": [3, 3, 2], "strides": [2, 2, 2], "pads": [1, 1, 0, 1, 0, 1], "ceil_mode": 1, "count_include_pad": 1}),
    ],
)
def test_pool3d_runs_as_two_pool2d(op: str, attrs) -> None:
    x = randn(2, 3, 7, 8, 9)
    model = make_model([node(op, ["x"], **attrs)], {"x": x}, ["y"], opset=19)
    module = check_against_onnxruntime(model, {"x": x})
    assert compute_ops(module).count("nn.pool2d") == 2


@pytest.mark.parametrize(
    "shape, attrs",
    [
        ((2, 3, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((2, 3, 9, 8), {"kernel_shape": [2, 3], "strides": [2, 1], "dilations": [2, 1], "storage_order": 1}),
        ((1, 2, 7, 5), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1, "storage_order": 1}),
        ((2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ],
)
def test_maxpool_indices(shape, attrs) -> None:
    x = randn(*shape)
    model = make_model([node("MaxPool", ["x"], ["y", "i"], **attrs)], {"x": x}, ["y", "i"], opset=12)
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.pool2d", "nn.add"])


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool1d_runs_as_pool2d(op: str) -> None:
    x = randn(2, 3, 10)
    model = make_model([node(op, ["x"], kernel_shape=[3], strides=[2], pads=[1, 1])], {"x": x}, ["y"])
    check_against_onnxruntime(model, {"x": x}, expect_ops=["nn.pool2d"])


# ----------------------------------------------------------------------------------------------
# data movement
# ----------------------------------------------------------------------------------------------
def test_identity_is_forwarded() -> None:
    x = randn(2, 3)
    model = make_model([node("Identity", ["x"], ["i"]), node("Neg", ["i"])], {"x": x}, ["y"])
    module = check_against_onnxruntime(model, {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.neg"]


def test_identity_of_weight_keeps_one_weight() -> None:
    x, w = randn(2, 32), randn(32, 40)
    nodes = [node("Identity", ["w"], ["w2"]), node("MatMul", ["x", "w"], ["a"]), node("MatMul", ["x", "w2"], ["b"]), node("Add", ["a", "b"])]
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], initializers={"w": w}), {"x": x})
    assert [op.weight_name for op in module.walk() if isinstance(op, nn.WeightOp)] == ["w"]


def test_dropout_inference_is_forwarded() -> None:
    x = randn(2, 3)
    model = make_model([node("Dropout", ["x"], ["d"], seed=1), node("Neg", ["d"])], {"x": x}, ["y"], opset=13)
    module = check_against_onnxruntime(model, {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.neg"]


def test_dropout_training_with_ratio_0_keeps_everything() -> None:
    x = randn(2, 3)
    inits = {"r": np.array(0.0, np.float32), "t": np.array(True)}
    model = make_model([node("Dropout", ["x", "r", "t"], ["d", "mask"], seed=1), node("Neg", ["d"])], {"x": x}, ["y", "mask"], inits, opset=13)
    module = check_against_onnxruntime(model, {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.neg"]


def test_dropout_training_with_a_ratio_needs_a_random_mask() -> None:
    x = randn(2, 3)
    inits = {"r": np.array(0.25, np.float32), "t": np.array(True)}
    model = make_model([node("Dropout", ["x", "r", "t"], ["y"])], {"x": x}, ["y"], inits, opset=13)
    with pytest.raises(AscendirError, match=r"Dropout 'dropout_y': training_mode=true with ratio 0.25 needs a random mask"):
        import_onnx(model)


@pytest.mark.parametrize(
    "shape, allowzero, expect",
    [([0, -1], 0, (2, 12)), ([2, 3, -1], 0, (2, 3, 4)), ([-1], 0, (24,)), ([0, 0, 4], 0, (2, 3, 4)), ([2, 12], 1, (2, 12))],
)
def test_reshape(shape, allowzero, expect) -> None:
    x = randn(2, 3, 4)
    model = make_model([node("Reshape", ["x", "s"], allowzero=allowzero)], {"x": x}, ["y"], initializers={"s": np.array(shape, np.int64)}, opset=14)
    module = check_against_onnxruntime(model, {"x": x}, exact=True)
    assert module.body.block.first_op.function_type.outputs.data[0].get_shape() == expect


@pytest.mark.parametrize("axis", [0, 1, 2, -1, 3])
def test_flatten(axis: int) -> None:
    x = randn(2, 3, 4)
    check_against_onnxruntime(make_model([node("Flatten", ["x"], axis=axis)], {"x": x}, ["y"]), {"x": x}, exact=True)


@pytest.mark.parametrize("opset, axes", [(13, [1, -1]), (11, [1, -1]), (13, None)])
def test_squeeze(opset: int, axes) -> None:
    x = randn(2, 1, 3, 1)
    if axes is None:
        nodes, inits = [node("Squeeze", ["x"])], {}
    elif opset >= 13:
        nodes, inits = [node("Squeeze", ["x", "a"])], {"a": np.array(axes, np.int64)}
    else:
        nodes, inits = [node("Squeeze", ["x"], axes=axes)], {}
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], initializers=inits, opset=opset), {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.reshape"]


@pytest.mark.parametrize("opset, axes", [(13, [0, -1]), (11, [0, 3]), (13, [2])])
def test_unsqueeze(opset: int, axes) -> None:
    x = randn(2, 3)
    if opset >= 13:
        nodes, inits = [node("Unsqueeze", ["x", "a"])], {"a": np.array(axes, np.int64)}
    else:
        nodes, inits = [node("Unsqueeze", ["x"], axes=axes)], {}
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], initializers=inits, opset=opset), {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.reshape"]


@pytest.mark.parametrize("perm", [None, [0, 2, 1, 3], [3, 0, 2, 1]])
def test_transpose(perm) -> None:
    x = randn(2, 3, 4, 5)
    attrs = {} if perm is None else {"perm": perm}
    check_against_onnxruntime(make_model([node("Transpose", ["x"], **attrs)], {"x": x}, ["y"]), {"x": x}, exact=True, expect_ops=["nn.transpose"])


def test_concat_with_constant_and_negative_axis() -> None:
    a, b = randn(2, 3, 4), randn(2, 3, 2)
    model = make_model([node("Concat", ["a", "c", "b"], axis=-1)], {"a": a, "b": b}, ["y"], initializers={"c": randn(2, 3, 1)})
    module = check_against_onnxruntime(model, {"a": a, "b": b}, exact=True, expect_ops=["nn.concat"])
    op = next(op for op in module.walk() if isinstance(op, nn.ConcatOp))
    assert op.axis.value.data == 2


@pytest.mark.parametrize(
    "starts, ends, axes, steps",
    [
        ([1], [3], [1], [1]),
        ([0, 16], [9223372036854775807, -1], [2, 3], [1, 1]),
        ([-1], [-9223372036854775807], [3], [-1]),
        ([5, -2], [0, 1], [3, 1], [-2, -1]),
        ([0], [100], [-1], [3]),
        ([2], [2], [1], [1]),
    ],
)
def test_slice(starts, ends, axes, steps) -> None:
    x = randn(2, 4, 5, 20)
    inits = {k: np.array(v, np.int64) for k, v in zip(("st", "en", "ax", "sp"), (starts, ends, axes, steps))}
    model = make_model([node("Slice", ["x", "st", "en", "ax", "sp"])], {"x": x}, ["y"], initializers=inits, opset=13)
    # a negative step slices in ascending order, then reverses with a gather
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.slice"] if min(steps) > 0 else ["nn.gather"])


def test_slice_opset9_attributes() -> None:
    x = randn(4, 6)
    model = make_model([node("Slice", ["x"], starts=[1, -4], ends=[3, 1000], axes=[0, 1])], {"x": x}, ["y"], opset=9)
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.slice"])


@pytest.mark.parametrize("opset, split", [(13, [2, 3, 1]), (11, [2, 3, 1]), (13, None), (18, None)])
def test_split(opset: int, split) -> None:
    x = randn(4, 6) if split or opset < 18 else randn(4, 7)  # opset 18: uneven last chunk
    outs = ["y0", "y1", "y2"]
    attrs = {"axis": 1}
    if opset >= 18 and split is None:
        attrs["num_outputs"] = 3
    if split is not None and opset >= 13:
        nodes, inits = [node("Split", ["x", "s"], outs, **attrs)], {"s": np.array(split, np.int64)}
    else:
        nodes, inits = [node("Split", ["x"], outs, **attrs, **({"split": split} if split else {}))], {}
    model = make_model(nodes, {"x": x}, outs, initializers=inits, opset=opset)
    module = check_against_onnxruntime(model, {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.slice"] * 3


@pytest.mark.parametrize("in_shape, shape", [((3, 1), (2, 3, 4)), ((1, 4), (3, 1)), ((2, 1, 1), (1, 5))])
def test_expand(in_shape, shape) -> None:
    x = randn(*in_shape)
    model = make_model([node("Expand", ["x", "s"])], {"x": x}, ["y"], initializers={"s": np.array(shape, np.int64)})
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.expand"])


@pytest.mark.parametrize("repeats", [[2, 1, 3], [1, 2, 1], [1, 1, 1]])
def test_tile(repeats) -> None:
    x = randn(2, 3, 4)
    model = make_model([node("Tile", ["x", "r"]), node("Neg", ["y"], ["z"])], {"x": x}, ["z"], initializers={"r": np.array(repeats, np.int64)})
    check_against_onnxruntime(model, {"x": x}, exact=True)


def test_gather_embedding_lookup() -> None:
    ids, table = RNG.integers(0, 50, (2, 7)).astype(np.int64), randn(50, 32)
    model = make_model([node("Gather", ["w", "ids"], axis=0)], {"ids": ids}, ["y"], initializers={"w": table})
    check_against_onnxruntime(model, {"ids": ids}, exact=True, expect_ops=["nn.gather"])


@pytest.mark.parametrize("indices, axis", [([[2, -1], [0, 0]], 1), (-2, 2), ([3, 1], -1)])
def test_gather_constant_indices(indices, axis: int) -> None:
    x = randn(3, 4, 5)
    model = make_model([node("Gather", ["x", "i"], axis=axis)], {"x": x}, ["y"], initializers={"i": np.array(indices, np.int64)})
    module = check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.gather"])
    idx = next(op for op in module.walk() if isinstance(op, nn.GatherOp)).indices.owner
    assert np.all(np.frombuffer(idx.value.data.data, np.int64) >= 0)  # negatives normalized


def test_gather_of_all_rows_in_order_is_a_reshape() -> None:
    x = randn(6, 1)
    model = make_model([node("Gather", ["x", "i"], axis=0)], {"x": x}, ["y"], initializers={"i": np.arange(6, dtype=np.int64).reshape(1, 2, 3)})
    module = check_against_onnxruntime(model, {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.reshape"]


def test_gather_nd_dynamo_mask_form_is_a_reshape() -> None:
    # The dynamo llama export reads attention_mask[0, j] for every j with GatherND.
    mask = RNG.random((1, 8)) > 0.3
    idx = np.stack([np.zeros(8, np.int64), np.arange(8)], -1).reshape(1, 1, 1, 8, 2)
    model = make_model([node("GatherND", ["m", "i"])], {"m": mask}, ["y"], initializers={"i": idx}, opset=18)
    module = check_against_onnxruntime(model, {"m": mask}, exact=True)
    assert compute_ops(module) == ["nn.reshape"]


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_general(batch_dims: int) -> None:
    x = randn(2, 3, 4)
    idx = np.array([[[1, -1], [0, 2]], [[1, 0], [-2, 1]]], np.int64) if batch_dims == 0 else np.array([[[2], [0]], [[1], [1]]], np.int64)
    model = make_model([node("GatherND", ["x", "i"], batch_dims=batch_dims)], {"x": x}, ["y"], initializers={"i": idx}, opset=13)
    check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.gather"])


# ----------------------------------------------------------------------------------------------
# shape arithmetic folded at import
# ----------------------------------------------------------------------------------------------
def test_shape_gather_concat_reshape_chain_folds() -> None:
    x = randn(2, 6, 8)
    nodes = [
        node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Concat", ["b", "m1", "c4"], ["target"], axis=0),
        node("Reshape", ["x", "target"]),
    ]
    inits = {"i0": np.array([0], np.int64), "m1": np.array([-1], np.int64), "c4": np.array([4], np.int64)}
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], initializers=inits), {"x": x}, exact=True)
    assert compute_ops(module) == ["nn.reshape"]
    assert not [op for op in module.walk() if isinstance(op, (nn.ConstantOp, nn.WeightOp))]


def test_shape_with_start_end_and_size_fold() -> None:
    x = randn(2, 3, 4)
    nodes = [
        node("Shape", ["x"], ["s"], start=1, end=-1),  # [3]
        helper.make_node("Size", ["x"], ["n"]),  # 24
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["nf", "sf"], ["q"]),  # [8.]
        helper.make_node("Mul", ["x", "q"], ["y"]),
    ]
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], opset=15), {"x": x})
    assert compute_ops(module) == ["nn.mul"]


def test_constant_of_shape_range_and_causal_mask_fold() -> None:
    x = randn(1, 5, 5)
    nodes = [
        node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Range", ["zero", "n", "step"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "ax0"], ["row"]),
        helper.make_node("Unsqueeze", ["r", "ax1"], ["col"]),
        helper.make_node("LessOrEqual", ["row", "col"], ["keep"]),
        helper.make_node("ConstantOfShape", ["s"], ["neg"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [-1e9])),
        helper.make_node("Constant", [], ["zf"], value_float=0.0),
        helper.make_node("Where", ["keep", "zf", "neg"], ["mask"]),
        helper.make_node("Add", ["x", "mask"], ["masked"]),
        node("Softmax", ["masked"], axis=-1),
    ]
    inits = {
        "one": np.array(1, np.int64), "zero": np.array(0, np.int64), "step": np.array(1, np.int64),
        "ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64),
    }
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], initializers=inits), {"x": x})
    assert compute_ops(module) == ["nn.add", "nn.softmax"]


def test_fold_transpose_of_weight_makes_a_new_weight() -> None:
    x, w = randn(3, 40), randn(32, 40)
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]), node("MatMul", ["x", "wt"])]
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], initializers={"w": w}), {"x": x})
    assert compute_ops(module) == ["nn.matmul"]
    assert [op.weight_name for op in module.walk() if isinstance(op, nn.WeightOp)] == ["wt"]


def test_constant_output_is_materialized() -> None:
    x = randn(2, 3)
    nodes = [node("Relu", ["x"]), helper.make_node("Constant", [], ["c"], value_ints=[1, 2, 3])]
    model = make_model(nodes, {"x": x}, ["y", "c"])
    check_against_onnxruntime(model, {"x": x}, exact=True)


def test_scalar_outputs_and_constants_keep_rank_0() -> None:
    a, b = randn(6), randn(6)
    nodes = [
        node("MatMul", ["a", "b"], ["dot"]),  # 1-D x 1-D: a 0-d result
        helper.make_node("Constant", [], ["s"], value_float=2.0),  # 0-d
        helper.make_node("Constant", [], ["v"], value_floats=[2.0]),  # same bytes, shape [1]
        node("Mul", ["dot", "s"], ["p"]),
        node("Add", ["p", "v"]),
    ]
    module = check_against_onnxruntime(make_model(nodes, {"a": a, "b": b}, ["dot", "y"]), {"a": a, "b": b})
    assert len([op for op in module.walk() if isinstance(op, nn.ConstantOp)]) == 2


def test_small_constants_are_shared() -> None:
    x = randn(2, 3)
    nodes = [
        helper.make_node("Constant", [], ["c1"], value_float=2.0),
        helper.make_node("Constant", [], ["c2"], value_float=2.0),
        helper.make_node("Mul", ["x", "c1"], ["a"]),
        helper.make_node("Add", ["a", "c2"], ["y"]),
    ]
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"]), {"x": x})
    assert len([op for op in module.walk() if isinstance(op, nn.ConstantOp)]) == 1


# ----------------------------------------------------------------------------------------------
# element types
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dtype, onnx_type",
    [
        (np.float16, TensorProto.FLOAT16), (np.int64, TensorProto.INT64),
        (np.int32, TensorProto.INT32), (np.int8, TensorProto.INT8), (np.uint8, TensorProto.UINT8), (np.bool_, TensorProto.BOOL),
    ],
)
def test_element_types_of_inputs_constants_and_outputs(dtype, onnx_type) -> None:
    """Each ONNX element type maps to a builtin type, for arguments, constants and results."""
    x = (np.abs(randn(2, 3)) * 3).astype(dtype)
    c = (np.abs(randn(2, 5)) * 3).astype(dtype)
    nodes = [node("Concat", ["x", "c"], ["cat"], axis=1), node("Cast", ["cat"], ["f"], to=TensorProto.FLOAT), node("Cast", ["f"], to=onnx_type)]
    model = make_model(nodes, {"x": x}, ["f", "y"], initializers={"c": c})
    module = check_against_onnxruntime(model, {"x": x}, exact=True, expect_ops=["nn.concat"])
    main = module.body.block.first_op
    assert main.function_type.inputs.data[0].element_type == main.function_type.outputs.data[1].element_type


def test_bfloat16_constants_and_intermediates() -> None:
    # onnxruntime's Python API cannot feed bf16 arrays, so the bf16 tensors live inside the graph.
    x, c = randn(2, 3), randn(2, 5).astype(ml_dtypes.bfloat16)
    nodes = [
        node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16),
        node("Concat", ["xb", "c"], ["cat"], axis=1),
        node("Cast", ["cat"], to=TensorProto.FLOAT),
    ]
    module = check_against_onnxruntime(make_model(nodes, {"x": x}, ["y"], initializers={"c": c}), {"x": x}, exact=True)
    assert "bf16" in str(module)


def test_float16_compute() -> None:
    a, b = randn(4, 16).astype(np.float16), randn(16, 8).astype(np.float16)
    nodes = [node("MatMul", ["a", "b"], ["m"]), node("Softmax", ["m"], ["s"], axis=-1), node("Add", ["s", "m"])]
    # f16 results: one rounding of a float32 computation each, so compare at f16 precision.
    check_against_onnxruntime(make_model(nodes, {"a": a, "b": b}, ["y"]), {"a": a, "b": b}, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("with_c", [False, True])
def test_gemm_with_k_zero_is_beta_c(trans_a: int, with_c: bool) -> None:
    """K = 0: alpha · A @ B is an empty sum, zeros, as onnxruntime gives; C still adds (the node
    was refused as a zero-size matmul)."""
    a = np.zeros((0, 3) if trans_a else (3, 0), np.float32)
    b = np.zeros((0, 4), np.float32)
    inputs = ["a", "b"] + (["c"] if with_c else [])
    model = make_model([helper.make_node("Gemm", inputs, ["y"], transA=trans_a, alpha=3.0, beta=2.0)], {"a": a, "b": b}, ["y"],
                       initializers={"c": np.arange(4, dtype=np.float32)} if with_c else None)
    check_against_onnxruntime(model, {"a": a, "b": b})
