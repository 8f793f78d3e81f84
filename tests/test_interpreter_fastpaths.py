"""Rewritten hot paths of the timing-only interpreter against their plain definitions:
steady.SteadyLoop._periods_checked (scan kept per period across calls) and
l2.L2Pass._designated (sorted lists and bisect)."""

from __future__ import annotations

import random

from ascendir.interpreter.l2 import L2Pass
from ascendir.interpreter.steady import SteadyLoop


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
        sl = SteadyLoop(None, n, tops, None, 7)
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
