"""The state shared by converters: values by ONNX name, the block being built, the WeightStore,
and the per-node view (`NodeContext`) each converter receives."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue

from ascendir.dialects import nn
from ascendir.dtypes import from_numpy_dtype, to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.frontends.onnx.loading import onnx_dtype_to_numpy, read_in_shape_only, zero_view
from ascendir.frontends.onnx.values import Constant, TensorSequence, Value
from ascendir.weights import WeightStore

INLINE_LIMIT_BYTES = 4096
"""Constants up to this size are printed inline (`nn.constant dense<...>`); larger ones become
`nn.weight` entries of the WeightStore."""


def tensor_type(dtype: np.dtype, shape: Sequence[int]) -> TensorType:
    return TensorType(from_numpy_dtype(dtype), list(shape))


class ImportState:
    """Everything one graph import accumulates."""

    def __init__(self, block: Block, weights: WeightStore, opset: int, used_names: set[str], shape_only: bool = False):
        self.block = block
        self.weights = weights
        self.opset = opset
        self.shape_only = shape_only
        self.used_names = used_names
        self.values: dict[str, Value] = {}
        # imports a subgraph (an If branch, a Loop / Scan body with its inputs bound to the given
        # values) into the block, returning its outputs (None where an unsupported op poisoned
        # one); set by the importer
        self.import_subgraph: Callable[..., list[Value | None]] | None = None
        # Small constants are shared by value: exporters repeat the same scalar in every layer.
        self._inline: dict[tuple[str, tuple[int, ...], bytes], SSAValue] = {}
        # DequantizeLinear nodes by output name: a MatMul / Gemm between two dequantized values
        # runs as the integer product they came from (converters/quantization.py: qdq_matmul)
        self.dequantized: dict[str, NodeProto] = {}

    def emit(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def derive(
        self, name: str, sources: Sequence[Constant | None], compute: Callable[[], np.ndarray],
        shape: Sequence[int], dtype: np.dtype,
    ) -> Constant:
        """A constant computed at import from `sources` by `compute` (which reads their arrays).

        When a source is still unread (external data), so is the result: `compute` runs only when
        the value is needed, and under --shape-only a weight-like result (see
        `read_in_shape_only`) is zeros of its shape, as its sources are: no weight byte is read or
        materialized for a weight transposed, reshaped or scaled at import.
        """
        present = [s for s in sources if s is not None]
        parameter = any(s.parameter for s in present)
        if all(s.lazy_source is None for s in present):
            return Constant(name, compute(), parameter=parameter)
        shape, dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        if self.shape_only and not read_in_shape_only(dtype, math.prod(shape)):
            return Constant(name, lambda: zero_view(shape, dtype), shape, dtype, parameter=parameter)
        return Constant(name, compute, shape, dtype, parameter=parameter)

    def materialize(self, const: Constant) -> SSAValue:
        """The SSA value of a constant: `nn.constant` if small, else an `nn.weight` (once each)."""
        if const.ssa is not None:
            return const.ssa
        ttype = tensor_type(const.dtype, const.shape)
        if const.nbytes <= INLINE_LIMIT_BYTES and (not const.parameter or const.size == 1):
            array = np.asarray(const.array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
            # xDSL stores an i1 `true` as the signless 1-bit value -1 (byte 0xff), as its parser does.
            raw = (array.astype(np.int8) * -1).tobytes() if array.dtype == np.bool_ else array.tobytes()
            key = (array.dtype.str, array.shape, raw)
            if key not in self._inline:
                attr = DenseIntOrFPElementsAttr(ttype, BytesAttr(key[2]))
                self._inline[key] = self.emit(nn.ConstantOp(attr)).results[0]
            const.ssa = self._inline[key]
        else:
            lazy = const.lazy_source
            name = self.weights.add(const.name, lazy if lazy is not None else const.array)
            const.ssa = self.emit(nn.WeightOp(name, ttype)).results[0]
        return const.ssa


class NodeContext:
    """One ONNX node as a converter sees it: typed access to inputs, attributes and emission.

    Every error a converter raises should come from `error()`, so it names the node.
    """

    def __init__(self, node: NodeProto, label: str, state: ImportState):
        self.node = node
        self.label = label
        self.state = state
        self.op_type = node.op_type
        self.opset = state.opset
        self._attrs = {a.name: a for a in node.attribute}

    # -- errors ----------------------------------------------------------------------------------
    def error(self, reason: str) -> AscendirError:
        return AscendirError(f"{self.op_type} '{self.label}': {reason}")

    # -- attributes ------------------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute value (ints, floats, strings decoded, tensors as numpy arrays) or `default`."""
        if name not in self._attrs:
            return default
        value = helper.get_attribute_value(self._attrs[name])
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, TensorProto):
            return numpy_helper.to_array(value)
        return value

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    # -- inputs ----------------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self.node.input)

    def has_input(self, i: int) -> bool:
        """Whether optional input `i` is given (present and not the empty name)."""
        return i < len(self.node.input) and self.node.input[i] != ""

    def input(self, i: int) -> Value:
        if not self.has_input(i):
            raise self.error(f"input {i} is required")
        return self.state.values[self.node.input[i]]

    def value(self, i: int) -> SSAValue:
        """Input `i` as an SSA value (a known constant is materialized).

        Raises:
            AscendirError: input `i` is a sequence (only the sequence ops take one)."""
        v = self.input(i)
        if isinstance(v, TensorSequence):
            raise self.error(f"input {i} ('{self.node.input[i]}') is a sequence; {self.op_type} takes a tensor")
        if not isinstance(v, Constant):
            return v
        try:
            return self.state.materialize(v)
        except AscendirError as e:  # e.g. a string tensor: name the node that needed it
            raise self.error(str(e)) from None

    def const(self, i: int) -> np.ndarray | None:
        """Input `i`'s value if it is known at import, else None."""
        v = self.input(i)
        return v.array if isinstance(v, Constant) else None

    def require_const(self, i: int, what: str) -> np.ndarray:
        """Input `i`'s value, which the conversion needs at import (a shape, axes, ...).

        Raises:
            AscendirError: the input depends on the model's runtime inputs.
        """
        value = self.const(i)
        if value is None:
            raise self.error(
                f"{what} (input {i}, '{self.node.input[i]}') depends on runtime values; only shapes "
                "computable at import are supported"
            )
        return value

    def require_scalar(self, i: int, what: str) -> np.generic:
        """Input `i`'s one value (a 0-d or one-element constant: TopK's k, CumSum's axis, ...).

        Raises:
            AscendirError: the input depends on runtime values, or holds other than one value.
        """
        value = np.asarray(self.require_const(i, what))
        if value.size != 1:
            raise self.error(f"{what} (input {i}, '{self.node.input[i]}') must hold one value, got shape {list(value.shape)}")
        return value.reshape(-1)[0]

    def shape(self, i: int) -> tuple[int, ...]:
        v = self.input(i)
        if isinstance(v, TensorSequence):
            raise self.error(f"input {i} ('{self.node.input[i]}') is a sequence; {self.op_type} takes a tensor")
        return v.shape if isinstance(v, Constant) else nn.shape_of(v)

    def dtype(self, i: int) -> np.dtype:
        v = self.input(i)
        if isinstance(v, TensorSequence):
            return v.dtype
        return v.dtype if isinstance(v, Constant) else to_numpy_dtype(v.type.element_type)

    def same_dtype(self, *indices: int) -> None:
        """Raises AscendirError when the given (present) inputs have different element types."""
        dtypes = {self.dtype(i) for i in indices if self.has_input(i)}
        if len(dtypes) > 1:
            raise self.error(f"operands have different element types ({', '.join(sorted(map(str, dtypes)))})")

    def elem(self, i: int) -> Attribute:
        return from_numpy_dtype(self.dtype(i))

    # -- outputs ---------------------------------------------------------------------------------
    def output_used(self, i: int) -> bool:
        """Whether output `i` exists and some node or the graph reads it."""
        return i < len(self.node.output) and self.node.output[i] in self.state.used_names

    # -- building --------------------------------------------------------------------------------
    def emit(self, op: Operation) -> SSAValue:
        """Append `op` to the function body; returns its (single) result."""
        self.state.emit(op)
        return op.results[0]

    def constant(self, array: np.ndarray, suffix: str) -> SSAValue:
        """Materialize a constant the conversion computed from no single input (a scalar, indices);
        a large one is stored as weight `<first output name>.<suffix>`. Values computed from a
        constant input (a transposed weight) go through `derived`."""
        base = self.node.output[0] or self.label
        return self.state.materialize(Constant(f"{base}.{suffix}", np.asarray(array)))

    def derived(self, i: int, compute: Callable[[np.ndarray], np.ndarray], shape: Sequence[int], suffix: str) -> SSAValue:
        """Materialize `compute(value of constant input i)`, a result of `shape` and input i's
        dtype (e.g. a transposed weight), stored as `<input name>.<suffix>`; computed only when
        read when input i is still unread (see `ImportState.derive`)."""
        source = self.input(i)
        assert isinstance(source, Constant)
        name = f"{self.node.input[i]}.{suffix}"
        return self.state.materialize(
            self.state.derive(name, [source], lambda: np.asarray(compute(source.array)), shape, source.dtype)
        )

    def scalar(self, value: float | int | bool, like: np.dtype) -> SSAValue:
        """A 0-d constant of dtype `like` (broadcasts against any shape)."""
        return self.constant(np.asarray(value, dtype=like), "scalar")

    def onnx_dtype(self, data_type: int) -> np.dtype:
        return onnx_dtype_to_numpy(data_type, f"{self.op_type} '{self.label}'")

    # -- axes ------------------------------------------------------------------------------------
    def axis(self, axis: int, rank: int) -> int:
        """`axis` in [-rank, rank) made non-negative.

        Raises:
            AscendirError: out of range.
        """
        if not -rank <= axis < max(rank, 1):
            raise self.error(f"axis {axis} is out of range for rank {rank}")
        return axis % rank if rank else 0

    def axes(self, axes: Sequence[int], rank: int) -> list[int]:
        """Normalized, sorted, unique axes.

        Raises:
            AscendirError: a scalar where the list belongs (a 0-d axes input), an axis out of
                range, or one repeated.
        """
        if not isinstance(axes, Sequence):
            raise self.error(f"axes must be a 1-D list of integers, got the scalar {axes!r}")
        normalized = sorted({self.axis(int(a), rank) for a in axes})
        if len(normalized) != len(axes):
            raise self.error(f"axes {list(axes)} repeat a dimension")
        return normalized
