"""`fuse-add-rms-norm`: a residual add feeding an RMSNorm → `nn.fused {kind = #nn.fused_kind<add_rms_norm>}`
(ops-transformer's AddRmsNorm: `y = x + r; out = rms_norm(y)`, one vector kernel that reads x
and r once and writes out and, when read later, y).

Matched (conversion/nn_to_ascend/templates/add_rms_norm.match):

    %y   = nn.add %x, %r                      same shape and element type (no broadcast)
    %out = nn.rms_norm %y, %gamma {axis = rank - 1}

%y may have other users (the next layer's residual add): it is then the region's second output.

Not in O1 / O2. Where to put it in a pipeline: after fuse-ffn and before fuse-norm-matmul,
fuse-matmul-epilogue and fuse-elementwise. fuse-norm-matmul would take the norm (with the Q/K/V
or gate/up projections it feeds), fuse-matmul-epilogue the add (as the residual of the o_proj /
down_proj matmul before it) and fuse-elementwise any add left; each of those leaves nothing for
this pass. fuse-ffn takes neither op. The O2 order with it:

    fold-batchnorm,recompose-nn,fuse-attention,fuse-ffn,fuse-moe-experts,fuse-moe-gating,fuse-moe-finalize-routing,
    fuse-add-rms-norm,fuse-norm-matmul,fuse-matmul-epilogue,fuse-conv-activation,fuse-elementwise,
    choose-tiling

(`ADD_RMS_NORM_O2` below). It trades the norm_matmul region and the residual epilogues for the
fused add + norm, so it is an option, not part of O2.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.add_rms_norm import fuse, match
from ascendir.dialects import nn
from ascendir.patterns import top_level_ops

ADD_RMS_NORM_O2 = (
    "fold-batchnorm,recompose-nn,fuse-attention,fuse-ffn,fuse-moe-experts,fuse-moe-gating,fuse-moe-finalize-routing,"
    "fuse-add-rms-norm,fuse-norm-matmul,fuse-matmul-epilogue,fuse-conv-activation,fuse-elementwise,choose-tiling"
)


@dataclass(frozen=True)
class FuseAddRmsNorm(ModulePass):
    """Wrap nn.add + nn.rms_norm of the sum in nn.fused {kind = #nn.fused_kind<add_rms_norm>}."""

    name = "fuse-add-rms-norm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for add in top_level_ops(op, nn.AddOp):
            ops = match(add)
            if ops is not None:
                fuse(ops)
