"""LoopMemo doc (e): a stored loop execution in which no S clock decided anything applies to an
entry whose S clock lags *less* far behind than at its stored entry, while that S clock, advanced
by the execution's scalar charges, stays below every other clock of the key (`s_behind`). The
entries it admits give the report of the run without any speed-up; admitting them without the
charges in the bound, or at any S position, gives another report on a loop whose S clock
catches up with its vector pipe."""

from __future__ import annotations

import collections

from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.interpreter.accel import loop_memo, xblock
from ascendir.interpreter.accel.loop_memo import s_behind
from ascendir.interpreter.testing import parse
from test_interpreter_steady import HW, _swiglu_ffn


def _report(module, accel: Accel) -> dict:
    prog = compile_module(module, HW, None, timing_only=True, accel=accel)
    _, recs = prog.run({})
    rep = build_report(recs, HW)
    for k in rep["kernels"]:
        del k["extrapolated_iterations"]  # what was skipped: differs by design
    return rep


def _catching_up(pre: int = 3, scalars: int = 40, outer: int = 8, inner: int = 16):
    """One AIV block: `pre` long vector ops put the V pipe far ahead of the S clock; then
    `outer` entries of a loop of `inner` iterations, each `scalars` scalar adds (S charges)
    then a small vadd. An iteration charges S more than it costs V, so the S clock lags less at
    every entry, and from some entry on it catches up with V inside the loop (a decision)."""
    ub, big = "memref<16x16xf16, #ascend<space ub>>", "memref<64x1024xf16, #ascend<space ub>>"
    chain = "\n".join(f"      %s{j} = arith.addi {'%i' if j == 0 else f'%s{j - 1}'}, %c1 : index" for j in range(scalars))
    pres = "\n".join(f"    ascend.vexp %g, %g : {big}, {big}" for _ in range(pre))
    return parse(f"""builtin.module {{
  ascend.kernel @k() attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {ub}
    %b = ascend.alloc : {ub}
    %g = ascend.alloc : {big}
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cn = arith.constant {inner} : index
    %co = arith.constant {outer} : index
{pres}
    scf.for %o = %c0 to %co step %c1 {{
      scf.for %i = %c0 to %cn step %c1 {{
{chain}
        ascend.vadd %a, %a, %b : {ub}, {ub}, {ub}
      }}
    }}
    ascend.return
  }}
  func.func @main() {{
    ascend.launch @k() : 
    func.return
  }}
}}""")


def _spy(monkeypatch, rule) -> collections.Counter:
    """Route the rule's users (LoopMemo.reuse / prefix, BlockMemo.reuse) through `rule`,
    counting the entries it admits that lag less (some s > h): True."""
    seen: collections.Counter = collections.Counter()

    def spy(srel, hs, dS, units, rel):
        ok = rule(srel, hs, dS, units, rel)
        seen[ok and any(s > h for s, h in zip(srel, hs))] += 1
        return ok

    monkeypatch.setattr(loop_memo, "s_behind", spy)
    monkeypatch.setattr(xblock, "s_behind", spy)
    return seen


def test_less_lagging_s_clock_admitted_exactly(monkeypatch):
    module = _catching_up()
    plain = _report(module, Accel.none())
    seen = _spy(monkeypatch, s_behind)
    assert _report(module, Accel()) == plain
    assert seen[True] > 0


def test_less_lagging_s_clock_admitted_exactly_on_a_mix_ffn(monkeypatch):
    """SwiGLU FFN (256 tokens, 1024 -> 2816, fp16: a mix kernel whose K loops' S clocks lag far
    behind their pipes) with several units per key."""
    module = _swiglu_ffn(256, 1024, 2816)
    plain = _report(module, Accel.none())
    seen = _spy(monkeypatch, s_behind)
    assert _report(module, Accel()) == plain
    assert seen[True] > 0


def test_s_bound_without_charges_breaks_the_report(monkeypatch):
    """The bound without the scalar charges dS admits entries whose S clock catches up with V
    inside the loop: another report."""
    module = _catching_up()
    plain = _report(module, Accel.none())
    seen = _spy(monkeypatch, lambda srel, hs, dS, units, rel: s_behind(srel, hs, [0.0] * len(dS), units, rel))
    assert _report(module, Accel()) != plain
    assert seen[True] > 0


def test_any_s_position_breaks_the_report(monkeypatch):
    module = _catching_up()
    plain = _report(module, Accel.none())
    seen = _spy(monkeypatch, lambda srel, hs, dS, units, rel: True)
    assert _report(module, Accel()) != plain
    assert seen[True] > 0


def test_s_behind_bounds():
    """One unit: lagging as far or further always holds; lagging less holds while s + dS stays
    strictly below the lowest non-"S" clock; several units: each by its own unit's dS."""
    rel = ((0,), "S", -40.0, -10.0, 0.0, "S")
    assert s_behind((-50.0,), (-60.0,), [5.0], None, rel)  # -50 + 5 < -40
    assert not s_behind((-50.0,), (-60.0,), [10.0], None, rel)  # reaches -40: may decide
    assert s_behind((-70.0,), (-60.0,), [100.0], None, rel)  # lags further: no bound
    rel2 = ((), "S", -30.0, "S", -20.0)
    assert s_behind((-50.0, -40.0), (-60.0, -45.0), [1.0, 9.0, 5.0], [0, 2], rel2)
    assert not s_behind((-50.0, -40.0), (-60.0, -45.0), [1.0, 5.0, 10.0], [0, 2], rel2)
