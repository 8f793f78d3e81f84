"""How the cube template lays out `a @ b` (numpy matmul rule), shared by the lowering
(matmul.py's emit_matmuls) and the tiling search (tiling.py's problem_of)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ascendir.dialects import nn
from ascendir.conversion.nn_to_ascend.templates.elementwise import collapse_broadcast


@dataclass(frozen=True)
class MatmulLayout:
    """`batch` products of [m_rows, k] x [k, n].

    When B has no batch dims (weights), A's batch is folded into M (m_rows = prod(batch) * m, one
    product), as CANN's MatMul does; otherwise each output batch maps to its A and B batch by
    broadcasting: `out_batch`, `a_batch`, `b_batch` are the batch shapes collapsed to one rank
    (`a_batch`/`b_batch` size 1 where they broadcast; [1] when folded).
    """

    m: int
    k: int
    n: int
    batch: int
    m_rows: int
    out_batch: tuple[int, ...]
    a_batch: tuple[int, ...]
    b_batch: tuple[int, ...]


def matmul_layout(a_shape: Sequence[int], b_shape: Sequence[int]) -> MatmulLayout:
    """The layout of `a @ b` for A of shape [..., M, K] (or [K]) and B [..., K, N] (or [K]).

    Raises:
        VerifyException: batch dims that do not broadcast (nn.broadcast_shapes).
    """
    sa, sb = tuple(a_shape), tuple(b_shape)
    a2 = (1, *sa) if len(sa) == 1 else sa
    b2 = (*sb, 1) if len(sb) == 1 else sb
    m, k = a2[-2:]
    n = b2[-1]
    ba, bb = a2[:-2], b2[:-2]
    if math.prod(bb) == 1:
        return MatmulLayout(m, k, n, 1, math.prod(ba) * m, (1,), (1,), (1,))
    bo = nn.broadcast_shapes(ba, bb)
    out_b, (a_b, b_b) = collapse_broadcast(bo, [ba, bb])
    return MatmulLayout(m, k, n, math.prod(bo), m, tuple(out_b), tuple(a_b), tuple(b_b))
