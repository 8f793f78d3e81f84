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
lowering template (lowering/matmul_epilogue.py) applies the epilogue before the tile leaves the
core. The fused op is placed where the last op of the chain was, where all operands dominate.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.lowering.matmul_epilogue import EPILOGUE_ACTIVATIONS, residual_of, row_bias_of
from ascendir.transforms.patterns import fuse_ops

KIND = "matmul_epilogue"


def match_chain(mm: nn.MatmulOp) -> list[Operation]:
    """[matmul, add?, activation?, residual add?] starting at `mm` (just [mm] when nothing can be
    fused)."""
    chain: list[Operation] = [mm]
    value = mm.result
    user = value.get_user_of_unique_use()
    if user is not None and isinstance(user, nn.AddOp) and row_bias_of(user, value) is not None:
        chain.append(user)
        value = user.result
        user = value.get_user_of_unique_use()
    if user is not None and isinstance(user, EPILOGUE_ACTIVATIONS) and user.input == value:
        chain.append(user)
        value = user.result
        user = value.get_user_of_unique_use()
    if user is not None and residual_of(user, value) is not None:
        chain.append(user)
    return chain


def fuse_chain(chain: list[Operation]) -> nn.FusedOp:
    """Replace `chain` by one nn.fused whose body is a copy of the chain."""
    return fuse_ops(KIND, chain, [chain[-1].results[0]])


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
