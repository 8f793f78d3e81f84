"""A mix kernel's loop memo keys a loop by the units and flag queues it uses only
(scf_ops.loop_units, LoopMemo.units / qkeys): an AIC K loop whose AIVs' clocks or pending flags
differ between its entries hits the memo, and the run gives the report of the run without any
speed-up. A difference in a unit or queue the loop uses still changes the key (a miss)."""

from __future__ import annotations

import collections
import random

from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.interpreter.accel import loop_memo
from ascendir.interpreter.accel.loop_memo import state_key
from ascendir.interpreter.exec import scf_ops
from ascendir.interpreter.state import Frame
from ascendir.interpreter.timing.timeline import NPIPES, CoreState, FlagQueues
from test_interpreter_steady import HW, _swiglu_ffn
from test_twin_closures import random_core


def _run(module, accel: Accel, monkeypatch) -> tuple[dict, collections.Counter]:
    """(report without the skipped-iteration counts, LoopMemo.reuse outcomes per (restricted, hit))."""
    seen: collections.Counter = collections.Counter()
    reuse = loop_memo.LoopMemo.reuse

    def spy(self, F, R, ent, n):
        r = reuse(self, F, R, ent, n)
        seen[(self.units is not None, bool(r))] += 1
        return r

    monkeypatch.setattr(loop_memo.LoopMemo, "reuse", spy)
    prog = compile_module(module, HW, None, timing_only=True, accel=accel)
    _, recs = prog.run({})
    rep = build_report(recs, HW)
    for k in rep["kernels"]:
        del k["extrapolated_iterations"]  # what was skipped: differs by design
    return rep, seen


def test_loop_using_some_units_hits_across_other_units_clocks(monkeypatch):
    """SwiGLU FFN (256 tokens, 1024 -> 2816, fp16; its gate / up kernel is a mix kernel whose K
    loops run on the AIC and one AIV): keyed by their units only, the K loops hit the memo where
    the whole core's state differed (more hits than with every unit in the key: entries at
    which only other units' clocks or queues differed), and the report is the one without any
    speed-up, figure for figure."""
    module = _swiglu_ffn(256, 1024, 2816)
    plain, _ = _run(module, Accel.none(), monkeypatch)
    fast, seen = _run(module, Accel(), monkeypatch)
    assert fast == plain
    loop_units = scf_ops.loop_units
    monkeypatch.setattr(scf_ops, "loop_units", lambda op, k: (None, None))
    whole, seen_whole = _run(module, Accel(), monkeypatch)
    monkeypatch.setattr(scf_ops, "loop_units", loop_units)
    assert whole == plain
    assert seen[(True, True)] > 0 and seen_whole[(True, True)] == 0
    assert seen[(True, True)] + seen[(False, True)] > seen_whole[(False, True)]


def test_loop_units_claimed_wrong_break_the_report(monkeypatch):
    """The comparison above sees a wrong claim of the units a loop uses: the AIV named instead of
    the AIC (the K loops' cube clocks then neither keyed nor applied) gives another report."""
    module = _swiglu_ffn(256, 1024, 2816)
    plain, _ = _run(module, Accel.none(), monkeypatch)
    loop_units = scf_ops.loop_units

    def wrong(op, k):
        units, keys = loop_units(op, k)
        return (units, keys) if units is None else ([1], keys)

    monkeypatch.setattr(scf_ops, "loop_units", wrong)
    got, seen = _run(module, Accel(), monkeypatch)
    assert seen[(True, True)] > 0 and got != plain


def _copy(F: Frame) -> Frame:
    G = Frame()
    G.core = CoreState(0, len(F.core.free))
    G.core.free[:], G.core.done[:] = F.core.free, F.core.done
    G.flags = FlagQueues(len(F.flags.queues))
    for q, p in zip(G.flags.queues, F.flags.queues):
        q.extend(p)
    return G


def test_state_key_of_some_units_sees_theirs_only():
    """state_key over units [0, 1] and flag keys [1, 2]: moving a clock of unit 2 or a pending
    time of another queue leaves the key, the S distances and the latest clock as they were;
    moving a clock of unit 0 or 1 (past its S clock and the latest clock), or a time of queue 1
    or 2, changes the key."""
    rng = random.Random(5)
    units, qkeys = [0, 1], [1, 2]
    for _ in range(200):
        F, dst = random_core(rng)
        want = state_key(_copy(F), NPIPES, dst, True, units, qkeys)
        G = _copy(F)
        G.core.free[2 * NPIPES + rng.randrange(1, NPIPES)] += 1000.0
        G.core.done[2 * NPIPES + rng.randrange(NPIPES)] += 500.0
        G.flags.queues[0].append(2000.0)
        G.flags.queues[3].append(3000.0)
        got = state_key(G, NPIPES, dst, True, units, qkeys)
        assert got[:3] == want[:3]
        u = rng.choice(units)
        H = _copy(F)
        H.core.free[u * NPIPES + rng.randrange(1, NPIPES)] += 1000.0
        assert state_key(H, NPIPES, dst, True, units, qkeys)[0] != want[0]
        H = _copy(F)
        H.core.done[u * NPIPES + rng.randrange(NPIPES)] += 1000.0
        assert state_key(H, NPIPES, dst, True, units, qkeys)[0] != want[0]
        H = _copy(F)
        H.flags.queues[rng.choice(qkeys)].append(2000.0)
        assert state_key(H, NPIPES, dst, True, units, qkeys)[0] != want[0]


def test_restore_of_some_units_moves_theirs_only():
    """LoopMemo._restore with units [0, 2] and flag keys [0, 3] (a stored end state, moved by a
    clock shift, clocks at the stored S clock pinned to the current one): those units' clocks and
    those queues as the restore of the whole core sets them; unit 1's clocks and queues 1 and 2
    as they were; busy and counters by the stored deltas."""
    rng = random.Random(9)
    ns = 3 * NPIPES
    for _ in range(100):
        F, dst = random_core(rng)
        F.acct = [0.0] * 4
        S = F.core.free[::NPIPES]
        vS = [s - rng.choice((0.0, 4.0)) for s in S]
        ef = [rng.choice((vS[i // NPIPES], vS[i // NPIPES] + 6.0)) for i in range(ns)]
        ed = [rng.choice((vS[i // NPIPES], vS[i // NPIPES] + 3.0)) for i in range(ns)]
        eq = [[vS[dst[k]] + rng.choice((0.0, 5.0)) for _ in range(rng.randrange(3))] for k in range(4)]
        dS = [float(rng.randrange(5)) for _ in range(3)]
        dbusy, dacct = [1.0] * ns, [2.0] * 4
        whole, some = _copy(F), _copy(F)
        for G in (whole, some):
            G.acct = [0.0] * 4
        for G, units, qkeys in ((whole, None, None), (some, [0, 2], [0, 3])):
            memo = loop_memo.LoopMemo([], [], {}, {}, NPIPES, units=units, qkeys=qkeys)
            memo.dst_units = dst
            memo._restore(G, S, vS, 10.0, ef, ed, eq, dS, dbusy, dacct, True)
        mine = [i for i in range(ns) if i // NPIPES != 1]
        assert [some.core.free[i] for i in mine] == [whole.core.free[i] for i in mine]
        assert [some.core.done[i] for i in mine] == [whole.core.done[i] for i in mine]
        assert some.core.free[NPIPES:2 * NPIPES] == F.core.free[NPIPES:2 * NPIPES]
        assert some.core.done[NPIPES:2 * NPIPES] == F.core.done[NPIPES:2 * NPIPES]
        assert [list(some.flags.queues[k]) for k in (0, 3)] == [list(whole.flags.queues[k]) for k in (0, 3)]
        assert [list(some.flags.queues[k]) for k in (1, 2)] == [list(F.flags.queues[k]) for k in (1, 2)]
        assert some.core.busy == whole.core.busy and some.acct == whole.acct == dacct


def _mix_loop(extra: str) -> str:
    """A mix kernel: an AIC loop (GM -> L1 -> L0 copies, an mmad, their flags) holding `extra`,
    then AIV work after it (the kernel then has two units)."""
    g16, g32 = "memref<32x32xf16, #ascend<space gm>>", "memref<32x32xf32, #ascend<space gm>>"
    l1, l0a, l0b = (f"memref<32x32xf16, #ascend<space {s}>>" for s in ("l1", "l0a", "l0b"))
    l0c, u = "memref<32x32xf32, #ascend<space l0c>>", "memref<32x32xf32, #ascend<space ub>>"
    return f"""
builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">}} {{
  ascend.kernel @k(%a: {g16}, %w: {g32}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<mix>}} {{
    %l1 = ascend.alloc : {l1}
    %l0a = ascend.alloc : {l0a}
    %l0b = ascend.alloc : {l0b}
    %l0c = ascend.alloc : {l0c}
    %u = ascend.alloc : {u}
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    scf.for %i = %c0 to %c8 step %c1 {{
      ascend.copy %a, %l1 {{layout = #ascend.layout<nd2nz>}} : {g16}, {l1}
      ascend.set_flag MTE2 -> MTE1, 0
      ascend.wait_flag MTE2 -> MTE1, 0
      ascend.copy %l1, %l0a : {l1}, {l0a}
      ascend.copy %l1, %l0b : {l1}, {l0b}
      ascend.set_flag MTE1 -> M, 0
      ascend.wait_flag MTE1 -> M, 0
      ascend.mmad %l0a, %l0b, %l0c {{init = true}} : {l0a}, {l0b}, {l0c}
      {extra}
    }}
    ascend.copy %w, %u : {g32}, {u}
    ascend.vrelu %u, %u : {u}, {u}
    ascend.return
  }}
  func.func @main(%a: {g16}) {{
    %w = ascend.alloc : {g32}
    ascend.launch @k(%a, %w) : {g16}, {g32}
    func.return
  }}
}}
"""


def _units_of_loop(monkeypatch, extra: str) -> tuple:
    from ascendir.interpreter.testing import parse

    got = []
    loop_units = scf_ops.loop_units

    def spy(op, k):
        r = loop_units(op, k)
        got.append((r[0], [next(t for t, key in k.flag_keys.items() if key == q) for q in r[1]] if r[1] is not None else None))
        return r

    monkeypatch.setattr(scf_ops, "loop_units", spy)
    compile_module(parse(_mix_loop(extra)), HW, None, timing_only=True).run({})
    assert len(got) == 1
    return got[0]


def test_loop_units_of_a_mix_kernel_loop(monkeypatch):
    """The AIC loop uses the AIC and its two flags' queues; a vector op in it adds the AIV, a
    pipe_barrier (every unit's pipe) or a scalar op no unit needs (charged to every unit) each
    makes it every unit (None)."""
    mte2, mte1, m = 4, 3, 2  # (PIPES order: S V M MTE1 MTE2 MTE3 FIX)
    assert _units_of_loop(monkeypatch, "") == ([0], [(mte2, mte1, 0), (mte1, m, 0)])
    vrelu = "ascend.vrelu %u, %u : memref<32x32xf32, #ascend<space ub>>, memref<32x32xf32, #ascend<space ub>>"
    assert _units_of_loop(monkeypatch, vrelu) == (None, None)
    assert _units_of_loop(monkeypatch, "ascend.pipe_barrier MTE2") == (None, None)
    assert _units_of_loop(monkeypatch, "%dead = arith.addi %i, %c1 : index") == (None, None)


def test_prefix_jump_with_another_units_queue_lengths_runs_its_own_period():
    """A stored execution's first jump (LoopMemo.prefix) restores its own units' flag queues only;
    its period delta lays out every queue's pending sets at the lengths it started from. With an
    AIV queue holding another number of sets now, the jump indexed past the delta (IndexError in
    SteadyLoop._advance: the 70B-shaped o_proj + residual, matmul_epilogue on 24 mix cores) or
    would have moved the wrong sets. Now the loop samples its own period there: the cycles of
    the run without any speed-up."""
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate
    from ascendir.session import make_context
    from ascendir.weights import WeightStore
    from xdsl.parser import Parser

    x, w = "tensor<1x1024x8192xf16>", "tensor<8192x8192xf16>"
    text = f"""builtin.module {{
func.func @main(%x: {x}, %o: {x}) -> {x} {{
  %w = nn.weight @wo : {w}
  %y = nn.matmul %o, %w : ({x}, {w}) -> {x}
  %r = nn.add %x, %y : ({x}, {x}) -> {x}
  func.return %r : {x}
}}
}}"""
    cycles = []
    for accel in (None, Accel.none()):
        module = Parser(make_context(), text).parse_module()
        run_passes(module, parse_pipeline(None, "O2", HW.name))
        lower(module, WeightStore(), HW.name)
        cycles.append(simulate(module, WeightStore(), {}, HW, timing_only=True, accel=accel).report["total_cycles"])
    assert cycles[0] == cycles[1]
