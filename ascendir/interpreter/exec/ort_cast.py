"""fp16 <-> float32 conversion of large arrays by onnxruntime's Cast: numpy converts element by
element in C (~0.9 ns per element fp16 -> float32, ~1.65 float32 -> fp16 on the Sapphire Rapids
benchmark machine, ~70 ns more for each float32 that rounds to an fp16 subnormal), while ORT's
CPU Cast runs MLAS's F16C / AVX-512 conversion kernels: ~0.15 to 0.25 ns per element either way,
subnormals included, plus ~3 us a call through the bindings used here, caches warm
(benchmarks/fp16_casts.py). In the 7B layer of benchmarks/numerics_speed.py (~250 M fp16
elements widened, mostly weights' column slices into work buffers the products then read; ~28 M
float32 elements stored into fp16 by 3,700 stores) memory bounds the widening at ~0.9 ns per
element (1.15 for the integer passes this replaced), and a call whose ORT state is out of cache
costs tens of us more: the stores went from 0.105 to 0.075 s CPU, the widening from 0.29 to 0.22.
All 2^32 float32 patterns were checked once against numpy's cast (NaNs apart, as below).

Bit for bit numpy's cast: the hardware conversion rounds to nearest even whatever MXCSR's rounding
mode, and neither its DAZ nor its FTZ bit changes a result (DAZ would flush float32 subnormal
inputs, which round to a signed zero in fp16 anyway; fp16 subnormal inputs are converted exactly
with DAZ on). Only NaNs differ: the hardware sets a signalling NaN's quiet bit, numpy keeps it. So
a block that holds an element of fp16 exponent 31 (inf or NaN: `_special`, two integer max
reductions, ~0.05 ns per element) goes through numpy's cast instead, and a conversion's result
does not depend on the array's size.

onnxruntime loads on the first conversion (~0.02 s CPU with numpy and onnx loaded, ~3 ms per
direction for its session): small runs and the CLI's start-up do not pay it. The session of each
direction is shared by the process (ORT runs a session from several threads at once); each thread
binds its arrays through bindings and scratch buffers of its own. The arrays are bound as
OrtValues over their memory (no copy) through onnxruntime's pybind layer (`_pybind_state`, what
its Python wrapper calls): the wrapper's `IOBinding.bind_input` costs ~7 us a call, ~3 us this way.
"""

from __future__ import annotations

import threading

import numpy as np

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
_I16 = np.dtype(np.int16)
_U16 = np.dtype(np.uint16)
# from this many elements ORT's call costs less than numpy's cast of the rest (break-even ~4,000
# for float32 -> fp16, ~5,000 for fp16 -> float32 on the benchmark machine)
CAST_ELEMENTS = 4096
# elements converted per Cast call from a strided fp16 view: copied into a contiguous fp16 block
# first (numpy), which stays in L2 for the Cast (0.33 ns per element for a 4096 x 1024 column slice
# of a 4096 x 11008 weight, 0.57 copying the whole slice first, 0.42 with ORT's Slice + Cast)
BLOCK = 1 << 17
BOUND = 8  # (source, dest) pairs kept bound per direction (`_Ort`)
_OVERFLOWS = np.float32(65520.0**2)  # (exact in float32) the least square of a float32 numpy casts to fp16 inf
_local = threading.local()  # per thread: `_Ort` bindings (`io`), scratch buffers by dtype (`scratch`)
_lock = threading.Lock()
_sessions: list = []  # [fp16 -> float32, float32 -> fp16] sessions, once made
_unloadable: list = []  # the error onnxruntime's load raised, once it did (`_ort`)


def _make_sessions() -> list:
    """The two Cast sessions (fp16 -> float32, float32 -> fp16), made once per process."""
    with _lock:
        if not _sessions:
            import onnxruntime as ort
            from onnx import TensorProto, helper

            made = []
            for src, dst in ((TensorProto.FLOAT16, TensorProto.FLOAT), (TensorProto.FLOAT, TensorProto.FLOAT16)):
                g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=dst)], "cast", [helper.make_tensor_value_info("x", src, None)],
                                      [helper.make_tensor_value_info("y", dst, None)])
                so = ort.SessionOptions()
                # one thread: the caller's (the conversion of a block is ~30 us; a pool's threads would
                # cost more than they give on the 2 cores the benchmark runs on)
                so.intra_op_num_threads = so.inter_op_num_threads = 1
                model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                made.append(ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])._sess)
            _sessions[:] = made  # (both or none: a failure on the second leaves no half-made pair)
    return _sessions


class _Ort:
    """One thread's bindings of the two Cast sessions: per direction one for any arrays, bound
    anew each call, and up to BOUND more, each bound to one (source, dest) pair of arrays that
    own their memory (no base) of up to BLOCK elements, kept (and the arrays with it: a few
    MiB at most) until BOUND other such pairs took its place. A data walk converts between the
    same on-chip buffers over and over (a kernel's UB tiles, allocated once per block: the 7B
    layer's FlashAttention narrows its probability tiles 40 times a block into the same two
    pairs), and with ORT's state out of cache between calls, binding a pair again (two
    OrtValues, two binds) cost as much as the run itself (~10 us of ~25 a call on the benchmark
    machine). (Views are not kept: one would hold its base, a GM buffer, alive.)"""

    __slots__ = ("sessions", "bindings", "bound", "value", "device", "options", "new_binding")

    def __init__(self):
        from onnxruntime.capi import _pybind_state as C

        self.sessions = _make_sessions()
        self.bindings = [C.SessionIOBinding(s) for s in self.sessions]
        # per direction: (id(src), id(dst)) -> [binding, src, dst], oldest first (the arrays are
        # held: their ids name them while they are here)
        self.bound: list[dict] = [{}, {}]
        self.new_binding = C.SessionIOBinding
        self.value = C.OrtValue.ortvalue_from_numpy
        self.device = C.OrtDevice(C.OrtDevice.cpu(), C.OrtDevice.default_memory(), 0)
        self.options = C.RunOptions()

    def cast(self, src: np.ndarray, dst: np.ndarray) -> None:
        """dst[...] = src by ORT's Cast: C-contiguous arrays of one shape, fp16 and float32 (either
        way round); NaNs come out quieted."""
        k = src.dtype != F16
        if src.base is None and dst.base is None and src.size <= BLOCK:
            bound = self.bound[k]
            key = (id(src), id(dst))
            got = bound.get(key)
            if got is None:
                if len(bound) < BOUND:
                    b = self.new_binding(self.sessions[k])
                else:  # (the oldest pair's binding, bound anew)
                    b = bound.pop(next(iter(bound)))[0]
                got = bound[key] = [self._bind(b, src, dst), src, dst]
            self.sessions[k].run_with_iobinding(got[0], self.options)
            return
        self.sessions[k].run_with_iobinding(self._bind(self.bindings[k], src, dst), self.options)

    def _bind(self, b, src: np.ndarray, dst: np.ndarray):
        """Binding `b` bound to `src` and `dst` (over their memory: dst written in place)."""
        b.bind_ortvalue_input("x", self.value(src, self.device))
        b.bind_ortvalue_output("y", self.value(dst, self.device))
        return b


def _ort() -> _Ort | None:
    """This thread's `_Ort`, made on its first conversion; None once onnxruntime failed to load
    (an install without it or a broken one: the callers then take numpy's cast, slower, the same
    bits)."""
    io = getattr(_local, "io", None)
    if io is None:
        if _unloadable:
            return None
        try:
            io = _local.io = _Ort()
        except (ImportError, OSError) as e:
            _unloadable.append(e)
            return None
    return io


def _scratch(dtype: np.dtype, n: int) -> np.ndarray:
    """A flat C-contiguous array of `n` elements of `dtype`, this thread's (reused by the next
    call: kept up to BLOCK elements, larger ones fresh)."""
    if n > BLOCK:
        return np.empty(n, dtype)
    got = getattr(_local, "scratch", None)
    if got is None:
        got = _local.scratch = {}
    buf = got.get(dtype)
    if buf is None or buf.size < n:
        buf = got[dtype] = np.empty(BLOCK, dtype)
    return buf[:n]


def _special(h: np.ndarray) -> bool:
    """Whether C-contiguous fp16 array `h` holds an element of exponent 31 (inf or NaN): bits
    0x7C00 and up, or 0xFC00 and up (negative)."""
    return np.maximum.reduce(h.view(_I16), axis=None) >= 0x7C00 or np.maximum.reduce(h.view(_U16), axis=None) >= 0xFC00


def widen_into(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src: fp16 `src` (any shape and strides) into float32 `dst` of its shape, bit
    for bit numpy's cast, NaN payloads and signalling NaNs included.

    From CAST_ELEMENTS elements by ORT's Cast (module doc), in blocks of about BLOCK elements (rows
    of a 2-D view): a strided view's block is copied into a contiguous fp16 scratch block first;
    a block holding inf or NaN goes through numpy's cast. Up to BLOCK elements, other shapes or a
    strided `dst` go through scratch blocks. Smaller or other arrays: numpy's cast."""
    io = None if src.size < CAST_ELEMENTS or src.size > BLOCK and (src.ndim not in (1, 2) or not dst.flags.c_contiguous) else _ort()
    if io is None:
        np.copyto(dst, src)
        return
    if src.ndim not in (1, 2) or not dst.flags.c_contiguous:
        # (one block through two scratch blocks: numpy's strided fp16 -> float32 cast runs ~1 ns
        # an element, its copies ~0.1; a GM write of 8 blocks' 64 x 96 tiles into their buffer's
        # float32 copy, wide.py `GmShadows.write`: 52 -> ~18 us)
        c = _scratch(F16, src.size).reshape(src.shape)
        np.copyto(c, src)
        if _special(c):
            np.copyto(dst, c)
            return
        w = _scratch(F32, src.size).reshape(src.shape)
        io.cast(c, w)
        np.copyto(dst, w)
        return
    whole = src.flags.c_contiguous
    if whole:
        src, dst = src.reshape(-1), dst.reshape(-1)
    row = src.size // src.shape[0]  # (1-D: 1)
    step = max(1, BLOCK // row)
    for r in range(0, src.shape[0], step):
        s, d = src[r: r + step], dst[r: r + step]
        if not whole:
            c = _scratch(F16, d.size).reshape(d.shape)
            np.copyto(c, s)
            s = c
        if _special(s):
            np.copyto(d, s)
        else:
            io.cast(s, d)


def narrow_into(dst: np.ndarray, x: np.ndarray) -> bool:
    """dst[...] = x for float32 `x` and fp16 `dst` of the same shape (any strides, at least 1-d),
    bit for bit numpy's cast (round to nearest even, fp16 subnormals, signed zeros), by ORT's Cast
    (module doc) at any size: the caller picks the arrays worth its ~5 us a call (with the check).

    False where it does not apply, dst then untouched, for the caller to write (it may read an
    operand dst overlaps): other shapes or dtypes, 0-d arrays, and a result holding inf or NaN
    (an x of 65520 or more in magnitude, inf or NaN: numpy's cast warns of the overflow and keeps
    NaN payloads). Strided arrays go through contiguous scratch buffers; so do a `dst` that may
    share memory with `x` (the Cast reads and writes as it goes) and an `x` that may hold such a
    value."""
    if x.dtype != F32 or dst.dtype != F16 or x.shape != dst.shape or not x.size or not x.ndim:
        return False
    io = _ort()
    if io is None:
        return False
    if not x.flags.c_contiguous:
        c = _scratch(F32, x.size).reshape(x.shape)
        np.copyto(c, x)
        x = c
    # (a sum of squares below 65520^2, one BLAS call: no element of 65520 or more, inf or NaN,
    # since rounded sums of non-negative terms are at least their largest term in any order; else
    # the result is searched)
    big = not np.vdot(x, x) < _OVERFLOWS
    direct = dst.flags.c_contiguous and not big and not np.may_share_memory(dst, x)
    out = dst if direct else _scratch(F16, x.size).reshape(x.shape)
    io.cast(x, out)
    if big and _special(out):
        return False
    if not direct:
        np.copyto(dst, out)
    return True
