"""`fuse-attention`: `nn.attention` → `nn.fused {kind = #nn.fused_kind<flash_attention>}`, with the
head transposes around it.

The region's meaning is its body, so nothing changes numerically; what changes is the lowering:
the `flash_attention` template (templates/flash_attention.py) computes the attention block by
block with an online softmax and never writes the [B, H, Sq, Skv] scores to GM, where the unfused
path (decompose-attention) materializes scores and probabilities.

Head transposes: a transformer reshapes each projection [B, S, N·D] to [B, S, N, D] and
transposes it to the attention's [B, N, S, D] (`nn.transpose {perm = [0, 2, 1, 3]}`), and the
output back the same way. Each such transpose of q, k, v (when the attention is its only user)
and of the output (when it is the attention's only user) goes into the region too: the template
then reads that operand in BSND order (ops-transformer FlashAttentionScore / PromptFlashAttention
`input_layout` BSND / BSH: a head is D contiguous elements of every token row, read by a strided
DMA) and writes the output in BSND, so no transpose kernel runs before or after the attention.
Only where a head row (D elements) is at least one whole GM transaction (`whole_rows`): a
shorter strided burst wastes most of its transaction, so such a transpose stays a kernel.

An attention is wrapped only when the template can lower it:

* q, k, v (and the mask, if any) share one float element type;
* a mask, if any, has rank ≤ 4 (it broadcasts to [B, Hq, Sq, Skv] by the nn.attention verifier);
* causal attention has Skv ≥ Sq (with Skv < Sq the first queries see no key at all; their
  uniform-average rows are left to the unfused path).

Anything else stays an nn.attention and is decomposed at lowering (the test in
tests/filecheck/fuse-attention shows a non-match). Whether a tile fits depends on the chip, which
this pass does not know: a wrapped attention the template has no tile for on the target (e.g. 8
f32 query heads of D = 128 per K/V head on 910B) is decomposed at lowering too
(decompose_attentions in lowering/attention.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import AnyFloat, ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.flash_attention import head_transpose, whole_rows
from ascendir.dialects import nn
from ascendir.patterns import fuse_ops, single_use, top_level_ops

KIND = "flash_attention"


def supported(att: nn.AttentionOp) -> bool:
    """Whether the flash_attention template lowers `att` (see the module docstring)."""
    el = att.q.type.element_type
    if not isinstance(el, AnyFloat) or any(v.type.element_type != el for v in (att.k, att.v)):
        return False
    if att.mask is not None and (att.mask.type.element_type != el or len(nn.shape_of(att.mask)) > 4):
        return False
    sq, skv = nn.shape_of(att.q)[2], nn.shape_of(att.k)[2]
    if att.causal.value.data and skv < sq:
        return False
    return min(sq, skv, nn.shape_of(att.q)[3], nn.shape_of(att.v)[3]) > 0


@dataclass(frozen=True)
class FuseAttention(ModulePass):
    """Wrap every top-level nn.attention the flash template supports in
    nn.fused {kind = #nn.fused_kind<flash_attention>}."""

    name = "fuse-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for att in top_level_ops(op, nn.AttentionOp):
            if supported(att):
                block = att.parent_block()
                ins = [v.owner for v in (att.q, att.k, att.v)
                       if head_transpose(v.owner) and v.owner.parent_block() is block and single_use(v) is att and whole_rows(v)]
                out = single_use(att.result)
                outs = [out] if head_transpose(out) and out.parent_block() is block and whole_rows(att.result) else []
                ops = sorted({id(o): o for o in ins}.values(), key=block.get_operation_index)
                fuse_ops(KIND, [*ops, att, *outs], [outs[0].result if outs else att.result])
