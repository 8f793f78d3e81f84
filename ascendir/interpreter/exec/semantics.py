"""Numerics of the ascend tile ops on numpy views (the meaning given in ascendir/dialects/ascend.py).

Each entry is a *factory*: `factory(op) -> fn(*operand_values)`, called once when the module is
compiled; `fn` runs on every execution with the operand values (numpy arrays for memrefs, Python
ints/floats for scalars) and writes its destination operand in place. Nothing is returned.

Conventions (the lowering relies on them):
* copy: the leading overlap `min(src, dst)` of each dim is copied; when dst is on chip the rest
  of dst is zero-filled. FixPipe (L0C→GM/L1) may narrow f32→f16/bf16 (round to nearest even) and
  apply `relu`. Layouts (nd2nz/nz2nd) change cost only: arrays stay logical ND.
* mmad: c = (bias row or 0 if init else c) + a.astype(f32) @ b.astype(f32) (int32 for s8),
  single-thread BLAS.
* vector ops broadcast size-1 source dims to dst; f16/bf16 composites compute in f32.
* vreduce_* reduce the last dim (keepdims); vcast is ONNX Cast (cast.py: RNE float→float,
  float→int truncates toward zero, anything→bool is x != 0); vcmp writes bool; vsel is where.
* gather_rows: dest[i] = table[idx[i, 0]], negative indices count from the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
from xdsl.dialects import memref
from xdsl.ir import Operation, OpResult, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, space_of
from ascendir.dialects.cast_mode import cast_mode_of
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.interpreter.exec.cast import cast, is_plain
from ascendir.interpreter.exec.ort_cast import CAST_ELEMENTS, narrow_into, widen_into
from ascendir.interpreter.exec.special import erf
from ascendir.interpreter.exec.walk import _is_a, operands_of
from ascendir.interpreter.exec.wide import storage_dtype

Runtime = Callable[..., None]
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
_SQRT_HALF = math.sqrt(0.5)
_GELU_TANH_C = math.sqrt(2.0 / math.pi)


F16 = np.dtype(np.float16)
_F16_NORMAL = np.float32(2.0**-14)  # fp16's least normal
_F16_SUB_ROUND = np.float32(0.75)  # x + this rounds a tiny float32 x to a multiple of 2^-24 (`narrow_f16`)


def _store(dst: np.ndarray, value) -> None:
    """dst[...] = value (broadcast, cast unsafely). float32 into fp16 of CAST_ELEMENTS elements
    or more, or with many elements below fp16's least normal (`_many_tiny`): by ORT's Cast
    (ort_cast.py `narrow_into`: ~6 us a call, ~0.2 ns an element on the benchmark machine, against
    ~1.65 ns an element for numpy's cast, ~70 ns more for each tiny one), or where it does not
    apply (inf or NaN, broadcasting) through `narrow_f16`, then numpy's cast."""
    if type(value) is np.ndarray:
        dt = value.dtype
        if dt == dst.dtype:  # no cast: item assignment copies as copyto does, with less overhead
            dst[...] = value
            return
        if dt == F32 and dst.dtype == F16 and (value.size >= CAST_ELEMENTS or _many_tiny(value)):
            if narrow_into(dst, value):
                return
            value = narrow_f16(value)
    np.copyto(dst, value, casting="unsafe")


def narrow_f16(x: np.ndarray) -> np.ndarray:
    """float32 array `x` (any shape) with its elements below fp16's least normal (2^-14) in
    magnitude replaced by their fp16 roundings (round to nearest even, the sign kept: float32
    values) when a sample says they are many, else `x` itself: casting the result to fp16 gives
    `x.astype(float16)` bit for bit either way, without numpy's slow path for casts that
    underflow inexactly (it raises the FP underflow flag element by element: ~100 ns per element
    against ~5 on the benchmark machine; a SiLU x up product of the 7B layer has a third of its
    elements there). The sample (up to 16 elements per dimension) only picks the path: rounding
    first costs ~5 ns per element besides the cast, worth it from about one element in 16 (zeros
    apart: they cast fast).

    Exact: for |x| < 2^-14 the fp16 rounding is x rounded to a multiple of 2^-24 (ties to an even
    multiple). x + 0.75 lies in [0.5, 1), where float32's spacing is 2^-24, and 0.75 is an even
    multiple of it, so the float32 sum is 0.75 plus exactly that rounding; subtracting 0.75 is
    exact; copysign gives a result rounded to zero x's sign (fp16 keeps -0). NaN and inf are not
    below 2^-14 and are left as they are."""
    return round_subnormal_f16(x) if _many_tiny(x) else x


def _many_tiny(x: np.ndarray) -> bool:
    """Whether a sample of float32 `x` (up to 16 elements per dimension) says that one element in
    16 or more is below fp16's least normal in magnitude, zeros apart (`narrow_f16`)."""
    if not x.size:
        return False
    cut = _SAMPLES.get(x.shape)
    if cut is None:
        cut = tuple(slice(None, None, -(-n // 16)) for n in x.shape)
        if len(_SAMPLES) < 4096:
            _SAMPLES[x.shape] = cut
    sample = x[cut]
    # its tiny elements but zeros (count_nonzero counts a NaN: it is no zero either)
    tiny = np.count_nonzero(np.abs(sample) < _F16_NORMAL) - (sample.size - np.count_nonzero(sample))
    return 16 * tiny >= sample.size  # (zeros cast fast: the masked scores of an attention tile)


_SAMPLES: dict[tuple, tuple] = {}  # shape -> the slices of `narrow_f16`'s sample (its stores meet few shapes)


def round_subnormal_f16(x: np.ndarray) -> np.ndarray:
    """A float32 copy of `x` (C order) with every element below 2^-14 in magnitude rounded to
    fp16 (`narrow_f16` says why and why exactly)."""
    out = np.array(x, F32, order="C")  # (a copy: x may be the op's source)
    flat = out.reshape(-1)
    tiny = np.flatnonzero(np.abs(flat) < _F16_NORMAL)
    v = flat[tiny]
    r = v + _F16_SUB_ROUND
    r -= _F16_SUB_ROUND
    np.copysign(r, v, out=r)
    flat[tiny] = r
    return out


def _f32(x: np.ndarray) -> np.ndarray:
    """x as a float32 array for computing (no copy when already f32)."""
    return x if x.dtype == F32 else x.astype(F32)


# ------------------------------------------------------------------------------------------
# DMA
# ------------------------------------------------------------------------------------------
def copy(op: ascend.CopyOp) -> Runtime:
    source, dest = op.source, op.dest  # (once: each xDSL operand accessor is a descriptor call)
    if never_read(dest):
        return _nothing
    space = space_of(dest)
    on_chip = space != MemSpace.GM
    relu = op.relu is not None and op.relu.value.data != 0
    transpose = op.transpose is not None and op.transpose.value.data != 0
    # into an fp16 buffer held in fp32 (wide.py) from data that is not fp16 (FixPipe L0C f32 ->
    # L1): rounded to fp16 first, as storing into the fp16 buffer would
    dt = to_numpy_dtype(dest.type.element_type)
    narrow = dt if storage_dtype(space.value, dt) != dt and to_numpy_dtype(source.type.element_type) != dt else None

    def run(src: np.ndarray, dst: np.ndarray) -> None:
        if transpose:  # MTE1 load2d with transpose: dst = src^T (then the overlap rule)
            src = src.T
        if src.shape == dst.shape:
            s, d = src, dst
        else:
            ov = tuple(slice(0, min(a, b)) for a, b in zip(src.shape, dst.shape))
            s, d = src[ov], dst[ov]
            if on_chip:
                dst[...] = 0
        if relu:
            s = np.maximum(s, 0)
        if narrow is not None:
            s = (narrow_f16(s) if narrow == F16 and s.dtype == F32 else s).astype(narrow)
        _store(d, s)

    return run


def never_read(dest: SSAValue) -> bool:
    """Whether no op reads what is written into `dest` (a view of an on-chip buffer): its
    ascend.alloc is used, directly or through ascend.view / memref.subview results, only as the
    destination of ascend.copy ops. Such a buffer is a scratch tile whose copies only warm L2
    (templates/matmul.py `_Prefetch`: the AIVs read the weights' chunks GM -> UB ahead of the
    cube; in the 7B layer of benchmarks/numerics_speed.py 9,704 copies of 64 KiB): its values
    reach no output, so its copies skip the data (their cost and race-check accesses stay)."""
    # (classes tested with walk.py's `_is_a`: isinstance on xDSL's op classes, ABCs, runs Python
    # code at every call, and a compile asks this of every copy; xDSL's fields read, not its
    # accessors and use iterators, each a Python call: walk.py `operands_of`)
    v = dest
    while isinstance(v, OpResult) and _is_a(type(v.op), _VIEWS):
        v = operands_of(v.op)[0]
    if not (isinstance(v, OpResult) and _is_a(type(v.op), ascend.AllocOp)) or space_of(v) == MemSpace.GM:
        return False
    todo = [v]
    while todo:
        use = todo.pop().first_use
        while use is not None:
            o = use._operation
            t = type(o)
            if _is_a(t, _VIEWS) and use._index == 0:
                todo.append(o.results[0])
            elif not (_is_a(t, ascend.CopyOp) and use._index == 1):
                return False
            use = use._next_use
    return True


_VIEWS = (ascend.ViewOp, memref.SubviewOp)


def _nothing(*vals) -> None:
    """A copy into a buffer no op reads (`never_read`)."""


def mmad(op: ascend.MmadOp) -> Runtime:
    init = op.init.value.data != 0

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray, bias: np.ndarray | None = None) -> None:
        if init and bias is None and a.dtype == F32 and b.dtype == F32 and c.dtype == F32 and c.flags.c_contiguous:
            # the product straight into c, without the temporary and its copy: c C-contiguous, as
            # the output `a @ b` allocates, so numpy makes the same BLAS call whatever it does
            # with other layouts (older numpy: a loop of its own for outputs BLAS cannot write);
            # numpy copies an operand c overlaps first
            try:
                np.matmul(a, b, out=c)
                return
            except ValueError:  # shapes that do not fit: the error the copy raises, below
                pass
        if c.dtype.kind in "iu":
            prod = a.astype(np.int64) @ b.astype(np.int64)
        else:
            prod = _f32(a) @ _f32(b)
        if bias is not None:  # [1, N] BT row, the initial value (init = 1)
            prod += bias.astype(prod.dtype)
        if init:
            _store(c, prod)
        else:
            c += prod.astype(c.dtype, copy=False)

    return run


def gather_rows(op: ascend.GatherRowsOp) -> Runtime:
    def run(table: np.ndarray, idx: np.ndarray, dst: np.ndarray) -> None:
        n = min(idx.shape[0], dst.shape[0])
        rows = idx[:n, 0].astype(np.int64)
        r = table.shape[0]
        rows = np.where(rows < 0, rows + r, rows)
        if n and (rows.min() < 0 or rows.max() >= r):
            bad = int(rows[(rows < 0) | (rows >= r)][0])
            raise AscendirError(f"ascend.gather_rows: index {bad} out of range for a table of {r} rows")
        c = min(table.shape[1], dst.shape[1])
        _store(dst[:n, :c], table[rows, :c])

    return run


# ------------------------------------------------------------------------------------------
# vector unit
# ------------------------------------------------------------------------------------------
def _native(dt: np.dtype) -> bool:
    """numpy computes this dtype natively (bf16 goes through f32)."""
    return dt != BF16


def _unary(fn: Callable[[np.ndarray], np.ndarray], composite: bool = False,
           into: Callable[..., object] | None = None) -> Callable[[Operation], Runtime]:
    """`fn` as an op writing its dest. `into(x, out=dst)`: `fn`'s values written into `dst`,
    called for float32 `src` and dest, C-contiguous and of one shape (so every ufunc in it runs
    the loop it runs into a fresh array: numpy's SIMD float32 loops pick their code by strides),
    without the temporary and its copy."""

    def factory(op: Operation) -> Runtime:
        def run(src: np.ndarray, dst: np.ndarray) -> None:
            if (into is not None and src.dtype == F32 and dst.dtype == F32 and src.shape == dst.shape
                    and dst.flags.c_contiguous and src.flags.c_contiguous):
                into(src, out=dst)
                return
            x = src if (_native(src.dtype) and not composite) else _f32(src)
            _store(dst, fn(x))

        return run

    return factory


def _sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # 1 / (1 + exp(-x)) in one temporary (x + 1 is 1 + x bit for bit); `out` may be x
    t = np.negative(x)
    np.exp(t, out=t)
    np.add(t, 1.0, out=t)
    return np.divide(1.0, t, out=t if out is None else out)


def _silu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    # x * sigmoid(x); `out` may be x
    return np.multiply(x, _sigmoid(x), out=out)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + erf(x * _SQRT_HALF))).astype(x.dtype)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(_GELU_TANH_C * (x + 0.044715 * x * x * x)))


def _logical_not(x: np.ndarray) -> np.ndarray:
    # bitwise on integers; on i1 (bool) the same as logical not
    return np.invert(x)


UNARY: dict[str, Callable[[Operation], Runtime]] = {
    "vexp": _unary(np.exp, into=np.exp),
    "vln": _unary(np.log),
    "vsqrt": _unary(np.sqrt),
    "vrsqrt": _unary(lambda x: 1.0 / np.sqrt(x), composite=True),
    "vrec": _unary(lambda x: 1.0 / x, composite=True),
    "vabs": _unary(np.abs),
    "vrelu": _unary(lambda x: np.maximum(x, 0)),
    "vsigmoid": _unary(_sigmoid, composite=True, into=_sigmoid),
    "vtanh": _unary(np.tanh, composite=True),
    "verf": _unary(lambda x: erf(x).astype(np.float32), composite=True),
    "vgelu": _unary(_gelu, composite=True),
    "vgelu_tanh": _unary(_gelu_tanh, composite=True),
    "vsilu": _unary(_silu, composite=True, into=_silu),
    "vsin": _unary(np.sin, composite=True),
    "vcos": _unary(np.cos, composite=True),
    "vfloor": _unary(np.floor),
    "vceil": _unary(np.ceil),
    "vnot": _unary(_logical_not),
    "vcopy": _unary(lambda x: x),
    "vneg": _unary(np.negative),
}


def _remainder(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    # IEEE cases follow C / Python: x % 0, inf % y and NaN give NaN (integers: 0), x % ±inf is x
    # or ±inf by sign; no warnings for them.
    def rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(a, b)

    return rem


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # C-style truncation toward zero (ONNX Div on integers)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], into: np.ufunc | None = None,
            kinds: str = "iuf") -> Callable[[Operation], Runtime]:
    """`fn` as an op writing its dest. `into`: a ufunc whose every element is exact or correctly
    rounded (so where it is computed cannot change it) giving `fn`'s values when both operands
    and the dest have one native dtype of a kind in `kinds`: then it writes the dest directly
    (out=), without the temporary and its copy (numpy broadcasts the operands to the dest as
    the copy would broadcast the result, and copies operands that overlap the dest first)."""

    def factory(op: Operation) -> Runtime:
        def run(a: np.ndarray, b: np.ndarray, dst: np.ndarray) -> None:
            dt = dst.dtype
            if into is not None and a.dtype == dt and b.dtype == dt and dt.kind in kinds and dt != BF16:
                if dt == F16 and into in _ROUNDED and dst.size >= CAST_ELEMENTS and _f16_via_f32(into, a, b, dst):
                    return
                try:
                    into(a, b, out=dst)
                    return
                except ValueError:  # shapes that do not fit: the error the copy raises, below
                    pass
            if not _native(a.dtype):
                a, b = _f32(a), _f32(b)
            _store(dst, fn(a, b))

        return run

    return factory


_ROUNDED = frozenset({np.add, np.subtract, np.multiply, np.divide})  # `_f16_via_f32`'s ufuncs


def _f16_via_f32(fn: np.ufunc, a: np.ndarray, b: np.ndarray, dst: np.ndarray) -> bool:
    """dst[...] = fn(a, b) for fp16 `a`, `b`, `dst` (`a`, `b` broadcasting to `dst`'s shape) by
    widening both to float32 (ort_cast.py `widen_into`), `fn` in float32 and one rounding to fp16
    (`narrow_into`); False (dst untouched, for the caller's fp16 loop, which may read it as an
    operand) where that may not give numpy's fp16 result bit for bit. numpy's fp16 loops convert
    each element (~4.5 ns an element for add on the benchmark machine against ~1 here in all,
    the 7B layer's residual adds: 192 calls of 16,384 or 32,768 elements).

    Exact: numpy's fp16 loops compute each element in float32 and round it to fp16, as here. For a
    correctly rounded `fn` (`_ROUNDED`: add, subtract, multiply, divide) that is fp16's correctly
    rounded result anyway: float32's 24 bits are at least 2 x 11 + 2, so the double rounding is
    innocuous (Figueroa, "When is double rounding innocuous?", 1995). Only NaNs
    may differ (which operand's payload a NaN op NaN keeps: numpy's SIMD float32 loops and its
    fp16 loops pick differently): a result holding inf or NaN makes `narrow_into` decline, and
    the caller computes it in fp16. (Not maximum / minimum: numpy's float32 and fp16 loops return
    different zeros for max(+0, -0).)"""
    if a.ndim != dst.ndim or b.ndim != dst.ndim:
        return False
    wa = np.empty(a.shape, F32)
    widen_into(wa, a)
    wb = np.empty(b.shape, F32)
    widen_into(wb, b)
    r = fn(wa, wb, out=wa if a.shape == dst.shape else None)
    return r.shape == dst.shape and narrow_into(dst, r)


BINARY: dict[str, Callable[[Operation], Runtime]] = {
    "vadd": _binary(np.add, np.add),
    "vsub": _binary(np.subtract, np.subtract),
    "vmul": _binary(np.multiply, np.multiply),
    "vdiv": _binary(lambda a, b: _int_div(a, b) if a.dtype.kind in "iu" else np.divide(a, b), np.divide, "f"),
    "vmax": _binary(np.maximum, np.maximum),
    "vmin": _binary(np.minimum, np.minimum),
    "vpow": _binary(lambda a, b: np.power(_f32(a), _f32(b))),
    "vand": _binary(np.bitwise_and),
    "vor": _binary(np.bitwise_or),
    "vmod": _binary(_remainder(np.mod)),  # sign of the divisor (ONNX Mod fmod=0, Python %)
    "vfmod": _binary(_remainder(np.fmod)),  # sign of the dividend (C fmod, ONNX Mod fmod=1)
}


def _scalar(fn: Callable[[np.ndarray, float], np.ndarray], into: np.ufunc | None = None,
            f32: bool = False) -> Callable[[Operation], Runtime]:
    """`fn(x, scalar)` as an op writing its dest. `into`: a correctly rounded ufunc giving
    `fn`'s values on float32 operands, called as `into(src, scalar)` (the scalar as float32
    when `f32`) writing a float32 dest directly (out=, as `_binary`)."""

    def factory(op: Operation) -> Runtime:
        s = op.scalar.value.data
        c = np.float32(s) if f32 else s

        def run(src: np.ndarray, dst: np.ndarray) -> None:
            if into is not None and src.dtype == F32 and dst.dtype == F32:
                try:
                    into(src, c, out=dst)
                    return
                except ValueError:  # shapes that do not fit: the error the copy raises, below
                    pass
            x = _f32(src) if (not _native(src.dtype) or src.dtype.kind == "f") else src
            _store(dst, fn(x, s))

        return run

    return factory


SCALAR: dict[str, Callable[[Operation], Runtime]] = {
    "vadds": _scalar(lambda x, s: x + np.float32(s) if x.dtype.kind == "f" else x + s, np.add, f32=True),
    "vmuls": _scalar(lambda x, s: x * np.float32(s) if x.dtype.kind == "f" else x * s, np.multiply, f32=True),
    "vmaxs": _scalar(lambda x, s: np.maximum(x, s), np.maximum),
    "vmins": _scalar(lambda x, s: np.minimum(x, s), np.minimum),
    "vpows": _scalar(lambda x, s: np.power(_f32(x), np.float32(s))),
}


def _reduce(fn: Callable[..., np.ndarray], extreme: np.ufunc | None = None) -> Callable[[Operation], Runtime]:
    """`fn` over the last dim (keepdims). `extreme`: np.maximum or np.minimum, whose reduction of
    a short float32 last dim `_short_extreme` computes."""

    def factory(op: Operation) -> Runtime:
        def run(src: np.ndarray, dst: np.ndarray) -> None:
            x = _f32(src) if src.dtype.kind == "f" else src
            if (extreme is not None and x.dtype == F32 and x.ndim > 1 and 1 < x.shape[-1] <= _SHORT and x.size
                    and x.flags.c_contiguous and _short_extreme(extreme, x, dst)):
                return
            _store(dst, fn(x, axis=-1, keepdims=True))

        return run

    return factory


_SHORT = 32  # last dims `_short_extreme` takes (its transposed copy costs less than numpy's per-row calls)


def _short_extreme(fn: np.ufunc, x: np.ndarray, dst: np.ndarray) -> bool:
    """dst[...] = fn.reduce(x, axis=-1, keepdims=True) for a C-contiguous float32 `x` of a short
    last dim (fn np.maximum or np.minimum), reduced along the first axis of its transposed copy
    (elementwise passes over rows instead of numpy's inner-loop call per row of `x`: ~60 ns each,
    the 7B layer's FlashAttention row maxima of 12 elements: 32 us against 4 for 512 rows);
    False (nothing written) when that may not give numpy's values bit for bit.

    The largest (smallest) of a row's elements is one value whatever the order the elements are
    compared in, but for the sign of a zero (max(-0, +0)) and which NaN of several: when a
    result is zero or NaN, False (as `_blocks_of_8`)."""
    n = x.shape[-1]
    t = np.ascontiguousarray(x.reshape(-1, n).T)
    out = fn.reduce(t, axis=0)
    if not np.minimum.reduce(np.abs(out)) > 0:  # a zero or a NaN
        return False
    _store(dst, out.reshape(x.shape[:-1] + (1,)))
    return True


def _block_reduce(fn: np.ufunc) -> Callable[[Operation], Runtime]:
    """Each 32-B data block of the last dim to one element by `fn`'s reduction (the verifier
    checks the shapes); float32 blocks of 8 by `_blocks_of_8`."""

    def factory(op: Operation) -> Runtime:
        def run(src: np.ndarray, dst: np.ndarray) -> None:
            x = _f32(src) if src.dtype.kind == "f" else src
            x = x.reshape(*x.shape[:-1], dst.shape[-1], -1)
            if x.dtype == F32 and x.shape[-1] == 8 and x.flags.c_contiguous and _blocks_of_8(fn, x, dst):
                return
            _store(dst, fn.reduce(x, axis=-1))

        return run

    return factory


_ZERO = np.float32(0)


def _blocks_of_8(fn: np.ufunc, x: np.ndarray, dst: np.ndarray) -> bool:
    """dst[...] = fn.reduce(x, axis=-1) for a C-contiguous float32 `x` of last dim 8 (fn np.add
    or np.maximum), by elementwise passes over all blocks at once instead of numpy's reduction,
    which costs its inner loop's call per block (~60 ns: 8 ns per element); False (nothing
    written) when that cannot give numpy's values bit for bit.

    Sum: numpy's float reduction adds 8 elements pairwise, ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)),
    to its identity 0 (loops_utils.h.src `pairwise_sum`; a sum of -0s is +0): the same
    additions here. Max: the largest element whatever the order, but for the sign of a zero
    (max(-0, +0)) and which NaN of several: when a block's max is zero or NaN, False."""
    # flat passes over every other element (1-D strided views numpy loops over without buffering:
    # a view of the transposed blocks costs a buffered copy per pass, twice the time): per block
    # x0+x1, x2+x3, x4+x5, x6+x7, then (x0+x1)+(x2+x3), (x4+x5)+(x6+x7), then their sum
    f = x.reshape(-1)
    a = fn(f[0::2], f[1::2])
    a = fn(a[0::2], a[1::2])
    direct = fn is np.add and dst.dtype == F32 and dst.shape == x.shape[:-1] and dst.flags.c_contiguous
    out = fn(a[0::2], a[1::2], out=dst.reshape(-1) if direct else None)
    if fn is np.add:
        np.add(out, _ZERO, out=out)
    elif not np.minimum.reduce(np.abs(out)) > 0:  # a zero or a NaN
        return False
    if not direct:
        _store(dst, out.reshape(x.shape[:-1]))
    return True


REDUCE: dict[str, Callable[[Operation], Runtime]] = {
    # (ufunc reductions: what np.sum / np.max / np.min / np.prod call, without their wrapper)
    "vreduce_sum": _reduce(np.add.reduce),
    "vreduce_max": _reduce(np.maximum.reduce, np.maximum),
    "vreduce_min": _reduce(np.minimum.reduce, np.minimum),
    "vreduce_prod": _reduce(np.multiply.reduce),
    "vblock_reduce_max": _block_reduce(np.maximum),
    "vblock_reduce_sum": _block_reduce(np.add),
}


def vcast(op: ascend.VcastOp) -> Runtime:
    saturate, round_mode = cast_mode_of(op)
    # f32 ↔ f16/bf16 tiles (the common case) convert in place, without a temporary
    plain = is_plain(to_numpy_dtype(op.source.type.element_type), to_numpy_dtype(op.dest.type.element_type))

    def run(src: np.ndarray, dst: np.ndarray) -> None:
        _store(dst, src if plain else cast(src, dst.dtype, saturate, round_mode))

    return run


_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}


def vcmp(op: ascend.VcmpOp) -> Runtime:
    fn = _CMP[op.cmp.data]

    def run(a: np.ndarray, b: np.ndarray, dst: np.ndarray) -> None:
        if dst.dtype == np.bool_ and a.dtype == b.dtype and _native(a.dtype):
            try:  # (into the dest directly, as `_binary`)
                fn(a, b, out=dst)
                return
            except ValueError:  # shapes that do not fit: the error the copy raises, below
                pass
        if not _native(a.dtype):
            a, b = _f32(a), _f32(b)
        _store(dst, fn(a, b))

    return run


def vsel(op: ascend.VselOp) -> Runtime:
    def run(cond: np.ndarray, a: np.ndarray, b: np.ndarray, dst: np.ndarray) -> None:
        if b is dst and cond.dtype == np.bool_ and a.dtype == dst.dtype != np.bool_:
            # dest = where(cond, a, dest): `a` copied where `cond` holds (a bool mask cannot
            # share the memory of a dest of another type; copyto copies an `a` that does first)
            try:
                np.copyto(dst, a, where=cond)
                return
            except ValueError:  # shapes that do not fit: the error the copy raises, below
                pass
        _store(dst, np.where(cond.astype(bool, copy=False), a, b))

    return run


def vdup(op: ascend.VdupOp) -> Runtime:
    s = op.scalar.value.data

    def run(dst: np.ndarray) -> None:
        dst[...] = s

    return run


def vtranspose(op: ascend.VtransposeOp) -> Runtime:
    perm = tuple(p.value.data for p in op.perm.data)

    def run(src: np.ndarray, dst: np.ndarray) -> None:
        _store(dst, np.transpose(src, perm))

    return run


def varange(op: ascend.VarangeOp) -> Runtime:
    def run(start: int, dst: np.ndarray) -> None:
        _store(dst, start + np.arange(dst.shape[-1]))

    return run


# ------------------------------------------------------------------------------------------
# batched forms (the batched data walk, exec/batch_run.py): operands with one leading axis more,
# slice k of each being block k's operand; slice k of the result must be the op's result on
# block k's operands, bit for bit
# ------------------------------------------------------------------------------------------
def _copy_batched(op: ascend.CopyOp) -> Runtime:
    """copy on batched operands: its transpose (`src.T`, which would reverse the batch axis too)
    given a source whose `.T` swaps the last two axes only; the overlap rule zips the batch axes,
    of one size."""
    run = copy(op)
    if op.transpose is None or op.transpose.value.data == 0 or run is _nothing:
        return run

    def batched(src: np.ndarray, dst: np.ndarray) -> None:
        if src.ndim != 3:  # (a transposing copy moves 2-D tiles: the verifier's rule)
            raise AscendirError(f"ascend.copy with transpose: a {src.ndim - 1}-D source")
        run(np.swapaxes(src, 1, 2).T, dst)

    return batched


def _vtranspose_batched(op: ascend.VtransposeOp) -> Runtime:
    """vtranspose on batched operands: its permutation applied to the axes after the batch axis."""
    perm = (0,) + tuple(p.value.data + 1 for p in op.perm.data)

    def run(src: np.ndarray, dst: np.ndarray) -> None:
        _store(dst, np.transpose(src, perm))

    return run


class Unbatched(Exception):
    """Raised by a batched form before it writes anything: its operands must run block by block
    (exec/batch_run.py)."""


def _holds_nan(x) -> bool:
    """Whether `x` is a float array holding a NaN (max propagates NaNs: one pass, no temporary;
    the ufunc's reduction without np.max's wrapper, ~2 us a call on the 7B layer's batched
    FlashAttention row statistics)."""
    if not (isinstance(x, np.ndarray) and (x.dtype.kind == "f" or x.dtype == BF16) and x.size):
        return False
    m = _MAX(x, axis=None)
    return bool(m != m)


_MAX = np.maximum.reduce


def _nan_guarded(factory: Callable[[Operation], Runtime]) -> Callable[[Operation], Runtime]:
    """The batched form of a two-operand elementwise op (`BINARY`) that declines (`Unbatched`) where
    both operands hold NaNs. Which operand's payload a NaN op NaN keeps depends on the loop numpy
    runs the element in: its float32 add and multiply keep one operand's in their SIMD body and the
    other's in their scalar tail, and a block's tail elements lie in the body of a batched call
    (measured, numpy 2.4.6 on AVX-512). With at most one NaN operand an element's result is that
    NaN in every loop."""

    def batched_factory(op: Operation) -> Runtime:
        run = factory(op)

        def batched(a, b, dst: np.ndarray) -> None:
            # (the smaller operand first: where it holds no NaN, the other is not searched)
            x, y = (b, a) if getattr(b, "size", 0) < getattr(a, "size", 0) else (a, b)
            if _holds_nan(x) and _holds_nan(y):
                raise Unbatched
            run(a, b, dst)

        return batched

    return batched_factory


def _scalar_guarded(factory: Callable[[Operation], Runtime]) -> Callable[[Operation], Runtime | None]:
    """The batched form of an op with a scalar attribute (`SCALAR`): none (block by block) when the
    scalar is a NaN, which may meet NaN elements (`_nan_guarded`)."""

    def batched_factory(op: Operation) -> Runtime | None:
        s = op.scalar.value.data
        return None if isinstance(s, float) and s != s else factory(op)

    return batched_factory


# ops whose numpy loops are not all exact or correctly rounded (transcendentals, reductions): numpy
# may pick another loop for another memory layout, so they run batched only where each operand
# keeps its contiguity (exec/batch_run.py)
_LAYOUT_SENSITIVE = frozenset(UNARY) | frozenset(REDUCE) | {"vpow", "vpows"}


def batched_semantics() -> dict[type, tuple[Callable[[Operation], Runtime], bool]]:
    """op class -> (factory of its batched form, whether that form runs only where every operand
    keeps the contiguity it has per block) for the ascend tile ops that have one. Every entry's
    operands are its per-block operands with one leading batch axis (slice k: block k's); the
    elementwise ops, reductions over the last axis, casts, copies, compares, selects, dups,
    aranges and mmad (numpy's stacked matmul: the per-block BLAS call per slice) broadcast over
    it as written, the two-operand ones declining where NaNs meet (`_nan_guarded`, `_scalar_guarded`).
    gather_rows has none (per-block indices, data-dependent errors): the batched walk runs it
    block by block."""
    table: dict[type, tuple[Callable[[Operation], Runtime], bool]] = {}
    for t, factory in builtin_semantics().items():
        if t is ascend.GatherRowsOp:
            continue
        name = t.name.removeprefix("ascend.")
        if name in BINARY:
            factory = _nan_guarded(factory)
        elif name in SCALAR:
            factory = _scalar_guarded(factory)
        table[t] = ({ascend.CopyOp: _copy_batched, ascend.VtransposeOp: _vtranspose_batched}.get(t, factory),
                    name in _LAYOUT_SENSITIVE)
    return table


def builtin_semantics() -> dict[type, Callable[[Operation], Runtime]]:
    """op class -> semantics factory for every ascend tile op."""
    table: dict[type, Callable[[Operation], Runtime]] = {
        ascend.CopyOp: copy,
        ascend.MmadOp: mmad,
        ascend.GatherRowsOp: gather_rows,
        ascend.VcastOp: vcast,
        ascend.VcmpOp: vcmp,
        ascend.VselOp: vsel,
        ascend.VdupOp: vdup,
        ascend.VtransposeOp: vtranspose,
        ascend.VarangeOp: varange,
    }
    for group in (UNARY, BINARY, SCALAR, REDUCE):
        for name, factory in group.items():
            table[ascend.vector_op(name)] = factory
    return table
