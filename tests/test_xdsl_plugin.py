"""ascendir as an xDSL plugin (api/universe.py, the `xdsl.universe` entry point): plain
`xdsl-opt` parses nn / ascend IR and runs every ascendir pass; `ascendir-opt` and `ascendir
compile -p` run the passes of other installed xDSL plugins. The other plugin here is installed
the way pip leaves one: a module and a `.dist-info` with its entry point, on PYTHONPATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascendir.pipelines import PASSES

BIN = Path(sys.executable).parent
DATA = Path(__file__).parent / "data"
MLP = DATA / "mlp_small" / "model.onnx"

PLUGIN = '''
from dataclasses import dataclass
from xdsl.dialects.builtin import UnitAttr
from xdsl.passes import ModulePass
from xdsl.universe import Universe


@dataclass(frozen=True)
class MarkModule(ModulePass):
    name = "mark-module"

    def apply(self, ctx, op):
        op.attributes["myplug.marked"] = UnitAttr()


UNIVERSE = Universe(all_passes={"mark-module": lambda: MarkModule})
'''


def _install(site: Path, module: str, body: str, entry: str) -> None:
    (site / f"{module}.py").write_text(body)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[xdsl.universe]\n{module} = {entry}\n")


def _tool(name: str, *args, site: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([str(BIN / name), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def nn_ir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ir") / "nn.mlir"
    r = _tool("ascendir", "compile", MLP, "--emit", "nn", "-O0", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def test_xdsl_multiverse_has_the_dialects_and_every_pass() -> None:
    code = ("from xdsl.universe import Universe; m = Universe.get_multiverse(); "
            "print(' '.join(sorted(m.all_passes))); print(' '.join(sorted(m.all_dialects)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    passes, dialects = (set(line.split()) for line in r.stdout.splitlines())
    assert set(PASSES) <= passes  # canonicalize, cse and dce are xDSL's own
    assert {"nn", "ascend"} <= dialects


def test_plain_xdsl_opt_lowers_nn_ir(nn_ir: Path) -> None:
    r = _tool("xdsl-opt", nn_ir, "-p", "fuse-matmul-epilogue,fuse-elementwise,choose-tiling{target=ascend910b2},convert-nn-to-ascend")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ascend.kernel @") >= 2 and "ascend.mmad" in r.stdout


def test_other_plugins_passes_in_ascendir_opt_compile_and_xdsl_opt(tmp_path: Path, nn_ir: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "myplug", PLUGIN, "myplug:UNIVERSE")
    r = _tool("ascendir-opt", nn_ir, "-p", "mark-module,O2", site=site)
    assert r.returncode == 0, r.stderr
    assert "myplug.marked" in r.stdout and "nn.fused" in r.stdout
    r = _tool("ascendir", "compile", MLP, "--emit", "nn", "-p", "mark-module,O1", site=site)
    assert r.returncode == 0, r.stderr
    assert "myplug.marked" in r.stdout
    r = _tool("xdsl-opt", nn_ir, "-p", "mark-module,fuse-elementwise", site=site)
    assert r.returncode == 0, r.stderr
    assert "myplug.marked" in r.stdout
    # without the plugin installed the name is unknown: one line, exit 2
    r = _tool("ascendir", "compile", MLP, "--emit", "nn", "-p", "mark-module")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "mark-module" in r.stderr, r.stderr


def test_a_broken_plugin_is_one_line(tmp_path: Path, nn_ir: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "brokenplug", "raise RuntimeError('half-installed')\n", "brokenplug:UNIVERSE")
    r = _tool("ascendir-opt", nn_ir, "-p", "dce", site=site)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("ascendir-opt: error: xDSL plugin 'brokenplug' (brokenplug:UNIVERSE) does not load: "
                                "RuntimeError: half-installed")
    # a pipeline of ascendir's own passes loads no plugin
    r = _tool("ascendir", "compile", MLP, "--emit", "nn", "-p", "fuse-elementwise", site=site)
    assert r.returncode == 0, r.stderr
