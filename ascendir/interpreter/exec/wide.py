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
change. Only float16 widens (bf16 and int8 operands stay as they are). The copies and work
buffers are converted by ort_cast.py `widen_into` (onnxruntime's Cast: ~0.3 ns per element with warm
caches, ~0.9 in the 7B layer, where memory bounds it).
"""

from __future__ import annotations

import threading

import numpy as np

from ascendir.interpreter.exec import kblock
from ascendir.interpreter.exec.ort_cast import widen_into
from ascendir.interpreter.exec.pointer import byte_span, data_pointer

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

    __slots__ = ("copies", "work", "held")

    def __init__(self):
        # id(owner) -> [owner, f32 copy (flat, from the pool: may be longer), chunks converted (a byte
        # per CHUNK: 1 once converted), owner address, chunks not converted yet]
        self.copies: dict[int, list] = {}
        self.work: list[np.ndarray | None] = []  # `widened`'s buffers by slot (from the pool, for this launch)
        # slot -> (fp16 view converted into it, its address, its float32 array there, [first, last]
        # byte it spans, the buffer it views) while it holds that view's values: until the slot is
        # reused or GM under the view is written (`write`)
        self.held: dict[int, tuple] = {}

    def clear(self) -> None:
        """A launch starts or ends: the copies and work buffers go back to the pool."""
        self.held.clear()
        for got in self.copies.values():
            _give(got[1])
        self.copies.clear()
        for i, w in enumerate(self.work):
            if w is not None:
                _give(w)
                self.work[i] = None

    def write(self, view: np.ndarray, index: tuple | None = None) -> None:
        """`view` (in GM) was just written (at `index` of it only, when given: a scalar store):
        the copy of its buffer, if any, takes the written values; a work buffer holding a view
        of that buffer there (`widened`) no longer counts as holding it."""
        o = view.base if view.base is not None else view
        if self.held:  # (a GM buffer is the array its views have as base, as for the copies)
            for slot, h in list(self.held.items()):
                if h[4] is o:
                    lo, hi = byte_span(view)
                    if lo <= h[3][1] and h[3][0] <= hi:
                        del self.held[slot]
        if not self.copies:
            return
        got = self.copies.get(id(o))
        if got is None:
            return
        if view.dtype != F16:  # written through a view of another type: convert again when read
            del self.copies[id(o)]
            return
        w = _alias(got, view, data_pointer(view))
        if index is None:
            widen_into(w, view)
        else:
            w[index] = view[index]

    def forget(self, lo: int, hi: int) -> None:
        """GM bytes [lo, hi] changed: work buffers holding views that span any of them
        (`widened`) no longer count as holding them."""
        for slot, h in list(self.held.items()):
            if lo <= h[3][1] and h[3][0] <= hi:
                del self.held[slot]

    def wide(self, view: np.ndarray) -> np.ndarray:
        """`view` (fp16, in GM) as float32: a view of its buffer's copy, the chunks it spans
        converted first if this launch has not yet (buffers that cannot be copied: converted).
        Per call (the 7B layer's data walks make ~2,000, mostly of converted chunks): one
        address lookup (pointer.py), and the chunks' flags searched as bytes only while the copy
        has chunks left to convert."""
        got = self._copy(view)
        if got is None:
            return view.astype(F32)
        at = data_pointer(view)
        if got[4] and view.size:
            _convert(got, *_span(view, (at - got[3]) // 2))
        return _alias(got, view, at)

    def wide_each(self, view: np.ndarray) -> np.ndarray:
        """`wide` of a batched view (exec/batch_run.py: `view[k]` is block k's fp16 GM view):
        the float32 view of the whole, converting only the chunks each slice spans (`wide` of
        the whole would convert every chunk between the first slice and the last: with the
        blocks' tiles far apart, most of a buffer no block reads). The slices are `view[0]`
        moved by the first stride, so their spans are slice 0's moved too: no slice views are
        made (the 7B layer's FlashAttention reads ~200 batches of 8 a block)."""
        got = self._copy(view)
        if got is None:
            return view.astype(F32)
        at = data_pointer(view)
        if got[4] and view.size:
            first, last = _span(view[0], (at - got[3]) // 2)
            step = view.strides[0] // 2
            if abs(step) <= last - first + 1:  # (the slices' spans overlap or touch: one span)
                _convert(got, *_span(view, (at - got[3]) // 2))
            else:
                for k in range(view.shape[0]):
                    if not got[4]:
                        break
                    _convert(got, first + k * step, last + k * step)
        return _alias(got, view, at)

    def _copy(self, view: np.ndarray) -> list | None:
        """The copy of fp16 GM `view`'s buffer (made empty at the first call), None for a buffer
        that cannot be copied (not a C-contiguous fp16 ndarray, or `view` of another dtype)."""
        o = view.base if view.base is not None else view
        got = self.copies.get(id(o))
        if got is None:
            if type(o) is not np.ndarray or o.dtype != F16 or not o.flags.c_contiguous or view.dtype != F16:
                return None
            n = -(-o.size // CHUNK)
            got = self.copies[id(o)] = [o, _take(o.size), bytearray(n), data_pointer(o), n]
        return got

    def product(self, a: np.ndarray, b: np.ndarray, slot: int) -> np.ndarray:
        """a @ b in float32 (a: m x k float32; b: k x n fp16, 2-D, a weight's slice read once):
        from work buffer `slot`'s conversion of a view b is inside (`widened`), else one K block
        of b at a time into that buffer where the BLAS allows (kblock.py: each block still in
        cache when sgemm packs it), else b converted whole into it (`widened`). Bit for bit
        a @ b.astype(float32) by numpy in each case (kblock.py's module doc)."""
        h = self.held.get(slot)
        got = None if h is None else _inside(h, b)
        if got is not None:
            return a @ got
        parts = kblock.blocks(a, b)
        if parts is None:
            return a @ self.widened(b, slot)
        self.held.pop(slot, None)
        return kblock.product(a, b, parts, self._buffer(slot, max(parts) * b.shape[1]))

    def _buffer(self, slot: int, n: int) -> np.ndarray:
        """Work buffer `slot` of this launch (from the pool), of at least `n` elements."""
        while len(self.work) <= slot:
            self.work.append(None)
        buf = self.work[slot]
        if buf is None or buf.size < n:
            if buf is not None:
                _give(buf)
            buf = self.work[slot] = _take(n)
        return buf

    def widened(self, view: np.ndarray, slot: int) -> np.ndarray:
        """`view` (fp16, 2-D, unit stride along rows) as a float32 array (row-major, unit stride
        along rows) in work buffer `slot` of this launch, valid until the next call for that slot
        or the launch's end: for operands read once (a weight's slice in a GEMM super-tile,
        exec/deferred.py), converted without a buffer-sized copy, into memory an earlier launch
        touched already where the pool has it (a fresh buffer's first touch costs more than
        converting). A view inside the one the slot holds (`held`: same buffer and row stride,
        GM not written since) is a view of what the slot holds, not converted again: a
        tail-split GEMM's K pieces (catlass TailSplitK) read row slices of the weight columns
        its whole-K super-tile converted just before (the 7B layer's down projection: 23 M of
        its 69 M elements)."""
        h = self.held.get(slot)
        if h is not None and view.ndim == 2:
            got = _inside(h, view)
            if got is not None:
                return got
        out = self._buffer(slot, view.size)[: view.size].reshape(view.shape)
        widen_into(out, view)
        if view.ndim == 2 and view.base is not None and view.strides[1] == view.itemsize and view.strides[0] > 0:
            at = data_pointer(view)
            self.held[slot] = (view, at, out, byte_span(view, at), view.base)
        else:
            self.held.pop(slot, None)
        return out


def _convert(got: list, first: int, last: int) -> None:
    """Convert the chunks of copy `got` (`GmShadows.copies`) spanning elements [first, last] of
    its buffer that are not converted yet."""
    flags, end = got[2], last // CHUNK + 1
    a = flags.find(0, first // CHUNK, end)
    if a < 0:
        return
    src, dst = got[0].reshape(-1), got[1]
    while a >= 0:  # each run of chunks not converted yet
        b = flags.find(1, a, end)
        b = end if b < 0 else b
        widen_into(dst[a * CHUNK: min(b * CHUNK, src.size)], src[a * CHUNK: b * CHUNK])
        flags[a:b] = b"\x01" * (b - a)
        got[4] -= b - a
        a = flags.find(0, b, end)


def _inside(h: tuple, view: np.ndarray) -> np.ndarray | None:
    """The float32 view of `view`'s elements in a work buffer holding view h[0] (address h[1])
    converted into h[2], or None when `view` is not a box of h[0] (same buffer and row stride,
    unit stride along rows, its rows and columns inside h[0]'s)."""
    v0, a0, out, _, _ = h
    if view.base is not v0.base or view.base is None or view.dtype != v0.dtype or view.strides != v0.strides:
        return None
    r, c = divmod(data_pointer(view) - a0, view.strides[0])
    if r < 0 or c % view.itemsize:
        return None
    c //= view.itemsize
    rows, cols = view.shape
    if r + rows > v0.shape[0] or c + cols > v0.shape[1]:
        return None
    return out[r: r + rows, c: c + cols]


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
