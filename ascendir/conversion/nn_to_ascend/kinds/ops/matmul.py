"""The matmul op family: a plain nn.matmul (not in a planned region) as one cube kernel
(templates/matmul.emit_matmul), plus a split-K reduction kernel when its tiling splits K; one
matmul site (kinds/matmul_sites.py)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend import tiling
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase
from ascendir.conversion.nn_to_ascend.templates.matmul import emit_matmul, tiling_of
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig


@dataclass(frozen=True)
class MatmulPlan:
    op: nn.MatmulOp
    problem: tiling.Problem


class MatmulTemplate(MatmulTiles, TemplateBase):
    """The plain nn.matmul (no region): one cube kernel (templates/matmul.py), plus a split-K
    reduction kernel when its tiling splits K."""

    kind = "matmul"
    ops = (nn.MatmulOp,)

    def plan(self, op: nn.MatmulOp) -> MatmulPlan:
        """The op and its Problem: a matmul without epilogue, wherever it sits (one lowered op by
        op in a declined region is a plain matmul kernel too, so split-K applies); B stored in NZ
        fractals when it is a constant weight only matmuls read (tiling.nz_weight)."""
        return MatmulPlan(op, tiling.problem_of(op, b_nz=tiling.nz_weight(op)))

    def sites(self, plan: MatmulPlan, target: HardwareConfig) -> list[Site]:
        site = matmul_site(plan.op, plan.problem, target)
        return [site] if site is not None else []

    def emit(self, ctx: LoweringContext, plan: MatmulPlan, operands: list[SSAValue]) -> list[SSAValue]:
        res = plan.op.result
        return [emit_matmul(ctx, operands[0], operands[1], shape(res), elem(res), tiling=tiling_of(ctx, plan.op, plan.problem),
                            b_nz=plan.problem.b_nz)]


MATMUL = MatmulTemplate()
