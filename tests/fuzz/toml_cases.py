"""Fuzz cases for target TOML files: the shipped chips with extreme values, missing keys, odd
strings, deep nesting and bytes that are not UTF-8, used by `ascendir run --target FILE`."""

from __future__ import annotations

import functools
import tomllib

import numpy as np
import onnx
import tomli_w
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from ascendir.hardware.config import CHIPS

from .harness import Case

EXTREMES = [0, -1, 1, 2**63, 2**63 - 1, -(2**63), 1e-300, 1e308, float("inf"), float("nan"), -0.0, 0.5, 3, 7,
            "x", "", [], {}, True, 10**30, 2**31]


@functools.cache
def tiny_model() -> bytes:
    """x[8,64] @ W[64,32] + b, Transpose, Softmax: a matmul, a vector op and a movement op."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "b"], ["a"], name="add"),
        helper.make_node("Transpose", ["a"], ["t"], name="tr", perm=[1, 0]),
        helper.make_node("Softmax", ["t"], ["y"], name="sm", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 8])],
        initializer=[numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w"),
                     numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@functools.cache
def chips() -> tuple[tuple[str, bytes], ...]:
    return tuple((p.stem, p.read_bytes()) for p in sorted(CHIPS.glob("*.toml")))


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, path + (k,))
    else:
        yield path


def _set(doc, path, value) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _delete(doc, path) -> None:
    for k in path[:-1]:
        doc = doc[k]
    del doc[path[-1]]


@st.composite
def toml_cases(draw) -> Case:
    name, text = draw(st.sampled_from(chips()))
    doc = tomllib.loads(text.decode())
    doc["chip"]["name"] = f"fuzz_{name}"  # a shipped chip's name with other values is refused
    notes = [name]
    for _ in range(draw(st.integers(1, 3))):
        leaves = list(_leaves(doc))
        if not leaves:
            break
        path = draw(st.sampled_from(leaves))
        how = draw(st.sampled_from(["value", "value", "scale", "scale", "scale", "delete", "name"]))
        if how == "value":
            _set(doc, path, draw(st.sampled_from(EXTREMES)))
        elif how == "scale":
            old = doc
            for k in path:
                old = old[k]
            if isinstance(old, (int, float)) and not isinstance(old, bool):
                _set(doc, path, type(old)(old * draw(st.sampled_from([2, 3, 1024, 2**20, 1e-9, 0.5, 1e12]))))
        elif how == "delete":
            _delete(doc, path)
        else:
            doc.setdefault("chip", {})["name"] = draw(st.sampled_from(["n" * 100_000, "a\nb", "ascend910b2", "é"]))
        notes.append(f"{how} {'.'.join(path)}")
    try:
        data = tomli_w.dumps(doc).encode()
    except Exception:  # noqa: BLE001 - nan / inf keys tomli_w rejects: write by hand
        data = text
    tail = draw(st.sampled_from(["", "", "", "nest", "bytes", "truncate"]))
    if tail == "nest":
        data += b"\n[extra]\ndeep = " + b"[" * 3000 + b"]" * 3000 + b"\n"
    elif tail == "bytes":
        i = draw(st.integers(0, len(data)))
        data = data[:i] + b"\xff\xfe" + data[i:]
    elif tail == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    notes.append(tail)
    argv = draw(st.sampled_from([
        ("run", "m.onnx", "--target", "chip.toml", "--timing-only"),
        ("run", "m.onnx", "--target", "chip.toml", "--report", "r.json", "--timing-only"),
        ("compile", "m.onnx", "--target", "chip.toml", "-o", "out.mlir"),
    ]))
    files = {"m.onnx": tiny_model(), "chip.toml": data}
    return Case("ascendir", argv, files, " ".join(notes))
