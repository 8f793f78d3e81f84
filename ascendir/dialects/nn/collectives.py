"""Collectives of the `nn` dialect: what a tensor-, sequence- or expert-parallel model exchanges.

A sharded module is SPMD: every device of a group runs the same module on its own shard (its own
WeightStore holds its slices of the weights, under the unsharded names), and these ops are the
points where the ranks meet. Each names its `group` (`#ascend.device_group<[...]>`); chunk i of a
gathered, scattered or exchanged axis belongs to the group's i-th device, as in HCCL. The types
are one rank's: an all_gather's result is `group.size` times its operand along `axis`.

    %y = nn.all_reduce %x {group = #ascend.device_group<[0, 1]>} : (tensor<4x8xf16>) -> tensor<4x8xf16>
    %y = nn.all_gather %x {group = ..., axis = 0 : i64} : (tensor<4x8xf16>) -> tensor<8x8xf16>
    %y = nn.reduce_scatter %x {group = ..., axis = 0 : i64} : (tensor<8x8xf16>) -> tensor<4x8xf16>
    %y = nn.all_to_all %x {group = ..., split_axis = 0 : i64, concat_axis = 1 : i64}
           : (tensor<8x8xf16>) -> tensor<4x16xf16>

The reduction is a sum (Megatron's row-parallel output and its sequence-parallel form; HCCL's
reduce op `sum`), accumulated in f32 for 16-bit floats.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import DeviceGroupAttr
from ascendir.dialects.nn.ops import NNOp, shape_of


class CollectiveOp(NNOp):
    """A collective over `group`: one operand, one result of the same element type."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    group = prop_def(DeviceGroupAttr)

    def _expected_shape(self, shape: tuple[int, ...], n: int) -> tuple[int, ...]:
        return shape

    def verify_semantics(self) -> None:
        if self.input.type.element_type != self.result.type.element_type:
            raise VerifyException(f"{self.name}: the result keeps the operand's element type")
        shape, n = shape_of(self.input), self.group.size
        expect = self._expected_shape(shape, n)
        if shape_of(self.result) != expect:
            raise VerifyException(f"{self.name}: over {n} devices, operand {list(shape)} gives result {list(expect)}, "
                                  f"not {list(shape_of(self.result))}")

    def _axis(self, name: str, rank: int) -> int:
        axis = getattr(self, name).value.data
        if not 0 <= axis < rank:
            raise VerifyException(f"{self.name}: {name} {axis} out of range for rank {rank}")
        return axis

    def _divisible(self, shape: tuple[int, ...], axis: int, n: int, what: str) -> None:
        if shape[axis] % n:
            raise VerifyException(f"{self.name}: {what} dim {axis} ({shape[axis]}) does not split over {n} devices")


@irdl_op_definition
class AllReduceOp(CollectiveOp):
    """Every device gets the sum of all devices' operands (same shape)."""

    name = "nn.all_reduce"

    def __init__(self, x: SSAValue, group: DeviceGroupAttr):
        super().__init__(operands=[x], result_types=[x.type], properties={"group": group})


@irdl_op_definition
class AllGatherOp(CollectiveOp):
    """Every device gets all operands concatenated along `axis` in group order."""

    name = "nn.all_gather"
    axis = prop_def(IntegerAttr)

    def __init__(self, x: SSAValue, group: DeviceGroupAttr, axis: int):
        shape = list(shape_of(x))
        shape[axis] *= group.size
        super().__init__(operands=[x], result_types=[TensorType(x.type.element_type, shape)],
                         properties={"group": group, "axis": IntegerAttr(axis, i64)})

    def _expected_shape(self, shape: tuple[int, ...], n: int) -> tuple[int, ...]:
        axis = self._axis("axis", len(shape))
        return (*shape[:axis], shape[axis] * n, *shape[axis + 1 :])


@irdl_op_definition
class ReduceScatterOp(CollectiveOp):
    """The sum of all devices' operands, split along `axis`: device i of the group keeps chunk i."""

    name = "nn.reduce_scatter"
    axis = prop_def(IntegerAttr)

    def __init__(self, x: SSAValue, group: DeviceGroupAttr, axis: int):
        shape = list(shape_of(x))
        shape[axis] //= group.size
        super().__init__(operands=[x], result_types=[TensorType(x.type.element_type, shape)],
                         properties={"group": group, "axis": IntegerAttr(axis, i64)})

    def _expected_shape(self, shape: tuple[int, ...], n: int) -> tuple[int, ...]:
        axis = self._axis("axis", len(shape))
        self._divisible(shape, axis, n, "scattered")
        return (*shape[:axis], shape[axis] // n, *shape[axis + 1 :])


@irdl_op_definition
class AllToAllOp(CollectiveOp):
    """Each device splits its operand along `split_axis` into group-size chunks and sends chunk j to
    the group's j-th device; each device concatenates what it receives along `concat_axis` in
    group order (MoE dispatch / combine, Ulysses sequence parallelism)."""

    name = "nn.all_to_all"
    split_axis = prop_def(IntegerAttr)
    concat_axis = prop_def(IntegerAttr)

    def __init__(self, x: SSAValue, group: DeviceGroupAttr, split_axis: int, concat_axis: int):
        shape = list(shape_of(x))
        shape[split_axis] //= group.size
        shape[concat_axis] *= group.size
        super().__init__(operands=[x], result_types=[TensorType(x.type.element_type, shape)],
                         properties={"group": group, "split_axis": IntegerAttr(split_axis, i64),
                                     "concat_axis": IntegerAttr(concat_axis, i64)})

    def _expected_shape(self, shape: tuple[int, ...], n: int) -> tuple[int, ...]:
        split, concat = self._axis("split_axis", len(shape)), self._axis("concat_axis", len(shape))
        self._divisible(shape, split, n, "split")
        out = list(shape)
        out[split] //= n
        out[concat] *= n
        return tuple(out)
