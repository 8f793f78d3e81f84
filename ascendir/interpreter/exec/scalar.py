"""Scalar `arith` ops on Python values (index/integers as int, i1 as bool, floats as float).

Each entry maps an op class to a factory `factory(op) -> fn(*operand_values) -> result value`.
Integer overflow wrap-around of fixed-width types is not modelled (index math does not overflow).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType
from xdsl.ir import Operation

from ascendir.errors import AscendirError

ScalarFactory = Callable[[Operation], Callable[..., object]]


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def division_by_zero(name: str):
    """Raise the error of scalar op `name` dividing by zero (here and in compiler's inlined runs)."""
    raise AscendirError(f"{name}: division by zero")


def _div_check(fn: Callable[[int, int], int], name: str) -> Callable[[int, int], int]:
    def run(a: int, b: int) -> int:
        if b == 0:
            division_by_zero(name)
        return fn(a, b)

    return run


def _const(op: arith.ConstantOp) -> Callable[[], object]:
    v = op.value
    if isinstance(v, IntegerAttr):
        val: object = v.value.data
        if isinstance(v.type, IntegerType) and v.type.width.data == 1:
            val = bool(val)
    elif isinstance(v, FloatAttr):
        val = float(v.value.data)
    else:
        raise AscendirError(f"arith.constant: unsupported value {v} (only scalar constants run in kernels)")
    return lambda: val


def _bin(fn: Callable[[object, object], object]) -> ScalarFactory:
    return lambda op: fn


_CMPI = [
    lambda a, b: a == b, lambda a, b: a != b, lambda a, b: a < b, lambda a, b: a <= b,
    lambda a, b: a > b, lambda a, b: a >= b, lambda a, b: a < b, lambda a, b: a <= b,
    lambda a, b: a > b, lambda a, b: a >= b,
]  # eq ne slt sle sgt sge ult ule ugt uge (operands are non-negative when unsigned)


def _nan(a: float, b: float) -> bool:
    return math.isnan(a) or math.isnan(b)


_CMPF = [
    lambda a, b: False,
    lambda a, b: not _nan(a, b) and a == b, lambda a, b: not _nan(a, b) and a > b,
    lambda a, b: not _nan(a, b) and a >= b, lambda a, b: not _nan(a, b) and a < b,
    lambda a, b: not _nan(a, b) and a <= b, lambda a, b: not _nan(a, b) and a != b,
    lambda a, b: not _nan(a, b),
    lambda a, b: _nan(a, b) or a == b, lambda a, b: _nan(a, b) or a > b,
    lambda a, b: _nan(a, b) or a >= b, lambda a, b: _nan(a, b) or a < b,
    lambda a, b: _nan(a, b) or a <= b, lambda a, b: _nan(a, b) or a != b,
    lambda a, b: _nan(a, b), lambda a, b: True,
]


def _cmpi(op: arith.CmpiOp) -> Callable[[int, int], bool]:
    return _CMPI[op.predicate.value.data]


def _cmpf(op: arith.CmpfOp) -> Callable[[float, float], bool]:
    return _CMPF[op.predicate.value.data]


def _cast_int(op: Operation) -> Callable[[object], object]:
    t = op.results[0].type
    if isinstance(t, IntegerType) and t.width.data == 1:
        return lambda x: bool(x)
    if isinstance(t, (IntegerType, IndexType)):
        return lambda x: int(x)
    return lambda x: float(x)


SCALAR_OPS: dict[type, ScalarFactory] = {
    arith.ConstantOp: _const,
    arith.AddiOp: _bin(lambda a, b: a + b),
    arith.SubiOp: _bin(lambda a, b: a - b),
    arith.MuliOp: _bin(lambda a, b: a * b),
    arith.DivUIOp: _bin(_div_check(lambda a, b: a // b, "arith.divui")),
    arith.DivSIOp: _bin(_div_check(_trunc_div, "arith.divsi")),
    arith.RemUIOp: _bin(_div_check(lambda a, b: a % b, "arith.remui")),
    arith.RemSIOp: _bin(_div_check(lambda a, b: a - b * _trunc_div(a, b), "arith.remsi")),
    arith.FloorDivSIOp: _bin(_div_check(lambda a, b: a // b, "arith.floordivsi")),
    arith.CeilDivSIOp: _bin(_div_check(lambda a, b: -((-a) // b), "arith.ceildivsi")),
    arith.CeilDivUIOp: _bin(_div_check(lambda a, b: -((-a) // b), "arith.ceildivui")),
    arith.MinSIOp: _bin(min),
    arith.MaxSIOp: _bin(max),
    arith.MinUIOp: _bin(min),
    arith.MaxUIOp: _bin(max),
    arith.AndIOp: _bin(lambda a, b: a & b),
    arith.OrIOp: _bin(lambda a, b: a | b),
    arith.XOrIOp: _bin(lambda a, b: a ^ b),
    arith.ShLIOp: _bin(lambda a, b: a << b),
    arith.ShRSIOp: _bin(lambda a, b: a >> b),
    arith.ShRUIOp: _bin(lambda a, b: a >> b),
    arith.CmpiOp: _cmpi,
    arith.CmpfOp: _cmpf,
    arith.SelectOp: lambda op: (lambda c, a, b: a if c else b),
    arith.IndexCastOp: _cast_int,
    arith.ExtSIOp: _cast_int,
    arith.ExtUIOp: _cast_int,
    arith.TruncIOp: _cast_int,
    arith.SIToFPOp: _cast_int,
    arith.UIToFPOp: _cast_int,
    arith.FPToSIOp: _cast_int,
    arith.FPToUIOp: _cast_int,
    arith.ExtFOp: lambda op: float,
    arith.TruncFOp: lambda op: float,
    arith.AddfOp: _bin(lambda a, b: a + b),
    arith.SubfOp: _bin(lambda a, b: a - b),
    arith.MulfOp: _bin(lambda a, b: a * b),
    arith.DivfOp: _bin(lambda a, b: a / b if b else math.copysign(math.inf, a) if a else math.nan),
    arith.NegfOp: lambda op: (lambda a: -a),
    arith.MaximumfOp: _bin(max),
    arith.MinimumfOp: _bin(min),
    arith.MaxnumfOp: _bin(max),
    arith.MinnumfOp: _bin(min),
}
