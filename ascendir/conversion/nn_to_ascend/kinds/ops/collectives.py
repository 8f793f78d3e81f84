"""The collective op family (templates/collectives.py): nn.all_reduce / all_gather /
reduce_scatter / all_to_all as comm kernels of HCCL's mesh algorithms, and the expert-parallel
nn.moe_distribute_dispatch / combine (templates/moe_distribute.py). plan = the op; emit = its
comm kernel, by op class."""

from __future__ import annotations

from ascendir.conversion.nn_to_ascend.kinds.ops.emitters import EmitterFamily
from ascendir.conversion.nn_to_ascend.templates import collectives as c
from ascendir.conversion.nn_to_ascend.templates import moe_distribute as md
from ascendir.dialects import nn

COLLECTIVES = EmitterFamily("collective", {
    nn.AllReduceOp: c.lower_all_reduce,
    nn.AllGatherOp: c.lower_all_gather,
    nn.ReduceScatterOp: c.lower_reduce_scatter,
    nn.AllToAllOp: c.lower_all_to_all,
    nn.MoeDistributeDispatchOp: md.lower_dispatch,
    nn.MoeDistributeCombineOp: md.lower_combine,
})
