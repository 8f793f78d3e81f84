"""The host side of a lowered module: `func.func @main` over GM buffers and the kernel list.

Templates receive a `LoweringContext`: they read operand buffers (`ctx.gm(value)`), create GM
buffers for results (`ctx.buffer`), free reshapes (`ctx.view`), and launch kernels
(`ctx.launch(kernel_op, args)`), which appends the kernel to the module and an `ascend.launch`
to @main in program order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence

from xdsl.dialects.builtin import NoneAttr, MemRefType, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.session import DeclinedRegion


def contiguous_type(shape: Sequence[int], elem: Attribute, space: MemSpace = MemSpace.GM) -> MemRefType:
    """`memref<shape x elem, #ascend<space>>` with the identity layout."""
    return ascend.memref_type(list(shape), elem, space)


def gm_type(t: TensorType) -> MemRefType:
    """GM memref of a tensor type: same shape and element type, identity layout."""
    return contiguous_type(t.get_shape(), t.element_type, MemSpace.GM)


def shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def elem(v: SSAValue) -> Attribute:
    return v.type.element_type


@dataclass(frozen=True)
class Declined:
    """A fused-kind template's refusal of a region, with its reason (one line: what in the body
    the template does not take). convert-nn-to-ascend then lowers the body op by op and lists the
    region with this reason in the session (the run report's `declined`)."""

    reason: str


class LoweringContext:
    """State of one convert-nn-to-ascend run.

    Args:
        target: the chip the kernels are tiled for.
        host: the (empty) entry block of the new @main; its arguments are the GM inputs.
        topology: the devices the module runs on (a shipped topology's name or a TOML path; ""
            = the default one): what MC2's chunk counts are chosen for.
    """

    def __init__(self, target: HardwareConfig, host: Block, topology: str = ""):
        self.target = target
        self.topology = topology
        self.host = host
        self.declined: list[DeclinedRegion] = []  # the regions a template declined
        self.kernels: list[ascend.KernelOp] = []
        self.values: dict[SSAValue, SSAValue] = {}
        self._names: dict[str, int] = {}
        self._views: dict[tuple[SSAValue, tuple[int, ...]], SSAValue] = {}
        self.current: str = ""  # the nn op being lowered, for error messages
        self.numbers: dict[Operation, int] = {}  # convert_nn_to_ascend.op_numbers of the module: each op's `#n`
        self.onnx_nodes: str | None = None  # its ONNX node(s), comma-separated: each launch it makes carries them
        # kernel_reuse.Fragment (or None: not replayable) by kernel_reuse.signature of an nn op
        self.fragments: dict[object, object] = {}
        # GM buffers holding an nn value's rows in another order: buffer -> dest [R] (i64), row i
        # of the value is row dest[i] of the buffer. Set only where every reader of the value
        # reads through dest (the grouped MatMul's expert-major rows handed to MoeFinalizeRouting
        # with MoeInitRouting's expanded_row_idx, templates/moe_experts.py).
        self.row_order: dict[SSAValue, SSAValue] = {}

    # ------------------------------------------------------------------------------------------
    def gm(self, value: SSAValue) -> SSAValue:
        """The GM buffer holding nn value `value`."""
        return self.values[value]

    def emit(self, op: Operation) -> Operation:
        self.host.add_op(op)
        return op

    def buffer(self, shape: Sequence[int], elem: Attribute) -> SSAValue:
        """A fresh GM buffer (`ascend.alloc` in GM) for an intermediate or a result."""
        return self.emit(ascend.AllocOp(contiguous_type(shape, elem, MemSpace.GM))).results[0]

    def view(self, src: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`src` reinterpreted with `shape` (same element count): free, no kernel."""
        shape = list(shape)
        # a row block cut by memref.subview (MC2's chunks) has a strided type: it is viewed as the
        # contiguous buffer it is even when the shape stays
        if list(src.type.get_shape()) == shape and isinstance(src.type.layout, NoneAttr):
            return src
        if math.prod(shape) != math.prod(src.type.get_shape()):
            raise AscendirError(f"{self.current}: cannot view {src.type} as {shape}")
        # Chains of views collapse onto the original buffer; one view per (buffer, shape).
        if isinstance(src.owner, ascend.ViewOp):
            src = src.owner.source
            # (a strided source of that shape is still viewed: callers get contiguous types)
            if list(src.type.get_shape()) == shape and isinstance(src.type.layout, NoneAttr):
                return src
        key = (src, tuple(shape))
        if key not in self._views:
            view = self.emit(ascend.ViewOp(src, contiguous_type(shape, src.type.element_type)))
            self._views[key] = view.results[0]
        return self._views[key]

    def permuted_rows(self, buf: SSAValue) -> SSAValue | None:
        """The dest of the buffer GM value `buf` is (a view of) in `row_order`, or None."""
        while isinstance(buf.owner, ascend.ViewOp):
            buf = buf.owner.source
        return self.row_order.get(buf)

    def name(self, base: str) -> str:
        """A unique kernel name `base_<n>`."""
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        return f"{base}_{n}"

    def launch(self, kernel: ascend.KernelOp, args: Sequence[SSAValue]) -> None:
        self.kernels.append(kernel)
        launch = ascend.LaunchOp(kernel.sym_name.data, list(args))
        if self.onnx_nodes:
            launch.attributes["onnx.node"] = StringAttr(self.onnx_nodes)
        self.emit(launch)

    def error(self, msg: str) -> AscendirError:
        return AscendirError(f"{self.current}: {msg}")
