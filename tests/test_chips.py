"""Chips and architectures: a chip of a known architecture is one TOML file (the Atlas A3 die,
ascend910_93, was added as nothing else); no code outside the hardware layer (and the dialect's
placement table) decides anything by an architecture or chip name; the TOMLs' sources resolve in
docs/hardware-reference.md."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from ascendir.driver import compile_model
from ascendir.hardware import ARCHS, TARGETS, ChipArch, L0COut, load_target
from ascendir.hardware.config import CHIPS
from ascendir.interpreter import simulate

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ascendir"
DATA = Path(__file__).parent / "data"
DOC = ROOT / "docs" / "hardware-reference.md"

# Where an architecture may be told by its name: the hardware layer (ChipArch, the loader) and the
# `ascend` dialect's copy-path table, which the verifier reads by a module's `ascend.arch` string
# without the hardware layer above it (dialects/ascend/placement.py COPY_PATHS).
NAME_ALLOWED = ("ascendir/hardware/", "ascendir/dialects/ascend/placement.py")
# An architecture ("dav-c220") or chip ("ascend910b2", "ascend910_93", "ascend310p") name.
NAME = re.compile(r"^(dav-[a-z]\d+\w*|ascend\d{3}\w*)$")


def _names_in(node: ast.AST | None, tables: dict[str, bool]) -> bool:
    """True when `node` is a name string, a literal collection holding one, or a module-level
    constant bound to such a collection."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(NAME.match(node.value))
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_in(e, tables) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple"):
        return any(_names_in(a, tables) for a in node.args)
    if isinstance(node, ast.Name):
        return tables.get(node.id, False)
    return False


def name_tests(source: str) -> list[str]:
    """Places in `source` that decide by an architecture or chip name: a comparison or membership
    test against one, a table keyed by one, a module-level collection of them, or a target's
    removed `.split` flag. A name passed as a value (a default target, IR text) is no test."""
    tree = ast.parse(source)
    tables = {}
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    tables[t.id] = _names_in(st.value, {})
    found = [f"line {st.lineno}: collection of names {name}" for st in tree.body
             if isinstance(st, (ast.Assign, ast.AnnAssign)) for name, is_table in tables.items()
             if is_table and any(isinstance(t, ast.Name) and t.id == name
                                 for t in (st.targets if isinstance(st, ast.Assign) else [st.target]))]
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(_names_in(x, tables) for x in [node.left, *node.comparators]):
            found.append(f"line {node.lineno}: compares with a name")
        elif isinstance(node, ast.Dict) and any(_names_in(k, {}) for k in node.keys if k is not None):
            found.append(f"line {node.lineno}: table keyed by a name")
        elif isinstance(node, ast.Subscript) and _names_in(node.slice, {}):
            found.append(f"line {node.lineno}: looks a name up")
        elif isinstance(node, ast.MatchValue) and _names_in(node.value, {}):
            found.append(f"line {node.lineno}: matches a name")
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found += [f"line {n.lineno}: .split flag" for n in ast.walk(tree)
              if isinstance(n, ast.Attribute) and n.attr == "split" and id(n) not in calls]
    return sorted(set(found))


def test_the_name_check_sees_the_old_tests():
    """What the templates did before ChipArch is caught; a name given as a value is not."""
    assert name_tests('split = arch == "dav-c220"\n')
    assert name_tests('NO_FP32_CUBE = ("dav-c100", "dav-m200")\nok = arch not in NO_FP32_CUBE\n')
    assert name_tests('if target.name != "ascend910b2": pass\n')
    assert name_tests('PATHS = {"dav-c220": 1}\n')
    assert name_tests("x = target.split and y\n")
    assert name_tests('match a:\n    case "dav-m200": pass\n')
    assert not name_tests('hw = load_target("ascend910b2")\ndef f(target="ascend910_93"): return s.split(",")\n')


def test_no_code_outside_hardware_tests_an_arch_or_chip_name():
    bad = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(NAME_ALLOWED):
            continue
        found = name_tests(path.read_text())
        if found:
            bad[rel] = found
    assert not bad, "ask target.arch (hardware/arch.py ChipArch) instead:\n" + "\n".join(f"{k}: {v}" for k, v in bad.items())


def test_chip_archs_answer_what_templates_ask():
    c220, c100, m200 = ARCHS["dav-c220"], ARCHS["dav-c100"], ARCHS["dav-m200"]
    assert list(ARCHS) == ["dav-c220", "dav-c100", "dav-m200"] and str(c220) == "dav-c220"
    assert c220.split_cores and c220.fixpipe and c220.l0c_out is L0COut.FIXPIPE and c220.bias_table
    for coupled in (c100, m200):
        assert not coupled.split_cores and not coupled.fixpipe and coupled.l0c_out is L0COut.UB and not coupled.bias_table
    assert c220.no_mmad("f32") is None and c220.no_mmad("bf16") is None
    assert c100.no_mmad("f32") == "has no f32 mmad (only f16/int8 on its cube, S1)" == m200.no_mmad("f32")
    assert c100.no_mmad("bf16") and c100.no_mmad("f16") is None and m200.cube_has("s4") and not c100.cube_has("s4")
    with pytest.raises(ValueError, match="split cube/vector cores need L0C out by FixPipe"):
        ChipArch("dav-x", "x", True, L0COut.UB, False, frozenset({"f16"}))
    with pytest.raises(ValueError, match="needs bias_table"):
        ChipArch("dav-x", "x", False, L0COut.FIXPIPE, False, frozenset({"f16"}))
    for name in TARGETS:  # every chip's cube modes are ones its architecture has
        hw = load_target(name)
        assert set(hw.cube.k_per_cycle) <= hw.arch.cube_dtypes, name


def test_toml_contradicting_its_arch_fails_on_load(tmp_path: Path):
    from ascendir.errors import AscendirError

    text = (CHIPS / "ascend910a.toml").read_text()
    p = tmp_path / "custom.toml"
    p.write_text(text.replace('name = "ascend910a" ', 'name = "my910a" ').replace("{ f16 = 16, s8", "{ f16 = 16, f32 = 4, s8"))
    with pytest.raises(AscendirError, match=r"cube.k_per_cycle.f32: the dav-c100 cube has no such mmad"):
        load_target(p)
    text = (CHIPS / "ascend910b2.toml").read_text()
    p.write_text(text.replace('name = "ascend910b2" ', 'name = "my910b2" ').replace("\nbt = 1024 ", "\n# bt"))
    with pytest.raises(AscendirError, match=r"buffers.bt missing: dav-c220 has a bias table"):
        load_target(p)


# --- the Atlas A3 die: one TOML file and nothing else ---------------------------------------


def _figures(name: str) -> dict:
    raw = tomllib.loads((CHIPS / f"{name}.toml").read_text())
    raw["chip"] = {k: v for k, v in raw["chip"].items() if k != "name"}
    return raw


def test_a3_die_is_one_toml_file():
    """ascend910_93 is a shipped target; its name appears in no code, only in its TOML."""
    assert "ascend910_93" in TARGETS
    hw = load_target("910_93")
    assert hw.name == "ascend910_93" and hw.arch is ARCHS["dav-c220"]
    assert (hw.num_aic, hw.num_aiv, hw.aiv_per_aic, hw.clock_hz) == (24, 48, 2, 1.85e9)
    assert hw.memory.hbm_bytes == 64 * 2**30 and hw.memory.l2_bytes == 192 * 2**20
    # the per-die platform config gives the 910B1 figures (docs/hardware-reference.md §A3)
    assert _figures("ascend910_93") == _figures("ascend910b1")
    # a topology file (hardware/topologies) names the chip of its devices: data, like the chip file
    uses = [p for p in PKG.rglob("*") if p.is_file() and p.suffix in (".py", ".toml") and "910_93" in p.read_text()
            and p.parent.name != "topologies"]
    assert uses == [CHIPS / "ascend910_93.toml"], uses


@pytest.mark.sampled
@pytest.mark.parametrize("name", ["mlp_small", "llama_small"])
def test_a3_die_compiles_and_runs_like_onnxruntime(name: str):
    """A corpus model compiled for the A3 die matches the onnxruntime reference (as on 910B2:
    rtol 1e-3, atol 1e-4), in the cycles of a 910B1, whose figures the die has."""
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    module, weights = compile_model(DATA / name / "model.onnx", "ascend910_93", opt_level="O2")
    assert module.attributes["ascend.target"].data == "ascend910_93"
    result = simulate(module, weights, inputs, load_target("ascend910_93"))
    assert set(result.outputs) == set(expected)
    for k, want in expected.items():
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-3, atol=1e-4, err_msg=f"{name} output {k}")
    assert result.report["total_cycles"] > 0
    b1, w1 = compile_model(DATA / name / "model.onnx", "ascend910b1", opt_level="O2")
    assert simulate(b1, w1, inputs, load_target("ascend910b1"), timing_only=True).report["total_cycles"] == result.report["total_cycles"]


# --- the TOMLs cite docs/hardware-reference.md -----------------------------------------------


def test_toml_sources_resolve_in_the_hardware_reference():
    """Every TOML names docs/hardware-reference.md in its header; every [Sn] it cites is in the
    document's source table and every §Name is one of its headings."""
    doc = DOC.read_text()
    sources = set(re.findall(r"^\| (S\d+) \|", doc, re.M))
    headings = {m.group(1) for m in re.finditer(r"^#+ .*§(\w+)", doc, re.M)}
    for path in sorted(CHIPS.glob("*.toml")):
        text = path.read_text()
        header = "\n".join(line for line in text.splitlines()[:4] if line.startswith("#"))
        assert "docs/hardware-reference.md" in header, path.name
        cited = set(re.findall(r"\[(S\d+)\]", text)) | set(re.findall(r"\b(S\d+)\b", text))
        assert cited <= sources, f"{path.name}: {sorted(cited - sources)} not in the reference's source table"
        sections = set(re.findall(r"§(\w+)", text))
        assert sections <= headings, f"{path.name}: {sorted(sections - headings)} not a heading of {DOC.name}"
