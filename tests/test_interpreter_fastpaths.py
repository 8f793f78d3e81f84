"""Rewritten hot paths of the timing-only interpreter against their plain definitions:
steady.SteadyLoop._periods_checked (scan kept per period across calls),
l2.L2Pass._designated (sorted lists and bisect), l2.L2Pass.settle (one sort by tile key) and
compiler.Compiler.scalar_run (runs of scalar ops as one generated closure) against the op-by-op
SCALAR_OPS functions and S charges."""

from __future__ import annotations

import random

import numpy as np

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block

from ascendir.interpreter.exec.compiler import Compiler, KernelInfo
from ascendir.interpreter.timing.l2 import L2Pass
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.state import Frame
from ascendir.interpreter.accel.steady import SteadyLoop, step_test
from ascendir.interpreter.timing.timeline import NPIPES, CoreState


def _reference(tops, P: int, idx: int, m: int) -> int:
    """The definition (module docstring of steady.py): how many of the next m periods from idx
    have every checked value advance by the step of the period before; 0 when a value raises."""
    try:
        prev = [tops(i) for i in range(idx - 2 * P, idx)]
        step = [tuple(y - x for x, y in zip(prev[r], prev[r + P])) for r in range(P)]
        last = prev[P:]
        for k in range(m):
            nxt = []
            for r in range(P):
                v = tops(idx + k * P + r)
                if any(y - x != s for x, y, s in zip(last[r], v, step[r])):
                    return k
                nxt.append(v)
            last = nxt
    except ZeroDivisionError:
        return 0
    return m


def _values(n: int, rng: random.Random):
    """Checked values of a loop: period-4 pattern (tile row / column of a matmul's tile loop),
    a break (partial tile) and a value that raises further on."""
    brk = rng.randrange(10, n)
    boom = rng.randrange(brk, n + 20)

    def tops(i: int) -> tuple:
        if i == boom:
            raise ZeroDivisionError("ahead")
        row, col = divmod(3 + 24 * i, 32)
        return (row, col, min(4096 - 128 * row, 128) if i < brk else 7, i % 2 == 0)

    return tops


def test_periods_checked_matches_definition_over_repeated_calls():
    rng = random.Random(5)
    for _ in range(60):
        n = rng.randrange(20, 80)
        tops = _values(n, rng)
        sl = SteadyLoop(None, n, tops, None, 7, same=step_test(range(4)))  # (the 4 values of `_values`)
        idx = 0
        while idx < n - 2:  # calls as the loop makes them: growing idx, every period length
            for P in range(1, 9):
                if idx >= 2 * P:
                    m = (n - idx - 1) // P
                    assert sl._periods_checked(P, idx, m) == _reference(tops, P, idx, m), (P, idx, m)
            idx += rng.choice((1, 1, 2, 5))


def test_designated_lists_the_misses_in_range():
    p = L2Pass(1000.0)
    p.misses = {(0, 3), (0, 10), (0, 11), (2, 0), (2, 7)}
    p.recording = False
    assert p._designated(0, 0, 4) == [3]
    assert p._designated(0, 3, 9) == [0, 7, 8]
    assert p._designated(0, 12, 50) == []
    assert p._designated(1, 0, 100) == []
    assert p._designated(2, 0, 8) == [0, 7]
    assert p._designated(2, 1, 6) == []


_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


def _scalar_block() -> tuple[Block, list]:
    """A block of index args x, y and a run of every inlined op (and a called one, a constant and
    ops reading results of the run), each on (x, y) or on earlier results."""
    b = Block(arg_types=[IndexType(), IndexType()])
    x, y = b.args
    ops = [arith.AddiOp(x, y), arith.SubiOp(x, y), arith.MuliOp(x, y), arith.AndIOp(x, y), arith.OrIOp(x, y),
           arith.XOrIOp(x, y), arith.MinSIOp(x, y), arith.MaxSIOp(x, y), arith.MinUIOp(y, x), arith.MaxUIOp(y, x),
           arith.FloorDivSIOp(x, y), arith.DivUIOp(x, y), arith.RemUIOp(x, y), arith.CeilDivSIOp(x, y),
           arith.CeilDivUIOp(y, x), arith.DivSIOp(x, y), arith.RemSIOp(x, y)]
    ops += [arith.CmpiOp(x, y, p) for p in _PREDICATES]
    c = arith.ConstantOp(IntegerAttr(7, IndexType()))
    ops += [c, arith.MuliOp(ops[0].result, c.result), arith.MinSIOp(ops[1].result, ops[2].result)]
    b.add_ops(ops)
    return b, ops


def _reference_scalars(ops, args: dict, alu: float, s0: float) -> tuple[dict, float, float]:
    """Op by op: SCALAR_OPS values and `alu` added to the S clock per non-constant op."""
    vals = dict(args)
    free = busy = s0
    for op in ops:
        vals[op.results[0]] = SCALAR_OPS[type(op)](op)(*[vals[v] for v in op.operands])
        if op.operands:
            free += alu
            busy += alu
    return vals, free, busy


def test_scalar_run_matches_op_by_op():
    """One generated closure for the whole run: same values (min/max ties, negatives, every cmpi
    predicate) and S clocks bit-identical to charging op by op (alu and the clock chosen so that
    summing the charges first would round differently)."""
    rng = random.Random(3)
    b, ops = _scalar_block()
    for nunits in (1, 2):
        F = Frame()
        alu = 0.1
        comp = Compiler(None, F, KernelInfo("k", nunits, None, {}, {}, alu, True))
        slots = [comp.slot(a) for a in b.args]
        body = comp.block(b)
        assert len(body) == 1  # one closure for the run
        for _ in range(200):
            x, y = rng.randint(-50, 50) or 2, rng.choice((rng.randint(1, 50), -rng.randint(1, 50), 1, -3))
            if rng.random() < 0.3:  # ties of min / max, equal operands of cmpi
                y = x
            F.core = CoreState(0, NPIPES * nunits)
            s0 = 1e6 + rng.random()
            for u in range(nunits):
                F.core.free[u * NPIPES] = F.core.busy[u * NPIPES] = s0
            F.values[slots[0]], F.values[slots[1]] = x, y
            body[0]()
            want, free, busy = _reference_scalars(ops, dict(zip(b.args, (x, y))), alu, s0)
            for op in ops:
                got = F.values[comp.slot(op.results[0])]
                assert got == want[op.results[0]] and type(got) is type(want[op.results[0]]), (op.name, x, y)
            for u in range(nunits):
                assert F.core.free[u * NPIPES] == free and F.core.busy[u * NPIPES] == busy
            assert free != s0 + sum([alu] * (len(ops) - 1))  # the check above would see a summed charge


def _settle_reference(K, T, B, J, window: float, tie: float) -> set:
    """L2Pass.settle's definition, written plainly: per tile, accesses by (time, block, ordinal);
    a start is a tile's first access or one more than `window` after the previous; its tie group
    is it and the following accesses of the tile within `tie` of it. Groups with the same readers
    (multiset of blocks) take turns in order of (start time, tile key): the k-th such group
    charges the miss to its member k % group size."""
    rows = sorted(zip(K, T, B, J))
    starts = [i for i, r in enumerate(rows) if i == 0 or r[0] != rows[i - 1][0] or r[1] - rows[i - 1][1] > window]
    groups: dict = {}
    for s in starts:
        size = 1
        while s + size < len(rows) and rows[s + size][0] == rows[s][0] and rows[s + size][1] - rows[s][1] <= tie:
            size += 1
        members = rows[s:s + size]
        groups.setdefault(tuple(sorted(r[2] for r in members)), []).append((rows[s][1], rows[s][0], members))
    misses = set()
    for same in groups.values():
        same.sort(key=lambda g: (g[0], g[1]))
        for k, (_, _, members) in enumerate(same):
            r = members[k % len(members)]
            misses.add((r[2], r[3]))
    return misses


def test_settle_matches_definition():
    """The vectorised settle (sort by tile key, turns per reader group from a multiset hash)
    designates the same misses as the definition, for logs in (block, ordinal) order and shuffled, with tied
    groups, residency gaps and tiles whose first access is not their earliest time."""
    from ascendir.interpreter.timing.l2 import TIE

    rng = random.Random(11)
    for case in range(40):
        nb, ntile = rng.randrange(1, 6), rng.randrange(1, 12)
        K, T, B, J = [], [], [], []
        for b in range(nb):
            for j in range(rng.randrange(1, 30)):
                K.append(rng.randrange(ntile) * (1 << 40) + rng.choice((0, 128, 4096)))
                T.append(rng.choice((0.0, 0.5, 1.0, 2.0, 100.0)) + rng.randrange(4) * rng.choice((1.0, 60.0)) + b * rng.choice((0.0, 0.25)))
                B.append(b)
                J.append(j)
        rows = list(zip(K, T, B, J))
        if case % 2:
            rng.shuffle(rows)
        K, T, B, J = (list(x) for x in zip(*rows))
        window = (50.0, 0.5)[case % 4 == 3]  # a window shorter than TIE: tie groups span starts
        p = L2Pass(window)
        half = len(K) // 2  # part as a replayed chunk, part through read()
        p.chunks.append(tuple(np.array(x[:half], dt) for x, dt in zip((K, T, B, J), (np.int64, np.float64, np.int64, np.int64))))
        for x, y in zip(p.log, (K, T, B, J)):
            x.extend(y[half:])
        p.settle()
        assert p.misses == _settle_reference(K, T, B, J, window, TIE), case


def test_settle_matches_definition_random():
    """The same comparison on larger random logs: up to 40 readers of one tile at one time (tie
    groups of many members, so sizing them takes several bisection rounds), times whose
    differences round across TIE (1.1 - 0.1 > 1.0 although 1.1 <= 0.1 + 1.0), residency windows
    shorter than TIE, of one ulp and longer than the log, empty chunks, and logs in (block,
    ordinal) order, with blocks interleaved, or shuffled."""
    from ascendir.interpreter.timing.l2 import TIE

    rng = np.random.default_rng(5)
    bases = np.array([0.0, 0.1, 0.2, 0.3, 0.7, 1.0, 1.1, 1.3, 2.0, 100.0, 1e6, 1e6 + 1.0, 1e6 + 0.1])
    steps = np.array([1.0, 0.5, 60.0, 1e-9, 1 - 2**-50, 1 + 2**-40])
    for case in range(300):
        n, nb = int(rng.integers(0, 400)), int(rng.integers(1, 41))
        K = rng.integers(0, rng.integers(1, 16), n) * (1 << 40) + rng.choice((0, 128), n)
        T = rng.choice(bases, n) + rng.integers(0, 4, n) * rng.choice(steps, n)
        if case % 3 == 0:
            T = np.round(T)  # exact ties
        B = np.sort(rng.integers(0, nb, n))
        J = np.zeros(n, np.int64)
        for b in range(nb):
            J[B == b] = np.arange(np.count_nonzero(B == b))
        order = (np.arange(n), rng.permutation(n), np.lexsort((B, J)))[case % 3]  # in order, shuffled, interleaved
        K, T, B, J = K[order], T[order], B[order], J[order]
        window = (50.0, 0.5, 1.0, 1e-9, 1e7, 2.0, 60.0)[case % 7]
        p = L2Pass(window)
        cut = [0, *sorted(rng.integers(0, n + 1, 3).tolist()), n]
        for lo, hi in zip(cut[:-2], cut[1:-1]):  # replayed chunks (some empty), the rest through read()
            p.chunks.append((K[lo:hi], T[lo:hi], B[lo:hi], J[lo:hi]))
        for x, y in zip(p.log, (K, T, B, J)):
            x.extend(y[cut[-2]:].tolist())
        p.settle()
        assert p.misses == _settle_reference(K.tolist(), T.tolist(), B.tolist(), J.tolist(), window, TIE), case


def test_scalar_run_division_by_zero():
    """Inlined divisions raise the op's own error, as the SCALAR_OPS functions do."""
    import pytest

    from ascendir.errors import AscendirError

    for make, name in ((arith.DivUIOp, "arith.divui"), (arith.RemUIOp, "arith.remui"), (arith.FloorDivSIOp, "arith.floordivsi"),
                       (arith.CeilDivSIOp, "arith.ceildivsi"), (arith.CeilDivUIOp, "arith.ceildivui"), (arith.DivSIOp, "arith.divsi")):
        b = Block(arg_types=[IndexType(), IndexType()])
        b.add_op(make(*b.args))
        F = Frame()
        comp = Compiler(None, F, KernelInfo("k", 1, None, {}, {}, 2.0, True))
        slots = [comp.slot(a) for a in b.args]
        (run,) = comp.block(b)
        F.core = CoreState(0, NPIPES)
        F.values[slots[0]], F.values[slots[1]] = 7, 0
        with pytest.raises(AscendirError, match=f"^{name}: division by zero$"):
            run()


def test_scalar_runs_share_code_but_not_slots():
    """Runs of the same shape on other slots (another kernel, another offset into the frame) get
    one compiled code (scalar_codegen.generated renumbers the slots), each function with its own
    slots back in its constants: the same bytecode as compiling its own source, reading and
    writing its own slots only."""
    from ascendir.interpreter.exec import scalar_codegen

    rng = random.Random(5)
    b, ops = _scalar_block()
    runs = []
    for pad in (0, 37):  # the second compiler's slots start 37 further on
        F = Frame()
        comp = Compiler(None, F, KernelInfo("k", 1, None, {}, {}, 0.5, True))
        for v in Block(arg_types=[IndexType()] * pad).args:
            comp.slot(v)
        slots = [comp.slot(a) for a in b.args]
        n0 = len(scalar_codegen._RUN_CODE)
        (run,) = comp.block(b)
        runs.append((F, comp, slots, run, pad, len(scalar_codegen._RUN_CODE) - n0))
    (_, _, s0, r0, _, _), (_, _, s1, r1, _, new1) = runs
    assert s1 == [s + 37 for s in s0]
    assert new1 == 0  # the second run's shape was compiled already
    assert r0.__code__.co_code == r1.__code__.co_code and r0.__code__.co_consts != r1.__code__.co_consts
    for _ in range(50):
        x, y = rng.randint(-50, 50) or 2, rng.randint(1, 50)
        want, free, _ = _reference_scalars(ops, dict(zip(b.args, (x, y))), 0.5, 0.0)
        for F, comp, slots, run, pad, _ in runs:
            F.core = CoreState(0, NPIPES)
            F.values[:] = [None] * len(F.values)
            F.values[slots[0]], F.values[slots[1]] = x, y
            run()
            for op in ops:
                assert F.values[comp.slot(op.results[0])] == want[op.results[0]], op.name
            assert F.core.free[0] == free
            assert F.values[:pad] == [None] * pad  # the padding slots: neither read nor written
