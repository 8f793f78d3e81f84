"""Einsum as transposes, reshapes, reductions and batched nn.matmul.

Each operand first loses its repeated letters (a diagonal: multiply by an identity mask, sum one
of the two axes) and the letters no other operand nor the output uses (summed). Operands are then
contracted left to right, two at a time: letters in both and still needed later are batch dims,
letters in both and needed nowhere else are contracted, the rest are each side's free dims, so
every pair is one nn.matmul of [batch, free_a, contracted] x [batch, contracted, free_b]. The
result is transposed to the output's letter order. `...` stands for the same broadcast dims in
every operand (aligned from the right, as numpy.einsum).
"""

from __future__ import annotations

import math
import string

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

_ELLIPSIS_LETTERS = string.ascii_letters[::-1]  # stand-ins for `...` dims: letters the equation does not use


class _Term:
    """One operand or intermediate: its value, letters (one per dim) and dims."""

    def __init__(self, value: SSAValue, letters: str, dims: tuple[int, ...]):
        self.value, self.letters, self.dims = value, letters, dims


def _parse(node: NodeContext, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Per-operand letter strings and the output's, with `...` replaced by stand-in letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise node.error(f"equation '{equation}' names {len(terms)} operands, the node has {len(ranks)}")
    used = set(eq.replace(".", "").replace(",", "").replace("-", "").replace(">", ""))
    if any(not c.isalpha() for c in used):
        raise node.error(f"equation '{equation}' holds characters other than letters, ',', '->' and '...'")
    stand_ins = [c for c in _ELLIPSIS_LETTERS if c not in used]
    ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    if ell > len(stand_ins):
        raise node.error(f"equation '{equation}': too many dims under '...'")
    fill = "".join(stand_ins[:ell])
    letters = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - len(t.replace("...", ""))
            if k < 0:
                raise node.error(f"operand '{t}' of equation '{equation}' has rank {r}")
            t = t.replace("...", fill[ell - k:])
        if len(t) != r:
            raise node.error(f"operand '{t}' of equation '{equation}' names {len(t)} dims, the input has rank {r}")
        letters.append(t)
    if arrow:
        out = out.replace("...", fill)
        if len(set(out)) != len(out) or any(c not in "".join(letters) for c in out):
            raise node.error(f"output '{out}' of equation '{equation}' repeats a letter or names one no operand has")
    else:  # implicit form: `...` first, then the letters used once, in alphabetical order
        counts = "".join(letters)
        out = fill + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in fill))
    return letters, out


def _transpose(node: NodeContext, t: _Term, order: str) -> _Term:
    if order == t.letters:
        return t
    perm = [t.letters.index(c) for c in order]
    return _Term(node.emit(nn.TransposeOp(t.value, perm)), order, tuple(t.dims[p] for p in perm))


def _reshape(node: NodeContext, v: SSAValue, dims: list[int]) -> SSAValue:
    return v if tuple(dims) == nn.shape_of(v) else node.emit(nn.ReshapeOp(v, dims))


def _diagonals(node: NodeContext, t: _Term, dtype: np.dtype) -> _Term:
    """Remove repeated letters: x · eye over the two axes, then the sum over the second."""
    while len(set(t.letters)) != len(t.letters):
        c = next(c for c in t.letters if t.letters.count(c) > 1)
        p = t.letters.index(c)
        q = t.letters.index(c, p + 1)
        if t.dims[p] != t.dims[q]:
            raise node.error(f"letter '{c}' has sizes {t.dims[p]} and {t.dims[q]}")
        n = t.dims[p]
        mask = np.eye(n, dtype=dtype).reshape([n if i in (p, q) else 1 for i in range(len(t.dims))])
        v = node.emit(nn.ReduceSumOp(node.emit(nn.MulOp(t.value, node.constant(mask, "diagonal"))), [q], False))
        t = _Term(v, t.letters[:q] + t.letters[q + 1:], t.dims[:q] + t.dims[q + 1:])
    return t


def _sum(node: NodeContext, t: _Term, drop: set[str]) -> _Term:
    axes = [i for i, c in enumerate(t.letters) if c in drop]
    if not axes:
        return t
    keep = [i for i in range(len(t.letters)) if i not in axes]
    v = node.emit(nn.ReduceSumOp(t.value, axes, False))
    return _Term(v, "".join(t.letters[i] for i in keep), tuple(t.dims[i] for i in keep))


def _contract(node: NodeContext, a: _Term, b: _Term, needed: set[str]) -> _Term:
    """a and b contracted over their shared letters not in `needed` (one batched nn.matmul)."""
    size = dict(zip(a.letters + b.letters, a.dims + b.dims))  # equal per letter (expanded before)
    shared = [c for c in a.letters if c in b.letters]
    batch = "".join(c for c in shared if c in needed)
    summed = "".join(c for c in shared if c not in needed)
    free_a = "".join(c for c in a.letters if c not in b.letters)
    free_b = "".join(c for c in b.letters if c not in a.letters)
    a = _transpose(node, a, batch + free_a + summed)
    b = _transpose(node, b, batch + summed + free_b)
    nb = [size[c] for c in batch]
    pa, pk, pb = (math.prod(size[c] for c in s) for s in (free_a, summed, free_b))
    av = _reshape(node, a.value, [*nb, pa, pk])
    bv = _reshape(node, b.value, [*nb, pk, pb])
    v = node.emit(nn.MatmulOp(av, bv))
    letters = batch + free_a + free_b
    dims = tuple(size[c] for c in letters)
    return _Term(_reshape(node, v, list(dims)), letters, dims)


@converts("Einsum")
def convert_einsum(node: NodeContext) -> list[Value]:
    """Einsum (float operands) → diagonals, sums, pairwise batched nn.matmul and a final
    transpose (see the module docstring)."""
    dtype = node.dtype(0)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise node.error(f"expects float operands, got {dtype}")
    ranks = [len(node.shape(i)) for i in range(node.num_inputs)]
    letters, out = _parse(node, str(node.attr("equation", "")), ranks)
    terms = []
    for i, lt in enumerate(letters):
        t = _diagonals(node, _Term(node.value(i), lt, node.shape(i)), dtype)
        others = set(out).union(*(set(x) for j, x in enumerate(letters) if j != i))
        terms.append(_sum(node, t, set(t.letters) - others))
    sizes: dict[str, int] = {}
    for t in terms:
        for c, d in zip(t.letters, t.dims):
            if sizes.get(c, d) != d and 1 not in (sizes[c], d):
                raise node.error(f"letter '{c}' has sizes {sizes[c]} and {d}")
            sizes[c] = max(sizes.get(c, d), d)
    for t in terms:
        if any(sizes[c] != d for c, d in zip(t.letters, t.dims)):
            dims = [sizes[c] for c in t.letters]
            t.value, t.dims = node.emit(nn.ExpandOp(t.value, dims)), tuple(dims)
    acc = terms[0]
    for i in range(1, len(terms)):
        needed = set(out).union(*(set(t.letters) for t in terms[i + 1:]))
        acc = _contract(node, acc, terms[i], needed)
        acc = _sum(node, acc, set(acc.letters) - needed)
    acc = _sum(node, acc, set(acc.letters) - set(out))
    return [_transpose(node, acc, out).value]
