"""Intervals of the index values insert-sync's symbolic execution (analysis.py) cannot compute
exactly because they depend on data: `x % 24` is in [0, 23] whatever x is, so a loop
`scf.for %j = (x % 24) to 8 step 48` runs at most once and `%j + 24 < 8` is false in every
execution. The analysis then runs only the trip counts and branch outcomes that can happen
(the MoE grouped_matmul N-tile loop: one tile per core at most, its second-tile `scf.if` never
taken).

An interval is (lo, hi), inclusive, with -inf / inf for an unbounded side; integers as the
analysis evaluates them (symbolic.ARITH: Python integers, `%` by a positive divisor in
[0, divisor)). Every rule gives a superset of the values the op can produce, so a decision
drawn from it (a comparison, a trip count) holds in every execution."""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.ir import Operation

INF = math.inf
UNBOUNDED = (-INF, INF)


def _mul(a: float, b: float) -> float:
    return 0 if a == 0 or b == 0 else a * b  # 0 * inf: the bound of a product by zero is zero


def _floordiv(a: float, d: int) -> float:
    return a if math.isinf(a) else a // d


def _rem(op: Operation, a: tuple, d: int) -> tuple:
    if 0 <= a[0] and a[1] < d:
        return a
    if isinstance(op, arith.RemSIOp):  # math.fmod: the sign of the dividend
        return (0 if a[0] >= 0 else -(d - 1), d - 1 if a[1] > 0 else 0)
    return (0, d - 1)  # Python % by a positive divisor (symbolic.ARITH)


def interval(op: Operation, args: list[tuple], consts: list) -> tuple:
    """The interval of `op`'s first result from its operands' intervals `args` (`consts`: the
    operands' exact values, None when not known). UNBOUNDED for ops without a rule."""
    if isinstance(op, arith.AddiOp):
        return (args[0][0] + args[1][0], args[0][1] + args[1][1])
    if isinstance(op, arith.SubiOp):
        return (args[0][0] - args[1][1], args[0][1] - args[1][0])
    if isinstance(op, arith.MuliOp):
        p = [_mul(x, y) for x in args[0] for y in args[1]]
        return (min(p), max(p))
    if isinstance(op, (arith.MinSIOp, arith.MinUIOp)):
        return (min(args[0][0], args[1][0]), min(args[0][1], args[1][1]))
    if isinstance(op, (arith.MaxSIOp, arith.MaxUIOp)):
        return (max(args[0][0], args[1][0]), max(args[0][1], args[1][1]))
    if isinstance(op, arith.IndexCastOp):
        return args[0]
    if isinstance(op, arith.SelectOp):
        if consts[0] is not None:
            return args[1] if consts[0] else args[2]
        return (min(args[1][0], args[2][0]), max(args[1][1], args[2][1]))
    d = consts[1] if len(consts) > 1 else None
    if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
        return UNBOUNDED
    if isinstance(op, (arith.RemUIOp, arith.RemSIOp)):
        return _rem(op, args[0], d)
    if isinstance(op, (arith.DivUIOp, arith.FloorDivSIOp)):
        return (_floordiv(args[0][0], d), _floordiv(args[0][1], d))
    return UNBOUNDED


def decide(predicate: int, a: tuple, b: tuple) -> bool | None:
    """`arith.cmpi` (predicate as symbolic.CMP numbers it) of a value in `a` with one in `b`:
    True or False when every pair of values gives it, else None. An unsigned predicate is decided
    only on values that cannot be negative (their bits read as a large unsigned number)."""
    if predicate >= 6 and (a[0] < 0 or b[0] < 0):
        return None
    if predicate in (2, 6):  # <
        return True if a[1] < b[0] else False if a[0] >= b[1] else None
    if predicate in (3, 7):  # <=
        return True if a[1] <= b[0] else False if a[0] > b[1] else None
    if predicate in (4, 8):  # >
        return decide(2, b, a)
    if predicate in (5, 9):  # >=
        return decide(3, b, a)
    disjoint = a[1] < b[0] or b[1] < a[0]
    if predicate == 0:  # ==
        return False if disjoint else None
    if predicate == 1:  # !=
        return True if disjoint else None
    return None


def trip_counts(lb: tuple, ub: tuple, step: int) -> tuple[float, float]:
    """(fewest, most) iterations of `scf.for` from a value in `lb` to one in `ub` by a known
    positive `step`; the most is inf when unbounded."""
    most = ub[1] - lb[0]
    least = ub[0] - lb[1]
    return (max(0, -(-least // step)) if not math.isinf(least) else 0, max(0, -(-most // step)) if not math.isinf(most) else INF)
