"""`constants-to-weights`: move `nn.constant` values into the session's WeightStore (a pre-pass of
convert-nn-to-ascend in the `ascend-lowering` pipeline).

GM tensors come only from `ascend.weight`; a constant moved into the store lowers to one that
names it. Without a store in the session (IR text through ascendir-opt) the constants stay, and
convert-nn-to-ascend gives each an `ascend.weight` carrying its value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.passes import ModulePass
from xdsl.dialects.builtin import ModuleOp, StringAttr

from ascendir.dialects import nn
from ascendir.dtypes import dense_value
from ascendir.session import session_of
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


@dataclass(frozen=True)
class ConstantsToWeights(ModulePass):
    """Move every nn.constant into the session's WeightStore (nothing without one)."""

    name = "constants-to-weights"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        store = session_of(ctx).weights
        if store is not None:
            constants_to_weights(op, store)
