"""DMA ops of the `ascend` dialect: `ascend.copy` between memory spaces and `ascend.gather_rows`.

The pipe of a copy follows from its (src, dst) spaces and the module's architecture
(`placement.copy_pipe`): GM→L1/UB = MTE2, L1→L0A/L0B = MTE1, UB→GM = MTE3, L0C→GM/L1 = FIX,
L0C→UB on coupled cores = V.

Copy semantics: the leading overlap `min(src, dst)` of every dim is copied; dst elements outside
it are zero-filled when dst is on chip (hardware padding of partial tiles).
"""

from __future__ import annotations

from xdsl.dialects.builtin import BoolAttr, IntegerAttr, MemRefType, f32, i1
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_prop_def,
    traits_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import SUBBLOCK_ATTR, Layout, LayoutAttr, MemSpace, Pipe, module_arch, space_of
from ascendir.dialects.ascend.placement import RunsOn, Unit, placement


@irdl_op_definition
class CopyOp(IRDLOperation):
    """DMA `src` → `dst` (same rank). The pipe follows from the spaces (see `copy_pipe`).

    Properties: `layout` = #ascend.layout<nd> (default), <nd2nz> (GM→L1 on MTE2), <nz> (GM→L1
    of a source stored in NZ fractals: no conversion) or <nz2nd> (FixPipe out); `relu = true` (FixPipe only) applies ReLU on the way out. FixPipe (L0C→GM/L1) may narrow f32 to
    f16/bf16; other copies keep the element type. `transpose = true` (MTE1 L1→L0A/L0B only, 2-D):
    dst = srcᵀ, the load2d-with-transpose of the S1 intrinsic map (`transpose_l12l0a/b`, Ascend C
    LoadData2DParams.ifTranspose); the overlap rule then applies to srcᵀ.

    Raises (verify): a path the module's architecture lacks, ranks that differ, an element type
    change off FixPipe, relu off FixPipe, transpose off a 2-D MTE1 L1 -> L0A/L0B load, layout nz
    off a GM -> L1 copy.
    """

    name = "ascend.copy"
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    layout = opt_prop_def(LayoutAttr)
    relu = opt_prop_def(BoolAttr)
    transpose = opt_prop_def(BoolAttr)
    subblock = opt_attr_def(IntegerAttr, attr_name=SUBBLOCK_ATTR)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect(), RunsOn(rule="copy"))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source `,` $dest attr-dict `:` type($source) `,` type($dest)"

    def __init__(
        self, src: SSAValue, dst: SSAValue, layout: str | None = None, relu: bool = False, transpose: bool = False
    ):
        props: dict[str, Attribute] = {}
        if layout:
            props["layout"] = LayoutAttr(Layout(layout))
        if relu:
            props["relu"] = BoolAttr(True, i1)
        if transpose:
            props["transpose"] = BoolAttr(True, i1)
        super().__init__(operands=[src, dst], properties=props)

    @property
    def pipe(self) -> Pipe:
        """The pipe of this copy on its module's architecture (`placement`)."""
        return placement(self, module_arch(self)).pipe

    def verify_(self) -> None:
        s, d = self.source.type, self.dest.type
        src_space, dst_space = space_of(s), space_of(d)
        pipe = self.pipe
        if s.get_num_dims() != d.get_num_dims():
            raise VerifyException(f"ascend.copy: ranks differ ({s} vs {d})")
        narrowing = src_space == MemSpace.L0C and s.element_type == f32 and d.element_type != f32
        if s.element_type != d.element_type and not narrowing:
            raise VerifyException("ascend.copy: only FixPipe (L0C out) may change the element type")
        if self.layout is not None and self.layout.data == Layout.NZ and (src_space, dst_space) != (MemSpace.GM, MemSpace.L1):
            raise VerifyException("ascend.copy: layout nz is a GM -> L1 load of NZ-stored data only")
        if self.relu is not None and pipe not in (Pipe.FIX, Pipe.V):
            raise VerifyException("ascend.copy: relu is applied by FixPipe only")
        if self.transpose is not None and self.transpose.value.data:
            if src_space != MemSpace.L1 or dst_space not in (MemSpace.L0A, MemSpace.L0B) or s.get_num_dims() != 2:
                raise VerifyException("ascend.copy: transpose is a 2-D L1 -> L0A/L0B load (MTE1) only")


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
    subblock = opt_attr_def(IntegerAttr, attr_name=SUBBLOCK_ATTR)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect(), RunsOn(Unit.AIV, Pipe.MTE2))
    assembly_format = "$table `,` $indices `,` $dest attr-dict `:` type($table) `,` type($indices) `,` type($dest)"

    def __init__(self, table: SSAValue, indices: SSAValue, dst: SSAValue):
        super().__init__(operands=[table, indices, dst])

    def verify_(self) -> None:
        if space_of(self.table) != MemSpace.GM or space_of(self.indices) != MemSpace.UB or space_of(self.dest) != MemSpace.UB:
            raise VerifyException("ascend.gather_rows: table in GM, indices and dest in UB")
