"""`fuse-moe-gating`: a MoE router's scoring and top-k → `nn.fused {kind = #nn.fused_kind<moe_gating>}`
(ops-transformer's MoeGatingTopKSoftmax: softmax or sigmoid over the experts, top-k, and the
renormalisation of the k weights when the model has it; one vector kernel).

Matched (conversion/nn_to_ascend/templates/moe_gating.match), at each top-level nn.topk:

    %p = nn.softmax %logits {axis = -1} | nn.sigmoid %logits     [T, E], read only by the topk
    %v, %i = nn.topk %p {k, axis = -1, largest = true}
    [%s = nn.reduce_sum %v {axes = [-1], keepdims = true};  %w = nn.div %v, %s]

Mixtral's and Qwen2-MoE's routers match. A group-limited router (DeepSeek-V3: sigmoid + correction
bias, TopK over group scores, the other groups masked, TopK, the un-biased scores gathered,
renormalised and scaled; ops-transformer's MoeGatingTopK with groups) is matched from its last
TopK by templates/moe_gating.match_grouped, which checks the index constants the importer wrote
(iota, zeros, ones, row offsets: read from the session's weights when they are nn.weight; without
a store such a router stays op by op). It runs before fuse-elementwise, which would otherwise
take the sigmoid or the division.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.moe_gating import fuse, fuse_grouped, match
from ascendir.dialects import nn
from ascendir.patterns import Constants, top_level_ops
from ascendir.session import session_of


@dataclass(frozen=True)
class FuseMoeGating(ModulePass):
    """Wrap softmax / sigmoid + top-k [+ renormalisation], or a group-limited router, in
    nn.fused {kind = #nn.fused_kind<moe_gating>}."""

    name = "fuse-moe-gating"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        consts = Constants(session_of(ctx).weights)
        for topk in top_level_ops(op, nn.TopKOp):
            if topk.parent is None or fuse_grouped(topk, consts) is not None:  # taken by a group-limited router
                continue
            ops = match(topk)
            if ops is not None:
                fuse(ops)
