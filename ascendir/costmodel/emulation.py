"""How many vector passes an `ascend` vector op takes when its element types are not native to
the vector unit: the factor ops.py multiplies a vector op's cycles by (1 = native).

The interpreter computes every dtype exactly with numpy/ml_dtypes; this module keeps the cycle
count honest about what the hardware would run instead. Facts come from the 910B intrinsic
dtype map [S1] (CANN 8.1.RC1 `Ascend910B2.ini`, AICoreintrinsicDtypeMap; sources in
/work/shared/reference/ascend-hardware.md); the same map is assumed for 910A and 310P (INF:
no 910A ini was found). Pass counts of emulations are inferred (INF), stated next to each.

* ALU ops: vadd/vsub/vmul/vmax/vmin (and their scalar forms) exist for int16/int32/f16/f32
  only [S1]. Unsigned 16/32-bit add, sub, mul wrap exactly like the signed ones (1 pass); an
  order-dependent op (compare, max/min, div, mod) on them first flips the sign bit of each
  operand (INF: + 2 passes). vdiv exists for f16/f32 only [S1]: an integer division converts
  both operands to f32, divides, converts back and corrects the quotient by a multiply-subtract
  (INF: 6 passes; vmod the same). 64-bit integers have no vector ALU at all [S1]: each op runs
  on the low and high 32-bit words with a carry/borrow compare and select (INF: × 4). Nor is
  there any f64 vector op [S1]: f64 arithmetic is software float on integer ops (INF: 8 passes,
  as the software conversions below). Not modelled yet, costed as native: 8-bit integer
  arithmetic and integer compares (vcmp lists f16/f32 only [S1]).
* vcast: the vconv forms of [S1] form a graph over f32, f16, bf16, s64, s32, s16, s8, u8; a
  conversion costs one pass per hop of the shortest chain. Types outside it enter at a proxy
  with extra passes (INF): bool as u8 (0 extra), u16/u32/u64 as s16/s32/s64 (1: zero-extension
  fix-up), 4/2-bit integers as s8 (2: unpack by shift and mask), the float 8 / float 4 types and
  f64 as f16 (8: field extraction, rebias, clamp, rounding, assembly and the NaN/inf select as
  integer vector ops; there is no vconv form for them on 910B).
"""

from __future__ import annotations

import collections
from functools import cache

import numpy as np
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation

from ascendir.dialects import ascend
from ascendir.dtypes import bits, is_float, is_integer, to_numpy_dtype

# [S1] Intrinsic_vconv of Ascend910B2.ini, rounding-mode suffixes dropped ("deq" is a
# dequantization with a scale, not a plain conversion).
_VCONV = (
    "f32>f32 f32>f16 f32>s64 f32>s32 f32>s16 f16>f32 f16>s32 f16>s16 f16>s8 f16>u8 u8>f16 s8>f16 "
    "s16>f16 s16>f32 s16>s8 s16>u8 s32>f32 s32>f16 s32>s64 s32>s16 s64>s32 s64>f32 f32>bf16 bf16>f32 "
    "bf16>s32"
)
_EDGES: dict[str, set[str]] = collections.defaultdict(set)
for _pair in _VCONV.split():
    _a, _b = _pair.split(">")
    _EDGES[_a].add(_b)

SOFTWARE_FLOAT_PASSES = 8  # INF, see the module doc
INT_DIVISION = frozenset({"vdiv", "vmod"})
INT_DIVISION_PASSES = 6  # INF, see the module doc
ORDER_OPS = frozenset({"vcmp", "vmax", "vmin", "vmaxs", "vmins", "vdiv", "vmod", "vreduce_max", "vreduce_min"})
# ops that move bits without arithmetic: any element type at its byte width
BIT_MOVES = frozenset({"vcopy", "vdup", "vsel", "vtranspose", "vbrcb"})


def _key(dtype: np.dtype) -> str:
    """Short name as [S1] spells it: f32, bf16, s32, u8, ..."""
    if dtype == np.bool_:
        return "bool"
    if dtype.name == "bfloat16":
        return "bf16"
    if dtype.kind == "f":
        return f"f{bits(dtype)}"
    if is_integer(dtype):
        signed = dtype.kind == "i" or (dtype.kind == "V" and not dtype.name.startswith("uint"))
        return f"{'s' if signed else 'u'}{bits(dtype)}"
    return dtype.name  # float 8 / float 4


def _proxy(key: str) -> tuple[str, int]:
    """(type in the vconv graph, extra passes to reach it) for an element type key."""
    if key in _EDGES or any(key in targets for targets in _EDGES.values()):
        return key, 0
    if key == "bool":
        return "u8", 0
    if key in ("u16", "u32", "u64"):
        return "s" + key[1:], 1
    if key in ("s4", "u4", "s2", "u2"):
        return "s8", 2
    return "f16", SOFTWARE_FLOAT_PASSES


@cache
def _hops(src: str, dst: str) -> int:
    """Fewest vconv forms chaining `src` to `dst` (the graph is strongly connected)."""
    seen, frontier = {src: 0}, collections.deque([src])
    while frontier:
        t = frontier.popleft()
        if t == dst:
            return seen[t]
        for n in _EDGES.get(t, ()):
            if n not in seen:
                seen[n] = seen[t] + 1
                frontier.append(n)
    raise AssertionError(f"no vconv chain {src} -> {dst}")


def cast_passes(src: np.dtype, dst: np.dtype) -> int:
    """Vector passes of a conversion `src` → `dst` (1 for a single vconv form of [S1])."""
    a, b = _key(np.dtype(src)), _key(np.dtype(dst))
    if a == b:
        return 1
    (pa, ea), (pb, eb) = _proxy(a), _proxy(b)
    return max(1, _hops(pa, pb) + ea + eb)


def vector_passes(op: Operation) -> int:
    """Vector passes of an `ascend` vector op given its memref operands' element types."""
    dtypes = [to_numpy_dtype(v.type.element_type) for v in op.operands if isinstance(v.type, MemRefType)]
    if isinstance(op, ascend.VcastOp):
        return cast_passes(dtypes[0], dtypes[1])
    return alu_passes(op.name.split(".", 1)[1], dtypes)


def alu_passes(name: str, dtypes: list[np.dtype]) -> int:
    """Vector passes of ALU op `name` (without `ascend.`) on operands of `dtypes`."""
    if name in BIT_MOVES:
        return 1
    widest = max(dtypes, key=bits)
    if is_float(widest):
        return SOFTWARE_FLOAT_PASSES if bits(widest) == 64 else 1
    if not is_integer(widest):
        return 1  # bool logic: bitwise on 16-bit lanes [S1 vand/vor/vnot]
    unsigned = any(is_integer(d) and _key(np.dtype(d)).startswith("u") and bits(d) in (16, 32) for d in dtypes)
    if name in INT_DIVISION:
        passes = INT_DIVISION_PASSES
    else:
        passes = 3 if unsigned and name in ORDER_OPS else 1
    return passes * (4 if bits(widest) == 64 else 1)
