"""`fuse-moe-finalize-routing`: a MoE block's weighted combine of each token's k expert outputs
[+ the shared expert's output] → `nn.fused {kind = #nn.fused_kind<moe_finalize_routing>}`
(ops-transformer's MoeFinalizeRouting; one vector kernel).

Matched (conversion/nn_to_ascend/templates/moe_finalize.match), at each top-level nn.reduce_sum:

    %p = nn.mul %y, %w            y [T·k, H], w [T·k, 1]
    %q = nn.reshape %p            [T, k, H]
    %s = nn.reduce_sum %q {axes = [1], keepdims = false}
    [nn.reshape %s (unit leading dims) ...;  nn.add %r, %shared  (same shape)]

Mixtral's, Qwen2-MoE's and DeepSeek-V3's blocks (both exporters) match. It runs before
fuse-elementwise, which would otherwise take the mul or the add.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.moe_finalize import fuse, match
from ascendir.dialects import nn
from ascendir.patterns import top_level_ops


@dataclass(frozen=True)
class FuseMoeFinalizeRouting(ModulePass):
    """Wrap the weighted combine of a MoE block's expert outputs in
    nn.fused {kind = #nn.fused_kind<moe_finalize_routing>}."""

    name = "fuse-moe-finalize-routing"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for s in top_level_ops(op, nn.ReduceSumOp):
            if s.parent is None:
                continue
            ops = match(s)
            if ops is not None:
                fuse(ops)
