"""Data movement: forwarding, reshapes, transposes, concatenation, slicing, broadcasting, gathers.

Shapes, axes, starts and the like must be known at import (static shapes); the converters
normalize them (negative axes, 0/-1 reshape dims, clamped slice bounds) so the `nn` ops carry
only explicit non-negative values.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Constant, Value


def _reshape(node: NodeContext, i: int, shape: list[int]) -> Value:
    """Input `i` reshaped to `shape` (forwarded when the shape does not change)."""
    if tuple(shape) == node.shape(i):
        return node.input(i)
    return node.emit(nn.ReshapeOp(node.value(i), shape))


@converts("Identity")
def convert_identity(node: NodeContext) -> list[Value]:
    """Identity → its input (a weight keeps one nn.weight)."""
    return [node.input(0)]


@converts("Dropout")
def convert_dropout(node: NodeContext) -> list[Value]:
    """Dropout → its input, with an all-true mask: the inference form (training_mode absent or
    false) and training with ratio 0 (every element kept, scale 1 / (1 - 0)). training_mode and,
    in training, ratio must be known at import; training with ratio > 0 drops random elements,
    and ascendir generates no random masks."""
    if node.has_input(2) and bool(node.require_const(2, "training_mode")):
        ratio = float(node.require_const(1, "ratio")) if node.has_input(1) else 0.5
        if ratio != 0:
            raise node.error(f"training_mode=true with ratio {ratio:g} needs a random mask, which ascendir does not generate")
    mask = Constant(node.node.output[1], np.ones(node.shape(0), np.bool_)) if node.output_used(1) else None
    return [node.input(0), mask]


@converts("Reshape")
def convert_reshape(node: NodeContext) -> list[Value]:
    """Reshape with a constant shape → nn.reshape: 0 copies the input dim (unless allowzero=1),
    -1 takes the remaining elements."""
    in_shape = node.shape(0)
    target = [int(d) for d in node.require_const(1, "shape").reshape(-1)]
    allowzero = bool(node.attr("allowzero", 0))
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:  # 0 copies the input dim, unless allowzero makes it literal
            if i >= len(in_shape):
                raise node.error(f"shape {target} copies dim {i}, which the rank-{len(in_shape)} input lacks")
            d = in_shape[i]
        out.append(d)
    total = math.prod(in_shape)
    if out.count(-1) > 1:
        raise node.error(f"shape {target} has more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or total % known:
            raise node.error(f"cannot infer the -1 of shape {target} for an input of shape {list(in_shape)}")
        out[out.index(-1)] = total // known
    if any(d < 0 for d in out) or math.prod(out) != total:
        raise node.error(f"cannot reshape {list(in_shape)} to {target}")
    return [_reshape(node, 0, out)]


@converts("Flatten")
def convert_flatten(node: NodeContext) -> list[Value]:
    """Flatten(axis) → nn.reshape to [prod(dims[:axis]), prod(dims[axis:])]."""
    shape = node.shape(0)
    axis = int(node.attr("axis", 1))
    if not -len(shape) <= axis <= len(shape):  # axis == rank is allowed (gives [N, 1])
        raise node.error(f"axis {axis} is out of range for rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    return [_reshape(node, 0, [math.prod(shape[:axis]), math.prod(shape[axis:])])]


def _axes_operand(node: NodeContext) -> list[int] | None:
    """Squeeze/Unsqueeze axes (an input since opset 13; older models are upgraded at load)."""
    return node.require_const(1, "axes").reshape(-1).tolist() if node.has_input(1) else None


@converts("Squeeze")
def convert_squeeze(node: NodeContext) -> list[Value]:
    """Squeeze → nn.reshape (axes input; none = all 1-dims)."""
    shape = node.shape(0)
    axes = _axes_operand(node)
    if axes is None:
        drop = [i for i, d in enumerate(shape) if d == 1]
    else:
        drop = node.axes(axes, len(shape))
        if any(shape[a] != 1 for a in drop):
            raise node.error(f"cannot squeeze axes {axes} of shape {list(shape)}: not all are 1")
    return [_reshape(node, 0, [d for i, d in enumerate(shape) if i not in drop])]


@converts("Unsqueeze")
def convert_unsqueeze(node: NodeContext) -> list[Value]:
    """Unsqueeze → nn.reshape (axes index the output, negative from its end)."""
    shape = node.shape(0)
    axes = _axes_operand(node)
    if axes is None:
        raise node.error("axes are required")
    rank = len(shape) + len(axes)
    inserted = node.axes(axes, rank)
    dims = iter(shape)
    return [_reshape(node, 0, [1 if i in inserted else next(dims) for i in range(rank)])]


@converts("Transpose")
def convert_transpose(node: NodeContext) -> list[Value]:
    """Transpose → nn.transpose (default perm reverses the dims; identity perm forwards)."""
    rank = len(node.shape(0))
    perm = node.attr("perm")
    perm = list(range(rank))[::-1] if perm is None else [node.axis(p, rank) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise node.error(f"perm {perm} is not a permutation of rank {rank}")
    if perm == list(range(rank)):
        return [node.input(0)]
    return [node.emit(nn.TransposeOp(node.value(0), perm))]


@converts("Concat")
def convert_concat(node: NodeContext) -> list[Value]:
    """Concat → nn.concat with a non-negative axis (empty operands dropped)."""
    rank = len(node.shape(0))
    axis = node.axis(node.attr("axis"), rank)
    if len({node.dtype(i) for i in range(node.num_inputs)}) > 1:
        raise node.error("operands have different element types")
    # Empty operands (exporters concatenate shape pieces with []) contribute nothing.
    parts = [i for i in range(node.num_inputs) if node.shape(i)[axis] != 0] or [0]
    if len(parts) == 1:
        return [node.input(parts[0])]
    return [node.emit(nn.ConcatOp([node.value(i) for i in parts], axis))]


def _slice(node: NodeContext, x: SSAValue, shape: tuple[int, ...], starts: list[int], steps: list[int],
           out: list[int]) -> SSAValue:
    if tuple(out) == shape and all(s == 1 for s in steps):
        return x
    return node.emit(nn.SliceOp(x, starts, steps, out))


@converts("Slice")
def convert_slice(node: NodeContext) -> list[Value]:
    """Slice with constant starts/ends/axes/steps → nn.slice with clamped, non-negative starts,
    positive steps and the result shape; an axis with a negative step is sliced in ascending
    order and reversed by an nn.gather."""
    shape = node.shape(0)
    rank = len(shape)
    for i, what in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
        if node.has_input(i) and node.require_const(i, what).ndim != 1:  # the spec: 1-D tensors
            raise node.error(f"{what} (input {i}) must be a 1-D tensor, got shape {list(node.const(i).shape)}")
    starts = node.require_const(1, "starts").tolist()
    ends = node.require_const(2, "ends").tolist()
    axes = node.require_const(3, "axes").tolist() if node.has_input(3) else list(range(len(starts)))
    steps = node.require_const(4, "steps").tolist() if node.has_input(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.error("starts, ends, axes and steps must have the same length")
    norm_axes = [node.axis(a, rank) for a in axes]
    if len(set(norm_axes)) != len(norm_axes):
        raise node.error(f"axes {axes} repeat a dimension")
    out_starts, out_steps, out_shape = [0] * rank, [1] * rank, list(shape)
    reversed_axes = []
    for start, end, axis, step in zip(starts, ends, norm_axes, steps):
        if step == 0:
            raise node.error("steps must not be 0")
        # ONNX Slice clamps exactly like Python slicing (negative bounds count from the end).
        picked = range(*slice(int(start), int(end), int(step)).indices(shape[axis]))
        if picked.step < 0 and len(picked) > 1:
            # The same elements in ascending order, then reversed by a gather along the axis.
            picked = picked[::-1]
            reversed_axes.append(axis)
        out_starts[axis], out_steps[axis], out_shape[axis] = (picked.start if picked else 0), abs(picked.step), len(picked)
    y = _slice(node, node.value(0), shape, out_starts, out_steps, out_shape)
    for axis in reversed_axes:
        backwards = np.arange(out_shape[axis] - 1, -1, -1, dtype=np.int64)
        y = node.emit(nn.GatherOp(y, node.constant(backwards, f"reverse{axis}"), axis))
    return [y]


@converts("Split")
def convert_split(node: NodeContext) -> list[Value]:
    """Split → one nn.slice per output (sizes: the split input, or equal chunks from
    num_outputs (opset 18) / the output count)."""
    shape = node.shape(0)
    axis = node.axis(node.attr("axis", 0), len(shape))
    split = None
    if node.has_input(1):
        sizes = node.require_const(1, "split")
        if sizes.ndim != 1:  # the schema's 1-D tensor of sizes; a matrix summed as lists failed
            raise node.error(f"split must be a 1-D tensor of sizes, got shape {list(sizes.shape)}")
        split = [int(s) for s in sizes]
    if split is None:
        # Equal chunks; since opset 18 the last one may be smaller (ceil division).
        parts = int(node.attr("num_outputs", len(node.node.output)))
        chunk = -(-shape[axis] // parts)
        split = [chunk] * (parts - 1) + [shape[axis] - chunk * (parts - 1)]
    if sum(split) != shape[axis] or any(s < 0 for s in split) or len(split) != len(node.node.output):
        raise node.error(f"split sizes {list(split)} do not partition dim {axis} of shape {list(shape)}")
    x, results, offset = node.value(0), [], 0
    for size in split:
        starts, out = [0] * len(shape), list(shape)
        starts[axis], out[axis] = offset, size
        results.append(_slice(node, x, shape, starts, [1] * len(shape), out))
        offset += size
    return results


@converts("Expand")
def convert_expand(node: NodeContext) -> list[Value]:
    """Expand with a constant shape → nn.expand to broadcast(input shape, shape)."""
    target = [int(d) for d in node.require_const(1, "shape").reshape(-1)]
    out = nn.broadcast_shapes(node.shape(0), target)
    if out == node.shape(0):
        return [node.input(0)]
    return [node.emit(nn.ExpandOp(node.value(0), out))]


@converts("Tile")
def convert_tile(node: NodeContext) -> list[Value]:
    """Tile as reshape → expand → reshape: a repeat r of dim d is a new leading dim r of size d·r."""
    shape = node.shape(0)
    repeats = [int(r) for r in node.require_const(1, "repeats").reshape(-1)]
    if len(repeats) != len(shape) or any(r < 0 for r in repeats):
        raise node.error(f"repeats {repeats} do not match rank {len(shape)}")
    if all(r == 1 for r in repeats):
        return [node.input(0)]
    split_shape, expanded = [], []
    for d, r in zip(shape, repeats):
        if r != 1:
            split_shape.append(1)
            expanded.append(r)
        split_shape.append(d)
        expanded.append(d)
    x = _reshape(node, 0, split_shape)
    x = node.state.materialize(x) if isinstance(x, Constant) else x
    x = node.emit(nn.ExpandOp(x, expanded))
    return [node.emit(nn.ReshapeOp(x, [d * r for d, r in zip(shape, repeats)]))]


def _normalized_indices(node: NodeContext, indices: np.ndarray, dims: np.ndarray | int) -> np.ndarray:
    indices = indices.astype(np.int64)
    if np.any(indices < -dims) or np.any(indices >= dims):
        raise node.error(f"indices out of range for dims {np.asarray(dims).tolist()}")
    return np.where(indices < 0, indices + dims, indices)


@converts("Gather")
def convert_gather(node: NodeContext) -> list[Value]:
    """Gather → nn.gather; constant indices are made non-negative, and taking every index in
    order becomes a reshape."""
    shape = node.shape(0)
    axis = node.axis(node.attr("axis", 0), len(shape))
    indices = node.const(1)
    if indices is None:
        return [node.emit(nn.GatherOp(node.value(0), node.value(1), axis))]
    indices = _normalized_indices(node, indices, shape[axis])
    if indices.size == shape[axis] and np.array_equal(indices.reshape(-1), np.arange(shape[axis])):
        # Taking every row in order only regroups the axis (exporters do this to flatten masks).
        return [_reshape(node, 0, [*shape[:axis], *indices.shape, *shape[axis + 1 :]])]
    return [node.emit(nn.GatherOp(node.value(0), node.constant(indices, "indices"), axis))]


@converts("GatherND")
def convert_gather_nd(node: NodeContext) -> list[Value]:
    """GatherND with known indices → a Gather along the flattened leading dims.

    The dynamo export builds the causal-mask row of `attention_mask` this way; when the gathered
    positions are all elements in order, the whole op is a reshape. Runtime indices (the dynamo
    export's gather of each routed token's expert weights): _gather_nd_runtime.
    """
    shape = node.shape(0)
    if node.const(1) is None:
        return _gather_nd_runtime(node, shape)
    indices = node.require_const(1, "indices")
    b = int(node.attr("batch_dims", 0))
    k = indices.shape[-1] if indices.ndim else len(shape) + 1
    if b + k > len(shape) or indices.shape[:b] != shape[:b]:
        raise node.error(f"indices of shape {list(indices.shape)} do not fit data of shape {list(shape)}")
    batch_dims, index_dims = shape[:b], shape[b : b + k]
    local = np.ravel_multi_index(
        tuple(np.moveaxis(_normalized_indices(node, indices, np.array(index_dims)), -1, 0)), index_dims
    ) if k else np.zeros(indices.shape[:-1], np.int64)
    batch = np.arange(math.prod(batch_dims), dtype=np.int64).reshape(
        batch_dims + (1,) * (indices.ndim - 1 - b)
    )
    flat = batch * math.prod(index_dims) + local
    out_shape = list(indices.shape[:-1]) + list(shape[b + k :])
    if flat.size == math.prod(batch_dims + index_dims) and np.array_equal(flat.reshape(-1), np.arange(flat.size)):
        return [_reshape(node, 0, out_shape)]
    rows = _reshape(node, 0, [math.prod(batch_dims + index_dims), *shape[b + k :]])
    rows = node.state.materialize(rows) if isinstance(rows, Constant) else rows
    return [node.emit(nn.GatherOp(rows, node.constant(flat, "indices"), 0))]


def _gather_nd_runtime(node: NodeContext, shape: tuple[int, ...]) -> list[Value]:
    """GatherND with runtime indices [..., k] and batch_dims 0 → nn.gather along the flattened
    first k dims at flat = Σ_c wrap(idx[..., c]) * stride_c, computed by nn ops in the indices'
    type (wrap(i) = i + dim where i < 0). Raises the node's error for batch_dims > 0 or k out
    of range."""
    ishape = node.shape(1)
    b = int(node.attr("batch_dims", 0))
    k = ishape[-1] if ishape else 0
    if b != 0:
        # the importer's wording for an input needed at import: with constant indices the
        # batch_dims > 0 form folds
        raise node.error(f"the index tensor (input 1, '{node.node.input[1]}') depends on runtime values; "
                         f"batch_dims={b} needs them at import")
    if not 1 <= k <= len(shape):
        raise node.error(f"indices of shape {list(ishape)} do not fit data of shape {list(shape)}")
    it = node.dtype(1)
    idx = node.value(1)
    lead = list(ishape[:-1])
    flat = None
    for c in range(k):
        stride = math.prod(shape[c + 1 : k])
        comp = node.emit(nn.ReshapeOp(node.emit(nn.SliceOp(idx, [0] * len(lead) + [c], [1] * len(ishape),
                                                           lead + [1])), lead))
        wrapped = node.emit(nn.AddOp(comp, node.scalar(shape[c], it)))
        comp = node.emit(nn.WhereOp(node.emit(nn.LessOp(comp, node.scalar(0, it))), wrapped, comp))
        if stride != 1:
            comp = node.emit(nn.MulOp(comp, node.scalar(stride, it)))
        flat = comp if flat is None else node.emit(nn.AddOp(flat, comp))
    rows = _reshape(node, 0, [math.prod(shape[:k]), *shape[k:]])
    rows = node.state.materialize(rows) if isinstance(rows, Constant) else rows
    return [node.emit(nn.GatherOp(rows, flat, 0))]


@converts("DepthToSpace", "SpaceToDepth")
def convert_depth_to_space(node: NodeContext) -> list[Value]:
    """DepthToSpace / SpaceToDepth (mode DCR or CRD; SpaceToDepth's mode since opset 28) →
    reshape, transpose, reshape, the operator's definition (NCHW, blocksize b)."""
    shape = node.shape(0)
    if len(shape) != 4:
        raise node.error(f"expects an N x C x H x W input, got shape {list(shape)}")
    n, c, h, w = shape
    b = int(node.attr("blocksize", 0))
    if b < 1:
        raise node.error(f"blocksize {b} must be >= 1")
    mode = node.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise node.error(f"mode '{mode}' is not DCR or CRD")
    if node.op_type == "SpaceToDepth":  # the inverse of DepthToSpace in the same mode
        if h % b or w % b:
            raise node.error(f"H x W = {h} x {w} is not divisible by blocksize {b}")
        perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
        split, out = [n, c, h // b, b, w // b, b], [n, c * b * b, h // b, w // b]
    else:
        if c % (b * b):
            raise node.error(f"{c} channels are not divisible by blocksize² = {b * b}")
        if mode == "DCR":
            split, perm = [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2]
        else:
            split, perm = [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3]
        out = [n, c // (b * b), h * b, w * b]
    x = _reshape(node, 0, split)
    x = node.state.materialize(x) if isinstance(x, Constant) else x
    return [node.emit(nn.ReshapeOp(node.emit(nn.TransposeOp(x, perm)), out))]
