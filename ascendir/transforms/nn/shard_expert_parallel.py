"""shard-expert-parallel: spread a MoE model's routed experts over `ep` devices (SPMD), the
experts' rows exchanged by ops-transformer's MoeDistributeDispatch / MoeDistributeCombine.

    shard-expert-parallel{ep=4}
    module, plan = shard_expert_parallel(module, ep=4)

Device q of `#ascend.device_group<[0, .., ep-1]>` holds routed experts q·El .. (q+1)·El - 1
(El = E / ep). Each `moe_experts` region (fuse-moe-experts, -O2; R routed (token, k) pairs,
x [R, H, 1], ids [R]) becomes:

    x_q, ids_q = rows q·P .. (q+1)·P - 1 of x, ids           P = R / ep: this device's pairs (where
                                                              the region expands the tokens, x_q
                                                              gathers each pair's token row)
    %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch x_q, ids_q   ex [ep·P, H]: rows for my experts
    %ey = moe_experts region over (local w_gu, local w_d, ex, eids)    the grouped MatMuls, my experts only
    %y_q = nn.moe_distribute_combine %ey, %offs, %idx                  [P, H]: my pairs' rows, back
    %y = nn.all_gather %y_q {axis = 0}                                 [R, H] -> the region's old result

The local expert stacks are [El + 1, ...]: the rank's experts and one zero expert, the id the
dispatch gives unused rows of its fixed-capacity buffer (an exact 0 in the nn semantics); the
region carries `moe_unused_expert = El`, and its lowering reads no weight and computes no row for
that expert (templates/moe_experts.py).

What stays replicated: everything outside the moe_experts regions, so the router (gating), the
finalize-routing (weighted combine) and the shared experts run on every device for all tokens
(ascendir's SPMD modules take replicated inputs; ops-transformer's EP deployments run attention
data-parallel, each device with its own tokens). Each device therefore takes 1/ep of the routed
pairs for the exchange, and the all_gather after the combine gives every device all of them
again: an extra collective a data-parallel deployment would not have (reported separately from
dispatch / combine).

Errors (AscendirError, one line naming the MoE block): experts or routed pairs that do not split
`ep` ways, a module without a moe_experts region (build it with -O2), an already sharded module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, TensorType, i64
from xdsl.ir import Block
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from ascendir.conversion.nn_to_ascend.templates.moe_experts import (BLOCK_ATTR, EP_ATTR, KIND, UNUSED_EXPERT_ATTR,
                                                                    drop_expansion, parse)
from ascendir.dialects import nn
from ascendir.dialects.ascend.attrs import DeviceGroupAttr
from ascendir.dialects.nn.collectives import AllGatherOp, CollectiveOp
from ascendir.dialects.nn.moe_distribute import MoeDistributeCombineOp, MoeDistributeDispatchOp, MoeDistributeOp
from ascendir.errors import AscendirError
from ascendir.session import session_of
from ascendir.transforms.nn.shard_tensor_parallel import ShardPlan, _main, _weight_names, finish_sharding
from ascendir.weights import WeightStore

NAME = "shard-expert-parallel"


def _local_stack(w: np.ndarray, rank: int, local: int) -> np.ndarray:
    """Rank `rank`'s experts of stack w [E, a, b] and a zero expert after them: [local + 1, a, b]."""
    mine = w[rank * local : (rank + 1) * local]
    return np.concatenate([mine, np.zeros((1, *w.shape[1:]), w.dtype)])


def shard_expert_parallel(module: ModuleOp, ep: int) -> ShardPlan:
    """Rewrite `module` in place into one rank's SPMD module with its routed experts over `ep`
    devices (module docstring).

    Returns: the ShardPlan (`rank_stores(weights)`: each rank's WeightStore; `tp` is `ep`).

    Raises:
        AscendirError: ep < 1; no moe_experts region; experts or routed pairs of a block that do
            not split ep ways; a module already sharded.
    """
    if ep < 1:
        raise AscendirError(f"{NAME}: ep must be at least 1, got {ep}")
    main = _main(module)
    names = _weight_names(module)
    entries = {n: (lambda store, r, n=n: store[n]) for n in names}
    if ep == 1:
        return ShardPlan(1, entries, [], 0, 0)
    done = next((op for op in module.walk() if isinstance(op, (CollectiveOp, MoeDistributeOp))), None)
    if done is not None:
        raise AscendirError(f"{NAME}: the module is already sharded (it holds {done.name})")
    regions = [op for op in main.body.block.ops if isinstance(op, nn.FusedOp) and op.kind.data == KIND]
    if not regions:
        raise AscendirError(f"{NAME}: no MoE experts region (fuse-moe-experts, -O2) to spread over {ep} devices")
    group = DeviceGroupAttr(list(range(ep)))
    notes = []
    collectives = 0
    for region in regions:
        me = parse(region)
        if me is None:
            raise AscendirError(f"{NAME}: moe_experts region {region.attributes.get('moe_block')} has a body it cannot read")
        block = me.block
        args = list(region.body.block.args)
        outer = {a: region.operands[i] for i, a in enumerate(args)}
        w_gu, w_d = outer[me.w_gu].owner, outer[me.w_d].owner
        if not isinstance(w_gu, nn.WeightOp) or not isinstance(w_d, nn.WeightOp):
            raise AscendirError(f"{NAME}: MoE block {block}: the expert stacks are not weights")
        experts = nn.shape_of(me.w_gu)[0]
        if experts % ep:
            raise AscendirError(f"{NAME}: MoE block {block}: {experts} experts do not split over {ep} devices")
        rows, hidden, k = nn.shape_of(me.ids)[0], nn.shape_of(me.w_gu)[2], me.top_k
        if rows % ep:
            raise AscendirError(f"{NAME}: MoE block {block}: {rows} routed (token, k) pairs do not split over {ep} devices")
        local, pairs = experts // ep, rows // ep
        x, ids = outer[me.x], outer[me.ids]
        pair_name = f"ep.pairs.{rows}.{ep}"
        entries[pair_name] = lambda store, r, p=pairs: np.arange(r * p, (r + 1) * p, dtype=np.int64)
        before: list = []
        x2 = nn.ReshapeOp(x, [rows // k, hidden])
        sel = nn.WeightOp(pair_name, TensorType(i64, [pairs]))
        before += [x2, sel]
        tok = sel
        if k > 1:  # the region's input is the tokens (its expand): each pair's row is its token's row
            tok_name = f"ep.tokens.{rows}.{ep}.{k}"
            entries[tok_name] = lambda store, r, p=pairs, k=k: np.arange(r * p, (r + 1) * p, dtype=np.int64) // k
            tok = nn.WeightOp(tok_name, TensorType(i64, [pairs]))
            before.append(tok)
        xq, idq = nn.GatherOp(x2.result, tok.result, 0), nn.GatherOp(ids, sel.result, 0)
        disp = MoeDistributeDispatchOp(xq.results[0], idq.results[0], group, experts)
        ex = nn.ReshapeOp(disp.expand_x, [rows, hidden, 1])
        before += [xq, idq, disp, ex]
        x_arg = drop_expansion(region)  # the dispatched rows come in expanded
        for w in (w_gu, w_d):
            shape = nn.shape_of(w.result)
            lw = nn.WeightOp(w.weight_name, TensorType(w.result.type.element_type, [local + 1, *shape[1:]]))
            before.append(lw)
            entries[w.weight_name] = lambda store, r, n=w.weight_name, el=local: _local_stack(store[n], r, el)
            i = args.index(me.w_gu if w is w_gu else me.w_d)
            region.operands[i] = lw.result
            args[i] = Rewriter.replace_value_with_new_type(args[i], lw.result.type)
        region.operands[list(region.body.block.args).index(x_arg)] = ex.result
        region.operands[args.index(me.ids)] = disp.expand_ids
        region.attributes[UNUSED_EXPERT_ATTR] = IntegerAttr(local, i64)
        region.attributes[EP_ATTR] = IntegerAttr(ep, i64)
        disp.attributes[BLOCK_ATTR] = StringAttr(block)  # its launches take the block's routing in a timing-only run
        blk: Block = region.parent_block()
        blk.insert_ops_before(before, region)
        y = region.results[0]
        uses = [u for u in y.uses]
        y2 = nn.ReshapeOp(y, [rows, hidden])
        comb = MoeDistributeCombineOp(y2.result, disp.ep_recv_offsets, disp.expand_idx, group, experts)
        gath = AllGatherOp(comb.result, group, 0)
        y3 = nn.ReshapeOp(gath.result, list(nn.shape_of(y)))
        blk.insert_ops_after([y2, comb, gath, y3], region)
        for u in uses:
            u.operation.operands[u.index] = y3.result
        for w in (w_gu, w_d):
            if not list(w.result.uses):
                w.detach()
                w.erase()
        collectives += 3
        notes.append(f"MoE block {block}: {local} of {experts} experts on each of {ep} devices, {pairs} routed pairs "
                     f"dispatched per device")
    return ShardPlan(ep, entries, notes, collectives, 0)


def shard_module(module: ModuleOp, weights: WeightStore, ep: int, target: str | None = None, session=None):
    """The driver's entry, as shard_tensor_parallel.shard_module: shard `module` in place over `ep`
    devices and cut `weights` into one store per rank (notes to `session`). With `target`,
    choose-tiling runs again (the sharded shapes).

    Raises:
        AscendirError: as shard_expert_parallel, or IR that fails to verify after."""
    return finish_sharding(NAME, module, shard_expert_parallel(module, ep), weights, target, session)


@dataclass(frozen=True)
class ShardExpertParallel(ModulePass):
    """`shard-expert-parallel{ep=N}`: see the module docstring. The session's WeightStore is
    replaced by rank 0's; `Session.rank_stores` holds all ranks' stores."""

    name = NAME
    ep: int = 2

    def apply(self, ctx, op: ModuleOp) -> None:
        session = session_of(ctx)
        plan = shard_expert_parallel(op, self.ep)
        for note in plan.notes:
            session.note(f"{self.name}: {note}")
        weights = session.weights if session.weights is not None else WeightStore()
        session.rank_stores = plan.rank_stores(weights)
        session.weights = session.rank_stores[0]
