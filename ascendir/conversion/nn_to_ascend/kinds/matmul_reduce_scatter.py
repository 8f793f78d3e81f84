"""The matmul_reduce_scatter template (ops-transformer MatmulReduceScatter, MC2): `nn.fused {kind
= #nn.fused_kind<matmul_reduce_scatter>}` built by fuse-matmul-reducescatter from a row-parallel
MatMul [+ bias] and the reduce_scatter of its rows (sequence parallelism).

plan = templates/mc2.parse_sp; emit = mc2.emit_matmul_reduce_scatter with the chunk count of
mc2.choose_sp_chunks (a multiple of the group: each chunk goes to one owner) or the region's
`mc2.chunks`. No tiled site: each chunk's tiling is searched for the chunk's shape at emission."""

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
        chunks = mc2.chunks_of(ctx, plan.region, plan.problem.m)
        if chunks is not None and chunks % n and chunks != 1:
            raise ctx.error(f"{mc2.CHUNKS_ATTR} = {chunks} is not a multiple of the group's {n} devices")
        if chunks is None:
            row_bytes = shape(p.coll.result)[-1] * itemsize(elem(p.coll.result))
            chunks = mc2.choose_sp_chunks(plan.problem, n, row_bytes, ctx.target, False,
                                           mc2.recorded(ctx, p.mm, plan.problem)).chunks
        return [mc2.emit_matmul_reduce_scatter(ctx, p, gm_args(plan.region, operands), plan.problem, chunks)]


MATMUL_REDUCE_SCATTER = MatmulReduceScatterTemplate()
