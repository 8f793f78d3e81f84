"""The pool2d op family: MaxPool / AveragePool on the vector unit through the window kernel
(templates/pool.py, templates/window_vector.py). plan = the op; emit = templates/pool.lower_pool2d."""

from __future__ import annotations

from ascendir.conversion.nn_to_ascend.templates.pool import lower_pool2d
from ascendir.conversion.nn_to_ascend.kinds.ops.emitters import EmitterFamily
from ascendir.dialects import nn

POOL2D = EmitterFamily("pool2d", {nn.Pool2dOp: lower_pool2d})
