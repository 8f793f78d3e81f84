"""Attributes of the `ascend` dialect: memory spaces, pipes, core types, copy layouts, ...

Each is an enum attribute over a `StrEnum`, so `attr.data == "MTE2"` compares with the plain
spelling while the IR holds one typed value:

* `#ascend<space l0a>`: memory space of a memref (gm, l1, l0a, l0b, l0c, ub, bt, fb);
* `#ascend.pipe<MTE2>`: a hardware pipe (HIVM PIPE_*, S6);
* `#ascend.barrier_pipe<ALL>`: the pipe a `pipe_barrier` orders, or ALL of them;
* `#ascend.core_type<mix>`: the cores an `ascend.kernel` is launched on (aic, aiv, mix);
* `#ascend.layout<nd2nz>`: the layout change an `ascend.copy` makes (nd, nd2nz, nz2nd), or `nz`:
  none, the source already holds NZ fractals;
* `#ascend.tiling<{m = 128 : i64, ...}>`: the tile sizes of an nn.matmul / nn.attention;
* `#ascend.flag_units<aic -> aiv1>`: the units a flag of a dav-c220 mix kernel joins;
* `#ascend.round_mode<nearest>`: the rounding of a cast to f8E8M0FNU (cast_mode.py);
* `#ascend.arch<"dav-c220">`, `#ascend.target<"ascend910b2">`: the module's architecture and chip;
* `#ascend.device_group<[0, 1, 2, 3]>`: the devices (ranks) a collective runs over.

An enum value has one spelling, the printer's (enum_attr.py): `#ascend.pipe<"V">` is an error.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntAttr, IntegerAttr, MemRefType, StringAttr, i64
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from ascendir.dialects.enum_attr import AngleEnum, BareEnum, parse_enum_value
from ascendir.dialects.ir_text import IRPrinter


class MemSpace(StrEnum):
    """Memory spaces of a Da Vinci core and the chip (S1, S2 architecture page)."""

    GM = "gm"
    L1 = "l1"
    L0A = "l0a"
    L0B = "l0b"
    L0C = "l0c"
    UB = "ub"
    BT = "bt"
    FB = "fb"


@irdl_attr_definition
class MemSpaceAttr(BareEnum, EnumAttribute[MemSpace], SpacedOpaqueSyntaxAttribute):
    """Memory space of a memref: prints as `#ascend<space l0a>`."""

    name = "ascend.space"


class Pipe(StrEnum):
    """Hardware pipes (HIVM PIPE_* enum, S6): S scalar, V vector, M cube, MTE1 L1 -> L0A/L0B/BT/FB,
    MTE2 GM -> on chip, MTE3 UB -> GM (and L1 -> GM on dav-c220), FIX L0C out (FixPipe)."""

    S = "S"
    V = "V"
    M = "M"
    MTE1 = "MTE1"
    MTE2 = "MTE2"
    MTE3 = "MTE3"
    FIX = "FIX"


@irdl_attr_definition
class PipeAttr(AngleEnum, EnumAttribute[Pipe]):
    """A hardware pipe: `#ascend.pipe<MTE2>` (set_flag / wait_flag print it bare)."""

    name = "ascend.pipe"


class BarrierPipe(StrEnum):
    """What an `ascend.pipe_barrier` orders: one pipe, or ALL pipes of the core (PIPE_ALL, S6)."""

    S = "S"
    V = "V"
    M = "M"
    MTE1 = "MTE1"
    MTE2 = "MTE2"
    MTE3 = "MTE3"
    FIX = "FIX"
    ALL = "ALL"


@irdl_attr_definition
class BarrierPipeAttr(AngleEnum, EnumAttribute[BarrierPipe]):
    """`#ascend.barrier_pipe<ALL>` (pipe_barrier prints it bare)."""

    name = "ascend.barrier_pipe"


class CoreType(StrEnum):
    """The cores a kernel runs on: the cube core (AIC), a vector core (AIV), or one group of both
    (MIX: 1 AIC + 2 AIV on dav-c220, one coupled core on dav-c100 / dav-m200)."""

    AIC = "aic"
    AIV = "aiv"
    MIX = "mix"


@irdl_attr_definition
class CoreTypeAttr(AngleEnum, EnumAttribute[CoreType]):
    """`#ascend.core_type<aic>`."""

    name = "ascend.core_type"


class Layout(StrEnum):
    """The layout change of an `ascend.copy`: none (ND), ND -> NZ fractal on the way into L1
    (MTE2 nd2nz), NZ -> ND on the way out of L0C (FixPipe nz2nd); or NZ: none, the GM source is
    already stored in NZ fractals (a constant weight converted to FRACTAL_NZ once at compile
    time, as CANN's TransData / torch_npu.npu_format_cast do), so the GM -> L1 load is a plain
    DMA of whole fractals (the plain MTE2 head, not the nd2nz one, costmodel/ops.py)."""

    ND = "nd"
    ND2NZ = "nd2nz"
    NZ2ND = "nz2nd"
    NZ = "nz"


@irdl_attr_definition
class LayoutAttr(AngleEnum, EnumAttribute[Layout]):
    """`#ascend.layout<nd2nz>`."""

    name = "ascend.layout"


@irdl_attr_definition
class TilingAttr(ParametrizedAttribute):
    """`#ascend.tiling<{m = 128 : i64, n = 256 : i64, k = 64 : i64}>`: the tile sizes chosen for
    an `nn.matmul` or `nn.attention` (by choose-tiling, or by the IR's author), held on the op as
    its `ascend.tiling` attribute. The fields are the template's: matmul m, n, k, l1_depth,
    split_k, swizzle; flash attention br, bc. Each is an integer; which keys a template takes and
    the values' ranges are the template's check when lowering (choose_tiling.check_fields).

    Raises (verify): a field that is not an integer."""

    name = "ascend.tiling"
    fields: DictionaryAttr

    def __init__(self, fields: DictionaryAttr | Mapping[str, int]):
        if not isinstance(fields, DictionaryAttr):
            fields = DictionaryAttr({k: IntegerAttr(v, i64) for k, v in fields.items()})
        super().__init__(fields)

    @property
    def data(self) -> dict[str, Attribute]:
        """The fields by name, as a DictionaryAttr's `data`."""
        return self.fields.data

    def verify(self) -> None:
        for k, v in self.fields.data.items():
            if not isinstance(v, IntegerAttr):
                raise VerifyException(f"#ascend.tiling: {k} = {attr_text(v)} must be an integer")


class CmpPredicate(StrEnum):
    """The comparison of an `ascend.vcmp` (Ascend C Compare's CMPMODE: EQ, NE, LT, LE, GT, GE)."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"


@irdl_attr_definition
class CmpPredicateAttr(BareEnum, EnumAttribute[CmpPredicate], SpacedOpaqueSyntaxAttribute):
    """`#ascend<cmp gt>`; ascend.vcmp prints it bare: `ascend.vcmp gt %a, %b, %m`."""

    name = "ascend.cmp"


class FlagUnit(StrEnum):
    """A unit of a dav-c220 mix kernel's group (GetSubBlockIdx, S2): the AIC or one of its two
    AIVs (aiv = aiv0 = AIV 0)."""

    AIC = "aic"
    AIV = "aiv"
    AIV0 = "aiv0"
    AIV1 = "aiv1"


@irdl_attr_definition
class FlagUnitAttr(AngleEnum, EnumAttribute[FlagUnit]):
    """`#ascend.flag_unit<aiv1>` (inside `#ascend.flag_units` it prints bare)."""

    name = "ascend.flag_unit"


@irdl_attr_definition
class FlagUnitsAttr(ParametrizedAttribute):
    """`#ascend.flag_units<aic -> aiv1>`: the units a set_flag / wait_flag of a dav-c220 mix
    kernel joins when its pipes leave them open (MTE2, MTE3 and S exist on every unit): the src
    unit issues the set on the src pipe, the dst unit waits on the dst pipe."""

    name = "ascend.flag_units"
    src: FlagUnitAttr
    dst: FlagUnitAttr

    def __init__(self, src: FlagUnit | str, dst: FlagUnit | str):
        super().__init__(FlagUnitAttr(FlagUnit(src)), FlagUnitAttr(FlagUnit(dst)))

    @property
    def units(self) -> tuple[FlagUnit, FlagUnit]:
        """(src unit, dst unit)."""
        return self.src.data, self.dst.data

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.src.data} -> {self.dst.data}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            src = parse_enum_value(parser, FlagUnit, "flag unit")
            parser.parse_punctuation("->")
            dst = parse_enum_value(parser, FlagUnit, "flag unit")
        return (FlagUnitAttr(src), FlagUnitAttr(dst))


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


class Arch(StrEnum):
    """The architecture (compiler target) a module is lowered for: hardware/arch.py's ChipArch of
    the same name says what it can do. dav-c220: Ascend 910B and the Atlas A3 dies (split AIC /
    AIV); dav-c100: 910A; dav-m200: 310P (coupled cores). S1 platform configs."""

    DAV_C220 = "dav-c220"
    DAV_C100 = "dav-c100"
    DAV_M200 = "dav-m200"


@irdl_attr_definition
class ArchAttr(AngleEnum, EnumAttribute[Arch]):
    """`#ascend.arch<"dav-c220">` (a string literal: a hyphen is no identifier character)."""

    name = "ascend.arch"


@irdl_attr_definition
class TargetAttr(ParametrizedAttribute):
    """`#ascend.target<"ascend910b2">`: the chip a module was lowered for, by its name (a shipped
    hardware/chips/NAME.toml or the chip.name of a --target file). A name rather than an enum: a
    new chip is one TOML file, not a change to the dialect.

    Raises (verify): an empty name."""

    name = "ascend.target"
    chip: StringAttr

    def __init__(self, chip: str | StringAttr):
        super().__init__(chip if isinstance(chip, StringAttr) else StringAttr(chip))

    @property
    def data(self) -> str:
        """The chip's name."""
        return self.chip.data

    def verify(self) -> None:
        if not self.chip.data.strip():
            raise VerifyException("#ascend.target: the chip name must not be empty")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            pos = parser.pos
            chip = parser.parse_str_literal()
        if not chip.strip():  # a parse error, not the VerifyException verify() would raise mid-parse
            parser.raise_error("#ascend.target: the chip name must not be empty", pos, parser.pos)
        return (StringAttr(chip),)


@irdl_attr_definition
class DeviceGroupAttr(ParametrizedAttribute):
    """`#ascend.device_group<[0, 1, 2, 3]>`: the devices (ranks, numbered as in the topology) a
    collective runs over, in group order: position i of the group holds chunk i of an all_gather
    result, of a reduce_scatter input and of an all_to_all exchange (HCCL's rank order).

    Raises (verify): an empty group, a negative device or a device listed twice."""

    name = "ascend.device_group"
    devices: ArrayAttr[IntAttr]

    def __init__(self, devices: Sequence[int] | ArrayAttr[IntAttr]):
        if not isinstance(devices, ArrayAttr):
            devices = ArrayAttr([IntAttr(d) for d in devices])
        super().__init__(devices)

    @property
    def ranks(self) -> tuple[int, ...]:
        """The devices in group order."""
        return tuple(d.data for d in self.devices.data)

    @property
    def size(self) -> int:
        """How many devices the group holds."""
        return len(self.devices.data)

    def verify(self) -> None:
        ranks = self.ranks
        if not ranks:
            raise VerifyException("#ascend.device_group: a group holds at least one device")
        if min(ranks) < 0:
            raise VerifyException(f"#ascend.device_group: device {min(ranks)} is negative")
        if len(set(ranks)) != len(ranks):
            raise VerifyException(f"#ascend.device_group: a device is listed twice in {list(ranks)}")

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<[" + ", ".join(str(r) for r in self.ranks) + "]>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            ranks = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        return (ArrayAttr([IntAttr(r) for r in ranks]),)


# Attributes of the module: the architecture and the chip it was lowered for (ArchAttr,
# TargetAttr; set by convert-nn-to-ascend, checked by ascend.kernel's verifier).
ARCH_ATTR = "ascend.arch"
TARGET_ATTR = "ascend.target"


def module_of(op: Operation) -> Operation:
    """The outermost op enclosing `op` (its module), or `op` itself."""
    while op.parent_op() is not None:
        op = op.parent_op()
    return op


def module_arch(op: Operation) -> Arch | None:
    """The `ascend.arch` of the enclosing module, if any.

    Raises:
        VerifyException: an `ascend.arch` that is not an #ascend.arch (a quoted "dav-c220")."""
    attr = module_of(op).attributes.get(ARCH_ATTR)
    if attr is None:
        return None
    if not isinstance(attr, ArchAttr):
        choices = ", ".join(f'#ascend.arch<"{a.value}">' for a in Arch)
        raise VerifyException(f"{ARCH_ATTR} = {attr_text(attr)} must be one of {choices}")
    return attr.data


def verify_module_attrs(op: Operation) -> None:
    """The module's `ascend.arch` is an #ascend.arch and its `ascend.target` an #ascend.target.

    Raises:
        VerifyException: naming the attribute, its text and the form it must take."""
    module_arch(op)
    target = module_of(op).attributes.get(TARGET_ATTR)
    if target is not None and not isinstance(target, TargetAttr):
        raise VerifyException(f"{TARGET_ATTR} = {attr_text(target)} must be an #ascend.target<\"NAME\">")


def attr_text(a: Attribute) -> str:
    """`a` as IR text (`2 : i64`, `"one"`), for error messages."""
    buf = io.StringIO()
    IRPrinter(stream=buf).print_attribute(a)  # user text as written, not byte escapes
    return buf.getvalue()


# Names of the discardable attributes ops declare (opt_attr_def) with these meanings:
# Integer attribute of tile ops, ascend.alloc and flags in a dav-c220 mix kernel: which AIV of the
# group (GetSubBlockIdx, S2) runs the op / owns the UB buffer; absent = 0.
SUBBLOCK_ATTR = "subblock"
# FlagUnitsAttr attribute of set_flag / wait_flag in a dav-c220 mix kernel: the units a flag joins.
FLAG_UNITS_ATTR = "units"
# Integer attributes of ascend.alloc: plan-memory's byte offset into the space, double-buffer's
# slot (0 / 1) of a ping-pong pair.
OFFSET_ATTR = "offset"
SLOT_ATTR = "ascend.slot"
# String attribute of ascend.kernel: the FFN template's plan, for the report.
FFN_PLAN_ATTR = "ffn_plan"
# TilingAttr attribute of nn.matmul / nn.attention.
TILING_ATTR = "ascend.tiling"
