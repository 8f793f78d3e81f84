"""`fold-batchnorm`: an inference BatchNormalization after a convolution folded into the
convolution's weights and bias.

The ONNX frontend imports BatchNormalization as `x * s + t` with per-channel constants
s = scale / sqrt(var + eps) and t = B - mean * s. Matched (each link only when the value it
consumes has no other user):

    %y = nn.conv2d %x, %w [, %b]          %w (and %b) constant: nn.weight / nn.constant
    %z = nn.mul %y, %s                    %s constant, one value per output channel
    %o = nn.add %z, %t                    (optional) %t constant, one value per output channel

becomes `%o = nn.conv2d %x, %w', %b'` with w'[o] = w[o] * s[o] and b' = b * s + t, computed in
float64 and stored in the model's dtype as new WeightStore entries; the old ops are erased
(and their weights simply become unused). The batchnorm costs one vector pass over the conv
output at inference, and none after folding.

Needs the WeightStore: the pass reads and extends the session's (`session_of(ctx).weights`);
without one (bare `ascendir-opt` on IR text) nothing matches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.dtypes import to_numpy_dtype
from ascendir.patterns import Constants, erase_dead, other_operand, single_use, top_level_ops
from ascendir.session import session_of


def per_channel(v: SSAValue, channels: int, rank: int, consts: Constants) -> np.ndarray | None:
    """The constant `v` as `channels` float64 values if it broadcasts against an NCHW tensor of
    `rank` along the channel dim only (shapes [C, 1, 1], [1, C, 1, 1], [1], ...), else None."""
    a = consts.array(v)
    if a is None or a.ndim > rank or a.dtype.kind != "f":
        return None
    full = (1,) * (rank - a.ndim) + a.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
        return None
    return np.broadcast_to(a.reshape(-1).astype(np.float64), (channels,)).copy()


def _constant_operand(v: SSAValue) -> bool:
    return isinstance(v.owner, (nn.WeightOp, nn.ConstantOp))


def fold_one(conv: nn.Conv2dOp, consts: Constants) -> bool:
    """Fold the mul (+ add) after `conv` into it, the folded weights added to `consts.weights`; True
    when the IR changed."""
    store = consts.weights
    if store is None or not _constant_operand(conv.weight):
        return False
    if conv.bias is not None and not _constant_operand(conv.bias):
        return False
    out_type = conv.result.type
    o = out_type.get_shape()[1]
    rank = len(out_type.get_shape())
    mul = single_use(conv.result)
    if not isinstance(mul, nn.MulOp) or (s_val := other_operand(mul, conv.result)) is None:
        return False
    s = per_channel(s_val, o, rank, consts)
    if s is None or mul.result.type != out_type:
        return False
    last: Operation = mul
    t = np.zeros(o)
    add = single_use(mul.result)
    if isinstance(add, nn.AddOp) and (t_val := other_operand(add, mul.result)) is not None:
        t_arr = per_channel(t_val, o, rank, consts)
        if t_arr is not None and add.result.type == out_type:
            t, last = t_arr, add
    w = consts.array(conv.weight)
    b = consts.array(conv.bias) if conv.bias is not None else np.zeros(o)
    if w is None or b is None:
        return False
    dtype = to_numpy_dtype(out_type.element_type)
    w_new = (w.astype(np.float64) * s.reshape(-1, 1, 1, 1)).astype(dtype)
    b_new = (b.astype(np.float64) * s + t).astype(dtype)
    w_name = store.add("bn_folded_weight", w_new)
    b_name = store.add("bn_folded_bias", b_new)
    w_op = nn.WeightOp(w_name, conv.weight.type)
    b_op = nn.WeightOp(b_name, TensorType(out_type.element_type, [o]))
    new = nn.Conv2dOp(
        conv.input, w_op.result, b_op.result, conv.strides.get_values(), conv.pads.get_values(),
        conv.dilations.get_values(), conv.group.value.data,
    )
    new.attributes.update(conv.attributes)  # keeps onnx.node and friends
    block = conv.parent_block()
    assert block is not None
    block.insert_ops_before([w_op, b_op, new], conv)
    last.results[0].replace_all_uses_with(new.result)
    erase_dead([last])
    return True


@dataclass(frozen=True)
class FoldBatchNorm(ModulePass):
    """Fold per-channel mul (+ add) after a constant-weight nn.conv2d into its weights/bias."""

    name = "fold-batchnorm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        consts = Constants(session_of(ctx).weights)
        for conv in top_level_ops(op, nn.Conv2dOp):
            assert isinstance(conv, nn.Conv2dOp)
            fold_one(conv, consts)
