"""Template of `nn.fused {kind = #nn.fused_kind<norm_matmul>}` (built by fuse-norm-matmul): RMSNorm / LayerNorm
over the last axis of x [..., H], then the projections y_i = epilogue_i(norm(x) · W_i), each
epilogue a matmul_epilogue chain (row bias, ReLU/GELU/SiLU, residual).

Two kernels instead of 1 + (number of projections) when the epilogues are bias rows at most
(Q/K/V):

1. `norm_matmul_norm` (AIV): the row kernel of reduction.py (statistics in fp32) writes the
   normalized rows xn [M, H] ONCE, in the input dtype, to a GM buffer that stays in L2 at these
   sizes (512 x 4096 f16 = 4 MiB).
2. `norm_matmul` (AIC): one grouped cube kernel (matmul.emit_matmuls) over the output tiles of
   all projections as ONE block-cyclic work list: each core goes from its last Q tile straight
   to its first K tile, so the tail of one projection is filled by the next (three separate
   launches each end on a partly idle wave), and the bias rows are seeded from BT. A single
   projection with an activation or a residual (GPT-2's c_fc + GELU) gets its usual
   matmul_epilogue kernel; several such projections get one each.

What it does not save, and why: on 910B (dav-c220) the vector cores (AIV) and the cube (AIC)
share no on-chip buffer (S2), so normalized activations reach the cube only through GM/L2: xn
is written once and read by every projection's tiles, exactly as the unfused graph does (there
too the norm kernel writes it once and each matmul reads it). GM bytes are therefore the same;
the saving is launches and tails. Putting both halves in one mix kernel would need a barrier
between all AIVs and all AICs (Ascend C SyncAll), which the dialect does not have yet; real
CANN fused prologs of this kind (e.g. ops-transformer's MLA prolog) also hand the normalized
activations to the cube through a GM workspace. 910A lowers the same two kernels (its grouped
matmul goes through UB as every 910A matmul).

A body of another shape is declined (parse_norm_matmul) and lowered op by op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from ascendir.dialects import nn
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, shape
from ascendir.conversion.nn_to_ascend.templates.matmul import Product, emit_matmul, emit_matmuls
from ascendir.conversion.nn_to_ascend.tiling import Tiling
from ascendir.conversion.nn_to_ascend.templates.epilogue import Epilogue, match_chain, parse_chain
from ascendir.conversion.nn_to_ascend.templates.reduction import normalize


@dataclass(frozen=True)
class Projection:
    """One projection of the normalized rows, over the region's own values: its matmul, its
    epilogue (parse_chain's, bias / residual as block arguments) and the value it yields."""

    mm: nn.MatmulOp
    epilogue: Epilogue
    out: SSAValue


@dataclass(frozen=True)
class NormMatmul:
    """A norm_matmul region as parse_norm_matmul reads it: the norm and the projections in the
    order the region yields them."""

    norm: Operation
    projections: tuple[Projection, ...]


def parse_norm_matmul(region: nn.FusedOp) -> NormMatmul | Declined:
    """The norm and one projection per yielded value of a norm_matmul region, or Declined if its
    body is not norm [+ reshape] + projections of the normalized rows with their epilogue chains,
    each chain yielded (see the module docstring)."""
    block = region.body.block
    args = {a: a for a in block.args}
    ops = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    if not ops or not isinstance(ops[0], (nn.RmsNormOp, nn.LayerNormOp)):
        return Declined("the body does not start with nn.rms_norm or nn.layer_norm")
    norm = ops[0]
    if any(v not in args for v in norm.operands):
        return Declined("an operand of the norm is computed inside the region")
    lhs = norm.results[0]
    if len(ops) > 1 and isinstance(ops[1], nn.ReshapeOp) and ops[1].input == lhs:
        lhs = ops[1].result
    chains = [match_chain(mm) for mm in ops if isinstance(mm, nn.MatmulOp) and mm.lhs == lhs]
    ends = {c[-1].results[0]: parse_chain(c, args) for c in chains}
    covered = sum(len(c) for c in chains) + (2 if lhs is not norm.results[0] else 1)
    yields = list(block.last_op.values)
    if covered != len(ops) or set(ends) != set(yields) or len(yields) != len(ends) or None in ends.values():
        return Declined("the body is not the norm [+ reshape] and projections of its result with their epilogue chains, "
                        "each chain yielded")
    return NormMatmul(norm, tuple(Projection(*ends[y], y) for y in yields))


def emit_norm_matmul(ctx: LoweringContext, norm: Operation, norm_args: list[SSAValue],
                     products: list[Product], tilings: list[Tiling | None] | None = None, b_nz: bool = False) -> list[SSAValue]:
    """A norm kernel over `norm_args` (GM buffers of the norm's operands) and one grouped cube
    kernel (or one mix kernel per projection that has an activation or residual) for `products`
    (the projections, GM buffers); results in the products' order. `tilings`: each projection's
    checked `ascend.tiling` (None: none recorded); the grouped kernel runs the projections'
    tiling when they all have the same one (choose-tiling gives equal shapes equal tilings),
    else matmul.heuristic_tiling's. `b_nz`: every product's B is stored in NZ fractals
    (matmul.emit_matmuls).

    Raises:
        AscendirError: as the norm and matmul templates (tiles that do not fit, no fp32 cube).
    """
    xn = normalize(ctx, norm, *norm_args, rms=isinstance(norm, nn.RmsNormOp), base="norm_matmul_norm")[0]
    hdim = shape(xn)[-1]
    xn2 = ctx.view(xn, [math.prod(shape(xn)) // max(hdim, 1), hdim])
    tilings = tilings or [None] * len(products)
    if len(products) == 1 or all(p.epilogue.activation is None and p.epilogue.residual is None for p in products):
        shared = tilings[0] if len(set(tilings)) == 1 else None
        return emit_matmuls(ctx, xn2, products, base="norm_matmul", tiling=shared, b_nz=b_nz)
    # an activation or residual needs a mix kernel of its own (emit_matmuls groups bias-only products)
    return [emit_matmul(ctx, xn2, p.b, p.out_shape, p.out_elem, p.epilogue, base="norm_matmul", tiling=t, b_nz=b_nz)
            for p, t in zip(products, tilings)]
