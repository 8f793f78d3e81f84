"""Opset sweep: every op type the importer claims, at every schema version from opset 13 to the
newest the installed onnx knows, as a one-node model run through import → convert-nn-to-ascend
(910B2) → the interpreter and compared with onnxruntime (onnx.reference.ReferenceEvaluator when
onnxruntime rejects the opset or op version).

    OPENBLAS_NUM_THREADS=1 python benchmarks/opset_sweep.py [--ops ReduceMean,Split]

prints a table op × version (pass, or FAIL with the reason). A version is a schema's
`since_version` (`onnx.defs.get_schema(op, max_inclusive_version=v)` for v in 13..newest): the
model imports exactly that opset, so the version's attribute defaults and its input/attribute
placement (Reduce* axes, Split sizes / num_outputs, Squeeze axes, Clip bounds...) are exercised.
Shape-deciding inputs (axes, shape, k...) are initializers: ascendir compiles static shapes.
Floats match with rtol 1e-3 / atol 1e-4 (fp16 1e-2 / 1e-3), integers and bools exactly.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import results  # noqa: E402  (benchmarks/results.py: --write-results)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))  # conformance.py
TARGET = "ascend910b2"


@dataclass
class Case:
    """One node (`op` with `attrs`) over `inputs` (graph inputs, in node input order) and
    `consts` (initializers); `order` lists the node's input names ("" = omitted)."""

    order: list[str]
    inputs: dict[str, np.ndarray]
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    outputs: int = 1
    label: str = ""  # what the variant checks, when an op has several


def _rand(*shape: int, seed: int = 0, positive: bool = False) -> np.ndarray:
    a = np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.5 if positive else a


def _ints(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


X = _rand(2, 3, 4)


def _u8(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


def _s8(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


_U8, _S8 = _u8(2, 3, 4), _s8(2, 3, 4)


def _unary(positive: bool = False) -> Callable[[int], Case]:
    return lambda v: Case(["x"], {"x": _rand(2, 3, 4, positive=positive)})


def _binary(lhs: np.ndarray, rhs: np.ndarray) -> Callable[[int], Case]:
    return lambda v: Case(["a", "b"], {"a": lhs, "b": rhs})


def _reduce(op: str) -> Callable[[int], list[Case]]:
    axes_input_since = 13 if op == "ReduceSum" else 18

    def build(v: int) -> list[Case]:
        default = Case(["x"], {"x": X}, attrs={"keepdims": 0}, label="no axes: all dims")
        if v >= axes_input_since:
            return [
                Case(["x", "axes"], {"x": X}, {"axes": _ints(0, -1)}, label="axes input, default keepdims=1"),
                default,
                Case(["x", "axes"], {"x": X}, {"axes": _ints()}, {"noop_with_empty_axes": 1}, label="noop_with_empty_axes"),
            ]
        return [Case(["x"], {"x": X}, attrs={"axes": [0, -1]}, label="axes attribute"), default]

    return build


def _split(v: int) -> list[Case]:
    x = _rand(2, 5)
    sizes = Case(["x", "split"], {"x": x}, {"split": _ints(1, 4)}, {"axis": 1}, outputs=2, label="split input")
    equal = Case(["x"], {"x": _rand(2, 6)}, attrs={"axis": -1}, outputs=3, label="equal parts")
    if v >= 18:  # num_outputs: equal chunks, the last one smaller (5 = 3 + 2)
        return [sizes, Case(["x"], {"x": x}, attrs={"axis": 1, "num_outputs": 2}, outputs=2, label="num_outputs")]
    return [sizes, equal]


def _pool(v: int, op: str) -> list[Case]:
    x = _rand(1, 2, 7, 7)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    cases = [Case(["x"], {"x": x}, attrs=attrs, label="pads, strides")]
    cases.append(Case(["x"], {"x": x}, attrs={"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, label="ceil_mode"))
    cases.append(Case(["x"], {"x": x}, attrs={"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"}, label="auto_pad"))
    if op == "AveragePool":
        cases.append(Case(["x"], {"x": x}, attrs={**attrs, "count_include_pad": 1}, label="count_include_pad"))
    if v >= (19 if op == "AveragePool" else 12):  # dilations (AveragePool since 19)
        cases.append(Case(["x"], {"x": x}, attrs={"kernel_shape": [2, 2], "dilations": [2, 2]}, label="dilations"))
    return cases


def _pad(v: int) -> list[Case]:
    x = _rand(1, 2, 4, 5)
    cases = [
        Case(["x", "pads", "value"], {"x": x}, {"pads": _ints(0, 0, 1, 2, 0, 1, 2, 0), "value": np.float32(1.5)},
             label="constant value"),
        Case(["x", "pads"], {"x": x}, {"pads": _ints(0, 0, 2, -1, 0, 0, -1, 3)}, {"mode": "reflect"}, label="reflect, crop"),
        Case(["x", "pads"], {"x": x}, {"pads": _ints(0, 1, 1, 2, 0, 0, 3, 1)}, {"mode": "edge"}, label="edge"),
    ]
    if v >= 18:
        cases.append(Case(["x", "pads", "", "axes"], {"x": x}, {"pads": _ints(1, 2, 3, 0), "axes": _ints(-1, 2)},
                          label="axes input"))
    if v >= 19:
        cases.append(Case(["x", "pads"], {"x": x}, {"pads": _ints(0, 0, 2, 3, 0, 0, 1, 4)}, {"mode": "wrap"}, label="wrap"))
    return cases


def _resize(v: int) -> list[Case]:
    x = _rand(1, 2, 4, 5)
    none = np.zeros(0, np.float32)
    cases = [
        Case(["x", "", "scales"], {"x": x}, {"scales": np.array([1, 1, 2, 1.5], np.float32)}, label="nearest, scales"),
        Case(["x", "", "", "sizes"], {"x": x}, {"sizes": _ints(1, 2, 7, 3)},
             {"mode": "linear"}, label="linear, sizes"),
        Case(["x", "roi", "scales"], {"x": x}, {"roi": none, "scales": np.array([1, 1, 0.6, 2], np.float32)},
             {"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, label="cubic, align_corners"),
        Case(["x", "roi", "", "sizes"], {"x": x},
             {"roi": np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], np.float32), "sizes": _ints(1, 2, 3, 6)},
             {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 9.0},
             label="tf_crop_and_resize"),
    ]
    if v >= 18:
        cases.append(Case(["x", "", "", "sizes"], {"x": x}, {"sizes": _ints(9, 9)},
                          {"mode": "linear", "axes": [3, 2], "keep_aspect_ratio_policy": "not_larger", "antialias": 1},
                          label="axes, not_larger, antialias"))
    if v >= 19:
        cases.append(Case(["x", "", "scales"], {"x": x}, {"scales": np.array([1, 1, 1.7, 0.8], np.float32)},
                          {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
                          label="half_pixel_symmetric"))
    return cases


def _scatter(op: str) -> Callable[[int], list[Case]]:
    def build(v: int) -> list[Case]:
        x = _rand(4, 3)
        if op == "ScatterND":
            order, idx, upd, attrs = ["x", "i", "u"], np.array([[1], [-1], [1]], np.int64), _rand(3, 3, seed=2), {}
        else:
            order, idx, upd, attrs = ["x", "i", "u"], np.array([[1, 0], [3, -1]], np.int64), _rand(2, 2, seed=2), {"axis": 0}
        unique = idx[:2] if op == "ScatterND" else idx
        cases = [Case(order, {"x": x, "u": upd[: len(unique)]}, {"i": unique}, attrs, label="no reduction")]
        if v >= 16:
            cases.append(Case(order, {"x": x, "u": upd}, {"i": idx}, {**attrs, "reduction": "add"}, label="add, repeats"))
        if v >= 18:
            cases.append(Case(order, {"x": x, "u": upd}, {"i": idx}, {**attrs, "reduction": "max"}, label="max"))
        return cases

    return build


def _if(v: int) -> list[Case]:
    """Branches reading the outer x (graph input 'x'): then x + x, else x * x."""
    from onnx import TensorProto, helper

    def branch(op: str, out: str):
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, [3, 4])
        return helper.make_graph([helper.make_node(op, ["x", "x"], [out])], f"{op}_branch", [], [y])

    attrs = {"then_branch": branch("Add", "t"), "else_branch": branch("Mul", "e")}
    x = _rand(3, 4)
    return [
        Case(["c"], {"x": x}, {"c": np.array(False)}, attrs, label="condition known at import"),
        Case(["c"], {"c": np.array([True]), "x": x}, attrs=attrs, label="runtime condition"),
    ]


def _recurrent(op: str) -> Callable[[int], Case]:
    """One forward and one bidirectional layer, hidden 5, with biases, over a [4, 2, 3] input."""
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]

    def build(v: int) -> list[Case]:
        out = []
        for dirs, direction in ((1, "forward"), (2, "bidirectional")):
            consts = {"W": _rand(dirs, gates * 5, 3, seed=1) * 0.5, "R": _rand(dirs, gates * 5, 5, seed=2) * 0.5,
                      "B": _rand(dirs, 2 * gates * 5, seed=3) * 0.2}
            out.append(Case(["X", "W", "R", "B"], {"X": _rand(4, 2, 3)}, consts, {"hidden_size": 5, "direction": direction},
                            outputs=3 if op == "LSTM" else 2, label=direction))
        return out

    return build


def _loop(v: int) -> Case:
    """Three iterations of acc' = acc * x + i, acc also a scan output."""
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT), helper.make_node("Mul", ["acc", "x"], ["m"]),
         helper.make_node("Add", ["m", "i_f"], ["acc_out"]), helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Identity", ["acc"], ["scan"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in (("cond_out", TensorProto.BOOL, []),
                                                                 ("acc_out", TensorProto.FLOAT, [3, 4]), ("scan", TensorProto.FLOAT, [3, 4]))])
    return Case(["M", "c", "acc0"], {"acc0": _rand(3, 4, seed=1), "x": _rand(3, 4, seed=4)}, {"M": np.array(3, np.int64), "c": np.array(True)},
                {"body": body}, outputs=2)


def _scan(v: int) -> Case:
    """A running sum over 5 rows: state s' = s + x_t, output y_t = s' * x_t."""
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xt"], ["s_out"]), helper.make_node("Mul", ["s_out", "xt"], ["yt"])], "body",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("xt", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("yt", TensorProto.FLOAT, [4])])
    return Case(["s0", "xs"], {"s0": _rand(4, seed=2), "xs": _rand(5, 4, seed=3)}, attrs={"body": body, "num_scan_inputs": 1},
                outputs=2)


def _dft(v: int) -> list[Case]:
    """Real forward (one-sided) and complex inverse along axis 1 (an attribute before 20, an
    input from 20)."""
    where = ({"axis": np.array(1, np.int64)}, {}) if v >= 20 else ({}, {"axis": 1})
    order = ["x", "", "axis"] if v >= 20 else ["x"]
    return [Case(order, {"x": _rand(2, 6, 1)}, where[0], {**where[1], "onesided": 1}, label="rfft"),
            Case(order, {"x": _rand(2, 5, 2)}, where[0], {**where[1], "inverse": 1}, label="complex inverse")]


BOOLS = (np.random.default_rng(1).random((3, 4)) > 0.5, np.random.default_rng(2).random((2, 3, 4)) > 0.5)
INTS = np.random.default_rng(3).integers(-9, 9, (2, 3, 4)).astype(np.int32)

CASES: dict[str, Callable[[int], Case | list[Case]]] = {
    **{op: _unary() for op in ("Abs", "Ceil", "Cos", "Erf", "Exp", "Floor", "Neg", "Relu", "Sigmoid", "Sin",
                                "Tanh", "Identity")},
    "Gelu": lambda v: [Case(["x"], {"x": X}, label="erf"), Case(["x"], {"x": X}, attrs={"approximate": "tanh"}, label="tanh")],
    **{op: _unary(positive=True) for op in ("Log", "Reciprocal", "Sqrt")},
    **{op: _binary(X, _rand(3, 4, seed=1)) for op in ("Add", "Sub", "Mul", "Greater", "Less",
                                                     "GreaterOrEqual", "LessOrEqual")},
    "Div": _binary(X, _rand(3, 4, seed=1, positive=True)),
    "Pow": _binary(_rand(2, 3, 4, positive=True), _rand(3, 4, seed=1)),
    "Equal": _binary(INTS, INTS[1]),
    "Mod": _binary(INTS, np.where(INTS[0] == 0, 5, INTS[0])),
    "And": _binary(BOOLS[0], BOOLS[1]),
    "Or": _binary(BOOLS[0], BOOLS[1]),
    "Not": lambda v: Case(["x"], {"x": BOOLS[1]}),
    **{op: (lambda v: Case(["a", "b", "c"], {"a": X, "b": _rand(3, 4, seed=1), "c": _rand(4, seed=2)}))
       for op in ("Max", "Min", "Sum")},
    "Where": lambda v: Case(["c", "a", "b"], {"c": BOOLS[0], "a": X, "b": _rand(3, 4, seed=1)}),
    "LeakyRelu": lambda v: Case(["x"], {"x": X}),  # default alpha 0.01
    "Cast": lambda v: Case(["x"], {"x": X}, attrs={"to": 10}),  # float16
    "CastLike": lambda v: Case(["x", "like"], {"x": X}, {"like": np.zeros(1, np.float16)}),
    "Clip": lambda v: [
        Case(["x", "lo", "hi"], {"x": X}, {"lo": np.float32(-0.5), "hi": np.float32(0.7)}, label="both bounds"),
        Case(["x", "", "hi"], {"x": X}, {"hi": np.float32(0.7)}, label="max only"),
        Case(["x"], {"x": X}, label="no bounds"),
        Case(["x", "lo"], {"x": INTS}, {"lo": np.int32(-2)}, label="int32, min only"),
    ],
    "Softmax": lambda v: Case(["x"], {"x": X}),  # default axis: -1 since 13 (1 before)
    "LayerNormalization": lambda v: Case(["x", "s", "b"], {"x": X}, {"s": _rand(4, seed=4), "b": _rand(4, seed=5)}),
    "BatchNormalization": lambda v: Case(
        ["x", "s", "b", "m", "var"], {"x": _rand(2, 3, 4, 4)},
        {"s": _rand(3, seed=1), "b": _rand(3, seed=2), "m": _rand(3, seed=3), "var": _rand(3, seed=4, positive=True)},
    ),
    "MatMul": _binary(X, _rand(4, 5, seed=1)),
    "Gemm": lambda v: Case(["a", "b", "c"], {"a": _rand(3, 4)}, {"b": _rand(5, 4, seed=1), "c": _rand(5, seed=2)},
                           {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    "Conv": lambda v: Case(["x", "w", "b"], {"x": _rand(1, 2, 7, 7)}, {"w": _rand(4, 2, 3, 3, seed=1), "b": _rand(4, seed=2)},
                           {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "MaxPool": lambda v: _pool(v, "MaxPool"),
    "AveragePool": lambda v: _pool(v, "AveragePool"),
    "GlobalAveragePool": lambda v: Case(["x"], {"x": _rand(1, 3, 4, 4)}),
    "GlobalMaxPool": lambda v: Case(["x"], {"x": _rand(1, 3, 4, 4)}),
    **{op: _reduce(op) for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                  "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp")},
    "ReduceLogSum": lambda v: [Case(c.order, {"x": np.abs(X) + 0.5}, c.consts, c.attrs, label=c.label)
                               for c in _reduce("ReduceLogSum")(v)],
    "HardSigmoid": lambda v: [Case(["x"], {"x": 3 * X}, label="defaults"),
                              Case(["x"], {"x": 3 * X}, attrs={"alpha": 0.3, "beta": 0.4}, label="alpha, beta")],
    "HardSwish": lambda v: Case(["x"], {"x": 4 * X}),
    "Pad": _pad,
    **{op: _unary() for op in ("Tan", "Sinh", "Cosh", "Asinh")},
    "Acosh": lambda v: Case(["x"], {"x": _rand(2, 3, 4, positive=True) + 1.0}),
    "Atanh": lambda v: Case(["x"], {"x": np.tanh(X)}),
    "GroupNormalization": lambda v: Case(["x", "s", "b"], {"x": _rand(2, 4, 3, 5)},
                                         {"s": _rand(4 if v >= 21 else 2, seed=1), "b": _rand(4 if v >= 21 else 2, seed=2)},
                                         {"num_groups": 2}),
    "LpNormalization": lambda v: [Case(["x"], {"x": X}, label="p 2"), Case(["x"], {"x": X}, attrs={"p": 1, "axis": 1}, label="p 1")],
    "OneHot": lambda v: [Case(["i", "depth", "values"], {"i": _ints(0, 3, -1, 5)}, {"depth": _ints(4), "values": np.array([-2, 3], np.float32)},
                              label="int64 indices, axis -1"),
                         Case(["i", "depth", "values"], {"i": np.array([[1.0, -2.0]], np.float32)},
                              {"depth": np.float32(3), "values": np.array([0, 1], np.int64)}, {"axis": 0}, label="float indices, axis 0")],
    "Mean": lambda v: Case(["a", "b", "c"], {"a": X, "b": _rand(3, 4, seed=1), "c": _rand(4, seed=2)}),
    "Xor": _binary(BOOLS[0], BOOLS[1]),
    "IsNaN": lambda v: Case(["x"], {"x": np.where(X > 0.5, np.nan, X).astype(np.float32)}),
    "Atan": lambda v: Case(["x"], {"x": 4 * X}),
    **{op: (lambda v: Case(["x"], {"x": np.tanh(X)})) for op in ("Asin", "Acos")},
    "Round": lambda v: Case(["x"], {"x": np.round(4 * X) / 2}),  # halves: ties to even
    "Shrink": lambda v: [Case(["x"], {"x": 2 * X}, label="defaults"),
                         Case(["x"], {"x": INTS}, attrs={"lambd": 1.5, "bias": 1.0}, label="int32, lambd, bias")],
    **{op: _binary(INTS, INTS[1] + 3) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")},
    "BitwiseNot": lambda v: Case(["x"], {"x": INTS}),
    "Hardmax": lambda v: [Case(["x"], {"x": X}, label="default axis"), Case(["x"], {"x": np.round(X)}, attrs={"axis": 1}, label="axis 1, ties")],
    "ReverseSequence": lambda v: Case(["x", "lens"], {"x": _rand(4, 3, 2), "lens": _ints(4, 1, 2)}, attrs={"time_axis": 0, "batch_axis": 1}),
    "Compress": lambda v: Case(["x", "c"], {"x": X}, {"c": np.array([True, False, True])}, {"axis": 1}),
    "LRN": lambda v: Case(["x"], {"x": _rand(1, 5, 3, 3)}, attrs={"size": 3, "alpha": 0.01, "beta": 0.6, "bias": 2.0}),
    "Einsum": lambda v: [Case(["a", "b"], {"a": _rand(2, 3, 4), "b": _rand(2, 4, 5, seed=1)}, attrs={"equation": "bij,bjk->bik"},
                              label="batched matmul"),
                         Case(["a"], {"a": _rand(2, 4, 4)}, attrs={"equation": "bii->bi"}, label="diagonal")],
    "DFT": _dft,
    "SequenceConstruct": lambda v: Case(["a", "b"], {"a": X, "b": 2 * X}),
    "SequenceEmpty": lambda v: Case([], {}),
    "SequenceInsert": lambda v: Case(["s", "t", "p"], {"s": [X, 2 * X], "t": 3 * X}, {"p": _ints(1)}),
    "SequenceErase": lambda v: Case(["s", "p"], {"s": [X, 2 * X, 3 * X]}, {"p": _ints(-2)}),
    "SequenceAt": lambda v: Case(["s", "p"], {"s": [X, 2 * X]}, {"p": _ints(1)}),
    "SequenceLength": lambda v: Case(["s"], {"s": [X, 2 * X, X]}),
    "ConcatFromSequence": lambda v: [Case(["s"], {"s": [X, 2 * X]}, attrs={"axis": 1}, label="axis 1"),
                                     Case(["s"], {"s": [X, 2 * X]}, attrs={"axis": -1, "new_axis": 1}, label="new axis")],
    "SplitToSequence": lambda v: [Case(["x", "split"], {"x": _rand(2, 5)}, {"split": _ints(2, 3)}, {"axis": 1}, label="sizes"),
                                  Case(["x"], {"x": _rand(3, 2)}, attrs={"keepdims": 0}, label="no split, keepdims 0")],
    "IsInf": lambda v: [Case(["x"], {"x": np.where(X > 0.5, np.inf, np.where(X < -0.5, -np.inf, X)).astype(np.float32)},
                             label="both"),
                        Case(["x"], {"x": np.where(X > 0.5, np.inf, np.where(X < -0.5, -np.inf, X)).astype(np.float32)},
                             attrs={"detect_positive": 0}, label="negative only")],
    "Trilu": lambda v: [Case(["x", "k"], {"x": _rand(2, 4, 5)}, {"k": _ints(1)}, label="upper, k 1"),
                        Case(["x", "k"], {"x": _rand(2, 4, 5)}, {"k": _ints(-1)}, {"upper": 0}, label="lower, k -1")],
    **{op: (lambda v: [Case(["x"], {"x": X}, label="defaults"),
                       Case(["x"], {"x": np.round(X)}, attrs={"axis": -1, "keepdims": 0, "select_last_index": 1},
                            label="last index, keepdims 0")]) for op in ("ArgMax", "ArgMin")},
    "InstanceNormalization": lambda v: Case(["x", "s", "b"], {"x": _rand(2, 3, 4, 5)}, {"s": _rand(3, seed=1), "b": _rand(3, seed=2)},
                                            {"epsilon": 1e-3}),
    "DepthToSpace": lambda v: [Case(["x"], {"x": _rand(1, 8, 2, 3)}, attrs={"blocksize": 2}, label="DCR"),
                               Case(["x"], {"x": _rand(1, 8, 2, 3)}, attrs={"blocksize": 2, "mode": "CRD"}, label="CRD")],
    "SpaceToDepth": lambda v: [Case(["x"], {"x": _rand(1, 2, 4, 6)}, attrs={"blocksize": 2}, label="default")] + (
        [Case(["x"], {"x": _rand(1, 2, 4, 6)}, attrs={"blocksize": 2, "mode": "CRD"}, label="CRD")] if v >= 28 else []),
    "PRelu": lambda v: Case(["x", "slope"], {"x": X}, {"slope": _rand(3, 1, seed=1)}),
    **{op: (lambda v: [Case(["x"], {"x": 3 * X}, label="defaults"), Case(["x"], {"x": 3 * X}, attrs={"alpha": 0.7}, label="alpha")])
       for op in ("Elu", "Celu", "ThresholdedRelu")},
    "Selu": lambda v: [Case(["x"], {"x": 3 * X}, label="defaults"),
                       Case(["x"], {"x": 3 * X}, attrs={"alpha": 1.5, "gamma": 2.0}, label="alpha, gamma")],
    **{op: (lambda v: Case(["x"], {"x": 8 * X})) for op in ("Softplus", "Softsign", "Mish")},
    "Sign": lambda v: [Case(["x"], {"x": X}, label="float"), Case(["x"], {"x": INTS}, label="int32")],
    "LogSoftmax": lambda v: [Case(["x"], {"x": 10 * X}, label="default axis"), Case(["x"], {"x": X}, attrs={"axis": 1}, label="axis 1")],
    "Resize": _resize,
    "ConvTranspose": lambda v: [
        Case(["x", "w", "b"], {"x": _rand(1, 2, 4, 5)}, {"w": _rand(2, 3, 3, 3, seed=1), "b": _rand(3, seed=2)},
             {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 0]}, label="strides, pads, output_padding"),
        Case(["x", "w"], {"x": _rand(1, 4, 3, 3), "w": _rand(4, 1, 2, 3, seed=3)}, attrs={"group": 2, "dilations": [2, 1]},
             label="groups, dilations, runtime weight"),
        Case(["x", "w"], {"x": _rand(1, 2, 5)}, {"w": _rand(2, 2, 4, seed=4)}, {"strides": [3], "auto_pad": "SAME_UPPER"},
             label="1-D, SAME_UPPER"),
        Case(["x", "w"], {"x": _rand(1, 2, 3, 3)}, {"w": _rand(2, 2, 3, 3, seed=5)}, {"strides": [2, 2], "output_shape": [8, 7]},
             label="output_shape"),
    ],
    "If": _if,
    **{op: _recurrent(op) for op in ("RNN", "GRU", "LSTM")},
    "Loop": _loop,
    "Scan": _scan,
    "CumSum": lambda v: [
        Case(["x", "axis"], {"x": _rand(2, 5, 3)}, {"axis": _ints(1)}, label="axis 1"),
        Case(["x", "axis"], {"x": _rand(2, 5, 3)}, {"axis": _ints(-1)}, {"exclusive": 1, "reverse": 1}, label="exclusive, reverse"),
        Case(["x", "axis"], {"x": INTS}, {"axis": _ints(2)}, {"exclusive": 1}, label="int32, exclusive"),
    ],
    "GatherElements": lambda v: [
        Case(["x", "i"], {"x": X}, {"i": np.array([[[0, 2, -1, 1]], [[1, 1, 0, -4]]], np.int64)}, {"axis": -1},
             label="constant indices"),
        Case(["x", "i"], {"x": X, "i": np.array([[[0, 2], [1, -3]], [[-1, 0], [2, 2]]], np.int64)}, attrs={"axis": 1},
             label="runtime indices"),
    ],
    **{op: _scatter(op) for op in ("ScatterND", "ScatterElements")},
    "Concat": lambda v: Case(["a", "b"], {"a": X, "b": _rand(2, 2, 4, seed=1)}, attrs={"axis": -2}),
    "Dropout": lambda v: [
        Case(["x"], {"x": X}, label="x only"),
        Case(["x", "ratio", "training"], {"x": X}, {"ratio": np.float32(0.3), "training": np.bool_(False)},
             label="ratio, training_mode=false"),
    ],
    "Expand": lambda v: Case(["x", "shape"], {"x": _rand(3, 1)}, {"shape": _ints(2, 1, 4)}),
    "Flatten": lambda v: Case(["x"], {"x": X}),  # default axis 1
    "Gather": lambda v: Case(["x", "i"], {"x": X}, {"i": _ints(2, -1, 0)}, {"axis": 1}),
    "GatherND": lambda v: Case(["x", "i"], {"x": X}, {"i": np.array([[1, 0], [0, -1]], np.int64)}),
    "Reshape": lambda v: [Case(["x", "shape"], {"x": X}, {"shape": _ints(0, -1, 2)}, label="0 and -1")] + (
        [Case(["x", "shape"], {"x": X}, {"shape": _ints(2, 0, 4)}, {"allowzero": 0}, label="allowzero=0 copies"),
         Case(["x", "shape"], {"x": _rand(0, 3)}, {"shape": _ints(3, 0)}, {"allowzero": 1}, label="allowzero=1")]
        if v >= 14 else []),
    "Slice": lambda v: [
        Case(["x", "starts", "ends", "axes", "steps"], {"x": X},
             {"starts": _ints(-3, 1), "ends": _ints(100, -1), "axes": _ints(2, -2), "steps": _ints(2, 1)}, label="all inputs"),
        Case(["x", "starts", "ends", "axes", "steps"], {"x": X},
             {"starts": _ints(-1, 2), "ends": _ints(-100, 0), "axes": _ints(2, 1), "steps": _ints(-2, -1)}, label="negative steps"),
        Case(["x", "starts", "ends"], {"x": X}, {"starts": _ints(1, 0), "ends": _ints(2, -1)}, label="default axes, steps"),
    ],
    "Split": _split,
    "Squeeze": lambda v: [
        Case(["x", "axes"], {"x": _rand(2, 1, 4, 1)}, {"axes": _ints(-3)}, label="axes input"),
        Case(["x"], {"x": _rand(2, 1, 4, 1)}, label="no axes: every 1-dim"),
    ],
    "Unsqueeze": lambda v: Case(["x", "axes"], {"x": X}, {"axes": _ints(0, -1)}),
    "Tile": lambda v: Case(["x", "r"], {"x": _rand(2, 3)}, {"r": _ints(2, 1)}),
    "TopK": lambda v: [
        Case(["x", "k"], {"x": X}, {"k": _ints(2)}, outputs=2, label="default axis -1, largest"),
        Case(["x", "k"], {"x": X}, {"k": _ints(2)}, {"axis": 1, "largest": 0}, outputs=2, label="smallest on axis 1"),
    ],
    "Transpose": lambda v: [
        Case(["x"], {"x": X}, attrs={"perm": [2, 0, 1]}, label="perm"),
        Case(["x"], {"x": X}, label="default perm reverses"),
    ],
    # quantized ops (converters/quantization.py): integer results exactly
    "QuantizeLinear": lambda v: [
        Case(["x", "s", "z"], {"x": X * 5}, {"s": np.float32(0.05), "z": np.uint8(128)}, label="per tensor, uint8"),
        Case(["x", "s", "z"], {"x": X * 5}, {"s": np.array([0.02, 0.05, 0.1], np.float32), "z": np.array([-3, 0, 5], np.int8)},
             {"axis": 1}, label="per axis, int8"),
    ],
    "DequantizeLinear": lambda v: [
        Case(["q", "s", "z"], {"q": _U8}, {"s": np.float32(0.05), "z": np.uint8(100)}, label="per tensor, uint8"),
        Case(["q", "s", "z"], {"q": _S8}, {"s": np.array([0.02, 0.05, 0.1], np.float32), "z": np.array([-3, 0, 5], np.int8)},
             {"axis": 1}, label="per axis, int8"),
    ],
    "DynamicQuantizeLinear": lambda v: Case(["x"], {"x": X}, outputs=3),
    "MatMulInteger": lambda v: Case(["a", "b", "za", "zb"], {"a": _u8(3, 32)}, {"b": _s8(32, 5), "za": np.uint8(7), "zb": np.int8(0)}),
    "QLinearMatMul": lambda v: Case(
        ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], {"a": _u8(3, 32)},
        {"sa": np.float32(0.02), "za": np.uint8(120), "b": _s8(32, 5), "sb": np.float32(0.01), "zb": np.int8(0),
         "sy": np.float32(0.05), "zy": np.uint8(128)}),
    "ConvInteger": lambda v: Case(["x", "w", "zx"], {"x": _u8(1, 2, 5, 5)}, {"w": _u8(3, 2, 3, 3, seed=1), "zx": np.uint8(3)},
                                  {"pads": [1, 1, 1, 1]}),
    "QLinearConv": lambda v: Case(
        ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], {"x": _u8(1, 2, 5, 5)},
        {"sx": np.float32(0.02), "zx": np.uint8(120), "w": _s8(3, 2, 3, 3), "sw": np.array([0.01, 0.02, 0.03], np.float32),
         "zw": np.zeros(3, np.int8), "sy": np.float32(0.05), "zy": np.uint8(128), "b": np.array([100, -50, 7], np.int32)},
        {"pads": [1, 1, 1, 1]}),
}


def versions(op: str) -> list[int]:
    """The opsets from 13 to the newest onnx knows at which a new schema version of `op` is in
    force (13 stands for a schema older than 13, e.g. And-7)."""
    import onnx

    from ascendir.frontends.onnx.loading import MIN_OPSET as FIRST_OPSET  # older models are upgraded

    found = set()
    for v in range(FIRST_OPSET, onnx.defs.onnx_opset_version() + 1):
        if onnx.defs.has(op, v):  # ops newer than 13 (CastLike, Gelu...) start later
            found.add(max(onnx.defs.get_schema(op, max_inclusive_version=v).since_version, FIRST_OPSET))
    return sorted(found)


def sweep_ids(ops: set[str] | None = None) -> list[tuple[str, int]]:
    """(op, version) pairs of every claimed op (or of `ops`)."""
    from ascendir.frontends.onnx.converters import CONVERTERS

    return [(op, v) for op in sorted(ops or CONVERTERS) for v in versions(op)]


def variants(op: str, version: int) -> list[Case]:
    """The cases of `op` at opset `version`."""
    cases = CASES[op](version)
    return cases if isinstance(cases, list) else [cases]


def build_model(op: str, version: int, case: Case):
    """The one-node model of `case` at opset `version` (the schema of `op` in force at `version`)."""
    import onnx
    from onnx import helper, numpy_helper

    outs = [f"y{i}" for i in range(case.outputs)]
    node = helper.make_node(op, case.order, outs, **case.attrs)

    def info(n: str, a) -> onnx.ValueInfoProto:
        if isinstance(a, list):  # a sequence input: its element type
            elem = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(a[0].dtype), None)
            return helper.make_value_info(n, helper.make_sequence_type_proto(elem))
        return helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)

    graph = helper.make_graph(
        [node], f"{op}_{version}",
        [info(n, a) for n, a in case.inputs.items()],
        [onnx.ValueInfoProto(name=n) for n in outs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in case.consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def reference(model, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], str]:
    """The outputs by onnxruntime, or by onnx.reference when onnxruntime rejects the model or
    computes its integer ops wrongly on this CPU; and which one ran ("ort" or "onnx.reference")."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    from ascendir.api.verdict import U8S8_OPS, onnxruntime_u8s8_exact

    if any(n.op_type in U8S8_OPS for n in model.graph.node) and not onnxruntime_u8s8_exact():
        return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)], "onnx.reference"
    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - an opset or op version newer than this onnxruntime
        return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)], "onnx.reference"
    return session.run(None, feeds), "ort"


_SIMULATED: dict[tuple[str, bytes], dict[str, np.ndarray]] = {}


def simulate_model(model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of `model` through import → lower → interpreter. Versions whose import gives the
    same nn module (most of them) share one lowering and simulation."""
    from ascendir.driver import lower
    from ascendir.frontends.onnx import import_onnx
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate

    module, weights = import_onnx(model, shape_hints={k: v.shape for k, v in feeds.items()})
    key = (str(module) + repr(sorted((n, weights[n].tobytes()) for n in weights)),
           b"".join(feeds[k].tobytes() for k in sorted(feeds)))
    if key not in _SIMULATED:
        lower(module, weights, TARGET)
        _SIMULATED[key] = simulate(module, weights, feeds, load_target(TARGET)).outputs
    return _SIMULATED[key]


def run(op: str, version: int) -> tuple[bool, str]:
    """(passed, reason) of every case of `op` at `version`: the first failure (naming its case
    and the reference), else which references ran."""
    from conformance import compare_output  # the node-test harness's tolerances

    from ascendir.frontends.onnx.values import with_elements

    sources = set()
    for case in variants(op, version):
        what = f"[{case.label}] " if case.label else ""
        model = build_model(op, version, case)
        want, source = reference(model, case.inputs)
        sources.add(source)
        feeds = with_elements(case.inputs)  # a sequence is fed as its elements, n[0], n[1], ...
        try:
            got = simulate_model(model, feeds)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            return False, f"{what}{type(e).__name__}: {' '.join(str(e).split())}"[:240]
        for vi, w in zip(model.graph.output, want):
            why = compare_output(got, vi.name, w)
            if why:
                return False, f"{what}output {vi.name}: {why} (vs {source})"
    return True, ", ".join(sorted(sources))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default=None, help="comma-separated op types (default: every claimed op)")
    results.add_flag(ap)
    args = ap.parse_args()
    ops = set(args.ops.split(",")) if args.ops else None
    t0 = time.perf_counter()
    rows, failures = {}, 0
    for op, v in sweep_ids(ops):
        ok, reason = run(op, v)
        failures += not ok
        cell = f"{v}:pass" + (" (onnx.reference)" if "onnx.reference" in reason else "") if ok else f"{v}:FAIL ({reason})"
        rows.setdefault(op, []).append(cell)
    width = max(map(len, rows))
    for op, cells in rows.items():
        print(f"{op:{width}}  " + "  ".join(cells))
    total = sum(len(c) for c in rows.values())
    print(f"{total - failures} / {total} (op, version) pairs pass over {len(rows)} ops in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    with results.recorded("opset_sweep"):
        main()
