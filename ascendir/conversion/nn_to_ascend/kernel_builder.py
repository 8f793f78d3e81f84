"""Building one `ascend.kernel`: index math, block-cyclic tile loops, subviews, on-chip buffers
with capacity accounting, and set/wait flag queues.

Every lowering template writes its kernel through a `KernelBuilder`:

    kb = KernelBuilder(ctx, "add_0", arg_types, CoreType.AIV, block_dim=8, what="nn.add")
    x, y, out = kb.args
    ub = kb.alloc([64, 128], f16, MemSpace.UB)          # hoisted to the kernel entry
    q = kb.queue(Pipe.MTE2, Pipe.V)                        # primes its WAR flag here
    with kb.tiles(ntiles) as t:                            # scf.for %t = %block_idx to N step block_dim
        q.acquire(); kb.copy(kb.subview(x, ...), ub); q.enque()
        ...
    kernel = kb.finish()                                   # drains the queues, appends ascend.return

Index values are `int | SSAValue`: arithmetic on two ints folds in Python, so static tile
sizes stay static in the IR (and in the memref types).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, IntegerAttr, MemRefType, StridedLayoutAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import SUBBLOCK_ATTR, CoreType, MemSpace, Pipe
from ascendir.dtypes import packed_nbytes, to_numpy_dtype
from ascendir.errors import AscendirError

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.hardware.align import aligned_bytes

Index = int | SSAValue

# Ascend C gives each (src, dst) pipe pair EVENT_ID0..7 (S6 HIVM enum; S5 MAX_EVENT_ID_NUM 8).
EVENTS_PER_PIPE_PAIR = 8


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


@dataclass
class Queue:
    """A producer → consumer hand-off of a set of on-chip buffers: an Ascend C `TQue` with one slot.

    `EnQue` / `DeQue` compile to `set_flag` / `wait_flag` between the two pipes (S2, InitBuffer
    page): the RAW flag (producer → consumer) says "the data is there", the WAR flag (consumer →
    producer) says "the buffer may be overwritten". The WAR flag is primed (set once) when the
    queue is created, before any loop, and drained (waited once) when the kernel ends, so every
    wait has an earlier set in program order and every set is consumed.

    Ping-pong buffering later gives a queue two event-id pairs, one per slot.
    """

    kb: KernelBuilder
    producer: Pipe
    consumer: Pipe
    raw_event: int
    war_event: int

    def acquire(self) -> None:
        """Producer side, before writing the buffers: wait until the consumer released them."""
        self.kb.wait_flag(self.consumer, self.producer, self.war_event)

    def enque(self) -> None:
        """Producer side, after writing: hand the buffers to the consumer."""
        self.kb.set_flag(self.producer, self.consumer, self.raw_event)

    def deque(self) -> None:
        """Consumer side, before reading: wait for the producer's data."""
        self.kb.wait_flag(self.producer, self.consumer, self.raw_event)

    def release(self) -> None:
        """Consumer side, after its last read: let the producer overwrite the buffers."""
        self.kb.set_flag(self.consumer, self.producer, self.war_event)

    def handoff(self) -> None:
        """`enque` immediately followed by `deque` (producer and consumer run back to back)."""
        self.enque()
        self.deque()


class KernelBuilder:
    """Accumulates the body of one `ascend.kernel` (see the module docstring).

    Args:
        ctx: the lowering context (target, error naming).
        name: kernel symbol.
        arg_types: GM memref types of the kernel arguments.
        core_type: AIC (cube), AIV (vector) or MIX.
        block_dim: number of blocks the kernel is launched on.
        what: the nn op being lowered, for error messages (e.g. "nn.matmul #3").
    """

    def __init__(
        self,
        ctx: LoweringContext,
        name: str,
        arg_types: Sequence[Attribute],
        core_type: CoreType,
        block_dim: int,
        what: str,
    ):
        self.ctx = ctx
        self.target = ctx.target
        self.name = name
        self.core_type = core_type
        self.block_dim = block_dim
        self.what = what
        self.entry = Block(arg_types=list(arg_types))
        self.args = list(self.entry.args)
        self._block = self.entry
        self._block_idx = ascend.BlockIdxOp()
        self.entry.add_op(self._block_idx)
        self.block_idx: SSAValue = self._block_idx.result
        self._consts: dict[int, SSAValue] = {}
        self._events: dict[tuple[Pipe, Pipe], int] = {}
        self._handoff_events: dict[tuple[Pipe, Pipe], int] = {}
        self._queues: list[Queue] = []
        self.used: dict[tuple[MemSpace, int], int] = {}
        # Which AIV of a 910B group (1 AIC + 2 AIV, S1/S2) runs the ascend ops emitted now and owns
        # the buffers allocated now (mix kernels): 0, or 1 = the `subblock` attribute.
        self.subblock = 0

    # ------------------------------------------------------------------------------------------
    # insertion
    # ------------------------------------------------------------------------------------------
    def emit(self, op: Operation) -> Operation:
        """Append `op` at the current insertion point (an ascend op emitted while `subblock` is 1
        runs on the group's second AIV)."""
        if self.subblock and op.name.startswith("ascend."):
            op.attributes[SUBBLOCK_ATTR] = IntegerAttr(self.subblock, 64)
        self._block.add_op(op)
        return op

    @contextmanager
    def on_subblock(self, sub: int) -> Iterator[None]:
        """Ops emitted and buffers allocated inside run on / belong to AIV `sub` of the group."""
        old, self.subblock = self.subblock, sub
        try:
            yield
        finally:
            self.subblock = old

    def _hoist(self, op: Operation) -> Operation:
        # Constants and buffers go to the kernel entry, before ascend.block_idx, so they dominate
        # every loop; the order of creation is kept.
        self.entry.insert_op_before(op, self._block_idx)
        return op

    # ------------------------------------------------------------------------------------------
    # index arithmetic (folds when both sides are static)
    # ------------------------------------------------------------------------------------------
    def const(self, n: int) -> SSAValue:
        """An `arith.constant n : index` at the kernel entry (one per value)."""
        if n not in self._consts:
            op = self._hoist(arith.ConstantOp(IntegerAttr(n, IndexType())))
            self._consts[n] = op.results[0]
        return self._consts[n]

    def idx(self, v: Index) -> SSAValue:
        return self.const(v) if isinstance(v, int) else v

    def add(self, a: Index, b: Index) -> Index:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if a == 0:
            return b
        if b == 0:
            return a
        return self.emit(arith.AddiOp(self.idx(a), self.idx(b))).results[0]

    def sub(self, a: Index, b: Index) -> Index:
        if isinstance(a, int) and isinstance(b, int):
            return a - b
        if b == 0:
            return a
        return self.emit(arith.SubiOp(self.idx(a), self.idx(b))).results[0]

    def mul(self, a: Index, b: Index) -> Index:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if a == 0 or b == 0:
            return 0
        if a == 1:
            return b
        if b == 1:
            return a
        return self.emit(arith.MuliOp(self.idx(a), self.idx(b))).results[0]

    def div(self, a: Index, b: int) -> Index:
        if isinstance(a, int):
            return a // b
        if b == 1:
            return a
        return self.emit(arith.DivUIOp(self.idx(a), self.idx(b))).results[0]

    def rem(self, a: Index, b: int) -> Index:
        if isinstance(a, int):
            return a % b
        if b == 1:
            return 0
        return self.emit(arith.RemUIOp(self.idx(a), self.idx(b))).results[0]

    def min(self, a: Index, b: Index) -> Index:
        if isinstance(a, int) and isinstance(b, int):
            return min(a, b)
        return self.emit(arith.MinSIOp(self.idx(a), self.idx(b))).results[0]

    def eq(self, a: Index, b: Index) -> SSAValue:
        return self.emit(arith.CmpiOp(self.idx(a), self.idx(b), "eq")).results[0]

    def boundary(self, tile: int, extent: int, offset: Index) -> Index:
        """Valid size of a tile of `tile` elements at `offset` in a dim of `extent`:
        `min(tile, extent - offset)` (static when it can be)."""
        if tile >= extent and offset == 0:
            return extent
        if extent % tile == 0:
            return tile
        return self.min(tile, self.sub(extent, offset))

    # ------------------------------------------------------------------------------------------
    # control flow
    # ------------------------------------------------------------------------------------------
    @contextmanager
    def loop(self, lb: Index, ub: Index, step: Index) -> Iterator[SSAValue]:
        """`scf.for %i = lb to ub step step`; the with-body emits into the loop."""
        body = Block(arg_types=[IndexType()])
        self.emit(scf.ForOp(self.idx(lb), self.idx(ub), self.idx(step), [], body))
        outer, self._block = self._block, body
        try:
            yield body.args[0]
        finally:
            body.add_op(scf.YieldOp())
            self._block = outer

    @contextmanager
    def range(self, lb: Index, ub: Index, step: int) -> Iterator[Index]:
        """Like `loop`, but a loop known to run once is not emitted: the body sees `lb`."""
        if isinstance(lb, int) and isinstance(ub, int) and ub - lb <= step:
            yield lb
            return
        with self.loop(lb, ub, step) as i:
            yield i

    @contextmanager
    def tiles(self, ntiles: int) -> Iterator[SSAValue]:
        """Block-cyclic distribution of `ntiles` tiles over the kernel's blocks:
        `scf.for %t = %block_idx to ntiles step block_dim` (tile t runs on block t mod block_dim)."""
        with self.loop(self.block_idx, ntiles, self.block_dim) as t:
            yield t

    def if_else(self, cond: SSAValue, then: Callable[[], None], otherwise: Callable[[], None]) -> None:
        """`scf.if cond {then} else {otherwise}` (no results)."""
        regions = []
        for fn in (then, otherwise):
            block = Block()
            outer, self._block = self._block, block
            try:
                fn()
            finally:
                block.add_op(scf.YieldOp())
                self._block = outer
            regions.append(Region(block))
        self.emit(scf.IfOp(cond, [], regions[0], regions[1]))

    def grid(self, t: Index, shape: Sequence[int], tile: Sequence[int]) -> tuple[list[Index], list[Index]]:
        """Offsets and valid sizes of linear tile `t` in a row-major grid of `tile`-sized tiles
        over `shape` (last dim fastest)."""
        counts = [ceil_div(s, ti) for s, ti in zip(shape, tile)]
        idx: list[Index] = [0] * len(shape)
        rest = t
        outermost = next((d for d, c in enumerate(counts) if c > 1), None)
        for d in reversed(range(len(shape))):
            if counts[d] == 1:
                continue
            if d == outermost:
                idx[d] = rest
            else:
                idx[d] = self.rem(rest, counts[d])
                rest = self.div(rest, counts[d])
        offsets = [self.mul(i, ti) for i, ti in zip(idx, tile)]
        sizes = [self.boundary(ti, s, o) for ti, s, o in zip(tile, shape, offsets)]
        return offsets, sizes

    # ------------------------------------------------------------------------------------------
    # memory
    # ------------------------------------------------------------------------------------------
    def alloc(self, shape: Sequence[int], elem: Attribute, space: MemSpace) -> SSAValue:
        """A static on-chip buffer, hoisted to the kernel entry.

        Raises:
            AscendirError: when the kernel's buffers in `space` exceed the target's capacity
                (each buffer is rounded up to the space's address alignment).
        """
        nbytes = aligned_bytes(self.target, space.value, packed_nbytes(to_numpy_dtype(elem), math.prod(shape)))
        key = (space, self.subblock)  # each AIV has its own UB
        used = self.used.get(key, 0) + nbytes
        cap = self.target.capacity(space.value)
        if used > cap:
            raise AscendirError(
                f"{self.what}: kernel {self.name} needs {used} bytes of {space.value.upper()}, "
                f"{self.target.name} has {cap} per core"
            )
        self.used[key] = used
        op = ascend.AllocOp(ascend.memref_type(shape, elem, space))
        if self.subblock:
            op.attributes[SUBBLOCK_ATTR] = IntegerAttr(self.subblock, 64)
        return self._hoist(op).results[0]

    def subview(
        self,
        src: SSAValue,
        offsets: Sequence[Index],
        sizes: Sequence[Index],
        strides: Sequence[int] | None = None,
    ) -> SSAValue:
        """`memref.subview src[offsets][sizes][strides]` (strides in elements of src, default 1)."""
        strides = list(strides) if strides is not None else [1] * len(offsets)
        if (
            all(o == 0 for o in offsets)
            and list(sizes) == list(src.type.get_shape())
            and all(s == 1 for s in strides)
        ):
            return src
        rtype = memref.SubviewOp.infer_result_type(src.type, list(offsets), list(sizes), strides)
        return self.emit(memref.SubviewOp.get(src, list(offsets), list(sizes), strides, rtype)).results[0]

    def subview_keep(self, src: SSAValue, offsets: Sequence[Index], sizes: Sequence[Index], keep: Sequence[int]) -> SSAValue:
        """A rank-reducing `memref.subview` (unit strides) keeping only dims `keep` of `src`; every
        other dim must have size 1. Gives two tiles laid out differently in GM (e.g. [1, t, C]
        and [t, 1, C]) the same shape for `ascend.copy`."""
        assert all(sizes[d] == 1 for d in range(len(sizes)) if d not in keep)
        full = memref.SubviewOp.infer_result_type(src.type, list(offsets), list(sizes), [1] * len(sizes))
        strides = full.get_strides()
        shape = [sizes[d] if isinstance(sizes[d], int) else DYNAMIC_INDEX for d in keep]
        layout = StridedLayoutAttr([strides[d] for d in keep], full.get_offset())
        rtype = MemRefType(src.type.element_type, shape, layout, src.type.memory_space)
        op = memref.SubviewOp.get(src, list(offsets), list(sizes), [1] * len(sizes), rtype)
        return self.emit(op).results[0]

    def copy(self, src: SSAValue, dst: SSAValue, layout: str | None = None, relu: bool = False) -> None:
        """`ascend.copy` (DMA; the pipe follows from the two spaces)."""
        self.emit(ascend.CopyOp(src, dst, layout, relu))

    # ------------------------------------------------------------------------------------------
    # synchronization
    # ------------------------------------------------------------------------------------------
    def event(self, src: Pipe, dst: Pipe) -> int:
        """A fresh event id for src -> dst (Raises AscendirError past the 8 ids per pair)."""
        n = self._events.get((src, dst), 0)
        if n >= EVENTS_PER_PIPE_PAIR:
            raise AscendirError(
                f"{self.what}: kernel {self.name} needs more than {EVENTS_PER_PIPE_PAIR} events "
                f"for {src.value} -> {dst.value}"
            )
        self._events[(src, dst)] = n + 1
        return n

    def set_flag(self, src: Pipe, dst: Pipe, event: int) -> None:
        self.emit(ascend.SetFlagOp(src, dst, event))

    def wait_flag(self, src: Pipe, dst: Pipe, event: int) -> None:
        self.emit(ascend.WaitFlagOp(src, dst, event))

    def queue(self, producer: Pipe, consumer: Pipe) -> Queue:
        """A new producer → consumer queue; its WAR flag is primed at the current point, which
        must be outside every loop that uses the queue."""
        q = Queue(self, producer, consumer, self.event(producer, consumer), self.event(consumer, producer))
        self.set_flag(consumer, producer, q.war_event)
        self._queues.append(q)
        return q

    def handoff(self, producer: Pipe, consumer: Pipe) -> None:
        """A one-off RAW dependency (e.g. a loop-invariant load before the tile loop):
        set_flag then wait_flag on one event id reserved for such hand-offs."""
        key = (producer, consumer)
        if key not in self._handoff_events:
            self._handoff_events[key] = self.event(producer, consumer)
        ev = self._handoff_events[key]
        self.set_flag(producer, consumer, ev)
        self.wait_flag(producer, consumer, ev)

    # ------------------------------------------------------------------------------------------
    def finish(self) -> ascend.KernelOp:
        """Drain every queue's WAR flag, append `ascend.return` and build the kernel op."""
        if self._block is not self.entry:
            raise AssertionError("finish() called inside a loop")
        for q in reversed(self._queues):
            q.acquire()
        self.entry.add_op(ascend.ReturnOp())
        arg_types = [a.type for a in self.args]
        return ascend.KernelOp(self.name, arg_types, self.block_dim, self.core_type, Region(self.entry))


