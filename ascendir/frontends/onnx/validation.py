"""Checks of a node against its ONNX operator schema, before folding or a converter reads it.

One place answers "is this node well-formed ONNX with sizes ascendir can hold", so converters may
read attributes and operands as the schema promises:

* attributes (`check_attributes`): each is one the schema of the node's op and opset declares,
  of the declared kind (an INT where INT is declared, not a FLOAT, TENSOR or GRAPH), required ones
  are present, strings are UTF-8, none refers to a function attribute outside a function;
* operands and results (`check_node`): onnx's own shape inference in strict mode, with the
  operand types import knows and the values of small constants, must accept the node (ranks,
  element types, axes, `k` of TopK, ...); the results it infers must stay within the element
  budget (`FOLD_BUDGET` for values computed at import, `TENSOR_BUDGET` for any tensor), so a
  200-byte model asking for Range(2^29) or Expand to 2^28 elements is an error naming the node and
  the size, not gigabytes of memory;
* shape and axes operands (`SHAPE_OPERANDS`) have at most `MAX_SHAPE_ELEMENTS` elements;
* tensors (`tensor_data_problem`, for initializers and TENSOR attributes): dims non-negative,
  at most `TENSOR_BUDGET` elements, and exactly as many raw bytes or typed values as the dims say;
* names (`check_name`): no control characters, at most `MAX_NAME` characters.

Errors are AscendirErrors without the node prefix (the importer adds `<op> '<node>': `).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import AttributeProto, NodeProto, TensorProto, helper, numpy_helper

from ascendir.dialects.ir_checks import TENSOR_BUDGET, over_budget
from ascendir.errors import AscendirError

FOLD_BUDGET = 2**26
"""Elements a value computed at import may have beyond its operands' (256 MiB of f32): folding
materializes it in memory."""


MAX_SHAPE_ELEMENTS = 128
"""Elements a shape, axes, pads or repeats operand may have (numpy holds at most 64 dims)."""

MAX_NAME = 4096
"""Characters a node or value name may have (zip entry names of the weights file hold 65535 bytes;
messages clip names further)."""

INFER_VALUE_LIMIT = 64
"""Constants up to this many elements are given to shape inference by value (shapes, axes)."""

# Operand positions that hold shapes, axes, pads or repeats (read as integers at import).
SHAPE_OPERANDS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Tile": (1,), "Squeeze": (1,), "Unsqueeze": (1,),
    "Slice": (1, 2, 3, 4), "Pad": (1, 3), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
    "ReduceProd": (1,), "ReduceL2": (1,), "ReduceL1": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,),
    "Resize": (2, 3), "Upsample": (1,), "TopK": (1,), "OneHot": (1,), "Range": (0, 1, 2),
}

_KIND = AttributeProto.AttributeType.Name

# INT attributes the schema documents as >= 0 whose negative values onnx's own shape inference
# does not check (onnx 1.23: GatherND batch_dims = -2^31 indexes out of bounds and segfaults).
NON_NEGATIVE = {("GatherND", "batch_dims")}

# INT attributes that must equal the node's output count, which onnx's own shape inference does
# not check first (onnx 1.23: Split num_outputs = 2 with 3 outputs indexes its 2 split sizes by
# output: a C++ assertion aborts the process; found by the fuzz campaign).
OUTPUT_COUNT = {("Split", "num_outputs")}


def clip(name: str, limit: int = 60) -> str:
    """`name` for a message: control characters shown escaped, at most `limit` characters."""
    shown = name.encode("unicode_escape").decode("ascii") if not name.isprintable() else name
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def check_name(name: str | bytes, what: str) -> None:
    """Raises AscendirError when `name` is not UTF-8 (protobuf then hands over bytes), has a
    control character or more than MAX_NAME characters."""
    if isinstance(name, bytes):
        raise AscendirError(f"{what} '{clip(name.decode('utf-8', 'replace'))}' is not UTF-8 text")
    if len(name) > MAX_NAME:
        raise AscendirError(f"{what} '{clip(name)}' is {len(name)} characters long (at most {MAX_NAME})")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise AscendirError(f"{what} '{clip(name)}' contains a control character")


def check_graph_names(graph: onnx.GraphProto) -> None:
    """Every node, value, initializer, input and output name of `graph` passes `check_name`."""
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        check_name(vi.name, "value")
    for t in graph.initializer:
        check_name(t.name, "initializer")
    for node in graph.node:
        check_name(node.name, "node")
        for name in list(node.input) + list(node.output):
            check_name(name, f"{node.op_type} value")


# Element types stored two to a byte (raw data) or to an int32_data entry.
_PACKED = frozenset(getattr(TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1") if hasattr(TensorProto, n))
_FIELD = {
    TensorProto.FLOAT: "float_data", TensorProto.COMPLEX64: "float_data", TensorProto.INT64: "int64_data",
    TensorProto.DOUBLE: "double_data", TensorProto.COMPLEX128: "double_data", TensorProto.UINT32: "uint64_data",
    TensorProto.UINT64: "uint64_data", TensorProto.STRING: "string_data",
}


def tensor_data_problem(t: TensorProto) -> str | None:
    """Why the TensorProto `t` cannot be read as its dims say, or None: a negative dim, more than
    TENSOR_BUDGET elements, or raw data / typed values that do not match the element count
    (external data is checked when it is read, in loading.py)."""
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        return f"negative dim in shape {dims}"
    if (why := over_budget(dims)) is not None:
        return f"shape {dims} {why}"
    size = math.prod(dims)
    if t.data_location == TensorProto.EXTERNAL:
        return None
    packed = t.data_type in _PACKED
    if t.HasField("raw_data"):
        if t.data_type == TensorProto.STRING:
            return "a string tensor cannot hold raw data"
        try:
            itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
        except (KeyError, TypeError, ValueError):
            return None  # an unknown element type: the dtype check names it
        expected = (size + 1) // 2 if packed else size * itemsize
        if len(t.raw_data) != expected:
            return f"raw data of {len(t.raw_data)} bytes, but shape {dims} needs {expected}"
        return None
    field = _FIELD.get(t.data_type, "int32_data")
    expected = (size + 1) // 2 if packed else size * (2 if t.data_type in (TensorProto.COMPLEX64, TensorProto.COMPLEX128) else 1)
    count = len(getattr(t, field))
    if count != expected:
        return f"{count} values in {field}, but shape {dims} needs {expected}"
    return None


@functools.cache
def _schema(op_type: str, opset: int, domain: str) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except Exception:  # noqa: BLE001 - SchemaError: no such op at this opset (reported as unsupported)
        return None


@functools.cache
def _newest_schema(op_type: str, domain: str) -> onnx.defs.OpSchema | None:
    """The op's newest schema, for an op used at an opset older than the op (LayerNormalization
    at opset 13: the converters take it all the same); only its attribute kinds are checked."""
    try:
        return onnx.defs.get_schema(op_type, domain)
    except Exception:  # noqa: BLE001 - SchemaError: no such op at all
        return None


def check_attributes(node: NodeProto, opset: int) -> None:
    """The node's attributes against the schema of its op at `opset` (see the module docstring).

    Raises:
        AscendirError: naming the attribute, its kind and the kind the schema declares.
    """
    schema = _schema(node.op_type, opset, "")
    seen = set()
    for a in node.attribute:
        check_name(a.name, "attribute")  # a name that is not UTF-8 arrives as bytes
        if a.ref_attr_name:
            raise AscendirError(f"attribute '{clip(a.name)}' refers to function attribute '{clip(a.ref_attr_name)}' outside a function")
        if a.name in seen:
            raise AscendirError(f"attribute '{clip(a.name)}' is given twice")
        seen.add(a.name)
        if a.type in (AttributeProto.STRING, AttributeProto.STRINGS):
            for s in [a.s] if a.type == AttributeProto.STRING else a.strings:
                try:
                    text = s.decode("utf-8")
                except UnicodeDecodeError:
                    raise AscendirError(f"attribute '{clip(a.name)}' is not UTF-8 text") from None
                if any(ord(c) < 32 or ord(c) == 127 for c in text):  # converters quote the value
                    raise AscendirError(f"attribute '{clip(a.name)}' = '{clip(text)}' contains a control character")
        if (node.op_type, a.name) in NON_NEGATIVE and a.type == AttributeProto.INT and a.i < 0:
            raise AscendirError(f"attribute '{a.name}' is {a.i}; it must be >= 0")
        if (node.op_type, a.name) in OUTPUT_COUNT and a.type == AttributeProto.INT and a.i != len(node.output):
            raise AscendirError(f"attribute '{a.name}' is {a.i}, but the node has {len(node.output)} outputs")
        if a.type == AttributeProto.TENSOR:
            if a.t.data_location == TensorProto.EXTERNAL:
                raise AscendirError(f"attribute '{clip(a.name)}': a tensor attribute with external data is not supported")
            problem = tensor_data_problem(a.t)
            if problem:
                raise AscendirError(f"attribute '{clip(a.name)}': {problem}")
        if schema is None:
            newest = _newest_schema(node.op_type, "")
            declared = newest.attributes.get(a.name) if newest is not None else None
            if declared is not None and a.type != declared.type:
                raise AscendirError(f"attribute '{a.name}' is {_kind(a.type)}, {node.op_type} (opset "
                                    f"{newest.since_version}) declares {_kind(declared.type)}")
            continue
        declared = schema.attributes.get(a.name)
        if declared is None:
            raise AscendirError(f"attribute '{clip(a.name)}' is not an attribute of {node.op_type} (opset {opset})")
        if a.type != declared.type:
            raise AscendirError(
                f"attribute '{a.name}' is {_kind(a.type)}, {node.op_type} (opset {opset}) declares {_kind(declared.type)}"
            )
    if schema is not None:
        missing = [name for name, d in schema.attributes.items() if d.required and name not in seen]
        if missing:
            raise AscendirError(f"required attribute '{missing[0]}' is missing")


def _kind(t: int) -> str:
    return _KIND(t) if t in AttributeProto.AttributeType.values() else f"kind {t}"


def check_node(
    node: NodeProto,
    inputs: Sequence[tuple[tuple[int, ...], np.dtype, np.ndarray | None] | None],
    opset: int,
    fold: bool,
) -> list[tuple[int, ...]] | None:
    """Shape inference of one node over known operand types, and the budgets on its results.

    Args:
        inputs: per entry of `node.input`, (shape, dtype, value or None when not to be read),
            or None for an omitted input.
        fold: the results will be computed at import (the FOLD_BUDGET applies).

    Returns:
        The inferred result shapes (None where inference leaves a result unknown).

    Raises:
        AscendirError: a shape or axes operand over MAX_SHAPE_ELEMENTS; shape inference rejects
            the node (its reason); a result over the budget (naming its shape and element count).
    """
    for i in SHAPE_OPERANDS.get(node.op_type, ()):
        if i < len(inputs) and inputs[i] is not None:
            n = math.prod(inputs[i][0])
            if n > MAX_SHAPE_ELEMENTS:
                raise AscendirError(f"input {i} (a shape or axes operand) has {n} elements (at most {MAX_SHAPE_ELEMENTS})")
    shapes = _infer(node, inputs, opset)
    operand_elements = sum(math.prod(entry[0]) for entry in inputs if entry is not None)
    budget = TENSOR_BUDGET if not fold else max(FOLD_BUDGET, operand_elements)
    for name, shape in zip(node.output, shapes or []):
        if shape is None:
            continue
        n = math.prod(shape)
        if n > budget:
            what = "computed at import" if fold else "in the graph"
            raise AscendirError(
                f"output '{clip(name)}' would have {n} elements (shape {list(shape)}); a tensor {what} may have at most {budget}"
            )
        if max(shape, default=0) > TENSOR_BUDGET:  # a zero-size one too (numpy refuses 0x2^62: over_budget)
            raise AscendirError(f"output '{clip(name)}' (shape {list(shape)}) {over_budget(shape)}")
    return shapes


def _infer(
    node: NodeProto, inputs: Sequence[tuple[tuple[int, ...], np.dtype, np.ndarray | None] | None], opset: int
) -> list[tuple[int, ...] | None] | None:
    """Result shapes by onnx strict shape inference; None when inference cannot run at all.

    Raises:
        AscendirError: inference rejects the node.
    """
    if _schema(node.op_type, opset, "") is None or any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
        return None
    graph_inputs, initializers, seen = [], [], set()
    for name, entry in zip(node.input, inputs):
        if not name or entry is None or name in seen:
            continue
        seen.add(name)
        shape, dtype, value = entry
        try:
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        except (KeyError, TypeError, ValueError):
            return None
        if value is not None and value.size <= INFER_VALUE_LIMIT:
            initializers.append(numpy_helper.from_array(np.asarray(value), name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in node.output if o]
    bare = NodeProto()
    bare.CopyFrom(node)
    bare.name = ""  # the importer names the node in its messages
    graph = helper.make_graph([bare], "ascendir.check", graph_inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        # no data_prop: one node needs none (initializer values are read directly), and onnx 1.23
        # propagates a 1-D operand element by element (6.5 s for a Gather of 2^24 elements)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError as e:
        raise AscendirError(f"invalid operands or attributes: {_inference_reason(e)}") from None
    except Exception:  # noqa: BLE001 - a model inference cannot read (e.g. an odd type): no verdict
        return None
    by_name = {vi.name: vi for vi in inferred.graph.output}
    shapes: list[tuple[int, ...] | None] = []
    for o in node.output:
        tt = by_name[o].type.tensor_type if o in by_name else None
        known = tt is not None and tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)
        shapes.append(tuple(d.dim_value for d in tt.shape.dim) if known else None)
    return shapes


def _inference_reason(e: Exception) -> str:
    """onnx's message without its node / graph boilerplate, on one line, at most 300 characters."""
    text = " ".join(str(e).split())
    last = max(text.rfind("[ShapeInferenceError]"), text.rfind("[TypeInferenceError]"))
    return (text[last:] if last >= 0 else text)[:300]
