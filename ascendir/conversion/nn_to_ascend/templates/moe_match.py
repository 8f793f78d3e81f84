"""The MoE blocks of an nn function, as the exporters write them (HF's batched-expert export:
router MatMul → softmax or sigmoid → TopK, each routed (token, k) pair's expert weights gathered
from an [E, ...] weight, weighted combine), read into what ops-transformer's MoE pipeline
needs: the router, the scoring function, E experts, top-k, group-limited routing, whether the
top-k weights are normalised, the gathered expert weights, and the shared expert.

Recognised (tests/test_moe_match.py): Mixtral (softmax, top-2, normalised), Qwen2-MoE (softmax,
top-k un-normalised, sigmoid-gated shared expert), DeepSeek-V3 (sigmoid + correction bias,
group-limited: TopK over groups of experts, then TopK over the unmasked experts; normalised;
shared expert), each in the TorchScript and the dynamo export.

A block is anchored at the TopK whose indices select rows of rank-3 weights [E, a, b]
(nn.gather on axis 0, through the index arithmetic the converters write: reshape, slice, add,
less, where, mul, cast); the router is found by walking back from that TopK's input over
elementwise ops and reshapes to the softmax / sigmoid and the MatMul with a [H, E] weight
before it. What is not recognised is left as it is (and runs op by op).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import nn
from ascendir.dtypes import itemsize

# ops the index path from a TopK's indices to a gather may pass (the converters' index arithmetic)
_INDEX_PATH = (nn.ReshapeOp, nn.SliceOp, nn.AddOp, nn.LessOp, nn.WhereOp, nn.MulOp, nn.CastOp, nn.ExpandOp)
# ops between a router's scores and its TopK (correction bias, group masks, normalisation)
_SCORE_PATH = (nn.ReshapeOp, nn.AddOp, nn.SubOp, nn.MulOp, nn.DivOp, nn.WhereOp, nn.ExpandOp, nn.CastOp, nn.SliceOp,
               nn.EqualOp, nn.NotOp, nn.ReduceSumOp, nn.TopKOp)
_MAX_DEPTH = 24


@dataclass(frozen=True)
class GroupLimit:
    """Group-limited routing (DeepSeek-V3's n_group / topk_group): experts in `groups` groups,
    only the best `keep` groups' experts may be picked."""

    groups: int
    keep: int


@dataclass(frozen=True)
class MoeBlock:
    """One recognised MoE block.

    topk: the TopK that picks each token's experts (its indices: [tokens, k] i64);
    router: the MatMul of x [tokens, H] and the router weight [H, E];
    scoring: "softmax" or "sigmoid"; experts E; top_k k; tokens (rows routed);
    group_limit: GroupLimit or None; normalised: the top-k weights divided by their sum;
    expert_weights: names of the [E, ...] weights gathered by expert id;
    expert_bytes: bytes of one expert's slice of all of them; shared_inter: intermediate width
    of the shared expert(s) on the same input (0: none)."""

    topk: nn.TopKOp
    router: nn.MatmulOp
    scoring: str
    experts: int
    top_k: int
    tokens: int
    group_limit: GroupLimit | None
    normalised: bool
    expert_weights: tuple[str, ...]
    expert_bytes: int
    shared_inter: int

    @property
    def name(self) -> str:
        """The ONNX node of the TopK (or the op's name when it carries none)."""
        a = self.topk.attributes.get("onnx.node")
        return a.data if a is not None else self.topk.name


def _producers(v: SSAValue, through: tuple[type[Operation], ...]) -> list[Operation]:
    """Ops reached walking back from `v` over ops of `through` (the ops themselves included),
    breadth-first, at most _MAX_DEPTH levels."""
    seen: list[Operation] = []
    frontier = [v]
    for _ in range(_MAX_DEPTH):
        nxt = []
        for val in frontier:
            op = val.owner
            if not isinstance(op, Operation) or op in seen:
                continue
            seen.append(op)
            if isinstance(op, through):
                nxt.extend(op.operands)
        frontier = nxt
    return seen


def _root(v: SSAValue) -> SSAValue:
    while isinstance(v.owner, nn.ReshapeOp):
        v = v.owner.input
    return v


def _weight_of(v: SSAValue) -> nn.WeightOp | None:
    owner = v.owner
    if isinstance(owner, nn.TransposeOp):
        owner = owner.input.owner
    return owner if isinstance(owner, nn.WeightOp) else None


def _router(topk: nn.TopKOp, experts: int) -> tuple[nn.MatmulOp, str, list[nn.TopKOp]] | None:
    """(router MatMul, scoring, the other TopKs on the way) behind `topk`'s input, or None."""
    ops = _producers(topk.input, _SCORE_PATH + (nn.SoftmaxOp, nn.SigmoidOp))
    for op in ops:
        if isinstance(op, (nn.SoftmaxOp, nn.SigmoidOp)):
            mm = op.input.owner
            if isinstance(mm, nn.MatmulOp) and _weight_of(mm.rhs) is not None and nn.shape_of(mm.rhs)[-1] == experts:
                scoring = "softmax" if isinstance(op, nn.SoftmaxOp) else "sigmoid"
                return mm, scoring, [o for o in ops if isinstance(o, nn.TopKOp) and o is not topk]
    return None


def _group_limit(others: list[nn.TopKOp], experts: int) -> GroupLimit | None:
    """The TopK over group scores [tokens, groups] among `others` (groups dividing E)."""
    for t in others:
        s = nn.shape_of(t.input)
        g = s[-1]
        if len(s) == 2 and 1 < g < experts and experts % g == 0 and t.axis.value.data in (1, -1):
            return GroupLimit(g, t.k.value.data)
    return None


def _normalised(topk: nn.TopKOp) -> bool:
    """Whether a division by a sum over the top-k weights follows the TopK (within a few ops of
    its values, or of a gather of the scores at its indices)."""
    frontier, seen = list(topk.results), set()
    for _ in range(6):
        nxt = []
        for v in frontier:
            for use in v.uses:
                op = use.operation
                if op in seen:
                    continue
                seen.add(op)
                if isinstance(op, nn.DivOp) and any(isinstance(p, nn.ReduceSumOp) for p in _producers(op.rhs, (nn.AddOp,))[:3]):
                    return True
                if isinstance(op, (nn.GatherOp, nn.AddOp, nn.LessOp, nn.WhereOp, nn.MulOp, nn.ReshapeOp, nn.CastOp)):
                    nxt.extend(op.results)
        frontier = nxt
    return False


def _shared_inter(block: Block, router: nn.MatmulOp) -> int:
    """Widest N of the other [H, N] weight MatMuls on the router's input (N > 1: a shared
    expert's gate / up projection, not Qwen2-MoE's [H, 1] shared-expert gate)."""
    x = _root(router.lhs)
    widths = [
        nn.shape_of(op.rhs)[-1] for op in block.ops
        if isinstance(op, nn.MatmulOp) and op is not router and len(nn.shape_of(op.rhs)) == 2
        and _weight_of(op.rhs) is not None and _root(op.lhs) == x and nn.shape_of(op.rhs)[-1] > 1
    ]
    return max(widths, default=0)


def find_moe_blocks(block: Block) -> list[MoeBlock]:
    """The MoE blocks among `block`'s top-level ops (a function body), in program order."""
    by_topk: dict[nn.TopKOp, list[nn.WeightOp]] = {}
    for op in block.ops:
        if not isinstance(op, nn.GatherOp) or op.axis.value.data != 0:
            continue
        w = op.input.owner
        if not isinstance(w, nn.WeightOp) or len(nn.shape_of(w.result)) != 3:
            continue
        for p in _producers(op.indices, _INDEX_PATH):
            if isinstance(p, nn.TopKOp):
                by_topk.setdefault(p, [])
                if w not in by_topk[p]:
                    by_topk[p].append(w)
                break
    found = []
    for topk, weights in by_topk.items():
        experts = nn.shape_of(weights[0].result)[0]
        if any(nn.shape_of(w.result)[0] != experts for w in weights) or nn.shape_of(topk.input)[-1] != experts:
            continue
        r = _router(topk, experts)
        if r is None:
            continue
        router, scoring, others = r
        per_expert = sum(math.prod(nn.shape_of(w.result)[1:]) * itemsize(w.result.type.element_type) for w in weights)
        found.append(MoeBlock(
            topk, router, scoring, experts, topk.k.value.data, math.prod(nn.shape_of(topk.input)[:-1]),
            _group_limit(others, experts), _normalised(topk), tuple(w.weight_name for w in weights), per_expert,
            _shared_inter(block, router),
        ))
    return found
