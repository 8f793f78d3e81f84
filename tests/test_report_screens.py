"""The closing screens of `ascendir run` / `ascendir report` (api/report_table.py) at 80 and 160
columns: the single-chip report, a tensor-parallel cluster run (devices, collectives, links) and
an MoE block. No line is wider than the console, table titles stay whole on their own line,
and no table row is broken over lines: each row is one line holding its figures, a name too
long for the width ends in an ellipsis, and optional columns are dropped first."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from ascendir.api.report_table import render
from ascendir.interpreter.report.headline import grouped
from cli_helpers import run_cli

DATA = Path(__file__).parent / "data"
LLAMA = DATA / "llama_small" / "model.onnx"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    out = {}
    tmp = tmp_path_factory.mktemp("screens")
    for name, model, extra in (("llama", LLAMA, []), ("tp", LLAMA, ["--tp", "2"]),
                               ("moe", DATA / "mixtral_moe_block_small" / "model.onnx", [])):
        r = run_cli("run", model, "--timing-only", *extra, "--report", tmp / f"{name}.json")
        assert r.exit_code == 0, r.output
        out[name] = json.loads((tmp / f"{name}.json").read_text())
    return out


def _screen(report: dict, width: int) -> list[str]:
    buf = io.StringIO()
    render(report, Console(file=buf, width=width, color_system=None, highlight=False))
    return buf.getvalue().splitlines()


def _rows_whole(lines: list[str], title: str, cells: list[tuple[str, str]], header: str = "kernel") -> None:
    """Below the title line `title`, each (first cell, a figure of the row) pair is on one line,
    and the table holds no line without a figure of a row (a continued cell)."""
    start = lines.index(title)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() and lines[i][0] not in " │┃┏┡└"), len(lines))
    body = [ln for ln in lines[start + 1:end] if re.search(r"\d", ln) and not ln.strip(" │┃").startswith(header)]
    for first, figure in cells:
        assert any(re.match(rf"^[ │]*{re.escape(first)}[ …]", ln) and figure in ln for ln in body), (title, first, figure)
    assert len(body) == len(cells), f"{title}: {len(body)} lines for {len(cells)} rows"


@pytest.mark.parametrize("width", [80, 160])
def test_screens_fit_without_breaking_cells(reports: dict[str, dict], width: int) -> None:
    for name, rep in reports.items():
        lines = _screen(rep, width)
        assert max(map(len, lines)) <= width, name
        rows = grouped(rep)[:25]
        title = f"kernels (top {len(rows)} of {len(grouped(rep))}; n launches summed)"
        _rows_whole(lines, title, [(r["name"], f"{r['cycles']:,.0f}") for r in rows])
        assert "pipe busy (summed over cores; % of total cycles x cores used)" in lines
        assert "…" not in "\n".join(lines)  # these names fit, even at 80 columns
    cl = reports["tp"]["cluster"]
    lines = _screen(reports["tp"], width)
    _rows_whole(lines, "collectives (slowest device)", [(c["kernel"], f"{c['cycles']:,.0f}") for c in cl["collectives"]])
    _rows_whole(lines, "links", [(f"{u['src']} -> {u['dst']}", f"{100 * u['busy_fraction']:.1f}") for u in cl["links"]], "link")
    assert any(ln.startswith("2 devices on atlas800-a2:") for ln in lines)
    moe = _screen(reports["moe"], width)
    assert any(ln.startswith("MoE ") for ln in moe)
    text = "\n".join(moe)
    for figure in ("experts touched ", "tokens per expert min ", "expert weights read "):  # never broken inside
        assert re.search(re.escape(figure) + r"[\d.,]", text), figure


def test_long_names_drop_columns_then_end_in_an_ellipsis(reports: dict[str, dict]) -> None:
    """A 90-character kernel name at 80 columns: the optional columns go, the name ends in an
    ellipsis, the row stays one line with its cycles; at 160 the name is whole."""
    rep = copy.deepcopy(reports["llama"])
    long = "flash_attention_" + "x" * 74
    for k in rep["kernels"]:
        if k["name"] == "flash_attention_0":
            k["name"] = long
    row = next(r for r in grouped(rep) if r["name"] == long)
    narrow = _screen(rep, 80)
    assert max(map(len, narrow)) <= 80
    for title in ("time by kind (op family or fused kind)", f"kernels (top 25 of {len(grouped(rep))}; n launches summed)"):
        line = next(ln for ln in narrow[narrow.index(title):] if ln.lstrip().startswith("flash_attention_x"))
        assert f"{row['cycles']:,.0f}" in line and "…" in line
    assert "GM write" not in "\n".join(narrow)
    wide = _screen(rep, 160)
    assert any(long in ln and f"{row['cycles']:,.0f}" in ln for ln in wide)


@pytest.mark.parametrize("width", [80, 160])
def test_verdict_lines_break_between_figures(reports: dict[str, dict], width: int) -> None:
    """A verdict on outputs with long names (a KV model's present_value.0): each output's line
    breaks, if at all, between its figures; the tolerance stays one piece."""
    import numpy as np

    from ascendir.api.verdict import compare

    want = {f"present_value.{i}": np.linspace(-1, 1, 64, dtype=np.float32) for i in range(2)}
    got = {k: v + np.float32(1e-7) for k, v in want.items()}
    got["present_value.1"][:3] += 1  # a FAIL line with its mismatch count
    rep = dict(reports["llama"], verdict=compare(got, want, "fp32", "want.npz"))
    lines = _screen(rep, width)
    assert max(map(len, lines)) <= width
    text = "\n".join(lines)
    assert "(tol 1e-04 + 1e-03·|exp|" in text and "3 of 64 beyond" in text
    for name in want:
        assert re.search(rf"(PASS|FAIL) {re.escape(name)}: max abs \d", text), name
