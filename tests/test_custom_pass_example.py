"""The custom-pass example (examples/custom_pass, docs/writing-a-pass.md) both ways: applied
from Python (demo.py: the pass on an imported module, then registered in ascendir.PASSES and
run by compile_model) and through `ascendir-opt --load-pass-plugin fold_relu` in a subprocess.
Both give the same single-kernel program, bit-identical outputs and the same cycles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ascendir
from ascendir.errors import AscendirError
from ascendir.pipelines import load_pass_plugin

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_pass"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(EXAMPLE))

import demo  # noqa: E402
from fold_relu import FoldDoubleRelu  # noqa: E402


@pytest.fixture(scope="module")
def from_python(tmp_path_factory) -> dict:
    # demo.main registers the pass in ascendir.PASSES: take it out again for the other tests
    try:
        return demo.main(tmp_path_factory.mktemp("demo"))
    finally:
        ascendir.PASSES.pop(FoldDoubleRelu.name, None)


def test_from_python(from_python):
    r = from_python
    assert (r["relus_before"], r["relus_after"]) == (2, 1)
    cyc_o2, kern_o2, _, y_o2 = r["O2"]
    cyc_fold, kern_fold, _, y_fold = r["fold-double-relu,O2"]
    # the second relu was a kernel of its own: folding it removes that kernel and its cycles
    assert (kern_o2, kern_fold) == (2, 1)
    assert cyc_fold < cyc_o2
    assert np.array_equal(y_fold, y_o2)  # relu(relu(x)) == relu(x) exactly
    x = np.random.default_rng(0).standard_normal((demo.M, demo.K)).astype(np.float32)
    np.testing.assert_allclose(y_fold, np.maximum(x @ demo.W, 0), rtol=1e-5, atol=1e-4)


def _tool(name: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run([str(BIN / name), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True)


def test_through_ascendir_opt(from_python, tmp_path):
    demo.make_model(tmp_path / "m.onnx")
    r = _tool("ascendir", "compile", "m.onnx", "--emit", "nn", "-O0", "-o", "nn.mlir", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "nn.mlir").read_text().count("nn.relu ") == 2

    # the pass alone: one relu left
    r = _tool("ascendir-opt", "--load-pass-plugin", "fold_relu", "nn.mlir", "-p", "fold-double-relu", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("nn.relu ") == 1

    # then -O2 and lowering; the lowered IR runs with the nn IR's weights
    r = _tool("ascendir-opt", "--load-pass-plugin", "fold_relu", "nn.mlir", "-p",
              "fold-double-relu,O2,convert-nn-to-ascend", "-o", "low.mlir", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "low.weights.npz").write_bytes((tmp_path / "nn.weights.npz").read_bytes())
    x = np.random.default_rng(0).standard_normal((demo.M, demo.K)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = _tool("ascendir", "run", "low.mlir", "--inputs", "in.npz", "--outputs", "out.npz", "--report", "rep.json",
              cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "rep.json").read_text())
    cyc, kernels, _, y = from_python["fold-double-relu,O2"]
    assert (rep["total_cycles"], len(rep["kernels"])) == (cyc, kernels)
    assert np.array_equal(np.load(tmp_path / "out.npz")["y"], y)


def test_plugin_that_does_not_import_is_bad_input(tmp_path):
    r = _tool("ascendir-opt", "--load-pass-plugin", "no_such_plugin", "-p", "dce", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "ascendir-opt: error: pass plugin 'no_such_plugin' does not import: ModuleNotFoundError: "
        "No module named 'no_such_plugin'"
    ]


@pytest.mark.parametrize("body, message", [
    ("X = 1", "has no ASCENDIR_PASSES"),
    ("ASCENDIR_PASSES = [int]", "not a ModulePass subclass with a name"),
    ("from ascendir.transforms.nn.fuse_ffn import FuseFFN\nASCENDIR_PASSES = [FuseFFN]", "the pass name 'fuse-ffn' is taken"),
    ("import sys\nsys.exit(3)", "does not import: SystemExit: 3"),
])
def test_bad_plugin_is_named(tmp_path, monkeypatch, body, message):
    (tmp_path / "bad_plugin.py").write_text(body + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AscendirError, match=message):
        load_pass_plugin("bad_plugin")
    sys.modules.pop("bad_plugin", None)
