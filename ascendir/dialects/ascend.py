"""The `ascend` dialect: what a Da Vinci NPU does.

Vocabulary follows Huawei's own (AscendNPU-IR HIVM / Ascend C):

* memory spaces on memref types: `memref<128x64xf16, #ascend<space l0a>>` for gm, l1, l0a, l0b,
  l0c, ub, bt, fb;
* `ascend.kernel` (launched with `block_dim` on AIC, AIV or mixed cores), `ascend.launch` from the
  host function, `ascend.block_idx`;
* buffers: `ascend.alloc` (on-chip buffers and GM workspace), `ascend.weight` (a GM tensor of the
  WeightStore), `ascend.view` (a free reinterpretation of a contiguous GM buffer);
* DMA: `ascend.copy` whose pipe follows from (src, dst) spaces (GM→L1/UB = MTE2, L1→L0A/L0B =
  MTE1, UB→GM = MTE3, L0C→GM/L1 = FIX, L0C→UB on coupled cores = V);
* Cube: `ascend.mmad` (L0A × L0B → L0C);
* Vector (UB only): `ascend.v*` ops in destination-passing style;
* sync: `ascend.set_flag` / `ascend.wait_flag` (pipe pair + event id), `ascend.pipe_barrier`.

Loops are `scf.for`, index math `arith`, tiles of GM tensors `memref.subview`.

Copy semantics: the leading overlap `min(src, dst)` of every dim is copied; dst elements outside
it are zero-filled when dst is on chip (hardware padding of partial tiles). Vector ops broadcast
size-1 operand dims to the destination shape (repeat stride 0 / `vbrcb`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    BoolAttr,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    f16,
    f32,
    i64,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    opt_prop_def,
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
from xdsl.utils.str_enum import StrEnum

from ascendir.dialects.cast_mode import cast_mode, verify_cast_mode


class MemSpace(StrEnum):
    GM = "gm"
    L1 = "l1"
    L0A = "l0a"
    L0B = "l0b"
    L0C = "l0c"
    UB = "ub"
    BT = "bt"
    FB = "fb"


@irdl_attr_definition
class MemSpaceAttr(EnumAttribute[MemSpace], SpacedOpaqueSyntaxAttribute):
    """Memory space of a memref: prints as `#ascend<space l0a>`."""

    name = "ascend.space"


class Pipe(StrEnum):
    """Hardware pipes (HIVM PIPE_* enum, S6)."""

    S = "S"
    V = "V"
    M = "M"
    MTE1 = "MTE1"
    MTE2 = "MTE2"
    MTE3 = "MTE3"
    FIX = "FIX"


# Pipes of one unit only on a split (910B) chip: the cube, its L1 -> L0 loads and FixPipe are the
# AIC's, the vector pipe the AIV's; MTE2 / MTE3 / S exist on both (S2 architecture page, S1).
AIC_PIPES = frozenset({Pipe.M.value, Pipe.MTE1.value, Pipe.FIX.value})
AIV_PIPES = frozenset({Pipe.V.value})


class CoreType(StrEnum):
    AIC = "aic"
    AIV = "aiv"
    MIX = "mix"


def memref_type(shape: Sequence[int], elem: Attribute, space: MemSpace, layout: Attribute | None = None) -> MemRefType:
    """`memref<shape x elem, #ascend<space ...>>`."""
    return _memref_type(tuple(shape), elem, space, layout)


@functools.lru_cache(maxsize=4096)
def _memref_type(shape: tuple[int, ...], elem: Attribute, space: MemSpace, layout: Attribute | None) -> MemRefType:
    # Types are immutable and building one (with its verification) costs about a millisecond;
    # kernels ask for the same few tile types again and again.
    if layout is None:
        return MemRefType(elem, list(shape), memory_space=MemSpaceAttr(space))
    return MemRefType(elem, list(shape), layout=layout, memory_space=MemSpaceAttr(space))


def space_of(value: SSAValue | Attribute) -> MemSpace:
    """Memory space of a memref value or type.

    Raises:
        VerifyException: when the type is not a memref with an `#ascend<space>`.
    """
    t = value.type if isinstance(value, SSAValue) else value
    if not isinstance(t, MemRefType) or not isinstance(t.memory_space, MemSpaceAttr):
        raise VerifyException(f"expected a memref in an #ascend<space>, got {t}")
    return t.memory_space.data


# Paths each architecture's DMA engines connect, with the pipe that moves the data.
# dav-c220 = 910B (split AIC/AIV, S2 architecture page; S1 intrinsic map, §4.1 of the reference).
# dav-c100 = 910A and dav-m200 = 310P (coupled core: L0C leaves through UB, l12ub/ub2l1 exist).
_COMMON_PATHS = {
    (MemSpace.GM, MemSpace.L1): Pipe.MTE2,
    (MemSpace.GM, MemSpace.UB): Pipe.MTE2,
    (MemSpace.L1, MemSpace.L0A): Pipe.MTE1,
    (MemSpace.L1, MemSpace.L0B): Pipe.MTE1,
    (MemSpace.L1, MemSpace.BT): Pipe.MTE1,
    (MemSpace.L1, MemSpace.FB): Pipe.MTE1,
    (MemSpace.UB, MemSpace.GM): Pipe.MTE3,
    (MemSpace.UB, MemSpace.UB): Pipe.V,
}
COPY_PATHS: dict[str, dict[tuple[MemSpace, MemSpace], Pipe]] = {
    "dav-c220": {
        **_COMMON_PATHS,
        (MemSpace.GM, MemSpace.L0A): Pipe.MTE2,
        (MemSpace.GM, MemSpace.L0B): Pipe.MTE2,
        (MemSpace.L0C, MemSpace.GM): Pipe.FIX,
        (MemSpace.L0C, MemSpace.L1): Pipe.FIX,
        (MemSpace.L1, MemSpace.GM): Pipe.MTE3,
    },
    "dav-c100": {
        **_COMMON_PATHS,
        (MemSpace.L0C, MemSpace.UB): Pipe.V,
        (MemSpace.UB, MemSpace.L1): Pipe.MTE3,
        (MemSpace.L1, MemSpace.UB): Pipe.MTE1,
    },
}
COPY_PATHS["dav-m200"] = COPY_PATHS["dav-c100"]
_ALL_PATHS = {k: v for paths in COPY_PATHS.values() for k, v in paths.items()}

ARCH_ATTR = "ascend.arch"

# Optional integer attribute of tile ops, ascend.alloc and flags' units in a 910B mix kernel: which
# AIV of the group (GetSubBlockIdx, S2) runs the op / owns the UB buffer; absent = 0.
SUBBLOCK_ATTR = "subblock"


# Optional string attribute of set_flag / wait_flag in a 910B mix kernel: the units a flag joins,
# "SRC->DST" with each one of FLAG_UNITS (aiv = aiv0 = AIV 0); interpreter/kernel.py flag_units
# reads it.
FLAG_UNITS_ATTR = "units"
FLAG_UNITS = ("aic", "aiv", "aiv0", "aiv1")


def subblock(op: Operation) -> int:
    """The AIV of its group that runs `op` (SUBBLOCK_ATTR; 0 when absent)."""
    a = op.attributes.get(SUBBLOCK_ATTR)
    return a.value.data if a is not None else 0


# Ops that only name (part of) a buffer: an op touching the view touches the buffer beneath it.
_VIEW_OPS = (memref.SubviewOp, memref.CastOp, memref.CollapseShapeOp, memref.ExpandShapeOp, memref.ReinterpretCastOp)


def _attr_text(a: Attribute) -> str:
    """`a` as IR text (`2 : i64`, `"one"`), for error messages."""
    import io

    from xdsl.printer import Printer

    buf = io.StringIO()
    Printer(stream=buf).print_attribute(a)
    return buf.getvalue()


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
        u = o.attributes.get(FLAG_UNITS_ATTR) if isinstance(o, FlagOp) else None
        if isinstance(u, StringAttr) and "aiv1" in u.data.split("->") and core != CoreType.MIX.value:
            raise VerifyException(
                f"ascend.kernel @{kernel.sym_name.data}: {o.name} joins {u.data} in an {core} kernel; only a mix "
                f"kernel has a second AIV"
            )
        a = o.attributes.get(SUBBLOCK_ATTR)
        if a is None or not o.name.startswith("ascend."):
            continue
        if not isinstance(a, IntegerAttr) or a.value.data not in (0, 1):
            raise VerifyException(
                f"ascend.kernel @{kernel.sym_name.data}: {o.name} has {SUBBLOCK_ATTR} = {_attr_text(a)}; it names the AIV of "
                f"its group: 0 or 1"
            )
        if a.value.data == 1 and core != CoreType.MIX.value:
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
    """`o` as named in errors when it is AIC work (the cube, or a copy with an end in L1 / L0 /
    BT / FB, the AIC's buffers: MTE2 into L1, MTE1, FixPipe), else None."""
    if isinstance(o, MmadOp):
        return o.name
    if isinstance(o, CopyOp):
        src, dst = space_of(o.source), space_of(o.dest)
        if not {src, dst} <= {MemSpace.GM, MemSpace.UB}:
            return f"{o.name} {src.value} -> {dst.value}"
    return None


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


def module_arch(op: Operation) -> str | None:
    """The `ascend.arch` attribute of the enclosing module, if any."""
    while op.parent_op() is not None:
        op = op.parent_op()
    attr = op.attributes.get(ARCH_ATTR)
    return attr.data if isinstance(attr, StringAttr) else None


def copy_pipe(src: MemSpace, dst: MemSpace, arch: str | None = None) -> Pipe:
    """The pipe that executes a copy from `src` to `dst` on `arch` (all archs when None).

    Raises:
        VerifyException: when the architecture has no such path.
    """
    paths = COPY_PATHS.get(arch, _ALL_PATHS) if arch else _ALL_PATHS
    if (src, dst) not in paths:
        where = f" on {arch}" if arch else ""
        raise VerifyException(f"no DMA path {src.value} -> {dst.value}{where}")
    return paths[(src, dst)]


# ----------------------------------------------------------------------------------------------
# kernels and host
# ----------------------------------------------------------------------------------------------
@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Terminator of an `ascend.kernel`."""

    name = "ascend.return"
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A device function launched on `block_dim` cores of `core_type` (aic, aiv or mix).

    `ascend.kernel @name(%a: memref<...>) attributes {block_dim = 24 : i64, core_type = "aic"} {...}`
    Arguments are GM memrefs; the body runs once per block index.
    """

    name = "ascend.kernel"
    body = region_def()
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    block_dim = prop_def(IntegerAttr)
    core_type = prop_def(StringAttr)
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
                "core_type": StringAttr(core_type.value),
            },
            regions=[body],
        )

    def verify_(self) -> None:
        if tuple(self.body.block.arg_types) != tuple(self.function_type.inputs.data):
            raise VerifyException("ascend.kernel: block arguments must match the function type")
        for t in self.function_type.inputs.data:
            if space_of(t) != MemSpace.GM:
                raise VerifyException(f"ascend.kernel: arguments must be GM memrefs, got {t}")
        if self.block_dim.value.data < 1:
            raise VerifyException("ascend.kernel: block_dim must be >= 1")
        if self.core_type.data not in {c.value for c in CoreType}:
            raise VerifyException(f"ascend.kernel: core_type must be aic, aiv or mix, got {self.core_type.data}")
        if not isinstance(self.body.block.last_op, ReturnOp):
            raise VerifyException("ascend.kernel: body must end in ascend.return")
        _verify_subblocks(self)
        _verify_subblock_ub(self)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name, inputs, _outputs, region, extra, _a, _r = parse_func_op_like(parser, reserved_attr_names=cls.RESERVED[:2])
        if region is None:
            parser.raise_error("ascend.kernel needs a body")
        extra = extra.data if extra is not None else {}
        if "block_dim" not in extra or "core_type" not in extra:
            parser.raise_error("ascend.kernel needs block_dim and core_type attributes")
        block_dim, core_type = extra["block_dim"], extra["core_type"]
        if not isinstance(block_dim, IntegerAttr):
            parser.raise_error(f"ascend.kernel @{name}: block_dim must be an integer, got {block_dim}")
        if not isinstance(core_type, StringAttr) or core_type.data not in {c.value for c in CoreType}:
            parser.raise_error(f"ascend.kernel @{name}: core_type must be \"aic\", \"aiv\" or \"mix\", got {core_type}")
        op = cls(name, inputs, block_dim.value.data, CoreType(core_type.data), region)
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
    """Host side: launch kernel `@callee` on GM buffers; kernels run in launch order."""

    name = "ascend.launch"
    callee = prop_def(SymbolRefAttr)
    args = var_operand_def(MemRefType)
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
    (interpreter), since the dialect is target independent.
    """

    name = "ascend.alloc"
    result = result_def(MemRefType)
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, type: MemRefType):
        super().__init__(result_types=[type])

    def verify_(self) -> None:
        space_of(self.result)
        if any(d < 0 for d in self.result.type.get_shape()):
            raise VerifyException("ascend.alloc: buffers have static shapes")
        for key in ("offset", "ascend.slot"):  # plan-memory's bytes into the space, double-buffer's slot
            a = self.attributes.get(key)
            # (a negative or misaligned offset is the interpreter's target check)
            if a is not None and not (isinstance(a, IntegerAttr) and isinstance(a.value.data, int)):
                raise VerifyException(f"ascend.alloc: {key} = {_attr_text(a)} must be an integer")


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
        import math

        s, r = self.source.type, self.result.type
        if s.element_type != r.element_type or math.prod(s.get_shape()) != math.prod(r.get_shape()):
            raise VerifyException("ascend.view: element type and count must be preserved")
        if space_of(s) != MemSpace.GM or space_of(r) != MemSpace.GM:
            raise VerifyException("ascend.view: views are of GM buffers")


# ----------------------------------------------------------------------------------------------
# DMA and cube
# ----------------------------------------------------------------------------------------------
@irdl_op_definition
class CopyOp(IRDLOperation):
    """DMA `src` → `dst` (same rank). The pipe follows from the spaces (see `copy_pipe`).

    Properties: `layout` = "nd" (default), "nd2nz" (GM→L1 on MTE2) or "nz2nd" (FixPipe out);
    `relu` (FixPipe only) applies ReLU on the way out. FixPipe (L0C→GM/L1) may narrow f32 to
    f16/bf16; other copies keep the element type. `transpose` (MTE1 L1→L0A/L0B only, 2-D):
    dst = srcᵀ, the load2d-with-transpose of the S1 intrinsic map (`transpose_l12l0a/b`, Ascend C
    LoadData2DParams.ifTranspose); the overlap rule then applies to srcᵀ.
    """

    name = "ascend.copy"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    layout = opt_prop_def(StringAttr)
    relu = opt_prop_def(IntegerAttr)
    transpose = opt_prop_def(IntegerAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(
        self, src: SSAValue, dst: SSAValue, layout: str | None = None, relu: bool = False, transpose: bool = False
    ):
        props: dict[str, Attribute] = {}
        if layout:
            props["layout"] = StringAttr(layout)
        if relu:
            props["relu"] = IntegerAttr(1, i64)
        if transpose:
            props["transpose"] = IntegerAttr(1, i64)
        super().__init__(operands=[src, dst], properties=props)

    @property
    def pipe(self) -> Pipe:
        return copy_pipe(space_of(self.source), space_of(self.dest), module_arch(self))

    def verify_(self) -> None:
        s, d = self.source.type, self.dest.type
        src_space, dst_space = space_of(s), space_of(d)
        pipe = copy_pipe(src_space, dst_space, module_arch(self))
        if s.get_num_dims() != d.get_num_dims():
            raise VerifyException(f"ascend.copy: ranks differ ({s} vs {d})")
        narrowing = src_space == MemSpace.L0C and s.element_type == f32 and d.element_type != f32
        if s.element_type != d.element_type and not narrowing:
            raise VerifyException("ascend.copy: only FixPipe (L0C out) may change the element type")
        if self.relu is not None and pipe not in (Pipe.FIX, Pipe.V):
            raise VerifyException("ascend.copy: relu is applied by FixPipe only")
        if self.layout is not None and self.layout.data not in ("nd", "nd2nz", "nz2nd"):
            raise VerifyException(f"ascend.copy: unknown layout {self.layout.data}")
        if self.transpose is not None and self.transpose.value.data:
            if src_space != MemSpace.L1 or dst_space not in (MemSpace.L0A, MemSpace.L0B) or s.get_num_dims() != 2:
                raise VerifyException("ascend.copy: transpose is a 2-D L1 -> L0A/L0B load (MTE1) only")


_K_ALIGN = {16: 16, 32: 8, 8: 32}  # K alignment by element bits (S3 alignment table)


@irdl_op_definition
class MmadOp(IRDLOperation):
    """Cube matrix multiply-accumulate: c[M,N] (+)= a[M,K] @ b[K,N].

    a in L0A, b in L0B (f16/bf16/f32, or s8), c in L0C (f32, or i32 for s8). `init` = 1 starts
    from zero, 0 accumulates. M and N are multiples of 16 and K of 32 B / element size (S3); each
    of M, N, K ≤ 4095 (S2 Mmad page). Cost: ceil(M/16)·ceil(N/16)·ceil(K/k_per_cycle) cycles plus
    start-up (hardware TOML).

    Optional `bias` (only with `init` = 1): a [1, N] row in the bias table (BT, 910B), broadcast
    over the M rows as the initial value, i.e. c = bias + a @ b (Ascend C Mmad with
    `cmatrixSource` = BT, S2 Mmad page; S1 lists `l12bt`). Its element type is that of a or f32.

        ascend.mmad %a, %b, %c bias(%bt : memref<1x128xf16, #ascend<space bt>>) {init = 1 : i64} : ...
    """

    name = "ascend.mmad"
    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    bias = opt_operand_def(MemRefType)
    init = prop_def(IntegerAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$a `,` $b `,` $c (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict `:` type($a) `,` type($b) `,` type($c)"
    )

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue, init: bool, bias: SSAValue | None = None):
        super().__init__(
            operands=[a, b, c, [bias] if bias is not None else []], properties={"init": IntegerAttr(int(init), i64)}
        )

    def verify_(self) -> None:
        for v, sp in ((self.a, MemSpace.L0A), (self.b, MemSpace.L0B), (self.c, MemSpace.L0C)):
            if space_of(v) != sp:
                raise VerifyException(f"ascend.mmad: operand in {space_of(v).value}, expected {sp.value}")
        (m, k), (k2, n), (m2, n2) = self.a.type.get_shape(), self.b.type.get_shape(), self.c.type.get_shape()
        if k != k2 or m != m2 or n != n2:
            raise VerifyException(f"ascend.mmad: shapes [{m},{k}] x [{k2},{n}] -> [{m2},{n2}] do not match")
        bits = self.a.type.element_type.bitwidth
        if m % 16 or n % 16 or k % _K_ALIGN.get(bits, 16):
            raise VerifyException(f"ascend.mmad: M={m}, N={n} must be multiples of 16 and K={k} of {_K_ALIGN.get(bits, 16)}")
        if max(m, n, k) > 4095:
            raise VerifyException("ascend.mmad: M, N, K must be <= 4095")
        if self.a.type.element_type != self.b.type.element_type:
            raise VerifyException("ascend.mmad: L0A and L0B element types differ")
        if self.bias is not None:
            bt = self.bias.type
            if space_of(bt) != MemSpace.BT or tuple(bt.get_shape()) != (1, n):
                raise VerifyException(f"ascend.mmad: bias must be a [1, {n}] BT buffer, got {bt}")
            if bt.element_type not in (self.a.type.element_type, f32):
                raise VerifyException("ascend.mmad: bias element type must be that of a or f32")
            if self.init.value.data != 1:
                raise VerifyException("ascend.mmad: bias is the initial value, so it needs init = 1")


# ----------------------------------------------------------------------------------------------
# vector unit (UB only, destination-passing style)
# ----------------------------------------------------------------------------------------------
def _broadcasts_to(src: Sequence[int], dst: Sequence[int]) -> bool:
    return len(src) == len(dst) and all(s in (1, d) for s, d in zip(src, dst))


class VectorOp(IRDLOperation):
    """Base of vector ops: every operand is a UB memref; sources broadcast size-1 dims to `dst`."""

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        for v in self.operands:
            if space_of(v) != MemSpace.UB:
                raise VerifyException(f"{self.name}: vector ops read and write UB only, got {space_of(v).value}")
        self.verify_shapes()

    def verify_shapes(self) -> None:
        dst = self.dest.type.get_shape()
        for v in self.operands[:-1]:
            if not _broadcasts_to(v.type.get_shape(), dst):
                raise VerifyException(f"{self.name}: operand {v.type} does not broadcast to {self.dest.type}")
            if v.type.element_type != self.dest.type.element_type:
                raise VerifyException(f"{self.name}: element types differ ({v.type} vs {self.dest.type})")


class VectorUnaryOp(VectorOp):
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue, **props: Attribute):
        super().__init__(operands=[src, dst], properties=props)


class VectorBinaryOp(VectorOp):
    lhs = operand_def(MemRefType)
    rhs = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$lhs `,` $rhs `,` $dest attr-dict `:` type($lhs) `,` type($rhs) `,` type($dest)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, dst: SSAValue):
        super().__init__(operands=[lhs, rhs, dst])


class VectorScalarOp(VectorOp):
    """dst = f(src, scalar)."""

    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    scalar = prop_def(FloatAttr)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue, scalar: float):
        super().__init__(operands=[src, dst], properties={"scalar": FloatAttr(scalar, 64)})


class VectorReduceOp(VectorOp):
    """Reduce `source` along its last dim into `dest` (last dim 1)."""

    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue):
        super().__init__(operands=[src, dst])

    def verify_shapes(self) -> None:
        s, d = self.source.type.get_shape(), self.dest.type.get_shape()
        if len(s) != len(d) or tuple(s[:-1]) != tuple(d[:-1]) or d[-1] != 1:
            raise VerifyException(f"{self.name}: dest must be the source shape with last dim 1")
        if self.source.type.element_type != self.dest.type.element_type:
            raise VerifyException(f"{self.name}: element types differ")


def _define(base: type, opname: str, doc: str) -> type:
    name = "".join(p.title() for p in opname.split("_")) + "Op"
    return irdl_op_definition(type(name, (base,), {"name": f"ascend.{opname}", "__doc__": doc}))


# name -> docstring. Costs per op live in the hardware TOML under [vector.ops].
VECTOR_UNARY = {
    "vexp": "exp", "vln": "natural log", "vsqrt": "square root", "vrsqrt": "1/sqrt", "vrec": "1/x",
    "vabs": "|x|", "vrelu": "max(x, 0)", "vsigmoid": "sigmoid (composite API)", "vtanh": "tanh (composite API)",
    "verf": "erf (composite API)", "vgelu": "GELU erf form (composite API)", "vgelu_tanh": "GELU tanh form (composite API)",
    "vsilu": "x*sigmoid(x) (composite API)", "vsin": "sine (composite API)", "vcos": "cosine (composite API)",
    "vfloor": "round toward -inf (vcast mode floor)", "vceil": "round toward +inf (vcast mode ceil)",
    "vnot": "logical not", "vcopy": "UB to UB copy", "vneg": "-x",
}
VECTOR_BINARY = {
    "vadd": "x + y", "vsub": "x - y", "vmul": "x * y", "vdiv": "x / y", "vmax": "max", "vmin": "min",
    "vpow": "x ** y (composite API)", "vand": "logical and", "vor": "logical or", "vmod": "remainder with the divisor's sign (composite)",
    "vfmod": "remainder with the dividend's sign, C fmod (composite)",
}
VECTOR_SCALAR = {"vadds": "x + s", "vmuls": "x * s", "vmaxs": "max(x, s)", "vmins": "min(x, s)", "vpows": "x ** s (composite)"}
VECTOR_REDUCE = {
    "vreduce_sum": "sum of the last dim (WholeReduceSum)", "vreduce_max": "max of the last dim (WholeReduceMax)",
    "vreduce_min": "min of the last dim", "vreduce_prod": "product of the last dim (composite)",
}

_vector_ops: dict[str, type] = {}
for _table, _base in ((VECTOR_UNARY, VectorUnaryOp), (VECTOR_BINARY, VectorBinaryOp), (VECTOR_SCALAR, VectorScalarOp), (VECTOR_REDUCE, VectorReduceOp)):
    for _n, _d in _table.items():
        _vector_ops[_n] = _define(_base, _n, _d)
        globals()[_vector_ops[_n].__name__] = _vector_ops[_n]


def vector_op(opname: str) -> type:
    """The op class of vector op `opname` (e.g. "vadd")."""
    return _vector_ops[opname]


@irdl_op_definition
class VcastOp(VectorOp):
    """Element type conversion in UB, as `nn.cast` (ONNX Cast: round to nearest even; float→int
    truncates; `saturate` / `round_mode` for float 8 / E8M0 results, defaults when absent)."""

    name = "ascend.vcast"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    saturate = opt_prop_def(BoolAttr)
    round_mode = opt_prop_def(StringAttr)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue, saturate: bool = True, round_mode: str = "up"):
        super().__init__(operands=[src, dst], properties=cast_mode(saturate, round_mode))

    def verify_shapes(self) -> None:
        if not _broadcasts_to(self.source.type.get_shape(), self.dest.type.get_shape()):
            raise VerifyException("ascend.vcast: source does not broadcast to dest")
        verify_cast_mode(self.name, self.dest.type.element_type, self.saturate, self.round_mode)


@irdl_op_definition
class VcmpOp(VectorOp):
    """dest (i1) = lhs <cmp> rhs with cmp in eq, ne, lt, le, gt, ge."""

    name = "ascend.vcmp"
    lhs = operand_def(MemRefType)
    rhs = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    cmp = prop_def(StringAttr)
    assembly_format = "$cmp $lhs `,` $rhs `,` $dest attr-dict `:` type($lhs) `,` type($rhs) `,` type($dest)"

    def __init__(self, cmp: str, lhs: SSAValue, rhs: SSAValue, dst: SSAValue):
        super().__init__(operands=[lhs, rhs, dst], properties={"cmp": StringAttr(cmp)})

    def verify_shapes(self) -> None:
        if self.cmp.data not in ("eq", "ne", "lt", "le", "gt", "ge"):
            raise VerifyException(f"ascend.vcmp: unknown predicate {self.cmp.data}")
        for v in (self.lhs, self.rhs):
            if not _broadcasts_to(v.type.get_shape(), self.dest.type.get_shape()):
                raise VerifyException("ascend.vcmp: operand does not broadcast to dest")


@irdl_op_definition
class VselOp(VectorOp):
    """dest = cond ? lhs : rhs (cond i1)."""

    name = "ascend.vsel"
    cond = operand_def(MemRefType)
    lhs = operand_def(MemRefType)
    rhs = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$cond `,` $lhs `,` $rhs `,` $dest attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs) `,` type($dest)"

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue, dst: SSAValue):
        super().__init__(operands=[cond, lhs, rhs, dst])

    def verify_shapes(self) -> None:
        for v in (self.cond, self.lhs, self.rhs):
            if not _broadcasts_to(v.type.get_shape(), self.dest.type.get_shape()):
                raise VerifyException("ascend.vsel: operand does not broadcast to dest")


@irdl_op_definition
class VdupOp(VectorOp):
    """Fill dest with a scalar (Ascend C Duplicate)."""

    name = "ascend.vdup"
    dest = operand_def(MemRefType)
    scalar = prop_def(FloatAttr)
    assembly_format = "$dest attr-dict `:` type($dest)"

    def __init__(self, dst: SSAValue, scalar: float):
        super().__init__(operands=[dst], properties={"scalar": FloatAttr(scalar, 64)})


@irdl_op_definition
class VtransposeOp(VectorOp):
    """dest = transpose(source, perm) inside UB (vnchwconv-based)."""

    name = "ascend.vtranspose"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    perm = prop_def(ArrayAttr)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue, perm: Sequence[int]):
        super().__init__(operands=[src, dst], properties={"perm": ArrayAttr([IntegerAttr(p, i64) for p in perm])})

    def verify_shapes(self) -> None:
        perm = [p.value.data for p in self.perm.data]
        s, d = self.source.type.get_shape(), self.dest.type.get_shape()
        if sorted(perm) != list(range(len(s))) or tuple(d) != tuple(s[p] for p in perm):
            raise VerifyException("ascend.vtranspose: dest shape must be the permuted source shape")


@irdl_op_definition
class VarangeOp(VectorOp):
    """dest[..., c] = start + c along the last dim (the same for every other index): Ascend C
    CreateVecIndex (an arithmetic progression from a scalar first value, S2 API reference).
    `start` is an index (may be negative); integer and float destinations."""

    name = "ascend.varange"
    start = operand_def(IndexType)
    dest = operand_def(MemRefType)
    assembly_format = "$start `,` $dest attr-dict `:` type($dest)"

    def __init__(self, start: SSAValue, dst: SSAValue):
        super().__init__(operands=[start, dst])

    def verify_(self) -> None:
        if space_of(self.dest) != MemSpace.UB:
            raise VerifyException("ascend.varange: writes UB only")


@irdl_op_definition
class GatherRowsOp(IRDLOperation):
    """dest[i, :] = table[indices[i], :]: row gather by MTE2 with scalar-computed addresses.

    table in GM [R, C]; indices in UB (i32/i64, [n, 1]); dest in UB [n, C]. Negative indices count
    from the end (ONNX Gather).
    """

    name = "ascend.gather_rows"
    table = operand_def(MemRefType)
    indices = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$table `,` $indices `,` $dest attr-dict `:` type($table) `,` type($indices) `,` type($dest)"

    def __init__(self, table: SSAValue, indices: SSAValue, dst: SSAValue):
        super().__init__(operands=[table, indices, dst])

    def verify_(self) -> None:
        if space_of(self.table) != MemSpace.GM or space_of(self.indices) != MemSpace.UB or space_of(self.dest) != MemSpace.UB:
            raise VerifyException("ascend.gather_rows: table in GM, indices and dest in UB")


# ----------------------------------------------------------------------------------------------
# synchronization
# ----------------------------------------------------------------------------------------------
class FlagOp(IRDLOperation):
    """`ascend.set_flag MTE2 -> M, 0`: event `event` from pipe `src` to pipe `dst`."""

    src = prop_def(StringAttr)
    dst = prop_def(StringAttr)
    event = prop_def(IntegerAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(self, src: Pipe, dst: Pipe, event: int):
        super().__init__(properties={"src": StringAttr(src.value), "dst": StringAttr(dst.value), "event": IntegerAttr(event, i64)})

    def verify_(self) -> None:
        pipes = {p.value for p in Pipe}
        if self.src.data not in pipes or self.dst.data not in pipes:
            raise VerifyException(f"{self.name}: unknown pipe in {self.src.data} -> {self.dst.data}")
        if self.src.data == self.dst.data:
            raise VerifyException(f"{self.name}: src and dst pipes must differ (use pipe_barrier)")
        if not 0 <= self.event.value.data < 8:
            raise VerifyException(f"{self.name}: event id must be in [0, 8) (S6 EVENT_ID0-7)")
        units = self.attributes.get(FLAG_UNITS_ATTR)
        if units is not None:
            # "aic->aiv" etc. (interpreter/kernel.py flag_units); anything else was a KeyError /
            # ValueError there and in insert-sync
            parts = units.data.split("->") if isinstance(units, StringAttr) else []
            if len(parts) != 2 or not set(parts) <= set(FLAG_UNITS):
                raise VerifyException(
                    f"{self.name} {self.src.data} -> {self.dst.data}, {self.event.value.data}: {FLAG_UNITS_ATTR} = "
                    f"{_attr_text(units)} must be \"SRC->DST\", each one of {', '.join(FLAG_UNITS)}"
                )
            # src unit issues the set on the src pipe, dst unit waits on the dst pipe: a pipe the
            # unit lacks (MTE1 on an AIV) was silently run on a pipe of the other unit
            for pipe, unit in ((self.src.data, parts[0]), (self.dst.data, parts[1])):
                owner = "AIC" if pipe in AIC_PIPES else "AIV" if pipe in AIV_PIPES else None
                if owner is not None and (unit == "aic") != (owner == "AIC"):
                    raise VerifyException(
                        f"{self.name} {self.src.data} -> {self.dst.data}, {self.event.value.data}: {FLAG_UNITS_ATTR} = "
                        f"\"{units.data}\" puts pipe {pipe} on {unit}, but {pipe} is a pipe of the {owner} only"
                    )

    @classmethod
    def parse(cls, parser: Parser) -> FlagOp:
        src = parser.parse_identifier()
        parser.parse_punctuation("->")
        dst = parser.parse_identifier()
        parser.parse_punctuation(",")
        event = parser.parse_integer()
        attrs = parser.parse_optional_attr_dict()
        op = cls(Pipe(src), Pipe(dst), event)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.src.data} -> {self.dst.data}, {self.event.value.data}")
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class SetFlagOp(FlagOp):
    """Issued on the src pipe after its earlier instructions; releases one matching wait."""

    name = "ascend.set_flag"


@irdl_op_definition
class WaitFlagOp(FlagOp):
    """Blocks the dst pipe until the matching set_flag has happened."""

    name = "ascend.wait_flag"


@irdl_op_definition
class PipeBarrierOp(IRDLOperation):
    """Orders all instructions of one pipe (`ALL` = every pipe of the core)."""

    name = "ascend.pipe_barrier"
    pipe = prop_def(StringAttr)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$pipe attr-dict"

    def __init__(self, pipe: str):
        super().__init__(properties={"pipe": StringAttr(pipe)})


Ascend = Dialect(
    "ascend",
    [
        KernelOp, ReturnOp, LaunchOp, BlockIdxOp, AllocOp, WeightOp, ViewOp, CopyOp, MmadOp,
        *_vector_ops.values(), VcastOp, VcmpOp, VselOp, VdupOp, VtransposeOp, VarangeOp, GatherRowsOp,
        SetFlagOp, WaitFlagOp, PipeBarrierOp,
    ],
    [MemSpaceAttr],
)
