"""Move `nn.constant` values into the WeightStore (a pre-pass of convert-nn-to-ascend).

The lowering runs as an xDSL pass and cannot reach the WeightStore, and GM tensors come only
from `ascend.weight`, so the CLI / Python API call this first.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr

from ascendir.dialects import nn
from ascendir.dtypes import dense_value
from ascendir.weights import WeightStore


def constant_value(op: nn.ConstantOp) -> np.ndarray:
    """The value of an nn.constant as a numpy array of its tensor type."""
    return dense_value(op.value)


def constants_to_weights(module: ModuleOp, weights: WeightStore, prefix: str = "const") -> int:
    """Replace every nn.constant in `module` (also inside nn.fused bodies) by an nn.weight whose
    value is added to `weights` under a fresh name (`<prefix>`, `<prefix>_1`, ...).

    Returns the number of constants moved.
    """
    consts = [op for op in module.walk() if isinstance(op, nn.ConstantOp)]
    for op in consts:
        name = op.attributes.get("onnx.name")
        base = name.data if isinstance(name, StringAttr) else prefix
        sym = weights.add(base, constant_value(op))
        new = nn.WeightOp(sym, op.result.type)
        op.parent_block().insert_op_before(new, op)
        op.result.replace_all_uses_with(new.result)
        op.parent_block().erase_op(op)
    return len(consts)
