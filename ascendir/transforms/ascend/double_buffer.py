"""`double-buffer`: ping-pong the tile buffers of single-buffered loops (S2 InitBuffer
BUFFER_NUM = 2), so the DMA filling tile i+1 runs while tile i is computed.

For each `scf.for` of a kernel without flags, innermost first: every on-chip buffer used only
inside the loop, whose first use in the body is an op of the body itself that writes all of it
without reading it (a load, or a result tile; a buffer read first, first written under a
condition or first written in part through a subview may carry a value from the previous
iteration, e.g. an accumulator or a window of rows, and keeps one slot), and not
already given slots by an inner loop, gets a second `ascend.alloc`; the body becomes

    %n = (iv - lb) / step;  scf.if (%n mod 2 == 0) { body on slot 0 } else { body on slot 1 }

(the subtraction and division are left out when lb = 0 and step = 1).

A loop is left single-buffered when doubling its buffers would overflow a space of the target
(the aligned sum of the kernel's buffers in that space, per AIV for the UB of a 910B mix kernel,
as the interpreter checks it). Each alloc gets `ascend.slot` (0 or 1); the slot-1 alloc is a copy
of the original with all its attributes (`subblock`: the same AIV's UB) but `offset`. The pass
writes no flags: `insert-sync` then gives each slot its own event pair (the dependences of slot 0
stay inside the then-branch), which is what lets the pipes overlap.

A kernel already placed by `plan-memory` (an on-chip alloc with an `offset`) is planned again
after ping-ponging (plan_memory.plan_kernel: every on-chip buffer, new slots included, gets an
offset from the new lifetimes -- the twins live with their originals, so no IR is left half
planned). The usual order is double-buffer, plan-memory, insert-sync (lowering's pipeline).

Kernels that already have flags are left alone: their template pipelined them (the lowering
templates emit ping-pong buffers and flags together, kernel_builder.Queue, because the slot of a
chunk follows the parity of a core's running chunk count across tiles -- a choice that needs the
template's tile arithmetic); this pass is for single-buffered IR (hand-written, or the `nbuf=1`
rung of benchmarks/matmul_ladder.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, space_of, subblock
from ascendir.hardware.config import HardwareConfig
from ascendir.hardware.align import aligned_bytes
from ascendir.session import session_of
from ascendir.costmodel.buffer_lifetimes import nbytes, root_of
from ascendir.transforms.ascend.insert_sync import written
from ascendir.transforms.ascend.ir_level import require_ascend_ir
from ascendir.costmodel.memory import OFFSET_ATTR, plan_kernel
from ascendir.transforms.ascend.plan_memory import module_target

SLOT_ATTR = "ascend.slot"


def _constant(v: SSAValue) -> int | None:
    """The value of an `arith.constant` index, else None."""
    if isinstance(v.owner, arith.ConstantOp) and isinstance(v.owner.value, IntegerAttr):
        return v.owner.value.value.data
    return None


def _inside(op: Operation, loop: Operation) -> bool:
    while op is not None:
        if op is loop:
            return True
        op = op.parent_op()
    return False


def _uses(buf: SSAValue) -> list[Operation]:
    """Ops using `buf` directly or through subviews (the subviews themselves excluded)."""
    out, todo = [], [buf]
    while todo:
        v = todo.pop()
        for u in v.uses:
            if isinstance(u.operation, memref.SubviewOp):
                todo.append(u.operation.result)
            else:
                out.append(u.operation)
    return out


def _written_first(loop: scf.ForOp, buf: SSAValue) -> bool:
    """The first op of the loop body (program order) touching `buf` sits in the body itself (it
    runs every iteration) and writes all of `buf` without reading it: the buffer carries nothing
    from one iteration to the next. A write to part of it (a subview of fewer elements: a ring of
    rows, a window refreshed slice by slice) leaves the rest to the next iteration, which the
    other slot would not see."""
    for op in loop.body.walk():
        if isinstance(op, memref.SubviewOp):
            continue
        touched = [v for v in op.operands if isinstance(v.type, MemRefType) and root_of(v) is buf]
        if touched:
            out = written(op)
            return (
                op.parent_block() is loop.body.block
                and out is not None and root_of(out) is buf and len(touched) == 1
                # a view as large as its buffer is all of it (a subview picks distinct elements)
                and math.prod(out.type.get_shape()) == math.prod(buf.type.get_shape())
                and not (isinstance(op, ascend.MmadOp) and not op.init.value.data)
            )
    return False


def _overflow(kernel: ascend.KernelOp, extra: list[SSAValue], target: HardwareConfig) -> tuple[str, int, int, int] | None:
    """The first on-chip space the kernel's buffers plus second slots for `extra` overflow:
    (space, AIV subblock, aligned bytes needed, bytes available), or None when they fit. Each AIV
    of a 910B group has its own UB, so the buffers are summed per (space, subblock), as the
    interpreter checks them (interpreter/kernel.py)."""
    need: dict[tuple[str, int], int] = {}
    bufs = [op.result for op in kernel.walk() if isinstance(op, ascend.AllocOp)] + extra
    for b in bufs:
        sp = space_of(b).value
        if sp == MemSpace.GM.value:
            continue
        key = (sp, subblock(b.owner))  # a second slot lives on its original's AIV
        need[key] = need.get(key, 0) + aligned_bytes(target, sp, nbytes(b.type))
    return next(((sp, sub, n, target.capacity(sp)) for (sp, sub), n in need.items() if n > target.capacity(sp)), None)


def double_buffer_loop(kernel: ascend.KernelOp, loop: scf.ForOp, target: HardwareConfig,
                       why: list[str] | None = None) -> bool:
    """Ping-pong the load buffers of `loop` (module docstring); True when it changed. When the
    second slots would overflow a space, `why` gets a line saying so (the loop, its buffers, the
    bytes needed and available)."""
    if loop.iter_args or loop.results:
        return False
    allocs = [op for op in kernel.body.block.ops if isinstance(op, ascend.AllocOp)]
    bufs = [
        a.result for a in allocs
        if space_of(a.result) != MemSpace.GM and SLOT_ATTR not in a.attributes
        and (uses := _uses(a.result)) and all(_inside(u, loop) for u in uses)
        and _written_first(loop, a.result)
    ]
    if not bufs:
        return False
    over = _overflow(kernel, bufs, target)
    if over:
        if why is not None:
            space, sub, need, have = over
            iv = loop.body.block.args[0].name_hint
            types = sorted({str(b.type) for b in bufs})
            whose = f" on AIV {sub}" if sub else ""
            why.append(f"the loop over {'%' + iv if iv else 'an index'}: second slots for its {len(bufs)} buffer"
                       f"{'s' if len(bufs) != 1 else ''} ({', '.join(types)}) need {need} B of {space.upper()}{whose}, "
                       f"{have} B on {target.name}")
        return False
    twins: dict[SSAValue, SSAValue] = {}
    for b in bufs:
        owner = b.owner
        # The twin is the same buffer in the other slot: it keeps every attribute of the original
        # (`subblock`: an AIV 1 buffer of a mix kernel lives in AIV 1's own UB, as the ops of the
        # else-branch that use it run there) except `offset`, the original's bytes, which it must
        # not share: plan_kernel places it.
        twin = owner.clone()
        twin.attributes.pop(OFFSET_ATTR, None)
        owner.attributes[SLOT_ATTR] = IntegerAttr(0, i64)
        twin.attributes[SLOT_ATTR] = IntegerAttr(1, i64)
        owner.parent_block().insert_op_after(twin, owner)
        twins[b] = twin.result
    body = loop.body.block
    iv = body.args[0]
    ops = [op for op in body.ops if not isinstance(op, scf.YieldOp)]
    then_block, else_block = Block(), Block()
    for op in ops:
        op.detach()
        then_block.add_op(op)
    then_block.add_op(scf.YieldOp())
    for op in then_block.ops:
        if not isinstance(op, scf.YieldOp):
            else_block.add_op(op.clone(value_mapper=twins))
    else_block.add_op(scf.YieldOp())
    c2 = arith.ConstantOp(IntegerAttr(2, IndexType()))
    c0 = arith.ConstantOp(IntegerAttr(0, IndexType()))
    loop.parent_block().insert_ops_before([c2, c0], loop)
    index: list[Operation] = []  # iteration number (iv - lb) / step, folded for lb = 0, step = 1
    n: SSAValue = iv
    if _constant(loop.lb) != 0:
        index.append(arith.SubiOp(n, loop.lb))
        n = index[-1].result
    if _constant(loop.step) != 1:
        index.append(arith.DivUIOp(n, loop.step))
        n = index[-1].result
    par = arith.RemUIOp(n, c2)
    even = arith.CmpiOp(par, c0, "eq")
    branch = scf.IfOp(even, [], Region(then_block), Region(else_block))
    body.insert_ops_before([*index, par, even, branch], body.last_op)
    return True


def double_buffer(kernel: ascend.KernelOp, target: HardwareConfig, why: list[str] | None = None) -> int:
    """double_buffer_loop on every loop of a flag-free kernel, innermost first, then plan_kernel
    again when the kernel was planned; returns how many loops were ping-ponged. `why` gets a line
    per reason something was left single-buffered: the kernel has flags, or a loop's second slots
    do not fit.

    Raises:
        AscendirError: from plan_kernel, when re-planning a planned kernel does not fit."""
    if any(isinstance(op, ascend.FlagOp) for op in kernel.walk()):
        if why is not None:
            why.append("it has sync flags already (insert-sync ran, or a template pipelined it): "
                       "run double-buffer before insert-sync")
        return 0
    planned = any(
        isinstance(op, ascend.AllocOp) and OFFSET_ATTR in op.attributes and space_of(op.result) != MemSpace.GM
        for op in kernel.walk()
    )
    loops = [op for op in kernel.walk() if isinstance(op, scf.ForOp)]
    done = 0
    for loop in reversed(loops):  # post-order: inner loops before the loops around them
        if loop.parent is not None:
            done += double_buffer_loop(kernel, loop, target, why)
    if done and planned:  # the new slots need offsets, and lifetimes changed: plan every buffer again
        plan_kernel(kernel, target)
    return done


@dataclass(frozen=True)
class DoubleBuffer(ModulePass):
    """Ping-pong buffers for single-buffered loops (see the module docstring)."""

    name = "double-buffer"
    target: str = ""
    quiet: bool = False  # no notes (the lowering pipeline, whose templates pipeline themselves)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_ascend_ir(op, self.name)
        target = module_target(op, self.target)
        for k in list(op.ops):
            if isinstance(k, ascend.KernelOp):
                why: list[str] = []
                double_buffer(k, target, why)
                for reason in [] if self.quiet else why:
                    session_of(ctx).note(f"double-buffer: kernel @{k.sym_name.data} left single-buffered: {reason}")
