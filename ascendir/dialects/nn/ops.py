"""Ops of the `nn` dialect (all but `nn.fused` / `nn.yield`, in fused.py): one class per
neural-network concept, named as ONNX names it, value semantics on static `tensor<...>` types.

Every op prints as `nn.op %operands {attrs} : (operand types) -> result types`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    SymbolRefAttr,
    TensorType,
    f32,
    f64,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import TILING_ATTR, TilingAttr
from ascendir.dialects.cast_mode import RoundModeAttr, cast_mode, verify_cast_mode
from ascendir.dialects.nn.attrs import GeluApproximate, GeluApproximateAttr, PoolKind, PoolKindAttr

_FORMAT = "operands attr-dict `:` functional-type(operands, results)"


def shape_of(value: SSAValue | Attribute) -> tuple[int, ...]:
    """Static shape of a tensor value or type."""
    t = value.type if isinstance(value, SSAValue) else value
    assert isinstance(t, TensorType), f"expected a tensor, got {t}"
    return tuple(t.get_shape())


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Numpy/ONNX multidirectional broadcasting.

    Raises:
        VerifyException: if two shapes do not broadcast.
    """
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            if out[j] == 1:
                out[j] = d
            elif d not in (1, out[j]):
                raise VerifyException(f"shapes {list(map(list, shapes))} do not broadcast")
    return tuple(out)


def _int_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


class NNOp(IRDLOperation):
    """Base of the value-semantics ops: operands and results are ranked static tensors."""

    assembly_format = _FORMAT
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        for v in (*self.operands, *self.results):  # (tensor types: each op's operand / result defs)
            if any(d < 0 for d in v.type.get_shape()):
                raise VerifyException(f"{self.name}: dynamic dims are not allowed ({v.type})")
        self.verify_semantics()

    def verify_semantics(self) -> None:
        pass


# ----------------------------------------------------------------------------------------------
# constants and weights
# ----------------------------------------------------------------------------------------------
@irdl_op_definition
class WeightOp(NNOp):
    """`%w = nn.weight @name : tensor<...>`: a model parameter held in the WeightStore."""

    name = "nn.weight"
    sym = prop_def(SymbolRefAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$sym attr-dict `:` type($result)"

    def __init__(self, sym: str, type: TensorType):
        super().__init__(properties={"sym": SymbolRefAttr(sym)}, result_types=[type])

    @property
    def weight_name(self) -> str:
        return self.sym.root_reference.data


@irdl_op_definition
class ConstantOp(NNOp):
    """`%c = nn.constant dense<...> : tensor<...>`: a small inline constant (≤ 4 KiB)."""

    name = "nn.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = None

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(properties={"value": value}, result_types=[value.type])

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("nn.constant expects a dense<...> : tensor<...> literal")
        return cls(value)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)

    def verify_semantics(self) -> None:
        if self.value.type != self.result.type:
            raise VerifyException("nn.constant: value type differs from result type")


# ----------------------------------------------------------------------------------------------
# elementwise
# ----------------------------------------------------------------------------------------------
class UnaryOp(NNOp):
    """y = f(x), same shape and dtype."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, **props: Attribute):
        super().__init__(operands=[x], result_types=[x.type], properties=props)

    def verify_semantics(self) -> None:
        if self.input.type != self.result.type:
            raise VerifyException(f"{self.name}: result type must equal the operand type")


@irdl_op_definition
class ReluOp(UnaryOp):
    """y = max(x, 0), elementwise; same shape and element type."""

    name = "nn.relu"


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """y = 1 / (1 + exp(-x)), elementwise; same shape and element type."""

    name = "nn.sigmoid"


@irdl_op_definition
class SiluOp(UnaryOp):
    """y = x * sigmoid(x), elementwise; same shape and element type."""

    name = "nn.silu"


@irdl_op_definition
class TanhOp(UnaryOp):
    """y = tanh(x), elementwise; same shape and element type."""

    name = "nn.tanh"


@irdl_op_definition
class ExpOp(UnaryOp):
    """y = exp(x), elementwise; same shape and element type."""

    name = "nn.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    """y = natural log, elementwise; same shape and element type."""

    name = "nn.log"


@irdl_op_definition
class SqrtOp(UnaryOp):
    """y = square root, elementwise; same shape and element type."""

    name = "nn.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    """y = 1 / sqrt(x), elementwise; same shape and element type."""

    name = "nn.rsqrt"


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    """y = 1 / x, elementwise; same shape and element type."""

    name = "nn.reciprocal"


@irdl_op_definition
class NegOp(UnaryOp):
    """y = -x, elementwise; same shape and element type."""

    name = "nn.neg"


@irdl_op_definition
class AbsOp(UnaryOp):
    """y = |x|, elementwise; same shape and element type."""

    name = "nn.abs"


@irdl_op_definition
class ErfOp(UnaryOp):
    """y = Gauss error function, elementwise; same shape and element type."""

    name = "nn.erf"


@irdl_op_definition
class SinOp(UnaryOp):
    """y = sine, elementwise; same shape and element type."""

    name = "nn.sin"


@irdl_op_definition
class CosOp(UnaryOp):
    """y = cosine, elementwise; same shape and element type."""

    name = "nn.cos"


@irdl_op_definition
class FloorOp(UnaryOp):
    """y = round toward -inf, elementwise; same shape and element type."""

    name = "nn.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """y = round toward +inf, elementwise; same shape and element type."""

    name = "nn.ceil"


@irdl_op_definition
class NotOp(UnaryOp):
    """y = not x, elementwise: logical on i1, bitwise on integers; same shape and element type."""

    name = "nn.not"


@irdl_op_definition
class IdentityOp(UnaryOp):
    """y = x, elementwise; same shape and element type."""

    name = "nn.identity"


@irdl_op_definition
class GeluOp(UnaryOp):
    """GELU; `approximate` (#nn.gelu_approximate) is none (erf form, the default) or tanh."""

    name = "nn.gelu"
    approximate = prop_def(GeluApproximateAttr, default_value=GeluApproximateAttr(GeluApproximate.NONE))

    def __init__(self, x: SSAValue, approximate: GeluApproximate | str = GeluApproximate.NONE):
        super().__init__(x, approximate=GeluApproximateAttr(GeluApproximate(approximate)))


@irdl_op_definition
class LeakyReluOp(UnaryOp):
    """x if x >= 0 else alpha * x."""

    name = "nn.leaky_relu"
    alpha = prop_def(FloatAttr)


@irdl_op_definition
class ClipOp(UnaryOp):
    """min(max(x, min), max); absent bounds are ±inf."""

    name = "nn.clip"
    min = opt_prop_def(FloatAttr)
    max = opt_prop_def(FloatAttr)


class BinaryOp(NNOp):
    """z = f(x, y) with ONNX multidirectional broadcasting; comparisons give i1."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def _result_elem(self, elem: Attribute) -> Attribute:
        return elem

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = broadcast_shapes(shape_of(lhs), shape_of(rhs))
        elem = self._result_elem(lhs.type.element_type)
        super().__init__(operands=[lhs, rhs], result_types=[TensorType(elem, shape)])

    def verify_semantics(self) -> None:
        if self.lhs.type.element_type != self.rhs.type.element_type:
            raise VerifyException(f"{self.name}: operand element types differ")
        shape = broadcast_shapes(shape_of(self.lhs), shape_of(self.rhs))
        elem = self._result_elem(self.lhs.type.element_type)
        if self.result.type != TensorType(elem, shape):
            raise VerifyException(f"{self.name}: result must be {TensorType(elem, shape)}")


class ComparisonOp(BinaryOp):
    """Broadcasting comparison; the result is i1."""

    def _result_elem(self, elem: Attribute) -> Attribute:
        return i1


@irdl_op_definition
class AddOp(BinaryOp):
    """z = x + y, with broadcasting; operands and result share the element type."""

    name = "nn.add"


@irdl_op_definition
class SubOp(BinaryOp):
    """z = x - y, with broadcasting; operands and result share the element type."""

    name = "nn.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    """z = x * y, with broadcasting; operands and result share the element type."""

    name = "nn.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """z = x / y (integer division truncates, as ONNX), with broadcasting; operands and result share the element type."""

    name = "nn.div"


@irdl_op_definition
class PowOp(BinaryOp):
    """z = x ** y, with broadcasting; operands and result share the element type."""

    name = "nn.pow"


@irdl_op_definition
class MaxOp(BinaryOp):
    """z = elementwise maximum, with broadcasting; operands and result share the element type."""

    name = "nn.max"


@irdl_op_definition
class MinOp(BinaryOp):
    """z = elementwise minimum, with broadcasting; operands and result share the element type."""

    name = "nn.min"


@irdl_op_definition
class ModOp(BinaryOp):
    """z = remainder with the sign of the divisor (ONNX Mod, fmod = 0), with broadcasting; operands and result share the element type."""

    name = "nn.mod"


@irdl_op_definition
class FmodOp(BinaryOp):
    """z = remainder with the sign of the dividend (C fmod; ONNX Mod, fmod = 1), with broadcasting; operands and result share the element type."""

    name = "nn.fmod"


@irdl_op_definition
class AndOp(BinaryOp):
    """z = x and y with broadcasting: logical on i1, bitwise on integers; operands and result share the element type."""

    name = "nn.and"


@irdl_op_definition
class OrOp(BinaryOp):
    """z = x or y with broadcasting: logical on i1, bitwise on integers; operands and result share the element type."""

    name = "nn.or"


@irdl_op_definition
class EqualOp(ComparisonOp):
    """z = x == y, with broadcasting; the result is i1."""

    name = "nn.equal"


@irdl_op_definition
class LessOp(ComparisonOp):
    """z = x < y, with broadcasting; the result is i1."""

    name = "nn.less"


@irdl_op_definition
class LessEqualOp(ComparisonOp):
    """z = x <= y, with broadcasting; the result is i1."""

    name = "nn.less_equal"


@irdl_op_definition
class GreaterOp(ComparisonOp):
    """z = x > y, with broadcasting; the result is i1."""

    name = "nn.greater"


@irdl_op_definition
class GreaterEqualOp(ComparisonOp):
    """z = x >= y, with broadcasting; the result is i1."""

    name = "nn.greater_equal"


@irdl_op_definition
class WhereOp(NNOp):
    """cond ? x : y with broadcasting; cond is i1."""

    name = "nn.where"
    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, cond: SSAValue, x: SSAValue, y: SSAValue):
        shape = broadcast_shapes(shape_of(cond), shape_of(x), shape_of(y))
        super().__init__(operands=[cond, x, y], result_types=[TensorType(x.type.element_type, shape)])

    def verify_semantics(self) -> None:
        if self.cond.type.element_type != i1:
            raise VerifyException("nn.where: condition must be i1")
        shape = broadcast_shapes(shape_of(self.cond), shape_of(self.lhs), shape_of(self.rhs))
        if shape_of(self.result) != shape:
            raise VerifyException(f"nn.where: result shape must be {shape}")


@irdl_op_definition
class CastOp(NNOp):
    """Element type conversion as ONNX Cast (round to nearest even; float→int truncates).

    `saturate = false` (float 8 and E8M0 results only) lets out-of-range values become inf/NaN
    instead of ±max finite; `round_mode` ("up", "down", "nearest"; E8M0 results only) rounds to
    a power of two. Absent, they take ONNX's defaults (saturate, "up").
    """

    name = "nn.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    saturate = opt_prop_def(BoolAttr)
    round_mode = opt_prop_def(RoundModeAttr)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, elem: Attribute, saturate: bool = True, round_mode: str = "up"):
        super().__init__(operands=[x], result_types=[TensorType(elem, shape_of(x))], properties=cast_mode(saturate, round_mode))

    def verify_semantics(self) -> None:
        if shape_of(self.input) != shape_of(self.result):
            raise VerifyException("nn.cast: shape must not change")
        verify_cast_mode(self.name, self.result.type.element_type, self.saturate, self.round_mode)


# ----------------------------------------------------------------------------------------------
# linear algebra, normalization, reductions
# ----------------------------------------------------------------------------------------------
def matmul_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy.matmul shape rule (1-D operands promoted and squeezed)."""
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise VerifyException(f"matmul contraction dims differ: {list(a)} x {list(b)}")
    out = (*broadcast_shapes(a2[:-2], b2[:-2]), a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


@irdl_op_definition
class MatmulOp(NNOp):
    """Batched, broadcasting matrix product (ONNX MatMul): [..., M, K] x [..., K, N] -> [..., M, N].
    Optional `ascend.tiling` (#ascend.tiling<{m, n, k, l1_depth, split_k, swizzle}>): its tiles."""

    name = "nn.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    tiling = opt_attr_def(TilingAttr, attr_name=TILING_ATTR)
    traits = traits_def(Pure())

    def __init__(self, a: SSAValue, b: SSAValue, result_elem: Attribute | None = None):
        shape = matmul_shape(shape_of(a), shape_of(b))
        elem = a.type.element_type if result_elem is None else result_elem
        super().__init__(operands=[a, b], result_types=[TensorType(elem, shape)])

    def verify_semantics(self) -> None:
        if shape_of(self.result) != matmul_shape(shape_of(self.lhs), shape_of(self.rhs)):
            raise VerifyException("nn.matmul: result shape does not follow the matmul rule")
        a, b, r = (v.type.element_type for v in (self.lhs, self.rhs, self.result))
        if a == b == i8 and r != i32 or (a != i8 or b != i8) and r != a:
            # int8 x int8 accumulates in int32 as the cube's s8 mmad does; other types keep theirs
            raise VerifyException(f"nn.matmul: {a} x {b} cannot give {r} (only i8 x i8 -> i32 widens)")
        if 0 in shape_of(self.lhs) or 0 in shape_of(self.rhs):  # tilings divide by every dim
            raise VerifyException("nn.matmul: zero-size operands are not supported")


class AxisOp(NNOp):
    input = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def verify_semantics(self) -> None:
        rank = len(shape_of(self.input))
        if not -rank <= self.axis.value.data < max(rank, 1):
            raise VerifyException(f"{self.name}: axis {self.axis.value.data} out of range for rank {rank}")


@irdl_op_definition
class SoftmaxOp(AxisOp):
    """exp(x - max) / sum along `axis` (ONNX opset ≥ 13 semantics)."""

    name = "nn.softmax"

    def __init__(self, x: SSAValue, axis: int):
        super().__init__(operands=[x], result_types=[x.type], properties={"axis": IntegerAttr(axis, i64)})


@irdl_op_definition
class LayerNormOp(NNOp):
    """(x - mean) / sqrt(var + epsilon) * scale + bias over axes [axis, rank).

    With `stats`, two more results: the mean and 1 / sqrt(var + epsilon), shaped like x with
    the normalized dims kept as 1, in the statistics type (f32 for 16-bit floats and f32, f64
    for f64) — ONNX LayerNormalization's Mean and InvStdDev outputs."""

    name = "nn.layer_norm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    stats = var_result_def(TensorType)
    axis = prop_def(IntegerAttr)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())

    def __init__(
        self, x: SSAValue, scale: SSAValue, bias: SSAValue | None, axis: int, epsilon: float, stats: bool = False
    ):
        stat_types = [self.stats_type(x.type, axis)] * 2 if stats else []
        super().__init__(
            operands=[x, scale, bias],
            result_types=[x.type, stat_types],
            properties={"axis": IntegerAttr(axis, i64), "epsilon": FloatAttr(epsilon, 32)},
        )

    @staticmethod
    def stats_type(x: TensorType, axis: int) -> TensorType:
        shape = x.get_shape()
        axis %= max(len(shape), 1)
        elem = x.element_type
        return TensorType(f64 if elem == f64 else f32, [*shape[:axis], *[1] * (len(shape) - axis)])

    def verify_semantics(self) -> None:
        want = self.stats_type(self.input.type, self.axis.value.data)
        if len(self.stats) not in (0, 2) or any(r.type != want for r in self.stats):
            raise VerifyException(f"nn.layer_norm: the statistics results must be none or two of {want}")


@irdl_op_definition
class RmsNormOp(NNOp):
    """x / sqrt(mean(x², axes [axis, rank)) + epsilon) * scale."""

    name = "nn.rms_norm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())


class ReduceOp(NNOp):
    """Reduction over `axes` (normalized, sorted, non-negative) keeping dims if `keepdims`."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    axes = prop_def(DenseArrayBase)
    keepdims = prop_def(BoolAttr)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, axes: Sequence[int], keepdims: bool):
        shape = shape_of(x)
        out = [1 if i in axes else d for i, d in enumerate(shape)]
        if not keepdims:
            out = [d for i, d in enumerate(shape) if i not in axes]
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, out)],
            properties={"axes": _int_array(sorted(axes)), "keepdims": BoolAttr(keepdims, i1)},
        )

    def verify_semantics(self) -> None:
        rank = len(shape_of(self.input))
        axes = self.axes.get_values()
        if any(not 0 <= a < rank for a in axes) or list(axes) != sorted(set(axes)):
            raise VerifyException(f"{self.name}: axes {list(axes)} must be sorted, unique, in [0, {rank})")


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """The sum over axes; the input's element type."""

    name = "nn.reduce_sum"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """The mean over axes; the input's element type."""

    name = "nn.reduce_mean"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    """The max over axes; the input's element type."""

    name = "nn.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    """The min over axes; the input's element type."""

    name = "nn.reduce_min"


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    """The product over axes; the input's element type."""

    name = "nn.reduce_prod"


@irdl_op_definition
class TopKOp(NNOp):
    """The `k` largest (or smallest) elements along `axis`, sorted, and their i64 indices
    (ties: the lower index first, as ONNX TopK)."""

    name = "nn.topk"
    input = operand_def(TensorType)
    values = result_def(TensorType)
    indices = result_def(TensorType)
    k = prop_def(IntegerAttr)
    axis = prop_def(IntegerAttr)
    largest = prop_def(BoolAttr)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, k: int, axis: int, largest: bool = True):
        shape = list(shape_of(x))
        shape[axis] = k
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, shape), TensorType(i64, shape)],
            properties={"k": IntegerAttr(k, i64), "axis": IntegerAttr(axis, i64), "largest": BoolAttr(largest, i1)},
        )

    def verify_semantics(self) -> None:
        shape, axis, k = shape_of(self.input), self.axis.value.data, self.k.value.data
        if not 0 <= axis < len(shape) or not 0 <= k <= shape[axis]:
            raise VerifyException(f"nn.topk: k={k} / axis={axis} out of range for shape {list(shape)}")
        expect = (*shape[:axis], k, *shape[axis + 1 :])
        if shape_of(self.values) != expect or shape_of(self.indices) != expect:
            raise VerifyException(f"nn.topk: results must have shape {list(expect)}")
        if self.values.type.element_type != self.input.type.element_type or self.indices.type.element_type != i64:
            raise VerifyException("nn.topk: values keep the input element type, indices are i64")


def window_output_size(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, dilation: int = 1) -> int:
    """Number of sliding-window positions along one spatial dim (floor rule, as ONNX Conv)."""
    return (size + pad_begin + pad_end - dilation * (kernel - 1) - 1) // stride + 1


class WindowOp(NNOp):
    """Sliding windows over the two trailing dims of an NCHW input.

    `pads` = [top, left, bottom, right]; `strides`, `dilations` = [h, w].
    """

    strides = prop_def(DenseArrayBase)
    pads = prop_def(DenseArrayBase)
    dilations = prop_def(DenseArrayBase)

    def _verify_window(self, kernel: Sequence[int], allow_partial: bool) -> None:
        strides, pads, dilations = self.strides.get_values(), self.pads.get_values(), self.dilations.get_values()
        if len(strides) != 2 or len(pads) != 4 or len(dilations) != 2 or len(kernel) != 2:
            raise VerifyException(f"{self.name}: expects 2 strides, 4 pads, 2 dilations and a 2-D kernel")
        if min(strides) < 1 or min(dilations) < 1 or min(pads) < 0:
            raise VerifyException(f"{self.name}: strides and dilations must be ≥ 1, pads ≥ 0")
        in_shape, out_shape = shape_of(self.operands[0]), shape_of(self.results[0])
        if len(in_shape) != 4 or len(out_shape) != 4:
            raise VerifyException(f"{self.name}: expects NCHW tensors")
        for d in range(2):
            floor = window_output_size(in_shape[2 + d], kernel[d], strides[d], pads[d], pads[2 + d], dilations[d])
            # A pool with ceil_mode keeps one more window that starts inside the padded input.
            ok = out_shape[2 + d] in ((floor, floor + 1) if allow_partial else (floor,))
            if not ok or out_shape[2 + d] < 1:
                raise VerifyException(f"{self.name}: output dim {2 + d} is {out_shape[2 + d]}, expected {floor}")


@irdl_op_definition
class Conv2dOp(WindowOp):
    """2-D convolution (ONNX Conv), NCHW: input [N, C, H, W], weight [O, C/group, kh, kw],
    optional bias [O] → [N, O, Ho, Wo]. int8 x int8 accumulates in int32 (the cube's s8 mmad,
    as nn.matmul); other types keep the input's."""

    name = "nn.conv2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    group = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def __init__(
        self, x: SSAValue, w: SSAValue, b: SSAValue | None, strides: Sequence[int], pads: Sequence[int],
        dilations: Sequence[int], group: int, result_elem: Attribute | None = None,
    ):
        n, _, h, wd = shape_of(x)
        o, _, kh, kw = shape_of(w)
        out = [n, o, *(window_output_size(size, k, st, pads[d], pads[2 + d], dl)
                       for d, (size, k, st, dl) in enumerate(zip((h, wd), (kh, kw), strides, dilations)))]
        super().__init__(
            operands=[x, w, b],
            result_types=[TensorType(x.type.element_type if result_elem is None else result_elem, out)],
            properties={
                "strides": _int_array(strides), "pads": _int_array(pads), "dilations": _int_array(dilations),
                "group": IntegerAttr(group, i64),
            },
        )

    def verify_semantics(self) -> None:
        x, w = shape_of(self.input), shape_of(self.weight)
        group = self.group.value.data
        if len(w) != 4 or len(x) != 4 or group < 1 or x[1] != w[1] * group or w[0] % group:
            raise VerifyException(f"nn.conv2d: weight {list(w)} does not fit input {list(x)} with group {group}")
        if self.bias is not None and shape_of(self.bias) != (w[0],):
            raise VerifyException(f"nn.conv2d: bias must have shape [{w[0]}]")
        if shape_of(self.result)[:2] != (x[0], w[0]):
            raise VerifyException("nn.conv2d: result must be [N, O, Ho, Wo]")
        a, b, r = (v.type.element_type for v in (self.input, self.weight, self.result))
        if (a == b == i8) != (r == i32 and a == i8):
            raise VerifyException(f"nn.conv2d: {a} x {b} cannot give {r} (only i8 x i8 -> i32 widens)")
        self._verify_window(w[2:], allow_partial=False)


@irdl_op_definition
class Pool2dOp(WindowOp):
    """2-D max or average pooling (ONNX MaxPool / AveragePool), NCHW. `kind` (#nn.pool_kind) is
    max or avg.

    Padding never wins a max; an average divides by the window's elements inside the input, or
    inside input + pads if `count_include_pad`. The result shape may hold one extra window per dim
    (ONNX ceil_mode); it is clipped to the padded input.

    A max pool may have a second result, `indices` (i64, the result's shape): where each max is
    in its own H x W plane, h * W + w (`storage_order` 0, row-major) or h + w * H (1,
    column-major); the first of equal maxima in window order (kernel rows, then columns) wins."""

    name = "nn.pool2d"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    indices = var_result_def(TensorType)
    kind = prop_def(PoolKindAttr)
    kernel = prop_def(DenseArrayBase)
    count_include_pad = prop_def(BoolAttr)
    storage_order = opt_prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def __init__(
        self, x: SSAValue, kind: PoolKind | str, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int],
        dilations: Sequence[int], out_hw: Sequence[int], count_include_pad: bool = False,
        storage_order: int | None = None,
    ):
        """`storage_order` (0 or 1) asks a max pool for the indices result."""
        n, c, _, _ = shape_of(x)
        props = {
            "kind": PoolKindAttr(PoolKind(kind)), "kernel": _int_array(kernel), "strides": _int_array(strides),
            "pads": _int_array(pads), "dilations": _int_array(dilations),
            "count_include_pad": BoolAttr(count_include_pad, i1),
        }
        if storage_order is not None:
            props["storage_order"] = IntegerAttr(storage_order, i64)
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, [n, c, *out_hw]),
                          [TensorType(i64, [n, c, *out_hw])] if storage_order is not None else []],
            properties=props,
        )

    def verify_semantics(self) -> None:
        if shape_of(self.result)[:2] != shape_of(self.input)[:2]:
            raise VerifyException("nn.pool2d: pooling keeps N and C")
        with_indices = (len(self.indices), self.storage_order is not None)
        if with_indices not in ((0, False), (1, True)) or (self.indices and self.kind.data != PoolKind.MAX):
            raise VerifyException("nn.pool2d: a max pool has the indices result exactly when it has storage_order")
        if self.indices and (self.indices[0].type != TensorType(i64, shape_of(self.result))
                             or self.storage_order.value.data not in (0, 1)):
            raise VerifyException("nn.pool2d: indices are i64 of the result's shape, storage_order 0 or 1")
        self._verify_window(self.kernel.get_values(), allow_partial=True)


# ----------------------------------------------------------------------------------------------
# data movement
# ----------------------------------------------------------------------------------------------
@irdl_op_definition
class TransposeOp(NNOp):
    """result[i_perm] = input[i]: result dim k is input dim perm[k]."""

    name = "nn.transpose"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    perm = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, perm: Sequence[int]):
        shape = shape_of(x)
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, [shape[p] for p in perm])],
            properties={"perm": _int_array(perm)},
        )

    def verify_semantics(self) -> None:
        perm = self.perm.get_values()
        shape = shape_of(self.input)
        if sorted(perm) != list(range(len(shape))):
            raise VerifyException(f"nn.transpose: {list(perm)} is not a permutation of rank {len(shape)}")
        if shape_of(self.result) != tuple(shape[p] for p in perm):
            raise VerifyException("nn.transpose: result shape does not match the permutation")


@irdl_op_definition
class ReshapeOp(NNOp):
    """Same elements, row-major order, new static shape (the result type)."""

    name = "nn.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[x], result_types=[TensorType(x.type.element_type, list(shape))])

    def verify_semantics(self) -> None:
        import math

        if math.prod(shape_of(self.input)) != math.prod(shape_of(self.result)):
            raise VerifyException("nn.reshape: element counts differ")


@irdl_op_definition
class ExpandOp(NNOp):
    """Broadcast the input to the result shape (numpy broadcast_to)."""

    name = "nn.expand"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[x], result_types=[TensorType(x.type.element_type, list(shape))])

    def verify_semantics(self) -> None:
        if broadcast_shapes(shape_of(self.input), shape_of(self.result)) != shape_of(self.result):
            raise VerifyException("nn.expand: input does not broadcast to the result shape")


@irdl_op_definition
class ConcatOp(NNOp):
    """Concatenation along `axis` (non-negative)."""

    name = "nn.concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def __init__(self, xs: Sequence[SSAValue], axis: int):
        shape = list(shape_of(xs[0]))
        shape[axis] = sum(shape_of(x)[axis] for x in xs)
        super().__init__(
            operands=[list(xs)],
            result_types=[TensorType(xs[0].type.element_type, shape)],
            properties={"axis": IntegerAttr(axis, i64)},
        )

    def verify_semantics(self) -> None:
        axis = self.axis.value.data
        shapes = [shape_of(x) for x in self.inputs]
        expect = list(shapes[0])
        if not 0 <= axis < len(expect):
            raise VerifyException(f"nn.concat: axis {axis} out of range")
        expect[axis] = sum(s[axis] for s in shapes)
        for s in shapes:
            if len(s) != len(expect) or any(a != b for i, (a, b) in enumerate(zip(s, expect)) if i != axis):
                raise VerifyException(f"nn.concat: operand shape {list(s)} does not match")
        if list(shape_of(self.result)) != expect:
            raise VerifyException("nn.concat: wrong result shape")


@irdl_op_definition
class SliceOp(NNOp):
    """Static strided slice: per dim, start (non-negative) and step (> 0 or < 0); sizes from the result."""

    name = "nn.slice"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    starts = prop_def(DenseArrayBase)
    steps = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, starts: Sequence[int], steps: Sequence[int], shape: Sequence[int]):
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, list(shape))],
            properties={"starts": _int_array(starts), "steps": _int_array(steps)},
        )

    def verify_semantics(self) -> None:
        shape = shape_of(self.input)
        out = shape_of(self.result)
        starts, steps = self.starts.get_values(), self.steps.get_values()
        if not len(starts) == len(steps) == len(shape) == len(out):
            raise VerifyException("nn.slice: starts/steps must have one entry per dim")
        for d, (s, st, n, o) in enumerate(zip(starts, steps, shape, out)):
            if st == 0 or (o > 0 and not (0 <= s < n and 0 <= s + (o - 1) * st < n)):
                raise VerifyException(f"nn.slice: dim {d} slice out of bounds")


@irdl_op_definition
class GatherOp(NNOp):
    """ONNX Gather: take `indices` (i64, may be negative) along `axis` of `input`."""

    name = "nn.gather"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def __init__(self, x: SSAValue, idx: SSAValue, axis: int):
        s = shape_of(x)
        shape = (*s[:axis], *shape_of(idx), *s[axis + 1 :])
        super().__init__(
            operands=[x, idx],
            result_types=[TensorType(x.type.element_type, shape)],
            properties={"axis": IntegerAttr(axis, i64)},
        )

    def verify_semantics(self) -> None:
        s, axis = shape_of(self.input), self.axis.value.data
        if not 0 <= axis < len(s):
            raise VerifyException("nn.gather: axis out of range")
        if not isinstance(self.indices.type.element_type, IntegerType):
            raise VerifyException("nn.gather: indices must be integers")
        if shape_of(self.result) != (*s[:axis], *shape_of(self.indices), *s[axis + 1 :]):
            raise VerifyException("nn.gather: wrong result shape")


@irdl_op_definition
class AttentionOp(NNOp):
    """Scaled dot-product attention with grouped K/V heads (GQA/MQA when num_kv_heads < num_heads).

    Operands: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv], optional additive `mask`
    broadcastable to [B, Hq, Sq, Skv]. Result [B, Hq, Sq, Dv]. Query head h reads K/V head
    h // (Hq / Hkv). Meaning, in this order:

        s = scale * (q @ k^T)                      (f32 accumulation)
        s = s + mask                               (if a mask is given)
        s[..., i, j] = lowest finite float         (if causal, where j > i + Skv - Sq)
        out = softmax(s, axis=-1) @ v

    The causal step writes the dtype's lowest finite value, as Hugging Face masks do (not -inf),
    so a row whose every key is masked stays a uniform average, exactly as the unfused graph.

    Optional `ascend.tiling` (#ascend.tiling<{br, bc}>): the flash-attention tile.

    Raises (verify): VerifyException on ranks, head counts or shapes that do not fit.
    """

    name = "nn.attention"
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    result = result_def(TensorType)
    num_heads = prop_def(IntegerAttr)
    num_kv_heads = prop_def(IntegerAttr)
    causal = prop_def(BoolAttr)
    scale = prop_def(FloatAttr)
    tiling = opt_attr_def(TilingAttr, attr_name=TILING_ATTR)
    traits = traits_def(Pure())

    def __init__(
        self, q: SSAValue, k: SSAValue, v: SSAValue, mask: SSAValue | None, *, causal: bool, scale: float
    ):
        b, hq, sq, _ = shape_of(q)
        hkv = shape_of(k)[1]
        dv = shape_of(v)[-1]
        super().__init__(
            operands=[q, k, v, mask],
            result_types=[TensorType(q.type.element_type, [b, hq, sq, dv])],
            properties={
                "num_heads": IntegerAttr(hq, i64), "num_kv_heads": IntegerAttr(hkv, i64),
                "causal": BoolAttr(causal, i1), "scale": FloatAttr(scale, 32),
            },
        )

    def verify_semantics(self) -> None:
        q, k, v = shape_of(self.q), shape_of(self.k), shape_of(self.v)
        if len(q) != 4 or len(k) != 4 or len(v) != 4:
            raise VerifyException("nn.attention: q, k, v must be [B, H, S, D]")
        hq, hkv = self.num_heads.value.data, self.num_kv_heads.value.data
        if q[1] != hq or k[1] != hkv or v[1] != hkv or hkv < 1 or hq % hkv:
            raise VerifyException(f"nn.attention: {hq} query heads cannot share {hkv} K/V heads ({list(q)}, {list(k)})")
        if q[0] != k[0] or k[0] != v[0] or q[3] != k[3] or k[2] != v[2]:
            raise VerifyException(f"nn.attention: q {list(q)}, k {list(k)}, v {list(v)} do not fit")
        if shape_of(self.result) != (q[0], hq, q[2], v[3]):
            raise VerifyException(f"nn.attention: result must be {[q[0], hq, q[2], v[3]]}")
        if self.mask is not None:
            scores = (q[0], hq, q[2], k[2])
            if broadcast_shapes(shape_of(self.mask), scores) != scores:
                raise VerifyException(f"nn.attention: mask {list(shape_of(self.mask))} does not broadcast to {list(scores)}")
