"""fp16 cube operands held in fp32 (numerics runs): the L1 / L0A / L0B buffers of fp16 data are
stored as float32 arrays, and GM fp16 data read into L1 comes from an fp32 copy of its GM buffer
converted at most once per launch (`GmShadows`), so mmad multiplies fp32 arrays as they are instead of
converting both operands on every call (that conversion cost as much as the products: 1.4 ns per
element against 89 GFLOP/s single-thread sgemm on a 128x64x128 tile).

Exact: every fp16 value is a float32 value, and what reaches these buffers is fp16 data (GM,
UB or L1 fp16) or is rounded to fp16 first (FixPipe L0C f32 -> L1 f16, a scalar store), so the
arrays hold the values the fp16 buffers would; mmad computed `a.astype(f32) @ b.astype(f32)`
before, now the same product of the same float32 values. Costs see the declared dtype
(`declared`: an op's cost is a function of its operands' shapes and dtypes), so cycles do not
change. Only float16 widens (bf16 and int8 operands stay as they are).
"""

from __future__ import annotations

import threading

import numpy as np

from ascendir.interpreter.exec.pointer import data_pointer

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
WIDE_SPACES = frozenset({"l1", "l0a", "l0b"})  # the cube's operand buffers (not L0C, BT, UB)


def storage_dtype(space: str, dtype: np.dtype) -> np.dtype:
    """The dtype numerics runs store a `space` buffer of `dtype` in: float32 for fp16 cube
    operand buffers, else `dtype`."""
    return F32 if dtype == F16 and space in WIDE_SPACES else dtype


def declared(vals: tuple, dtypes: tuple) -> tuple:
    """`vals` with each widened array replaced by a zero view of its declared dtype (`dtypes`:
    per operand, None for scalars): what the operands' cost is computed from."""
    out = []
    for v, dt in zip(vals, dtypes):
        if dt is not None and v.dtype != dt:
            v = np.broadcast_to(np.zeros((), dt), v.shape)
        out.append(v)
    return tuple(out)


CHUNK = 4096  # elements of a GM buffer converted together (`GmShadows`)


class GmShadows:
    """float32 copies of GM fp16 buffers for the GM -> L1 copies of one launch.

    A buffer's copy is allocated at its first read and converted by chunks of CHUNK elements (of
    the buffer in memory order) as reads reach them: each element is converted at most once per
    launch however often it is read (a GEMM's A and B re-read per output tile), and a read
    converts the chunks its view spans (a column tile of a weight converts the rows it crosses,
    which the other column tiles read next). A write into a copied buffer (`write`, called by
    every op writing GM) converts what it wrote into the copy too, so the copy stays equal to
    the buffer (a workspace written and read back tile by tile in a loop is never re-converted
    whole); `clear` at each launch's start (the host and comm kernels write GM between launches).
    Operands read once (`widened`) are converted into work buffers instead. Copies and work
    buffers come from a pool of buffers earlier launches and simulations used (`_take`)."""

    __slots__ = ("copies", "work")

    def __init__(self):
        # id(owner) -> [owner, f32 copy (flat, from the pool: may be longer), chunks converted (a byte
        # per CHUNK: 1 once converted), owner address, chunks not converted yet]
        self.copies: dict[int, list] = {}
        self.work: list[np.ndarray | None] = []  # `widened`'s buffers by slot (from the pool, for this launch)

    def clear(self) -> None:
        """A launch starts or ends: the copies and work buffers go back to the pool."""
        for got in self.copies.values():
            _give(got[1])
        self.copies.clear()
        for i, w in enumerate(self.work):
            if w is not None:
                _give(w)
                self.work[i] = None

    def write(self, view: np.ndarray, index: tuple | None = None) -> None:
        """`view` (in GM) was just written (at `index` of it only, when given: a scalar store):
        the copy of its buffer, if any, takes the written values."""
        if not self.copies:
            return
        o = view.base if view.base is not None else view
        got = self.copies.get(id(o))
        if got is None:
            return
        if view.dtype != F16:  # written through a view of another type: convert again when read
            del self.copies[id(o)]
            return
        w = _alias(got, view, data_pointer(view))
        if index is None:
            np.copyto(w, view)
        else:
            w[index] = view[index]

    def wide(self, view: np.ndarray) -> np.ndarray:
        """`view` (fp16, in GM) as float32: a view of its buffer's copy, the chunks it spans
        converted first if this launch has not yet (buffers that cannot be copied: converted).
        Per call (the 7B layer's data walks make ~2,000, mostly of converted chunks): one
        address lookup (pointer.py), and the chunks' flags searched as bytes only while the copy
        has chunks left to convert."""
        o = view.base if view.base is not None else view
        got = self.copies.get(id(o))
        if got is None:
            if type(o) is not np.ndarray or o.dtype != F16 or not o.flags.c_contiguous or view.dtype != F16:
                return view.astype(F32)
            n = -(-o.size // CHUNK)
            got = self.copies[id(o)] = [o, _take(o.size), bytearray(n), data_pointer(o), n]
        at = data_pointer(view)
        if got[4] and view.size:
            first, last = _span(view, (at - got[3]) // 2)
            flags, end = got[2], last // CHUNK + 1
            a = flags.find(0, first // CHUNK, end)
            if a >= 0:
                src, dst = got[0].reshape(-1), got[1]
                while a >= 0:  # each run of chunks not converted yet
                    b = flags.find(1, a, end)
                    b = end if b < 0 else b
                    widen_into(dst[a * CHUNK: min(b * CHUNK, src.size)], src[a * CHUNK: b * CHUNK])
                    flags[a:b] = b"\x01" * (b - a)
                    got[4] -= b - a
                    a = flags.find(0, b, end)
        return _alias(got, view, at)

    def widened(self, view: np.ndarray, slot: int) -> np.ndarray:
        """`view` (fp16, 2-D) converted to a C-contiguous float32 array in work buffer `slot` of
        this launch, valid until the next call for that slot or the launch's end: for operands
        read once (a weight's slice in a GEMM super-tile, exec/deferred.py), converted without a
        buffer-sized copy, into memory an earlier launch touched already where the pool has it
        (a fresh buffer's first touch costs more than converting)."""
        while len(self.work) <= slot:
            self.work.append(None)
        buf = self.work[slot]
        if buf is None or buf.size < view.size:
            if buf is not None:
                _give(buf)
            buf = self.work[slot] = _take(view.size)
        out = buf[: view.size].reshape(view.shape)
        widen_into(out, view)
        return out


_SCALE = np.float32(2.0**112)  # 2^(127 - 15): float32's exponent bias over fp16's
_SIGNED_BITS = np.int32(-0x70002000)  # 0x8FFFE000: the sign and fp16's exponent and significand, shifted
_EXP_ALL = np.int32(0x7F800000)  # float32's exponent bits
_FP16_TOP = np.float32(65536)  # 2^16: what an fp16 of exponent 31 (inf, NaN) scales to at least
# a block's sum of squares below this has no element of 2^16 or more in magnitude: such an element
# alone squares to 2^32 or more, and adding non-negative terms never lowers a rounded sum in any
# order (half of 2^32: a margin for however the BLAS accumulates)
_SQUARES_CLEAR = np.float32(2.0**31)
_PROBE = np.array([1 << 13], np.int32).view(F32)  # fp16's least subnormal shifted: 2^-24 / 2^112
ROWS_ELEMENTS = 1 << 17  # elements `widen_into` converts per pass (fits L2 as float32)


def widen_into(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src (fp16 -> float32, same 1-D or 2-D shape; dst C-contiguous, src any strides),
    bit for bit numpy's cast, by integer and float32 passes over blocks of ROWS_ELEMENTS: ~0.7 ns
    per element on the benchmark machine against ~1.1 for numpy's element-by-element cast (the
    7B layer converts ~200 M weight elements), ~1 against ~5.8 for data with many fp16
    subnormals (a SiLU x up product: a third of its elements).

    Per element: the fp16 bits, sign-extended to 32 bits and shifted left by 13, masked to the
    sign, exponent and significand (0x8FFFE000), are a float32 of the same significand whose
    exponent field is fp16's; times 2^112 (exact: a power of two, the result normal) that is the
    fp16 value, subnormals included. That multiply takes the FP unit's slow path (~150 cycles
    a vector) for the float32 subnormals fp16 subnormals make, so where a sample of `src`
    (`_many_subnormal`) finds them many, the blocks take `_widen_subnormals`' passes instead,
    which compute none. Exponent 31 (inf, NaN) gives 2^16 or more in magnitude either way (the
    largest finite fp16 is 65504): those elements get float32's all-ones exponent, keeping sign
    and significand (NaN payloads as numpy's cast keeps them). A block is searched for them only
    when its sum of squares (one BLAS dot, cheaper than a max and a min) says it may hold one,
    and its largest or least element says it does. Small or other arrays, or a process whose FP
    unit treats subnormal inputs as zero (DAZ, which the multiply needs off): numpy's cast. DAZ
    is probed on every call (~1 µs, a fraction of the smallest conversion's work): an extension
    module loaded later (one built with -ffast-math) can switch it on."""
    if src.size < 4096 or src.ndim not in (1, 2) or not dst.flags.c_contiguous or float(_PROBE[0] * _SCALE) != 2.0**-24:
        np.copyto(dst, src)
        return
    h, di = src.view(np.int16), dst.view(np.int32)
    step = max(1, ROWS_ELEMENTS // (src.shape[1] if src.ndim == 2 else 1))
    spare = np.empty((2, min(step, src.shape[0]) * (src.size // src.shape[0])), np.int32) if _many_subnormal(h) else None
    for r in range(0, src.shape[0], step):
        d, f = di[r: r + step], dst[r: r + step]
        # (a sign-extending copy, then the shift in place: faster than a shift casting as it goes)
        np.copyto(d, h[r: r + step])
        if spare is None:
            np.left_shift(d, 13, out=d)
            np.bitwise_and(d, _SIGNED_BITS, out=d)
            np.multiply(f, _SCALE, out=f)
        else:
            _widen_subnormals(d.reshape(-1), spare[:, : d.size])
        flat = f.reshape(-1)
        if np.dot(flat, flat) >= _SQUARES_CLEAR and (f.max() >= _FP16_TOP or f.min() <= -_FP16_TOP):
            np.bitwise_or(d, _EXP_ALL, out=d, where=np.abs(f) >= _FP16_TOP)


_SIGN_BIT = np.int32(-0x80000000)
_MAGNITUDE_BITS = np.int32(0x0FFFE000)  # fp16's exponent and significand, shifted left by 13
_BY_2_113 = np.int32(113 << 23)
_LEAST_NORMAL = np.float32(2.0**-14)  # fp16's
_HALF = np.float32(0.5)


def _widen_subnormals(d: np.ndarray, spare: np.ndarray) -> None:
    """d (int32, 1-D: fp16 bits sign-extended) -> its float32 values in place, computing no float32
    subnormal; `spare`: two int32 rows of d's size, overwritten.

    On the magnitude bits shifted left by 13 (fp16's exponent field E at float32's, fp16's
    significand m at the top of float32's), adding 113 to the exponent field gives
    w = 2^(E - 14) * (1 + m / 2^10), at least 2^-14: for E = 0 the fp16 value is w - 2^-14
    (m * 2^-24), for E >= 1 it is w / 2, and the lesser of the two is the right one (w - 2^-14
    >= w / 2 exactly where w >= 2^-13, i.e. E >= 1); both exact, every operand and result
    normal or zero. The sign bits go back in last. (E = 31 gives 2^16 or more: `widen_into`
    fixes those up as for the multiply.)"""
    sign, t = spare[0], spare[1].view(F32)
    np.bitwise_and(d, _SIGN_BIT, out=sign)
    np.left_shift(d, 13, out=d)
    np.bitwise_and(d, _MAGNITUDE_BITS, out=d)
    d += _BY_2_113
    w = d.view(F32)
    np.subtract(w, _LEAST_NORMAL, out=t)
    w *= _HALF
    np.minimum(w, t, out=w)
    d |= sign


def _many_subnormal(h: np.ndarray) -> bool:
    """Whether a sample of fp16 bits `h` (int16, 1-D or 2-D: up to 256 elements) has one fp16
    subnormal in 32 or more: enough that the multiply's slow path costs more than
    `_widen_subnormals`' extra passes (~0.3 ns per element), from ~28 % of 16-lane vectors holding
    one. The 7B layer's weights (N(0, 0.02)) have 1 in 400, a SiLU x up product 1 in 3."""
    per = 256 if h.ndim == 1 else 16
    sample = h[tuple(slice(None, None, -(-n // per)) for n in h.shape)] & np.int16(0x7FFF)
    return 32 * np.count_nonzero((sample > 0) & (sample < 0x400)) >= sample.size


# fp32 buffers kept between launches and between simulations (the shadows' copies and work buffers
# of every GmShadows): fresh memory costs its first touch, page faults that on the benchmark machine
# (numpy advises huge pages for arrays of 4 MiB and more; the kernel compacts memory to find them)
# cost up to ~150 ms for the 43 MB work buffer of a 7B down projection against 13 ms to convert into
# it, and a model's layers and launches ask for the same sizes again
POOL_BYTES = 256 << 20  # kept at most; the oldest given back are dropped first
_pool: list[np.ndarray] = []  # flat float32 buffers, the most recently given back last
_pooled = [0]  # their bytes
_pool_lock = threading.Lock()  # (simulations may run in threads of one process: the API's users)


def _take(n: int) -> np.ndarray:
    """A flat float32 buffer of at least `n` elements: the smallest kept one that fits, else new."""
    with _pool_lock:
        best = -1
        for i, b in enumerate(_pool):
            if b.size >= n and (best < 0 or b.size < _pool[best].size):
                best = i
        if best >= 0:
            b = _pool.pop(best)
            _pooled[0] -= b.nbytes
            return b
    return np.empty(n, F32)


def _give(buf: np.ndarray) -> None:
    """Keep `buf` (from `_take`, no longer used) for later `_take`s, within POOL_BYTES."""
    if buf.nbytes > POOL_BYTES:
        return
    with _pool_lock:
        _pool.append(buf)
        _pooled[0] += buf.nbytes
        while _pooled[0] > POOL_BYTES:
            _pooled[0] -= _pool.pop(0).nbytes


def _span(view: np.ndarray, lo: int) -> tuple[int, int]:
    """[first, last] element of its fp16 buffer that `view`, whose first element is element `lo`
    of the buffer, touches."""
    hi = lo
    for n, st in zip(view.shape, view.strides):
        if st > 0:
            hi += (n - 1) * st // 2
        else:
            lo += (n - 1) * st // 2
    return lo, hi


def _alias(got: list, view: np.ndarray, at: int) -> np.ndarray:
    """The float32 view of the copy `got` holding the elements `view` (data at address `at`) shows
    of its buffer."""
    return np.ndarray(view.shape, F32, got[1], (at - got[3]) * 2, tuple(s * 2 for s in view.strides))
