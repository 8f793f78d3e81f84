"""The ffn template (protocol side): plan = templates/ffn_region.parse_ffn of the region's body
and each matmul's Problem as templates/ffn runs it (ffn_problems); emit = templates/ffn.emit_ffn
(the fused kernel or ffn_up + ffn_down, whichever its planner estimates faster); sites = the
region's matmuls (the gate / up ones only obey a forced tiling: ffn_up picks its own
nacc-accumulator tile, and one recorded there would rule out the fused kernel). A body of
another form is declined; fuse-ffn has already given its projections their epilogue regions
(ffn_region.split_projections), so it lowers op by op with them."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase, gm_args
from ascendir.conversion.nn_to_ascend.templates.ffn import emit_ffn, ffn_problems
from ascendir.conversion.nn_to_ascend.templates.ffn_region import parse_ffn
from ascendir.conversion.nn_to_ascend.tiling import Problem
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig

KIND = "ffn"
# the parts of parse_ffn that are region values (block arguments), mapped to GM buffers by emit
_BUFFERS = ("x", "wg", "wu", "b1", "wd", "b2")


@dataclass(frozen=True)
class FfnPlan:
    """parse_ffn's parts over the region's own values (x, wg, wu, b1, act, wd, b2, down, ups)
    and each matmul's Problem."""

    region: nn.FusedOp
    parts: dict
    problems: dict[nn.MatmulOp, Problem]


class FfnTemplate(MatmulTiles, TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> FfnPlan | Declined:
        parts = parse_ffn(region, {a: a for a in region.body.block.args})
        if parts is None or len(region.outputs) != 1:
            return Declined("the body is not a gated (gate, up, activation, mul, down) or plain (up, activation, down) "
                            "FFN with one output; each projection lowers with its own epilogue")
        return FfnPlan(region, parts, ffn_problems(parts))

    def sites(self, plan: FfnPlan, target: HardwareConfig) -> list[Site]:
        ups = plan.parts["ups"]
        mms = [o for o in plan.region.body.walk() if isinstance(o, nn.MatmulOp)]
        return [s for mm in mms if (s := matmul_site(mm, plan.problems[mm], target, searched=mm not in ups)) is not None]

    def emit(self, ctx: LoweringContext, plan: FfnPlan, operands: list[SSAValue]) -> list[SSAValue]:
        args = gm_args(plan.region, operands)
        parts = dict(plan.parts)
        for key in _BUFFERS:
            if parts[key] is not None:
                parts[key] = args[parts[key]]
        out = plan.region.outputs[0]
        return [emit_ffn(ctx, parts, plan.problems, shape(out), elem(out))]


FFN = FfnTemplate()
