"""The matmul_epilogue template (protocol side): plan = templates/epilogue.parse_chain of the
region's body; emit = templates/matmul.emit_matmul with that epilogue (one cube or mix kernel,
see templates/matmul_epilogue.py); one matmul site."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase, body_of, gm_args
from ascendir.conversion.nn_to_ascend.templates.epilogue import KIND, Epilogue, parse_chain
from ascendir.conversion.nn_to_ascend.templates.matmul import emit_matmul, tiling_of
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig


@dataclass(frozen=True)
class EpiloguePlan:
    """The matmul and its epilogue, over the region's own values (block arguments)."""

    region: nn.FusedOp
    mm: nn.MatmulOp
    epilogue: Epilogue


class MatmulEpilogueTemplate(MatmulTiles, TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> EpiloguePlan | Declined:
        """Declined unless the body is matmul [+ row bias] [+ ReLU/GELU/SiLU] [+ residual]
        yielding its last value, the matmul's lhs a region argument and the output its size."""
        block = region.body.block
        body = body_of(region)
        parsed = parse_chain(body, {a: a for a in block.args})
        term = block.last_op
        if parsed is None or len(region.outputs) != 1 or not isinstance(term, nn.YieldOp) or list(term.values) != [body[-1].results[0]]:
            return Declined("the body is not matmul [+ row bias] [+ ReLU/GELU/SiLU] [+ residual] yielding its last value")
        mm, epilogue = parsed
        if mm.lhs not in block.args or math.prod(shape(region.outputs[0])) != math.prod(shape(mm.result)):
            return Declined("the matmul's lhs is computed in the region, or the output is not the matmul's size")
        return EpiloguePlan(region, mm, epilogue)

    def sites(self, plan: EpiloguePlan, target: HardwareConfig) -> list[Site]:
        site = matmul_site(plan.mm, target)
        return [site] if site is not None else []

    def emit(self, ctx: LoweringContext, plan: EpiloguePlan, operands: list[SSAValue]) -> list[SSAValue]:
        """One cube (or mix) kernel with the matmul's recorded tiling (`ascend.tiling`)."""
        args = gm_args(plan.region, operands)
        e = plan.epilogue
        epilogue = Epilogue(
            args[e.bias] if e.bias is not None else None, e.activation,
            args[e.residual] if e.residual is not None else None,
            args[e.channel_bias] if e.channel_bias is not None else None,
        )
        out = plan.region.outputs[0]
        mm = plan.mm
        return [
            emit_matmul(
                ctx, args[mm.lhs], args[mm.rhs], shape(out), elem(out), epilogue, base="matmul_epilogue",
                tiling=tiling_of(ctx, mm),
            )
        ]


MATMUL_EPILOGUE = MatmulEpilogueTemplate()
