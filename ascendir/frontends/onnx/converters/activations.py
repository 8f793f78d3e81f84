"""Activations ONNX defines as functions of elementwise ops, decomposed by their definitions:
PRelu, Elu, Selu, Celu, ThresholdedRelu, Softplus, Softsign, Mish, Sign, LogSoftmax, and the
trigonometric and hyperbolic functions without an nn op (Tan, Sinh, Cosh, Asinh, Acosh, Atanh,
Atan, Asin, Acos), Round and Shrink."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

# Selu's defaults (the ONNX schema's, to float precision)
SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


def _float_input(node: NodeContext) -> np.dtype:
    dtype = node.dtype(0)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise node.error(f"expects a float tensor, got {dtype}")
    return dtype


def _softplus(node: NodeContext, x: SSAValue, dtype: np.dtype) -> SSAValue:
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): no overflow for large x."""
    tail = node.emit(nn.ExpOp(node.emit(nn.NegOp(node.emit(nn.AbsOp(x))))))
    tail = node.emit(nn.LogOp(node.emit(nn.AddOp(tail, node.scalar(1.0, dtype)))))
    return node.emit(nn.AddOp(node.emit(nn.ReluOp(x)), tail))


@converts("PRelu")
def convert_prelu(node: NodeContext) -> list[Value]:
    """PRelu(x, slope) → where(x < 0, x · slope, x) (slope broadcasts to x)."""
    dtype = _float_input(node)
    node.same_dtype(0, 1)
    x = node.value(0)
    negative = node.emit(nn.LessOp(x, node.scalar(0.0, dtype)))
    return [node.emit(nn.WhereOp(negative, node.emit(nn.MulOp(x, node.value(1))), x))]


@converts("Elu", "Selu", "Celu")
def convert_elu(node: NodeContext) -> list[Value]:
    """Elu: x > 0 ? x : alpha (exp(x) - 1); Selu: gamma (x > 0 ? x : alpha (exp(x) - 1));
    Celu: max(0, x) + min(0, alpha (exp(x / alpha) - 1)). bf16 is computed in f32 and
    rounded once, as the definition's reference does."""
    dtype = _float_input(node)
    x = node.value(0)
    if dtype.name == "bfloat16":
        x, dtype = node.emit(nn.CastOp(x, f32)), np.dtype(np.float32)
        return [node.emit(nn.CastOp(_elu(node, x, dtype), node.elem(0)))]
    return [_elu(node, x, dtype)]


def _elu(node: NodeContext, x: SSAValue, dtype: np.dtype) -> SSAValue:
    op = node.op_type
    alpha = float(node.attr("alpha", SELU_ALPHA if op == "Selu" else 1.0))
    if op == "Celu" and alpha == 0:
        raise node.error("alpha must not be 0")
    inner = node.emit(nn.MulOp(x, node.scalar(1.0 / alpha, dtype))) if op == "Celu" and alpha != 1.0 else x
    curve = node.emit(nn.SubOp(node.emit(nn.ExpOp(inner)), node.scalar(1.0, dtype)))
    curve = node.emit(nn.MulOp(curve, node.scalar(alpha, dtype))) if alpha != 1.0 else curve
    if op == "Celu":
        negative_part = node.emit(nn.MinOp(curve, node.scalar(0.0, dtype)))
        return node.emit(nn.AddOp(node.emit(nn.ReluOp(x)), negative_part))
    positive = node.emit(nn.GreaterOp(x, node.scalar(0.0, dtype)))
    y = node.emit(nn.WhereOp(positive, x, curve))
    if op == "Selu":
        y = node.emit(nn.MulOp(y, node.scalar(float(node.attr("gamma", SELU_GAMMA)), dtype)))
    return y


@converts("ThresholdedRelu")
def convert_thresholded_relu(node: NodeContext) -> list[Value]:
    """ThresholdedRelu → where(x > alpha, x, 0) (alpha default 1)."""
    dtype = _float_input(node)
    x = node.value(0)
    above = node.emit(nn.GreaterOp(x, node.scalar(float(node.attr("alpha", 1.0)), dtype)))
    return [node.emit(nn.WhereOp(above, x, node.scalar(0.0, dtype)))]


@converts("Softplus", "Softsign", "Mish")
def convert_softplus(node: NodeContext) -> list[Value]:
    """Softplus = log(1 + exp(x)) (computed without overflow), Softsign = x / (1 + |x|),
    Mish = x · tanh(softplus(x))."""
    dtype = _float_input(node)
    x = node.value(0)
    if node.op_type == "Softsign":
        return [node.emit(nn.DivOp(x, node.emit(nn.AddOp(node.emit(nn.AbsOp(x)), node.scalar(1.0, dtype)))))]
    sp = _softplus(node, x, dtype)
    return [sp if node.op_type == "Softplus" else node.emit(nn.MulOp(x, node.emit(nn.TanhOp(sp))))]


@converts("Sign")
def convert_sign(node: NodeContext) -> list[Value]:
    """Sign → 1 where x > 0, -1 where x < 0, else 0, as two nn.where (exact for integers); a
    float NaN stays NaN (onnxruntime's and numpy's sign)."""
    dtype = node.dtype(0)
    x = node.value(0)
    zero, one, minus = (node.scalar(v, dtype) for v in (0, 1, -1)) if dtype.kind in "iu" else (
        node.scalar(v, dtype) for v in (0.0, 1.0, -1.0))
    if dtype.kind == "u":
        return [node.emit(nn.WhereOp(node.emit(nn.GreaterOp(x, zero)), one, zero))]
    y = node.emit(nn.WhereOp(node.emit(nn.LessOp(x, zero)), minus, zero))
    y = node.emit(nn.WhereOp(node.emit(nn.GreaterOp(x, zero)), one, y))
    if dtype.kind in "iu":
        return [y]
    return [node.emit(nn.WhereOp(node.emit(nn.EqualOp(x, x)), y, x))]


@converts("LogSoftmax")
def convert_log_softmax(node: NodeContext) -> list[Value]:
    """LogSoftmax over one axis (default -1) → x - m - log(sum(exp(x - m))), m the max: no
    log of an underflowed softmax."""
    _float_input(node)
    rank = len(node.shape(0))
    axis = node.axis(node.attr("axis", -1), rank)
    x = node.value(0)
    shifted = node.emit(nn.SubOp(x, node.emit(nn.ReduceMaxOp(x, [axis], True))))
    total = node.emit(nn.ReduceSumOp(node.emit(nn.ExpOp(shifted)), [axis], True))
    return [node.emit(nn.SubOp(shifted, node.emit(nn.LogOp(total))))]


def _log1p(node: NodeContext, u: SSAValue, dtype: np.dtype) -> SSAValue:
    """log(1 + u) to the dtype's relative precision for tiny u too (Kahan's trick: with w = 1 + u
    rounded, log(w) · u / (w - 1) cancels the rounding of w; u itself where w rounds to 1)."""
    one = node.scalar(1.0, dtype)
    w = node.emit(nn.AddOp(u, one))
    wm1 = node.emit(nn.SubOp(w, one))
    exact = node.emit(nn.EqualOp(wm1, node.scalar(0.0, dtype)))
    safe = node.emit(nn.WhereOp(exact, one, wm1))  # no 0 / 0 where the other branch is taken
    scaled = node.emit(nn.DivOp(node.emit(nn.MulOp(node.emit(nn.LogOp(w)), u)), safe))
    return node.emit(nn.WhereOp(exact, u, scaled))


@converts("Tan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")
def convert_hyperbolic(node: NodeContext) -> list[Value]:
    """Tan = sin / cos; Sinh, Cosh = (exp(x) ∓ exp(-x)) / 2; Asinh = sign(x) log1p(|x| + x² /
    (1 + sqrt(x² + 1))) (on |x|: x + sqrt(x² + 1) cancels for negative x; log1p keeps tiny x
    exact), Acosh = log(x + sqrt(x - 1) sqrt(x + 1)) (no x² to overflow, exact near 1), Atanh =
    sign(x) log1p(2|x| / (1 - |x|)) / 2.
    Past sqrt(max)/2 of the dtype (9.2e18 in f32) Asinh and Acosh are log(|x|) + log 2, equal
    there in the dtype's precision, so x² or x + root never overflows."""
    dtype = _float_input(node)
    x = node.value(0)
    op = node.op_type

    def s(v: float) -> SSAValue:
        return node.scalar(v, dtype)

    if op == "Tan":
        return [node.emit(nn.DivOp(node.emit(nn.SinOp(x)), node.emit(nn.CosOp(x))))]
    if op in ("Sinh", "Cosh"):
        e, inv = node.emit(nn.ExpOp(x)), node.emit(nn.ExpOp(node.emit(nn.NegOp(x))))
        both = node.emit((nn.SubOp if op == "Sinh" else nn.AddOp)(e, inv))
        return [node.emit(nn.MulOp(both, s(0.5)))]
    if op == "Atanh":  # sign(x) log1p(2a / (1 - a)) / 2 on a = |x|: exact for tiny x, and 1 - a exact near 1
        a = node.emit(nn.AbsOp(x))
        u = node.emit(nn.DivOp(node.emit(nn.AddOp(a, a)), node.emit(nn.SubOp(s(1.0), a))))
        y = node.emit(nn.MulOp(_log1p(node, u, dtype), s(0.5)))
        return [node.emit(nn.WhereOp(node.emit(nn.LessOp(x, s(0.0))), node.emit(nn.NegOp(y)), y))]
    a = node.emit(nn.AbsOp(x)) if op == "Asinh" else x
    if op == "Asinh":
        # log(a + root) = log1p(a + a² / (1 + root)): exact for tiny a, where 1 + a rounds to 1
        root = node.emit(nn.SqrtOp(node.emit(nn.AddOp(node.emit(nn.MulOp(a, a)), s(1.0)))))
        tail = node.emit(nn.DivOp(node.emit(nn.MulOp(a, a)), node.emit(nn.AddOp(root, s(1.0)))))
        near = _log1p(node, node.emit(nn.AddOp(a, tail)), dtype)
    else:
        root = node.emit(nn.MulOp(node.emit(nn.SqrtOp(node.emit(nn.SubOp(a, s(1.0))))),
                                  node.emit(nn.SqrtOp(node.emit(nn.AddOp(a, s(1.0)))))))
        near = node.emit(nn.LogOp(node.emit(nn.AddOp(a, root))))
    far = node.emit(nn.AddOp(node.emit(nn.LogOp(a)), s(float(np.log(2.0)))))
    big = float(np.sqrt(float(ml_dtypes.finfo(dtype).max))) / 2
    y = node.emit(nn.WhereOp(node.emit(nn.GreaterOp(a, s(big))), far, near))
    if op == "Acosh":
        return [y]
    return [node.emit(nn.WhereOp(node.emit(nn.LessOp(x, s(0.0))), node.emit(nn.NegOp(y)), y))]


# Cephes atanf (S. Moshier, Cephes Math Library 2.2, atanf.c): range reduction to |u| <= tan(pi/8)
# and an odd degree-9 polynomial, 1.9e-7 peak relative error in f32.
_TAN_3PI_8 = 2.414213562373095
_TAN_PI_8 = 0.4142135623730950
_ATAN_P = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)


def _atan(node: NodeContext, x: SSAValue, dtype: np.dtype) -> SSAValue:
    """atan(x) for float x (±inf → ±pi/2, NaN → NaN) from Cephes atanf's reduction: on a = |x|,
    a > tan(3pi/8): pi/2 + atan(-1/a); a > tan(pi/8): pi/4 + atan((a - 1)/(a + 1)); else
    atan(a); atan(u) = u + u·z·P(z), z = u²."""

    def s(v: float) -> SSAValue:
        return node.scalar(v, dtype)

    a = node.emit(nn.AbsOp(x))
    far = node.emit(nn.GreaterOp(a, s(_TAN_3PI_8)))
    mid = node.emit(nn.GreaterOp(a, s(_TAN_PI_8)))
    u_far = node.emit(nn.DivOp(s(-1.0), a))
    u_mid = node.emit(nn.DivOp(node.emit(nn.SubOp(a, s(1.0))), node.emit(nn.AddOp(a, s(1.0)))))
    u = node.emit(nn.WhereOp(far, u_far, node.emit(nn.WhereOp(mid, u_mid, a))))
    y0 = node.emit(nn.WhereOp(far, s(float(np.pi / 2)), node.emit(nn.WhereOp(mid, s(float(np.pi / 4)), s(0.0)))))
    z = node.emit(nn.MulOp(u, u))
    p = s(_ATAN_P[0])
    for c in _ATAN_P[1:]:
        p = node.emit(nn.AddOp(node.emit(nn.MulOp(p, z)), s(c)))
    r = node.emit(nn.AddOp(node.emit(nn.MulOp(node.emit(nn.MulOp(p, z)), u)), u))
    y = node.emit(nn.AddOp(y0, r))
    return node.emit(nn.WhereOp(node.emit(nn.LessOp(x, s(0.0))), node.emit(nn.NegOp(y)), y))


@converts("Atan", "Asin", "Acos")
def convert_inverse_trig(node: NodeContext) -> list[Value]:
    """Atan (see `_atan`); Asin = atan(x / sqrt((1 - x)(1 + x))) (±1 → ±pi/2 through atan(±inf));
    Acos = 2 atan(sqrt((1 - x) / (1 + x))) (no pi/2 - asin cancellation near 1; -1 → pi).
    |x| > 1 gives NaN (sqrt of a negative), as numpy. 16-bit floats are computed in f32 and
    rounded once: the polynomial's terms would each round in 16 bits."""
    dtype = _float_input(node)
    x = node.value(0)
    narrow = dtype.itemsize < 4
    if narrow:
        x, dtype = node.emit(nn.CastOp(x, f32)), np.dtype(np.float32)
    one = node.scalar(1.0, dtype)
    if node.op_type == "Atan":
        y = _atan(node, x, dtype)
    elif node.op_type == "Asin":
        root = node.emit(nn.SqrtOp(node.emit(nn.MulOp(node.emit(nn.SubOp(one, x)), node.emit(nn.AddOp(one, x))))))
        y = _atan(node, node.emit(nn.DivOp(x, root)), dtype)
    else:
        ratio = node.emit(nn.DivOp(node.emit(nn.SubOp(one, x)), node.emit(nn.AddOp(one, x))))
        y = node.emit(nn.MulOp(_atan(node, node.emit(nn.SqrtOp(ratio)), dtype), node.scalar(2.0, dtype)))
    return [node.emit(nn.CastOp(y, node.elem(0))) if narrow else y]


@converts("Round")
def convert_round(node: NodeContext) -> list[Value]:
    """Round (half to even) → f = floor(x), d = x - f (exact: f and x share a binade or d = 0),
    f + 1 where d > 0.5 or d = 0.5 and f is odd (f - 2 floor(f / 2) = 1). ±inf and NaN stay."""
    dtype = _float_input(node)
    x = node.value(0)

    def s(v: float) -> SSAValue:
        return node.scalar(v, dtype)

    f = node.emit(nn.FloorOp(x))
    d = node.emit(nn.SubOp(x, f))
    odd = node.emit(nn.EqualOp(node.emit(nn.SubOp(f, node.emit(nn.MulOp(node.emit(nn.FloorOp(node.emit(nn.MulOp(f, s(0.5))))), s(2.0))))), s(1.0)))
    tie_up = node.emit(nn.AndOp(node.emit(nn.EqualOp(d, s(0.5))), odd))
    up = node.emit(nn.OrOp(node.emit(nn.GreaterOp(d, s(0.5))), tie_up))
    return [node.emit(nn.WhereOp(up, node.emit(nn.AddOp(f, s(1.0))), f))]


@converts("Shrink")
def convert_shrink(node: NodeContext) -> list[Value]:
    """Shrink → x + bias where x < -lambd, x - bias where x > lambd, else 0 (lambd default 0.5,
    bias 0); float or integer x (the attributes cast to its type, as onnxruntime's kernel)."""
    dtype = node.dtype(0)
    if not (dtype.kind in "fiu" or dtype.name == "bfloat16"):
        raise node.error(f"expects a numeric tensor, got {dtype}")
    lambd, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    x = node.value(0)

    def s(v: float) -> SSAValue:
        return node.scalar(int(v) if dtype.kind in "iu" else v, dtype)

    high = node.emit(nn.GreaterOp(x, s(lambd)))
    y = node.emit(nn.WhereOp(high, node.emit(nn.SubOp(x, s(bias))), s(0.0)))
    if dtype.kind == "u":  # no unsigned value is below -lambd
        return [y]
    low = node.emit(nn.LessOp(x, s(-lambd)))
    return [node.emit(nn.WhereOp(low, node.emit(nn.AddOp(x, s(bias))), y))]
