"""Precision policy: run an imported fp32 model in fp16 or bf16 (`--dtype`).

Every f32 tensor of the nn module (arguments, op results, region arguments, `nn.constant`
values, `nn.weight` types) becomes the chosen type, and each f32 WeightStore entry is converted
(lazily: an external-data memmap is converted when first read, never at import). Other element
types (integers, f64, bool) are left alone. What stays in f32 is decided by the lowering
templates, not here: matmuls accumulate in f32 in L0C (FixPipe rounds on the way out), and the
softmax / normalization templates compute their statistics (max, sum, mean, variance) in f32 on
the vector unit (templates/reduction.py `_stat_type`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr, BytesAttr, DenseIntOrFPElementsAttr, FunctionType, IntegerType, ModuleOp, TensorType, bf16, f16, f32,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute
from xdsl.rewriter import Rewriter

from ascendir.dialects import nn
from ascendir.errors import AscendirError
from ascendir.weights import WeightStore

DTYPES: dict[str, tuple[Attribute, np.dtype]] = {
    "fp32": (f32, np.dtype(np.float32)),
    "fp16": (f16, np.dtype(np.float16)),
    "bf16": (bf16, np.dtype(ml_dtypes.bfloat16)),
}
"""--dtype name → (xDSL element type, numpy dtype)."""


def saturating_cast(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`a` (f32) as `dtype`, finite values beyond its range clamped to its largest finite value
    (an fp32 "-3.4e38" attention mask stays a huge negative, not -inf, whose products with 0
    would be NaN); infinities and NaN are kept. Arrays of another dtype are returned as they are.
    A zero-stride view (shape-only weights) stays one."""
    a = np.asarray(a)
    if a.dtype != np.float32:
        return a
    if a.size and all(s == 0 for s in a.strides):
        return np.broadcast_to(saturating_cast(a.reshape(-1)[:1].copy(), dtype).reshape(()), a.shape)
    top = float(ml_dtypes.finfo(dtype).max)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(a), np.clip(a, -top, top), a).astype(dtype)


def _convert_type(t: Attribute, elem: Attribute) -> Attribute:
    if isinstance(t, TensorType) and t.element_type == f32:
        return TensorType(elem, t.get_shape())
    return t


def convert_precision(module: ModuleOp, weights: WeightStore, dtype: str) -> None:
    """Rewrite every f32 tensor of the nn-level `module` to `dtype` in place; convert the f32
    weights it references in `weights` (lazily). "fp32" changes nothing.

    Raises:
        AscendirError: an unknown dtype name; a model that quantizes float32 values to integers
            of up to 16 bits (QuantizeLinear, DynamicQuantizeLinear, QLinear*: their rounding and
            requantization need float32).
    """
    if dtype not in DTYPES:
        raise AscendirError(f"--dtype must be one of {', '.join(DTYPES)}, got '{dtype}'")
    elem, np_dtype = DTYPES[dtype]
    if elem == f32:
        return
    for op in module.walk():
        # QuantizeLinear & co. round float32 values to integers (converters/quantization.py: a
        # float32 round-to-integer idiom and float32 requantization multipliers); in fp16 /
        # bf16 that arithmetic would quantize to other integers than onnxruntime
        if isinstance(op, nn.CastOp) and op.input.type.element_type == f32 and isinstance(op.result.type.element_type, IntegerType) \
                and op.result.type.element_type.width.data <= 16:
            where = op.attributes.get("onnx.node")
            raise AscendirError(
                f"--dtype {dtype}: the model quantizes float32 values to integers ({op.result.type.element_type} by "
                f"'{where.data if where is not None else op.name}'), which needs float32 arithmetic; run it without --dtype"
            )
    converted: set[str] = set()
    for op in list(module.walk()):
        for region in op.regions:
            for block in region.blocks:
                for arg in list(block.args):
                    if _convert_type(arg.type, elem) is not arg.type:
                        Rewriter.replace_value_with_new_type(arg, _convert_type(arg.type, elem))
        if isinstance(op, FuncOp):
            ft = op.function_type
            op.function_type = FunctionType.from_lists(
                [_convert_type(t, elem) for t in ft.inputs.data], [_convert_type(t, elem) for t in ft.outputs.data]
            )
        for res in list(op.results):
            if _convert_type(res.type, elem) is not res.type:
                Rewriter.replace_value_with_new_type(res, _convert_type(res.type, elem))
        if isinstance(op, nn.ConstantOp) and op.value.get_type().element_type == f32:
            shape = op.value.get_type().get_shape()
            values = saturating_cast(np.asarray(op.value.get_values(), np.float32), np_dtype)
            op.value = DenseIntOrFPElementsAttr(TensorType(elem, shape), BytesAttr(values.tobytes()))
        if isinstance(op, nn.WeightOp) and op.weight_name not in converted and op.weight_name in weights:
            converted.add(op.weight_name)
            weights.convert(op.weight_name, lambda a, t=np_dtype: saturating_cast(a, t))
