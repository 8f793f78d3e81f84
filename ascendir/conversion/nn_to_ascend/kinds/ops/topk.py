"""The topk op family: k arg-max rounds over rows in UB (templates/topk.py). plan = the op;
emit = templates/topk.lower_topk."""

from __future__ import annotations

from ascendir.conversion.nn_to_ascend.templates.topk import lower_topk
from ascendir.conversion.nn_to_ascend.kinds.ops.emitters import EmitterFamily
from ascendir.dialects import nn

TOPK = EmitterFamily("topk", {nn.TopKOp: lower_topk})
