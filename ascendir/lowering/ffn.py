"""Template of `nn.fused {kind = "ffn"}` (built by fuse-ffn).

Stage reached so far: each projection of the block becomes one cube kernel with its bias and
activation applied before the tile leaves the core (the matmul_epilogue template), so the
pre-activation never round-trips GM; the [tokens, intermediate] activation itself still goes
to GM (where an L2-sized tile stays in L2) between the up/gate and the down projection, and
SwiGLU's a · u is a separate vector kernel.

Not done yet (what the region exists for): one mix kernel per block of tokens that keeps the
intermediate tile in L1/UB — gate and up tiles from L0C through FixPipe into UB, silu · mul on
the vector unit, then back to L1 as the A operand of the down projection, accumulating the
[tokens, hidden] output tile over intermediate chunks in L0C.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.lowering.host_builder import LoweringContext
from ascendir.transforms.fuse_matmul_epilogue import fuse_chain, match_chain


def lower_ffn(ctx: LoweringContext, op: nn.FusedOp, operands: list[SSAValue]) -> list[SSAValue] | None:
    """Give every projection in the body its epilogue region, then let the body be lowered op by
    op (returns None): see the module docstring for what is and is not fused."""
    for mm in [o for o in op.body.block.ops if isinstance(o, nn.MatmulOp)]:
        chain = match_chain(mm)
        if len(chain) > 1:
            fuse_chain(chain)
    return None
