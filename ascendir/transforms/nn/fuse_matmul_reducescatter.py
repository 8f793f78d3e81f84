"""`fuse-matmul-reducescatter`: a row-parallel MatMul [+ row bias] whose rows are reduce-scattered
(sequence parallelism: o_proj / down_proj before the sharded residual) → `nn.fused {kind =
#nn.fused_kind<matmul_reduce_scatter>}` (MC2, ops-transformer MatmulReduceScatter).

Runs on a sharded module (the -O2 pipeline's MC2 stage, pipelines.AFTER_SHARD). Matched
(templates/mc2.match_matmul_reduce_scatter): nn.matmul (2-D weight) [+ nn.add of a row bias] →
nn.reduce_scatter along an axis whose chunks are blocks of whole rows, every intermediate used
once. A matmul_epilogue region holding just matmul + bias is inlined first."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates import mc2
from ascendir.dialects import nn
from ascendir.transforms.nn.fuse_matmul_allreduce import fuse_before_collective


@dataclass(frozen=True)
class FuseMatmulReduceScatter(ModulePass):
    """Fuse matmul [+ bias] + reduce_scatter into nn.fused {kind = #nn.fused_kind<matmul_reduce_scatter>}."""

    name = "fuse-matmul-reducescatter"
    chunks: int = 0  # stages of every region (1 .. the group's size; `mc2.chunks`); 0: the cost model chooses

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_before_collective(op, nn.ReduceScatterOp, mc2.match_matmul_reduce_scatter, mc2.MATMUL_REDUCE_SCATTER,
                               self.chunks)
