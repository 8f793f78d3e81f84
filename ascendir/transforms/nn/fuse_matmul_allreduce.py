"""`fuse-matmul-allreduce`: a row-parallel MatMul [+ row bias] feeding `nn.all_reduce` [and the
residual add of its sum] → `nn.fused {kind = #nn.fused_kind<matmul_all_reduce>}` (MC2,
ops-transformer MatmulAllReduce: y = allreduce(x1 @ x2 + bias) + x3).

Runs on a sharded module (after shard-tensor-parallel; the -O2 pipeline's MC2 stage,
pipelines.MC2). Matched (templates/mc2.match_matmul_all_reduce; every intermediate used once):

    %m = nn.matmul %x, %w            (2-D weight)
    %b = nn.add %m, %bias            (optional row bias: shard-tensor-parallel leaves it on rank 0)
    %s = nn.all_reduce %b            (a group of 2 or more devices)
    %y = nn.add %s, %residual        (optional: the residual connection, same shape and type)

A matmul_epilogue region holding just matmul + bias (what -O1 / -O2 fused before sharding) is
inlined first so its matmul joins the MC2 region; one with an activation or residual is left.
The template (kinds/matmul_all_reduce.py) overlaps the all_reduce of each row chunk with the
next chunk's matmul."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.conversion.nn_to_ascend.templates import mc2
from ascendir.conversion.nn_to_ascend.templates.epilogue import fuse_chain, parse_chain
from ascendir.conversion.nn_to_ascend.templates.ffn_region import keeps_rows
from ascendir.dialects import nn
from ascendir.patterns import inline_region, single_use


def bias_only_epilogue(v) -> nn.FusedOp | None:
    """The matmul_epilogue region producing `v` if its body is matmul + row bias only."""
    region = v.owner
    if not isinstance(region, nn.FusedOp) or region.kind.data != "matmul_epilogue":
        return None
    body = [o for o in region.body.block.ops if not isinstance(o, nn.YieldOp)]
    parsed = parse_chain(body, {a: a for a in region.body.block.args})
    if parsed is None or len(body) != 2:
        return None
    return region if parsed[1].bias is not None else None


def unfuse_bias_epilogue(v) -> list:
    """Inline the matmul + bias matmul_epilogue region producing `v` (used once), so its matmul
    can join an MC2 region; returns its [matmul, add] (to fuse back if nothing matches), or []."""
    region = bias_only_epilogue(v)
    if region is None or single_use(region.results[0]) is None:
        return []
    body = [o for o in region.body.block.ops if not isinstance(o, nn.YieldOp)]
    inline_region(region)
    return body


def fuse_before_collective(module: ModuleOp, collective: type, match, kind: str, chunks: int) -> None:
    """Fuse every top-level `collective` op of `module` with the row-parallel matmul [+ bias]
    before it into an MC2 region of `kind`, where `match(collective op)` gives the region's ops
    (or None). A matmul + bias epilogue region (behind GPT-2's row-keeping reshape, too) is
    inlined to join it, and fused back when nothing matches."""
    for f in module.ops:
        if not isinstance(f, func.FuncOp):
            continue
        for c in [o for o in f.walk() if isinstance(o, collective) and not isinstance(o.parent_op(), nn.FusedOp)]:
            v = c.input
            if keeps_rows(v.owner):  # GPT-2's Conv1D reshape between the region and the collective
                v = v.owner.input
            chain = unfuse_bias_epilogue(v)
            ops = match(c)
            if ops is not None:
                mc2.fuse_mc2(kind, ops, chunks)
            elif chain:
                fuse_chain(chain)  # not an MC2 match after all: the epilogue region as it was


@dataclass(frozen=True)
class FuseMatmulAllReduce(ModulePass):
    """Fuse row-parallel matmul [+ bias] + all_reduce [+ residual] into
    nn.fused {kind = #nn.fused_kind<matmul_all_reduce>}."""

    name = "fuse-matmul-allreduce"
    chunks: int = 0  # row chunks of every region (recorded as `mc2.chunks`); 0: the cost model chooses

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_before_collective(op, nn.AllReduceOp, mc2.match_matmul_all_reduce, mc2.MATMUL_ALL_REDUCE, self.chunks)
