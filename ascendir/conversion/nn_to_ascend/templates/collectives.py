"""Comm kernels of the nn collectives (nn.all_reduce / all_gather / reduce_scatter / all_to_all):
one straight-line `ascend.kernel` per collective built from the comm ops (ops_comm.py).

Algorithm: HCCL's *mesh* family, the one it uses inside a fully connected 910B server (every
pair of NPUs has its own HCCS link, so every rank talks to every peer at once; HCCL
documentation of its collective algorithms, "Mesh": full-mesh topology, one step). This choice
is our reading of that documentation (INF); the calibration rows (V8, S16) check the times it
gives. With `r` = this rank and peer `p_s = (r + s) mod n`:

* handshake: notify_record to every peer, then notify_wait for every peer: a peer's buffers may
  be written once it has reached the collective (HCCL's pre-sync);
* all_gather: copy the operand into chunk r of every rank's result (its own by a local copy);
  then record / wait ("done") with every peer;
* reduce_scatter: copy chunk p_s of the operand into row r of p_s's stack (n rows), done, then
  sum the stack (comm_reduce: f32 accumulation for 16-bit floats) into the result;
* all_reduce (n elements split in n equal chunks): reduce_scatter of the flattened operand, then
  all_gather of each rank's reduced chunk straight into every rank's result. An element count
  that does not split n ways takes the one-shot form: every rank receives every operand and
  reduces all of it (HCCL's small-message choice);
* all_to_all: copy chunk p_s (along split_axis) into chunk r (along concat_axis) of p_s's result.

A group of one device is the identity: the result is the operand's buffer.
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, DeviceGroupAttr


class CommKernel:
    """A KernelBuilder for one collective over `group` (kernel named `base`_<n>) with the rank
    arithmetic of the mesh."""

    def __init__(self, ctx: LoweringContext, group: DeviceGroupAttr, base: str, args: list[SSAValue]):
        self.group = group
        self.n = self.group.size
        self.kb = KernelBuilder(ctx, ctx.name(base), [a.type for a in args], CoreType.AIV, 1, ctx.current)
        self.args = self.kb.args
        self.rank = self.kb.emit(ascend.GroupRankOp(self.group)).results[0]
        # p_s = (r + s) mod n; p_0 = r
        self.peers: list[SSAValue] = [self.rank] + [self.kb.idx(self.kb.rem(self.kb.add(self.rank, s), self.n)) for s in range(1, self.n)]

    def chunk(self, buf: SSAValue, axis: int, index: Index, size: int) -> SSAValue:
        """Chunk `index` (of `size` along `axis`) of GM buffer `buf`."""
        dims = list(buf.type.get_shape())
        offs: list[Index] = [0] * len(dims)
        offs[axis] = self.kb.mul(index, size)
        dims[axis] = size
        return self.kb.subview(buf, offs, dims)

    def copy(self, src: SSAValue, dst: SSAValue, peer: SSAValue) -> None:
        self.kb.emit(ascend.RemoteCopyOp(src, dst, peer, self.group))

    def sync(self) -> None:
        """Record at every peer, then wait for every peer's record (a handshake or a 'done')."""
        for p in self.peers[1:]:
            self.kb.emit(ascend.NotifyRecordOp(p, self.group))
        for p in self.peers[1:]:
            self.kb.emit(ascend.NotifyWaitOp(p, self.group))

    def finish(self, ctx: LoweringContext, args: list[SSAValue]) -> None:
        ctx.launch(self.kb.finish(), args)


def _stack(ctx: LoweringContext, n: int, row: list[int], el) -> SSAValue:
    return ctx.buffer([n, *row], el)


def lower_all_gather(ctx: LoweringContext, op: nn.AllGatherOp, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.all_gather: the operand into chunk r (along `axis`) of every rank's result."""
    x = operands[0]
    if op.group.size == 1:
        return [x]
    y = ctx.buffer(list(shape(op.results[0])), elem(op.results[0]))
    emit_all_gather(ctx, op.group, x, y, op.axis.value.data)
    return [y]


def emit_all_gather(ctx: LoweringContext, group: DeviceGroupAttr, x: SSAValue, y: SSAValue, axis: int, base: str = "all_gather") -> None:
    """Launch the comm kernel gathering GM buffer `x` of every rank into chunk r (along `axis`) of
    GM buffer `y`."""
    ck = CommKernel(ctx, group, base, [x, y])
    gx, gy = ck.args
    ck.sync()
    mine = ck.chunk(gy, axis, ck.rank, shape(x)[axis])
    for p in ck.peers:
        ck.copy(gx, mine, p)
    ck.sync()
    ck.finish(ctx, [x, y])


def _reduce_scatter(ck: CommKernel, x: SSAValue, stack: SSAValue, out: SSAValue, axis: int, size: int) -> None:
    """Chunk p of `x` (along `axis`) into row r of p's `stack`, done, the stack summed into `out`."""
    row = [1, *stack.type.get_shape()[1:]]
    mine = ck.kb.subview(stack, [ck.rank] + [0] * (len(row) - 1), row)
    for p in ck.peers:
        ck.copy(ck.chunk(x, axis, p, size), mine, p)
    ck.sync()
    ck.kb.emit(ascend.CommReduceOp(stack, out))


def lower_reduce_scatter(ctx: LoweringContext, op: nn.ReduceScatterOp, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.reduce_scatter: chunk p of the operand to rank p, summed there."""
    x = operands[0]
    if op.group.size == 1:
        return [x]
    y = ctx.buffer(list(shape(op.results[0])), elem(op.results[0]))
    emit_reduce_scatter(ctx, op.group, x, y, op.axis.value.data)
    return [y]


def emit_reduce_scatter(ctx: LoweringContext, group: DeviceGroupAttr, x: SSAValue, y: SSAValue, axis: int,
                        base: str = "reduce_scatter") -> None:
    """Launch the comm kernel summing chunk r (along `axis`) of GM buffer `x` over the group into
    GM buffer `y`."""
    y_shape = list(shape(y))
    stack = _stack(ctx, group.size, y_shape, elem(x))
    ck = CommKernel(ctx, group, base, [x, y, stack])
    gx, gy, gs = ck.args
    ck.sync()
    _reduce_scatter(ck, gx, gs, gy, axis, y_shape[axis])
    ck.finish(ctx, [x, y, stack])


def lower_all_reduce(ctx: LoweringContext, op: nn.AllReduceOp, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.all_reduce: reduce_scatter + all_gather over the flattened operand (one-shot when its
    element count does not split over the group)."""
    x = operands[0]
    if op.group.size == 1:
        return [x]
    y = ctx.buffer(list(shape(op.results[0])), elem(x))
    emit_all_reduce(ctx, op.group, x, y)
    return [y]


def emit_all_reduce(ctx: LoweringContext, group: DeviceGroupAttr, x: SSAValue, y: SSAValue, base: str = "all_reduce") -> None:
    """Launch the comm kernel summing GM buffer `x` over `group` into GM buffer `y` (same element
    count and type): reduce_scatter + all_gather of the flattened operand, or the one-shot form
    (module docstring). The launch is the last op of the host block (MC2 marks it async)."""
    n = group.size
    count = math.prod(shape(x))
    el = elem(x)
    if count % n == 0:
        q = count // n
        xf, yf = ctx.view(x, [n, q]), ctx.view(y, [n, q])
        stack = _stack(ctx, n, [q], el)
        ck = CommKernel(ctx, group, base, [xf, yf, stack])
        gx, gy, gs = ck.args
        ck.sync()
        mine = ck.chunk(gy, 0, ck.rank, 1)
        _reduce_scatter(ck, gx, gs, mine, 0, 1)
        for p in ck.peers[1:]:
            ck.copy(mine, mine, p)
        ck.sync()
        ck.finish(ctx, [xf, yf, stack])
        return
    xf, yf = ctx.view(x, [count]), ctx.view(y, [count])
    stack = _stack(ctx, n, [count], el)
    ck = CommKernel(ctx, group, base, [xf, yf, stack])
    gx, gy, gs = ck.args
    ck.sync()
    mine = ck.kb.subview(gs, [ck.rank, 0], [1, count])
    for p in ck.peers:
        ck.copy(gx, mine, p)
    ck.sync()
    ck.kb.emit(ascend.CommReduceOp(gs, gy))
    ck.finish(ctx, [xf, yf, stack])


def lower_all_to_all(ctx: LoweringContext, op: nn.AllToAllOp, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.all_to_all: chunk p (along split_axis) to chunk r (along concat_axis) of rank p."""
    x = operands[0]
    if op.group.size == 1:
        return [x]
    n = op.group.size
    split, concat = op.split_axis.value.data, op.concat_axis.value.data
    y = ctx.buffer(list(shape(op.results[0])), elem(op.results[0]))
    ck = CommKernel(ctx, op.group, op.name.removeprefix("nn."), [x, y])
    gx, gy = ck.args
    ck.sync()
    mine = ck.chunk(gy, concat, ck.rank, shape(y)[concat] // n)
    for p in ck.peers:
        ck.copy(ck.chunk(gx, split, p, shape(x)[split] // n), mine, p)
    ck.sync()
    ck.finish(ctx, [x, y])
    return [y]
