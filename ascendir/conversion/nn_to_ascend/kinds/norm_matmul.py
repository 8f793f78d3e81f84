"""The norm_matmul template (protocol side): plan = the norm, the optional row reshape and one
templates/epilogue chain per projection of the normalized rows (parse_chain, as fuse-norm-matmul
built them); emit = templates/norm_matmul.lower_norm_matmul; one matmul site per projection."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase, body_of
from ascendir.conversion.nn_to_ascend.templates.epilogue import match_chain, parse_chain
from ascendir.conversion.nn_to_ascend.templates.norm_matmul import lower_norm_matmul
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
        their epilogue chains, each chain yielded (templates/norm_matmul.py)."""
        block = region.body.block
        args = {a: a for a in block.args}
        ops = body_of(region)
        if not ops or not isinstance(ops[0], (nn.RmsNormOp, nn.LayerNormOp)):
            return Declined("the body does not start with nn.rms_norm or nn.layer_norm")
        norm = ops[0]
        if any(v not in args for v in norm.operands):
            return Declined("an operand of the norm is computed inside the region")
        lhs = norm.results[0]
        if len(ops) > 1 and isinstance(ops[1], nn.ReshapeOp) and ops[1].input == lhs:
            lhs = ops[1].result
        chains = [match_chain(mm) for mm in ops if isinstance(mm, nn.MatmulOp) and mm.lhs == lhs]
        ends = {c[-1].results[0]: parse_chain(c, args) for c in chains}
        covered = sum(len(c) for c in chains) + (2 if lhs is not norm.results[0] else 1)
        yields = list(block.last_op.values)
        if covered != len(ops) or set(ends) != set(yields) or len(yields) != len(ends) or None in ends.values():
            return Declined("the body is not the norm [+ reshape] and projections of its result with their epilogue chains, "
                            "each chain yielded")
        return NormMatmulPlan(region, norm, tuple(tuple(c) for c in chains))

    def sites(self, plan: NormMatmulPlan, target: HardwareConfig) -> list[Site]:
        return [s for c in plan.chains if (s := matmul_site(c[0], target)) is not None]

    def emit(self, ctx: LoweringContext, plan: NormMatmulPlan, operands: list[SSAValue]) -> list[SSAValue] | Declined:
        return lower_norm_matmul(ctx, plan.region, operands)


NORM_MATMUL = NormMatmulTemplate()
