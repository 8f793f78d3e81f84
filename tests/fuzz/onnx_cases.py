"""Fuzz cases for the ONNX importer: hypothesis strategies of `Case`s.

Two sources:
* `corpus_cases`: a committed model of tests/data with one to three structured mutations
  (an attribute of another kind or an extreme value, initializer dims / element type / raw data,
  external data fields and files, graph input dims, node inputs and order, opset, model-local
  functions, subgraphs, names that are not UTF-8 or very long, flipped bytes), compiled to nn.
* `op_cases`: one node of an op the importer knows, with inputs of random dtype and shape (graph
  inputs or initializers) and attributes drawn from its schema, of the right or a wrong kind,
  run through the whole pipeline (`ascendir run`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from .harness import Case

DATA = Path(__file__).resolve().parents[1] / "data"
MODELS = sorted(p.parent.name for p in DATA.glob("*/model.onnx"))

INTS = [0, 1, -1, 2, 3, 7, 2**31 - 1, -(2**31), 2**62, -(2**63), 2**63 - 1, 10**9]
FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-45, 1e308, -1e308, float("inf"), float("-inf"), float("nan"), 0.5]
STRINGS = [b"", b"NOTSET", b"SAME_UPPER", b"VALID", b"\xff\xfe", b"x" * 1000, b"a\nb", b"\x00"]
DTYPES = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE, TensorProto.INT64,
          TensorProto.INT32, TensorProto.INT8, TensorProto.UINT8, TensorProto.BOOL, TensorProto.STRING,
          TensorProto.COMPLEX64, TensorProto.FLOAT8E4M3FN, TensorProto.INT4, 0, 99]


@functools.cache
def _model_bytes(name: str) -> bytes:
    return (DATA / name / "model.onnx").read_bytes()


def _model(name: str) -> onnx.ModelProto:
    return onnx.ModelProto.FromString(_model_bytes(name))


# -- attributes ----------------------------------------------------------------------------------
def _tensor_attr_value(draw) -> TensorProto:
    kind = draw(st.sampled_from(["scalar", "vector", "empty", "string"]))
    if kind == "string":
        return helper.make_tensor("t", TensorProto.STRING, [1], [b"s"])
    if kind == "empty":
        return numpy_helper.from_array(np.zeros((0,), np.float32), "t")
    if kind == "scalar":
        with np.errstate(over="ignore"):
            return numpy_helper.from_array(np.array(draw(st.sampled_from(FLOATS)), np.float32), "t")
    n = draw(st.integers(1, 6))
    return numpy_helper.from_array(np.array(draw(st.lists(st.sampled_from(INTS[:8]), min_size=n, max_size=n)), np.int64), "t")


def attribute(draw, name: str, kind: int | None = None) -> AttributeProto:
    """An attribute `name` of `kind` (drawn when None) with an ordinary or extreme value."""
    kind = kind if kind is not None else draw(st.sampled_from(
        [AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING, AttributeProto.INTS, AttributeProto.FLOATS,
         AttributeProto.TENSOR, AttributeProto.GRAPH, AttributeProto.STRINGS]))
    small = st.integers(-3, 8)
    if kind == AttributeProto.INT:
        return helper.make_attribute(name, draw(st.one_of(small, st.sampled_from(INTS))), attr_type=kind)
    if kind == AttributeProto.FLOAT:
        return helper.make_attribute(name, draw(st.one_of(st.floats(-4, 4), st.sampled_from(FLOATS))), attr_type=kind)
    if kind == AttributeProto.STRING:
        return helper.make_attribute(name, draw(st.sampled_from(STRINGS)), attr_type=kind)
    if kind == AttributeProto.INTS:
        n = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 8, 2000]))
        values = draw(st.lists(st.one_of(small, st.sampled_from(INTS)), min_size=min(n, 8), max_size=min(n, 8)))
        return helper.make_attribute(name, (values * (n // max(len(values), 1) + 1))[:n], attr_type=kind)
    if kind == AttributeProto.FLOATS:
        return helper.make_attribute(name, draw(st.lists(st.sampled_from(FLOATS), max_size=5)), attr_type=kind)
    if kind == AttributeProto.STRINGS:
        return helper.make_attribute(name, draw(st.lists(st.sampled_from(STRINGS), max_size=3)), attr_type=kind)
    if kind == AttributeProto.TENSOR:
        return helper.make_attribute(name, _tensor_attr_value(draw), attr_type=kind)
    # GRAPH: an empty or a one-node body
    body = helper.make_graph([], "g", [], [])
    if draw(st.booleans()):
        body = helper.make_graph([helper.make_node("Identity", ["gx"], ["gy"])], "g",
                                 [helper.make_tensor_value_info("gx", TensorProto.FLOAT, [1])],
                                 [helper.make_tensor_value_info("gy", TensorProto.FLOAT, [1])])
    return helper.make_attribute(name, body, attr_type=AttributeProto.GRAPH)


def _schema_attrs(op_type: str, opset: int) -> dict[str, int]:
    try:
        schema = onnx.defs.get_schema(op_type, opset)
    except Exception:  # noqa: BLE001 - not a default-domain op at this opset
        return {}
    return {name: int(a.type) for name, a in schema.attributes.items()}


# -- corpus mutations ----------------------------------------------------------------------------
def _index(draw, n: int) -> int:
    """An index below `n`; ValueError (the mutation is skipped) when there is none."""
    if n <= 0:
        raise ValueError("nothing to mutate")
    return draw(st.integers(0, n - 1))


def _mut_attr_kind(draw, m: onnx.ModelProto) -> str:
    node = m.graph.node[_index(draw, len(m.graph.node))]
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 17)
    names = sorted(set(_schema_attrs(node.op_type, opset)) | {a.name for a in node.attribute}) or ["axis"]
    name = draw(st.sampled_from(names))
    right = _schema_attrs(node.op_type, opset).get(name)
    kind = right if right is not None and draw(st.booleans()) else None
    attr = attribute(draw, name, kind)
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [attr])
    return f"{node.op_type}.{name}={AttributeProto.AttributeType.Name(attr.type)}"


def _mut_initializer(draw, m: onnx.ModelProto) -> str:
    if not m.graph.initializer:
        return "no initializer"
    t = draw(st.sampled_from(list(m.graph.initializer)))
    how = draw(st.sampled_from(["dims", "dtype", "raw", "zero", "huge", "scalar", "nan"]))
    if how == "dims" and t.dims:
        i = draw(st.integers(0, len(t.dims) - 1))
        t.dims[i] = draw(st.sampled_from([0, 1, 2, -1, 3, t.dims[i] + 1, 2**31, 2**62]))
    elif how == "dtype":
        t.data_type = draw(st.sampled_from(DTYPES))
    elif how == "raw":
        raw = numpy_helper.to_array(t).tobytes() if not t.raw_data else t.raw_data
        cut = draw(st.sampled_from([0, 1, len(raw) // 2, len(raw) - 1, len(raw) + 3]))
        t.raw_data = (raw + b"\x01\x02\x03")[:cut]
        del t.float_data[:], t.int64_data[:], t.int32_data[:]
    elif how == "zero":
        t.CopyFrom(numpy_helper.from_array(np.zeros([0] + list(t.dims[1:]), numpy_helper.to_array(t).dtype), t.name))
    elif how == "huge":
        del t.dims[:]
        t.dims.extend([2**20, 2**20])
    elif how == "scalar":
        del t.dims[:]
    else:  # NaN / inf where a value is expected (shapes, axes, scales)
        a = numpy_helper.to_array(t)
        if a.dtype.kind == "f" and a.size:
            a = a.copy()
            a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
            t.CopyFrom(numpy_helper.from_array(a, t.name))
    return f"initializer {how} {t.name}"


def _mut_external(draw, m: onnx.ModelProto, files: dict) -> str:
    if not m.graph.initializer:
        return "no initializer"
    t = draw(st.sampled_from(list(m.graph.initializer)))
    if t.data_location == TensorProto.EXTERNAL:
        raise ValueError("already external")
    raw = numpy_helper.to_array(t).tobytes() if not t.raw_data else t.raw_data
    t.ClearField("raw_data")
    del t.float_data[:], t.int64_data[:], t.int32_data[:], t.double_data[:]
    t.data_location = TensorProto.EXTERNAL
    fields = {"location": "w.bin", "offset": "0", "length": str(len(raw))}
    key = draw(st.sampled_from(["location", "offset", "length", "none", "none"]))
    if key == "location":
        fields["location"] = draw(st.sampled_from(["../w.bin", "/etc/passwd", "w\x00.bin", "", "missing.bin", "w.bin/..", "."]))
    elif key != "none":
        fields[key] = draw(st.sampled_from(["abc", "-64", "4.0", "", str(2**63), "1e3", str(len(raw) + 1), "-1"]))
    if draw(st.booleans()):
        del fields["length"]
    for k, v in fields.items():
        entry = t.external_data.add()
        entry.key, entry.value = k, v
    how = draw(st.sampled_from(["exact", "short", "sparse"]))
    if how == "exact":
        files["w.bin"] = raw
    elif how == "short":
        files["w.bin"] = raw[: len(raw) // 2]
    else:  # a sparse file as large as the dims ask (2^34 bytes at most)
        del t.dims[:]
        t.dims.extend(draw(st.sampled_from([[2**32], [2**16, 2**16], [2**30, 4]])))
        size = min(int(np.prod(list(t.dims), dtype=np.float64)) * 4, 2**34)

        def sparse(path: Path, size: int = size) -> None:
            with path.open("wb") as f:
                f.truncate(size)

        files["w.bin"] = sparse
    return f"external {key} {how} {t.name}"


def _mut_input_dims(draw, m: onnx.ModelProto) -> str:
    inputs = [vi for vi in m.graph.input if vi.type.HasField("tensor_type")]
    if not inputs:
        return "no input"
    vi = draw(st.sampled_from(inputs))
    dims = vi.type.tensor_type.shape.dim
    how = draw(st.sampled_from(["value", "param", "rank", "dtype", "drop"]))
    if how == "value" and dims:
        dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(st.sampled_from([0, 1, 3, 2**20, 2**31, 2**62]))
    elif how == "param" and dims:
        dims[draw(st.integers(0, len(dims) - 1))].dim_param = "n"
    elif how == "rank":
        vi.type.tensor_type.shape.dim.add().dim_value = 1
    elif how == "dtype":
        vi.type.tensor_type.elem_type = draw(st.sampled_from(DTYPES))
    else:
        vi.type.tensor_type.ClearField("shape")
    return f"input {how} {vi.name}"


def _mut_graph(draw, m: onnx.ModelProto) -> str:
    nodes = list(m.graph.node)
    how = draw(st.sampled_from(["swap", "undefined", "delete", "duplicate_output", "self_loop", "domain"]))
    i = _index(draw, len(nodes))
    node = m.graph.node[i]
    if how == "swap":  # a value used before its definition
        j = _index(draw, len(nodes))
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(m.graph.node[i]), b.CopyFrom(m.graph.node[j])
        m.graph.node[i].CopyFrom(b), m.graph.node[j].CopyFrom(a)
    elif how == "undefined" and node.input:
        node.input[draw(st.integers(0, len(node.input) - 1))] = "nowhere"
    elif how == "delete":
        del m.graph.node[i]
    elif how == "duplicate_output" and node.output:
        node.output[0] = m.graph.node[0].output[0] if m.graph.node[0].output else "x"
    elif how == "self_loop" and node.input and node.output:
        node.input[0] = node.output[0]
    else:
        node.domain = draw(st.sampled_from(["com.microsoft", "ai.onnx.ml", "nosuch"]))
    return f"graph {how} #{i}"


def _mut_opset(draw, m: onnx.ModelProto) -> str:
    v = draw(st.sampled_from([1, 7, 11, 12, 13, 18, 21, 23, 99, 10**6]))
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = v
    return f"opset {v}"


def _mut_function(draw, m: onnx.ModelProto) -> str:
    """Wrap a node into a model-local function (recursive or unbound on request)."""
    i = _index(draw, len(m.graph.node))
    node = m.graph.node[i]
    how = draw(st.sampled_from(["wrap", "recursive", "unbound", "attr_ref"]))
    inner = onnx.NodeProto()
    inner.CopyFrom(node)
    inner.name = ""
    ins = [f"i{k}" for k in range(len(node.input))]
    outs = [f"o{k}" for k in range(len(node.output))]
    inner.ClearField("input"), inner.ClearField("output")
    inner.input.extend([ins[k] if node.input[k] else "" for k in range(len(ins))])
    inner.output.extend(outs)
    if how == "recursive":
        inner = helper.make_node("F", ins, outs, domain="local")
    if how == "attr_ref" and inner.attribute:
        a = inner.attribute[0]
        ref = AttributeProto(name=a.name, ref_attr_name="missing", type=a.type)
        del inner.attribute[:]
        inner.attribute.append(ref)
    opsets = [helper.make_opsetid(o.domain, o.version) for o in m.opset_import] + [helper.make_opsetid("local", 1)]
    fn = helper.make_function("local", "F", ins, outs, [inner], opsets)
    if how != "unbound":
        m.functions.append(fn)
    call = helper.make_node("F", list(node.input), list(node.output), domain="local", name=node.name)
    m.graph.node[i].CopyFrom(call)
    if not any(o.domain == "local" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("local", 1))
    return f"function {how} #{i}"


def _mut_subgraph(draw, m: onnx.ModelProto) -> str:
    """An If whose branches read a graph value (outer scope)."""
    i = _index(draw, len(m.graph.node))
    node = m.graph.node[i]
    if not node.output:
        return "no output"
    src = node.output[0]
    branch = helper.make_graph([helper.make_node("Identity", [src], ["b_out"])], "b", [],
                               [helper.make_tensor_value_info("b_out", TensorProto.FLOAT, None)])
    cond = numpy_helper.from_array(np.array(draw(st.booleans())), "fuzz_cond")
    m.graph.initializer.append(cond)
    m.graph.node.insert(i + 1, helper.make_node("If", ["fuzz_cond"], ["fuzz_if"], then_branch=branch, else_branch=branch))
    m.graph.output.append(helper.make_tensor_value_info("fuzz_if", TensorProto.FLOAT, None))
    return f"subgraph If after #{i}"


def _mut_name(draw, m: onnx.ModelProto) -> str:
    how = draw(st.sampled_from(["long", "newline", "utf8"]))
    node = m.graph.node[_index(draw, len(m.graph.node))]
    if how == "long":
        node.name = "n" * 100_000
    elif how == "newline":
        node.name = "a\nb\rc"
    else:
        node.name = "\N{SNOWMAN}é" * 3
    if draw(st.booleans()) and m.graph.initializer:  # rename an initializer (and its uses) too
        t = draw(st.sampled_from(list(m.graph.initializer)))
        new = node.name
        for n in m.graph.node:
            for k, x in enumerate(n.input):
                if x == t.name:
                    n.input[k] = new
        for vi in m.graph.input:
            if vi.name == t.name:
                vi.name = new
        t.name = new
    return f"name {how}"


def _not_utf8(draw, data: bytes, m: onnx.ModelProto) -> bytes:
    """Replace a node or initializer name by as many 0xff bytes (the length prefix stays valid)."""
    names = [n.name for n in m.graph.node if len(n.name) > 2] + [t.name for t in m.graph.initializer]
    if not names:
        return data
    name = draw(st.sampled_from(names)).encode()
    return data.replace(name, b"\xff" * len(name))


def _flip_bytes(draw, data: bytes) -> bytes:
    if not data:  # an earlier flip truncated it all
        return data
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
    if draw(st.integers(0, 9)) == 0:
        b = b[: draw(st.integers(0, len(b)))]
    return bytes(b)


_MUTATIONS = ["attr", "attr", "attr", "init", "init", "external", "input", "graph", "opset", "function",
              "subgraph", "name", "not_utf8", "flip"]


_STRUCTURED = {
    "attr": lambda draw, m, files: _mut_attr_kind(draw, m),
    "init": lambda draw, m, files: _mut_initializer(draw, m),
    "external": _mut_external,
    "input": lambda draw, m, files: _mut_input_dims(draw, m),
    "graph": lambda draw, m, files: _mut_graph(draw, m),
    "opset": lambda draw, m, files: _mut_opset(draw, m),
    "function": lambda draw, m, files: _mut_function(draw, m),
    "subgraph": lambda draw, m, files: _mut_subgraph(draw, m),
    "name": lambda draw, m, files: _mut_name(draw, m),
}


@st.composite
def corpus_cases(draw) -> Case:
    """A mutated tests/data model compiled to nn (import and the O0 / O2 nn pipelines)."""
    name = draw(st.sampled_from(MODELS))
    m = _model(name)
    files: dict = {}
    notes = [name]
    byte_level = []
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(_MUTATIONS))
        if how in ("not_utf8", "flip"):
            byte_level.append(how)
            continue
        try:
            notes.append(_STRUCTURED[how](draw, m, files))
        except (ValueError, IndexError, TypeError, KeyError, onnx.checker.ValidationError):
            notes.append(f"{how} skipped")  # e.g. a second mutation of an initializer made external
    data = m.SerializeToString()
    for how in byte_level:
        data = _not_utf8(draw, data, m) if how == "not_utf8" else _flip_bytes(draw, data)
        notes.append(how)
    files["m.onnx"] = data
    argv = draw(st.sampled_from([
        ("compile", "m.onnx", "--emit", "nn", "-O", "0"),
        ("compile", "m.onnx", "--emit", "nn"),
        ("compile", "m.onnx", "--emit", "nn", "--shape-only"),
        ("compile", "m.onnx", "--emit", "nn", "--dtype", "fp16"),
    ]))
    return Case("ascendir", argv, files, "; ".join(notes))


# -- one-op models -------------------------------------------------------------------------------
OPS = ["Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Clip", "Concat", "Conv", "Div",
       "Expand", "Flatten", "Gather", "GatherND", "Gelu", "Gemm", "GlobalAveragePool", "LayerNormalization",
       "LeakyRelu", "MatMul", "MaxPool", "Mod", "Mul", "Pow", "ReduceMax", "ReduceMean", "ReduceSum", "Relu",
       "Reshape", "Sigmoid", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Tile", "TopK", "Transpose",
       "Unsqueeze", "Where", "Range", "ConstantOfShape", "NonZero", "Shape", "Size", "Constant", "Erf", "Sum", "Max"]
_ARRAY_DTYPES = [np.float32, np.float32, np.float32, np.int64, np.int64, np.float16, np.int32, np.bool_, np.float64]
_INT_VALUES = [0, 1, -1, 2, 3, 4, 2**20, 2**28, 2**29, 2**31, 2**62, -(2**62)]


def _array(draw) -> np.ndarray:
    dtype = draw(st.sampled_from(_ARRAY_DTYPES))
    rank = draw(st.sampled_from([0, 1, 1, 2, 2, 3, 4]))
    shape = draw(st.lists(st.sampled_from([0, 1, 1, 2, 3, 4, 8, 16, 33]), min_size=rank, max_size=rank))
    size = int(np.prod(shape, dtype=np.int64))
    if dtype in (np.int64, np.int32):
        values = draw(st.lists(st.one_of(st.integers(-3, 8), st.sampled_from(_INT_VALUES)), min_size=min(size, 4), max_size=min(size, 4)))
        flat = np.resize(np.array(values or [0], dtype=np.int64), size)
        return np.clip(flat, np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype).reshape(shape)
    if dtype == np.bool_:
        return (np.arange(size) % 2 == 0).reshape(shape)
    special = draw(st.sampled_from([None, None, None, np.nan, np.inf, -np.inf, 1e30, 0.0]))
    a = np.random.default_rng(size).standard_normal(size).astype(dtype)
    if special is not None and size:
        with np.errstate(over="ignore"):
            a[draw(st.integers(0, size - 1))] = special
    return a.reshape(shape)


@st.composite
def op_cases(draw) -> Case:
    """One node of an importer op with random operands and schema-drawn attributes, `ascendir run`."""
    op = draw(st.sampled_from(OPS))
    opset = draw(st.sampled_from([13, 17, 17, 18, 21]))
    try:
        schema = onnx.defs.get_schema(op, opset)
    except Exception:  # noqa: BLE001
        schema = onnx.defs.get_schema(op)
    lo, hi = schema.min_input, min(schema.max_input, 5)
    n_in = draw(st.integers(lo, max(lo, hi)))
    inputs, inits, names = {}, {}, []
    for k in range(n_in):
        if k >= lo and draw(st.integers(0, 3)) == 0:
            names.append("")
            continue
        a = _array(draw)
        name = f"x{k}"
        names.append(name)
        (inits if draw(st.booleans()) else inputs)[name] = a
    attrs = []
    for name, a in schema.attributes.items():
        if draw(st.integers(0, 2)) == 0:
            right = draw(st.integers(0, 3)) > 0
            attrs.append(attribute(draw, name, int(a.type) if right else None))
    n_out = max(1, min(schema.max_output, 3)) if op in ("Split", "TopK") else 1
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, name=f"{op.lower()}_0")
    node.attribute.extend(attrs)
    graph = helper.make_graph(
        [node], "fuzz",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()],
        [onnx.ValueInfoProto(name=o) for o in outs],
        initializer=[numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    argv = draw(st.sampled_from([
        ("run", "m.onnx", "--seed", "1"),
        ("run", "m.onnx", "--timing-only"),
        ("compile", "m.onnx", "-o", "out.mlir"),
    ]))
    note = f"{op} opset {opset} inputs {[(n, getattr(inputs.get(n, inits.get(n)), 'shape', None)) for n in names]} attrs {[a.name for a in attrs]}"
    return Case("ascendir", argv, {"m.onnx": model.SerializeToString()}, note)


def onnx_cases() -> st.SearchStrategy[Case]:
    """Both sources, half each."""
    return st.one_of(corpus_cases(), op_cases())
