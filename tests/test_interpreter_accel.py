"""Every speed-up of interpreter/accel is switchable (`Accel`) and gives the results of the run
without it: each test turns one mechanism off, checks that the mechanism did fire in the run with
it (a spy on its hit path), and compares the two runs' reports (every cycle, byte, flop and tile op
of every kernel), L2 counters and, with numerics, outputs.

Remap, cross-block reuse and launch reuse are exact: the reports compare with ==. The steady-state
jump and the loop memo shift stored times and add m x a period's delta instead of summing the
skipped iterations one by one, so their cycles agree to the last few bits only (float rounding of
the same sums in another order: 4096^3 timing-only 1565469.0181817967 with them, ...7594 without,
4e-17 relative); every count (tile ops, bytes, flops, L2 hits and misses) is exact, and cycles are
compared at the tolerance steady.py's jumps use (REL = 1e-9).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.interpreter.accel import loop_memo, remap, steady, xblock
from ascendir.interpreter.testing import add_ir, matmul_ir, parse
from test_interpreter_steady import _chained_adds

HW = load_target("ascend910b2")
ALL = Accel()


def _run(module, accel: Accel, feeds: dict | None = None) -> tuple[dict, tuple[int, int], dict]:
    """(report, (L2 hits, misses), outputs) of one compile + run of `module` with `accel`."""
    prog = compile_module(module, HW, None, timing_only=feeds is None, accel=accel)
    outs, recs = prog.run(feeds or {})
    return build_report(recs, HW), (prog.l2.hits, prog.l2.misses), outs


def _spy(monkeypatch, cls: type, name: str) -> list:
    """Count the calls of cls.name that return a true value (a reuse that happened)."""
    hits: list = []
    orig = getattr(cls, name)

    def wrapped(*a, **k):
        r = orig(*a, **k)
        if r:
            hits.append(1)
        return r

    monkeypatch.setattr(cls, name, wrapped)
    return hits


@pytest.fixture(scope="module")
def matmul():
    # 24 cores over 16 tile columns: per-core tile loops with a period > 1 (remap), K loops reused
    # across tiles (loop memo) and blocks (xblock)
    return parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24))


@pytest.mark.parametrize("switch, cls, hook", [("remap", remap.Remap, "tables"), ("xblock", xblock.BlockMemo, "reuse")])
def test_exact_switches_give_identical_reports(monkeypatch, matmul, switch, cls, hook):
    fired = _spy(monkeypatch, cls, hook)
    on = _run(matmul, ALL)[:2]
    assert fired, f"{switch} never fired: the test would prove nothing"
    fired.clear()
    off = _run(matmul, replace(ALL, **{switch: False}))[:2]
    assert not fired
    assert on == off  # exact: every cycle, byte, flop and tile op of every kernel; L2 hits, misses


def test_launch_memo_switch_gives_identical_reports(monkeypatch):
    module = parse(_chained_adds(6, fresh=(2, 4)))
    on_prog = compile_module(module, HW, None, timing_only=True, accel=ALL)
    _, recs = on_prog.run({})
    assert on_prog.memo_hits >= 2
    on = (build_report(recs, HW), on_prog.l2.hits, on_prog.l2.misses)
    off_prog = compile_module(module, HW, None, timing_only=True, accel=replace(ALL, launch_memo=False))
    _, recs = off_prog.run({})
    assert off_prog.memo is None and off_prog.memo_hits == 0
    assert on == (build_report(recs, HW), off_prog.l2.hits, off_prog.l2.misses)


def _same_up_to_rounding(a: dict, b: dict) -> None:
    """Reports equal in every count, cycles within steady.REL (see the module doc)."""
    assert a["tile_ops"] == b["tile_ops"] and a["flops"] == b["flops"] and a["bytes"] == b["bytes"]
    assert a["total_cycles"] == pytest.approx(b["total_cycles"], rel=steady.REL)
    for ka, kb in zip(a["kernels"], b["kernels"], strict=True):
        assert ka["cycles"] == pytest.approx(kb["cycles"], rel=steady.REL), ka["name"]


def test_loop_memo_switch(monkeypatch, matmul):
    fired = _spy(monkeypatch, loop_memo.LoopMemo, "reuse")
    on, l2_on, _ = _run(matmul, ALL)
    assert fired
    fired.clear()
    off, l2_off, _ = _run(matmul, replace(ALL, loop_memo=False, xblock=False))
    assert not fired
    assert l2_on == l2_off
    _same_up_to_rounding(on, off)


def test_steady_switch(matmul):
    on, l2_on, _ = _run(matmul, ALL)
    off, l2_off, _ = _run(matmul, replace(ALL, steady=False))
    assert sum(k["extrapolated_iterations"] for k in on["kernels"]) > 0
    assert all(k["extrapolated_iterations"] == 0 for k in off["kernels"])
    assert l2_on == l2_off
    _same_up_to_rounding(on, off)


def test_extrapolate_false_is_steady_off(matmul):
    prog = compile_module(matmul, HW, None, timing_only=True, extrapolate=False)
    assert prog.accel == replace(ALL, steady=False)


def test_numerics_identical_with_and_without_every_speed_up():
    # numerics runs never extrapolate; launch reuse shares the L2 recording pass's designation
    module = parse(_chained_adds(3, fresh=(2,)))
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((4096, 256)).astype(np.float16) for k in ("x", "y", "w2")}
    rep_on, l2_on, out_on = _run(module, ALL, feeds)
    rep_off, l2_off, out_off = _run(module, Accel.none(), feeds)
    assert rep_on == rep_off and l2_on == l2_off
    np.testing.assert_array_equal(out_on["z"], out_off["z"])


def test_none_runs_every_iteration():
    module = parse(add_ir(4096, 64, 8, block_dim=4))
    rep, _, _ = _run(module, Accel.none())
    assert all(k["extrapolated_iterations"] == 0 for k in rep["kernels"])


def test_gc_pause_switch(matmul):
    import gc

    was = gc.isenabled()
    on = _run(matmul, ALL)[:2]
    assert gc.isenabled() == was  # restored after compile and run
    assert on == _run(matmul, replace(ALL, gc_pause=False))[:2]
