"""Expert-parallel exchanges of the `nn` dialect: ops-transformer's MoeDistributeDispatch and
MoeDistributeCombine, the all-to-all that sends each routed (token, k) pair to the device holding
its expert and brings the expert's output back.

Over a group of N devices with E experts, device q holds experts q·El .. (q+1)·El - 1
(El = E / N). Each device brings P pairs (its rows `x` [P, H] and their global expert ids
[P]); the exchange sizes depend on the routing, so the receive side is a fixed-capacity buffer as
MoeDistributeDispatch's expand buffers are: slot s (P rows) of device q holds what device s sent
it, the rest of the slot unused.

    %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {group = ..., experts = 8 : i64}
        : (tensor<64x128xf16>, tensor<64xi64>) -> (tensor<128x128xf16>, tensor<128xi64>, tensor<2x5xi64>, tensor<64xi64>)
    %y = nn.moe_distribute_combine %ey, %offs, %idx {group = ..., experts = 8 : i64}
        : (tensor<128x128xf16>, tensor<2x5xi64>, tensor<64xi64>) -> tensor<64x128xf16>

dispatch, on device q (sender s's pairs sorted stably by expert, as MoeInitRouting sorts them):

* expand_x [N·P, H]: row s·P + i = the i-th of s's sorted pairs whose expert lies on q; rows past
  that count are zero (unused capacity);
* expand_ids [N·P] i64: that pair's local expert id (global - q·El); El marks an unused row;
* ep_recv_offsets [N, El+1] i64: row s = s's cumulative expert counts (MoeInitRouting's group
  list) at experts q·El .. (q+1)·El: s's pairs for q are its sorted positions
  offs[s, 0] .. offs[s, El] - 1 (ops-transformer's ep_recv_counts, kept as offsets);
* expand_idx [P] i64: this device's own pairs' sorted positions (MoeInitRouting's
  expanded_row_idx; ops-transformer's assist_info_for_combine).

combine, on device s: expand_y [N·P, H] (each device's expert outputs, rows as its expand_x) goes
back along the same routes: s's sorted row offs_q[s, 0] + i = row s·P + i of q's expand_y, then
y [P, H] row j = sorted row expand_idx[j] (back in (token, k) order; the weighting by the
router's scores stays with moe_finalize_routing).

The ops are only meaningful across the ranks: interpreter/exec/spmd_reference.py gives their
numpy semantics (`spmd_dispatch` / `spmd_combine`), the lowering is a comm kernel each
(conversion/nn_to_ascend/templates/moe_distribute.py).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import DeviceGroupAttr
from ascendir.dialects.nn.ops import NNOp, shape_of


class MoeDistributeOp(NNOp):
    """An expert-parallel exchange over `group` with `experts` experts in all (E / group size on
    each device)."""

    group = prop_def(DeviceGroupAttr)
    experts = prop_def(IntegerAttr)

    @property
    def local_experts(self) -> int:
        return self.experts.value.data // self.group.size

    def _check_experts(self) -> None:
        e, n = self.experts.value.data, self.group.size
        if e < 1 or e % n:
            raise VerifyException(f"{self.name}: {e} experts do not split over {n} devices")

    def _check_i64(self, v: SSAValue, what: str) -> None:
        el = v.type.element_type
        if not isinstance(el, IntegerType) or el.width.data != 64:
            raise VerifyException(f"{self.name}: {what} must be i64, got {el}")


def _props(group: DeviceGroupAttr, experts: int) -> dict:
    return {"group": group, "experts": IntegerAttr(experts, i64)}


@irdl_op_definition
class MoeDistributeDispatchOp(MoeDistributeOp):
    """x [P, H], expert ids [P] (global) -> expand_x [N·P, H], expand_ids [N·P],
    ep_recv_offsets [N, El+1], expand_idx [P] (module docstring)."""

    name = "nn.moe_distribute_dispatch"
    x = operand_def(TensorType)
    expert_ids = operand_def(TensorType)
    expand_x = result_def(TensorType)
    expand_ids = result_def(TensorType)
    ep_recv_offsets = result_def(TensorType)
    expand_idx = result_def(TensorType)

    def __init__(self, x: SSAValue, expert_ids: SSAValue, group: DeviceGroupAttr, experts: int):
        p, h = shape_of(x)
        n = group.size
        types = [TensorType(x.type.element_type, [n * p, h]), TensorType(i64, [n * p]),
                 TensorType(i64, [n, experts // n + 1]), TensorType(i64, [p])]
        super().__init__(operands=[x, expert_ids], result_types=types, properties=_props(group, experts))

    def verify_semantics(self) -> None:
        self._check_experts()
        self._check_i64(self.expert_ids, "expert_ids")
        xs = shape_of(self.x)
        if len(xs) != 2 or shape_of(self.expert_ids) != xs[:1]:
            raise VerifyException(f"{self.name}: x must be [P, H] and expert_ids [P], got {list(xs)} and {list(shape_of(self.expert_ids))}")
        p, h = xs
        n = self.group.size
        want = [(n * p, h), (n * p,), (n, self.local_experts + 1), (p,)]
        got = [shape_of(r) for r in self.results]
        if got != want:
            raise VerifyException(f"{self.name}: results must be {[list(w) for w in want]}, got {[list(g) for g in got]}")
        if self.expand_x.type.element_type != self.x.type.element_type:
            raise VerifyException(f"{self.name}: expand_x keeps x's element type")


@irdl_op_definition
class MoeDistributeCombineOp(MoeDistributeOp):
    """expand_y [N·P, H], ep_recv_offsets [N, El+1], expand_idx [P] -> y [P, H] (module docstring)."""

    name = "nn.moe_distribute_combine"
    expand_y = operand_def(TensorType)
    ep_recv_offsets = operand_def(TensorType)
    expand_idx = operand_def(TensorType)
    result = result_def(TensorType)

    def __init__(self, expand_y: SSAValue, offsets: SSAValue, expand_idx: SSAValue, group: DeviceGroupAttr, experts: int):
        h = shape_of(expand_y)[1]
        p = shape_of(expand_idx)[0]
        super().__init__(operands=[expand_y, offsets, expand_idx], result_types=[TensorType(expand_y.type.element_type, [p, h])],
                         properties=_props(group, experts))

    def verify_semantics(self) -> None:
        self._check_experts()
        self._check_i64(self.ep_recv_offsets, "ep_recv_offsets")
        self._check_i64(self.expand_idx, "expand_idx")
        n = self.group.size
        (p,) = shape_of(self.expand_idx)
        ys = shape_of(self.expand_y)
        if len(ys) != 2 or ys[0] != n * p or shape_of(self.ep_recv_offsets) != (n, self.local_experts + 1):
            raise VerifyException(f"{self.name}: expand_y {list(ys)}, offsets {list(shape_of(self.ep_recv_offsets))} and "
                                  f"expand_idx [{p}] do not fit {n} devices")
        if shape_of(self.result) != (p, ys[1]) or self.result.type.element_type != self.expand_y.type.element_type:
            raise VerifyException(f"{self.name}: the result must be [{p}, {ys[1]}] of expand_y's element type")
