"""Conv (img2col + cube, depthwise on the vector unit), MaxPool / AveragePool lowered to ascend
and simulated, against onnxruntime on the same tiny ONNX models (fp32: rtol 1e-3, atol 1e-4)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ascendir.driver import lower
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from onnx_builders import make_model, run_onnxruntime


def _run(model, feeds, target: str = "ascend910b2"):
    module, weights = import_onnx(model)
    lower(module, weights, target)
    module.verify()
    kernels = [op.sym_name.data for op in module.ops if hasattr(op, "block_dim")]
    return simulate(module, weights, feeds, load_target(target)), kernels


def _check(model, feeds, target: str = "ascend910b2") -> list[str]:
    want = run_onnxruntime(model, feeds)
    result, kernels = _run(model, feeds, target)
    for name, w in want.items():
        np.testing.assert_allclose(result.outputs[name], w, rtol=1e-3, atol=1e-4, err_msg=name)
    return kernels


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


CONV_CASES = {
    # name: (x shape, w shape, attrs, bias)
    "3x3_pad1": ((1, 4, 9, 9), (8, 4, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "stride2_asym_pad": ((2, 3, 11, 10), (5, 3, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 1]}, False),
    "dilation2": ((1, 3, 12, 12), (4, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, True),
    "groups2": ((1, 8, 7, 7), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, True),
    "pointwise": ((2, 16, 5, 5), (24, 16, 1, 1), {}, True),
    "pointwise_stride2": ((1, 8, 9, 9), (4, 8, 1, 1), {"strides": [2, 2]}, False),
    "7x7_stride2_like_resnet": ((1, 3, 32, 32), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, False),
    "same_upper": ((1, 2, 8, 7), (3, 2, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 1]}, False),
    "depthwise_pad1": ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}, True),
    "depthwise_stride2_batch2": ((2, 6, 9, 9), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}, False),
    "depthwise_multiplier2": ((1, 4, 6, 6), (8, 1, 3, 3), {"group": 4}, True),
    "conv1d": ((1, 4, 20), (6, 4, 5), {"pads": [2, 2], "strides": [2]}, True),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_matches_onnxruntime(case: str) -> None:
    xs, ws, attrs, with_bias = CONV_CASES[case]
    rng = _rng(len(case))
    x = rng.standard_normal(xs).astype(np.float32)
    init = {"w": rng.standard_normal(ws).astype(np.float32)}
    ins = ["x", "w"]
    if with_bias:
        init["b"] = rng.standard_normal(ws[0]).astype(np.float32)
        ins.append("b")
    model = make_model([helper.make_node("Conv", ins, ["y"], **attrs)], {"x": x}, ["y"], init)
    kernels = _check(model, {"x": x})
    depthwise = attrs.get("group", 1) == xs[1] == ws[0]
    # Depthwise runs on the vector unit; every other conv multiplies on the cube.
    assert any(k.startswith("dwconv") for k in kernels) == depthwise, kernels
    assert any(k.startswith("conv") for k in kernels) != depthwise, kernels
    pointwise = ws[2:] == (1, 1) and "strides" not in attrs and not any(attrs.get("pads", [0]))
    assert any(k.startswith("img2col") for k in kernels) == (not depthwise and not pointwise), kernels


POOL_CASES = {
    "max_2x2_s2": ("MaxPool", (1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "max_3x3_s2_pad1": ("MaxPool", (2, 4, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "max_ceil": ("MaxPool", (1, 2, 7, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    "max_dilated": ("MaxPool", (1, 2, 9, 9), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    "avg_3x3_pad1_exclude": ("AveragePool", (1, 3, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "avg_3x3_pad1_include": (
        "AveragePool", (1, 3, 7, 7), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}
    ),
    "avg_ceil": ("AveragePool", (1, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "avg_uniform": ("AveragePool", (2, 5, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "max_1d": ("MaxPool", (1, 3, 12), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    "global_avg": ("GlobalAveragePool", (2, 6, 5, 5), {}),
    "max_3d_dilated_pad": ("MaxPool", (1, 2, 6, 7, 8), {"kernel_shape": [2, 3, 2], "dilations": [2, 1, 1], "pads": [1, 1, 0, 0, 1, 1]}),
    "avg_3d_ceil_include": (
        "AveragePool", (2, 2, 7, 6, 9),
        {"kernel_shape": [3, 2, 3], "strides": [2, 2, 2], "pads": [1, 0, 1, 1, 0, 0], "ceil_mode": 1, "count_include_pad": 1},
    ),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_pool_matches_onnxruntime(case: str) -> None:
    op, xs, attrs = POOL_CASES[case]
    x = _rng(len(case)).standard_normal(xs).astype(np.float32)
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    _check(model, {"x": x})


@pytest.mark.parametrize(
    "shape, attrs",
    [
        ((2, 3, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((1, 2, 7, 5), {"kernel_shape": [3, 2], "strides": [2, 2], "dilations": [1, 2], "ceil_mode": 1, "storage_order": 1}),
        ((2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "storage_order": 1}),
    ],
)
def test_max_pool_indices_match_onnxruntime(shape, attrs) -> None:
    x = _rng(len(shape)).standard_normal(shape).astype(np.float32)
    model = make_model([helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)], {"x": x}, ["y", "i"], opset=12)
    want = run_onnxruntime(model, {"x": x})
    result, _ = _run(model, {"x": x})
    np.testing.assert_array_equal(result.outputs["y"], want["y"])
    np.testing.assert_array_equal(result.outputs["i"], want["i"])


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_kernel_larger_than_input_reads_only_the_input(op: str) -> None:
    """EfficientNet's head (transformers): AvgPool2d(320, ceil_mode=True) on a 1x1 map. Only
    the one offset that reads the input is issued, not 320 x 320 of padding."""
    x = _rng().standard_normal((1, 6, 1, 1)).astype(np.float32)
    attrs = {"kernel_shape": [40, 40], "strides": [40, 40], "ceil_mode": 1}
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    _check(model, {"x": x})
    module, weights = import_onnx(model)
    lower(module, weights, "ascend910b2")
    combines = [o for o in module.walk() if o.name in ("ascend.vadd", "ascend.vmax")]
    assert combines == []  # the one slab initialises the accumulator (was 1,599 of them)


def test_max_pool_padding_never_wins() -> None:
    """All-negative input: a max over a window that reads padding must not return 0."""
    x = -1.0 - np.abs(_rng().standard_normal((1, 2, 5, 5)).astype(np.float32))
    model = make_model(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], {"x": x}, ["y"]
    )
    _check(model, {"x": x})
    result, _ = _run(model, {"x": x})
    assert (result.outputs["y"] < 0).all()


def test_conv_on_910a_needs_f16() -> None:
    """The 910A cube has no fp32 mmad: the error names the op and its ONNX node."""
    from ascendir.errors import AscendirError

    x = np.zeros((1, 2, 4, 4), np.float32)
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="stem_conv")], {"x": x}, ["y"],
        {"w": np.ones((2, 2, 3, 3), np.float32)},
    )
    # The importer tags each nn op with its ONNX node (onnx.node), which the error names.
    with pytest.raises(AscendirError, match=r"nn.conv2d #\d+ \('stem_conv'\)"):
        _run(model, {"x": x}, "ascend910a")


def test_imported_ops_carry_their_onnx_node_name() -> None:
    x = np.zeros((1, 2, 4, 4), np.float32)
    model = make_model(
        [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], name="pool1"), helper.make_node("Relu", ["p"], ["y"])],
        {"x": x}, ["y"],
    )
    module, _ = import_onnx(model)
    tags = {op.name: op.attributes["onnx.node"].data for op in module.walk() if "onnx.node" in op.attributes}
    assert tags == {"nn.pool2d": "pool1", "nn.relu": "#1 -> y"}


def _compile_and_check(model, feeds, tmp_path, target: str = "ascend910b2", dtype: str = "fp32",
                       tol: tuple[float, float] = (1e-3, 1e-4)) -> None:
    """The default -O2 pipeline (fusion, choose-tiling) then simulation, against onnxruntime in fp32."""
    import onnx

    from ascendir.driver import compile_model

    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    module, weights = compile_model(path, target, dtype=dtype)
    result = simulate(module, weights, {k: v.astype(np.float16) if dtype == "fp16" else v for k, v in feeds.items()},
                      load_target(target))
    for name, w in run_onnxruntime(model, feeds).items():
        np.testing.assert_allclose(result.outputs[name].astype(np.float32), w, rtol=tol[0], atol=tol[1], err_msg=name)


@pytest.mark.parametrize("act", [None, "Relu"])
def test_fp32_pointwise_conv_with_bias_fits_ub(act, tmp_path) -> None:
    """Issue 19: a 1x1 Conv 16->96 with bias on 1x16x80x80 in fp32 chose a 96 x 256 output tile
    whose AIV epilogue (two f32 tiles and the bias column) needs 196992 bytes of UB, 384 more
    than 910B2 has; the tile now shrinks until the epilogue fits."""
    rng = _rng(19)
    x = rng.standard_normal((1, 16, 80, 80)).astype(np.float32)
    init = {"w": rng.standard_normal((96, 16, 1, 1)).astype(np.float32), "b": rng.standard_normal(96).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if act else "y"])]
    if act:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
    _compile_and_check(make_model(nodes, {"x": x}, ["y"], init), {"x": x}, tmp_path)


def test_depthwise_conv_bias_has_no_race() -> None:
    """Issue 19: the depthwise kernel added the bias after releasing its inputs to MTE2, whose
    next tile reloads the bias buffer (`race in kernel @dwconv_0 ... ascend.vadd on V and
    ascend.copy on MTE2`); 64 channels, 1x64x8x8, 3x3 with bias is the smallest case."""
    rng = _rng(64)
    x = rng.standard_normal((1, 64, 8, 8)).astype(np.float32)
    init = {"w": rng.standard_normal((64, 1, 3, 3)).astype(np.float32), "b": rng.standard_normal(64).astype(np.float32)}
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], group=64, pads=[1, 1, 1, 1])], {"x": x}, ["y"], init)
    _check(model, {"x": x})


@pytest.mark.parametrize("target,dtype", [("ascend910a", "fp16"), ("ascend910b4", "bf16")])
def test_depthwise_conv_bias_half_precision_has_no_race(target, dtype, tmp_path) -> None:
    """The same race stopped tests/data mobilenet on 910A fp16 and 910B4 bf16 (@dwconv_1)."""
    rng = _rng(65)
    x = rng.standard_normal((1, 64, 8, 8)).astype(np.float32)
    init = {"w": rng.standard_normal((64, 1, 3, 3)).astype(np.float32), "b": rng.standard_normal(64).astype(np.float32)}
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], group=64, pads=[1, 1, 1, 1]),
                        helper.make_node("Relu", ["c"], ["y"])], {"x": x}, ["y"], init)
    # bf16 keeps 8 significant bits: 9 products of |x| ~ 1 round to ~2^-9 each, with sums ~ 4
    _compile_and_check(model, {"x": x}, tmp_path, target, dtype, tol=(3e-2, 3e-2) if dtype == "fp16" else (5e-2, 1e-1))
