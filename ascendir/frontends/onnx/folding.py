"""Import-time evaluation of ONNX nodes whose outputs are known without running the model.

Shape arithmetic of exported models (`Shape → Gather → Concat → Reshape`, `Range`,
`ConstantOfShape`, causal masks, rotary tables) depends only on constants and on the static input
shapes. Such nodes are evaluated here with onnx's reference implementation, at the model's opset,
so the `nn` module keeps only the computation that depends on the model inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import NodeProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

# Nodes that must not be evaluated once at import even when their inputs are known: random
# generators differ per run, and control flow carries subgraphs that may capture outer values.
NOT_FOLDABLE = frozenset(
    {
        "Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
        "RandomUniformLike", "If", "Loop", "Scan",
    }
)


class FoldingError(Exception):
    """The reference implementation could not evaluate a node (missing op or bad operands)."""


def is_default_domain(node: NodeProto) -> bool:
    """Whether `node` is a standard ONNX operator (domain "" or its alias "ai.onnx")."""
    return node.domain in ("", "ai.onnx")


def is_foldable_op(node: NodeProto) -> bool:
    """Whether `node` may be evaluated at import once all its inputs are known."""
    return is_default_domain(node) and node.op_type not in NOT_FOLDABLE


def evaluate(node: NodeProto, inputs: Sequence[np.ndarray | None], opset: int) -> list[np.ndarray]:
    """Run one node with onnx.reference at opset `opset`.

    Args:
        node: a default-domain node.
        inputs: one array per entry of `node.input` (None where the input name is empty).
        opset: the model's default-domain opset (attribute vs input placement follows it).

    Returns:
        One array per node output (numpy scalars are returned as 0-d arrays).

    Raises:
        FoldingError: the reference has no implementation or rejects the operands.
    """
    feeds: dict[str, np.ndarray] = {}
    for name, value in zip(node.input, inputs):
        if name:
            feeds[name] = value
    # A one-node function, not a bare NodeProto: a bare node would run at the newest opset and
    # misread attributes that moved to inputs (e.g. ReduceMean axes at opset 18).
    function = helper.make_function(
        "ascendir.fold", "node", list(feeds), list(node.output), [node],
        [helper.make_opsetid("", opset)],
    )
    try:
        with np.errstate(all="ignore"):
            outputs = ReferenceEvaluator(function).run(None, feeds, attributes={})
    except Exception as e:  # noqa: BLE001 - the reference raises many types; all mean "cannot fold"
        reason = " ".join(str(e).split()) or type(e).__name__
        raise FoldingError(reason[:300]) from e
    if not all(isinstance(o, (np.ndarray, np.generic)) for o in outputs):
        raise FoldingError("an output is not a tensor (sequence, map or optional)")
    return [np.asarray(o) for o in outputs]


def infer_output_types(
    node: NodeProto, inputs: Sequence[tuple[tuple[int, ...], int, np.ndarray | None] | None], opset: int
) -> list[tuple[tuple[int, ...], int]] | None:
    """Output shapes and ONNX element types of `node` by onnx shape inference, without running it.

    Args:
        inputs: per entry of `node.input`, (shape, ONNX element type, value or None when the value
            must not be read), or None for an omitted input. Given values (shapes, axes) let data
            propagation resolve shape-computing inputs.

    Returns:
        One (shape, element type) per output, or None when inference leaves one unknown.
    """
    graph_inputs, initializers = [], []
    for name, entry in zip(node.input, inputs):
        if not name or entry is None:
            continue
        shape, elem, value = entry
        if value is not None:
            initializers.append(numpy_helper.from_array(np.asarray(value), name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in node.output]
    graph = helper.make_graph([node], "ascendir.infer", graph_inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    # onnx's data propagation reads a 1-D input as a possible shape and allocates a dim per
    # element: a 1-D unread weight of 2^32 elements took gigabytes (std::bad_alloc under a cap)
    # before it gave up. Such an input is never a shape; without data propagation its outputs'
    # shapes are still inferred.
    data_prop = not any(len(vi.type.tensor_type.shape.dim) <= 1 and _elements(vi) > _DATA_PROP_LIMIT for vi in graph_inputs)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=data_prop)
    except Exception:  # noqa: BLE001 - inference errors of any kind mean "evaluate instead"
        return None
    result = []
    for vi in inferred.graph.output:
        tt = vi.type.tensor_type
        if not tt.elem_type or not tt.HasField("shape") or not all(d.HasField("dim_value") for d in tt.shape.dim):
            return None
        result.append((tuple(d.dim_value for d in tt.shape.dim), tt.elem_type))
    return result


# The most elements of a 1-D unread input onnx's data propagation is asked to read as a shape.
_DATA_PROP_LIMIT = 2**16


def _elements(vi: onnx.ValueInfoProto) -> int:
    return int(np.prod([d.dim_value for d in vi.type.tensor_type.shape.dim], dtype=np.float64))


def fold_from_shape(node: NodeProto, shape: tuple[int, ...]) -> list[np.ndarray] | None:
    """Outputs of nodes that only read their input's (static) shape: Shape and Size.

    Returns None for any other node.
    """
    if not is_default_domain(node):
        return None
    if node.op_type == "Size":
        return [np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)]
    if node.op_type == "Shape":
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        # start/end (opset 15) clamp like Python slicing.
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return [np.array(shape[slice(start, end)], dtype=np.int64)]
    return None


def opset_of(model: onnx.ModelProto) -> int:
    """The default-domain opset version the model imports (newest known if absent)."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    return onnx.defs.onnx_opset_version()
