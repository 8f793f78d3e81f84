"""Property test of the conv, window (depthwise conv, pooling), matmul-with-bias and concat
templates' fit logic: for random shapes, dtypes, epilogues and chips, the tiling a template chooses fits
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


def _pool_model(rng: np.random.Generator):
    c, h, w = int(rng.choice([1, 3, 16, 64, 256])), int(rng.integers(2, 129)), int(rng.integers(2, 129))
    k = int(rng.integers(1, min(h, w, 7) + 1))
    op = str(rng.choice(["MaxPool", "AveragePool"]))
    attrs = {"kernel_shape": [k, k], "strides": [int(rng.integers(1, 3))] * 2, "pads": [k // 2] * 4,
             "ceil_mode": int(rng.integers(0, 2))}
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    x = np.zeros((int(rng.integers(1, 3)), c, h, w), np.float32)
    return make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])


def _concat_model(rng: np.random.Generator):
    rank = int(rng.integers(1, 5))
    base = [int(rng.choice([1, 2, 7, 40, 64, 513])) for _ in range(rank)]
    axis = int(rng.integers(rank))
    parts = {}
    for i in range(int(rng.integers(2, 4))):
        s = list(base)
        s[axis] = int(rng.choice([1, 3, 40, 1000]))
        parts[f"x{i}"] = np.zeros(s, np.float32)
    return make_model([helper.make_node("Concat", list(parts), ["y"], axis=axis)], parts, ["y"])


MODELS = {"conv": _conv_model, "matmul_bias": _matmul_bias_model, "pool": _pool_model, "concat": _concat_model}


# onnx's shape inference keeps a ceil_mode pool's last window when it starts in the end padding;
# onnxruntime (and ascendir) drop it, and the importer warns about the declared shape
@pytest.mark.filterwarnings("ignore::ascendir.errors.AscendirWarning")
@pytest.mark.parametrize("kind", sorted(MODELS))
@pytest.mark.parametrize("index", range(CASES))
def test_chosen_tiling_fits(kind, index, tmp_path) -> None:
    import onnx

    rng = np.random.default_rng([19, index, kind == "conv"])
    model = MODELS[kind](rng)
    target, dtype = TARGETS[int(rng.integers(len(TARGETS)))]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    opt = str(rng.choice(["O0", "O2"]))
    compile_model(path, target, opt_level=opt, dtype=dtype, shape_only=True)
