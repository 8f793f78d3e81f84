"""Timing-walk closures written for speed, against the general ones they stand for.

Timed subviews of static sizes and strides (exec/memref_ops.py `_subview_timing_static`, the
generated straight-line form) against the general timed subview (`_subview_timing`, reached by
giving the same sizes as dynamic operands): the same result view (shape, dtype), the same GM
address tag (root, offset, strides; strides interned: equal strides are one object), the same
bounds errors, over random forms (static and dynamic offsets, static non-zero offsets, strides
1 and 3, dropped unit dims, GM sources with and without an address tag). Their S charges and
those of a mix kernel's scf.if (scf_ops.py), written inline, against the charge closure
(scalar_codegen.py `_charge_scalar`) they replace."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.interpreter.exec.common import zero_view
from ascendir.interpreter.exec.memref_ops import MemrefOps
from ascendir.interpreter.exec.scalar_codegen import ScalarCodegen
from ascendir.interpreter.exec.scf_ops import ScfOps
from ascendir.interpreter.state import Frame
from ascendir.interpreter.testing import parse
from ascendir.interpreter.timing.timeline import CoreState

SRC, OUT = 0, 1  # slots of the source and the result; the operands' slots follow


class _Ops(MemrefOps, ScfOps, ScalarCodegen):
    """The compiler parts of a timing-only program under test, without the rest of a compiler:
    a host function's (`k` None) or a kernel's of S pipe slots `s_ids` (each scalar op runs on
    all of them) and scalar ALU cost `alu`."""

    def __init__(self, nslots: int, s_ids: list[int] | None = None, alu: float = 0.0):
        self.F = Frame(nslots)
        self.k = None if s_ids is None else SimpleNamespace(
            s_ids=lambda op: list(s_ids), alu=alu, nunits=max(s_ids) // 7 + 1, data_only=False)
        self.m = SimpleNamespace(timing_only=True)
        self.slots: dict = {}
        self.ran: list[str] = []

    def slot(self, v) -> int:
        return self.slots.setdefault(v, len(self.slots))

    def block(self, block) -> list:
        """A region's body: a closure noting which region ran."""
        name = "then" if block.parent is block.parent.parent.regions[0] else "else"
        return [lambda: self.ran.append(name)]


def _form(rng: random.Random, shape: tuple[int, ...]):
    """A random valid subview of `shape`: (dims for the static form, the same with every size
    as a dynamic operand, operand values by slot)."""
    dims, dyn_dims, vals = [], [], {}
    slot = 2
    for n in shape:
        st = rng.choice([1, 1, 3])
        sz = rng.choice([1, 1, 2, max(1, n // (2 * st))])
        sz = min(sz, (n - 1) // st + 1)
        o = rng.randrange(0, n - (sz - 1) * st)
        drop = sz == 1 and rng.random() < 0.5
        if rng.random() < 0.6:
            off = (True, slot)
            vals[slot] = o
            slot += 1
        else:
            off = (False, o)
        vals[slot] = sz
        dims.append((off, (False, sz), (False, st), drop))
        dyn_dims.append((off, (True, slot), (False, st), drop))
        slot += 1
    return dims, dyn_dims, vals


def _run(dims, vals, sources, tag):
    """Run the timed subview of `dims` once per source in `sources` (each with an equal but
    distinct copy of address tag `tag`): the result view and tag of each run."""
    ops = _Ops(64)
    run = ops._subview_timing(SRC, OUT, dims, "memref.subview in the host function", None)
    R, A = ops.F.values, ops.F.gm_tags
    for s, v in vals.items():
        R[s] = v
    out = []
    for a in sources:
        R[SRC], A[SRC] = a, None if tag is None else (tag[0], tag[1], tuple(list(tag[2])))
        run()
        out.append((R[OUT], A[OUT]))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_static_form_matches_general(seed):
    rng = random.Random(seed)
    shape = tuple(rng.choice([1, 4, 7, 16, 33]) for _ in range(rng.choice([1, 2, 3])))
    dims, dyn_dims, vals = _form(rng, shape)
    a, b = zero_view(shape, np.dtype("float16")), zero_view(shape, np.dtype("float32"))
    sources = [a, a, b, a]  # (a source of another dtype in between: its own view)
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    for tag in (None, ("root", rng.randrange(1000), strides)):
        got = _run(dims, vals, sources, tag)
        want = _run(dyn_dims, vals, sources, tag)
        for (v, t), (wv, wt), src in zip(got, want, sources):
            assert v.shape == wv.shape and v.dtype == wv.dtype == src.dtype
            assert t == wt
        if tag is not None:  # interned strides: equal strides are one object over the runs
            assert all(t[2] is got[0][1][2] for _, t in got)


@pytest.mark.parametrize("seed", range(12))
def test_static_form_bounds_errors(seed):
    rng = random.Random(100 + seed)
    shape = (rng.choice([4, 7, 16]), rng.choice([4, 16]))
    dims, dyn_dims, vals = _form(rng, shape)
    # move one offset, made dynamic, past the end (or below 0) of its dim
    i, slot = rng.randrange(2), 63
    for ds in (dims, dyn_dims):
        ds[i] = ((True, slot), *ds[i][1:])
    vals[slot] = rng.choice([-1, shape[i] - (dims[i][1][1] - 1) * dims[i][2][1]])
    a = zero_view(shape, np.dtype("float32"))
    with pytest.raises(AscendirError) as static_err:
        _run(dims, vals, [a], None)
    with pytest.raises(AscendirError) as general_err:
        _run(dyn_dims, vals, [a], None)
    assert str(static_err.value) == str(general_err.value)
    assert f"out of bounds on dim {i}: offset {vals[slot]}" in str(static_err.value)


@pytest.mark.parametrize("s_ids", [[0], [0, 7], [0, 7, 14]])
def test_static_form_charges_inline(s_ids):
    """The S charge of a kernel's static subview, inline, adds what `charge` adds."""
    dims = [((True, 2), (False, 4), (False, 1), False), ((False, 3), (False, 8), (False, 1), False)]
    got = []
    for inline in (list(s_ids), None):
        ops = _Ops(8, s_ids, alu=1.5)
        charge = ops._charge_scalar(None)
        run = ops._subview_timing(SRC, OUT, dims, "memref.subview in kernel @k", charge, inline)
        ops.F.core = core = CoreState(0, 21)
        core.free[:] = [float(i) for i in range(21)]
        R = ops.F.values
        R[SRC], R[2] = zero_view((16, 16), np.dtype("float16")), 5
        for _ in range(3):
            run()
        got.append((list(core.free), list(core.busy), R[OUT].shape))
    assert got[0] == got[1]
    assert got[0][0][s_ids[-1]] == s_ids[-1] + 4.5


IF = """builtin.module {
  func.func @f(%c: i1) {
    scf.if %c {
    } else {
    }
    func.return
  }
}"""


@pytest.mark.parametrize("s_ids", [[0], [7], [0, 7], [0, 14], [0, 7, 14]])
def test_mix_kernel_if_charges_inline(s_ids):
    """A mix kernel's timed scf.if: the branch its condition picks, then the charge `charge`
    makes (on every S pipe running the if)."""
    op = next(o for o in parse(IF).walk() if o.name == "scf.if")
    for cond in (True, False):
        ops = _Ops(4, s_ids, alu=2.5)
        run = ops.if_(op)
        ops.F.core = core = CoreState(0, 21)
        want = CoreState(0, 21)
        ops.F.values[ops.slot(op.cond)] = cond
        for _ in range(2):
            run()
            ops.F.core = want
            ops._charge_scalar(op)()
            ops.F.core = core
        assert ops.ran == ["then" if cond else "else"] * 2
        assert core.free == want.free and core.busy == want.busy and core.free[s_ids[-1]] == 5.0


G = "memref<64x64xf16, #ascend<space gm>>"
U = "memref<8x64xf16, #ascend<space ub>>"
T = "memref<8x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"


def _loops(trips: int, bounds: str = "%c0 to %cn step %c1") -> str:
    """A timing-only aiv kernel of 4 blocks, each copying `trips` 8-row tiles of its GM rows to
    UB in a loop `bounds` (%cn: `trips`) and adding them."""
    return f'''builtin.module {{
  ascend.kernel @k(%a: {G}) attributes {{block_dim = 4 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %cn = arith.constant {trips} : index
    %bid = ascend.block_idx : index
    %n = arith.addi %bid, %cn : index
    %u = ascend.alloc : {U}
    scf.for %i = {bounds} {{
      %r = arith.muli %i, %c8 : index
      %s = memref.subview %a[%r, 0] [8, 64] [1, 1] : {G} to {T}
      ascend.copy %s, %u : {T}, {U}
      ascend.vadd %u, %u, %u : {U}, {U}, {U}
    }}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) {{
    ascend.launch @k(%x) : {G}
    func.return
  }}
}}'''


@pytest.mark.parametrize("trips, bounds, driven", [
    (4, "%c0 to %cn step %c1", False),  # constant and short: run plainly, without the driver
    (7, "%c0 to %cn step %c1", False),
    (8, "%c0 to %cn step %c1", True),  # long enough to sample (steady.MIN_TRIPS)
    (4, "%c0 to %n step %c1", True),  # bounds known at run time only: the driver decides
])
def test_constant_short_loops_run_plainly(monkeypatch, trips, bounds, driven):
    """A timing loop of constant bounds too short to sample, and kept for no block, runs as a
    plain loop instead of through the loop driver (accel/loop_driver.py `_steady_for`): the same
    report as the driver's (and as every op run one by one, Accel.none())."""
    from ascendir.interpreter import Accel, build_report, compile_module
    from ascendir.interpreter.accel import loop_driver
    from ascendir.hardware import load_target

    hw = load_target("ascend910b2")
    runs = []
    real = loop_driver.LoopDriver.run
    monkeypatch.setattr(loop_driver.LoopDriver, "run", lambda self: runs.append(1) or real(self))
    got = []
    for accel in (Accel(), Accel.none()):
        runs.clear()
        prog = compile_module(parse(_loops(trips, bounds)), hw, None, timing_only=True, accel=accel)
        _, recs = prog.run({})
        got.append(build_report(recs, hw))
        if accel == Accel():
            assert bool(runs) == driven
    assert got[0]["total_cycles"] > 0
    for k in got[0]["kernels"] + got[1]["kernels"]:
        k["extrapolated_iterations"] = None
    assert got[0] == got[1]


@pytest.mark.parametrize("nthen, nelse", [(0, 0), (1, 0), (0, 1), (3, 2), (12, 13), (20, 1)])
def test_timed_if_runs_the_picked_branch_in_order(nthen, nelse):
    """The generated timed scf.if (scf_ops.py `_timed_if`) calls the closures of the branch its
    condition picks, in order, whatever their number (unrolled or looped), then charges."""
    from ascendir.interpreter.exec.scf_ops import _timed_if

    ran: list = []
    then_body = [lambda i=i: ran.append(("t", i)) for i in range(nthen)]
    else_body = [lambda i=i: ran.append(("e", i)) for i in range(nelse)]
    F = Frame(1)
    F.core = CoreState(0, 21)
    run = _timed_if(F.values, F, 0, then_body, else_body, [0, 7], 0.5)
    for cond in (True, False, 1, 0):
        ran.clear()
        F.values[0] = cond
        run()
        assert ran == ([("t", i) for i in range(nthen)] if cond else [("e", i) for i in range(nelse)])
    assert F.core.free[0] == F.core.free[7] == F.core.busy[7] == 2.0


@pytest.mark.parametrize("n", [0, 1, 5, 12, 13, 30])
@pytest.mark.parametrize("s_ids", [None, [0], [0, 14]])
def test_loop_iteration_runs_the_body_in_order_then_charges(n, s_ids):
    """One iteration of a timed loop (accel/loop_driver.py `iteration`, what the loop driver and
    the plain constant loops run): the body's closures in order, unrolled or looped, then the
    loop's charge, inline on its S pipes or by the charge closure (the same sums)."""
    from ascendir.interpreter.accel.loop_driver import iteration

    ran: list = []
    F = Frame(0)
    F.core = CoreState(0, 21)
    charged = []

    def charge():
        charged.append(1)
        for x in (s_ids or [0]):
            F.core.free[x] += 0.5
            F.core.busy[x] += 0.5

    body = [lambda i=i: ran.append(i) for i in range(n)]
    step = iteration(F, body, charge, s_ids, 0.5)
    for _ in range(2):
        step()
    assert ran == list(range(n)) * 2
    assert charged == ([1, 1] if s_ids is None else [])
    for x in (s_ids or [0]):
        assert F.core.free[x] == F.core.busy[x] == 1.0
    assert iteration(F, body, None, s_ids, 0.5)() is None and F.core.free[0] == 1.0  # no charge: none made
