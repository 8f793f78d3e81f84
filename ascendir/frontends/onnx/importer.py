"""ONNX graph → `builtin.module { func.func @main }` of `nn` ops, plus the WeightStore.

Nodes are visited in graph order. A node whose inputs are all known at import is evaluated
(`folding`), so only computation that depends on the model inputs becomes `nn` ops; everything
else goes through the converter table. Constants become IR only where a converted op uses them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from pathlib import Path

import onnx
from onnx import NodeProto, ValueInfoProto, helper
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects import nn
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError, AscendirWarning
from ascendir.frontends.onnx.conversion import ImportState, NodeContext, tensor_type
from ascendir.frontends.onnx.converters import CONTRIB_CONVERTERS, CONVERTERS
from ascendir.frontends.onnx.folding import (
    FoldingError,
    evaluate,
    fold_from_shape,
    infer_output_types,
    is_default_domain,
    is_foldable_op,
    opset_of,
)
from ascendir.frontends.onnx.loading import (
    SHAPE_ONLY_READ_LIMIT,
    initializer_constant,
    load_model,
    onnx_dtype_to_numpy,
)
from ascendir.frontends.onnx.validation import check_attributes, check_graph_names, check_node, clip, over_budget
from ascendir.frontends.onnx.values import Constant, TensorSequence, Value, element_name, element_names
from ascendir.weights import WeightStore

NAME_ATTR = "onnx.name"
"""Argument/result attribute of @main carrying the ONNX graph input/output name."""

# Ops supported only by evaluation at import: their outputs must not depend on runtime values.
# Unique and NonMaxSuppression: their output shapes follow the input values.
FOLD_ONLY_OPS = frozenset({"Constant", "ConstantOfShape", "NonMaxSuppression", "NonZero", "Range", "Shape", "Size", "Unique"})

# Ops whose converters build or read import-time sequences (converters/sequence.py): never folded
# by onnx's reference, whose results would be Python lists.
SEQUENCE_OPS = frozenset({"ConcatFromSequence", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
                          "SequenceInsert", "SequenceLength", "SplitToSequence"})

# Forwarding ops keep the very same value (no copy of a weight under a new name).
_FORWARDING_OPS = frozenset({"Identity"})


def import_onnx(
    model: str | Path | onnx.ModelProto,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    *,
    shape_only: bool = False,
    dtype: str = "fp32",
    shape_hints: dict[str, tuple[int, ...]] | None = None,
) -> tuple[ModuleOp, WeightStore]:
    """Import an ONNX model as an `nn` module.

    Args:
        model: path of a .onnx file or a loaded ModelProto (external data is read lazily, from
            the file's directory or the working directory for a ModelProto).
        input_shapes: static shapes for graph inputs, required for inputs with dynamic dims
            (`dim_param` or unknown); may also restate static ones.
        shape_only: never read external weight bytes (their WeightStore entries are zero-stride
            views of zeros); small external integer initializers (shapes, axes) are still read.
            Enough to compile and to simulate timing-only; numerics would be wrong.
        dtype: precision policy, "fp32" (as the model says), "fp16" or "bf16": every f32 tensor
            and weight becomes that type (weights converted lazily; see precision.py).
        shape_hints: shapes of the arrays the caller will feed (e.g. an --inputs .npz), used
            as pins for the inputs with dynamic dims that `input_shapes` does not pin; names
            that are not graph inputs, and inputs with static shapes, ignore them.

    Returns:
        `builtin.module { func.func @main(...) }` whose arguments are the graph inputs that are not
        initializers and whose results are the graph outputs, each with an `onnx.name` attribute,
        all with static tensor types; and the WeightStore holding every `nn.weight` array.

    Raises:
        AscendirError: unreadable or truncated file; a dynamic dim without a pin; unsupported ops
            (one error listing every unsupported op type with its count and first node); any node
            that cannot be converted (the message names the node and the reason).
    """
    from ascendir.frontends.onnx.precision import DTYPES, convert_precision

    if dtype not in DTYPES:  # before any work
        raise AscendirError(f"--dtype must be one of {', '.join(DTYPES)}, got '{dtype}'")
    proto, base_dir = load_model(model)
    pins = dict(input_shapes or {})
    module, weights = _GraphImporter(proto, base_dir, pins, shape_only, dict(shape_hints or {})).run()
    convert_precision(module, weights, dtype)
    return module, weights


def _node_label(node: NodeProto, index: int) -> str:
    return clip(node.name) if node.name else f"#{index} -> {clip(node.output[0]) if node.output else '?'}"


def _op_key(node: NodeProto) -> str:
    return node.op_type if is_default_domain(node) else f"{node.domain}.{node.op_type}"


class _GraphImporter:
    def __init__(self, proto: onnx.ModelProto, base_dir: str, input_shapes: dict[str, tuple[int, ...]], shape_only: bool = False,
                 shape_hints: dict[str, tuple[int, ...]] | None = None):
        self.proto = proto
        self.shape_hints = shape_hints or {}
        self.shape_only = shape_only
        self.graph = proto.graph
        self.base_dir = base_dir
        self.input_shapes = input_shapes
        self.weights = WeightStore()
        used = {name for node in self.graph.node for name in node.input}
        used.update(o.name for o in self.graph.output)
        self.block = Block()
        self.state = ImportState(self.block, self.weights, opset_of(proto), used, shape_only)
        # Values downstream of an unsupported op cannot be converted; they are skipped silently so
        # that the final error lists every unsupported op type, not the first one only.
        self.poisoned: set[str] = set()
        self.unsupported: dict[str, list[str]] = {}
        self.state.import_subgraph = self._import_subgraph

    # -- driver ----------------------------------------------------------------------------------
    def run(self) -> tuple[ModuleOp, WeightStore]:
        values = self.state.values
        check_graph_names(self.graph)
        for tensor in self.graph.initializer:
            values[tensor.name] = initializer_constant(tensor, self.base_dir, self.shape_only)
        infos = self._sequence_elements([vi for vi in self.graph.input if vi.name not in values])
        arg_names = [vi.name for vi in infos]
        self._check_pins(arg_names)
        arg_types = self._input_types(infos)
        for name, arg_type in zip(arg_names, arg_types):
            values[name] = self.block.insert_arg(arg_type, len(self.block.args))
        for vi in self.graph.input:
            if vi.type.HasField("sequence_type") and vi.name not in values:
                items = tuple(values[n] for n in element_names(vi.name, arg_names))
                elem = vi.type.sequence_type.elem_type.tensor_type.elem_type
                values[vi.name] = TensorSequence(items, onnx_dtype_to_numpy(elem, f"input '{vi.name}'"))
        for index, node in enumerate(self.graph.node):
            self._import_node(node, index)
        if self.unsupported:
            listed = ", ".join(
                f"{op} ({len(labels)} node{'s' if len(labels) > 1 else ''}, first '{labels[0]}')"
                for op, labels in self.unsupported.items()
            )
            raise AscendirError(f"unsupported ONNX ops: {listed}")
        results, res_names = [], []
        for vi in self.graph.output:
            value = self.state.values.get(vi.name)
            if isinstance(value, TensorSequence):  # a sequence output: one result per element (none if empty)
                for i, item in enumerate(value.items):
                    results.append(self.state.materialize(item) if isinstance(item, Constant) else item)
                    res_names.append(element_name(vi.name, i))
                continue
            results.append(self._graph_output(vi))
            res_names.append(vi.name)
        return self._build_module(arg_names, results, res_names), self.weights

    def _sequence_elements(self, infos: list[ValueInfoProto]) -> list[ValueInfoProto]:
        """`infos` with each sequence-typed input replaced by one tensor input per element, named
        `name[i]`: a static-shape function takes the elements, whose count and shapes the
        caller's pins or arrays give (`name[0]`, `name[1]`, ... as --input-shape or --inputs keys).

        Raises:
            AscendirError: a sequence input without its elements, or not of tensors."""
        out = []
        for vi in infos:
            if not vi.type.HasField("sequence_type"):
                out.append(vi)
                continue
            elem = vi.type.sequence_type.elem_type
            if not elem.HasField("tensor_type"):
                raise AscendirError(f"input '{vi.name}' is a sequence of {elem.WhichOneof('value')}; only sequences of tensors are supported")
            names = element_names(vi.name, {**self.shape_hints, **self.input_shapes})
            if not names:
                raise AscendirError(f"input '{vi.name}' is a sequence; give its elements as '{vi.name}[0]', "
                                    f"'{vi.name}[1]', ... (--inputs arrays or --input-shape)")
            out += [helper.make_tensor_value_info(n, elem.tensor_type.elem_type, None) for n in names]
        return out

    def _build_module(self, arg_names: list[str], results: list[SSAValue], res_names: list[str]) -> ModuleOp:
        self.block.add_op(func.ReturnOp(*results))
        def names(ns: list[str]) -> ArrayAttr[DictionaryAttr]:
            return ArrayAttr([DictionaryAttr({NAME_ATTR: StringAttr(n)}) for n in ns])
        main = func.FuncOp(
            "main",
            ([a.type for a in self.block.args], [r.type for r in results]),
            Region(self.block),
            arg_attrs=names(arg_names),
            res_attrs=names(res_names),
        )
        region_dce(main.body)  # drop ops of nodes whose outputs nothing reads
        module = ModuleOp([main])
        try:
            module.verify()
        except VerifyException as e:
            raise AscendirError(f"internal error: the imported module does not verify: {' '.join(str(e).split())}") from e
        return module

    # -- graph inputs and outputs ----------------------------------------------------------------
    def _check_pins(self, arg_names: list[str]) -> None:
        unknown = sorted(set(self.input_shapes) - set(arg_names))
        if unknown:
            raise AscendirError(
                f"input shape given for {', '.join(repr(n) for n in unknown)}, which is not a graph input "
                f"(inputs: {', '.join(arg_names) or 'none'})"
            )

    def _input_types(self, infos: list[ValueInfoProto]) -> list[TensorType]:
        types, problems = [], []
        for vi in infos:
            if not vi.type.HasField("tensor_type"):
                raise AscendirError(f"input '{vi.name}' is not a tensor ({vi.type.WhichOneof('value')})")
            tt = vi.type.tensor_type
            dtype = onnx_dtype_to_numpy(tt.elem_type, f"input '{vi.name}'")
            dims = (
                # a negative dim_value (some exporters write -1) is as unknown as a missing one
                [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else (d.dim_param or "?") for d in tt.shape.dim]
                if tt.HasField("shape") else None
            )
            shape, problem = self._resolve_shape(vi.name, dims)
            if problem:
                problems.append(problem)
                continue
            if (why := over_budget(shape)) is not None:
                raise AscendirError(f"input '{clip(vi.name)}' (shape {shape}) {why}")
            try:
                types.append(tensor_type(dtype, shape))
            except AscendirError as e:
                raise AscendirError(f"input '{vi.name}': {e}") from None
        if problems:
            raise AscendirError("; ".join(problems))
        return types

    def _resolve_shape(self, name: str, dims: list[int | str] | None) -> tuple[list[int], str | None]:
        pinned, by = self.input_shapes.get(name), "its pinned shape"
        if pinned is None and (dims is None or any(isinstance(d, str) for d in dims)):
            pinned, by = self.shape_hints.get(name), "the --inputs array's shape"  # it pins the dynamic dims
        if pinned is not None:
            pinned = [int(d) for d in pinned]
            if dims is not None and len(dims) != len(pinned):
                return [], f"input '{name}' has rank {len(dims)} but {by} {'x'.join(map(str, pinned))} has rank {len(pinned)}"
            if any(p < 0 for p in pinned):
                return [], f"input '{name}' is pinned to a negative dim ({'x'.join(map(str, pinned))})"
            for i, (d, p) in enumerate(zip(dims or pinned, pinned)):
                if isinstance(d, int) and d != p:
                    return [], f"input '{name}' dim {i} is {d} in the model but pinned to {p}"
            return pinned, None
        if dims is None:
            return [], f"input '{name}' has an unknown rank; pin its shape with --input-shape {name}=<d0>x<d1>..."
        dynamic = [(i, d) for i, d in enumerate(dims) if isinstance(d, str)]
        if not dynamic:
            return [int(d) for d in dims], None
        which = ", ".join(f"{i} ('{d}')" for i, d in dynamic)
        example = "x".join(str(d) if isinstance(d, int) else f"<{d}>" for d in dims)
        plural = "s" if len(dynamic) > 1 else ""
        return [], f"input '{name}' has dynamic dim{plural} {which}; pin it with --input-shape {name}={example}"

    def _graph_output(self, vi: ValueInfoProto) -> SSAValue:
        if vi.name not in self.state.values:
            raise AscendirError(f"graph output '{vi.name}' is not produced by any node (truncated file?)")
        value = self.state.values[vi.name]
        ssa = self.state.materialize(value) if isinstance(value, Constant) else value
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.elem_type:
            declared = onnx_dtype_to_numpy(tt.elem_type, f"output '{vi.name}'")
            actual = to_numpy_dtype(ssa.type.element_type)
            if declared != actual:
                raise AscendirError(f"output '{vi.name}': the model declares {declared} but import computed {actual}")
        if tt.HasField("shape"):
            shape = ssa.type.get_shape()
            # exporters write -1 (as inputs do) or a dim_param for a dim they leave open
            dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tt.shape.dim]
            if len(dims) != len(shape) or any(d is not None and d != s for d, s in zip(dims, shape)):
                # onnxruntime runs such a model with the computed shape: so does ascendir, but says so
                shown = ["?" if d is None else d for d in dims]
                warnings.warn(AscendirWarning(
                    f"output '{vi.name}': the model declares shape {shown} but import computed {list(shape)}; "
                    "using the computed shape"
                ), stacklevel=1)
        return ssa

    # -- nodes -----------------------------------------------------------------------------------
    def _import_node(self, node: NodeProto, index: int | str) -> None:
        label = _node_label(node, index) if isinstance(index, int) else node.name or f"{index}/{node.output[0] if node.output else '?'}"
        converter = CONVERTERS.get(node.op_type) if is_default_domain(node) else CONTRIB_CONVERTERS.get((node.domain, node.op_type))
        if any(name in self.poisoned for name in node.input):
            if converter is None and not self._is_fold_only(node):
                self._record_unsupported(node, label)
            self.poisoned.update(node.output)
            return
        inputs = [self._node_input(node, label, name) for name in node.input]
        if node.op_type == "DequantizeLinear" and is_default_domain(node) and node.output:
            self.state.dequantized[node.output[0]] = node
        try:
            self._check(node, inputs, converter)
            outputs = self._fold(node, label, inputs, converter)
            if outputs is None:
                if converter is None:
                    self._record_unsupported(node, label)
                    return
                last = self.block.last_op
                outputs = list(converter(NodeContext(node, label, self.state)))
                self._tag_node(last, label)
        except VerifyException as e:  # shape rules of nn ops (broadcast, matmul) reject operands
            raise AscendirError(f"{node.op_type} '{label}': {' '.join(str(e).split())}") from None
        except AscendirError as e:  # e.g. an unsupported element type: say which node met it
            prefix = f"{node.op_type} '{label}': "
            raise (e if str(e).startswith(prefix) else AscendirError(prefix + str(e))) from None
        for name, value in zip(node.output, outputs + [None] * (len(node.output) - len(outputs))):
            if name and value is not None:
                self.state.values[name] = value
            elif name and self.unsupported:  # e.g. an If whose branch holds an unsupported op
                self.poisoned.add(name)

    def _import_subgraph(self, graph: onnx.GraphProto, label: str, bindings: Sequence[Value] = ()) -> list[Value | None]:
        """Import the nodes of `graph` (an If branch, a Loop or Scan body: it reads outer values by
        name) into the block, its formal inputs bound to `bindings` in order; its outputs' values,
        None for one an unsupported op poisoned.

        Raises:
            AscendirError: a binding count other than the graph's input count."""
        if len(bindings) != len(graph.input):
            raise AscendirError(f"subgraph {graph.name!r} of '{label}' takes {len(graph.input)} inputs, {len(bindings)} given")
        for vi, value in zip(graph.input, bindings):
            self.state.values[vi.name] = value
            self.poisoned.discard(vi.name)
        for tensor in graph.initializer:
            self.state.values[tensor.name] = initializer_constant(tensor, self.base_dir, self.shape_only)
        for node in graph.node:
            self.state.used_names.update(node.input)
        self.state.used_names.update(o.name for o in graph.output)
        for node in graph.node:
            self._import_node(node, label)
        return [None if o.name in self.poisoned else self.state.values.get(o.name) for o in graph.output]

    def _check(self, node: NodeProto, inputs: list[Value | None], converter: object) -> None:
        """The node against its ONNX schema and the size budgets (validation.py), before folding
        or a converter reads it; nodes nothing can import are left to the unsupported-op report."""
        if not is_default_domain(node) or (converter is None and not is_foldable_op(node)):
            return
        check_attributes(node, self.state.opset)
        if node.op_type in SEQUENCE_OPS or any(isinstance(v, TensorSequence) for v in inputs):
            return  # onnx shape inference takes tensor operands; the sequence converters check theirs
        described = [
            None if v is None else (
                (v.shape, v.dtype, v.array if v.lazy_source is None and v.size <= 64 else None)
                if isinstance(v, Constant) else (tuple(v.type.get_shape()), to_numpy_dtype(v.type.element_type), None)
            )
            for v in inputs
        ]
        fold = is_foldable_op(node) and all(v is None or isinstance(v, Constant) for v in inputs)
        check_node(node, described, self.state.opset, fold)

    def _tag_node(self, last: Operation | None, label: str) -> None:
        """Give every nn op a node's conversion added an `onnx.node` string attribute (the node
        name, or `#index -> first output`), so later errors (lowering, verification) name it.
        Weights and constants are shared between nodes and stay untagged."""
        op = last.next_op if last is not None else self.block.first_op
        while op is not None:
            if not isinstance(op, (nn.WeightOp, nn.ConstantOp)) and "onnx.node" not in op.attributes:
                op.attributes["onnx.node"] = StringAttr(label)
            op = op.next_op

    def _node_input(self, node: NodeProto, label: str, name: str) -> Value | None:
        if not name:
            return None  # an omitted optional input
        if name not in self.state.values:
            raise AscendirError(f"{node.op_type} '{label}': input '{name}' is not produced by any node (truncated file?)")
        return self.state.values[name]

    @staticmethod
    def _is_fold_only(node: NodeProto) -> bool:
        return is_default_domain(node) and node.op_type in FOLD_ONLY_OPS

    def _record_unsupported(self, node: NodeProto, label: str) -> None:
        if self._is_fold_only(node):
            runtime = [(i, n) for i, n in enumerate(node.input)
                       if n and (n in self.poisoned or not isinstance(self.state.values.get(n), Constant))]
            which = f" (input {runtime[0][0]}, '{clip(runtime[0][1])}')" if runtime else ""
            raise AscendirError(
                f"{node.op_type} '{label}': its output depends on runtime values{which}; ascendir needs static "
                "shapes (pin the input shapes)"
            )
        self.unsupported.setdefault(_op_key(node), []).append(label)
        self.poisoned.update(node.output)

    def _fold_lazily(self, node: NodeProto, label: str, inputs: list[Constant | None]) -> list[Constant] | None:
        """A fold of unread (external) constants, e.g. a Transpose of a weight, as lazy constants
        whose shapes come from onnx shape inference: evaluated only when their value is needed,
        never under --shape-only. None when no input is unread or inference cannot tell a shape."""
        if all(v is None or v.lazy_source is None for v in inputs):
            return None
        described = [
            None if v is None else (
                v.shape, helper.np_dtype_to_tensor_dtype(v.dtype),
                v.array if v.lazy_source is None and v.size <= SHAPE_ONLY_READ_LIMIT else None,
            )
            for v in inputs
        ]
        types = infer_output_types(node, described, self.state.opset)
        if types is None:
            return None
        opset = self.state.opset

        @functools.cache
        def outputs() -> list:
            try:
                return evaluate(node, [v.array if v is not None else None for v in inputs], opset)
            except FoldingError as e:
                raise AscendirError(f"{node.op_type} '{label}': cannot evaluate at import: {e}") from None

        return [
            self.state.derive(
                name, inputs, (lambda k=k: outputs()[k]), shape, onnx_dtype_to_numpy(elem, f"output '{name}'")
            )
            for k, (name, (shape, elem)) in enumerate(zip(node.output, types))
        ]

    def _fold(self, node: NodeProto, label: str, inputs: list[Value | None], converter: object) -> list | None:
        """Outputs known at import (as Constants), or None if the node must be converted."""
        if not is_foldable_op(node) or node.op_type in _FORWARDING_OPS or node.op_type in SEQUENCE_OPS:
            return None
        present = [v for v in inputs if v is not None]
        if all(isinstance(v, Constant) for v in present):
            lazy = self._fold_lazily(node, label, inputs)
            if lazy is not None:
                return lazy
            try:
                arrays = evaluate(node, [v.array if v is not None else None for v in inputs], self.state.opset)
            except FoldingError as e:
                if converter is None and self._is_fold_only(node):
                    raise AscendirError(f"{node.op_type} '{label}': cannot evaluate at import: {e}") from None
                return None  # a converter handles constant operands too; an unknown op is reported
            parameter = any(v.parameter for v in present)
            return [Constant(name, array, parameter=parameter) for name, array in zip(node.output, arrays)]
        if len(present) == 1 and isinstance(present[0], SSAValue):
            arrays = fold_from_shape(node, tuple(present[0].type.get_shape()))
            if arrays is not None:
                return [Constant(node.output[0], arrays[0])]
        return None
