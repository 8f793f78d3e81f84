"""The report's `moe` section: per recognised MoE block (templates/moe_match.py), the routing
of this run and what it means for the expert weights: tokens per expert, experts touched and
the expert-weight bytes read by today's lowering and by a grouped MatMul.

Where the routing comes from, always stated in the section's `routing`:

* a numerics run, or a timing-only run with --inputs: the router evaluated on this run's inputs
  (nn reference semantics, up to the last router's TopK; a softmax router that fuse-moe-gating
  fuses scored in f32, as its kernel does, `routed_indices`);
* a timing-only run without inputs (or --shape-only, whose zero weights route nothing): the
  assumption of --moe-routing (uniform, skew=A or an .npz of TopK indices), uniform when not
  given.

The gathered lowering (what -O0 / -O1 and an unrecognised block run) gathers each routed
(token, k) pair's expert weights and runs batched MatMuls on them: it reads tokens·k·W bytes of
weights in the gather and again in the MatMul (W: bytes of one expert's weights), whatever the
routing. The grouped lowering (-O2's moe_experts template: MoeInitRouting, then ops-transformer's
GroupedMatmul) reads each touched expert's weights once per row tile of its group
(grouped_matmul.row_tile): experts_touched·W when every group fits one tile. `lowering` says which one ran (`set_lowering`,
after the module is lowered), and the routing the section states is the one the simulated
grouped MatMuls follow (`moe_section` also returns it, for `simulate(moe_routing=...)`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from ascendir.conversion.nn_to_ascend.templates import moe_gating
from ascendir.conversion.nn_to_ascend.templates.grouped_matmul import row_tile
from ascendir.conversion.nn_to_ascend.templates.moe_match import MoeBlock, find_moe_blocks
from ascendir.costmodel.moe_routing import RoutingSpec, RoutingStats, make_routing
from ascendir.dialects import nn
from ascendir.dialects.ascend import KernelOp
from ascendir.dialects.ascend.ops_scalar import MOE_BLOCK_ATTR
from ascendir.driver import io_names, main_func
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.interpreter.exec.nn_reference import evaluate_op, softmax, top_k_indices
from ascendir.weights import WeightStore


def routed_indices(module: ModuleOp, weights: WeightStore, feeds: Mapping[str, np.ndarray],
                   blocks: list[MoeBlock], fused_router: bool = True) -> dict[MoeBlock, np.ndarray]:
    """Each block's TopK indices [tokens, k] on `feeds`: the function's ops evaluated in program
    order up to the last of the blocks' TopKs (nn reference semantics), except, with
    `fused_router` (the pipeline runs fuse-moe-gating), a softmax router's softmax and TopK
    where the moe_gating kernel computes them as MoeGatingTopKSoftmax does, in f32 on the
    logits widened (moe_gating.scores_in_f32: bf16 always, f16 in its Perf tiling's shapes),
    so that 16-bit scores do not tie.

    Raises: AscendirError on a missing input or an op without reference semantics."""
    fn = main_func(module)
    block = fn.body.block
    names = io_names(fn, results=False)
    missing = [n for n in names if n not in feeds]
    if missing:
        raise AscendirError(f"MoE routing: input '{missing[0]}' not given")
    env = {arg: np.asarray(feeds[n]) for arg, n in zip(block.args, names)}
    want = {b.topk for b in blocks}
    f32_topk = {b.topk for b in blocks if fused_router and _f32_router(b)}
    for op in block.ops:
        if not want:
            break
        if op in f32_topk:  # the moe_gating kernel's f32 softmax and top-k of the logits
            p = softmax(env[op.input.owner.operands[0]].astype(np.float32), -1)
            env[op.indices] = top_k_indices(p, op.k.value.data, -1)
        else:
            for r, v in zip(op.results, evaluate_op(op, [env[o] for o in op.operands], weights)):
                env[r] = v
        want.discard(op)
    return {b: env[b.topk.indices].reshape(b.tokens, b.top_k) for b in blocks}


def routing_by_block(module: ModuleOp, weights: WeightStore, feeds: Mapping[str, np.ndarray],
                     fused_router: bool = True) -> dict[str, np.ndarray]:
    """Each recognised MoE block's TopK indices [tokens, k] (int) by block name, in program order,
    on `feeds` cast to the element types of `module`'s arguments (so an fp16 run's inputs route
    the fp32 model as onnxruntime sees them); {} without a block. fused_router: as routed_indices.

    Raises: AscendirError as routed_indices."""
    fn = main_func(module)
    blocks = find_moe_blocks(fn.body.block)
    if not blocks:
        return {}
    cast = {n: np.asarray(feeds[n]).astype(to_numpy_dtype(a.type.element_type))
            for n, a in zip(io_names(fn, results=False), fn.body.block.args) if n in feeds}
    routed = routed_indices(module, weights, cast, blocks, fused_router)
    return {b.name: routed[b] for b in blocks}


def flipped_tokens(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> tuple[int, ...]:
    """The tokens (rows of the TopK indices [tokens, k]) whose expert set in `got` differs from
    the one in `want` in some block; blocks by name, `want`'s (routing_by_block of the run and of
    its fp32 reference). A 16-bit router flips a token whose k-th and (k+1)-th scores are closer
    than the dtype's rounding. Raises: ValueError when `got` lacks a block of `want` or routes
    another number of tokens."""
    flipped: set[int] = set()
    for name, w in want.items():
        g = got.get(name)
        if g is None or g.shape[0] != w.shape[0]:
            raise ValueError(f"MoE block {name}: the two routings do not route the same tokens")
        flipped.update(t for t in range(w.shape[0]) if set(g[t].tolist()) != set(w[t].tolist()))
    return tuple(sorted(flipped))


def _f32_router(b: MoeBlock) -> bool:
    """Whether fuse-moe-gating makes b's router a moe_gating kernel that keeps its softmax
    scores in f32 up to the top-k (moe_gating.scores_in_f32)."""
    found = moe_gating.match(b.topk)
    if found is None or not isinstance(found[0], nn.SoftmaxOp) or b.group_limit is not None:
        return False
    t_rows, e = nn.shape_of(b.topk.input)
    return moe_gating.scores_in_f32("softmax", b.topk.input.type.element_type, e, b.top_k, False)


def moe_section(module: ModuleOp, weights: WeightStore, feeds: Mapping[str, np.ndarray] | None,
                feeds_text: str, assumed: RoutingSpec | None,
                fused_router: bool = True) -> tuple[list[dict], dict[str, np.ndarray]] | None:
    """(the section: one dict per block, each block's TopK indices [tokens, k] by block name),
    or None when no MoE block is recognised. fused_router: as routed_indices.

    feeds: this run's inputs (None: the routing is `assumed`, uniform when None); feeds_text:
    where they come from, for the report. Raises: AscendirError when `assumed` is given but the
    model has no recognised MoE block, or a file routing does not fit a block."""
    blocks = find_moe_blocks(main_func(module).body.block)
    if not blocks:
        if assumed is not None:
            raise AscendirError("--moe-routing: the model has no MoE block ascendir recognises")
        return None
    if feeds is not None:
        routed, source = routed_indices(module, weights, feeds, blocks, fused_router), f"the router on {feeds_text}"
    else:
        spec = assumed or RoutingSpec("uniform")
        routed = {b: make_routing(spec, b.tokens, b.top_k, b.experts) for b in blocks}
        source = f"assumed: {spec.text()}" + ("" if assumed else " (no inputs; --moe-routing sets it)")
    out = []
    for b in blocks:
        s = RoutingStats.of(routed[b], b.experts, b.expert_bytes, row_tile(b.tokens * b.top_k, b.experts))
        out.append({
            "block": b.name, "experts": b.experts, "top_k": b.top_k, "scoring": b.scoring, "normalised": b.normalised,
            "group_limit": None if b.group_limit is None else {"groups": b.group_limit.groups, "keep": b.group_limit.keep},
            "shared_expert_inter": b.shared_inter, "tokens": b.tokens, "routing": source,
            "tokens_per_expert": list(s.tokens_per_expert), "experts_touched": s.experts_touched,
            "expert_weight_bytes": {"per_expert": b.expert_bytes, "gathered": 2 * b.tokens * b.top_k * b.expert_bytes,
                                    "grouped": s.expert_weight_bytes},
            "lowering": "gathered",
        })
    return out, {b.name: routed[b] for b in blocks}


def set_lowering(section: list[dict], module: ModuleOp) -> None:
    """Each block's `lowering` in `section`: "grouped" when lowered `module` holds its
    init-routing kernel (the kernel naming the block), else "gathered"."""
    grouped = {op.attributes[MOE_BLOCK_ATTR].data for op in module.ops
               if isinstance(op, KernelOp) and MOE_BLOCK_ATTR in op.attributes}
    for m in section:
        m["lowering"] = "grouped" if m["block"] in grouped else "gathered"


def moe_parts(section: list[dict]) -> list[list[str]]:
    """Per block, the figures of its run-table line, in the pieces a narrow screen may break
    between (report_table._packed)."""
    blocks = []
    for m in section:
        g = m.get("group_limit")
        kind = ", ".join(x for x in (
            m["scoring"], f"groups {g['keep']} of {g['groups']}" if g else "", "normalised" if m["normalised"] else "",
            f"shared expert {m['shared_expert_inter']}" if m["shared_expert_inter"] else "") if x)
        c = m["tokens_per_expert"]
        wb = m["expert_weight_bytes"]
        grouped = m.get("lowering") == "grouped"
        read, other = (wb["grouped"], wb["gathered"]) if grouped else (wb["gathered"], wb["grouped"])
        blocks.append([
            f"MoE {m['block']}:", f"top-{m['top_k']} of {m['experts']} ({kind}),", f"{m['tokens']} tokens routed by {m['routing']}:",
            f"experts touched {m['experts_touched']}/{m['experts']},", f"tokens per expert min {min(c)} / max {max(c)};",
            f"expert weights read {read / 1e6:,.2f} MB ({'grouped MatMul' if grouped else 'gathered lowering'}),",
            f"the gathered lowering would read {other / 1e6:,.2f} MB" if grouped else f"a grouped MatMul would read {other / 1e6:,.2f} MB",
        ])
    return blocks


def moe_lines(section: list[dict]) -> list[str]:
    """One line per block for the run table."""
    return [" ".join(parts) for parts in moe_parts(section)]
