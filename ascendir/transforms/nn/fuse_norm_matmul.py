"""`fuse-norm-matmul`: RMSNorm / LayerNorm feeding one or more MatMuls (the Q/K/V projections of
attention, the gate/up projections of an FFN, GPT-2's fused c_attn) → `nn.fused {kind =
"norm_matmul"}`.

Matched (built from the nn.rms_norm / nn.layer_norm that recompose-nn makes):

    %n = nn.rms_norm|layer_norm %x, %g[, %b] {axis = rank - 1}
    %r = nn.reshape %n                 (optional, its only user; keeps the last dim H: GPT-2's
                                        Conv1D flattens [B, S, H] to [B*S, H] before its Gemm)
    %p_i = nn.matmul %r, %W_i          (W_i 2-D [H, N_i]; one or more)
    ... its epilogue chain             (optional, per projection: row bias, ReLU/GELU/SiLU,
                                        residual; fuse_matmul_epilogue.match_chain)

only when EVERY use of %n (or %r) is the lhs of such a matmul: a norm output that is also read
by anything else (a residual add, a non-matmul op, a matmul with %n as its rhs or a batched
weight) must reach GM as itself, and the region does not keep it. The region's outputs are the
ends of the projections' chains, in program order.

The ops are moved next to the norm before wrapping (each projection's users come after its own
position, so moving it up is safe); weights / constants defined between them are hoisted above
the norm. Anything else defined in between (an operand computed after the norm) → no match.
What the template does with the region: lowering/norm_matmul.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.conversion.nn_to_ascend.templates.epilogue import match_chain
from ascendir.patterns import fuse_ops, program_order, single_use, top_level_ops

KIND = "norm_matmul"
NORMS = (nn.RmsNormOp, nn.LayerNormOp)


def _projection(norm_out: SSAValue, user: Operation) -> list[Operation] | None:
    """[matmul, epilogue chain...] when `user` multiplies `norm_out` (lhs) by a 2-D matrix."""
    if not isinstance(user, nn.MatmulOp) or user.lhs != norm_out or user.rhs == norm_out:
        return None
    if len(nn.shape_of(user.rhs)) != 2 or nn.shape_of(user.rhs)[0] != nn.shape_of(norm_out)[-1]:
        return None
    return match_chain(user)


def match(norm: Operation) -> tuple[list[Operation], list[list[Operation]]] | None:
    """([norm, reshape?], the projections), or None (see the module docstring)."""
    shp = nn.shape_of(norm.results[0])
    if not shp or norm.axis.value.data % len(shp) != len(shp) - 1 or len(norm.results) > 1:
        return None  # (a layer_norm's Mean / InvStdDev results would have to leave the region)
    head = [norm]
    out = norm.results[0]
    flat = single_use(out)
    if isinstance(flat, nn.ReshapeOp) and nn.shape_of(flat.result)[-1:] == shp[-1:] and len(nn.shape_of(flat.result)) >= 2:
        head, out = [norm, flat], flat.result
    users = []
    for use in out.uses:
        if use.operation not in users:
            users.append(use.operation)
    projections = [_projection(out, u) for u in users]
    if not projections or any(p is None for p in projections):
        return None
    return head, projections


def _gather_next_to(norm: Operation, ops: list[Operation]) -> bool:
    """Move `ops` (program order, all after `norm`, each using only `norm`, earlier `ops` or
    values defined before `norm`) right after `norm`, hoisting operand-free definitions
    (nn.weight, nn.constant) above it; False (nothing moved) if another operand is defined
    after `norm`."""
    block = norm.parent_block()
    assert isinstance(block, Block)
    pos = {op: i for i, op in enumerate(block.ops)}
    inside = set(ops) | {norm}
    late: list[Operation] = []
    for op in ops:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner not in inside and pos[owner] > pos[norm]:
                if owner.operands or not isinstance(owner, (nn.WeightOp, nn.ConstantOp)):
                    return False
                if owner not in late:
                    late.append(owner)
    for owner in late:
        block.detach_op(owner)
        block.insert_op_before(owner, norm)
    anchor = norm
    for op in ops:
        block.detach_op(op)
        block.insert_op_after(op, anchor)
        anchor = op
    return True


@dataclass(frozen=True)
class FuseNormMatmul(ModulePass):
    """Wrap RMSNorm / LayerNorm + the MatMuls (Q/K/V, gate/up) that are its only consumers in
    nn.fused {kind = #nn.fused_kind<norm_matmul>}."""

    name = "fuse-norm-matmul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for norm in top_level_ops(op, NORMS):
            found = match(norm)
            if found is None:
                continue
            head, projections = found
            ops = program_order([*head[1:], *(o for p in projections for o in p)])
            if not _gather_next_to(norm, ops):
                continue
            ends = program_order([p[-1] for p in projections])
            fuse_ops(KIND, [norm, *ops], [e.results[0] for e in ends])
