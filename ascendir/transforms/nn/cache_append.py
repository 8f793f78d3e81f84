"""`cache-append`: the KV cache of a decoder kept in place.

A KV-cache decoder (frontends/onnx/kv_cache.py) computes each layer's `present = Concat(past,
new)` along the cache axis and returns it, so every step copies the whole past into a fresh
buffer. This pass rewrites each such concat, where

* operand 0 is an argument of @main used by nothing else (the past), and
* the result is returned by @main (the present),

as `nn.cache_append(cache, new)` at offset = the past's length, and gives the argument the
present's type: the argument becomes a preallocated device cache with room for the new rows
(its first `offset` positions hold the past; `generate` feeds it so), and the lowering writes
only the new rows into it, in place (templates/cache_append.py). Every reader of the present
(the attention) reads the cache buffer itself.

It changes @main's signature (the past arguments grow by the new rows), so it is not part of the
-O pipelines: `ascendir generate` runs it, and `ascendir-opt -p cache-append` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import BlockArgument
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from ascendir.dialects import nn


def cache_appends(main: func.FuncOp) -> list[int]:
    """Indices of @main's arguments that are caches written in place (the pass's rewrite)."""
    out = []
    for op in main.body.block.ops:
        if isinstance(op, nn.CacheAppendOp) and isinstance(op.cache, BlockArgument):
            out.append(op.cache.index)
    return out


@dataclass(frozen=True)
class CacheAppend(ModulePass):
    """Rewrite each past/new concat returned by @main as an in-place nn.cache_append."""

    name = "cache-append"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = next((f for f in op.ops if isinstance(f, func.FuncOp) and f.sym_name.data == "main"), None)
        if main is None or not main.body.blocks:
            return
        block = main.body.block
        ret = block.last_op
        if not isinstance(ret, func.ReturnOp):
            return
        returned = set(ret.arguments)
        for concat in [o for o in block.ops if isinstance(o, nn.ConcatOp)]:
            if len(concat.inputs) != 2 or concat.result not in returned:
                continue
            past, new = concat.inputs
            if not isinstance(past, BlockArgument) or past.owner is not block or len(list(past.uses)) != 1:
                continue
            axis = concat.axis.value.data
            offset = nn.shape_of(past)[axis]
            cache = Rewriter.replace_value_with_new_type(past, concat.result.type)
            append = nn.CacheAppendOp(cache, new, axis, offset)
            Rewriter.replace_op(concat, append)
        main.function_type = FunctionType.from_lists([a.type for a in block.args], main.function_type.outputs.data)
