"""Helpers shared by the nn-level pattern passes (recompose-nn, fuse-*): reading small constants,
single-use checks, and wrapping a set of ops into an `nn.fused` region.

A pass reads constants through `Constants(session_of(ctx).weights)`: the session's WeightStore
lets a pattern read a constant that the ONNX exporter stored as an initializer (e.g. the dynamo
exporter's causal mask). Without a store such weights are simply unknown and patterns that need
their value do not match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from ascendir.dialects import nn
from ascendir.dtypes import dense_value, is_float
from ascendir.weights import WeightStore

# Constants larger than this are not read by patterns (a causal mask of 16k x 16k would be 256 MiB).
MAX_PATTERN_CONSTANT = 1 << 24


@dataclass(frozen=True)
class Constants:
    """Reads the values of small constant operands for pattern matchers: nn.constant, and
    nn.weight when `weights` (the session's store) holds it. Without a store (IR text through
    ascendir-opt) weights are unknown, and patterns that need their value do not match.
    Constants larger than MAX_PATTERN_CONSTANT elements are never read."""

    weights: WeightStore | None = None

    def array(self, v: SSAValue, limit: int | None = None) -> np.ndarray | None:
        """The value of `v`, or None when it is not a readable constant or has more than
        `limit` elements (default MAX_PATTERN_CONSTANT; a matcher whose own operands are that
        large, such as an attention's [Sq, Skv] mask, passes their size)."""
        owner = v.owner
        limit = max(MAX_PATTERN_CONSTANT, limit or 0)
        if isinstance(owner, nn.ConstantOp):
            if np.prod(nn.shape_of(v), dtype=np.int64) > limit:
                return None
            return dense_value(owner.value)
        if isinstance(owner, nn.WeightOp):
            if self.weights is None or owner.weight_name not in self.weights:
                return None
            if np.prod(nn.shape_of(v), dtype=np.int64) > limit:
                return None
            return np.asarray(self.weights[owner.weight_name])
        return None

    def scalar(self, v: SSAValue) -> float | None:
        """The value of `v` if it is a constant whose elements are all equal (a scalar or a splat)."""
        a = self.array(v)
        if a is None or a.size == 0 or not (is_float(a.dtype) or a.dtype.kind in "iu"):  # bf16 is kind "V"
            return None
        first = a.reshape(-1)[0]
        return float(first) if np.all(a == first) else None

    def is_scalar(self, v: SSAValue, value: float, rel: float = 1e-6) -> bool:
        """True if `v` is a constant splat equal to `value` within `rel` (relative), or within
        the rounding of the constant's float type (bf16 holds 1/sqrt(2) as 0.70703125)."""
        x = self.scalar(v)
        if x is None:
            return False
        dt = self.array(v).dtype
        half_ulp = float(ml_dtypes.finfo(dt).eps) / 2 if is_float(dt) else 0.0
        return abs(x - value) <= max(rel, half_ulp) * max(1.0, abs(value))


def single_use(v: SSAValue) -> Operation | None:
    """The only user of `v` when it has exactly one use, else None."""
    return v.get_user_of_unique_use()


def other_operand(op: Operation, v: SSAValue) -> SSAValue | None:
    """For a binary op with `v` as exactly one operand, the other operand."""
    a, b = op.operands
    if a == v and b != v:
        return b
    if b == v and a != v:
        return a
    return None


def funcs(module: ModuleOp) -> list[func.FuncOp]:
    return [f for f in module.ops if isinstance(f, func.FuncOp)]


def top_level_ops(module: ModuleOp, cls: type[Operation] | tuple[type[Operation], ...]) -> list[Operation]:
    """Ops of type `cls` directly in a function body (not inside an nn.fused region)."""
    return [op for f in funcs(module) for op in f.body.block.ops if isinstance(op, cls)]


def erase_dead(ops: Sequence[Operation]) -> None:
    """Erase the ops of `ops` whose results are unused, repeatedly (their operands' owners too,
    when those are pure nn ops that become dead)."""
    work = list(ops)
    while work:
        op = work.pop()
        if op.parent is None or any(r.uses for r in op.results) or isinstance(op, (func.ReturnOp, nn.YieldOp)):
            continue
        owners = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        op.parent_block().erase_op(op)
        work.extend(o for o in owners if o.name.startswith("nn.") and not isinstance(o, nn.FusedOp))


def fuse_ops(kind: str, ops: Sequence[Operation], outputs: Sequence[SSAValue]) -> nn.FusedOp:
    """Replace `ops` (in program order, one block) by one `nn.fused {kind}` yielding `outputs`.

    The region's inputs are the values the ops use but do not define; `outputs` must be results
    of `ops`, and every other result of `ops` must only be used inside `ops` (so nothing is
    computed twice). The fused op is inserted before the last op of `ops`; every input must
    dominate it (true when `ops` is a program-order slice of producers of the last op).

    Raises:
        ValueError: a result of `ops` other than `outputs` is used outside them.
    """
    inside_ops = set(ops)
    inside = {r for op in ops for r in op.results}
    for op in ops:
        for r in op.results:
            if r not in outputs and any(u.operation not in inside_ops for u in r.uses):
                raise ValueError(f"fuse_ops: {op.name} result escapes the region")
    inputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            if v not in inside and v not in inputs:
                inputs.append(v)
    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))
    for op in ops:
        body.add_op(op.clone(value_mapper=mapping))
    body.add_op(nn.YieldOp(*[mapping[o] for o in outputs]))
    fused = nn.FusedOp(kind, inputs, [o.type for o in outputs], Region(body))
    last = ops[-1]
    block = last.parent_block()
    assert block is not None
    block.insert_op_before(fused, last)
    for o, new in zip(outputs, fused.outputs):
        o.replace_all_uses_with(new)
    for op in reversed(ops):
        block.erase_op(op)
    return fused


def program_order(ops: Sequence[Operation]) -> list[Operation]:
    """`ops` (all in one block) sorted by their position in it."""
    if not ops:
        return []
    block = ops[0].parent_block()
    pos = {op: i for i, op in enumerate(block.ops)}
    return sorted(set(ops), key=lambda o: pos[o])


def inline_region(region: nn.FusedOp) -> None:
    """Inline an nn.fused region's body in front of it (its ops keep their meaning) and erase it."""
    block = region.body.block
    term = block.last_op
    values = list(term.operands)
    Rewriter.erase_op(term)
    Rewriter.inline_block(block, InsertPoint.before(region), list(region.operands))
    for r, v in zip(region.results, values):
        r.replace_all_uses_with(v)
    Rewriter.erase_op(region)
