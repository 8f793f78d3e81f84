"""IR text with non-ASCII strings parses back (dialects/ir_text.py): ONNX node and tensor names in
Chinese and the "…" of a clipped label survive `compile -o x.mlir` → `run x.mlir`, ascendir-opt
and plain xdsl-opt (ascendir's plugin), as the strings they were."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import StringAttr
from xdsl.printer import Printer

from ascendir.api.opt import main as opt_main
from ascendir.dialects.ascend import LaunchOp
from ascendir.driver import load_ir
from cli_helpers import assert_clean_error, run_cli
from onnx_builders import run_onnxruntime

BIN = Path(sys.executable).parent
BERT = Path(__file__).parent / "data" / "bert_small" / "model.onnx"

# node names as Chinese exporters write them; one holds a `"` too (an escape beside UTF-8 text)
NODES = ("/模型/层.0/矩阵乘", '/模型/层.0/加法 "引号"', "/模型/层.0/激活…")


def _model() -> onnx.ModelProto:
    """x[4,16] @ W[16,8] + b, Relu: every node and tensor named in Chinese."""
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "权重/矩阵…")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "偏置")
    nodes = [helper.make_node("MatMul", ["输入", "权重/矩阵…"], ["中间"], name=NODES[0]),
             helper.make_node("Add", ["中间", "偏置"], ["加"], name=NODES[1]),
             helper.make_node("Relu", ["加"], ["输出…"], name=NODES[2])]
    graph = helper.make_graph(nodes, "图", [helper.make_tensor_value_info("输入", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("输出…", TensorProto.FLOAT, [4, 8])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _string_attrs(module) -> list[StringAttr]:
    """The StringAttrs of every op's attributes and func.func's argument / result attributes."""
    out = []
    for op in module.walk():
        dicts = [op.attributes] + [d.data for d in [*(getattr(op, "arg_attrs", None) or []), *(getattr(op, "res_attrs", None) or [])]]
        out += [a for d in dicts for a in d.values() if isinstance(a, StringAttr)]
    return out


@pytest.fixture(scope="module")
def zh(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(model.onnx, inputs .npz, onnxruntime's outputs .npz)."""
    d = tmp_path_factory.mktemp("zh")
    model = _model()
    onnx.save(model, d / "zh.onnx")
    x = {"输入": np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)}
    np.savez(d / "in.npz", **x)
    np.savez(d / "ort.npz", **run_onnxruntime(model, x))
    return d / "zh.onnx", d / "in.npz", d / "ort.npz"


@pytest.mark.parametrize("emit", ["nn", "ascend"])
@pytest.mark.parametrize("level", ["0", "2"])
def test_chinese_names_compile_to_mlir_and_run_as_the_onnx_model(zh, tmp_path: Path, level: str, emit: str) -> None:
    onnx_path, inputs, ort = zh
    ir = tmp_path / "zh.mlir"
    res = run_cli("compile", onnx_path, "-O", level, "--emit", emit, "-o", ir)
    assert res.exit_code == 0, res.output
    # the names came back as strings: the graph's and each node's
    module, _ = load_ir(ir)
    names = {a.data for a in _string_attrs(module)}
    if emit == "nn":
        assert set(NODES) | {"输入", "输出…"} <= names
    else:  # each launch carries the nodes it computes
        nodes = ", ".join(op.node.data for op in module.walk() if isinstance(op, LaunchOp))
        assert all(n in nodes for n in NODES), nodes
    # the .mlir runs as the .onnx does: onnxruntime's outputs, and the same outputs bit for bit
    res = run_cli("run", ir, "--inputs", inputs, "--expected", ort, "--outputs", tmp_path / "ir_out.npz", "-O", level)
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output and "输出…" in res.output, res.output
    res = run_cli("run", onnx_path, "--inputs", inputs, "--check-ort", "--outputs", tmp_path / "onnx_out.npz", "-O", level)
    assert res.exit_code == 0, res.output
    got, want = np.load(tmp_path / "ir_out.npz"), np.load(tmp_path / "onnx_out.npz")
    assert list(got) == list(want) == ["输出…"]
    np.testing.assert_array_equal(got["输出…"], want["输出…"])
    assert "激活…" in ir.read_text()  # written as text, not byte escapes


@pytest.mark.sampled
def test_bert_small_clipped_label_runs_from_mlir(tmp_path: Path) -> None:
    ir = tmp_path / "bert.mlir"
    assert run_cli("compile", BERT, "-o", ir).exit_code == 0
    ref = BERT.parent / "reference.npz"  # its inputs and onnxruntime's outputs
    res = run_cli("run", ir, "--inputs", ref, "--outputs", tmp_path / "ir.npz")
    assert res.exit_code == 0 and "PASS" in res.output, res.output
    res = run_cli("run", BERT, "--inputs", ref, "--outputs", tmp_path / "onnx.npz", "--check-ort")
    assert res.exit_code == 0 and "PASS" in res.output, res.output
    got, want = np.load(tmp_path / "ir.npz"), np.load(tmp_path / "onnx.npz")
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    module, _ = load_ir(ir)
    assert any(op.node.data.endswith("LayerNorma…") for op in module.walk() if isinstance(op, LaunchOp) and op.node)
    assert "LayerNorma…" in ir.read_text()  # the importer's clip of a long node label


def test_xdsl_escaped_text_reads_as_strings(zh, tmp_path: Path, capsys) -> None:
    """The byte escapes xDSL's own printer writes (as MLIR's does) read as the same strings, in
    `run` and in ascendir-opt, whose output writes them as text again."""
    onnx_path, inputs, ort = zh
    ir = tmp_path / "zh.mlir"
    assert run_cli("compile", onnx_path, "-o", ir).exit_code == 0
    module, _ = load_ir(ir)
    buf = io.StringIO()
    Printer(stream=buf).print_op(module)
    assert "\\E6\\BF\\80" in buf.getvalue() and "激活" not in buf.getvalue()
    escaped = tmp_path / "escaped.mlir"
    escaped.write_text(buf.getvalue())
    (tmp_path / "escaped.weights.npz").write_bytes((tmp_path / "zh.weights.npz").read_bytes())
    res = run_cli("run", escaped, "--inputs", inputs, "--expected", ort)
    assert res.exit_code == 0 and "PASS" in res.output, res.output
    out = tmp_path / "opt.mlir"
    opt_main([str(escaped), "-o", str(out)])
    assert "/模型/层.0/加法 \\22引号\\22" in out.read_text()
    nn_ir = tmp_path / "nn.mlir"
    assert run_cli("compile", onnx_path, "--emit", "nn", "-O0", "-o", nn_ir).exit_code == 0
    opt_main([str(nn_ir), "-p", "O2,ascend-lowering{target=ascend910b2}", "-o", str(out)])
    capsys.readouterr()
    module, _ = load_ir(out)
    nodes = [op.node.data for op in module.walk() if isinstance(op, LaunchOp)]
    assert nodes and all(n in nodes[0] for n in NODES), nodes


def _xdsl_opt(*args: object) -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    r = subprocess.run([str(BIN / "xdsl-opt"), *map(str, args)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]


def test_plain_xdsl_opt_reads_ascendirs_text(zh, tmp_path: Path) -> None:
    """xdsl-opt, ascendir's plugin loaded and xDSL's parser unchanged, reads the names
    ascendir writes (no other escape in the literal: see ir_text's docstring) and its passes
    carry them; `run` reads xdsl-opt's escaped output back."""
    onnx_path, inputs, ort = zh
    model = onnx.load(onnx_path)
    model.graph.node[1].name = "/模型/层.0/加法"  # no `"`: xDSL 0.75 reads `"...\22"` + UTF-8 as bytes
    onnx.save(model, tmp_path / "zh.onnx")
    nn_ir, low = tmp_path / "zh.mlir", tmp_path / "low.mlir"
    assert run_cli("compile", tmp_path / "zh.onnx", "--emit", "nn", "-O0", "-o", nn_ir).exit_code == 0
    _xdsl_opt(nn_ir, "-p", "fuse-matmul-epilogue,fuse-elementwise,choose-tiling{target=ascend910b2},convert-nn-to-ascend", "-o", low)
    assert "\\E6\\BF\\80\\E6\\B4\\BB\\E2\\80\\A6" in low.read_text()  # xDSL's printer escapes 激活…
    (tmp_path / "low.weights.npz").write_bytes((tmp_path / "zh.weights.npz").read_bytes())
    module, _ = load_ir(low)
    assert [op.node.data for op in module.walk() if isinstance(op, LaunchOp)] == ["/模型/层.0/矩阵乘, /模型/层.0/加法, /模型/层.0/激活…"]
    res = run_cli("run", low, "--inputs", inputs, "--expected", ort)
    assert res.exit_code == 0 and "PASS" in res.output, res.output
    bert = tmp_path / "bert.mlir"  # ascend IR with the importer's "…"
    assert run_cli("compile", BERT, "-o", bert).exit_code == 0
    _xdsl_opt(bert, "-o", tmp_path / "x.mlir")


def test_attribute_text_in_messages_is_readable(zh, tmp_path: Path) -> None:
    """A message quoting an attribute quotes user text as itself, not as byte escapes."""
    ir = tmp_path / "t.mlir"
    assert run_cli("compile", zh[0], "-o", ir).exit_code == 0
    text = ir.read_text()
    ir.write_text(text.replace('ascend.target = #ascend.target<"ascend910b2">', 'ascend.target = "目标…"', 1))
    assert_clean_error(run_cli("run", ir, "--timing-only"), 'IR fails to verify: ascend.target = "目标…" must be an #ascend.target')


def test_node_name_from_mlir_in_an_error_reads_as_written(zh, tmp_path: Path) -> None:
    """An error naming an op by its ONNX node, the node read from .mlir: the name as the model
    has it (it was `b'/\\xe6\\xa8...'` from the BytesAttr)."""
    ir = tmp_path / "zh.mlir"
    assert run_cli("compile", zh[0], "--emit", "nn", "-O0", "-o", ir).exit_code == 0
    assert_clean_error(run_cli("run", ir, "--tiling", "split_k=3"), "nn.matmul #0 ('/模型/层.0/矩阵乘'): tiling", "split_k=3")


def test_printer_and_parser_round_trip_every_kind_of_character() -> None:
    from xdsl.dialects.builtin import BytesAttr, ModuleOp

    from ascendir.dialects.ir_text import IRParser
    from ascendir.driver import print_ir
    from ascendir.session import make_context

    text = 'a"b\\c\td\n\x7f 中文 \u3000…\u202e\u2028\U0001f600 é'
    module = ModuleOp([])
    module.attributes["user.name"] = StringAttr(text)
    ir = print_ir(module)
    # printable non-ASCII as itself; quotes, backslashes, controls and invisible characters
    # (U+202E reverses the text after it, U+2028 breaks the line) as escapes
    assert '"a\\22b\\\\c\\09d\\0A\\7F 中文 \u3000…\\E2\\80\\AE\\E2\\80\\A8\U0001f600 é"' in ir
    back = IRParser(make_context(), ir).parse_module().attributes["user.name"]
    assert back == StringAttr(text)
    # bytes that are not UTF-8 stay a BytesAttr, as xDSL reads them
    module = IRParser(make_context(), 'builtin.module attributes {user.raw = "\\FF\\E2"} {\n}').parse_module()
    assert module.attributes["user.raw"] == BytesAttr(b"\xff\xe2")
