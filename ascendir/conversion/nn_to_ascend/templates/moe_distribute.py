"""Comm kernels of the expert-parallel exchanges (dialects/nn/moe_distribute.py):
ops-transformer's MoeDistributeDispatch / MoeDistributeCombine on the link model.

nn.moe_distribute_dispatch on device r (P pairs, N devices, El experts each):

1. MoeInitRouting over all E experts (templates/moe_init_routing.py): the pairs sorted by
   expert, hence by destination device (device q's experts are contiguous); group list [E+1];
   its inverse permutation is the dispatch's expand_idx;
2. the rows gathered in that order, xs [P, H] (templates/data_movement.py's row gather);
3. the comm kernel: handshake with every peer, then for each peer q (its own stream, as the
   collectives' mesh): the El+1 group-list entries of q's experts into row r of q's
   ep_recv_offsets, then rows group_list[q·El] .. group_list[(q+1)·El] - 1 of xs into slot r of
   q's expand_x: **the bytes of the routing, not of the capacity** (the row count is read from
   the group list by the scalar unit; a destination with no pair gets a copy of no bytes); done;
4. expand_ids from ep_recv_offsets (the slots over the AIVs; scalar stores for used rows, MTE3
   for the unused rest): slot s's rows get their local expert ids, unused rows El.

nn.moe_distribute_combine on device q: handshake; for each peer s, the rows q holds for s (count
from ep_recv_offsets row s) go back into s's sorted buffer at s's offsets; done; each device
then un-permutes its own rows (row gather by expand_idx), except where every reader of the result
is a moe_finalize_routing region's expert outputs (moe_experts.expert_major_readers): then the
sorted buffer is the result, registered in LoweringContext.row_order with expand_idx, and the
finalize kernel reads each (token, k) row through it, as the vendor's combine kernels have no
un-permute pass (CamMoeCombineNormal stores each row at its (token, k) slot of the source's
window, cam_moe_combine_normal.h CopyBufferToShare at sgl-kernel-npu b2e93094; the weighted sum
reads the rows from there).

Both comm kernels move their rows with the die's AIVs, one DataCopy in and one out per row, as
the vendor's kernels do (ops-transformer's MoeDistributeDispatch / Combine, DeepEP-Ascend's
CamMoeDispatchNormal / CamMoeCombineNormal: AIV-only kernels on the HCCL windows, no SDMA):
the dispatch's rows double-buffered ("pipelined"), the combine's each closed by a PIPE_ALL
barrier and a status flag ("barrier"); timing in interpreter/sim/comm.py (`aiv_row_cycles`, the
link's bandwidth and port as the bound for large rows). Not modelled: the dispatch's int8
quantisation on the way (dynamic_scales); the vendor's receivers pull rows from the senders'
windows where these kernels push them (the same bytes on the same link). The scalar group-list
reads of the comm kernel cost nothing.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr, i64
from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder
from ascendir.conversion.nn_to_ascend.templates.collectives import CommKernel
from ascendir.conversion.nn_to_ascend.templates.data_movement import emit_gather_rows
from ascendir.conversion.nn_to_ascend.templates.elementwise import vector_cores
from ascendir.conversion.nn_to_ascend.templates.moe_experts import expert_major_readers
from ascendir.conversion.nn_to_ascend.templates.moe_init_routing import _scalar, emit_moe_init_routing
from ascendir.costmodel.moe_routing import ep_block
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend.ops_comm import AIV_ROWS_ATTR
from ascendir.dialects.ascend.ops_scalar import MOE_BLOCK_ATTR
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe

FILL_ROWS = 2048  # unused rows of expand_ids written per MTE3 copy (16 KiB of i64)
BLOCK_ATTR = "moe_block"  # on the dispatch op (shard-expert-parallel): the MoE block it routes

def _get(ck: CommKernel, buf: SSAValue, *index) -> SSAValue:
    kb = ck.kb
    return kb.emit(ascend.GetValueOp(buf, [kb.idx(i) for i in index])).result


def lower_dispatch(ctx: LoweringContext, op: nn.MoeDistributeDispatchOp, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.moe_distribute_dispatch (module docstring): returns GM expand_x [N·P, H], expand_ids
    [N·P] i64, ep_recv_offsets [N, El+1] i64, expand_idx [P] i64."""
    x, ids = operands
    n, experts, local = op.group.size, op.experts.value.data, op.local_experts
    pairs, hidden = shape(x)
    block = op.attributes[BLOCK_ATTR].data if BLOCK_ATTR in op.attributes else "moe_distribute"
    sorted_rows, dest, group_list = emit_moe_init_routing(ctx, ids, experts, ep_block(block, n, experts, "send"))
    xs = emit_gather_rows(ctx, x, sorted_rows)
    recv = ctx.buffer([n, pairs, hidden], elem(x))
    offs = ctx.buffer([n, local + 1], i64)
    args = [xs, offs, group_list, recv]  # offs second: a timing-only run fills it from the routing
    ck = CommKernel(ctx, op.group, "moe_distribute_dispatch", args)
    kb = ck.kb
    g_xs, g_offs, g_gl, g_recv = ck.args
    ck.sync()
    for q in ck.peers:
        first = kb.mul(q, local)
        ck.copy(kb.subview(g_gl, [first], [local + 1]), kb.subview(g_offs, [ck.rank, 0], [1, local + 1]), q)
        lo, hi = _get(ck, g_gl, first), _get(ck, g_gl, kb.add(first, local))
        count = kb.sub(hi, lo)
        ck.copy(kb.subview(g_xs, [lo, 0], [count, hidden]), kb.subview(g_recv, [ck.rank, 0, 0], [1, count, hidden]), q)
    ck.sync()
    kernel = kb.finish()
    kernel.attributes[MOE_BLOCK_ATTR] = StringAttr(ep_block(block, n, experts, "offsets"))
    kernel.attributes[AIV_ROWS_ATTR] = StringAttr("pipelined")  # ShareToOutput's two-slot row queue
    ctx.launch(kernel, args)
    eids = _emit_expand_ids(ctx, offs, pairs, local)
    return [ctx.view(recv, [n * pairs, hidden]), eids, offs, dest]


def _emit_expand_ids(ctx: LoweringContext, offs: SSAValue, pairs: int, local: int) -> SSAValue:
    """expand_ids [N·P] i64 from ep_recv_offsets [N, El+1]: slot s, row i < offs[s, El] -
    offs[s, 0] holds the e with offs[s, e] <= offs[s, 0] + i < offs[s, e+1]; the rest El.

    The slots are dealt over the AIVs; the scalar unit reads a slot's offsets from GM and stores
    the ids of its used rows to GM (one store per received row: the cost follows the routing);
    MTE3 fills the unused rows from a UB row of El (chunks of at most FILL_ROWS)."""
    n = shape(offs)[0]
    eids = ctx.buffer([n * pairs], i64)
    args = [offs, eids]
    bd = max(1, min(n, vector_cores(ctx)))
    chunk = min(pairs, FILL_ROWS)
    kb = KernelBuilder(ctx, ctx.name("moe_distribute_expand_ids"), [a.type for a in args], CoreType.AIV, bd, ctx.current)
    g_offs, g_ids = kb.args
    u_pad = kb.alloc([chunk], i64, MemSpace.UB)
    load, store = _scalar(kb)
    with kb.loop(0, chunk, 1) as j:
        store(local, u_pad, j)
    kb.handoff(Pipe.S, Pipe.MTE3)
    with kb.loop(kb.block_idx, n, bd) as s:
        base = kb.mul(s, pairs)
        lo = load(g_offs, s, 0)
        with kb.loop(0, local, 1) as e:
            a, b = kb.sub(load(g_offs, s, e), lo), kb.sub(load(g_offs, s, kb.add(e, 1)), lo)
            with kb.loop(kb.add(base, a), kb.add(base, b), 1) as j:
                store(e, g_ids, j)
        with kb.loop(kb.sub(load(g_offs, s, local), lo), pairs, chunk) as c0:
            size = kb.min(chunk, kb.sub(pairs, c0))
            kb.copy(kb.subview(u_pad, [0], [size]), kb.subview(g_ids, [kb.add(base, c0)], [size]))
    ctx.launch(kb.finish(), args)
    return eids


def lower_combine(ctx: LoweringContext, op: nn.MoeDistributeCombineOp, operands: list[SSAValue]) -> list[SSAValue]:
    """nn.moe_distribute_combine (module docstring): returns GM y [P, H]."""
    ey, offs, idx = operands
    n, local = op.group.size, op.local_experts
    pairs = shape(idx)[0]
    hidden = shape(ey)[1]
    back = ctx.buffer([pairs, hidden], elem(ey))
    ey3 = ctx.view(ey, [n, pairs, hidden])
    ck = CommKernel(ctx, op.group, "moe_distribute_combine", [ey3, offs, back])
    kb = ck.kb
    g_ey, g_offs, g_back = ck.args
    ck.sync()
    for s in ck.peers:
        lo, hi = _get(ck, g_offs, s, 0), _get(ck, g_offs, s, local)
        count = kb.sub(hi, lo)
        ck.copy(kb.subview(g_ey, [s, 0, 0], [1, count, hidden]), kb.subview(g_back, [lo, 0], [count, hidden]), s)
    ck.sync()
    kernel = kb.finish()
    kernel.attributes[AIV_ROWS_ATTR] = StringAttr("barrier")  # PIPE_ALL and a status flag per row
    ctx.launch(kernel, [ey3, offs, back])
    if expert_major_readers(op):
        # the vendor's combine stores each row at its (token, k) slot and sums from there: no
        # un-permute pass; the finalize kernel reads each (token, k) row through expand_idx
        ctx.row_order[back] = idx
        return [back]
    return [emit_gather_rows(ctx, back, idx)]
