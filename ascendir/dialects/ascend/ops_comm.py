"""Communication ops of the `ascend` dialect: what a device does to exchange data with its peers.

A collective over `#ascend.device_group<[...]>` is built from these by a template
(conversion/nn_to_ascend/templates/collectives.py). Memory is *symmetric*, as in HCCL's
registered windows: every device of an SPMD module runs the same kernel, so a GM buffer of the
kernel names the same buffer on every device, and `ascend.remote_copy` writes into the peer's
instance of its `dst` (the address computed on the sender).

* `ascend.group_rank {group}`: this device's position in the group (HCCL's rank), an index;
* `ascend.remote_copy %src, %dst, %peer {group}`: a DMA from this device's GM to the GM of the
  group's `%peer`-th device over the link joining them (or within the device when `%peer` is
  this device), moved by the chip's SDMA engines: it reads the HBM of this end and writes the HBM
  of the other;
* `ascend.notify_record %peer {group}` / `ascend.notify_wait %peer {group}`: cross-device
  notify: a record, issued after this device's earlier remote copies to that peer have landed,
  releases one wait of the peer for a record of this device (FIFO per ordered pair);
* `ascend.comm_reduce %stack, %dst`: the sum of `stack`'s rows (axis 0) into `dst`, accumulated
  in f32 for 16-bit floats (HCCL's reduce op `sum`).

They run on no AI Core pipe (placement: none); a kernel holding them is a comm kernel: straight
line, `block_dim = 1`.

A comm kernel carrying the string attribute `aiv_rows` (AIV_ROWS_ATTR: `"barrier"` or
`"pipelined"`) moves its rows with the die's vector cores instead, as ops-transformer's
MoeDistributeDispatch / Combine and DeepEP-Ascend's kernels do: each `ascend.remote_copy` is its
source's rows (all dims but the last), one DataCopy in and one out per row, dealt over the AIVs;
`"barrier"` rows end with a PIPE_ALL barrier and a 32-B status flag (the combine),
`"pipelined"` rows double-buffer the load of the next row under the store of this one (the
dispatch). Its timing is sim/comm.py's `aiv_row_cycles`.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect, NoMemoryEffect
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import DeviceGroupAttr, MemSpace, space_of


def squeezed(t: MemRefType) -> tuple[int, ...]:
    """The shape of `t` without its unit dims (what two views of one chunk share)."""
    return tuple(d for d in t.get_shape() if d != 1)


def _gm(op: IRDLOperation, what: str, t: MemRefType) -> None:
    if space_of(t) != MemSpace.GM:
        raise VerifyException(f"{op.name}: {what} must be a GM memref, got {space_of(t)}")


@irdl_op_definition
class GroupRankOp(IRDLOperation):
    """`%r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index`: this device's
    position in `group` (0 .. size-1). Running it on a device outside the group is an error of
    the run (sim/comm.py)."""

    name = "ascend.group_rank"
    group = prop_def(DeviceGroupAttr)
    result = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, group: DeviceGroupAttr):
        super().__init__(result_types=[IndexType()], properties={"group": group})


@irdl_op_definition
class RemoteCopyOp(IRDLOperation):
    """`ascend.remote_copy %src, %dst, %peer {group} : memref<..., gm>, memref<..., gm>`: copy this
    device's `src` into the `dst` of the group's `peer`-th device (index; this device itself is
    a local SDMA copy). `src` and `dst` hold the same elements in the same order: equal shapes
    once unit dims are dropped, the same element type. Bytes: src's size, over the link.

    Raises (verify): a non-GM operand, element types or shapes that differ."""

    name = "ascend.remote_copy"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    peer = operand_def(IndexType)
    group = prop_def(DeviceGroupAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `,` $dest `,` $peer attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue, peer: SSAValue, group: DeviceGroupAttr):
        super().__init__(operands=[src, dst, peer], properties={"group": group})

    def verify_(self) -> None:
        s, d = self.source.type, self.dest.type
        _gm(self, "source", s)
        _gm(self, "dest", d)
        if s.element_type != d.element_type:
            raise VerifyException(f"{self.name}: element types differ ({s.element_type} vs {d.element_type})")
        if squeezed(s) != squeezed(d):
            raise VerifyException(f"{self.name}: source {list(s.get_shape())} and dest {list(d.get_shape())} "
                                  "hold different chunks (shapes differ beyond unit dims)")


class NotifyOp(IRDLOperation):
    """A cross-device notify with the group's `peer`-th device."""

    peer = operand_def(IndexType)
    group = prop_def(DeviceGroupAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$peer attr-dict"

    def __init__(self, peer: SSAValue, group: DeviceGroupAttr):
        super().__init__(operands=[peer], properties={"group": group})


@irdl_op_definition
class NotifyRecordOp(NotifyOp):
    """`ascend.notify_record %peer {group}`: once this device's earlier remote copies to `peer`
    have landed, record one notify at `peer` (HCCL notify record; its cost: the topology's
    `hccl.notify_record_us` plus the link latency)."""

    name = "ascend.notify_record"


@irdl_op_definition
class NotifyWaitOp(NotifyOp):
    """`ascend.notify_wait %peer {group}`: wait for the oldest unconsumed record `peer` made at this
    device (HCCL notify wait, `hccl.notify_wait_us`). A wait no record ever releases is a
    deadlock, reported by the cluster."""

    name = "ascend.notify_wait"


@irdl_op_definition
class CommReduceOp(IRDLOperation):
    """`ascend.comm_reduce %stack, %dst : memref<NxSxT, gm>, memref<S', gm>`: dst = the sum of the
    N rows of stack (f32 accumulation for f16 / bf16, then rounded once), where a row and dst
    hold the same elements (equal shapes beyond unit dims). Cost: its HBM bytes (reads of the
    stack, the write of dst) at the chip's HBM bandwidth.

    Raises (verify): a non-GM operand, a rank-0 stack, element types or row shapes that differ."""

    name = "ascend.comm_reduce"
    stack = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$stack `,` $dest attr-dict `:` type($stack) `,` type($dest)"

    def __init__(self, stack: SSAValue, dst: SSAValue):
        super().__init__(operands=[stack, dst])

    def verify_(self) -> None:
        s, d = self.stack.type, self.dest.type
        _gm(self, "stack", s)
        _gm(self, "dest", d)
        if not s.get_shape():
            raise VerifyException(f"{self.name}: the stack needs a leading axis of rows")
        if s.element_type != d.element_type:
            raise VerifyException(f"{self.name}: element types differ ({s.element_type} vs {d.element_type})")
        row = tuple(x for x in s.get_shape()[1:] if x != 1)
        if row != squeezed(d) or math.prod(s.get_shape()[1:]) != math.prod(d.get_shape()):
            raise VerifyException(f"{self.name}: a row of stack {list(s.get_shape())} and dest {list(d.get_shape())} differ")


AIV_ROWS_ATTR = "aiv_rows"  # on a comm kernel: rows moved by the AIVs (module docstring)
AIV_ROW_MODES = ("barrier", "pipelined")

COMM_OPS = (GroupRankOp, RemoteCopyOp, NotifyRecordOp, NotifyWaitOp, CommReduceOp)
