"""The matmul_all_reduce template (ops-transformer MatmulAllReduce, MC2): `nn.fused {kind =
#nn.fused_kind<matmul_all_reduce>}` built by fuse-matmul-allreduce from a row-parallel MatMul
[+ bias], its nn.all_reduce [and the residual add after it].

plan = templates/mc2.parse_matmul_all_reduce and the chunk count of mc2.choose_chunks for the
lowering's topology (the
matmul estimate of a chunk and the all_reduce of its rows, pipelined); emit =
mc2.emit_matmul_all_reduce: per row chunk a cube kernel and the all_reduce comm kernel of its
rows on the comm stream beside the next chunk's matmul, then the residual add (one vector
kernel). No tiled site: each chunk's tiling is searched for the chunk's shape at emission. A
region carrying `mc2.chunks` (fuse-matmul-allreduce{chunks=N}) uses that count."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend import tiling
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.template import TemplateBase, gm_args
from ascendir.conversion.nn_to_ascend.templates import mc2
from ascendir.dialects import nn
from ascendir.dtypes import itemsize


@dataclass(frozen=True)
class MatmulAllReducePlan:
    region: nn.FusedOp
    parts: mc2.MatmulAllReduceParts
    problem: tiling.Problem  # the whole matmul, rows folded into m


class MatmulAllReduceTemplate(TemplateBase):
    kind = mc2.MATMUL_ALL_REDUCE

    def plan(self, region: nn.FusedOp) -> MatmulAllReducePlan | Declined:
        """Declined unless the body is matmul [+ row bias] → all_reduce [+ residual]."""
        parts = mc2.parse_matmul_all_reduce(region)
        if isinstance(parts, Declined):
            return parts
        problem = mc2.matmul_all_reduce_problem(parts)
        return MatmulAllReducePlan(region, parts, problem)

    def emit(self, ctx: LoweringContext, plan: MatmulAllReducePlan, operands: list[SSAValue]) -> list[SSAValue]:
        p = plan.parts
        row_bytes = shape(p.ar.result)[-1] * itemsize(elem(p.ar.result))
        chunks = mc2.chunks_of(ctx, plan.region, plan.problem.m)
        if chunks is None:
            chunks = mc2.choose_chunks(plan.problem, "all_reduce", row_bytes, p.ar.group.ranks, ctx.target,
                                        mc2.recorded(ctx, mc2.down_of(p), plan.problem), mc2.topology_for(ctx, p.ar.group.ranks)).chunks
        return [mc2.emit_matmul_all_reduce(ctx, p, gm_args(plan.region, operands), plan.problem, chunks)]


MATMUL_ALL_REDUCE = MatmulAllReduceTemplate()
