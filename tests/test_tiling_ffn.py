"""Tilings of an FFN region's matmuls: a gate/up matmul's `ascend.tiling` (from --tiling, the
pass option or IR text) is obeyed by `ffn_up` -- the region then lowers as the two kernels, since
the fused kernel has no per-matmul tiles -- and the down matmul's by `ffn_down`; every recorded
one is checked against the kernel that runs it, errors naming that matmul. Unforced
choose-tiling records none on the gate/up matmuls, so the cost model still picks the plan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_helpers import assert_clean_error, run_cli

MLP = Path(__file__).parent / "data" / "mlp_small" / "model.onnx"


def _plans(text: str) -> set[str]:
    return set(re.findall(r'ffn_plan = "([^"]*)"', text))


def _cycles(out: str) -> int:
    return int(re.search(r"total ([\d,]+) cycles", out).group(1).replace(",", ""))


@pytest.fixture(scope="module")
def nn_ir(tmp_path_factory):
    d = tmp_path_factory.mktemp("mlp")
    r = run_cli("compile", MLP, "--emit", "nn", "-o", d / "mlp.mlir")
    assert r.exit_code == 0, r.output
    return d / "mlp.mlir"


def test_unforced_plan_is_the_cost_models(tmp_path):
    out = tmp_path / "a.mlir"
    assert run_cli("compile", MLP, "-o", out).exit_code == 0
    (plan,) = _plans(out.read_text())
    # mlp_small's FFN: two kernels since ffn_up issues one mmad and one FixPipe copy per step for
    # gate and up side by side (simulated 12,567 cycles, against 13,651 for the fused kernel)
    assert plan.startswith("two-kernel:")


def test_forced_tiling_is_obeyed_by_the_ffn_kernels(tmp_path):
    """--tiling m=16,n=16,k=8,l1_depth=1 left the fused kernel's plan (bk=16 bn=112 ...) as it was."""
    out = tmp_path / "a.mlir"
    r = run_cli("compile", MLP, "-o", out, "--tiling", "m=16,n=16,k=8,l1_depth=1")
    assert r.exit_code == 0, r.output
    text = out.read_text()
    (plan,) = _plans(text)
    assert plan.startswith("two-kernel (the gate/up matmul's ascend.tiling)")
    up = text[text.index("ascend.kernel @ffn_up"): text.index("ascend.kernel @ffn_down")]
    # ffn_up's L1 chunks [m, k·l1_depth] / [k·l1_depth, n] and its L0C accumulator [m, n]
    assert "memref<16x8xf32, #ascend<space l1>>" in up and "memref<8x16xf32, #ascend<space l1>>" in up
    assert "memref<16x16xf32, #ascend<space l0c>>" in up


def _edit(nn_ir: Path, tmp_path: Path, node: str, fields: str) -> Path:
    text = nn_ir.read_text()
    new, n = re.subn(r'(nn\.matmul [^{]*)\{onnx\.node = "' + re.escape(node) + r'"(, ascend\.tiling = #ascend\.tiling<\{[^}]*\}>)?\}',
                     lambda m: f'{m.group(1)}{{onnx.node = "{node}", ascend.tiling = #ascend.tiling<{{{fields}}}>}}', text)
    assert n == 1
    out = tmp_path / "e.mlir"
    out.write_text(new)
    (tmp_path / "e.weights.npz").write_bytes(nn_ir.with_name("mlp.weights.npz").read_bytes())
    return out


def test_ir_tiling_of_the_gate_matmul_is_obeyed(nn_ir, tmp_path):
    """n = 256 on /0/Gemm ran with exit 0 and the same cycles as without it."""
    base = run_cli("run", nn_ir, "--timing-only")
    assert base.exit_code == 0, base.output
    r = run_cli("run", _edit(nn_ir, tmp_path, "/0/Gemm", "n = 256 : i64"), "--timing-only")
    assert r.exit_code == 0, r.output
    assert _cycles(r.output) != _cycles(base.output)
    r = run_cli("compile", _edit(nn_ir, tmp_path, "/0/Gemm", "n = 256 : i64"), "-o", tmp_path / "l.mlir")
    assert r.exit_code == 0, r.output
    text = (tmp_path / "l.mlir").read_text()
    assert all(p.startswith("two-kernel (the gate/up") for p in _plans(text))
    up = text[text.index("ascend.kernel @ffn_up"): text.index("ascend.kernel @ffn_down")]
    assert "x256xf32, #ascend<space l0c>>" in up


@pytest.mark.parametrize("node,fields,why", [
    ("/0/Gemm", "m = 0 : i64", "ascend.tiling: m=0 must be >= 1"),
    ("/0/Gemm", "l1_depth = 5000 : i64", "bytes of L1"),
    ("/2/Gemm", "m = 0 : i64", "ascend.tiling: m=0 must be >= 1"),
    ("/2/Gemm", "m = 256 : i64, n = 1024 : i64", "bytes of L0B"),
])
def test_bad_ir_tiling_names_its_matmul(nn_ir, tmp_path, node, fields, why):
    msg = assert_clean_error(run_cli("run", _edit(nn_ir, tmp_path, node, fields), "--timing-only"), why)
    assert f"nn.matmul '{node}'" in msg
