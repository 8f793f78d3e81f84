"""Numerical reference of a sharded (SPMD) `nn` module: every rank in lockstep, with numpy.

Each rank runs the same module on its own WeightStore (its slices of the weights, as
shard-tensor-parallel cuts them); at an nn collective the ranks meet and it is evaluated across
them: all_reduce and reduce_scatter sum the ranks' operands (in float32 for 16-bit floats, then
rounded to the operand type, as HCCL's reduce `sum` on the chip accumulates), all_gather and
all_to_all concatenate chunks in group order. Every other op is `nn_reference.evaluate_op` on
the rank's own values, so a sharded run is checked against the same per-op meaning as the
unsharded one.

Collectives must sit in the function body (shard-tensor-parallel keeps fused regions free of
them); a group must be the ranks 0 .. N-1 of the run, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation

from ascendir.dialects.nn.collectives import AllGatherOp, AllReduceOp, AllToAllOp, CollectiveOp, ReduceScatterOp
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.interpreter.exec.nn_reference import _names, evaluate_op, main_function
from ascendir.weights import WeightStore

_HALF_KINDS = ("float16", "bfloat16")


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
    if not isinstance(op, CollectiveOp) or op.group.ranks != tuple(range(n)):
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


def run_spmd(
    module, stores: Sequence[WeightStore], inputs: Mapping[str, np.ndarray]
) -> list[dict[str, np.ndarray]]:
    """Evaluate `@main` of a sharded nn module on len(stores) ranks.

    Args:
        module: the SPMD module (one rank's types).
        stores: rank r's WeightStore at index r.
        inputs: one array per argument (by `onnx.name`), the same on every rank (replicated).

    Returns:
        Each rank's outputs, keyed by result name.

    Raises:
        AscendirError: missing / mistyped inputs, an op without semantics, a collective inside a
            fused region.
    """
    main = main_function(module)
    block = main.body.block
    names = _names(main.arg_attrs, len(block.args), "arg")
    ranks = len(stores)
    envs: list[dict] = [{} for _ in range(ranks)]
    for name, arg in zip(names, block.args):
        if name not in inputs:
            raise AscendirError(f"missing input '{name}' ({arg.type})")
        value = np.asarray(inputs[name])
        dtype, shape = to_numpy_dtype(arg.type.element_type), tuple(arg.type.get_shape())
        if value.dtype != dtype or value.shape != shape:
            raise AscendirError(f"input '{name}' is {value.dtype}{list(value.shape)}, expected {dtype}{list(shape)}")
        for env in envs:
            env[arg] = value
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            out_names = _names(main.res_attrs, len(op.operands), "result")
            return [{n: np.asarray(env[v], order="C") for n, v in zip(out_names, op.operands)} for env in envs]
        if isinstance(op, CollectiveOp):
            results = evaluate_collective(op, [env[op.operands[0]] for env in envs])
            dtype = to_numpy_dtype(op.result.type.element_type)
            for env, value in zip(envs, results):
                env[op.result] = np.asarray(value).astype(dtype, copy=False)
            continue
        if any(isinstance(inner, CollectiveOp) for inner in op.walk()):
            raise AscendirError(f"{op.name}: a collective inside a region (the SPMD reference runs them at top level)")
        for env, store in zip(envs, stores):
            for r, value in zip(op.results, evaluate_op(op, [env[v] for v in op.operands], store)):
                env[r] = value
    raise AscendirError("@main has no func.return")
