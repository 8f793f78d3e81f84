"""Kernels, host launches and buffers of the `ascend` dialect.

* `ascend.kernel` (launched with `block_dim` on AIC, AIV or mixed cores, `#ascend.core_type`),
  `ascend.return`, `ascend.launch` from the host function, `ascend.block_idx`;
* buffers: `ascend.alloc` (on-chip buffers and GM workspace), `ascend.weight` (a GM tensor of the
  WeightStore), `ascend.view` (a free reinterpretation of a contiguous GM buffer).

The kernel verifier also checks what only the kernel can see: the `subblock` tags of its ops
(which AIV of a dav-c220 group runs each op / owns each UB buffer) and the units its flags join.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    i64,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    IsolatedFromAbove,
    IsTerminator,
    MemoryReadEffect,
    MemoryWriteEffect,
    NoMemoryEffect,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import (
    FFN_PLAN_ATTR,
    OFFSET_ATTR,
    SLOT_ATTR,
    SUBBLOCK_ATTR,
    CoreType,
    CoreTypeAttr,
    FlagUnit,
    MemSpace,
    MemSpaceAttr,
    attr_text,
    space_of,
    verify_module_attrs,
)
from ascendir.dialects.ascend.ops_sync import FlagOp, PipeBarrierOp
from ascendir.dialects.ascend.placement import RunsOn, Unit, placement


def subblock(op: Operation) -> int:
    """The AIV of its group that runs `op` (SUBBLOCK_ATTR; 0 when absent)."""
    a = op.attributes.get(SUBBLOCK_ATTR)
    return a.value.data if a is not None else 0


# Ops that only name (part of) a buffer: an op touching the view touches the buffer beneath it.
_VIEW_OPS = (memref.SubviewOp, memref.CastOp, memref.CollapseShapeOp, memref.ExpandShapeOp, memref.ReinterpretCastOp)


def _verify_subblocks(kernel: KernelOp) -> None:
    """SUBBLOCK_ATTR, where an ascend op of `kernel` has it, is the integer 0 or 1 (a 910B group
    has 2 AIV: S1 aiv_per_aic, S2 GetSubBlockIdx), and 1 only in a mix kernel (an aiv kernel's
    block is one vector core, an aic kernel has no AIV) and, on an alloc, only for UB (the one
    buffer each AIV has of its own). (Without this an `subblock = 2` was an
    IndexError in the interpreter, and an aiv kernel's `subblock = 1` buffers got a UB of their
    own that no core has.)

    Raises:
        VerifyException: naming the kernel, the op and the attribute.
    """
    core = kernel.core_type.data
    for o in kernel.body.walk():
        u = o.units if isinstance(o, FlagOp) else None
        if u is not None and FlagUnit.AIV1 in u.units and core != CoreType.MIX:
            raise VerifyException(
                f"ascend.kernel @{kernel.sym_name.data}: {o.name} joins {u.src.data} -> {u.dst.data} in an {core} kernel; only a mix "
                f"kernel has a second AIV"
            )
        a = o.attributes.get(SUBBLOCK_ATTR)
        if a is None or not o.name.startswith("ascend."):
            continue
        if not isinstance(a, IntegerAttr) or a.value.data not in (0, 1):
            raise VerifyException(
                f"ascend.kernel @{kernel.sym_name.data}: {o.name} has {SUBBLOCK_ATTR} = {attr_text(a)}; it names the AIV of "
                f"its group: 0 or 1"
            )
        if a.value.data == 1 and core != CoreType.MIX:
            raise VerifyException(
                f"ascend.kernel @{kernel.sym_name.data}: {o.name} has {SUBBLOCK_ATTR} = 1 in an {core} kernel; only "
                f"a mix kernel has a second AIV (an aiv kernel's block runs on one vector core)"
            )
        if a.value.data == 1 and isinstance(o, AllocOp) and space_of(o.result) != MemSpace.UB:
            # AIV 1 owns a UB of its own, nothing else: L1 / L0 / BT / FB are the AIC's (one per
            # group; a subblock = 1 L1 buffer used to be counted, and placed, in a second L1)
            # and GM is the chip's
            raise VerifyException(
                f"ascend.kernel @{kernel.sym_name.data}: ascend.alloc in {space_of(o.result).value} has "
                f"{SUBBLOCK_ATTR} = 1; only UB is per AIV ({o.result.type})"
            )
        if a.value.data == 1 and (what := _aic_op(o)) is not None:
            # the interpreter and insert-sync place these on the AIC whatever the tag says
            raise VerifyException(
                f"ascend.kernel @{kernel.sym_name.data}: {what} has {SUBBLOCK_ATTR} = 1, but it runs on the AIC; "
                f"only vector-unit ops run on an AIV"
            )


def _aic_op(o: Operation) -> str | None:
    """`o` as named in errors when `placement` puts it on the AIC (the cube, or a copy with an
    end in L1 / L0 / BT / FB, the AIC's buffers), else None. Flags and barriers on an AIC-only
    pipe are left to the units check of the flag verifier."""
    p = placement(o) if o.has_trait(RunsOn) and not isinstance(o, (FlagOp, PipeBarrierOp)) else None
    if p is None or p.unit is not Unit.AIC:
        return None
    if o.get_trait(RunsOn).rule == "copy":
        return f"{o.name} {space_of(o.operands[0]).value} -> {space_of(o.operands[1]).value}"
    return o.name


def _verify_subblock_ub(kernel: KernelOp) -> None:
    """Every ascend op of `kernel` touches only UB buffers of its own AIV (SUBBLOCK_ATTR of the op
    and of the buffer's ascend.alloc agree): each AIV of a 910B group has its own UB, which the
    other cannot address (S2 GetSubBlockIdx, S1 1 AIC + 2 AIV). A verifier rule, not a target
    check: the two attributes contradict each other on any chip. Buffers reached through a view
    are traced to their alloc; a UB value of no alloc (a block argument) is not checked.

    Raises:
        VerifyException: naming the kernel, the op, its AIV and the buffer of the other AIV.
    """
    for o in kernel.body.walk():
        if isinstance(o, AllocOp) or not o.name.startswith("ascend."):
            continue  # subblock tags ascend ops only (a memref.subview names, it does not touch)
        for v in o.operands:
            t = v.type
            if not (isinstance(t, MemRefType) and isinstance(t.memory_space, MemSpaceAttr) and t.memory_space.data == MemSpace.UB):
                continue
            while isinstance(v.owner, _VIEW_OPS):
                v = v.owner.operands[0]
            if isinstance(v.owner, AllocOp) and subblock(v.owner) != subblock(o):
                name = f"%{v.name_hint}: " if v.name_hint else ""
                raise VerifyException(
                    f"ascend.kernel @{kernel.sym_name.data}: {o.name} on AIV {subblock(o)} uses a UB buffer of "
                    f"AIV {subblock(v.owner)} ({name}{v.type}); each AIV of a group has its own UB"
                )


# ----------------------------------------------------------------------------------------------
# kernels and host
# ----------------------------------------------------------------------------------------------
@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Terminator of an `ascend.kernel`."""

    name = "ascend.return"
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"


MAX_BLOCK_DIM = 65535
"""The most blocks a kernel launch takes (Ascend C: blockDim in [1, 65535], the launch API's limit)."""


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A device function launched on `block_dim` cores of `core_type` (aic, aiv or mix).

    `ascend.kernel @name(%a: memref<...>) attributes {block_dim = 24 : i64, core_type = #ascend.core_type<aic>} {...}`
    Arguments are GM memrefs; the body runs once per block index. Optional attribute: `ffn_plan`
    (the FFN template's plan, for the reader).

    Raises (verify): block arguments that differ from the function type or are not GM memrefs,
    block_dim < 1, a body not ending in ascend.return, and the subblock / flag-unit rules of
    `_verify_subblocks` and `_verify_subblock_ub`.
    """

    name = "ascend.kernel"
    body = region_def()
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    block_dim = prop_def(IntegerAttr)
    core_type = prop_def(CoreTypeAttr)
    ffn_plan = opt_attr_def(StringAttr, attr_name=FFN_PLAN_ATTR)
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())
    RESERVED: ClassVar[tuple[str, ...]] = ("sym_name", "function_type", "block_dim", "core_type")

    def __init__(self, name: str, arg_types: Sequence[Attribute], block_dim: int, core_type: CoreType, body: Region | None = None):
        if body is None:
            body = Region(Block(arg_types=arg_types))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(list(arg_types), []),
                "block_dim": IntegerAttr(block_dim, i64),
                "core_type": CoreTypeAttr(CoreType(core_type)),
            },
            regions=[body],
        )

    def verify_(self) -> None:
        if len(self.body.blocks) != 1:
            raise VerifyException(f"ascend.kernel: body must be one block, got {len(self.body.blocks)}")
        if tuple(self.body.block.arg_types) != tuple(self.function_type.inputs.data):
            raise VerifyException("ascend.kernel: block arguments must match the function type")
        for t in self.function_type.inputs.data:
            if space_of(t) != MemSpace.GM:
                raise VerifyException(f"ascend.kernel: arguments must be GM memrefs, got {t}")
        if self.block_dim.value.data < 1:
            raise VerifyException("ascend.kernel: block_dim must be >= 1")
        if self.block_dim.value.data > MAX_BLOCK_DIM:  # the interpreter walks every block
            raise VerifyException(f"ascend.kernel: block_dim must be <= {MAX_BLOCK_DIM}, got {self.block_dim.value.data}")
        if not isinstance(self.body.block.last_op, ReturnOp):
            raise VerifyException("ascend.kernel: body must end in ascend.return")
        _verify_subblocks(self)
        _verify_subblock_ub(self)
        verify_module_attrs(self)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name, inputs, _outputs, region, extra, _a, _r = parse_func_op_like(parser, reserved_attr_names=cls.RESERVED[:2])
        if region is None or not region.blocks:  # (no body was an internal error in verify)
            parser.raise_error("ascend.kernel needs a body")
        extra = extra.data if extra is not None else {}
        if "block_dim" not in extra or "core_type" not in extra:
            parser.raise_error("ascend.kernel needs block_dim and core_type attributes")
        block_dim, core_type = extra["block_dim"], extra["core_type"]
        if not isinstance(block_dim, IntegerAttr):
            parser.raise_error(f"ascend.kernel @{name}: block_dim must be an integer, got {block_dim}")
        if not isinstance(core_type, CoreTypeAttr):
            parser.raise_error(f"ascend.kernel @{name}: core_type must be #ascend.core_type<aic|aiv|mix>, got {core_type}")
        op = cls(name, inputs, block_dim.value.data, core_type.data, region)
        for k, v in extra.items():
            if k not in cls.RESERVED:
                op.attributes[k] = v
        return op

    def print(self, printer: Printer) -> None:
        attrs = {"block_dim": self.block_dim, "core_type": self.core_type, **self.attributes}
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            attrs,
            reserved_attr_names=("sym_name", "function_type"),
            print_empty_outputs=False,
        )


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Host side: launch kernel `@callee` on GM buffers; kernels run in launch order. `onnx.node`
    (optional string): the ONNX node(s) the launch computes, comma-separated (a fused region's
    nodes in program order), for the report. MC2 (templates/mc2.py): `ascend.async` (unit) runs a
    comm kernel on the device's comm stream in the background; `ascend.overlap = k` lets a launch
    start beside the last k background comm kernels instead of after them
    (interpreter/timing/comm_stream.py)."""

    name = "ascend.launch"
    callee = prop_def(SymbolRefAttr)
    args = var_operand_def(MemRefType)
    node = opt_attr_def(StringAttr, attr_name="onnx.node")
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$callee `(` $args `)` attr-dict `:` type($args)"

    def __init__(self, callee: str, args: Sequence[SSAValue]):
        super().__init__(operands=[list(args)], properties={"callee": SymbolRefAttr(callee)})


@irdl_op_definition
class BlockIdxOp(IRDLOperation):
    """Index of the current block in [0, block_dim) (Ascend C GetBlockIdx)."""

    name = "ascend.block_idx"
    result = result_def(IndexType)
    traits = traits_def(NoMemoryEffect())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[IndexType()])


# ----------------------------------------------------------------------------------------------
# buffers
# ----------------------------------------------------------------------------------------------
@irdl_op_definition
class AllocOp(IRDLOperation):
    """A static buffer in one memory space (on-chip tile buffer, or GM workspace on the host).

    Capacity and alignment against the chip are checked when the module is compiled for a target
    (interpreter), since the dialect is target independent. Optional attributes: `offset`
    (plan-memory's bytes into the space), `ascend.slot` (double-buffer's slot of a ping-pong
    pair), `subblock` (the AIV owning a UB buffer).
    """

    name = "ascend.alloc"
    result = result_def(MemRefType)
    offset = opt_attr_def(IntegerAttr, attr_name=OFFSET_ATTR)
    slot = opt_attr_def(IntegerAttr, attr_name=SLOT_ATTR)
    subblock = opt_attr_def(IntegerAttr, attr_name=SUBBLOCK_ATTR)
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, type: MemRefType):
        super().__init__(result_types=[type])

    def verify_(self) -> None:
        space_of(self.result)
        if any(d < 0 for d in self.result.type.get_shape()):
            raise VerifyException("ascend.alloc: buffers have static shapes")
        # (offset / ascend.slot are declared IntegerAttr attributes, which IRDL checks; a
        # negative or misaligned offset is the interpreter's target check)


@irdl_op_definition
class WeightOp(IRDLOperation):
    """A GM tensor holding WeightStore entry `@sym`, or, with a `value` attribute, that constant
    (an nn.constant lowered by convert-nn-to-ascend run as a pass, e.g. from ascendir-opt, where
    no WeightStore is at hand: the IR text then carries the value itself)."""

    name = "ascend.weight"
    sym = prop_def(SymbolRefAttr)
    value = opt_attr_def(DenseIntOrFPElementsAttr)
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    assembly_format = "$sym attr-dict `:` type($result)"

    def __init__(self, sym: str, type: MemRefType, value: DenseIntOrFPElementsAttr | None = None):
        super().__init__(
            properties={"sym": SymbolRefAttr(sym)}, attributes={"value": value} if value is not None else {}, result_types=[type]
        )

    def verify_(self) -> None:
        if space_of(self.result) != MemSpace.GM:
            raise VerifyException("ascend.weight: weights live in GM")
        if self.value is not None:
            vt, rt = self.value.type, self.result.type
            if tuple(vt.get_shape()) != tuple(rt.get_shape()) or vt.element_type != rt.element_type:
                raise VerifyException(f"ascend.weight: value of type {vt} does not match the result {rt}")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """Reinterpret a contiguous GM buffer with another shape (same element type and count): free."""

    name = "ascend.view"
    source = operand_def(MemRefType)
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `to` type($result)"

    def __init__(self, source: SSAValue, type: MemRefType):
        super().__init__(operands=[source], result_types=[type])

    def verify_(self) -> None:
        s, r = self.source.type, self.result.type
        if s.element_type != r.element_type or math.prod(s.get_shape()) != math.prod(r.get_shape()):
            raise VerifyException("ascend.view: element type and count must be preserved")
        if space_of(s) != MemSpace.GM or space_of(r) != MemSpace.GM:
            raise VerifyException("ascend.view: views are of GM buffers")
