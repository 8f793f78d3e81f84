"""The matmul_reduce_scatter template (ops-transformer MatmulReduceScatter, MC2): `nn.fused {kind
= #nn.fused_kind<matmul_reduce_scatter>}` built by fuse-matmul-reducescatter from a row-parallel
MatMul [+ bias] and the reduce_scatter of its rows (sequence parallelism).

plan = templates/mc2.parse_sp; emit = mc2.emit_matmul_reduce_scatter with the stage count of
mc2.choose_sp_chunks for the lowering's topology (1 .. n: stage e's row blocks go to their owners,
several at once, beside the next stage's matmuls) or the region's `mc2.chunks`. No tiled site:
each block's tiling is searched for the block's shape at emission."""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.template import TemplateBase, gm_args
from ascendir.conversion.nn_to_ascend.templates import mc2
from ascendir.dialects import nn
from ascendir.dtypes import itemsize


class MatmulReduceScatterTemplate(TemplateBase):
    kind = mc2.MATMUL_REDUCE_SCATTER

    def plan(self, region: nn.FusedOp) -> mc2.SpPlan | Declined:
        """Declined unless the body is matmul [+ row bias] → reduce_scatter of whole row blocks."""
        return mc2.sp_plan(region, gather=False)

    def emit(self, ctx: LoweringContext, plan: mc2.SpPlan, operands: list[SSAValue]) -> list[SSAValue]:
        p, n = plan.parts, plan.parts.coll.group.size
        chunks = mc2.chunks_of(ctx, plan.region, None)
        if chunks is not None and not 1 <= chunks <= n:
            raise ctx.error(f"{mc2.CHUNKS_ATTR} = {chunks}: a matmul_reduce_scatter runs 1 to {n} stages (the devices)")
        if chunks is None:
            row_bytes = shape(p.coll.result)[-1] * itemsize(elem(p.coll.result))
            chunks = mc2.choose_sp_chunks(plan.problem, p.coll.group.ranks, row_bytes, ctx.target, False,
                                           mc2.recorded(ctx, p.mm, plan.problem), mc2.topology_for(ctx, p.coll.group.ranks)).chunks
        return [mc2.emit_matmul_reduce_scatter(ctx, p, gm_args(plan.region, operands), plan.problem, chunks)]


MATMUL_REDUCE_SCATTER = MatmulReduceScatterTemplate()
