"""`decompose-attention`: the unfused lowering path of `nn.attention`.

An `nn.attention` that is not inside an `nn.fused` region with a template of its own is
rewritten, before convert-nn-to-ascend, into the ops it means, each then lowered by its usual
template (cube matmuls, vector softmax), with every intermediate (the [B, Hq, Sq, Skv] scores
and probabilities) going through GM — the "naive" attention FlashAttention is measured against:

    k, v  [B, Hkv, S, D] → reshape [B, Hkv, 1, S, D] → expand [B, Hkv, g, S, D] → reshape
          [B, Hq, S, D]                                    (only when g = Hq / Hkv > 1)
    s = matmul(q, transpose(k, [0, 1, 3, 2])) * scale [+ mask]
    s = where(tri, s, lowest)                              (causal: tri is a [Sq, Skv] constant)
    out = matmul(softmax(s, -1), v)

It runs as a pass on nn IR (so the causal triangle can be an `nn.constant`, which the driver then
moves into the WeightStore) and is part of the driver's `lower` step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, ModuleOp, TensorType, i1
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.host_builder import Declined
from ascendir.conversion.nn_to_ascend.registry import FUSED_KINDS
from ascendir.conversion.nn_to_ascend.templates.flash_attention import fits
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig
from ascendir.dtypes import to_numpy_dtype


def bool_constant(a: np.ndarray) -> DenseIntOrFPElementsAttr:
    """A dense i1 attribute of boolean array `a`, built from its bytes (one byte per element,
    0xff = true, as xDSL stores i1): O(n) numpy work, no Python list of n elements (a 16k x 16k
    causal triangle is 256 M elements)."""
    raw = np.where(np.asarray(a, bool), np.uint8(0xFF), np.uint8(0)).tobytes()
    return DenseIntOrFPElementsAttr(TensorType(i1, list(a.shape)), BytesAttr(raw))


def _scalar_const(value: float, elem) -> nn.ConstantOp:
    return nn.ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(elem, []), [value]))


def _repeat_heads(x: SSAValue, group: int, ops: list[Operation]) -> SSAValue:
    if group == 1:
        return x
    b, h, s, d = nn.shape_of(x)
    r1 = nn.ReshapeOp(x, [b, h, 1, s, d])
    ex = nn.ExpandOp(r1.result, [b, h, group, s, d])
    r2 = nn.ReshapeOp(ex.result, [b, h * group, s, d])
    ops += [r1, ex, r2]
    return r2.result


def decompose(att: nn.AttentionOp) -> list[Operation]:
    """The nn ops computing `att` (last op's result is the attention output)."""
    ops: list[Operation] = []
    el = att.q.type.element_type
    b, hq, sq, _ = nn.shape_of(att.q)
    skv = nn.shape_of(att.k)[2]
    group = hq // att.num_kv_heads.value.data
    k = _repeat_heads(att.k, group, ops)
    v = _repeat_heads(att.v, group, ops)
    kt = nn.TransposeOp(k, [0, 1, 3, 2])
    s = nn.MatmulOp(att.q, kt.result)
    c = _scalar_const(att.scale.value.data, el)
    scaled = nn.MulOp(s.result, c.result)
    ops += [kt, s, c, scaled]
    value = scaled.result
    if att.mask is not None:
        add = nn.AddOp(value, att.mask)
        ops.append(add)
        value = add.result
    if att.causal.value.data:
        tri = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + (skv - sq)
        tri_c = nn.ConstantOp(bool_constant(tri))
        low = _scalar_const(float(np.finfo(to_numpy_dtype(el) if to_numpy_dtype(el).kind == "f" else np.float32).min), el)
        where = nn.WhereOp(tri_c.result, value, low.result)
        ops += [tri_c, low, where]
        value = where.result
    sm = nn.SoftmaxOp(value, 3)
    out = nn.MatmulOp(sm.result, v)
    ops += [sm, out]
    return ops


@dataclass(frozen=True)
class DecomposeAttention(ModulePass):
    """Rewrite every top-level nn.attention into matmul / softmax / mask ops (the unfused path).

    An attention inside a region whose template declines the region (e.g. IR text whose
    flash_attention body holds more than the attention and its head transposes) is decomposed
    too, and so, with `target` set (a chip name or TOML path; the driver sets the chip being
    compiled for), is one inside a flash_attention region when the template has no tile for it on
    that chip (flash_attention.fits); the region is then lowered op by op from its new body."""

    name = "decompose-attention"

    target: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from ascendir.hardware.config import load_target

        decompose_attentions(op, load_target(self.target) if self.target else None)


def decompose_attentions(module: ModuleOp, target: HardwareConfig | None = None) -> None:
    """DecomposeAttention's rewrite, for a loaded target (see the pass)."""
    for att in [o for o in module.walk() if isinstance(o, nn.AttentionOp)]:
        parent = att.parent_op()
        if isinstance(parent, nn.FusedOp) and _lowered_whole(parent) and not _too_big(parent, att, target):
            continue
        ops = decompose(att)
        att.parent_block().insert_ops_before(ops, att)
        att.result.replace_all_uses_with(ops[-1].results[0])
        att.parent_block().erase_op(att)


def _too_big(region: nn.FusedOp, att: nn.AttentionOp, target: HardwareConfig | None) -> bool:
    if target is None or region.kind.data != "flash_attention":
        return False
    return not fits(att, target)


def _lowered_whole(region: nn.FusedOp) -> bool:
    """Whether `region`'s template takes it (its plan does not decline it): else the region is
    lowered op by op from its body, where an nn.attention has no template of its own."""
    template = FUSED_KINDS.get(region.kind.data)
    return template is not None and not isinstance(template.plan(region), Declined)
