"""fold-double-relu: an example of a pass written outside ascendir (docs/writing-a-pass.md).

relu is idempotent, relu(relu(x)) = relu(x) exactly for every x (NaN included), so the outer
`nn.relu` of a chain of two is replaced by the inner one's result: one vector kernel (or one
elementwise op of a fused region) less, outputs bit-identical. Works on the nn dialect, before
lowering; ops inside `nn.fused` regions are rewritten too (the region's body is its meaning).

    ascendir-opt --load-pass-plugin fold_relu model.nn.mlir -p fold-double-relu,O2

reads ASCENDIR_PASSES below; from Python, register it in ascendir.PASSES (see demo.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from ascendir.dialects import nn


class ReluOfRelu(RewritePattern):
    """nn.relu(nn.relu(x)) -> nn.relu(x): the outer op's uses take the inner op's result."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.ReluOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if isinstance(inner, nn.ReluOp):
            rewriter.replace(op, [], [inner.result])


@dataclass(frozen=True)
class FoldDoubleRelu(ModulePass):
    """Remove the outer relu of every relu(relu(x)) chain (any length folds to one relu)."""

    name = "fold-double-relu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # the walker repeats until nothing matches, so relu(relu(relu(x))) ends as one relu
        PatternRewriteWalker(ReluOfRelu()).rewrite_module(op)


# What `ascendir-opt --load-pass-plugin fold_relu` registers, each under its `name`.
ASCENDIR_PASSES = [FoldDoubleRelu]
