"""If: a condition known at import selects a branch, which is imported in place of the node
(the other branch is never looked at); a runtime condition imports both branches and selects
each output with nn.where (both computed, as a vector unit would run them anyway).

Branches are subgraphs that read outer values by name; `ImportState.import_subgraph` imports
one through the importer's own node loop, so folding, converters and the list of unsupported
ops (an op inside a branch is reported by its own name) are the model's.
"""

from __future__ import annotations

import numpy as np

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Constant, Value


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
        a = node.state.materialize(a) if isinstance(a, Constant) else a
        b = node.state.materialize(b) if isinstance(b, Constant) else b
        if a.type != b.type:
            raise node.error(
                f"output {i}: the branches give {a.type} and {b.type}; a runtime condition needs one shape and type "
                "(pin the inputs the condition depends on to fold it)"
            )
        results.append(node.emit(nn.WhereOp(c, a, b)))
    return results
