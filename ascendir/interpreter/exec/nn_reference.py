"""Numerical reference of the `nn` dialect: one numpy call per op, on whole tensors.

This is the meaning of an `nn` module that pass verification (`--verify-numerics`) and the tests
compare against. Half-precision floats (f16, bf16) are computed in float32 and rounded to the
op's result type; matrix products always run as float32 (or integer) numpy matmul.

`NN_SEMANTICS` maps each op class to a function `(op, operands, weights) -> result array(s)`, so
other interpreters can reuse or extend it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import ml_dtypes
import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation

from ascendir.dialects import nn
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.dialects.cast_mode import cast_mode_of
from ascendir.interpreter.exec.cast import cast
from ascendir.interpreter.exec.special import erf
from ascendir.weights import WeightStore

NAME_ATTR = "onnx.name"

Semantics = Callable[[Operation, list[np.ndarray], WeightStore], "np.ndarray | tuple[np.ndarray, ...]"]
NN_SEMANTICS: dict[type[Operation], Semantics] = {}

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def semantics(*op_classes: type[Operation]) -> Callable[[Semantics], Semantics]:
    """Register `fn` as the reference semantics of `op_classes`."""

    def register(fn: Semantics) -> Semantics:
        for cls in op_classes:
            NN_SEMANTICS[cls] = fn
        return fn

    return register


def _wide(x: np.ndarray) -> np.ndarray:
    """x as float32 if it is a half-precision float (numpy has no fast f16/bf16 math)."""
    return x.astype(np.float32) if x.dtype in _HALF else x


# ----------------------------------------------------------------------------------------------
# constants
# ----------------------------------------------------------------------------------------------
@semantics(nn.WeightOp)
def _weight(op: nn.WeightOp, args, weights: WeightStore):
    try:
        return weights[op.weight_name]
    except KeyError:
        raise AscendirError(f"nn.weight @{op.weight_name}: not in the WeightStore") from None


@semantics(nn.ConstantOp)
def _constant(op: nn.ConstantOp, args, weights):
    ttype = op.value.type
    dtype = to_numpy_dtype(ttype.element_type)
    if dtype == np.bool_:  # i1 true is stored as 0xff (xDSL) or 0x01 (numpy): any nonzero byte
        array = np.frombuffer(op.value.data.data, np.uint8) != 0
    else:
        array = np.frombuffer(op.value.data.data, dtype)
    shape = tuple(ttype.get_shape())
    if array.size == 1 and math.prod(shape) != 1:  # a splat holds a single element
        return np.broadcast_to(array.reshape(()), shape)
    return array.reshape(shape)


# ----------------------------------------------------------------------------------------------
# elementwise
# ----------------------------------------------------------------------------------------------
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_UNARY: dict[type[Operation], Callable[[np.ndarray], np.ndarray]] = {
    nn.ReluOp: lambda x: np.maximum(x, 0),
    nn.SigmoidOp: _sigmoid,
    nn.SiluOp: lambda x: x * _sigmoid(x),
    nn.TanhOp: np.tanh,
    nn.ExpOp: np.exp,
    nn.LogOp: np.log,
    nn.SqrtOp: np.sqrt,
    nn.RsqrtOp: lambda x: 1.0 / np.sqrt(x),
    nn.ReciprocalOp: lambda x: 1.0 / x,
    nn.NegOp: np.negative,
    nn.AbsOp: np.abs,
    nn.ErfOp: erf,
    nn.SinOp: np.sin,
    nn.CosOp: np.cos,
    nn.FloorOp: np.floor,
    nn.CeilOp: np.ceil,
    nn.NotOp: np.invert,  # logical on bool, bitwise on integers
    nn.IdentityOp: lambda x: x,
}


@semantics(*_UNARY)
def _unary(op: Operation, args, weights):
    return _UNARY[type(op)](_wide(args[0]))


@semantics(nn.GeluOp)
def _gelu(op: nn.GeluOp, args, weights):
    x = _wide(args[0])
    if op.approximate.data == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


@semantics(nn.LeakyReluOp)
def _leaky_relu(op: nn.LeakyReluOp, args, weights):
    x = _wide(args[0])
    return np.where(x >= 0, x, x * np.asarray(op.alpha.value.data, x.dtype))


@semantics(nn.ClipOp)
def _clip(op: nn.ClipOp, args, weights):
    x = _wide(args[0])
    if op.min is not None:
        x = np.maximum(x, np.asarray(op.min.value.data, x.dtype))
    if op.max is not None:
        x = np.minimum(x, np.asarray(op.max.value.data, x.dtype))
    return x


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iub":  # ONNX integer division truncates toward zero
        q = np.floor_divide(x, y)
        return q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0)))
    return x / y


_BINARY: dict[type[Operation], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    nn.AddOp: np.add, nn.SubOp: np.subtract, nn.MulOp: np.multiply, nn.DivOp: _div,
    nn.PowOp: np.power, nn.MaxOp: np.maximum, nn.MinOp: np.minimum, nn.ModOp: np.mod, nn.FmodOp: np.fmod,
    nn.AndOp: np.bitwise_and, nn.OrOp: np.bitwise_or, nn.EqualOp: np.equal, nn.LessOp: np.less,
    nn.LessEqualOp: np.less_equal, nn.GreaterOp: np.greater, nn.GreaterEqualOp: np.greater_equal,
}


@semantics(*_BINARY)
def _binary(op: Operation, args, weights):
    return _BINARY[type(op)](_wide(args[0]), _wide(args[1]))


@semantics(nn.WhereOp)
def _where(op: nn.WhereOp, args, weights):
    return np.where(args[0], args[1], args[2])


@semantics(nn.CastOp)
def _cast(op: nn.CastOp, args, weights):
    saturate, round_mode = cast_mode_of(op)
    return cast(args[0], to_numpy_dtype(op.result.type.element_type), saturate, round_mode)


# ----------------------------------------------------------------------------------------------
# linear algebra, normalization, reductions
# ----------------------------------------------------------------------------------------------
@semantics(nn.MatmulOp)
def _matmul(op: nn.MatmulOp, args, weights):
    a, b = _wide(args[0]), _wide(args[1])  # (bf16's numpy kind is "V": widened, it is "f")
    if a.dtype.kind == "f":
        return np.matmul(a.astype(np.float32, copy=False), b.astype(np.float32, copy=False))
    # int8 x int8 -> int32 (the cube's s8 mmad): numpy would multiply in int8 and wrap
    return np.matmul(a.astype(np.int64), b.astype(np.int64))


@semantics(nn.WeightQuantMatmulOp)
def _weight_quant_matmul(op: nn.WeightQuantMatmulOp, args, weights):
    # dequantise in x's type as the template does ((w + offset) exact, one rounding by the scale),
    # then the product as nn.matmul's
    x, w, scale = args[:3]
    g = op.group_size.value.data
    k = w.shape[0]
    wf = w.astype(np.float32)
    if len(args) > 3:
        wf = wf + np.repeat(args[3].astype(np.float32), g, axis=0)[:k]
    wd = (wf * np.repeat(scale.astype(np.float32), g, axis=0)[:k]).astype(x.dtype)
    return np.matmul(x.astype(np.float32, copy=False), wd.astype(np.float32))


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """exp(x - max) / sum over `axis`, in x's dtype (the caller widens)."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def top_k_indices(key: np.ndarray, k: int, axis: int, largest: bool = True) -> np.ndarray:
    """Indices (int64) of the `k` largest (smallest) of `key` along `axis`, equal values in index
    order: ONNX TopK's tie rule (a stable sort)."""
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis)


@semantics(nn.SoftmaxOp)
def _softmax(op: nn.SoftmaxOp, args, weights):
    return softmax(_wide(args[0]), op.axis.value.data)


def _norm_axes(x: np.ndarray, axis: int) -> tuple[int, ...]:
    return tuple(range(axis % x.ndim, x.ndim))


@semantics(nn.LayerNormOp)
def _layer_norm(op: nn.LayerNormOp, args, weights):
    x = args[0].astype(np.float32) if args[0].dtype in _HALF else args[0]
    axes = _norm_axes(x, op.axis.value.data)
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    inv_std = 1 / np.sqrt(var + np.asarray(op.epsilon.value.data, x.dtype))
    y = centered * inv_std * _wide(args[1])
    y = y + _wide(args[2]) if len(args) > 2 else y
    return (y, mean, inv_std) if op.stats else y


@semantics(nn.RmsNormOp)
def _rms_norm(op: nn.RmsNormOp, args, weights):
    x = _wide(args[0])
    axes = _norm_axes(x, op.axis.value.data)
    ms = np.mean(x * x, axis=axes, keepdims=True)
    return x / np.sqrt(ms + np.asarray(op.epsilon.value.data, x.dtype)) * _wide(args[1])


def attention_reference(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, *, causal: bool, scale: float
) -> np.ndarray:
    """nn.attention on arrays (see nn.AttentionOp for the meaning): q [B, Hq, Sq, D], k
    [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] -> [B, Hq, Sq, Dv] in float32 (or float64 inputs)."""
    q, k, v = (_wide(a) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    # Each K/V head serves `group` consecutive query heads (repeat_kv / GQA).
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s = s * np.asarray(scale, s.dtype)
    if mask is not None:
        s = s + _wide(mask)
    if causal:
        sq, skv = s.shape[-2:]
        visible = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + (skv - sq)
        s = np.where(visible, s, np.finfo(s.dtype).min)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return np.matmul(e / np.sum(e, axis=-1, keepdims=True), v)


@semantics(nn.AttentionOp)
def _attention(op: nn.AttentionOp, args, weights):
    return attention_reference(
        args[0], args[1], args[2], args[3] if len(args) > 3 else None,
        causal=bool(op.causal.value.data), scale=op.scale.value.data,
    )


_REDUCE = {
    nn.ReduceSumOp: np.sum, nn.ReduceMeanOp: np.mean, nn.ReduceMaxOp: np.max,
    nn.ReduceMinOp: np.min, nn.ReduceProdOp: np.prod,
}


@semantics(*_REDUCE)
def _reduce(op: nn.ReduceOp, args, weights):
    axes, x = tuple(op.axes.get_values()), _wide(args[0])
    keepdims = op.keepdims.value.data != 0
    if x.size == 0 and type(op) in (nn.ReduceMaxOp, nn.ReduceMinOp):
        # ONNX reduces an empty set to the identity (-inf for max, +inf for min, or the int limits).
        big = np.inf if x.dtype.kind == "f" else (True if x.dtype == np.bool_ else np.iinfo(x.dtype).max)
        lowest = -np.inf if x.dtype.kind == "f" else (False if x.dtype == np.bool_ else np.iinfo(x.dtype).min)
        initial = lowest if isinstance(op, nn.ReduceMaxOp) else big
        return _REDUCE[type(op)](x, axis=axes, keepdims=keepdims, initial=initial)
    if x.size == 0 and isinstance(op, nn.ReduceMeanOp):  # 0 / 0 = NaN, without np.mean's warning
        return np.sum(x, axis=axes, keepdims=keepdims) / np.asarray(0, x.dtype)
    return _REDUCE[type(op)](x, axis=axes, keepdims=keepdims)


@semantics(nn.TopKOp)
def _topk(op: nn.TopKOp, args, weights):
    x, axis, k = args[0], op.axis.value.data, op.k.value.data
    key = x.astype(np.int64) if x.dtype.kind in "ub" else x
    indices = top_k_indices(key, k, axis, bool(op.largest.value.data))
    return np.take_along_axis(x, indices, axis=axis), indices


def _window_view(op: nn.WindowOp, x: np.ndarray, kernel: Sequence[int], explicit: float, extra: float) -> np.ndarray:
    """[N, C, Ho, Wo, kh, kw] windows of `x` padded by `pads` (value `explicit`) and, where the
    result holds a partial last window (ceil_mode), by `extra` beyond them."""
    (sh, sw), (dh, dw) = op.strides.get_values(), op.dilations.get_values()
    top, left, bottom, right = op.pads.get_values()
    out_h, out_w = op.results[0].type.get_shape()[2:]
    span_h, span_w = dh * (kernel[0] - 1) + 1, dw * (kernel[1] - 1) + 1
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=explicit)
    more_h = max(0, (out_h - 1) * sh + span_h - x.shape[2])
    more_w = max(0, (out_w - 1) * sw + span_w - x.shape[3])
    if more_h or more_w:
        x = np.pad(x, ((0, 0), (0, 0), (0, more_h), (0, more_w)), constant_values=extra)
    windows = np.lib.stride_tricks.sliding_window_view(x, (span_h, span_w), axis=(2, 3))
    return windows[:, :, ::sh, ::sw, ::dh, ::dw][:, :, :out_h, :out_w]


@semantics(nn.Conv2dOp)
def _conv2d(op: nn.Conv2dOp, args, weights):
    x, w = _wide(args[0]), _wide(args[1])
    if x.dtype.kind in "iu":  # int8 x int8 -> int32 (the cube's s8 mmad): numpy would wrap in int8
        x, w = x.astype(np.int64), w.astype(np.int64)
    group = op.group.value.data
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    win = _window_view(op, x, (kh, kw), 0, 0)
    ho, wo = win.shape[2:4]
    win = win.reshape(n, group, cg, ho, wo, kh, kw)
    y = np.einsum("ngchwij,gocij->ngohw", win, w.reshape(group, o // group, cg, kh, kw), optimize=True)
    y = y.reshape(n, o, ho, wo)
    return y + _wide(args[2]).reshape(1, o, 1, 1) if len(args) > 2 else y


@semantics(nn.Pool2dOp)
def _pool2d(op: nn.Pool2dOp, args, weights):
    x = _wide(args[0])
    kernel = op.kernel.get_values()
    if op.kind.data == "max":
        lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        windows = _window_view(op, x, kernel, lowest, lowest)
        y = windows.max(axis=(-2, -1))
        if not op.indices:
            return y
        h, w = x.shape[2:]
        plane = np.arange(h * w).reshape(h, w) if op.storage_order.value.data == 0 else np.arange(h * w).reshape(w, h).T
        where = _window_view(op, plane[None, None], kernel, -1, -1)
        first = windows.reshape(*windows.shape[:4], -1).argmax(axis=-1)  # argmax takes the first
        where = np.broadcast_to(where, (*x.shape[:2], *where.shape[2:]))
        return y, np.take_along_axis(where.reshape(*where.shape[:4], -1), first[..., None], axis=-1)[..., 0]
    total = _window_view(op, x, kernel, 0, 0).sum(axis=(-2, -1))
    inside = np.ones((1, 1, *x.shape[2:]), x.dtype)
    counted = _window_view(op, inside, kernel, 1 if op.count_include_pad.value.data else 0, 0)
    return total / counted.sum(axis=(-2, -1))


# ----------------------------------------------------------------------------------------------
# data movement
# ----------------------------------------------------------------------------------------------
@semantics(nn.TransposeOp)
def _transpose(op: nn.TransposeOp, args, weights):
    return np.transpose(args[0], tuple(op.perm.get_values()))


@semantics(nn.ReshapeOp)
def _reshape(op: nn.ReshapeOp, args, weights):
    return args[0].reshape(op.result.type.get_shape())


@semantics(nn.ExpandOp)
def _expand(op: nn.ExpandOp, args, weights):
    return np.broadcast_to(args[0], op.result.type.get_shape())


@semantics(nn.ConcatOp)
def _concat(op: nn.ConcatOp, args, weights):
    return np.concatenate(args, axis=op.axis.value.data)


@semantics(nn.CacheAppendOp)
def _cache_append(op: nn.CacheAppendOp, args, weights):
    cache, new = args
    axis, offset = op.axis.value.data, op.offset.value.data
    out = np.array(cache, copy=True)
    index = [slice(None)] * out.ndim
    index[axis] = slice(offset, offset + new.shape[axis])
    out[tuple(index)] = new
    return out


@semantics(nn.PagedCacheAppendOp)
def _paged_cache_append(op: nn.PagedCacheAppendOp, args, weights):
    pool, new, table = args
    out = np.array(pool, copy=True)
    bs, offset = pool.shape[2], op.offset.value.data
    pos = np.arange(offset, offset + new.shape[2])
    for b in range(new.shape[0]):
        out[table[b, pos // bs], :, pos % bs, :] = np.moveaxis(new[b], 1, 0)  # [rows, heads, dim]
    return out


@semantics(nn.PagedKVOp)
def _paged_kv(op: nn.PagedKVOp, args, weights):
    pool, table = args
    bs, pos = pool.shape[2], np.arange(op.length.value.data)
    return np.stack([np.moveaxis(pool[table[b, pos // bs], :, pos % bs, :], 0, 1) for b in range(table.shape[0])])


@semantics(nn.SliceOp)
def _slice(op: nn.SliceOp, args, weights):
    index = []
    for start, step, size in zip(op.starts.get_values(), op.steps.get_values(), op.result.type.get_shape()):
        stop = start + size * step
        index.append(slice(start, stop if stop >= 0 else None, step))
    return args[0][tuple(index)]


@semantics(nn.GatherOp)
def _gather(op: nn.GatherOp, args, weights):
    return np.take(args[0], args[1], axis=op.axis.value.data)


@semantics(nn.FusedOp)
def _fused(op: nn.FusedOp, args, weights):
    return tuple(run_block(op.body.block, args, weights))


# ----------------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------------
def evaluate_op(op: Operation, args: list[np.ndarray], weights: WeightStore) -> list[np.ndarray]:
    """Results of one op, each with exactly the dtype and shape of the op's result types.

    Raises:
        AscendirError: no semantics for the op, or numpy rejects its operands.
    """
    fn = NN_SEMANTICS.get(type(op))
    if fn is None:
        raise AscendirError(f"{op.name}: no reference semantics (nn_reference.NN_SEMANTICS)")
    try:
        with np.errstate(all="ignore"):  # inf/nan follow IEEE like the hardware; no warnings
            out = fn(op, args, weights)
    except AscendirError:
        raise
    except Exception as e:  # noqa: BLE001 - numpy raises ValueError, IndexError, TypeError...
        raise AscendirError(f"{op.name}: reference evaluation failed: {' '.join(str(e).split())}") from e
    outs = list(out) if isinstance(out, tuple) else [out]
    results = []
    for value, result in zip(outs, op.results, strict=True):
        dtype, shape = to_numpy_dtype(result.type.element_type), tuple(result.type.get_shape())
        value = np.asarray(value).astype(dtype, copy=False)
        if value.shape != shape:
            raise AscendirError(f"{op.name}: reference produced shape {list(value.shape)}, the op declares {list(shape)}")
        results.append(value)
    return results


def run_block(block: Block, args: Sequence[np.ndarray], weights: WeightStore) -> list[np.ndarray]:
    """Run a block of nn ops on `args` (one per block argument); returns its terminator's operands."""
    env = dict(zip(block.args, args, strict=True))
    for op in block.ops:
        if isinstance(op, (func.ReturnOp, nn.YieldOp)):
            return [env[v] for v in op.operands]
        for result, value in zip(op.results, evaluate_op(op, [env[v] for v in op.operands], weights)):
            env[result] = value
    raise AscendirError("block has no terminator (func.return / nn.yield)")


def input_value(inputs: Mapping[str, object], name: str, arg) -> np.ndarray:
    """inputs[name] as the array @main's argument `arg` takes.

    Raises:
        AscendirError: the input is missing, or its dtype or shape is not the argument's."""
    if name not in inputs:
        raise AscendirError(f"missing input '{name}' ({arg.type})")
    value = np.asarray(inputs[name])
    dtype, shape = to_numpy_dtype(arg.type.element_type), tuple(arg.type.get_shape())
    if value.dtype != dtype or value.shape != shape:
        raise AscendirError(f"input '{name}' is {value.dtype}{list(value.shape)}, expected {dtype}{list(shape)}")
    return value


def _names(attrs, count: int, kind: str) -> list[str]:
    if attrs is None:
        return [f"{kind}{i}" for i in range(count)]
    names = []
    for i, d in enumerate(attrs.data):
        name = d.data.get(NAME_ATTR)
        names.append(name.data if isinstance(name, StringAttr) else f"{kind}{i}")
    return names


def main_function(module: ModuleOp) -> func.FuncOp:
    """`@main` of the module (or its only function).

    Raises:
        AscendirError: no such function.
    """
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    raise AscendirError("module has no func.func @main")


def run_nn(module: ModuleOp, weights: WeightStore, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate `@main` of an nn module with numpy.

    Args:
        module: a module whose `@main` holds nn ops (and nn.fused regions).
        weights: arrays of its `nn.weight` ops.
        inputs: one array per argument, keyed by the argument's `onnx.name` (`arg<i>` when it has
            none); dtype and shape must equal the argument type.

    Returns:
        One array per result, keyed by the result's `onnx.name` (`result<i>` when it has none).

    Raises:
        AscendirError: a missing, unknown or mistyped input; an op without semantics.
    """
    main = main_function(module)
    block = main.body.block
    arg_names = _names(main.arg_attrs, len(block.args), "arg")
    unknown = sorted(set(inputs) - set(arg_names))
    if unknown:
        raise AscendirError(f"unknown inputs {unknown}; @main takes {arg_names}")
    args = [input_value(inputs, name, arg) for name, arg in zip(arg_names, block.args)]
    outputs = run_block(block, args, weights)
    names = _names(main.res_attrs, len(outputs), "result")
    return {name: np.asarray(v, order="C") for name, v in zip(names, outputs)}  # 0-d stays 0-d
