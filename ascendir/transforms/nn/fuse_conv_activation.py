"""`fuse-conv-activation`: Conv (its bias included, and a BatchNormalization already folded into
it by fold-batchnorm) + ReLU / ReLU6 / SiLU → `nn.fused {kind = #nn.fused_kind<conv_activation>}`.

Matched, when the convolution's result has no other user (else the pre-activation must reach GM
anyway):

    %y = nn.conv2d %x, %w [, %b]
    %z = nn.relu %y | nn.silu %y | nn.clip %y {min = 0, max = 6} | nn.clip %y {min = 0}

Clip with other bounds is left alone: the template implements exactly these activations
(`lowering.conv.conv_activation_of`), in the conv's epilogue before the result is written
(lowering/conv.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.conversion.nn_to_ascend.templates.conv import conv_activation_of
from ascendir.patterns import fuse_ops, single_use, top_level_ops

KIND = "conv_activation"


@dataclass(frozen=True)
class FuseConvActivation(ModulePass):
    """Wrap conv2d + ReLU / ReLU6 / SiLU in nn.fused {kind = #nn.fused_kind<conv_activation>}."""

    name = "fuse-conv-activation"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for conv in top_level_ops(op, nn.Conv2dOp):
            act = single_use(conv.result)
            if act is not None and act.parent is conv.parent and conv_activation_of(act) is not None:
                fuse_ops(KIND, [conv, act], [act.results[0]])
