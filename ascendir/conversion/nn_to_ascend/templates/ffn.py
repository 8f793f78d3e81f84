"""Template of `nn.fused {kind = #nn.fused_kind<ffn>}` (built by fuse-ffn): SwiGLU / GeGLU and MatMul → act → MatMul.

Body forms (fuse_ffn.match_gated / match_plain), x [..., H] viewed as [M, H]:

    gated:  h = act(x · Wg) * (x · Wu)          act ∈ {SiLU, GELU}, Wg, Wu [H, I]
    plain:  h = act(x · W1 [+ b1])              act ∈ {ReLU, GELU, SiLU}
    then    y = h · Wd [+ b2]                   Wd [I, Ho]

Two lowerings; `choose_plan` scores both per shape with the interpreter's cost pieces (as
choose-tiling does, nothing simulated; each estimate follows its kernels: tests/test_ffn_plan.py
checks the choice against simulation) and the chosen one is recorded on its kernels as the
`ffn_plan` attribute ("fused: est fused N vs two-kernel M cycles (tiles)").

A. One kernel, h never in GM as a whole (ffn_fused.py): work items (row block of bm rows, a
   range of I) over all AICs; per item gate/up chunk by chunk, act·mul, each h tile kept in L1,
   then h · Wd from L1 per Ho tile into fp32 partials [nsplit, M, Ho], added (+ b2, cast) by a
   small vector kernel. Each weight byte is read once per row block. Chosen where the weight
   stream dominates and the estimate is lower: LLaMA-7B / 70B decode (M = 1..32, TP 1..8).
   Known gap: at 7B TP8 decode (1 x 4096 x 1376) ffn_fused's estimate is 18 % above its
   simulation (56,093 vs 47,446; two kernels 56,138), a margin the pick survives.
B. Two kernels instead of four (gate + act, up, mul, down) and one round trip of the [M, I]
   intermediate instead of three (chosen at prefill, LLaMA-7B / 70B at 512 and 2048 rows, TP
   1..8: with M = 512 the partials of A would be nsplit × 8 MiB, more than the 10.75 MiB h
   round trip they replace):

1. `ffn_up` (ffn_up.py) — per output tile [bm, bn] of h (tiles block-cyclic over the cores): the K loop
   over H loads each x tile into L1 / L0A once and multiplies it by the Wg and the Wu tile,
   side by side in one [k, 2·bn] L1 / L0B tile, into one [bm, 2·bn] L0C accumulator (gate and
   up share every A load and every mmad; ping-pong L1 / L0 slots as in matmul.py). The finished
   pair then goes to the vector unit, which applies [bias,] act [and the product with up] in
   fp32 and writes h in the input dtype.
   * 910B (dav-c220, split AIC / AIV): a mix kernel. The accumulator leaves through FixPipe into
     a per-core GM workspace ([bm, 2·bn] fp32, in L2), AIV 0 reads it back (MTE2), computes h
     in UB and stores the tile (MTE3); flags with explicit units order the hand-off, a WAR flag
     lets the AIC reuse the workspace once the AIV has read it (flash_attention._Sync). With a
     long H loop the AIVs read the weights into L2 ahead of the AIC (AIV 1 Wg, AIV 0 Wu).
   * 910A (dav-c100, coupled core): L0C → UB directly on the vector pipe; no workspace.
2. `ffn_down` — h · Wd with the b2 row bias seeded from BT (matmul.emit_matmul with an
   epilogue), with choose-tiling's tiling of the region's down matmul when it has one.

What crosses L2 on 910B either way: AIC and AIV share no buffer (S2 architecture page), so
every activated tile goes cube → GM (L2) → vector → GM (L2) → cube. Path A keeps that traffic
to two small per-core rings (nacc·bm·bi fp32 out, bm·bi f16 back, re-used every chunk, so they
stay in L2) plus the fp32 partials; its GM traffic is not lower than B's at decode (+3.7 MiB on
258 MiB of weights at LLaMA-7B sizes), its gain is one weight stream split evenly over all
AICs. Only 910A keeps h truly in-core (L0C → UB → L1, ub2l1, S1).

What real CANN does: ops-transformer's `FFN` / `aclnnFFN` (ffn/ffn, Atlas A2 only) computes
y = act(x·W1 + b1)·W2 + b2 with act ∈ fastgelu / gelu / relu / silu or the gated geglu / swiglu /
reglu (W1 = [gate | up], N1 = 2·K2), and asks the caller for a device workspace
(aclnnFFNGetWorkspaceSize): the activated intermediate lands in GM workspace between the two
matmuls, as in B. Its README says no more about the kernel.

Approximations: one AIV stream per AIC (real groups have two AIVs); B's workspace has one slot.

A body that matches neither form (or a batched weight: Mixtral's gathered-weight experts) is
declined by the template (kinds/ffn.py) and lowered op by op; fuse-ffn has already given each
of its projections its epilogue region (ffn_region.split_projections).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, SSAValue

from ascendir.dialects import nn
from ascendir.dtypes import itemsize
from ascendir.hardware.config import HardwareConfig
from ascendir.conversion.nn_to_ascend.templates import ffn_fused
from ascendir.conversion.nn_to_ascend.templates.ffn_up import emit_up, prefetches, up_tiling
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.templates.matmul import emit_matmul, heuristic_tiling
from ascendir.conversion.nn_to_ascend.tiling import TILING_ATTR, Problem, Tiling, estimate, nz_weight, problem_of, tiling_for_op
from ascendir.conversion.nn_to_ascend.templates.epilogue import Epilogue


def _matmul_name(ctx: LoweringContext, mm: nn.MatmulOp) -> str:
    """Errors about one matmul of the region name it: `nn.fused #5 (ffn, ...): nn.matmul '/2/Gemm'`."""
    node = mm.attributes.get("onnx.node") or mm.attributes.get("onnx.name")
    return f"{ctx.current}: nn.matmul" + (f" '{node.data}'" if isinstance(node, StringAttr) else "")


def _recorded_tiling(ctx: LoweringContext, mm: nn.MatmulOp, problem: Problem) -> Tiling | None:
    """The checked `ascend.tiling` of one of the region's matmuls (its own fit: `problem`, the
    ffn_up or ffn_down kernel the plan gives it), or None; errors name that matmul."""
    if TILING_ATTR not in mm.attributes:
        return None
    return tiling_for_op(mm, problem, ctx.target, _matmul_name(ctx, mm))


def emit_ffn(ctx: LoweringContext, parts: dict, problems: dict[nn.MatmulOp, Problem], out_shape: tuple[int, ...],
             out_elem: Attribute) -> SSAValue:
    """The fused kernel or `ffn_up` + `ffn_down`, whichever `choose_plan` estimates faster (see
    the module docstring); returns the output buffer [..., Ho].

    Args:
        parts: ffn_region.parse_ffn's parts with x, wg, wu, b1, wd, b2 as GM buffers; its `ups`
            and `down` are the region's matmuls (their `ascend.tiling` is obeyed).
        problems: each of those matmuls' Problem as the plan lays it out (ffn_problems).

    Raises:
        AscendirError: fp32 / bf16 on a cube without them (910A), tiles that do not fit.
    """
    x, wg, wd = parts["x"], parts["wg"], parts["wd"]
    el = elem(x)
    if no_mmad := ctx.target.arch.no_mmad(str(el)):
        raise ctx.error(
            f"{ctx.target.name} ({ctx.target.arch}) {no_mmad}; "
            "cast the model to float16 (ascendir --dtype fp16)"
        )
    hdim, idim = shape(wg)
    m = math.prod(shape(x)) // hdim
    ho = shape(wd)[1]
    b1, b2 = parts["b1"], parts["b2"]
    down = parts["down"]
    s = ffn_fused.shape_of(m, hdim, idim, ho, el, out_elem, parts["wu"] is not None, b1, b2, parts["act"], problems[down].b_nz)
    # every recorded tiling is checked (errors name its matmul), the gate/up one obeyed by ffn_up
    ups = [(mm, _recorded_tiling(ctx, mm, problems[mm])) for mm in parts["ups"]]
    down_t = _down_tiling(ctx, down, problems[down], m, ho, idim, el, b2)
    given = [(mm, t) for mm, t in ups if t is not None]
    if given:
        if len(given) != len(ups) or len({t for _, t in given}) > 1:
            what = ", ".join(f"{_matmul_name(ctx, mm).split(': ', 1)[1]} {t.text() if t else 'none'}" for mm, t in ups)
            raise ctx.error(f"the gate and up matmuls share ffn_up's tile, so their ascend.tiling must be the same (got {what})")
        t = given[0][1]
        up_tiles = (t.m, t.n, t.k, t.k_l1)
    else:
        up_tiles = up_tiling(ctx, m, idim, hdim, el, s.nacc, b1 is not None, parts["act"], s.b_nz)
    bm, bn, bk, kl1 = up_tiles
    # its nacc accumulators as one wider tile; prefetch = ffn_up's own (Wg on AIV 1)
    up_t = Tiling(bm, s.nacc * bn, bk, kl1 // bk, prefetch=int(prefetches(ctx, m, hdim, bm, bn, kl1, el, s.nacc)))
    plan = choose_plan(ctx.target, s, ffn_fused.dtype_name(el), up_t, down_t)
    if given:  # the fused kernel has no per-matmul tiles: the tiling asked for runs as two kernels
        plan = Plan(None, plan.fused_cycles, plan.two_kernel_cycles, forced=True)
    first = len(ctx.kernels)
    if plan.fused is not None:
        y = ctx.buffer(out_shape, out_elem)
        ffn_fused.emit(ctx, ctx.view(x, [m, hdim]), wg, parts["wu"], ctx.view(b1, [1, idim]) if b1 is not None else None,
                       parts["act"], wd, ctx.view(b2, [1, ho]) if b2 is not None else None, y, s, plan.fused)
    else:
        first_row = bool(estimate(up_problem(s, ffn_fused.dtype_name(el)), up_t, ctx.target).parts["first_row"])
        h = emit_up(ctx, ctx.view(x, [m, hdim]), wg, parts["wu"], b1, parts["act"], m, hdim, idim, el, up_tiles, s.b_nz, first_row)
        y = emit_matmul(ctx, h, wd, out_shape, out_elem, Epilogue(b2, None), base="ffn_down", tiling=down_t, b_nz=s.b_nz)
    for k in ctx.kernels[first:]:
        k.attributes[PLAN_ATTR] = StringAttr(plan.text())
    return y


def ffn_problems(parts: dict) -> dict[nn.MatmulOp, Problem]:
    """The Problem of each matmul of an ffn region (parse_ffn's parts over the region's values)
    as emit_ffn runs it: a gate / up matmul as an [m, n] tile of ffn_up's nacc accumulators
    (with the b1 row and the activation), the down matmul as ffn_down (with the b2 row, an
    epilogue; without it a plain matmul kernel, emit_matmul's Epilogue(None, None), which may
    split K or its partial wave: tiling.tail_misfit). Their weights are stored NZ when all of
    them can be (tiling.nz_weight): the kernels load them with one layout."""
    ups, down = parts["ups"], parts["down"]
    nz = all(nz_weight(mm) for mm in (*ups, down))

    def bias_bytes(b: SSAValue | None) -> int:
        return itemsize(b.type.element_type) if b is not None else 0

    out = {mm: problem_of(mm, bias_bytes=bias_bytes(parts["b1"]), epilogue=True, act=parts["act"], ffn_up=len(ups), b_nz=nz)
           for mm in ups}
    out[down] = problem_of(down, bias_bytes=bias_bytes(parts["b2"]), epilogue=parts["b2"] is not None, b_nz=nz)
    return out


PLAN_ATTR = "ffn_plan"


@dataclass(frozen=True)
class Plan:
    """Which FFN lowering runs, with both analytic estimates (cycles; None: not applicable)."""

    fused: ffn_fused.FusedTiling | None
    fused_cycles: float | None
    two_kernel_cycles: float | None
    forced: bool = False  # two-kernel because the gate/up matmuls carry an ascend.tiling

    def text(self) -> str:
        """What the kernels' `ffn_plan` attribute says, e.g. "fused est 351234 vs two-kernel est
        560112 (bm=16 bi=256 bk=64 kl1=256 bn=256 nsplit=22 per=2)"."""
        kind = "fused" if self.fused is not None else "two-kernel (the gate/up matmul's ascend.tiling)" if self.forced else "two-kernel"
        f = f"{self.fused_cycles:.0f}" if self.fused_cycles is not None else "n/a"
        two = f"{self.two_kernel_cycles:.0f}" if self.two_kernel_cycles is not None else "n/a"
        tiles = ""
        if self.fused is not None:
            t = self.fused
            tiles = f" (bm={t.bm} bi={t.bi} bk={t.bk} kl1={t.kl1} bn={t.bn} nsplit={t.nsplit} sw={t.sw} kd={t.down_rows})"
        return f"{kind}: est fused {f} vs two-kernel {two} cycles{tiles}"


_PLANS: dict[tuple, Plan] = {}  # a model repeats its layers' shapes


def _down_tiling(ctx: LoweringContext, down: nn.MatmulOp, problem: Problem, m: int, ho: int, idim: int, el: Attribute,
                 b2: SSAValue | None) -> Tiling:
    """ffn_down's tiles: the `ascend.tiling` of the region's down matmul (choose-tiling's or IR
    text's; checked against ffn_down's buffers with the b2 row, errors naming that matmul), else
    matmul.heuristic_tiling's heuristic."""
    bias_el = elem(b2) if b2 is not None else None
    t = _recorded_tiling(ctx, down, problem)
    if t is not None:
        return t
    return heuristic_tiling(ctx, m, ho, idim, el, bias_el)


def up_problem(s: ffn_fused.Shape, dt: str) -> Problem:
    """The ffn_up kernel as tiling.estimate scores it: a [M, H] x [H, nacc·I] problem with the
    b1 row, the activation and nacc accumulators."""
    return Problem(1, s.m, s.nacc * s.i, s.h, dt, s.es, s.b1, True, act=s.act, ffn_up=s.nacc, b_nz=s.b_nz)


def choose_plan(target: HardwareConfig, s: ffn_fused.Shape, dt: str, up: Tiling, down: Tiling) -> Plan:
    """The FFN lowering with the fewer estimated cycles: ffn_fused (tiling from ffn_fused.choose)
    or ffn_up + ffn_down with the tilings they will run (`up`: ffn_up's nacc [bm, bn] accumulators
    as one [bm, nacc·bn] tile, prefetch = ffn_up's Wg prefetch; `down`: ffn_down's, with its
    swizzle and B prefetch), scored by tiling.estimate as the ffn_up kernel of a [M, H] x
    [H, nacc·I] problem (its AIV epilogue and prefetch included) and a [M, I] x [I, Ho] matmul.
    Unlike ffn_fused's estimate, tiling.estimate charges no per-L1-step read latency, and the
    fused kernel gets no margin (test_ffn_plan checks the picks against simulation: prefill and
    decode shapes of 7B / 70B, the corpus' small FFNs). Without an estimate for the
    dtype (no such mmad): two-kernel."""
    key = (target.name, target.memory.l2_model, s, dt, up, down)
    if key in _PLANS:
        return _PLANS[key]
    if dt not in target.cube.k_per_cycle:
        return Plan(None, None, None)
    two = 0.0
    for p, t in ((up_problem(s, dt), up), (Problem(1, s.m, s.ho, s.i, dt, s.out_es, s.b2, True, b_nz=s.b_nz), down)):
        two += estimate(p, t, target).cycles
    got = ffn_fused.choose(s, target, dt)
    if got is not None and got[1]["cycles"] < two:
        plan = Plan(got[0], got[1]["cycles"], two)
    else:
        plan = Plan(None, got[1]["cycles"] if got is not None else None, two)
    _PLANS[key] = plan
    return plan
