"""`fuse-allgather-matmul`: the all_gather of a row shard (sequence parallelism: the norm's output
before the Q / K / V or gate / up projections) and the first MatMul [+ row bias] of the gathered
rows → `nn.fused {kind = #nn.fused_kind<all_gather_matmul>}` (MC2, ops-transformer
AllGatherMatmul), whose second result (gatherOut) feeds the other users of the gathered rows.

Runs on a sharded module (the -O2 pipeline's MC2 stage, pipelines.AFTER_SHARD). Matched by
templates/mc2.match_all_gather_matmul: the gather along an axis whose chunks are blocks of whole
rows, the first matmul user (2-D weight) in program order, every other user after it. A
matmul_epilogue region holding just matmul + bias is inlined first."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates import mc2
from ascendir.dialects import nn
from ascendir.conversion.nn_to_ascend.templates.epilogue import fuse_chain
from ascendir.transforms.nn.fuse_matmul_allreduce import bias_only_epilogue, unfuse_bias_epilogue


@dataclass(frozen=True)
class FuseAllGatherMatmul(ModulePass):
    """Fuse all_gather + matmul [+ bias] into nn.fused {kind = #nn.fused_kind<all_gather_matmul>}."""

    name = "fuse-allgather-matmul"
    chunks: int = 0  # stages of every region (1 .. the group's size; `mc2.chunks`); 0: the cost model chooses

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if not isinstance(f, func.FuncOp):
                continue
            for ag in [o for o in f.walk() if isinstance(o, nn.AllGatherOp) and not isinstance(o.parent_op(), nn.FusedOp)]:
                chains = []  # matmul + bias regions of the gathered rows: their matmul may join the MC2 region
                for use in list(ag.result.uses):
                    user = use.operation
                    if isinstance(user, nn.FusedOp) and user.operands[0] == ag.result and bias_only_epilogue(user.outputs[0]) is user:
                        chains.append(unfuse_bias_epilogue(user.outputs[0]))
                ops = mc2.match_all_gather_matmul(ag)
                if ops is not None:
                    mc2.fuse_all_gather_matmul(ops, self.chunks)
                for chain in chains:  # those not taken: their epilogue regions as they were
                    if all(op.parent_block() is not None and not isinstance(op.parent_op(), nn.FusedOp) for op in chain):
                        fuse_chain(chain)
