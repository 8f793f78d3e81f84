"""The ffn template (protocol side): plan = templates/ffn_region.parse_ffn of the region's body;
emit = templates/ffn.lower_ffn (the fused kernel or ffn_up + ffn_down, whichever its planner
estimates faster); sites = the region's matmuls (the gate / up ones only obey a forced tiling:
ffn_up picks its own nacc-accumulator tile, and one recorded there would rule out the fused
kernel); fallback = each projection with its own epilogue (templates/ffn._per_projection)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase
from ascendir.conversion.nn_to_ascend.templates import ffn
from ascendir.conversion.nn_to_ascend.templates.ffn_region import parse_ffn
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig

KIND = "ffn"


@dataclass(frozen=True)
class FfnPlan:
    """parse_ffn's parts over the region's own values (x, wg, wu, b1, act, wd, b2, down, ups)."""

    region: nn.FusedOp
    parts: dict


class FfnTemplate(MatmulTiles, TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> FfnPlan | Declined:
        parts = parse_ffn(region, {a: a for a in region.body.block.args})
        if parts is None or len(region.outputs) != 1:
            return Declined("the body is not a gated (gate, up, activation, mul, down) or plain (up, activation, down) "
                            "FFN with one output; each projection lowers with its own epilogue")
        return FfnPlan(region, parts)

    def sites(self, plan: FfnPlan, target: HardwareConfig) -> list[Site]:
        ups = plan.parts["ups"]
        mms = [o for o in plan.region.body.walk() if isinstance(o, nn.MatmulOp)]
        return [s for mm in mms if (s := matmul_site(mm, target, searched=mm not in ups)) is not None]

    def emit(self, ctx: LoweringContext, plan: FfnPlan, operands: list[SSAValue]) -> list[SSAValue] | Declined:
        return ffn.lower_ffn(ctx, plan.region, operands)

    def fallback(self, region: nn.FusedOp) -> None:
        ffn._per_projection(region)


FFN = FfnTemplate()
