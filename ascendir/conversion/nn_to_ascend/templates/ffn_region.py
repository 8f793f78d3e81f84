"""The ffn region as `fuse-ffn` builds it and the ffn template reads it: which reshapes may sit
between projections (keeps_rows), the parse of a gated or plain body into its parts
(parse_ffn), and how fuse-ffn structures a body the template does not take (split_projections)."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import shape
from ascendir.conversion.nn_to_ascend.templates.elementwise import activation_op
from ascendir.conversion.nn_to_ascend.templates.epilogue import fuse_chain, match_chain, row_bias_of
from ascendir.conversion.nn_to_ascend.templates.fused_elementwise import fuse_elementwise_in
from ascendir.dialects import nn

def keeps_rows(op: Operation) -> bool:
    """True for an nn.reshape that keeps the last dim (only regroups rows)."""
    if not isinstance(op, nn.ReshapeOp):
        return False
    a, b = nn.shape_of(op.input), nn.shape_of(op.result)
    return bool(a) and bool(b) and a[-1] == b[-1]


def _source(v: SSAValue) -> SSAValue:
    """`v` before the row-keeping reshapes fuse-ffn lets sit between projections and activation."""
    while isinstance(v.owner, nn.ReshapeOp):
        v = v.owner.input
    return v


def parse_ffn(op: nn.FusedOp, args: dict) -> dict | None:
    """x, Wg, Wu (or None), b1, act, Wd, b2 of a gated or plain body, or None."""
    block = op.body.block
    ops = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    mms = [o for o in ops if isinstance(o, nn.MatmulOp)]
    acts = [o for o in ops if isinstance(o, (nn.SiluOp, nn.GeluOp, nn.ReluOp))]
    allowed = (nn.MatmulOp, nn.AddOp, nn.MulOp, nn.SiluOp, nn.GeluOp, nn.ReluOp)
    if any(not isinstance(o, allowed) and not keeps_rows(o) for o in ops):
        return None
    if len(acts) != 1 or len(mms) not in (2, 3) or any(len(shape(m.rhs)) != 2 or m.rhs not in args for m in mms):
        return None
    act = acts[0]
    term = block.last_op
    y = term.values[0] if isinstance(term, nn.YieldOp) and len(term.values) == 1 else None
    down = mms[-1]
    b2 = None
    if y is not None and y != down.result:
        add = y.owner
        b2 = row_bias_of(add, down.result) if isinstance(add, nn.AddOp) else None
        if b2 is None or b2 not in args:
            return None
    elif y is None:
        return None
    if len(mms) == 3:  # gated
        gate = _source(act.input).owner
        mul = _source(down.lhs).owner
        up = next((m for m in mms[:2] if m is not gate), None)
        if not isinstance(mul, nn.MulOp) or gate not in mms[:2] or up is None or {mul.lhs, mul.rhs} != {act.result, up.result}:
            return None
        if gate.lhs != up.lhs or gate.lhs not in args or isinstance(act, nn.ReluOp):
            return None
        return dict(x=args[gate.lhs], wg=args[gate.rhs], wu=args[up.rhs], b1=None, act=activation_op(act),
                    wd=args[down.rhs], b2=args[b2] if b2 is not None else None, down=down, ups=[gate, up])
    first = mms[0]
    h = _source(act.input)
    b1 = None
    if h != first.result:
        b1 = row_bias_of(h.owner, first.result) if isinstance(h.owner, nn.AddOp) else None
        if b1 is None or b1 not in args:
            return None
    if _source(down.lhs) != act.result or first.lhs not in args:
        return None
    return dict(x=args[first.lhs], wg=args[first.rhs], wu=None, b1=args[b1] if b1 is not None else None,
                act=activation_op(act), wd=args[down.rhs], b2=args[b2] if b2 is not None else None, down=down, ups=[first])


def split_projections(op: nn.FusedOp) -> None:
    """Structure the body of an ffn region parse_ffn does not take (Mixtral's gathered-weight
    experts), which the ffn template declines and lowering takes op by op: each projection with
    an epilogue gets its matmul_epilogue region and the elementwise ops left (act * up) one
    elementwise region. fuse-ffn calls it when it builds such a region, so lowering only reads
    regions and never runs a fusion matcher."""
    for mm in [o for o in op.body.block.ops if isinstance(o, nn.MatmulOp)]:
        chain = match_chain(mm)
        if len(chain) > 1:
            fuse_chain(chain)
    fuse_elementwise_in(op.body.block)
