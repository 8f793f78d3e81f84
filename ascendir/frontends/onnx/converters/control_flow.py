"""If, Loop and Scan.

If: a condition known at import selects a branch, which is imported in place of the node
(the other branch is never looked at); a runtime condition imports both branches and selects
each output with nn.where (both computed, as a vector unit would run them anyway).

Loop and Scan are unrolled at import: their iterations must be known then (a constant trip count
and conditions that fold), each iteration importing the body again with its inputs bound.

Branches and bodies are subgraphs that read outer values by name; `ImportState.import_subgraph` imports
one through the importer's own node loop, so folding, converters and the list of unsupported
ops (an op inside a branch is reported by its own name) are the model's.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Constant, TensorSequence, Value


@converts("If")
def convert_if(node: NodeContext) -> list[Value | None]:
    """If → the outputs of the selected branch (constant condition), or nn.where(cond, then,
    else) per output (runtime condition; the branches' outputs must share shape and type).
    An output is None when its branch holds an unsupported op (the importer reports it)."""
    branches = {name: node.attr(name) for name in ("then_branch", "else_branch")}
    if any(g is None for g in branches.values()):
        raise node.error("needs a then_branch and an else_branch")
    cond = node.input(0)
    if isinstance(cond, Constant):
        array = np.asarray(cond.array)
        if array.size != 1:
            raise node.error(f"the condition has {array.size} elements, not one")
        taken = branches["then_branch" if bool(array.reshape(-1)[0]) else "else_branch"]
        return node.state.import_subgraph(taken, node.label)
    then_out = node.state.import_subgraph(branches["then_branch"], node.label)
    else_out = node.state.import_subgraph(branches["else_branch"], node.label)
    if len(then_out) != len(else_out):
        raise node.error(f"the branches give {len(then_out)} and {len(else_out)} outputs")
    c = node.value(0)
    if nn.shape_of(c) not in ((), (1,)):
        raise node.error(f"the condition has shape {list(nn.shape_of(c))}, not one element")
    results: list[Value | None] = []
    for i, (a, b) in enumerate(zip(then_out, else_out)):
        if a is None or b is None:
            results.append(None)
            continue
        if isinstance(a, TensorSequence) or isinstance(b, TensorSequence):
            if not (isinstance(a, TensorSequence) and isinstance(b, TensorSequence) and len(a.items) == len(b.items)):
                raise node.error(f"output {i}: the branches give sequences of different lengths (or a sequence and a "
                                 "tensor); a runtime condition needs the same on both sides")
            results.append(TensorSequence(tuple(_select(node, c, x, y, i) for x, y in zip(a.items, b.items)), a.dtype))
            continue
        results.append(_select(node, c, a, b, i))
    return results


def _select(node: NodeContext, c: SSAValue, a: Value, b: Value, i: int) -> SSAValue:
    """nn.where(c, a, b) of one If output (or sequence element) whose branches agree in type."""
    a = node.state.materialize(a) if isinstance(a, Constant) else a
    b = node.state.materialize(b) if isinstance(b, Constant) else b
    if a.type != b.type:
        raise node.error(
            f"output {i}: the branches give {a.type} and {b.type}; a runtime condition needs one shape and type "
            "(pin the inputs the condition depends on to fold it)"
        )
    return node.emit(nn.WhereOp(c, a, b))


# The most iterations a Loop or Scan is unrolled to: each iteration imports its body again, so
# a user value (a trip count of 10^9) must not drive the import without bound.
MAX_UNROLL = 4096


def _as_ssa(node: NodeContext, v: Value) -> SSAValue:
    return node.state.materialize(v) if isinstance(v, Constant) else v


def _stack(node: NodeContext, parts: list[Value], axis: int, what: str) -> Value:
    """`parts` (each one iteration's value) stacked along a new `axis`: folded when all are known."""
    shapes = {tuple(p.shape if isinstance(p, Constant) else nn.shape_of(p)) for p in parts}
    if len(shapes) != 1:
        raise node.error(f"{what}: the iterations give shapes {sorted(map(list, shapes))}; a scan output keeps one shape")
    (shape,) = shapes
    if all(isinstance(p, Constant) for p in parts):
        return node.constant(np.stack([p.array for p in parts], axis), f"{what}")
    out = list(shape)
    out.insert(axis, 1)
    pieces = [node.emit(nn.ReshapeOp(_as_ssa(node, p), out)) for p in parts]
    return node.emit(nn.ConcatOp(pieces, axis)) if len(pieces) > 1 else pieces[0]


@converts("Loop")
def convert_loop(node: NodeContext) -> list[Value | None]:
    """Loop with a trip count and condition known at import → its body imported once per
    iteration (iteration number and condition bound as constants, loop-carried values threaded
    through), scan outputs stacked along a new axis 0. The body's condition output must fold at
    import too (it decides whether another iteration exists).

    Raises:
        AscendirError (naming the node): a runtime trip count or condition, a loop without
            either (it would never end), more than MAX_UNROLL iterations, scan outputs of no
            iteration (their shape is unknown) or of changing shapes."""
    body = node.attr("body")
    if body is None:
        raise node.error("needs a body")
    trip_in = node.input(0) if node.has_input(0) else None
    cond_in = node.input(1) if node.has_input(1) else None
    for i, (what, v) in enumerate((("trip count", trip_in), ("condition", cond_in))):
        if v is not None and not isinstance(v, Constant):
            raise node.error(f"the {what} (input {i}, '{node.node.input[i]}') depends on runtime values; ascendir unrolls "
                             "loops whose iterations are known at import")
    if trip_in is None and cond_in is None:
        raise node.error("has neither a trip count nor a condition: it never ends")
    trip = int(np.asarray(trip_in.array).reshape(-1)[0]) if trip_in is not None else None
    going = bool(np.asarray(cond_in.array).reshape(-1)[0]) if cond_in is not None else True
    carried: list[Value] = [node.input(i) for i in range(2, node.num_inputs)]
    n_scan = len(body.output) - 1 - len(carried)
    if len(body.input) != 2 + len(carried) or n_scan < 0:
        raise node.error(f"the body takes {len(body.input)} inputs and gives {len(body.output)} outputs for "
                         f"{len(carried)} loop-carried values")
    scans: list[list[Value]] = [[] for _ in range(n_scan)]
    i = 0
    while going and (trip is None or i < trip):
        if i == MAX_UNROLL:
            raise node.error(f"runs more than {MAX_UNROLL} iterations; ascendir unrolls loops at import")
        outs = node.state.import_subgraph(body, node.label, [
            Constant(f"{node.label}.iter{i}", np.asarray(i, np.int64)), Constant(f"{node.label}.cond{i}", np.asarray(going)),
            *carried])
        if any(o is None for o in outs):
            return [None] * len(node.node.output)  # an unsupported op in the body: the importer reports it
        cond_out = outs[0]
        if not isinstance(cond_out, Constant):
            raise node.error(f"iteration {i}: the body's condition depends on runtime values; ascendir unrolls loops whose "
                             "iterations are known at import")
        going = bool(np.asarray(cond_out.array).reshape(-1)[0])
        carried = list(outs[1:1 + len(carried)])
        for acc, v in zip(scans, outs[1 + len(carried):]):
            acc.append(v)
        i += 1
    if n_scan and i == 0:
        raise node.error("runs no iteration, so its scan outputs have no shape ascendir can know")
    return carried + [_stack(node, acc, 0, f"scan{k}") for k, acc in enumerate(scans)]


@converts("Scan")
def convert_scan(node: NodeContext) -> list[Value | None]:
    """Scan (opset ≥ 9) → its body imported once per element of the scanned axis: state
    variables threaded through, each scan input sliced (scan_input_axes, reversed where
    scan_input_directions says), each scan output stacked along scan_output_axes (in reverse
    order where scan_output_directions says).

    Raises:
        AscendirError (naming the node): scan inputs of different lengths, more than
            MAX_UNROLL iterations, a zero-length scan with scan outputs."""
    body = node.attr("body")
    m = int(node.attr("num_scan_inputs", 0))
    if body is None or m < 1:
        raise node.error("needs a body and num_scan_inputs >= 1")
    n_state = node.num_inputs - m
    states: list[Value] = [node.input(i) for i in range(n_state)]
    xs = [node.input(n_state + j) for j in range(m)]
    in_axes = [node.axis(int(a), len(node.shape(n_state + j))) for j, a in enumerate(node.attr("scan_input_axes") or [0] * m)]
    in_dirs = list(node.attr("scan_input_directions") or [0] * m)
    lengths = {node.shape(n_state + j)[in_axes[j]] for j in range(m)}
    if len(lengths) != 1:
        raise node.error(f"scan inputs have lengths {sorted(lengths)} along their scan axes; they must agree")
    (length,) = lengths
    if length > MAX_UNROLL:
        raise node.error(f"scans {length} elements, more than the {MAX_UNROLL} ascendir unrolls at import")
    n_out = len(body.output) - n_state
    out_dirs = list(node.attr("scan_output_directions") or [0] * n_out)
    scans: list[list[Value]] = [[] for _ in range(n_out)]
    for t in range(length):
        slices = []
        for j, x in enumerate(xs):
            k = length - 1 - t if in_dirs[j] else t
            shape = list(node.shape(n_state + j))
            axis = in_axes[j]
            if isinstance(x, Constant):
                slices.append(Constant(f"{node.label}.x{j}_{k}", np.take(x.array, k, axis=axis)))
                continue
            starts = [0] * len(shape)
            starts[axis] = k
            size = list(shape)
            size[axis] = 1
            piece = node.emit(nn.SliceOp(_as_ssa(node, x), starts, [1] * len(shape), size))
            slices.append(node.emit(nn.ReshapeOp(piece, shape[:axis] + shape[axis + 1:])))
        outs = node.state.import_subgraph(body, node.label, [*states, *slices])
        if any(o is None for o in outs):
            return [None] * len(node.node.output)
        states = list(outs[:n_state])
        for acc, v in zip(scans, outs[n_state:]):
            acc.append(v)
    if n_out and length == 0:
        raise node.error("scans no element, so its scan outputs have no shape ascendir can know")
    results: list[Value | None] = list(states)
    for k, acc in enumerate(scans):
        ranks = {len(v.shape if isinstance(v, Constant) else nn.shape_of(v)) for v in acc}
        rank = ranks.pop() + 1 if len(ranks) == 1 else 1
        axes = node.attr("scan_output_axes") or [0] * n_out
        results.append(_stack(node, acc[::-1] if out_dirs[k] else acc, node.axis(int(axes[k]), rank), f"scan{k}"))
    return results
