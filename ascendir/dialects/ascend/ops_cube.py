"""The cube op of the `ascend` dialect: `ascend.mmad` (L0A × L0B → L0C on the M pipe of the AIC)."""

from __future__ import annotations

from xdsl.dialects.builtin import BoolAttr, IntegerAttr, MemRefType, f32, i1
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    prop_def,
    traits_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import SUBBLOCK_ATTR, MemSpace, Pipe, space_of
from ascendir.dialects.ascend.placement import RunsOn, Unit

_K_ALIGN = {16: 16, 32: 8, 8: 32}  # K alignment by element bits (S3 alignment table)


@irdl_op_definition
class MmadOp(IRDLOperation):
    """Cube matrix multiply-accumulate: c[M,N] (+)= a[M,K] @ b[K,N].

    a in L0A, b in L0B (f16/bf16/f32, or s8), c in L0C (f32, or i32 for s8). `init = true`
    starts from zero, `false` accumulates. M and N are multiples of 16 and K of 32 B / element size (S3); each
    of M, N, K ≤ 4095 (S2 Mmad page). Cost: ceil(M/16)·ceil(N/16)·ceil(K/k_per_cycle) cycles plus
    start-up (hardware TOML).

    Optional `bias` (only with `init = true`): a [1, N] row in the bias table (BT, 910B), broadcast
    over the M rows as the initial value, i.e. c = bias + a @ b (Ascend C Mmad with
    `cmatrixSource` = BT, S2 Mmad page; S1 lists `l12bt`). Its element type is that of a or f32.

        ascend.mmad %a, %b, %c bias(%bt : memref<1x128xf16, #ascend<space bt>>) {init = true} : ...
    """

    name = "ascend.mmad"
    a = operand_def(MemRefType)
    b = operand_def(MemRefType)
    c = operand_def(MemRefType)
    bias = opt_operand_def(MemRefType)
    init = prop_def(BoolAttr)
    subblock = opt_attr_def(IntegerAttr, attr_name=SUBBLOCK_ATTR)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect(), RunsOn(Unit.AIC, Pipe.M))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$a `,` $b `,` $c (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict `:` type($a) `,` type($b) `,` type($c)"
    )

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue, init: bool, bias: SSAValue | None = None):
        super().__init__(
            operands=[a, b, c, [bias] if bias is not None else []], properties={"init": BoolAttr(bool(init), i1)}
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
            if not self.init.value.data:
                raise VerifyException("ascend.mmad: bias is the initial value, so it needs init = true")
