"""`fuse-ffn`: a transformer feed-forward block → `nn.fused {kind = #nn.fused_kind<ffn>}`.

Matched (every intermediate used only inside the block, weights 2-D [K, N] so the block is a
per-row map of its input x [..., H]):

* gated (SwiGLU / GeGLU), LLaMA / Mixtral:
      g = matmul(x, Wg); a = silu|gelu(g); u = matmul(x, Wu); m = mul(a, u)  (either order)
      y = matmul(m, Wd)
* plain, BERT / GPT-2 / ViT:
      h = matmul(x, W1) [+ b1]; a = relu|gelu|silu(h); y = matmul(a, W2) [+ b2]
  (GPT-2's Conv1D export wraps each Gemm in Reshapes: reshapes that keep the last dim, i.e.
  only regroup rows, may sit between the projections and the activation; either bias order)
* experts, Mixtral (HF's batched-expert export: per routed token t, the weights of its expert
  gathered to [T, ...]):
      s = reshape(matmul(Wgu[T, 2I, H], x[T, H, 1])) [T, 2I]; g = s[:, :I]; u = s[:, I:]
      m = act(g) * u;  y = matmul(Wd[T, Ho, I], reshape(m) [T, I, 1])
  The ffn template has no gathered-weight (grouped matmul) path: it declines such a region,
  which is lowered with its gate, up and down products as batched matmuls and act * up as one
  fused vector kernel (the body's elementwise region, built here: split_projections).

The region's inputs are x, the weights and biases; its body is the original ops. What the
template does with it: conversion/nn_to_ascend/templates/ffn.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates.ffn_region import keeps_rows, parse_ffn, split_projections
from ascendir.dialects import nn
from ascendir.conversion.nn_to_ascend.templates.epilogue import row_bias_of
from ascendir.patterns import fuse_ops, program_order, single_use, top_level_ops

KIND = "ffn"
GATE_ACTIVATIONS = (nn.SiluOp, nn.GeluOp)
ACTIVATIONS = (nn.ReluOp, nn.GeluOp, nn.SiluOp)


def _is_weight_matmul(op: Operation | None, x: SSAValue | None = None) -> bool:
    return (
        isinstance(op, nn.MatmulOp)
        and len(nn.shape_of(op.rhs)) == 2
        and len(nn.shape_of(op.lhs)) >= 2
        and (x is None or op.lhs == x)
    )


def _with_bias(value: SSAValue) -> tuple[list[Operation], SSAValue]:
    """[add] and its result if `value`'s only user adds a row bias to it, else ([], value)."""
    add = single_use(value)
    if isinstance(add, nn.AddOp) and row_bias_of(add, value) is not None:
        return [add], add.result
    return [], value


def match_gated(down: nn.MatmulOp) -> list[Operation] | None:
    """The ops of a gated FFN whose down projection is `down`, or None."""
    m = down.lhs.owner
    if not _is_weight_matmul(down) or not isinstance(m, nn.MulOp) or single_use(m.result) is not down:
        return None
    for a_val, u_val in ((m.lhs, m.rhs), (m.rhs, m.lhs)):
        act, up = a_val.owner, u_val.owner
        if not isinstance(act, GATE_ACTIVATIONS) or not _is_weight_matmul(up):
            continue
        gate = act.input.owner
        if not _is_weight_matmul(gate, up.lhs) or gate is up:
            continue
        if single_use(a_val) is not m or single_use(u_val) is not m or single_use(gate.result) is not act:
            continue
        if nn.shape_of(gate.result) != nn.shape_of(up.result):
            continue
        return [gate, act, up, m, down]
    return None


def _through_reshapes(v: SSAValue, user: Operation) -> tuple[list[Operation], SSAValue] | None:
    """Walk back from `v` (an operand of `user`) over row-keeping reshapes: (the reshapes in
    program order, the value they start from), or None when a value on the way has a user
    other than the next op."""
    chain: list[Operation] = []
    while True:
        if single_use(v) is not user:
            return None
        r = v.owner
        if not keeps_rows(r):
            return chain, v
        chain.insert(0, r)
        user, v = r, r.input


def match_plain(second: nn.MatmulOp) -> list[Operation] | None:
    """The ops of matmul [+ bias] → activation → matmul [+ bias] ending at `second` (with
    row-keeping reshapes in between), or None."""
    if not _is_weight_matmul(second) or (back := _through_reshapes(second.lhs, second)) is None:
        return None
    r2, a = back
    act = a.owner
    if not isinstance(act, ACTIVATIONS) or (back := _through_reshapes(act.input, act)) is None:
        return None
    r1, h = back
    first_ops: list[Operation] = []
    if isinstance(h.owner, nn.AddOp):
        add = h.owner
        for cand in (add.lhs, add.rhs):
            if _is_weight_matmul(cand.owner) and row_bias_of(add, cand) is not None and single_use(cand) is add:
                first_ops = [cand.owner, add]
                break
    elif _is_weight_matmul(h.owner):
        first_ops = [h.owner]
    if not first_ops:
        return None
    tail, _ = _with_bias(second.result)
    return [*first_ops, *r1, act, *r2, second, *tail]


def match_experts(down: nn.MatmulOp) -> list[Operation] | None:
    """The ops of a gathered-weight gated expert block (module docstring) ending at `down`, or None."""
    col = down.rhs.owner  # m [T, I] as a column per token [T, I, 1]
    if len(nn.shape_of(down.lhs)) != 3 or not isinstance(col, nn.ReshapeOp) or single_use(col.result) is not down:
        return None
    mul = col.input.owner
    if not isinstance(mul, nn.MulOp) or single_use(mul.result) is not col:
        return None
    for a_val, u_val in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
        act, u = a_val.owner, u_val.owner
        if not isinstance(act, GATE_ACTIVATIONS) or not isinstance(u, nn.SliceOp):
            continue
        g = act.input.owner
        if not isinstance(g, nn.SliceOp) or g.input != u.input or g is u:
            continue
        if single_use(a_val) is not mul or single_use(u_val) is not mul or single_use(g.result) is not act:
            continue
        s = g.input
        if {use.operation for use in s.uses} != {g, u} or not isinstance(s.owner, nn.ReshapeOp):
            continue
        up = s.owner.input.owner
        if not isinstance(up, nn.MatmulOp) or len(nn.shape_of(up.lhs)) != 3 or single_use(up.result) is not s.owner:
            continue
        return [up, s.owner, g, u, act, mul, col, down]
    return None


@dataclass(frozen=True)
class FuseFFN(ModulePass):
    """Wrap gated (SwiGLU) and plain (MatMul → act → MatMul) feed-forward blocks in
    nn.fused {kind = #nn.fused_kind<ffn>}."""

    name = "fuse-ffn"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for mm in top_level_ops(op, nn.MatmulOp):
            if mm.parent is None:
                continue
            ops = match_gated(mm) or match_plain(mm) or match_experts(mm)
            if ops is None:
                continue
            ops = program_order(ops)
            last = ops[-1]
            region = fuse_ops(KIND, ops, [last.results[0]])
            if parse_ffn(region, {a: a for a in region.body.block.args}) is None:
                split_projections(region)  # the template declines it: lowered op by op
