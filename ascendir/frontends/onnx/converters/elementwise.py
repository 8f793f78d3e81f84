"""Elementwise ops: unary math, broadcasting binaries and comparisons, Where, Cast, Clip."""

from __future__ import annotations

import math
import numpy as np
from xdsl.dialects.builtin import FloatAttr

from ascendir.dialects import nn
from ascendir.dialects.cast_mode import CAST_ROUND_MODES
from ascendir.dtypes import E8M0, FLOAT8, from_numpy_dtype
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

_UNARY = {
    "Relu": nn.ReluOp, "Sigmoid": nn.SigmoidOp, "Tanh": nn.TanhOp, "Exp": nn.ExpOp, "Log": nn.LogOp,
    "Sqrt": nn.SqrtOp, "Reciprocal": nn.ReciprocalOp, "Neg": nn.NegOp, "Abs": nn.AbsOp,
    "Erf": nn.ErfOp, "Sin": nn.SinOp, "Cos": nn.CosOp, "Floor": nn.FloorOp, "Ceil": nn.CeilOp,
    "Not": nn.NotOp,
}

_BINARY = {
    "Add": nn.AddOp, "Sub": nn.SubOp, "Mul": nn.MulOp, "Div": nn.DivOp, "And": nn.AndOp,
    "Or": nn.OrOp, "Equal": nn.EqualOp, "Less": nn.LessOp, "LessOrEqual": nn.LessEqualOp,
    "Greater": nn.GreaterOp, "GreaterOrEqual": nn.GreaterEqualOp,
}

_VARIADIC = {"Max": nn.MaxOp, "Min": nn.MinOp, "Sum": nn.AddOp}


@converts(*_UNARY)
def convert_unary(node: NodeContext) -> list[Value]:
    """Relu, Sigmoid, Tanh, ... → the nn op of the same name (same shape and dtype)."""
    return [node.emit(_UNARY[node.op_type](node.value(0)))]


@converts("Gelu")
def convert_gelu(node: NodeContext) -> list[Value]:
    """Gelu (opset 20) → nn.gelu with `approximate` "none" (erf) or "tanh"."""
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.error(f"approximate='{approximate}' is not a GELU variant (expected 'none' or 'tanh')")
    return [node.emit(nn.GeluOp(node.value(0), approximate=approximate))]


@converts("LeakyRelu")
def convert_leaky_relu(node: NodeContext) -> list[Value]:
    """LeakyRelu → nn.leaky_relu (alpha default 0.01)."""
    alpha = float(node.attr("alpha", 0.01))
    return [node.emit(nn.LeakyReluOp(node.value(0), alpha=FloatAttr(alpha, _float_width(node.dtype(0)))))]


@converts(*_BINARY)
def convert_binary(node: NodeContext) -> list[Value]:
    """Broadcasting arithmetic, logic and comparisons → nn ops; both operands must share a dtype."""
    node.same_dtype(0, 1)
    return [node.emit(_BINARY[node.op_type](node.value(0), node.value(1)))]


@converts("Pow")
def convert_pow(node: NodeContext) -> list[Value]:
    """Pow → nn.pow; an exponent of another dtype is converted (at import if constant)."""
    # ONNX lets the exponent have its own type; nn.pow wants one element type (the base's).
    base_dtype = node.dtype(0)
    exponent = node.const(1)
    if exponent is not None:
        y = node.constant(exponent.astype(base_dtype), "exponent")
    elif node.dtype(1) != base_dtype:
        y = node.emit(nn.CastOp(node.value(1), node.elem(0)))
    else:
        y = node.value(1)
    return [node.emit(nn.PowOp(node.value(0), y))]


@converts("Mod")
def convert_mod(node: NodeContext) -> list[Value]:
    """Mod → nn.mod (fmod=0: the remainder takes the divisor's sign, as Python's %) or nn.fmod
    (fmod=1: the dividend's sign, as C fmod)."""
    fmod = node.attr("fmod", 0)
    if fmod not in (0, 1):
        raise node.error(f"fmod={fmod} is not 0 or 1")
    node.same_dtype(0, 1)
    return [node.emit((nn.FmodOp if fmod else nn.ModOp)(node.value(0), node.value(1)))]


@converts(*_VARIADIC)
def convert_variadic(node: NodeContext) -> list[Value]:
    """Max/Min/Sum of N inputs → a chain of N-1 broadcasting nn ops."""
    node.same_dtype(*range(node.num_inputs))
    result = node.value(0)
    for i in range(1, node.num_inputs):
        result = node.emit(_VARIADIC[node.op_type](result, node.value(i)))
    return [result]


@converts("Where")
def convert_where(node: NodeContext) -> list[Value]:
    """Where(cond: i1, x, y) → nn.where."""
    node.same_dtype(1, 2)
    return [node.emit(nn.WhereOp(node.value(0), node.value(1), node.value(2)))]


@converts("Cast", "CastLike")
def convert_cast(node: NodeContext) -> list[Value]:
    """Cast/CastLike → nn.cast, or the input itself when the dtype does not change.

    `saturate` (opset 19+, default 1) matters for float 8 results and `round_mode` (opset 24+,
    default "up") for float8e8m0 ones; they are kept on the nn.cast only there."""
    target = node.dtype(1) if node.op_type == "CastLike" else node.onnx_dtype(node.attr("to"))
    if target == node.dtype(0):
        return [node.input(0)]
    saturate, round_mode = bool(node.attr("saturate", 1)), node.attr("round_mode", "up")
    if round_mode not in CAST_ROUND_MODES:
        raise node.error(f"round_mode='{round_mode}' is not one of {', '.join(CAST_ROUND_MODES)}")
    elem = from_numpy_dtype(target)
    if target not in FLOAT8 and target != E8M0:
        saturate = True
    if target != E8M0:
        round_mode = "up"
    return [node.emit(nn.CastOp(node.value(0), elem, saturate, round_mode))]


@converts("Clip")
def convert_clip(node: NodeContext) -> list[Value]:
    """Clip → nn.clip when the bounds are known floats; otherwise (integer tensors, or bounds
    that are runtime inputs) → nn.max with min, then nn.min with max (min > max gives max, as
    ONNX). Bounds are inputs since opset 11, attributes before; an absent bound is no bound."""
    dtype = node.dtype(0)
    x = node.value(0)
    if node.opset < 11:  # bounds were attributes before opset 11
        lo, hi = node.attr("min"), node.attr("max")
        runtime = False
    else:
        present = [i for i in (1, 2) if node.has_input(i)]
        node.same_dtype(0, *present)
        runtime = any(node.const(i) is None for i in present)
        for i in present:  # the spec: min and max are scalars
            if math.prod(node.shape(i)) != 1:
                raise node.error(f"{('min', 'max')[i - 1]} (input {i}) must be a scalar, got shape {list(node.shape(i))}")
        lo, hi = (node.const(i).item() if node.has_input(i) and not runtime else None for i in (1, 2))
    if runtime:
        if node.has_input(1):
            x = node.emit(nn.MaxOp(x, node.value(1)))
        if node.has_input(2):
            x = node.emit(nn.MinOp(x, node.value(2)))
        return [x]
    if dtype.kind == "f":
        # ONNX: an absent bound is numeric_limits lowest()/max(), not ±inf (inf clips to max)
        info = np.finfo(dtype)
        lo = float(info.min) if lo is None else lo
        hi = float(info.max) if hi is None else hi
        width = _float_width(dtype)
        props = {k: FloatAttr(float(v), width) for k, v in (("min", lo), ("max", hi)) if v is not None}
        return [node.emit(nn.ClipOp(x, **props))]
    # Integer clip: nn.clip bounds are floats, so use max/min with exact integer constants.
    if lo is not None:
        x = node.emit(nn.MaxOp(x, node.scalar(lo, dtype)))
    if hi is not None:
        x = node.emit(nn.MinOp(x, node.scalar(hi, dtype)))
    return [x]


def _float_width(dtype: np.dtype) -> int:
    # Bounds of f16/bf16/f32 tensors are exact in f32; f64 tensors keep f64 bounds.
    return 64 if dtype == np.float64 else 32


@converts("HardSigmoid", "HardSwish")
def convert_hard_sigmoid(node: NodeContext) -> list[Value]:
    """HardSigmoid → clip(alpha·x + beta, 0, 1) (alpha 0.2, beta 0.5 by default); HardSwish →
    x · HardSigmoid(x) with alpha 1/6, beta 0.5 (its definition since opset 14)."""
    dtype = node.dtype(0)
    if dtype.kind != "f" and dtype.name not in ("bfloat16",):
        raise node.error(f"expects a float tensor, got {dtype}")
    if node.op_type == "HardSigmoid":
        alpha, beta = float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))
    else:
        alpha, beta = 1.0 / 6.0, 0.5
    x = node.value(0)
    t = node.emit(nn.MulOp(x, node.scalar(alpha, dtype)))
    t = node.emit(nn.AddOp(t, node.scalar(beta, dtype)))
    width = _float_width(dtype)
    t = node.emit(nn.ClipOp(t, min=FloatAttr(0.0, width), max=FloatAttr(1.0, width)))
    return [node.emit(nn.MulOp(x, t)) if node.op_type == "HardSwish" else t]


@converts("Mean")
def convert_mean(node: NodeContext) -> list[Value]:
    """Mean of N inputs → their nn.add chain (broadcasting) times 1 / N."""
    dtype = node.dtype(0)
    node.same_dtype(*range(node.num_inputs))
    total = node.value(0)
    for i in range(1, node.num_inputs):
        total = node.emit(nn.AddOp(total, node.value(i)))
    if node.num_inputs == 1:
        return [node.input(0)]
    return [node.emit(nn.DivOp(total, node.scalar(node.num_inputs, dtype)))]


@converts("Xor")
def convert_xor(node: NodeContext) -> list[Value]:
    """Xor of booleans → not(equal(a, b))."""
    node.same_dtype(0, 1)
    return [node.emit(nn.NotOp(node.emit(nn.EqualOp(node.value(0), node.value(1)))))]


@converts("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
def convert_bitwise(node: NodeContext) -> list[Value]:
    """Bitwise ops on integer tensors → nn.and / nn.or / nn.not (bitwise on integers);
    BitwiseXor = (a or b) and not (a and b): the vector unit has no xor."""
    if node.dtype(0).kind not in "iu":
        raise node.error(f"expects an integer tensor, got {node.dtype(0)}")
    a = node.value(0)
    if node.op_type == "BitwiseNot":
        return [node.emit(nn.NotOp(a))]
    node.same_dtype(0, 1)
    b = node.value(1)
    if node.op_type == "BitwiseXor":
        both = node.emit(nn.AndOp(a, b))
        return [node.emit(nn.AndOp(node.emit(nn.OrOp(a, b)), node.emit(nn.NotOp(both))))]
    return [node.emit((nn.AndOp if node.op_type == "BitwiseAnd" else nn.OrOp)(a, b))]


@converts("IsNaN", "IsInf")
def convert_is_nan(node: NodeContext) -> list[Value]:
    """IsNaN → not(x == x); IsInf → x == +inf and / or x == -inf (detect_positive,
    detect_negative)."""
    dtype = node.dtype(0)
    x = node.value(0)
    if node.op_type == "IsNaN":
        return [node.emit(nn.NotOp(node.emit(nn.EqualOp(x, x))))]
    tests = [v for v, on in ((np.inf, node.attr("detect_positive", 1)), (-np.inf, node.attr("detect_negative", 1))) if on]
    if not tests:
        return [node.constant(np.zeros(node.shape(0), np.bool_), "never")]
    hits = [node.emit(nn.EqualOp(x, node.scalar(v, dtype))) for v in tests]
    return [hits[0] if len(hits) == 1 else node.emit(nn.OrOp(hits[0], hits[1]))]


@converts("Trilu")
def convert_trilu(node: NodeContext) -> list[Value]:
    """Trilu with a constant k → where(mask, x, 0), mask the lower (upper=0) or upper triangle
    of the last two dims shifted by k (numpy.tril / triu's rule)."""
    shape = node.shape(0)
    if len(shape) < 2:
        raise node.error(f"expects a tensor of rank >= 2, got shape {list(shape)}")
    k = int(node.require_scalar(1, "k")) if node.has_input(1) else 0
    rows, cols = shape[-2:]
    ones = np.ones((rows, cols), np.bool_)
    mask = np.triu(ones, k) if node.attr("upper", 1) else np.tril(ones, k)
    if mask.all():
        return [node.input(0)]
    zero = node.scalar(0, node.dtype(0))
    return [node.emit(nn.WhereOp(node.constant(mask, "triangle"), node.value(0), zero))]
