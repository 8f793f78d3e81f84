"""The scalar read of the `ascend` dialect: `ascend.get_value` (Ascend C `GlobalTensor::GetValue`
/ `LocalTensor::GetValue`), an integer element of a GM or UB buffer read by the scalar unit into
an `index`, so data can bound loops and offset tiles (a grouped MatMul's group list).

    %lo = ascend.get_value %group_list[%e] : memref<9xi64, #ascend<space gm>>

Why its own op rather than `memref.load` + `arith.index_cast`: a read from GM goes through the
scalar DCache to HBM (its cost is a DCache hit or a GM read latency, not an ALU op), and the
value it yields is data: the interpreter's steady-state extrapolation and launch memo must know
a kernel's control flow depends on it, in timing-only runs too.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType, IntegerType, MemRefType
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, result_def, traits_def, var_operand_def
from xdsl.traits import MemoryReadEffect
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import MemSpace, Pipe, space_of
from ascendir.dialects.ascend.placement import RunsOn

# on an `ascend.kernel` of MoeInitRouting (its arguments: ids [R], sorted_rows [R], dest [R],
# group_list [E+1]): the MoE block whose routing it sorts. A timing-only run moves no data, so the
# interpreter writes that block's routing into the outputs (interpreter/sim/chip.py).
MOE_BLOCK_ATTR = "moe_block"
# on an @main argument: data the kernels address by (a paged KV cache's block table, read with
# ascend.get_value), which a timing-only run keeps when it is given (interpreter/sim/chip.py): a
# table of zeros would send every read to one block
ADDRESS_DATA_ATTR = "ascend.address_data"


@irdl_op_definition
class GetValueOp(IRDLOperation):
    """result = source[indices] as an index (one integer element, i32 or i64).

    source: a GM or UB memref of integers, one index operand per dim. Runs on the scalar pipe S
    (no fixed unit: every core has one). Cost (interpreter): from GM `memory.dcache_hit_latency`
    cycles on a hit of the unit's scalar DCache, `memory.gm_read_latency` on a miss (it reads HBM;
    S5; interpreter/timing/dcache.py), `startup.scalar_alu` from UB.

    Raises (verify): a source outside GM / UB, a non-integer element type, an index count that
    differs from the rank."""

    name = "ascend.get_value"
    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(IndexType)
    traits = traits_def(MemoryReadEffect(), RunsOn(None, Pipe.S))
    assembly_format = "$source `[` $indices `]` attr-dict `:` type($source)"

    def __init__(self, source: SSAValue, indices: list[SSAValue]):
        super().__init__(operands=[source, indices], result_types=[IndexType()])

    def verify_(self) -> None:
        t = self.source.type
        if space_of(t) not in (MemSpace.GM, MemSpace.UB):
            raise VerifyException(f"ascend.get_value: source in {space_of(t).value}, expected gm or ub")
        if not isinstance(t.element_type, IntegerType) or t.element_type.width.data not in (32, 64):
            raise VerifyException(f"ascend.get_value: source elements must be i32 or i64, got {t.element_type}")
        if len(self.indices) != t.get_num_dims():
            raise VerifyException(f"ascend.get_value: {len(self.indices)} indices for a rank-{t.get_num_dims()} source")
