"""`fuse-matmul-epilogue`: MatMul (or the Gemm form MatMul + bias) + row-bias add + ReLU / GELU /
SiLU + residual add → `nn.fused {kind = #nn.fused_kind<matmul_epilogue>}`.

Matched chains (each link only when the value it consumes has no other user, so nothing is
computed twice and no intermediate must still reach GM):

    %m = nn.matmul %a, %b
    %y = nn.add %m, %bias        (optional; %bias has N elements, broadcast along the last dim;
                                  either operand order)
    %z = nn.relu|gelu|silu %y    (optional)
    %r = nn.add %z, %skip        (optional; %skip has exactly %z's shape and element type, no
                                  broadcast; either operand order: o_proj / down_proj + residual)

at least one of the optional links must be present. The fused op takes the chain's outside
operands (a, b[, bias]) and its body holds the original ops, so its meaning is unchanged; the
lowering template (conversion/nn_to_ascend/kinds/matmul_epilogue.py) applies the epilogue before the tile leaves the
core. The fused op is placed where the last op of the chain was, where all operands dominate.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.epilogue import fuse_chain, match_chain
from ascendir.dialects import nn


@dataclass(frozen=True)
class FuseMatmulEpilogue(ModulePass):
    """Fuse matmul + row bias + ReLU/GELU/SiLU + residual chains into
    nn.fused {kind = #nn.fused_kind<matmul_epilogue>}."""

    name = "fuse-matmul-epilogue"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if not isinstance(f, func.FuncOp):
                continue
            for mm in [o for o in f.walk() if isinstance(o, nn.MatmulOp)]:
                if isinstance(mm.parent_op(), nn.FusedOp):
                    continue
                chain = match_chain(mm)
                if len(chain) > 1:
                    fuse_chain(chain)
