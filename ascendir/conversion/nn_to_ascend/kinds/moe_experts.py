"""The moe_experts template (protocol side): plan = templates/moe_experts.parse of the region;
emit = templates/moe_experts.emit_moe_experts (MoeInitRouting with its expanded_x, GroupedMatmul,
SwiGLU, GroupedMatmul, the un-permute unless finalize-routing reads the rows expert-major); declined at emit on a chip without FixPipe or without
an mmad for the element type, or when MoeInitRouting's arrays do not fit UB even spread over the AIVs (the body
then lowers op by op: the gathered form). No tiled sites: the grouped MatMul's tiles are chosen at
emit time (templates/grouped_matmul.tiles), as its groups are known only when it runs."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.templates.moe_init_routing import fits, multi_ub_bytes, row_reserve
from ascendir.conversion.nn_to_ascend.template import TemplateBase, gm_args
from ascendir.costmodel.moe_routing import ep_block
from ascendir.conversion.nn_to_ascend.templates.moe_experts import (KIND, MoeExperts, emit_moe_experts,
                                                                    expert_major_readers, parse)
from ascendir.dialects import nn


@dataclass(frozen=True)
class MoeExpertsPlan:
    region: nn.FusedOp
    parsed: MoeExperts


class MoeExpertsTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> MoeExpertsPlan | Declined:
        parsed = parse(region)
        if parsed is None:
            return Declined("the body is not two axis-0 gathers of [E, 2I, H] / [E, H, I] expert weights by i64 ids "
                            "feeding a SwiGLU ffn region over [R, H, 1] rows, in one element type")
        return MoeExpertsPlan(region, parsed)

    def emit(self, ctx: LoweringContext, plan: MoeExpertsPlan, operands: list[SSAValue]) -> list[SSAValue] | Declined:
        args, p = gm_args(plan.region, operands), plan.parsed
        t = ctx.target
        if not t.arch.fixpipe:  # the grouped MatMul writes L0C out through FixPipe
            return Declined(f"{t.name} ({t.arch}) has no FixPipe (L0C -> GM) for the grouped MatMul")
        if no_mmad := t.arch.no_mmad(str(elem(args[p.x]))):
            return Declined(f"{t.name} ({t.arch}) {no_mmad}")
        rows, (experts, _, hidden) = shape(args[p.ids])[0], shape(args[p.w_gu])
        reserve, ub = row_reserve(hidden, elem(args[p.x])), t.capacity("ub")
        if not fits(rows, experts, ub, t.num_aiv, reserve):  # the scalar counting sort holds its arrays in UB
            return Declined(f"MoeInitRouting of {rows} routed rows over {experts} experts needs "
                            f"{multi_ub_bytes(rows, experts, t.num_aiv, ub)} bytes of UB on each AIV, one AIV of {t.name} has {ub}")
        block = p.block
        if p.unused_expert:  # shard-expert-parallel's local experts: the receive side of the dispatch
            block = ep_block(p.block, p.ep, (experts - 1) * p.ep, "recv")
        return emit_moe_experts(ctx, args[p.w_gu], args[p.w_d], args[p.x], args[p.ids], p.act, block, p.out_shape,
                                p.unused_expert, expert_major_readers(plan.region), p.top_k)


MOE_EXPERTS = MoeExpertsTemplate()
