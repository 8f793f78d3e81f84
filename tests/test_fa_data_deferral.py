"""Which data walks defer their cube data (interpreter/exec/deferred.py `eligible`): only kernels
where some mmad may share a matmul with others (`_joins`: it accumulates, or its tile is one a
super-tile may hold). A kernel whose mmads are each computed alone (FlashAttention: init tiles of
128 x 96 x 128) runs its copies and mmads as written, with the single walk's bits."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import f16, f32

from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, memref_type
from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.exec import deferred, registry
from ascendir.interpreter.testing import matmul_ir, parse

HW = load_target("ascend910b2")


def _mmad(m: int, n: int, k: int, init: bool) -> list:
    """alloc A (m x k, L0A), B (k x n, L0B), C (m x n, L0C) and an mmad over them."""
    bufs = [ascend.AllocOp(memref_type(s, t, sp)) for s, t, sp in
            (((m, k), f16, MemSpace.L0A), ((k, n), f16, MemSpace.L0B), ((m, n), f32, MemSpace.L0C))]
    return [*bufs, ascend.MmadOp(*(b.results[0] for b in bufs), init)]


@pytest.mark.parametrize("m, n, k, init, defers", [
    (128, 96, 128, True, False),  # FlashAttention's Q x K^T / P x V tiles: computed alone
    (128, 128, 128, False, True),  # accumulates: a K run may join it to the mmads before it
    (256, 256, 128, True, True),  # 256 x 256 x 128 = 8.4 M >= BLOCKED_MNK: a super-tile may hold it
    (512, 16, 1024, True, True),  # 8.4 M, n = 16
    (1024, 8, 1024, True, False),  # n under 16: alone (OpenBLAS's small-matrix kernels)
])
def test_a_kernel_defers_only_where_an_mmad_may_join_others(m, n, k, init, defers):
    assert deferred.eligible(_mmad(m, n, k, init), registry.SEMANTICS) is defers
    # a kernel's every mmad must be alone for it not to defer
    assert deferred.eligible(_mmad(m, n, k, init) + _mmad(128, 128, 128, False), registry.SEMANTICS)


def test_a_gemm_kernel_still_defers():
    kernel = next(o for o in parse(matmul_ir(256, 256, 512, block_dim=2)).walk() if o.name == "ascend.kernel")
    assert deferred.eligible(list(kernel.walk())[1:], registry.SEMANTICS)


@pytest.fixture(scope="module")
def attention() -> tuple:
    """benchmarks/fusion.py's causal attention (2 heads, 200 queries and keys: edge tiles), lowered
    as benchmarks/numerics_speed.py lowers its layer, and its inputs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fusion
    import interpreter_speed

    saved = fusion.HEADS
    fusion.HEADS = 2
    try:
        module, _ = interpreter_speed.lowered(fusion.attention_ir(200, 200), HW)
    finally:
        fusion.HEADS = saved
    rng = np.random.default_rng(3)
    feeds = {f"arg{i}": (rng.standard_normal((1, 2, 200, 128)) * 1.3).astype(np.float16) for i in range(3)}
    return module, feeds


def test_flash_attention_runs_as_written_with_the_single_walks_bits(attention, monkeypatch):
    module, feeds = attention
    kernels = [o for o in module.walk() if o.name == "ascend.kernel"]
    assert any(k.sym_name.data.startswith("flash_attention") for k in kernels)
    ops = {k.sym_name.data: list(k.walk())[1:] for k in kernels}
    assert not any(deferred.eligible(o, registry.SEMANTICS) for n, o in ops.items() if n.startswith("flash_attention"))
    sums = []
    orig = deferred.CubeDeferral._sum
    monkeypatch.setattr(deferred.CubeDeferral, "_sum", lambda self, *a: sums.append(1) or orig(self, *a))
    new = simulate(module, None, feeds, HW)
    assert not sums  # nothing deferred
    old = simulate(module, None, feeds, HW, accel=Accel.none())
    assert new.report == old.report
    assert np.array_equal(new.outputs["out0"], old.outputs["out0"])
    # deferred anyway (what `eligible` declines): the same bits, through the recorded path
    monkeypatch.setattr(deferred, "_joins", lambda op: True)
    forced = simulate(module, None, feeds, HW)
    assert sums
    assert forced.report == old.report
    assert np.array_equal(forced.outputs["out0"], old.outputs["out0"])
