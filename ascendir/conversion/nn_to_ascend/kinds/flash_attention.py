"""The flash_attention template (protocol side): plan = the region's one nn.attention and the
layout (BNSD or BSND) of q, k, v and the output, BSND where a head transpose in the body stands
between a region value and the attention (fuse-attention puts them there); emit =
templates/flash_attention.emit_flash_attention; one attention site whose tiles (Br, Bc) come
from that module's fit (`Shape.needs`), estimate (`estimate_cycles`) and search."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.dialects.builtin import AnyFloat
from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import round_up
from ascendir.conversion.nn_to_ascend.template import Searched, Site, TemplateBase, body_of, gm_args
from ascendir.conversion.nn_to_ascend.templates import flash_attention as fa
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig

KIND = "flash_attention"
FAMILY = "attention"


@dataclass(frozen=True)
class FlashPlan:
    """The region's nn.attention; per operand q, k, v, out: the region value that holds it in GM
    (a block argument, or the yielded output) and its layout, fa.BNSD or fa.BSND (a head
    transpose in the body between it and the attention, see fuse-attention)."""

    region: nn.FusedOp
    att: nn.AttentionOp
    src: dict[str, SSAValue]
    layout: dict[str, str]


class FlashAttentionTemplate(TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> FlashPlan | Declined:
        body = body_of(region)
        args = region.body.block.args
        atts = [o for o in body if isinstance(o, nn.AttentionOp)]
        if len(atts) != 1 or len(region.outputs) != 1:
            return Declined("the body is not one nn.attention with one output")
        att = atts[0]
        # a paged KV cache: K and V are nn.paged_kv views of pool arguments (page-kv-cache)
        views = [o for o in body if isinstance(o, nn.PagedKVOp) and all(v in args for v in o.operands)]
        if views and {att.k.owner, att.v.owner} != set(views):
            return Declined("a paged KV view that is not the attention's K and V")
        src, layout, known = {}, {}, {att, *views}
        for name, v in (("q", att.q), ("k", att.k), ("v", att.v)):
            if fa.head_transpose(v.owner) and v.owner.input in args:
                known.add(v.owner)
                src[name], layout[name] = v.owner.input, fa.BSND
            else:
                src[name], layout[name] = v, fa.BNSD
        direct = [v for n, v in (("q", att.q), ("k", att.k), ("v", att.v)) if layout[n] == fa.BNSD and not isinstance(v.owner, nn.PagedKVOp)]
        if any(v not in args for v in [*direct, *([att.mask] if att.mask is not None else [])]):
            return Declined("an operand of the attention is computed inside the region")
        out = region.body.block.last_op.operands[0]
        if out is not att.result:
            if not (fa.head_transpose(out.owner) and out.owner.input is att.result):
                return Declined("the output is neither the attention's nor its head transpose")
            known.add(out.owner)
        layout["out"] = fa.BNSD if out is att.result else fa.BSND
        if any(o not in known for o in body):
            return Declined(f"{next(o for o in body if o not in known).name} in the body: only head transposes around the attention")
        el = att.q.type.element_type
        if not isinstance(el, AnyFloat):
            return Declined(f"{el} attention: the template computes in floats")
        return FlashPlan(region, att, src, layout)

    def sites(self, plan: FlashPlan, target: HardwareConfig) -> list[Site]:
        if target.arch.no_mmad(str(plan.att.q.type.element_type)):
            return []  # no such mmad: lowering says so
        return [Site(plan.att, FAMILY, fa.shape_of(plan.att))]

    def candidates(self, plan: FlashPlan, site: Site, target: HardwareConfig) -> Iterator[fa.FlashTiling]:
        """The tilings of fa.search's (Br, Bc) grid that fit `target` (with their KV split)."""
        s: fa.Shape = site.problem
        rsq, rskv = round_up(s.sq, 16), round_up(s.skv, 16)
        brs = [s.sq] if s.sq < 16 else sorted({min(b, rsq) for b in fa.BR_CANDIDATES}, reverse=True)
        bcs = sorted({min(b, rskv) for b in fa.BC_CANDIDATES}, reverse=True)
        for r in brs:
            if s.g * r > fa.MAX_ROWS and r != brs[-1]:
                continue
            for c in bcs:
                if not s.pages(c):
                    continue
                if c > 256 and s.g * r > fa.WIDE_BC_MAX_ROWS:
                    continue
                if s.misfit(target, r, c) is None:
                    yield s.tiling(target, r, c)

    def footprint(self, plan: FlashPlan, site: Site, t: fa.FlashTiling, target: HardwareConfig) -> dict[str, int]:
        return site.problem.needs(target, t.br, t.bc)

    def estimate(self, plan: FlashPlan, site: Site, t: fa.FlashTiling, target: HardwareConfig) -> float:
        return site.problem.cycles(target, t)

    def search(self, plan: FlashPlan, site: Site, target: HardwareConfig) -> Searched | None:
        """fa.search (ties: more stacked scores per block, then the wider Bc); None when no tile
        fits (lowering decomposes the attention)."""
        t0 = time.perf_counter()
        try:
            t, n = fa.search(site.problem, target)
        except ValueError:
            return None
        return Searched(t, site.problem.cycles(target, t), n, time.perf_counter() - t0, t)

    def emit(self, ctx: LoweringContext, plan: FlashPlan, operands: list[SSAValue]) -> list[SSAValue]:
        args, att, src = gm_args(plan.region, operands), plan.att, plan.src
        if isinstance(att.k.owner, nn.PagedKVOp):  # K, V: the pools, read through the block table
            k, v, table = args[att.k.owner.pool], args[att.v.owner.pool], args[att.k.owner.table]
        else:
            k, v, table = args[src["k"]], args[src["v"]], None
        out = fa.emit_flash_attention(ctx, att, args[src["q"]], k, v, args[att.mask] if att.mask is not None else None, table,
                                      plan.layout)
        return [ctx.view(out, shape(plan.region.outputs[0]))]


FLASH_ATTENTION = FlashAttentionTemplate()
