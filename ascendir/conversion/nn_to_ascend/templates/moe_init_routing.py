"""ops-transformer's MoeInitRouting: the (token, k) pairs of a MoE layer sorted by expert.

    ids [R] i64 (R = tokens·k, each pair's expert, in (token, k) order)
      -> sorted_rows [R] i64   pair of sorted position j (stable: pairs of one expert keep their order)
         dest [R] i64          sorted position of pair p (ops-transformer's expanded_row_idx)
         group_list [E+1] i64  offsets: expert e's pairs are sorted positions group_list[e] .. group_list[e+1]-1

A counting sort by the scalar unit on one AIV, the arrays in UB:

    GM->UB ids (MTE2);  MTE2->S
    offs[0 .. E] = 0;  for p: offs[ids[p] + 1] += 1;  for e: offs[e + 1] += offs[e]     (S)
    cur[e] = offs[e];  for p: j = cur[ids[p]]; cur[ids[p]] = j + 1; sorted[j] = p; dest[p] = j
    S->MTE3;  UB->GM sorted_rows, dest, group_list (MTE3)

Scalar reads are `ascend.get_value` (UB), writes `memref.store`. Approximation: ops-transformer
sorts with the vector unit's sort instructions over many cores; a scalar counting sort on one
core costs ~R·10 scalar cycles, more than the vector sort at prefill sizes.

In a timing-only run no data moves, so the kernel's outputs would be zeros (every pair to
expert 0): its launch carries `moe_block` (the block's TopK node), and the interpreter fills the
outputs from the run's routing for that block (sim/chip.py), so the grouped MatMul after it
reads the routing of the run's inputs or of --moe-routing.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import StringAttr, i64
from xdsl.ir import SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import KernelBuilder
from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dialects.ascend.ops_scalar import MOE_BLOCK_ATTR

KIND = "moe_init_routing"


def ub_bytes(rows: int, experts: int) -> int:
    """UB bytes the kernel needs for `rows` routed pairs over `experts` (ids, sorted rows and
    their positions [rows], the offsets [E+1] and cursors [E], i64)."""
    return (3 * rows + 2 * experts + 1) * 8


def emit_moe_init_routing(ctx: LoweringContext, ids: SSAValue, experts: int, block: str) -> tuple[SSAValue, SSAValue, SSAValue]:
    """Launch the kernel of the module docstring on GM ids (R i64 expert ids, any shape);
    returns (sorted_rows [R], dest [R], group_list [E+1]), new GM i64 buffers.

    Raises: AscendirError when the arrays do not fit one AIV's UB."""
    rows = 1
    for d in shape(ids):
        rows *= d
    need, budget = ub_bytes(rows, experts), ctx.target.capacity("ub")
    if need > budget:
        raise ctx.error(f"moe_init_routing: {rows} routed rows over {experts} experts need {need} bytes of UB, one AIV has {budget}")
    sorted_rows, dest, group_list = ctx.buffer([rows], i64), ctx.buffer([rows], i64), ctx.buffer([experts + 1], i64)
    args = [ctx.view(ids, [rows]), sorted_rows, dest, group_list]
    kb = KernelBuilder(ctx, ctx.name(KIND), [a.type for a in args], CoreType.AIV, 1, ctx.current)
    g_ids, g_sorted, g_dest, g_offs = kb.args
    u_ids, u_sorted, u_dest = (kb.alloc([rows], i64, MemSpace.UB) for _ in range(3))
    u_offs, u_cur = kb.alloc([experts + 1], i64, MemSpace.UB), kb.alloc([experts], i64, MemSpace.UB)

    def load(buf: SSAValue, i) -> SSAValue:
        return kb.emit(ascend.GetValueOp(buf, [kb.idx(i)])).result

    def store(v, buf: SSAValue, i) -> None:
        val = kb.emit(arith.IndexCastOp(kb.idx(v), i64)).result
        kb.emit(memref.StoreOp.get(val, buf, [kb.idx(i)]))

    kb.copy(g_ids, u_ids)
    kb.handoff(Pipe.MTE2, Pipe.S)
    with kb.loop(0, experts + 1, 1) as e:
        store(0, u_offs, e)
    with kb.loop(0, rows, 1) as p:
        slot = kb.add(load(u_ids, p), 1)
        store(kb.add(load(u_offs, slot), 1), u_offs, slot)
    with kb.loop(0, experts, 1) as e:
        nxt = kb.add(e, 1)
        store(kb.add(load(u_offs, nxt), load(u_offs, e)), u_offs, nxt)
        store(load(u_offs, e), u_cur, e)
    with kb.loop(0, rows, 1) as p:
        ex = load(u_ids, p)
        j = load(u_cur, ex)
        store(kb.add(j, 1), u_cur, ex)
        store(p, u_sorted, j)
        store(j, u_dest, p)
    kb.handoff(Pipe.S, Pipe.MTE3)
    for u, g in ((u_sorted, g_sorted), (u_dest, g_dest), (u_offs, g_offs)):
        kb.copy(u, g)
    kernel = kb.finish()
    kernel.attributes[MOE_BLOCK_ATTR] = StringAttr(block)
    ctx.launch(kernel, args)
    return sorted_rows, dest, group_list
