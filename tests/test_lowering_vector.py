"""convert-nn-to-ascend, vector templates: elementwise (broadcasting, cast, compare, where,
composites), reductions, softmax, layer_norm, rms_norm — simulated vs the numpy nn reference."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.dialects import ascend
from ascendir.errors import AscendirError
from lowering_harness import check, lower_text, module, printed, rand, ty


def unary(op: str, shape, dt="f32", attrs: str = "") -> str:
    return module([("x", shape, dt)], f"%y = nn.{op} %x {attrs} : ({ty(shape, dt)}) -> {ty(shape, dt)}", ("y", shape, dt))


def binary(op: str, a, b, out, dt="f32", out_dt=None) -> str:
    out_dt = out_dt or dt
    return module(
        [("a", a, dt), ("b", b, dt)],
        f"%y = nn.{op} %a, %b : ({ty(a, dt)}, {ty(b, dt)}) -> {ty(out, out_dt)}",
        ("y", out, out_dt),
    )


# ----------------------------------------------------------------------------------------------
# elementwise
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "a,b,out",
    [
        ((2, 3, 40), (40,), (2, 3, 40)),
        ((4, 1, 33), (1, 5, 33), (4, 5, 33)),
        ((4, 5, 1), (4, 1, 7), (4, 5, 7)),
        ((), (3, 17), (3, 17)),
        ((300, 700), (300, 1), (300, 700)),
    ],
)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max"])
def test_binary_broadcasting(op, a, b, out):
    inputs = {"a": rand(a), "b": rand(b, seed=1)}
    if op == "div":
        inputs["b"] = np.abs(inputs["b"]) + 0.5
    check(binary(op, a, b, out), inputs)


def test_large_elementwise_splits_over_cores_and_columns():
    shape = (2, 8, 20000)  # rows of 80 KB: column tiles of a row, the last one partial
    lowered = check(binary("add", shape, (20000,), shape), {"a": rand(shape), "b": rand((20000,))})
    (kernel,) = [op for op in lowered.ops if isinstance(op, ascend.KernelOp)]
    assert kernel.block_dim.value.data == 48
    assert "arith.minsi" in printed(lowered)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("relu", ""), ("sigmoid", ""), ("silu", ""), ("tanh", ""), ("exp", ""), ("neg", ""), ("abs", ""),
        ("erf", ""), ("sin", ""), ("cos", ""), ("floor", ""), ("ceil", ""), ("gelu", ""),
        ("gelu", '{approximate = #nn.gelu_approximate<tanh>}'), ("leaky_relu", "{alpha = 0.1 : f32}"),
        ("leaky_relu", "{alpha = -2.0 : f32}"), ("clip", "{min = -0.5 : f32, max = 0.7 : f32}"),
        ("clip", "{max = 0.2 : f32}"),
    ],
)
def test_unary(op, attrs):
    check(unary(op, (5, 37), attrs=attrs), {"x": rand((5, 37))})


@pytest.mark.parametrize("op", ["sqrt", "log", "rsqrt", "reciprocal"])
def test_unary_positive_domain(op):
    check(unary(op, (3, 50)), {"x": np.abs(rand((3, 50))) + 0.1})


def test_unary_fp16():
    check(unary("silu", (7, 300), "f16"), {"x": rand((7, 300), np.float16)}, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("op,pred", [("equal", np.equal), ("less", np.less), ("greater_equal", np.greater_equal)])
def test_compare_gives_i1(op, pred):
    a, b = (4, 1, 9), (1, 3, 9)
    inputs = {"a": np.round(rand(a)), "b": np.round(rand(b, seed=3))}
    check(binary(op, a, b, (4, 3, 9), out_dt="i1"), inputs, exact=True)


def test_where_cast_and_integers():
    text = module(
        [("m", (2, 1, 8), "i1"), ("x", (2, 3, 8), "f32"), ("i", (2, 3, 8), "i64")],
        """%c = nn.cast %i : (tensor<2x3x8xi64>) -> tensor<2x3x8xf32>
  %w = nn.where %m, %x, %c : (tensor<2x1x8xi1>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %k = nn.add %i, %i : (tensor<2x3x8xi64>, tensor<2x3x8xi64>) -> tensor<2x3x8xi64>
  %kf = nn.cast %k : (tensor<2x3x8xi64>) -> tensor<2x3x8xf32>
  %y = nn.add %w, %kf : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>""",
        ("y", (2, 3, 8), "f32"),
    )
    rng = np.random.default_rng(0)
    inputs = {"m": rng.integers(0, 2, (2, 1, 8)).astype(bool), "x": rand((2, 3, 8)), "i": rng.integers(-5, 5, (2, 3, 8))}
    check(text, inputs, exact=True)


def test_logical_ops_on_i1():
    text = module(
        [("a", (3, 10), "i1"), ("b", (1, 10), "i1")],
        """%n = nn.not %a : (tensor<3x10xi1>) -> tensor<3x10xi1>
  %y = nn.and %n, %b : (tensor<3x10xi1>, tensor<1x10xi1>) -> tensor<3x10xi1>""",
        ("y", (3, 10), "i1"),
    )
    rng = np.random.default_rng(1)
    check(text, {"a": rng.integers(0, 2, (3, 10)).astype(bool), "b": rng.integers(0, 2, (1, 10)).astype(bool)}, exact=True)


# ----------------------------------------------------------------------------------------------
# reductions
# ----------------------------------------------------------------------------------------------
def reduce_text(op: str, shape, axes, keepdims: bool, dt="f32") -> str:
    out = [1 if i in axes else d for i, d in enumerate(shape)]
    if not keepdims:
        out = [d for i, d in enumerate(shape) if i not in axes]
    ax = ", ".join(map(str, axes))
    return module(
        [("x", shape, dt)],
        f"%y = nn.{op} %x {{axes = array<i64: {ax}>, keepdims = {str(keepdims).lower()}}} : ({ty(shape, dt)}) -> {ty(out, dt)}",
        ("y", tuple(out), dt),
    )


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize(
    "shape,axes",
    [((6, 50), [1]), ((2, 5, 33), [1]), ((4, 6, 7), [0, 2]), ((3, 4, 5, 6), [1, 2]), ((130, 1000), [1])],
)
def test_reduce(op, shape, axes):
    x = rand(shape)
    if op == "reduce_prod":
        x = (np.abs(x) * 0.2 + 0.9).astype(np.float32)
    check(reduce_text(op, shape, axes, keepdims=op != "reduce_max"), {"x": x}, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize("dt, np_dt", [("f32", np.float32), ("i32", np.int32)])
def test_reduce_over_an_empty_axis_fills_the_identity(op, dt, np_dt):
    if op == "reduce_mean" and dt == "i32":
        pytest.skip("the mean of an empty integer set is undefined")
    lowered = check(reduce_text(op, (2, 0, 4), [1], True, dt), {"x": np.zeros((2, 0, 4), np_dt)}, exact=True)
    assert "ascend.vdup" in printed(lowered)


def test_reduce_mean_fp16_accumulates_in_fp32():
    lowered = check(reduce_text("reduce_mean", (4, 32, 1024), [2], True, "f16"), {"x": rand((4, 32, 1024), np.float16)}, rtol=2e-3, atol=2e-3)
    assert "ascend.vcast" in printed(lowered)


def test_row_too_long_for_ub_names_the_op():
    with pytest.raises(AscendirError, match=r"nn.reduce_sum #0: one row of 100000 elements needs \d+ bytes of UB, ascend910b2 has 196608"):
        lower_text(reduce_text("reduce_sum", (2, 100000), [1], True))


# ----------------------------------------------------------------------------------------------
# softmax and norms
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis,dt", [((4, 7, 33), -1, "f32"), ((2, 64, 128), 2, "f16"), ((2, 9, 5), 1, "f32"), ((3, 200), 0, "f16")])
def test_softmax(shape, axis, dt):
    tol = 2e-3 if dt == "f16" else 1e-5
    np_dt = np.float16 if dt == "f16" else np.float32
    check(
        module([("x", shape, dt)], f"%y = nn.softmax %x {{axis = {axis} : i64}} : ({ty(shape, dt)}) -> {ty(shape, dt)}", ("y", shape, dt)),
        {"x": rand(shape, np_dt) * 3},
        rtol=tol,
        atol=tol,
    )


@pytest.mark.parametrize("dt", ["f32", "f16"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(dt, with_bias):
    shape, c = (3, 17, 96), 96
    np_dt = np.float16 if dt == "f16" else np.float32
    args = [("x", shape, dt), ("s", (c,), dt)] + ([("b", (c,), dt)] if with_bias else [])
    operands = "%x, %s" + (", %b" if with_bias else "")
    types = ", ".join(ty(s, d) for _, s, d in args)
    text = module(args, f"%y = nn.layer_norm {operands} {{axis = -1 : i64, epsilon = 1.0e-05 : f32}} : ({types}) -> {ty(shape, dt)}", ("y", shape, dt))
    inputs = {"x": rand(shape, np_dt) * 2 + 1, "s": rand((c,), np_dt, seed=2)}
    if with_bias:
        inputs["b"] = rand((c,), np_dt, seed=3)
    tol = 1e-2 if dt == "f16" else 1e-4
    check(text, inputs, rtol=tol, atol=tol)


def test_layer_norm_over_two_axes():
    shape = (4, 6, 10)
    text = module(
        [("x", shape, "f32"), ("s", (6, 10), "f32")],
        f"%y = nn.layer_norm %x, %s {{axis = 1 : i64, epsilon = 1.0e-05 : f32}} : ({ty(shape, 'f32')}, tensor<6x10xf32>) -> {ty(shape, 'f32')}",
        ("y", shape, "f32"),
    )
    check(text, {"x": rand(shape), "s": rand((6, 10), seed=4)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_layer_norm_statistics_results(dt):
    shape, stats = (3, 5, 40), "tensor<3x1x1xf32>"
    np_dt = np.float16 if dt == "f16" else np.float32
    text = f"""
func.func @main(%x: {ty(shape, dt)} {{onnx.name = "x"}}, %s: {ty((5, 40), dt)} {{onnx.name = "s"}})
    -> ({ty(shape, dt)} {{onnx.name = "y"}}, {stats} {{onnx.name = "mean"}}, {stats} {{onnx.name = "inv_std"}}) {{
  %y, %mean, %inv_std = nn.layer_norm %x, %s {{axis = 1 : i64, epsilon = 1.0e-03 : f32}} : ({ty(shape, dt)}, {ty((5, 40), dt)}) -> ({ty(shape, dt)}, {stats}, {stats})
  func.return %y, %mean, %inv_std : {ty(shape, dt)}, {stats}, {stats}
}}"""
    tol = 1e-2 if dt == "f16" else 1e-4
    check(text, {"x": rand(shape, np_dt) * 2 + 1, "s": rand((5, 40), np_dt, seed=6)}, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_rms_norm(dt):
    shape = (2, 33, 256)
    np_dt = np.float16 if dt == "f16" else np.float32
    text = module(
        [("x", shape, dt), ("s", (256,), dt)],
        f"%y = nn.rms_norm %x, %s {{axis = -1 : i64, epsilon = 1.0e-06 : f32}} : ({ty(shape, dt)}, {ty((256,), dt)}) -> {ty(shape, dt)}",
        ("y", shape, dt),
    )
    tol = 1e-2 if dt == "f16" else 1e-4
    check(text, {"x": rand(shape, np_dt), "s": rand((256,), np_dt, seed=5)}, rtol=tol, atol=tol)


# ----------------------------------------------------------------------------------------------
# row kernels running several tiles per core: ping-pong slots
# ----------------------------------------------------------------------------------------------
def _row_kernel_slots(lowered, name: str) -> int:
    """UB buffers of kernel `name` that GM -> UB copies inside its tile loop write (the x slots)."""
    kernel = next(op for op in lowered.walk() if isinstance(op, ascend.KernelOp) and op.sym_name.data == name)
    loads = [op for op in kernel.walk() if isinstance(op, ascend.CopyOp) and op.parent_op() is not kernel]
    return len({op.operands[1] for op in loads if isinstance(op.operands[1].owner, ascend.AllocOp)})


@pytest.mark.parametrize(
    "kernel, text, inputs, tol",
    [
        (  # the 7B layer's rms_norm rows (C = 4096, one row per tile), ~3 tiles per core
            "rms_norm_0",
            module(
                [("x", (150, 4096), "f16"), ("s", (4096,), "f16")],
                "%y = nn.rms_norm %x, %s {axis = -1 : i64, epsilon = 1.0e-06 : f32} : (tensor<150x4096xf16>, tensor<4096xf16>) -> tensor<150x4096xf16>",
                ("y", (150, 4096), "f16"),
            ),
            {"x": rand((150, 4096), np.float16), "s": rand((4096,), np.float16, seed=5)},
            1e-2,
        ),
        (  # two-row tiles and a one-row boundary tile, scale and bias
            "layer_norm_0",
            module(
                [("x", (301, 2048), "f32"), ("s", (2048,), "f32"), ("b", (2048,), "f32")],
                "%y = nn.layer_norm %x, %s, %b {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<301x2048xf32>, tensor<2048xf32>, tensor<2048xf32>) -> tensor<301x2048xf32>",
                ("y", (301, 2048), "f32"),
            ),
            {"x": rand((301, 2048)) * 2 + 1, "s": rand((2048,), seed=2), "b": rand((2048,), seed=3)},
            1e-4,
        ),
        (  # columns layout: [1, C, ti] tiles transposed in UB
            "softmax_0",
            module(
                [("x", (97, 32, 64), "f32")],
                "%y = nn.softmax %x {axis = 1 : i64} : (tensor<97x32x64xf32>) -> tensor<97x32x64xf32>",
                ("y", (97, 32, 64), "f32"),
            ),
            {"x": rand((97, 32, 64)) * 3},
            1e-5,
        ),
    ],
    ids=["rms_norm", "layer_norm", "softmax_columns"],
)
def test_row_kernel_ping_pongs_when_a_core_runs_several_tiles(kernel, text, inputs, tol):
    # Two UB slots alternate over a core's tiles (S2 InitBuffer BUFFER_NUM = 2) so MTE2 loads
    # tile k+1 while V computes tile k; the outputs must not change.
    lowered = check(text, inputs, rtol=tol, atol=tol)
    assert _row_kernel_slots(lowered, kernel) == 2
