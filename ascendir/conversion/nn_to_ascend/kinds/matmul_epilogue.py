"""The matmul_epilogue template: `nn.fused {kind = #nn.fused_kind<matmul_epilogue>}`, MatMul + bias row + ReLU/GELU/SiLU +
residual add, with the epilogue applied before the result leaves the core (no GM round trip of
the pre-activation).

The body (built by fuse-matmul-epilogue) is `nn.matmul`, then optionally `nn.add` of a row bias
(N elements, broadcast along the last dim), then optionally `nn.relu` / `nn.gelu` / `nn.silu`,
then optionally `nn.add` of a residual (a tensor of exactly the output's shape and type: the
o_proj / down_proj + skip connection of a transformer layer).

How each stage is realized (cube loop structure: see matmul.py):

* bias, 910B (dav-c220): the bias row of the N tile goes GM -> L1 (MTE2) -> BT (MTE1, the 1 KiB
  bias table) and is the initial value of L0C on the first k step (`ascend.mmad ... bias(%bt)`
  with init = true), the way Ascend C's Matmul with bias does it (`cmatrixSource` = BT).
* ReLU, 910B: applied by FixPipe on the L0C -> GM copy (`ascend.copy {relu}`), free.
* GELU / SiLU, 910B: the cube cannot apply them and AIC and AIV share no buffer, so the kernel
  is a `mix` kernel (core_type = #ascend.core_type<mix>: each block is an AIC plus an AIV). Its AIC loop writes
  every finished tile (bias included) to GM, where it stays in L2, and sets FIX -> MTE2 once per
  tile; its AIV loop then waits for each tile in the same order, loads it into UB (MTE2), applies
  `vgelu` / `vgelu_tanh` / `vsilu` (V) and stores it back in place (MTE3). Both loops run
  concurrently on the two units' pipes; only the per-tile flags order them.
  Real CANN (catlass / ops-nn MatmulActivation-style kernels, KERNEL_TYPE_MIX_AIC_1_2) hands
  tiles over with CrossCoreSetFlag / CrossCoreWaitFlag through a small workspace ring in GM, the
  AIC waiting when the ring is full, and the two AIVs of the group each take half of a tile.
  Approximations here: the hand-off is an intra-kernel flag pair FIX -> MTE2 (the dialect has
  no cross-core flags yet), the "workspace" is the output buffer itself (so the AIC never waits
  for the AIV; real hardware counts at most 16 outstanding cross-core sets, S2), and one AIV
  stream handles the whole tile.
* residual, 910B: FixPipe cannot add a second tensor, so this is a mix kernel too; the AIV loads
  the finished tile back (L2) together with the residual tile (MTE2), adds them (after the
  activation, if any) and stores the sum in place (MTE3). What this buys over a separate add
  kernel is honest but modest: the same GM bytes move (C written, C and R read, the sum
  written), but the add runs on the AIV while the AIC computes the next tile instead of in a
  second launch after the whole matmul, and C is read back while it is still in L2.
* 910A (dav-c100, coupled core, no FixPipe): L0C -> UB is the natural path anyway; the tile
  stays f32 in UB, the vector unit adds the bias row (`vadd` broadcasting [1, N]), applies the
  activation, adds the residual tile (MTE2 -> UB, widened to f32), casts to the output type and
  MTE3 stores it: the matmul result never reaches GM.

Protocol side: plan = templates/epilogue.parse_chain of the region's body (declined unless it
is that chain); emit = templates/matmul.emit_matmul with that epilogue (one cube or mix
kernel); one matmul site.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend import tiling
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kinds.matmul_sites import MatmulTiles, matmul_site
from ascendir.conversion.nn_to_ascend.template import Site, TemplateBase, body_of, gm_args, gm_epilogue
from ascendir.conversion.nn_to_ascend.templates.epilogue import KIND, Epilogue, parse_chain
from ascendir.conversion.nn_to_ascend.templates.matmul import emit_matmul, tiling_of
from ascendir.dialects import nn
from ascendir.dtypes import itemsize
from ascendir.hardware.config import HardwareConfig


@dataclass(frozen=True)
class EpiloguePlan:
    """The matmul and its epilogue, over the region's own values (block arguments)."""

    region: nn.FusedOp
    mm: nn.MatmulOp
    epilogue: Epilogue
    problem: tiling.Problem


class MatmulEpilogueTemplate(MatmulTiles, TemplateBase):
    kind = KIND

    def plan(self, region: nn.FusedOp) -> EpiloguePlan | Declined:
        """Declined unless the body is matmul [+ row bias] [+ ReLU/GELU/SiLU] [+ residual]
        yielding its last value, the matmul's lhs a region argument and the output its size."""
        block = region.body.block
        body = body_of(region)
        parsed = parse_chain(body, {a: a for a in block.args})
        term = block.last_op
        if parsed is None or len(region.outputs) != 1 or not isinstance(term, nn.YieldOp) or list(term.values) != [body[-1].results[0]]:
            return Declined("the body is not matmul [+ row bias] [+ ReLU/GELU/SiLU] [+ residual] yielding its last value")
        mm, epilogue = parsed
        if mm.lhs not in block.args or math.prod(shape(region.outputs[0])) != math.prod(shape(mm.result)):
            return Declined("the matmul's lhs is computed in the region, or the output is not the matmul's size")
        problem = tiling.problem_of(
            mm, bias_bytes=itemsize(elem(mm.lhs)) if epilogue.bias is not None else 0, epilogue=len(body) > 1,
            act=epilogue.activation, residual=epilogue.residual is not None, b_nz=tiling.nz_weight(mm),
        )
        return EpiloguePlan(region, mm, epilogue, problem)

    def sites(self, plan: EpiloguePlan, target: HardwareConfig) -> list[Site]:
        site = matmul_site(plan.mm, plan.problem, target)
        return [site] if site is not None else []

    def emit(self, ctx: LoweringContext, plan: EpiloguePlan, operands: list[SSAValue]) -> list[SSAValue]:
        """One cube (or mix) kernel with the matmul's recorded tiling (`ascend.tiling`); a weight B
        read only as matmul B is stored NZ (tiling.nz_weight), as for the plain matmul."""
        args = gm_args(plan.region, operands)
        epilogue = gm_epilogue(plan.epilogue, args)
        out = plan.region.outputs[0]
        mm = plan.mm
        return [
            emit_matmul(
                ctx, args[mm.lhs], args[mm.rhs], shape(out), elem(out), epilogue, base="matmul_epilogue",
                tiling=tiling_of(ctx, mm, plan.problem), b_nz=plan.problem.b_nz,
            )
        ]


MATMUL_EPILOGUE = MatmulEpilogueTemplate()
