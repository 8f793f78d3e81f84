"""Vector-unit ops of the `ascend` dialect: UB only, destination-passing style.

Every operand is a UB memref; the last one is written. Sources broadcast size-1 dims to the
destination shape (repeat stride 0 / `vbrcb`). One class per op; all run on the V pipe of an AIV
(`placement`). Costs per op live in the hardware TOML under [vector.ops].

Families (operands, then what `dest` receives):
* unary `ascend.vexp %src, %dst`: f(src) elementwise;
* binary `ascend.vadd %lhs, %rhs, %dst`: f(lhs, rhs) elementwise;
* scalar `ascend.vadds %src, %dst {scalar = 2.0 : f64}`: f(src, scalar);
* reduce `ascend.vreduce_sum %src, %dst`: the last dim reduced to 1;
* block reduce `ascend.vblock_reduce_max %src, %dst`: each 32-B data block of the last dim
  reduced to one element (BlockReduceMax / vcgmax), the last dim divided by the block's elements;
* vcast, vcmp, vsel, vdup, vtranspose, varange: see each class.

Element types: one for every operand (the dest's) unless the op says otherwise (vcast converts,
vcmp writes i1, vsel reads an i1 condition, logical ops work on i1). The element types each
chip's vector unit has are the target's check, not the dialect's.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, BoolAttr, FloatAttr, IndexType, IntegerAttr, IntegerType, MemRefType, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    opt_attr_def,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    traits_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import SUBBLOCK_ATTR, CmpPredicate, CmpPredicateAttr, MemSpace, Pipe, space_of
from ascendir.dialects.ascend.placement import RunsOn, Unit
from ascendir.dialects.cast_mode import RoundModeAttr, cast_mode, verify_cast_mode
from ascendir.dtypes import itemsize


# ----------------------------------------------------------------------------------------------
# vector unit (UB only, destination-passing style)
# ----------------------------------------------------------------------------------------------
def _broadcasts_to(src: Sequence[int], dst: Sequence[int]) -> bool:
    return len(src) == len(dst) and all(s in (1, d) for s, d in zip(src, dst))


class VectorOp(IRDLOperation):
    """Base of vector ops: every operand is a UB memref; sources broadcast size-1 dims to `dst`."""

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect(), RunsOn(Unit.AIV, Pipe.V))
    irdl_options = (ParsePropInAttrDict(),)
    subblock = opt_attr_def(IntegerAttr, attr_name=SUBBLOCK_ATTR)

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


class VectorBlockReduceOp(VectorOp):
    """Reduce each 32-B data block of `source`'s last dim (8 fp32 or 16 16-bit elements) to one
    element of `dest` (BlockReduceMax / BlockReduceSum, S2; the vcgmax / vcgadd instructions, S5):
    dest's last dim is source's divided by the block's elements, the other dims equal."""

    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue):
        super().__init__(operands=[src, dst])

    def verify_shapes(self) -> None:
        s, d = self.source.type.get_shape(), self.dest.type.get_shape()
        if self.source.type.element_type != self.dest.type.element_type:
            raise VerifyException(f"{self.name}: element types differ")
        per = BLOCK_BYTES // itemsize(self.dest.type.element_type)
        if len(s) != len(d) or tuple(s[:-1]) != tuple(d[:-1]) or s[-1] % per or d[-1] != s[-1] // per:
            raise VerifyException(f"{self.name}: dest must be the source shape with the last dim divided by "
                                  f"{per} (elements per 32-B block), source last dim a multiple of it")


BLOCK_BYTES = 32  # one vector data block [S2]


# ----------------------------------------------------------------------------------------------
# one class per op of the four families
# ----------------------------------------------------------------------------------------------
@irdl_op_definition
class VexpOp(VectorUnaryOp):
    """dest = exp, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vexp"


@irdl_op_definition
class VlnOp(VectorUnaryOp):
    """dest = natural log, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vln"


@irdl_op_definition
class VsqrtOp(VectorUnaryOp):
    """dest = square root, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vsqrt"


@irdl_op_definition
class VrsqrtOp(VectorUnaryOp):
    """dest = 1/sqrt, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vrsqrt"


@irdl_op_definition
class VrecOp(VectorUnaryOp):
    """dest = 1/x, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vrec"


@irdl_op_definition
class VabsOp(VectorUnaryOp):
    """dest = |x|, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vabs"


@irdl_op_definition
class VreluOp(VectorUnaryOp):
    """dest = max(x, 0), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vrelu"


@irdl_op_definition
class VsigmoidOp(VectorUnaryOp):
    """dest = sigmoid (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vsigmoid"


@irdl_op_definition
class VtanhOp(VectorUnaryOp):
    """dest = tanh (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vtanh"


@irdl_op_definition
class VerfOp(VectorUnaryOp):
    """dest = erf (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.verf"


@irdl_op_definition
class VgeluOp(VectorUnaryOp):
    """dest = GELU erf form (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vgelu"


@irdl_op_definition
class VgeluTanhOp(VectorUnaryOp):
    """dest = GELU tanh form (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vgelu_tanh"


@irdl_op_definition
class VsiluOp(VectorUnaryOp):
    """dest = x*sigmoid(x) (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vsilu"


@irdl_op_definition
class VsinOp(VectorUnaryOp):
    """dest = sine (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vsin"


@irdl_op_definition
class VcosOp(VectorUnaryOp):
    """dest = cosine (composite API), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vcos"


@irdl_op_definition
class VfloorOp(VectorUnaryOp):
    """dest = round toward -inf (vcast mode floor), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vfloor"


@irdl_op_definition
class VceilOp(VectorUnaryOp):
    """dest = round toward +inf (vcast mode ceil), elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vceil"


@irdl_op_definition
class VnotOp(VectorUnaryOp):
    """dest = not source, elementwise: logical on i1, bitwise on integers (16-bit lanes, as vand). One element type."""

    name = "ascend.vnot"


@irdl_op_definition
class VcopyOp(VectorUnaryOp):
    """dest = UB to UB copy, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vcopy"


@irdl_op_definition
class VnegOp(VectorUnaryOp):
    """dest = -x, elementwise on source. One element type for every operand (the dest's)."""

    name = "ascend.vneg"




@irdl_op_definition
class VaddOp(VectorBinaryOp):
    """dest = x + y, elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vadd"


@irdl_op_definition
class VsubOp(VectorBinaryOp):
    """dest = x - y, elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vsub"


@irdl_op_definition
class VmulOp(VectorBinaryOp):
    """dest = x * y, elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vmul"


@irdl_op_definition
class VdivOp(VectorBinaryOp):
    """dest = x / y, elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vdiv"


@irdl_op_definition
class VmaxOp(VectorBinaryOp):
    """dest = max, elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vmax"


@irdl_op_definition
class VminOp(VectorBinaryOp):
    """dest = min, elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vmin"


@irdl_op_definition
class VpowOp(VectorBinaryOp):
    """dest = x ** y (composite API), elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vpow"


@irdl_op_definition
class VandOp(VectorBinaryOp):
    """dest = lhs and rhs, elementwise: logical on i1, bitwise on integers (the vector unit's vand works on
    16-bit lanes; and is lane-width agnostic, so wider integers are the same instruction). One element type."""

    name = "ascend.vand"


@irdl_op_definition
class VorOp(VectorBinaryOp):
    """dest = lhs or rhs, elementwise: logical on i1, bitwise on integers (16-bit lanes, as vand). One element type."""

    name = "ascend.vor"


@irdl_op_definition
class VmodOp(VectorBinaryOp):
    """dest = remainder with the divisor's sign (composite), elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vmod"


@irdl_op_definition
class VfmodOp(VectorBinaryOp):
    """dest = remainder with the dividend's sign, C fmod (composite), elementwise on (lhs, rhs). One element type for every operand (the dest's)."""

    name = "ascend.vfmod"




@irdl_op_definition
class VaddsOp(VectorScalarOp):
    """dest = x + s, elementwise with the `scalar` property s. One element type for every operand (the dest's)."""

    name = "ascend.vadds"


@irdl_op_definition
class VmulsOp(VectorScalarOp):
    """dest = x * s, elementwise with the `scalar` property s. One element type for every operand (the dest's)."""

    name = "ascend.vmuls"


@irdl_op_definition
class VmaxsOp(VectorScalarOp):
    """dest = max(x, s), elementwise with the `scalar` property s. One element type for every operand (the dest's)."""

    name = "ascend.vmaxs"


@irdl_op_definition
class VminsOp(VectorScalarOp):
    """dest = min(x, s), elementwise with the `scalar` property s. One element type for every operand (the dest's)."""

    name = "ascend.vmins"


@irdl_op_definition
class VpowsOp(VectorScalarOp):
    """dest = x ** s (composite), elementwise with the `scalar` property s. One element type for every operand (the dest's)."""

    name = "ascend.vpows"




@irdl_op_definition
class VreduceSumOp(VectorReduceOp):
    """dest = sum of the last dim (WholeReduceSum) of source; dest has last dim 1. One element type for every operand (the dest's)."""

    name = "ascend.vreduce_sum"


@irdl_op_definition
class VreduceMaxOp(VectorReduceOp):
    """dest = max of the last dim (WholeReduceMax) of source; dest has last dim 1. One element type for every operand (the dest's)."""

    name = "ascend.vreduce_max"


@irdl_op_definition
class VreduceMinOp(VectorReduceOp):
    """dest = min of the last dim of source; dest has last dim 1. One element type for every operand (the dest's)."""

    name = "ascend.vreduce_min"


@irdl_op_definition
class VreduceProdOp(VectorReduceOp):
    """dest = product of the last dim (composite) of source; dest has last dim 1. One element type for every operand (the dest's)."""

    name = "ascend.vreduce_prod"




@irdl_op_definition
class VblockReduceMaxOp(VectorBlockReduceOp):
    """dest = max of each 32-B data block of source's last dim (BlockReduceMax). One element type for every operand (the dest's)."""

    name = "ascend.vblock_reduce_max"


@irdl_op_definition
class VblockReduceSumOp(VectorBlockReduceOp):
    """dest = sum of each 32-B data block of source's last dim (BlockReduceSum). One element type for every operand (the dest's)."""

    name = "ascend.vblock_reduce_sum"


VECTOR_UNARY: dict[str, type[VectorOp]] = {c.name.removeprefix('ascend.'): c for c in (VexpOp, VlnOp, VsqrtOp, VrsqrtOp, VrecOp, VabsOp, VreluOp, VsigmoidOp, VtanhOp, VerfOp, VgeluOp, VgeluTanhOp, VsiluOp, VsinOp, VcosOp, VfloorOp, VceilOp, VnotOp, VcopyOp, VnegOp)}
VECTOR_BINARY: dict[str, type[VectorOp]] = {c.name.removeprefix('ascend.'): c for c in (VaddOp, VsubOp, VmulOp, VdivOp, VmaxOp, VminOp, VpowOp, VandOp, VorOp, VmodOp, VfmodOp)}
VECTOR_SCALAR: dict[str, type[VectorOp]] = {c.name.removeprefix('ascend.'): c for c in (VaddsOp, VmulsOp, VmaxsOp, VminsOp, VpowsOp)}
VECTOR_REDUCE: dict[str, type[VectorOp]] = {c.name.removeprefix('ascend.'): c for c in (VreduceSumOp, VreduceMaxOp, VreduceMinOp, VreduceProdOp, VblockReduceMaxOp, VblockReduceSumOp)}
VECTOR_OPS: dict[str, type[VectorOp]] = {**VECTOR_UNARY, **VECTOR_BINARY, **VECTOR_SCALAR, **VECTOR_REDUCE}


def vector_op(opname: str) -> type[VectorOp]:
    """The op class of vector op `opname` (e.g. "vadd").

    Raises:
        KeyError: no such op in the four families."""
    return VECTOR_OPS[opname]


@irdl_op_definition
class VcastOp(VectorOp):
    """Element type conversion in UB, as `nn.cast` (ONNX Cast: round to nearest even; float→int
    truncates; `saturate` / `round_mode` for float 8 / E8M0 results, defaults when absent)."""

    name = "ascend.vcast"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    saturate = opt_prop_def(BoolAttr)
    round_mode = opt_prop_def(RoundModeAttr)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(self, src: SSAValue, dst: SSAValue, saturate: bool = True, round_mode: str = "up"):
        super().__init__(operands=[src, dst], properties=cast_mode(saturate, round_mode))

    def verify_shapes(self) -> None:
        if not _broadcasts_to(self.source.type.get_shape(), self.dest.type.get_shape()):
            raise VerifyException("ascend.vcast: source does not broadcast to dest")
        verify_cast_mode(self.name, self.dest.type.element_type, self.saturate, self.round_mode)


@irdl_op_definition
class VcmpOp(VectorOp):
    """dest (i1) = lhs <cmp> rhs with cmp (#ascend.cmp) in eq, ne, lt, le, gt, ge; lhs and rhs
    broadcast to dest."""

    name = "ascend.vcmp"
    lhs = operand_def(MemRefType)
    rhs = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    cmp = prop_def(CmpPredicateAttr)
    assembly_format = "$cmp $lhs `,` $rhs `,` $dest attr-dict `:` type($lhs) `,` type($rhs) `,` type($dest)"

    def __init__(self, cmp: str, lhs: SSAValue, rhs: SSAValue, dst: SSAValue):
        super().__init__(operands=[lhs, rhs, dst], properties={"cmp": CmpPredicateAttr(CmpPredicate(cmp))})

    def verify_shapes(self) -> None:
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
        if not all(isinstance(p, IntegerAttr) and isinstance(p.type, IntegerType) for p in self.perm.data):
            raise VerifyException("ascend.vtranspose: perm must be a list of integers")
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
