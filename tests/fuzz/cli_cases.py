"""Fuzz cases for command lines and the files they read: option values (--tiling, --input-shape,
-p, --seed, --dtype, -O), models that are not models, --inputs archives (wrong keys, shapes and
dtypes, bad headers, a zip bomb) and report JSON for `ascendir report` (mutated values, deep
nesting)."""

from __future__ import annotations

import functools
import io
import json
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from .harness import Case
from .toml_cases import tiny_model

TILING_KEYS = ["m", "n", "k", "br", "bc", "l1_depth", "split_k", "swizzle", "prefetch", "tail_split", "x", ""]
TILING_VALUES = ["1", "0", "-1", "16", "128", "4096", "1000000000", "4611686018427387904", "abc", "1.5", "", "1e3"]
PIPELINES = ["O0", "O2", "O3", "fuse-attention", "nosuch", "choose-tiling{tiling=\"m=1\"}", "choose-tiling{x", "{", ",",
             "convert-nn-to-ascend", "insert-sync", "recompose-nn,recompose-nn", "ascend-lowering{target=nosuch}", "'"]


@functools.cache
def inputs_npz(kind: str) -> bytes:
    """An --inputs archive for the tiny model (x: f32[8, 64]) that is good or broken in one way."""
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    arrays = {
        "good": {"x": x}, "prefixed": {"input:x": x, "output:y": x}, "shape": {"x": x[:4]}, "dtype": {"x": x.astype(np.float64)},
        "missing": {}, "extra": {"x": x, "z": x}, "both": {"x": x, "input:x": x}, "scalar": {"x": np.float32(1)},
        "object": None, "nan": {"x": np.full((8, 64), np.nan, np.float32)},
    }[kind]
    buf = io.BytesIO()
    if arrays is None:  # a pickled object array: np.load refuses it (allow_pickle=False)
        np.savez(buf, x=np.array([{"a": 1}], dtype=object))
    else:
        np.savez(buf, **arrays)
    return buf.getvalue()


def zip_bomb(nbytes: int) -> bytes:
    """An .npz of one f32 array of `nbytes` zeros, deflated (about nbytes / 1000 on disk)."""
    buf = io.BytesIO()
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (nbytes // 4,)})
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("x.npy", "w", force_zip64=True) as f:
        f.write(header.getvalue())
        chunk = bytes(2**22)
        for _ in range(nbytes // len(chunk)):
            f.write(chunk)
    return buf.getvalue()


@functools.cache
def report_json() -> str:
    """The report `ascendir run --report` writes for the tiny model (made once, in a subprocess-free run)."""
    from click.testing import CliRunner

    from ascendir.api.cli import main

    with tempfile.TemporaryDirectory() as d:
        model = Path(d) / "m.onnx"
        model.write_bytes(tiny_model())
        CliRunner().invoke(main, ["run", str(model), "--timing-only", "--report", f"{d}/r.json"], catch_exceptions=False)
        return (Path(d) / "r.json").read_text()


def _mutate_json(draw, doc):
    """Replace one value somewhere in `doc` (a dict or list) by an odd one."""
    odd = draw(st.sampled_from([None, -1, 0, 1e308, "x", [], {}, True, 2**64, -0.5, 1.0000000000000004]))
    node = doc
    path = []
    while isinstance(node, (dict, list)) and node and draw(st.integers(0, 3)) > 0:
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else list(range(len(node)))))
        path.append((node, key))
        node = node[key]
    if path:
        parent, key = path[-1]
        parent[key] = odd
    return doc


def cli_cases() -> st.SearchStrategy[Case]:
    report_json()  # made before generation: a run inside a strategy would draw from `random`
    return _cli_cases()


@st.composite
def _cli_cases(draw) -> Case:
    files: dict = {"m.onnx": tiny_model()}
    notes = []
    command = draw(st.sampled_from(["run", "run", "compile", "report", "other"]))
    if command == "report":
        text = report_json()
        how = draw(st.sampled_from(["mutate", "mutate", "deep", "truncate", "inf", "list"]))
        if how == "mutate":
            text = json.dumps(_mutate_json(draw, json.loads(text)))
        elif how == "deep":
            text = "[" * 100_000 + "]" * 100_000
        elif how == "truncate":
            text = text[: draw(st.integers(0, len(text)))]
        elif how == "inf":
            text = text.replace('"total_cycles": ', '"total_cycles": Infinity, "x": ', 1)
        else:
            text = "[]"
        files["r.json"] = text.encode()
        return Case("ascendir", ("report", "r.json"), files, f"report {how}")
    if command == "other":
        argv = draw(st.sampled_from([("--help",), ("nosuch",), ("run",), ("run", "--seed", "-1", "m.onnx"),
                                     ("run", "m.onnx", "--seed", str(2**70)), ("compile", "m.onnx", "--emit", "llvm"),
                                     ("run", "m.onnx", "--plots", "m.onnx"), ("calibrate", "--nosuch")]))
        return Case("ascendir", argv, files, "other")
    model = draw(st.sampled_from(["m.onnx", "m.onnx", "m.onnx", "missing.onnx", ".", "empty.onnx", "text.mlir", "m.txt"]))
    files["empty.onnx"] = b""
    files["text.mlir"] = b"builtin.module {}\n"
    files["m.txt"] = tiny_model()
    argv = [command, model]
    for _ in range(draw(st.integers(0, 4))):
        opt = draw(st.sampled_from(["--tiling", "--input-shape", "-p", "--seed", "--dtype", "-O", "--target", "--shape-only",
                                    "--verify-numerics", "--inputs", "--outputs", "--timing-only", "-o", "--emit"]))
        if opt == "--tiling":
            n = draw(st.integers(0, 4))
            parts = [f"{draw(st.sampled_from(TILING_KEYS))}={draw(st.sampled_from(TILING_VALUES))}" for _ in range(n)]
            value = ",".join(parts)
            if draw(st.integers(0, 5)) == 0:
                value = "m=1" + "0" * 5000
            argv += [opt, value]
        elif opt == "--input-shape":
            argv += [opt, draw(st.sampled_from(["x=8x64", "x=0x64", "x=8x64x1", "x=", "=8", "y=1", "x=-1x64", "x=8xx64",
                                                "x=99999999999999999999x1", "x=1x" + "1x" * 1000 + "1"]))]
        elif opt == "-p":
            argv += [opt, draw(st.sampled_from(PIPELINES))]
        elif opt == "--seed":
            argv += [opt, draw(st.sampled_from(["0", "1", "-1", str(2**64), "x"]))]
        elif opt == "--dtype":
            argv += [opt, draw(st.sampled_from(["fp16", "bf16", "fp8", "fp32"]))]
        elif opt == "-O":
            argv += [opt, draw(st.sampled_from(["0", "1", "2", "3"]))]
        elif opt == "--target":
            argv += [opt, draw(st.sampled_from(["910a", "310p", "ascend910_93", "nosuch", "chip.toml", "m.onnx"]))]
        elif opt == "--inputs":
            kind = draw(st.sampled_from(["good", "prefixed", "shape", "dtype", "missing", "extra", "both", "scalar", "object",
                                         "nan", "header", "truncated", "text", "bomb"]))
            if kind == "header":
                data = bytearray(inputs_npz("good"))
                i = data.find(b"{'descr'")
                data[i:i + 20] = b"{'descr': '<zz', 'fo"
                data = bytes(data)
            elif kind == "truncated":
                data = inputs_npz("good")[:300]
            elif kind == "text":
                data = b"x,y\n1,2\n"
            elif kind == "bomb":
                data = _bomb()
            else:
                data = inputs_npz(kind)
            files["in.npz"] = data
            argv += [opt, "in.npz"]
            notes.append(f"inputs {kind}")
        elif opt in ("--outputs", "-o"):
            argv += [opt, draw(st.sampled_from(["out.npz", "m.onnx", "in.npz", ".", "sub/none/out.npz", "/dev/null"]))]
        elif opt == "--emit":
            argv += [opt, draw(st.sampled_from(["nn", "ascend"]))]
        else:
            argv.append(opt)
    if "chip.toml" in argv:
        from .toml_cases import chips

        files["chip.toml"] = chips()[0][1]
    return Case("ascendir", tuple(argv), files, " ".join(notes))


BOMB_BYTES = 2**31  # 2 GiB of zeros in ~2 MB


@functools.cache
def _bomb() -> bytes:
    return zip_bomb(BOMB_BYTES)
