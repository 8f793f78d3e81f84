"""The norm_matmul template (protocol side): plan = the norm, the optional row reshape and one
templates/epilogue chain per projection of the normalized rows (parse_chain, as fuse-norm-matmul
built them); emit = templates/norm_matmul.emit_norm_matmul; one matmul site per projection."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend import tiling
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase, gm_args, gm_epilogue
from ascendir.conversion.nn_to_ascend.templates.matmul import Product, tiling_of
from ascendir.conversion.nn_to_ascend.templates.norm_matmul import NormMatmul, emit_norm_matmul, parse_norm_matmul
from ascendir.dialects import nn
from ascendir.dtypes import itemsize
from ascendir.hardware.config import HardwareConfig

KIND = "norm_matmul"


@dataclass(frozen=True)
class NormMatmulPlan:
    region: nn.FusedOp
    parsed: NormMatmul
    problems: tuple[tiling.Problem, ...]  # per projection


class NormMatmulTemplate(MatmulTiles, TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> NormMatmulPlan | Declined:
        """Declined unless the body is norm [+ reshape] and the projections of its result with
        their epilogue chains, each chain yielded (templates/norm_matmul.parse_norm_matmul).
        Each projection's matmul is searched as one with an epilogue (no split-K) and without
        its bias row."""
        parsed = parse_norm_matmul(region)
        if isinstance(parsed, Declined):
            return parsed
        # one B layout for the kernel's products: NZ when every projection's weight is (tiling.nz_weight)
        nz = all(tiling.nz_weight(p.mm) for p in parsed.projections)
        return NormMatmulPlan(region, parsed, tuple(
            tiling.problem_of(p.mm, bias_bytes=itemsize(elem(p.mm.lhs)) if p.epilogue.bias is not None else 0, epilogue=True,
                              act=p.epilogue.activation, residual=p.epilogue.residual is not None, b_nz=nz)
            for p in parsed.projections))

    def sites(self, plan: NormMatmulPlan, target: HardwareConfig) -> list[Site]:
        pairs = zip(plan.parsed.projections, plan.problems)
        return [s for p, problem in pairs if (s := matmul_site(p.mm, problem, target)) is not None]

    def emit(self, ctx: LoweringContext, plan: NormMatmulPlan, operands: list[SSAValue]) -> list[SSAValue]:
        args = gm_args(plan.region, operands)
        norm = plan.parsed.norm
        products = [
            Product(args[p.mm.rhs], shape(p.out), elem(p.out), gm_epilogue(p.epilogue, args))
            for p in plan.parsed.projections
        ]
        tilings = [tiling_of(ctx, p.mm, problem) for p, problem in zip(plan.parsed.projections, plan.problems)]
        return emit_norm_matmul(ctx, norm, [args[v] for v in norm.operands], products, tilings, plan.problems[0].b_nz)


NORM_MATMUL = NormMatmulTemplate()
