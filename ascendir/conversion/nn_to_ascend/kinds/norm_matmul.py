"""The norm_matmul template (protocol side): plan = the norm, the optional row reshape and one
templates/epilogue chain per projection of the normalized rows (parse_chain, as fuse-norm-matmul
built them); emit = templates/norm_matmul.emit_norm_matmul; one matmul site per projection."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase
from ascendir.conversion.nn_to_ascend.templates.norm_matmul import emit_norm_matmul, parse_norm_matmul
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig

KIND = "norm_matmul"


@dataclass(frozen=True)
class NormMatmulPlan:
    region: nn.FusedOp
    norm: Operation
    chains: tuple[tuple[Operation, ...], ...]  # per projection: matmul, bias add?, activation?, residual add?


class NormMatmulTemplate(MatmulTiles, TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> NormMatmulPlan | Declined:
        """Declined unless the body is norm [+ reshape] and the projections of its result with
        their epilogue chains, each chain yielded (templates/norm_matmul.parse_norm_matmul)."""
        parsed = parse_norm_matmul(region)
        if isinstance(parsed, Declined):
            return parsed
        norm, chains = parsed
        return NormMatmulPlan(region, norm, tuple(tuple(c) for c in chains))

    def sites(self, plan: NormMatmulPlan, target: HardwareConfig) -> list[Site]:
        return [s for c in plan.chains if (s := matmul_site(c[0], target)) is not None]

    def emit(self, ctx: LoweringContext, plan: NormMatmulPlan, operands: list[SSAValue]) -> list[SSAValue] | Declined:
        return emit_norm_matmul(ctx, plan.region, plan.norm, [list(c) for c in plan.chains], operands)


NORM_MATMUL = NormMatmulTemplate()
