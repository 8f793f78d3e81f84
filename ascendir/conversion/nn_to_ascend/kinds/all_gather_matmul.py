"""The all_gather_matmul template (ops-transformer AllGatherMatmul, MC2): `nn.fused {kind =
#nn.fused_kind<all_gather_matmul>}` built by fuse-allgather-matmul from the all_gather of a row
shard (sequence parallelism) and the first MatMul [+ bias] of the gathered rows; the gathered
rows are its second result when other ops use them (the vendor op's gatherOut).

plan = templates/mc2.parse_sp; emit = mc2.emit_all_gather_matmul with the chunk count of
mc2.choose_sp_chunks for the lowering's topology (or the region's `mc2.chunks`): 1 (the
all_gather kernel, then the matmul, as unfused) or 2 .. n stages (mc2.gather_stages), the own
rows multiplied while the first exchange runs, each exchange's blocks multiplied beside the next
exchange (rank-symmetric mesh steps, several peers at once). No tiled site: the chunk's tiling is
searched at emission."""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.template import TemplateBase, gm_args
from ascendir.conversion.nn_to_ascend.templates import mc2
from ascendir.dialects import nn
from ascendir.dtypes import itemsize


class AllGatherMatmulTemplate(TemplateBase):
    kind = mc2.ALL_GATHER_MATMUL

    def plan(self, region: nn.FusedOp) -> mc2.SpPlan | Declined:
        """Declined unless the body is all_gather of whole row blocks → matmul [+ row bias]."""
        return mc2.sp_plan(region, gather=True)

    def emit(self, ctx: LoweringContext, plan: mc2.SpPlan, operands: list[SSAValue]) -> list[SSAValue]:
        p, n = plan.parts, plan.parts.coll.group.size
        chunks = mc2.chunks_of(ctx, plan.region, None)
        if chunks is not None and not 1 <= chunks <= n:
            raise ctx.error(f"{mc2.CHUNKS_ATTR} = {chunks}: an all_gather_matmul runs 1 to {n} stages (the devices)")
        if chunks is None:
            row_bytes = shape(p.mm.lhs)[-1] * itemsize(elem(p.mm.lhs))
            chunks = mc2.choose_sp_chunks(plan.problem, p.coll.group.ranks, row_bytes, ctx.target, True,
                                           mc2.recorded(ctx, p.mm, plan.problem), mc2.topology_for(ctx, p.coll.group.ranks)).chunks
        return mc2.emit_all_gather_matmul(ctx, p, gm_args(plan.region, operands), plan.problem,
                                          gathered=len(plan.region.outputs) == 2, chunks=chunks)


ALL_GATHER_MATMUL = AllGatherMatmulTemplate()
