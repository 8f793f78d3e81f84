"""Numerical reference of a sharded (SPMD) `nn` module: every rank in lockstep, with numpy.

Each rank runs the same module on its own WeightStore (its slices of the weights, as
shard-tensor-parallel cuts them); at an nn collective the ranks meet and it is evaluated across
them: all_reduce and reduce_scatter sum the ranks' operands (in float32 for 16-bit floats, then
rounded to the operand type, as HCCL's reduce `sum` on the chip accumulates), all_gather and
all_to_all concatenate chunks in group order; the expert-parallel dispatch / combine
(nn.moe_distribute_*) route rows to and from their experts' devices. Every other op is `nn_reference.evaluate_op` on
the rank's own values, so a sharded run is checked against the same per-op meaning as the
unsharded one.

A region holding a collective (an MC2 region: matmul_all_reduce, all_gather_matmul,
matmul_reduce_scatter) is evaluated in lockstep too, op by op of its body; other regions per rank.
A group must be the ranks 0 .. N-1 of the run, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation

from ascendir.dialects.nn import FusedOp, YieldOp
from ascendir.dialects.nn.collectives import AllGatherOp, AllReduceOp, AllToAllOp, CollectiveOp, ReduceScatterOp
from ascendir.costmodel.moe_routing import init_routing
from ascendir.dialects.nn.moe_distribute import MoeDistributeCombineOp, MoeDistributeDispatchOp, MoeDistributeOp
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.interpreter.exec.nn_reference import _names, evaluate_op, input_value, main_function
from ascendir.weights import WeightStore

_HALF_KINDS = ("float16", "bfloat16")
EXCHANGES = (CollectiveOp, MoeDistributeOp)
"""The ops where ranks meet (evaluated across them in lockstep)."""


def _sum(values: Sequence[np.ndarray]) -> np.ndarray:
    dtype = values[0].dtype
    wide = np.float32 if dtype.name in _HALF_KINDS else dtype
    total = np.zeros(values[0].shape, wide)
    for v in values:  # in group order, as a ring / mesh reduce adds them on every rank
        total = total + v.astype(wide, copy=False)
    return total.astype(dtype, copy=False)


def evaluate_collective(op: Operation, operands: Sequence[np.ndarray]) -> list[np.ndarray]:
    """One collective across the ranks: `operands[r]` is rank r's operand; returns each rank's
    result (same dtype; shapes as the op's result type).

    Raises:
        AscendirError: a group that is not the ranks 0 .. N-1 of the run, or an unknown collective.
    """
    n = len(operands)
    if not isinstance(op, EXCHANGES) or op.group.ranks != tuple(range(n)):
        raise AscendirError(f"{op.name}: the SPMD reference runs groups of ranks 0..{n - 1} in order, not {list(op.group.ranks)}")
    if isinstance(op, AllReduceOp):
        total = _sum(operands)
        return [total] * n
    if isinstance(op, ReduceScatterOp):
        total = _sum(operands)
        return list(np.split(total, n, axis=op.axis.value.data))
    if isinstance(op, AllGatherOp):
        whole = np.concatenate(operands, axis=op.axis.value.data)
        return [whole] * n
    if isinstance(op, AllToAllOp):
        split, concat = op.split_axis.value.data, op.concat_axis.value.data
        chunks = [np.split(x, n, axis=split) for x in operands]  # chunks[src][dst]
        return [np.concatenate([chunks[src][dst] for src in range(n)], axis=concat) for dst in range(n)]
    raise AscendirError(f"{op.name}: no SPMD semantics")


def spmd_dispatch(op: MoeDistributeDispatchOp, xs: Sequence[np.ndarray], ids: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
    """nn.moe_distribute_dispatch across the ranks (dialects/nn/moe_distribute.py): xs[r], ids[r]
    are rank r's operands; returns each rank's four results.

    Raises: AscendirError on an expert id outside [0, experts)."""
    n, e, el = op.group.size, op.experts.value.data, op.local_experts
    p, h = xs[0].shape
    for i in ids:
        if i.size and (i.min() < 0 or i.max() >= e):
            raise AscendirError(f"{op.name}: expert ids must lie in [0, {e}), got [{i.min()}, {i.max()}]")
    sorts = [init_routing(i, e) for i in ids]  # each rank's MoeInitRouting: (order, expand_idx, group list)
    out = []
    for q in range(n):
        ex = np.zeros((n * p, h), xs[0].dtype)
        eids = np.full(n * p, el, np.int64)
        offs = np.empty((n, el + 1), np.int64)
        for s in range(n):
            order, _, group = sorts[s]
            offs[s] = group[q * el : (q + 1) * el + 1]
            lo, hi = offs[s, 0], offs[s, -1]
            rows = order[lo:hi]
            ex[s * p : s * p + hi - lo] = xs[s][rows]
            eids[s * p : s * p + hi - lo] = np.asarray(ids[s], np.int64)[rows] - q * el
        out.append([ex, eids, offs, sorts[q][1]])
    return out


def spmd_combine(op: MoeDistributeCombineOp, ys: Sequence[np.ndarray], offs: Sequence[np.ndarray],
                 idx: Sequence[np.ndarray]) -> list[np.ndarray]:
    """nn.moe_distribute_combine across the ranks; returns each rank's y [P, H]."""
    n = op.group.size
    p = idx[0].shape[0]
    h = ys[0].shape[1]
    out = []
    for s in range(n):
        back = np.zeros((p, h), ys[0].dtype)
        for q in range(n):
            lo, hi = int(offs[q][s, 0]), int(offs[q][s, -1])
            back[lo:hi] = ys[q][s * p : s * p + hi - lo]
        out.append(back[idx[s]])
    return out


def _rank_inputs(inputs: Mapping[str, np.ndarray], rank: int) -> dict[str, np.ndarray]:
    out = {k: v for k, v in inputs.items() if "@" not in k}
    out.update({k.rsplit("@", 1)[0]: v for k, v in inputs.items() if k.endswith(f"@{rank}")})
    return out


def _lockstep(ops, envs: list[dict], stores: Sequence[WeightStore]) -> list[list[np.ndarray]]:
    """Run `ops` (a block's, up to its terminator) on every rank; returns each rank's terminator
    operands."""
    for op in ops:
        if isinstance(op, (func.ReturnOp, YieldOp)):
            return [[env[v] for v in op.operands] for env in envs]
        if isinstance(op, MoeDistributeOp):
            args = [[env[v] for env in envs] for v in op.operands]
            if op.group.ranks != tuple(range(len(envs))):
                raise AscendirError(f"{op.name}: the SPMD reference runs groups of ranks 0..{len(envs) - 1} in order, not {list(op.group.ranks)}")
            per_rank = spmd_dispatch(op, *args) if isinstance(op, MoeDistributeDispatchOp) else [[y] for y in spmd_combine(op, *args)]
            for env, values in zip(envs, per_rank):
                for r, value in zip(op.results, values):
                    env[r] = np.asarray(value).astype(to_numpy_dtype(r.type.element_type), copy=False)
            continue
        if isinstance(op, CollectiveOp):
            results = evaluate_collective(op, [env[op.operands[0]] for env in envs])
            dtype = to_numpy_dtype(op.result.type.element_type)
            for env, value in zip(envs, results):
                env[op.result] = np.asarray(value).astype(dtype, copy=False)
            continue
        if isinstance(op, FusedOp) and any(isinstance(inner, EXCHANGES) for inner in op.walk()):
            block = op.body.block
            inner = [{a: env[v] for a, v in zip(block.args, op.operands)} for env in envs]
            for env, values in zip(envs, _lockstep(block.ops, inner, stores)):
                for r, value in zip(op.results, values):
                    env[r] = value
            continue
        if any(isinstance(inner, EXCHANGES) for inner in op.walk()):
            raise AscendirError(f"{op.name}: a collective inside a region the SPMD reference cannot run in lockstep")
        for env, store in zip(envs, stores):
            for r, value in zip(op.results, evaluate_op(op, [env[v] for v in op.operands], store)):
                env[r] = value
    raise AscendirError("block has no terminator (func.return / nn.yield)")


def run_spmd(
    module, stores: Sequence[WeightStore], inputs: Mapping[str, np.ndarray]
) -> list[dict[str, np.ndarray]]:
    """Evaluate `@main` of a sharded nn module on len(stores) ranks.

    Args:
        module: the SPMD module (one rank's types).
        stores: rank r's WeightStore at index r.
        inputs: one array per argument (by `onnx.name`), the same on every rank (replicated);
            a key `NAME@r` gives rank r its own (as `ascendir run --devices` feeds ranks).

    Returns:
        Each rank's outputs, keyed by result name.

    Raises:
        AscendirError: missing / mistyped inputs, an op without semantics, a group that is not the
            run's ranks in order.
    """
    main = main_function(module)
    block = main.body.block
    names = _names(main.arg_attrs, len(block.args), "arg")
    ranks = len(stores)
    envs: list[dict] = [{} for _ in range(ranks)]
    for rank, env in enumerate(envs):
        feeds = _rank_inputs(inputs, rank)
        for name, arg in zip(names, block.args):
            env[arg] = input_value(feeds, name, arg)
    out_names = _names(main.res_attrs, len(block.last_op.operands), "result") if block.last_op is not None else []
    results = _lockstep(block.ops, envs, stores)
    return [{n: np.asarray(v, order="C") for n, v in zip(out_names, values)} for values in results]


def spmd_ranks(module) -> int:
    """The devices the module's collectives span (1 + the largest rank of their groups), 0 when
    it holds none: how many ranks its reference runs."""
    ranks = [max(op.group.ranks) + 1 for op in module.walk() if isinstance(op, EXCHANGES)]
    return max(ranks, default=0)


def run_spmd_merged(module, stores: Sequence[WeightStore], inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """run_spmd's outputs as one dict, rank 0's under their names and rank r's as `NAME@r` (as
    driver.simulate_ranks reports a multi-device run)."""
    per_rank = run_spmd(module, stores, inputs)
    out = dict(per_rank[0])
    for r, outs in enumerate(per_rank[1:], start=1):
        out.update({f"{k}@{r}": v for k, v in outs.items()})
    return out
