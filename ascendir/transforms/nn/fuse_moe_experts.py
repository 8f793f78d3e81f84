"""`fuse-moe-experts`: a MoE block's routed experts (HF's batched-expert export: expert weights
gathered per routed (token, k) pair, then the SwiGLU ffn region fuse-ffn built over them) →
`nn.fused {kind = #nn.fused_kind<moe_experts>}`, lowered as ops-transformer's MoeInitRouting +
GroupedMatmul (conversion/nn_to_ascend/templates/moe_experts.py).

Matched at each top-level ffn region (templates/moe_experts.match) whose gathered weights belong
to a MoE block templates/moe_match.find_moe_blocks recognises; the region is named after the
block's TopK node (`moe_block`), the key of the routing a timing-only run gives it. Runs after
fuse-ffn and before fuse-moe-gating (which hides the TopK the blocks are found by).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.moe_experts import fuse, match
from ascendir.conversion.nn_to_ascend.templates.moe_match import find_moe_blocks
from ascendir.dialects import nn
from ascendir.patterns import top_level_ops


@dataclass(frozen=True)
class FuseMoeExperts(ModulePass):
    """Wrap a MoE block's gathered-weight experts in nn.fused {kind = #nn.fused_kind<moe_experts>}."""

    name = "fuse-moe-experts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for region in top_level_ops(op, nn.FusedOp):
            if region.parent is None:
                continue
            ops = match(region)
            if ops is None:
                continue
            w = ops[0].input.owner.weight_name
            blocks = [b for b in find_moe_blocks(region.parent) if w in b.expert_weights]
            if len(blocks) == 1:
                fuse(ops, blocks[0].name)
