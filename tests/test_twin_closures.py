"""Rewritten run-time closures of the timing-only walk (the numerics run's twins) against their
plain definitions: the generated timed tile-op run (tile_ops._timed_tile: operands compared by
identity, one `is` each), scalar charges on two units (ScalarCodegen._charge_scalar), a mix
kernel's scf.if (ScfOps.if_), the steady-state snapshot's flag times (SteadyLoop.snapshot), the
relative core state of several units (loop_memo.state_key) and a launch log's read flags
(memo._mask)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, Region

from ascendir.interpreter.accel.loop_memo import state_key
from ascendir.interpreter.accel.memo import _mask
from ascendir.interpreter.accel.steady import SteadyLoop
from ascendir.interpreter.exec.common import zero_view
from ascendir.interpreter.exec.compiler import Compiler, KernelInfo
from ascendir.interpreter.exec.tile_ops import _timed_tile
from ascendir.interpreter.state import FLOPS, OPS, Frame
from ascendir.interpreter.timing.timeline import NPIPES, CoreState, FlagQueues


def _cost(vals: tuple) -> tuple:
    """A cost entry (pipe slot, S slot, cycles, latency, acct items, flops) that differs per
    operand shapes and scalar values."""
    n = sum(int(np.prod(v.shape)) if isinstance(v, np.ndarray) else 3 * v for v in vals)
    return (1 + n % 3, 0, 2.0 * n + 1.0, 0.5 * n, ((0, float(n)),), float(n % 5))


def test_timed_tile_follows_operand_identity_and_shape():
    """Each run charges the cost of the operands it finds (a different shape, a scalar, or an
    equal shape in another object): the identity test only skips the lookup when every operand
    is the last one, and cost functions run once per key. Clocks and counters as a plain
    recomputation gives them."""
    rng = random.Random(5)
    for n in (1, 2, 3, 4):
        F = Frame(n)
        F.core = CoreState(0, NPIPES)
        calls = []

        def cost_fn(*vals):
            calls.append(vals)
            return vals

        def key_of(vals):
            return tuple(v.shape if isinstance(v, np.ndarray) else v for v in vals)

        run = _timed_tile(n)(F, F.values, F.gm_tags, list(range(n)), {}, cost_fn, _cost, key_of, None, [], "op", "op")
        views = [zero_view((4, 8), np.float16), zero_view((2, 8), np.float16), zero_view((4, 8), np.float16)]
        free, done, busy, acct = [0.0] * NPIPES, [0.0] * NPIPES, [0.0] * NPIPES, [0.0] * len(F.acct)
        keys = set()
        for _ in range(60):
            for j in range(n):
                F.values[j] = rng.choice(views) if j or rng.random() < 0.8 else rng.choice((1, 2))
            vals = tuple(F.values[:n])
            pid, sid, cyc, lat, items, flops = _cost(vals)
            keys.add(key_of(vals))
            t = max(free[pid], free[sid])
            free[pid] = t + cyc
            done[pid] = max(done[pid], t + cyc + lat)
            busy[pid] += cyc
            for i, b in items:
                acct[i] += b
            acct[FLOPS] += flops
            acct[OPS] += 1
            run()
            assert F.core.free == free and F.core.done == done and F.core.busy == busy and F.acct == acct, n
        assert len(calls) == len(keys)  # one cost per key, whatever the objects


def _if_block(nunits: int) -> tuple[Block, list]:
    """A block: %c = cmpi slt %x, %y; scf.if %c { %a = addi %x, %y } else { %s = subi %x, %y }."""
    idx = IndexType()
    b = Block(arg_types=[idx, idx])
    x, y = b.args
    cmp = arith.CmpiOp(x, y, "slt")
    add, sub = arith.AddiOp(x, y), arith.SubiOp(x, y)
    then_b, else_b = Block([add, scf.YieldOp()]), Block([sub, scf.YieldOp()])
    if_ = scf.IfOp(cmp.result, [], Region(then_b), Region(else_b))
    b.add_ops([cmp, if_])
    return b, [cmp, if_, add, sub]


def test_mix_kernel_if_takes_its_branch_and_charges_its_units():
    """A mix kernel's scf.if (no results, timing walk): the branch of the condition runs, and the
    if charges one ALU op on the S pipe of every unit running it (two units: unrolled charge)."""
    alu = 0.25
    b, (cmp, if_, add, sub) = _if_block(2)
    F = Frame()
    comp = Compiler(None, F, KernelInfo("k", 2, None, {}, {}, alu, True, scalar_units={if_: [0, 1]}))
    slots = [comp.slot(a) for a in b.args]
    body = comp.block(b)
    for x, y, took in ((1, 2, add), (5, 2, sub)):
        F.core = CoreState(0, NPIPES * 2)
        F.values[slots[0]], F.values[slots[1]] = x, y
        for s in (comp.slot(add.result), comp.slot(sub.result)):
            F.values[s] = None
        for f in body:
            f()
        other = sub if took is add else add
        assert F.values[comp.slot(took.result)] == (x + y if took is add else x - y)
        assert F.values[comp.slot(other.result)] is None
        # cmp, the if and the branch's op, each on both units (scalar_units: every unit when absent)
        for u in range(2):
            assert F.core.free[u * NPIPES] == F.core.busy[u * NPIPES] == 3 * alu
        assert all(v == 0.0 for i, v in enumerate(F.core.free) if i % NPIPES)


@pytest.mark.parametrize("units", [[1, 2], [0, 2], [1], [2], [0], [0, 1, 2]])
def test_charge_touches_exactly_its_units_s_pipes(units):
    """`_charge_scalar` of an op run by `units` of three (a lone AIV of a mix kernel, both AIVs,
    the AIC and one AIV, all): their S pipes advance by one ALU op each, free and busy, and
    nothing else moves (the one- and two-unit charges are unrolled)."""
    alu = 0.5
    op = arith.ConstantOp(IntegerAttr(1, IndexType()))
    F = Frame()
    comp = Compiler(None, F, KernelInfo("k", 3, None, {}, {}, alu, True, scalar_units={op: units}))
    charge = comp._charge_scalar(op)
    F.core = CoreState(0, NPIPES * 3)
    for _ in range(3):
        charge()
    want = [3 * alu if i in [u * NPIPES for u in units] else 0.0 for i in range(3 * NPIPES)]
    assert F.core.free == want and F.core.busy == want


def test_snapshot_holds_every_pending_flag_time_in_queue_order():
    """The snapshot vector: free, done, busy, the counters, then every queue's pending set times
    in queue order (empty queues add nothing), and the queue lengths apart."""
    F = Frame()
    F.core = CoreState(0, NPIPES)
    F.core.free[2], F.core.done[3], F.core.busy[1] = 4.0, 5.0, 6.0
    F.acct[0] = 7.0
    F.flags = FlagQueues(5)
    for k, ts in ((1, [8.0, 9.0]), (3, [10.0]), (4, [11.0, 12.0, 13.0])):
        F.flags.queues[k].extend(ts)
    F.gm_log, F.cost_log = [], []
    sl = SteadyLoop(F, 10, None, None, NPIPES)
    sl.snapshot(0)
    idx, vec, lens = sl.hist[-1][:3]
    assert vec == F.core.free + F.core.done + F.core.busy + F.acct + [8.0, 9.0, 10.0, 11.0, 12.0, 13.0]
    assert lens == [0, 2, 0, 1, 3] and idx == 0


def _state_key_reference(free: list, done: list, queues: list, npipes: int, dst_units: list[int]) -> tuple:
    """state_key's definition for several units, written plainly: every clock clamped to its
    unit's S clock (free[u * npipes]); the key lists "S" for a clock at or below it, else its
    distance to the latest pipe clock."""
    S = [free[u] for u in range(0, len(free), npipes)]
    free = [S[i // npipes] if x < S[i // npipes] else x for i, x in enumerate(free)]
    done = [S[i // npipes] if x < S[i // npipes] else x for i, x in enumerate(done)]
    queues = [[S[dst_units[k]] if t < S[dst_units[k]] else t for t in q] for k, q in enumerate(queues)]
    base = max(free + done)
    rel = [tuple(map(len, queues))]
    rel += ["S" if x <= S[i // npipes] else x - base for i, x in enumerate(free)]
    rel += ["S" if x <= S[i // npipes] else x - base for i, x in enumerate(done)]
    for k, q in enumerate(queues):
        rel += ["S" if t <= S[dst_units[k]] else t - base for t in q]
    return (tuple(rel), tuple(x - base for x in S), base, S), free, done, queues


def random_core(rng: random.Random, nq: int = 4) -> tuple[Frame, list[int]]:
    """A frame with a three-unit core around its S clocks (below, at, above them) and `nq` flag
    queues of pending times, and a random destination unit per queue."""
    F = Frame()
    F.core = CoreState(0, 3 * NPIPES)
    S = [float(rng.randrange(0, 40)) for _ in range(3)]
    for i in range(3 * NPIPES):
        s = S[i // NPIPES]
        F.core.free[i] = s if i % NPIPES == 0 else s + rng.choice((-3.0, 0.0, 2.0, 7.0))
        F.core.done[i] = s + rng.choice((-5.0, 0.0, 1.0, 9.0))
    F.flags = FlagQueues(nq)
    for q in F.flags.queues:
        q.extend(rng.choice((-4.0, 0.0, 3.0)) + 20.0 for _ in range(rng.randrange(3)))
    return F, [rng.randrange(3) for _ in range(nq)]


def test_state_key_of_several_units_matches_definition():
    """The relative core state of a mix kernel (three units): key, clamped clocks written back
    (free, done, pending flag times), S clocks and latest clock as the plain definition gives
    them, on clocks around their S clocks (below, equal, above)."""
    rng = random.Random(11)
    npipes = NPIPES
    for _ in range(200):
        F, dst = random_core(rng)
        want, free, done, queues = _state_key_reference(list(F.core.free), list(F.core.done), [list(q) for q in F.flags.queues],
                                                         npipes, dst)
        got = state_key(F, npipes, dst)
        assert got == want
        assert F.core.free == free and F.core.done == done and [list(q) for q in F.flags.queues] == queues


def test_launch_log_read_flags_per_access():
    """A launch's logged array of accesses gives one is-read flag per access: its own array, or
    one flag for all broadcast to the keys' shape."""
    keys = np.arange(5, dtype=np.int64)
    rd = np.array([True, False, True, True, False])
    assert _mask(rd, keys) is rd
    assert _mask(False, keys).tolist() == [False] * 5 and _mask(np.bool_(True), keys).shape == (5,)
