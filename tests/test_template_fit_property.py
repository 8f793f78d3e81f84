"""Property test of the conv, window (depthwise conv, pooling) and matmul-with-bias templates'
fit logic: for random shapes, dtypes, epilogues and chips, the tiling a template chooses fits
every on-chip buffer its kernels allocate (KernelBuilder checks each kernel's allocations
against the target's capacities when it finishes, so compiling is the check).

Seeded numpy draws rather than hypothesis (not a dependency of the project): each case is
reproducible from its index, which the test id names."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ascendir.driver import compile_model
from onnx_builders import make_model

CASES = 80
TARGETS = [("ascend910b2", "fp32"), ("ascend910b2", "fp16"), ("ascend910b4", "bf16"), ("ascend910a", "fp16")]


def _conv_model(rng: np.random.Generator):
    depthwise = rng.random() < 0.3
    c = int(rng.choice([3, 8, 16, 32, 64, 96, 192]))
    o = c if depthwise else int(rng.choice([8, 16, 24, 64, 96, 160, 256, 512]))
    k = int(rng.choice([1, 3, 5, 7]))
    stride = int(rng.choice([1, 1, 2]))
    pad = int(rng.integers(0, k // 2 + 1))
    h = int(rng.integers(max(k, 4), 97))
    w = int(rng.integers(max(k, 4), 97))
    x = np.zeros((1, c, h, w), np.float32)
    init = {"w": np.zeros((o, 1 if depthwise else c, k, k), np.float32)}
    ins = ["x", "w"]
    if rng.random() < 0.7:
        init["b"] = np.zeros(o, np.float32)
        ins.append("b")
    attrs = {"strides": [stride, stride], "pads": [pad] * 4, "group": c if depthwise else 1}
    act = rng.choice(["", "Relu", "Sigmoid", "MaxPool", "AveragePool"])
    nodes = [helper.make_node("Conv", ins, ["c" if act else "y"], **attrs)]
    if act in ("Relu", "Sigmoid"):
        nodes.append(helper.make_node(str(act), ["c"], ["y"]))
    elif act:
        nodes.append(helper.make_node(str(act), ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    return make_model(nodes, {"x": x}, ["y"], init)


def _matmul_bias_model(rng: np.random.Generator):
    m, k, n = (int(rng.integers(1, 300)), int(rng.integers(8, 800)), int(rng.integers(16, 8000)))
    x = np.zeros((1, m, k), np.float32)
    init = {"w": np.zeros((k, n), np.float32), "b": np.zeros(n, np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u" if rng.random() < 0.5 else "y"])]
    if nodes[-1].output[0] == "u":
        nodes.append(helper.make_node(str(rng.choice(["Relu", "Gelu", "Sigmoid"])), ["u"], ["y"]))
    return make_model(nodes, {"x": x}, ["y"], init, opset=20)


@pytest.mark.parametrize("kind", ["conv", "matmul_bias"])
@pytest.mark.parametrize("index", range(CASES))
def test_chosen_tiling_fits(kind, index, tmp_path) -> None:
    import onnx

    rng = np.random.default_rng([19, index, kind == "conv"])
    model = _conv_model(rng) if kind == "conv" else _matmul_bias_model(rng)
    target, dtype = TARGETS[int(rng.integers(len(TARGETS)))]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    opt = str(rng.choice(["O0", "O2"]))
    compile_model(path, target, opt_level=opt, dtype=dtype, shape_only=True)
