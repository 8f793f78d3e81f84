"""The conv2d op family: nn.conv2d as img2col + one cube matmul (depthwise: the vector window
kernel), templates/conv.py. plan = the op; emit = templates/conv.lower_conv2d. No tiled sites:
the conv picks its tiles at emit time."""

from __future__ import annotations

from ascendir.conversion.nn_to_ascend.templates.conv import lower_conv2d
from ascendir.conversion.nn_to_ascend.kinds.ops.emitters import EmitterFamily
from ascendir.dialects import nn

CONV2D = EmitterFamily("conv2d", {nn.Conv2dOp: lower_conv2d})
