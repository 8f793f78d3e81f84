"""Template of `nn.fused {kind = #nn.fused_kind<flash_attention>}` (built by fuse-attention): FlashAttention-2.

The body is one `nn.attention` (q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv],
optional additive mask broadcastable to [B, Hq, Sq, Skv], `causal`, `scale`; f16, bf16 or f32).
It becomes one kernel; the [Sq, Skv] scores never exist in GM.

Work items and GQA
------------------
A work item is (batch, K/V head, query row block of Br rows[, KV split]). The g = Hq / Hkv query
heads that share a K/V head are *stacked* along M: the item's query tile is [g·Br, D] (head h in
rows h·Br .. h·Br + Br), so each K and V tile is loaded from GM once per group and per block and
multiplies all g heads in one mmad, never copied per head (the way CANN's GQA kernels fold the
group into M). Items are spread block-cyclically over the cores; causal prefill items, whose row
blocks cost 1 .. nrb KV blocks, in the zig-zag order of `causal_items` that evens the blocks out.

Layouts
-------
Each of q, k, v and the output is in GM either in the attention's BNSD order ([B, N, S, D]: a
head's rows contiguous) or in BSND ([B, S, N, D], the [B, S, N·D] a projection writes: a head is
a column block of D elements in every token row), ops-transformer FlashAttentionScore's
`input_layout` BNSD / BSND (BSH). The plan sets BSND where fuse-attention took a head transpose
into the region. The kernel addresses each through a 2-D view (`gm_2d`: [B·N·S, D] or [B·S, N·D])
and a tile of rows of one head is the same subview shape in both, at another place (`gm_at`);
in BSND its rows are N·D elements apart, one strided DMA (DataCopy with a source stride, one
burst of D elements per row), as the vendor's kernels read BSND. The copy cost counts its bytes
at the path's rate, as for a contiguous tile: fuse-attention chooses BSND only where a row is at
least one whole 128-B GM transaction (`whole_rows`, S2); the stride term of S4's DataCopy fit,
0.07 · rows · (stride mod 256) cycles, is 0 for the 7B-shaped heads unless its stride is the
gap in elements (docs/hardware-reference.md §Rates: what it counts is not stated).

Per item, for KV blocks j of Bc keys (FlashAttention-2, Dao 2023, with an online softmax):

    S_j = Q · K_jᵀ                (Cube: L0A × L0B → L0C, K_jᵀ by a transposing L1 → L0B load)
    s   = scale · S_j [+ mask tile] [causal / tail columns → lowest]     (Vector, f32 in UB)
    m'  = max(m, rowmax s);  p = exp(s - m');  α = exp(m - m')
    l   = α·l + rowsum p;    m = m'
    O_j = P · V_j                 (Cube; P in the input dtype, as CANN's FA feeds the cube)
    acc = α·acc + O_j             (Vector, f32 in UB)
    out = acc / l                 (after the last block; cast; per head to GM)

The running max `m`, sum `l` (both [g·Br, 1]) and `acc` ([g·Br, Dv]) are fp32 and live in UB
for the whole item.

Causal block skipping: for the rows q0 .. q0+Br-1 of an item the last visible key is
min(Skv, q0 + Br + Skv - Sq) - 1, so the KV loop stops at block nj = ceil(that / Bc): blocks
wholly above the diagonal are never loaded nor computed, and in a block that reaches past the
last visible key (vis_end) the cube steps wholly past it are skipped (their S columns are masked
anyway, their P columns are 0). Blocks j ≥ n_full = (q0 + Skv - Sq + 1)
// Bc straddle the diagonal and get the triangle applied (`ascend.varange` column index vs. a row
index, `vcmp`, `vsel` of the lowest float, exactly what nn.attention's causal step writes).
Without causality, only a last partial block (Skv % Bc ≠ 0) is masked, its zero-padded columns.

910B (dav-c220, split AIC / AIV; S2 architecture page): one `mix` kernel. AIC and AIV share no
buffer, so S (fp32), P (input dtype) and O_j (fp32) cross through a per-core GM workspace (it
stays in L2), with flag hand-offs between the AIC's FixPipe / MTE2 and the AIV's MTE2 / MTE3 —
as CANN's FlashAttentionScore does with its workspace and CrossCoreSetFlag/WaitFlag. The flags
carry an explicit `units` attribute (interpreter/kernel.py) because MTE2 and MTE3 exist on both
units. Software pipelining: program order per block is softmax(j), update(j-2), S(j+2), PV(j),
so the Cube computes the next score tiles while the vector cores work on the current one (CANN's
FA likewise issues the next bmm1s before the current bmm2; S17 PR #112's kernel preloads 2,
pto-isa's 4: PRELOAD = 2 measured best here), and the acc update trails the softmax by
UPDATE_LAG = 2 blocks, so the vector cores never wait for the O_j whose P_j is still crossing
to the cube and back (pto-isa's GU stage behind compute_p). The S and P workspaces are rings
of PRELOAD slots (block j in slot j mod PRELOAD), O's of UPDATE_LAG, guarded by counting
flags primed once per slot (CrossCoreSetFlag counts up to 16 pending sets, S2). The rings are rewritten in place every few
blocks, so they stay dirty in L2 and FixPipe writes them at the L0C -> L2 rate
(interpreter/l2.py). The 910A path keeps one slot (its S stays in L0C until the vector unit
copies it).

Two AIVs per item (910B: a group is 1 AIC + 2 AIV, S1 aiv_per_aic, S2 KERNEL_TYPE_MIX_AIC_1_2;
CANN's A2 FA kernels split the rows of a block between them): AIV 0 takes the first ceil(M/2)
stacked rows, AIV 1 the rest (ops tagged `subblock = 1`, each AIV with its own UB, statistics
and queues). A row range may cut through a head (odd g): the masks and the output stores work
per head segment (`_Seg`). The AIC writes S and O once and signals both AIVs; it reads P when
both wrote their rows. One AIV only for a single stacked row, and on coupled cores.

910A (dav-c100, coupled core): the same loop on one core: L0C → UB by the vector pipe, P back
to L1 through UB → L1 (MTE3), no GM workspace. Its cube has f16 only (S1).

Decode (IncreFlashAttention shape: one row block of <= DECODE_MAX_SQ queries, long KV):
* KV split (flash-decoding): the KV blocks of an item are split over `nsplit` cores, the split
  that puts the fewest blocks on the busiest core (`_with_split`); each split writes its partial
  (m, l, acc) to GM, and a second (vector) kernel combines them: M = max_s m_s, out =
  Σ e^{m_s-M} acc_s / Σ e^{m_s-M} l_s. CANN's IFA combines in the same kernel after a SyncAll,
  which the ascend dialect does not have; the second launch costs one kernel launch more.
* L2 prefetch by the AIVs: decode attention reads K and V once, and one AIC's MTE2 reads GM at
  32 B/cycle [S1 ddr_read_rate], 24 x 32 = 768 B/cycle, below the 889 of HBM; with the DMA
  start-up and completion latency of each tile the AIC alone reached 34 % of HBM bandwidth
  (LLaMA-2-7B shape, cache 4096). The group's two AIVs, whose softmax work on a few rows is
  light, read K_j (AIV 0) and V_j (AIV 1) GM -> UB PREFETCH_AHEAD blocks ahead (`_prefetch`):
  the tiles land in L2 and the AIC's loads of them run at the L2 rate. 82 % of HBM bandwidth
  on that shape (benchmarks/serve.py prints the figures).

Paged KV cache (nn.paged_kv inside the region, transforms/nn/page_kv_cache.py; vLLM's
PagedAttention, CANN IncreFlashAttention's blockTable / blockSize): K and V are pools [blocks,
Hkv, block_size, D] and a block table [B, max_blocks] (i32) maps a sequence's logical block to a
pool block. Each KV tile is gathered through the table while streaming: per block of the tile
the scalar unit reads the table entry (`ascend.get_value`, through its DCache) and one DMA
loads that block's rows of the item's K/V head (contiguous in BNBD), into the tile's rows at
the block's place; the L2 prefetch of the AIVs reads the same blocks. So a KV tile holds whole
blocks (Bc a multiple of block_size) or lies inside one (block_size a multiple of Bc), the
search's extra rule; a small block costs a DMA start-up and a table read more per block.

Tile sizes (`search`, run by choose-tiling, which records the choice on the nn.attention as
`ascend.tiling = #ascend.tiling<{br = .., bc = ..}>`; IR text or `--tiling br=..,bc=..` may set it, and the
template uses what is recorded, searching only when nothing is): Br ∈ {128, 64, 32, 16} (or Sq
when Sq < 16), Bc ∈ {512 (only for ≤ 16 stacked rows), 256, 128, 96, 64, 32, 16} (multiples of
the 16-row fractal, as ops-transformer's FlashAttentionScore tiling steps its S2 base size by
FRACTAL_NUM = 16): of the tiles whose resident buffers fit (below), the one with the fewest
cycles by `estimate_cycles` (the interpreter's cost tables applied per KV block, analytically:
at most 28 candidates, ~1 ms). A
recorded tile may be any multiple of 16 (clamped to the padded Sq / Skv); one that does not fit
fails naming the space, bytes needed vs available and the largest tile that fits (`forced`). Capacities from the target TOML (910B: L1
512 KiB, L0A/L0B 64 KiB, L0C 128 KiB, UB 192 KiB; 910A: L1 1 MiB, L0C 256 KiB, UB 256 KiB — S1
platform ini):

    L1   Q [Mp, Dp] + K [Bc, Dp] + V [Bc, Dvp] + P [Mp, Bc]          (input dtype)
    L0A  Q [Mp, Dp] + P [Mp, Cb];  L0B Kᵀ [Dp, Cs] x ns + V [Cb, Dvp];  L0C S [Mp, Cs] x ns + O [Mp, Dvp] fp32
    UB   s [Mu, Bc] fp32 + p [Mu, Bc] + O_j, acc [Mu, Dv] fp32 (+ out [Mu, Dv] when not fp32 and
         Dv > Bc; else out is a view of p) + row-reduce scratch [Mu, Bc/8] + mask tile (+ its
         fp32 copy) + 4 row statistics and UPDATE_LAG + 1 rescale factors + causal index helpers

with M = g·Br, Mp = M rounded up to 16 (mmad M), Dp/Dvp = D/Dv rounded up to 16, Mu = the rows
of one AIV (ceil(M/2) on 910B, M on coupled cores), Cb = the keys of one cube step
(`cube_cols`: Bc, halved on 910B until the L0 tiles fit; the block is then Bc / Cb cube steps),
Cs, ns = the keys of one Q·Kᵀ step and its slots (`score_cols`: on 910B Cb halved until two Kᵀ
and two S slots fit, so the cube computes the next step while FixPipe drains one; else Cb, 1).
The other tiles have one slot: the overlap comes from the Cube / vector pipeline above. Larger Br cuts K/V re-reads (every row block streams all of K and V once), larger Bc
amortizes the per-block vector work that does not grow with Bc (row statistics, the acc
update, ~20-35 cycles of head per vector call, S4) and the O_j write-out through FixPipe. Row
max / sum: BlockReduce (one element per 32-B block, S4 0.0198 cycle per fp32 element) down to
a few columns, then WholeReduce (0.1094) of those (`row_reduce_steps`).

Resulting choices (f16, 910B2): with enough row blocks for the 24 cores and long rows, D = 128
→ Br = 128, Bc = 256 in two cube steps of 128 (each AIV's UB holds 64 rows of 256 keys: 192064
of its 196608 bytes in the causal case, also at 1024 causal); few blocks per core (the 7B
prefill-512 attention) Bc = 96: simulated 64,685 cycles, bound by the AIC's MTE2 (K, V, P and
each load's completion latency), against 68,130 with Bc = 128, which the HBM traffic of its
larger workspace rings' first touches bounds (2 x 640 KB per core), 69,563 with 64 (more
blocks) and 93,197 with 256; Br = 64 on 910A, one vector
unit's UB; with few rows smaller Br to occupy more cores (one head of 512 queries, D 128: Br =
32, Bc = 256); decode keeps one cube step per block (its AIVs' L2 prefetch streams K / V per
block): 1 query, g = 4, 4096 keys, 8 K/V heads → M = 4 (16 padded), Bc = 128, the 32 KV blocks split 3 ways on 24 AICs.

What bounds causal prefill (f16, 910B2, 32 heads x 128, 4096 queries and keys; Br 128, Bc 256):
the L2 level of the chip bandwidth floor. Each of the 8,704 visible KV blocks moves 640 KB
through L2: K and V 128 KB, and the AIC <-> AIV workspace 512 KB (S fp32 written and read 256,
P 128, O fp32 128). costmodel.bandwidth_bound_cycles, a hierarchical roofline (the slowest of
L2 bytes / (l2_bw_over_hbm x HBM, S8) and HBM bytes / sustained HBM), gives 5,472 MiB through L2 =
1,291,007 cycles, and the kernel runs at it (1,291,307 with the launch head: 54.1 % of the cube
on useful flops; 8192 keys: 21,184 MiB, 4,998,233 cycles, 56.0 %). The pipes
alone take ~1,273,300: the software pipeline runs across a core's items (`_stream`), so the
cube no longer idles ~3 us per item while P / O make their round trip (per item in sequence the
pipes took 1,440,432, 48.5 %). Below this floor only less workspace traffic per block goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import f32, i1
from xdsl.ir import Attribute, SSAValue

from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import CoreType, MemSpace, Pipe
from ascendir.dtypes import itemsize
from ascendir.hardware.config import HardwareConfig
from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.kernel_builder import Index, KernelBuilder, ceil_div, round_up
from ascendir.hardware.align import aligned_bytes
from ascendir.conversion.nn_to_ascend.templates.matmul import _by_parity
from ascendir.conversion.nn_to_ascend.tiling import MIN_GM_ROW_BYTES, TILING_ATTR, TilingAttr, attention_attr, attention_fields
from ascendir.costmodel import bandwidth_bound_cycles, mmad_cycles, sequential_get_value_cycles, vector_cycles
from ascendir.dialects.ascend import FLAG_UNITS_ATTR, FlagUnitsAttr

# What nn.attention's causal step writes (the lowest finite float of the fp32 compute type).
LOWEST = float(np.finfo(np.float32).min)
BR_CANDIDATES = (128, 64, 32, 16)
BC_CANDIDATES = (512, 256, 128, 96, 64, 32, 16)
# Bc = 512 only when the stacked rows are few (decode): the vector tile stays small.
WIDE_BC_MAX_ROWS = 16
# Score tiles the cube computes ahead of the vector cores on 910B (workspace ring slots per
# stage): S17 PR #112's PTO-DSL kernel uses QK_PRELOAD = 2 (pto-isa's reference kernel 4).
PRELOAD = 2
# Blocks the vector cores' acc update trails their softmax by on 910B (update(j - UPDATE_LAG)
# after softmax(j)): with 1, the vector cores wait for O(j-1), whose P(j-1) crosses to the cube
# and back through the workspace while they compute one softmax; pto-isa's FA runs its GU stage
# behind compute_p the same way, with PV_GTN_BUFFERS global buffers for the O tiles.
UPDATE_LAG = 2
# Stacked query rows per item beyond which Br is not grown (L0C / UB pressure; 128 = CANN's s1 base).
MAX_ROWS = 128
# Share of the L2 the K and V of the heads a causal kernel interleaves may take (`head_group`);
# the rest holds the AIC <-> AIV workspaces, Q and the outputs. A choice, not a hardware figure:
# of the groups tried at 8192 keys (1, 4, 8, 16, 32 heads of 4 MiB) 8-16 ran fastest, all 32 the
# slowest; half the L2 gives 16 there, 32 at 4096 and 8 at 16384 keys.
L2_SHARE = 0.5
# fp32 elements in one 256-B vector repeat (S2 vector general parameters).
REPEAT_F32 = 64


# fp32 elements in one 32-B data block (S2), what one BlockReduce step folds into one.
BLOCK_F32 = 8
# The ops of a row reduction, by step: 32-B blocks reduced (BlockReduceMax / Sum), what is left
# reduced whole (WholeReduce).
_REDUCE_OPS = {"max": {"block": "vblock_reduce_max", "whole": "vreduce_max"},
               "sum": {"block": "vblock_reduce_sum", "whole": "vreduce_sum"}}


# Layouts of q, k, v and the output in GM (ops-transformer FlashAttentionScore's `input_layout`):
# BNSD is the nn.attention operand order [B, N, S, D]; BSND is [B, S, N, D], a projection's
# [B, S, N·D] output as it is (BSH). fuse-attention takes the head transposes (HEAD_PERM, either
# way) between them into the region.
BNSD, BSND = "BNSD", "BSND"
HEAD_PERM = (0, 2, 1, 3)


def head_transpose(op: object) -> bool:
    """Whether `op` is an nn.transpose between BSND and BNSD (HEAD_PERM)."""
    return isinstance(op, nn.TransposeOp) and tuple(op.perm.get_values()) == HEAD_PERM


def whole_rows(v: SSAValue) -> bool:
    """Whether a head row of the [B, N, S, D] tensor `v` (D elements) is at least one whole GM
    transaction, MIN_GM_ROW_BYTES (S2: GM transactions are 128 / 256 / 512 B), so that reading or
    writing it in BSND (one burst per row, rows N·D elements apart) moves no more than its bytes,
    which is what the copy cost (bytes / rate, no stride term) charges."""
    return nn.shape_of(v)[3] * itemsize(v.type.element_type) >= MIN_GM_ROW_BYTES


def layout_shape(layout: str, b: int, n: int, s: int, d: int) -> list[int]:
    """The 4-D shape of a [B, N, S, D] attention tensor stored in `layout`."""
    return [b, s, n, d] if layout == BSND else [b, n, s, d]


def gm_2d(ctx: LoweringContext, buf: SSAValue, layout: str, b: int, n: int, s: int, d: int) -> SSAValue:
    """The 2-D view the kernel addresses a [B, N, S, D] tensor in `layout` through: BNSD
    [B·N·S, D] (a head's rows contiguous), BSND [B·S, N·D] (a head is a column block of D)."""
    return ctx.view(buf, [b * s, n * d] if layout == BSND else [b * n * s, d])


def gm_at(kb: KernelBuilder, layout: str, b: Index, n: int, s: int, d: int, h: Index, s0: Index) -> tuple[Index, Index]:
    """(row, column) in `gm_2d`'s view of token s0 of head h of batch b: a tile of rows s0..
    of that head is the subview there of D columns. In BSND its rows are N·D elements apart:
    one strided DMA (DataCopy with a source stride), each row a D-element burst."""
    if layout == BSND:
        return kb.add(kb.mul(b, s), s0), kb.mul(h, d)
    return kb.add(kb.mul(kb.add(kb.mul(b, n), h), s), s0), 0


def row_reduce_steps(bc: int) -> list[tuple[str, int]]:
    """(step, source columns) of reducing rows of Bc fp32 to one column: BlockReduce (one
    element per 32-B block) while the width is whole blocks, then WholeReduce of what is left
    (if more than one). 128 columns go 128 -> 16 -> 2 -> 1, 256 go 256 -> 32 -> 4 -> 1:
    BlockReduceMax costs 0.0198 cycle per fp32 element against WholeReduceMax's 0.1094 (S4), as
    Ascend C attention kernels reduce rows, and the scratch is Bc/8 columns."""
    steps, width = [], bc
    while width > 1 and width % BLOCK_F32 == 0:
        steps.append(("block", width))
        width //= BLOCK_F32
    if width > 1:
        steps.append(("whole", width))
    return steps


def _red_cols(bc: int) -> int:
    """Columns of the scratch a row reduction over Bc columns writes between its steps."""
    return max(bc // BLOCK_F32, 1)


# A KV split must keep at least this many blocks per core (below it the combine step dominates).
MIN_BLOCKS_PER_SPLIT = 2
# UB bytes of KV-split partials (acc, m, l in fp32) the combine kernel loads per copy.
COMBINE_UB_BYTES = 96 * 1024
# Decode shapes (one row block of at most this many query rows): the group's AIVs prefetch K and
# V into L2 ahead of the AIC (see the module docstring).
DECODE_MAX_SQ = 16
# KV blocks the AIVs' L2 prefetch runs ahead of the block the vector cores work on: the AIC
# loads K(j + PRELOAD) and V(j) while they run softmax(j), so K leads by PREFETCH_AHEAD - PRELOAD.
PREFETCH_AHEAD = PRELOAD + 2


def decode_prefetch(target: HardwareConfig, sq: int, br: int) -> bool:
    """Whether the group's two AIVs prefetch K / V into L2 for the AIC: a decode shape (one row
    block of <= DECODE_MAX_SQ query rows) on a split-core chip with two AIVs per AIC."""
    return target.arch.split_cores and target.aiv_per_aic >= 2 and sq <= DECODE_MAX_SQ and ceil_div(sq, br) == 1


def streams(target: HardwareConfig, t: FlashTiling, sq: int, es: int) -> bool:
    """Whether the kernel runs a core's items as one software pipeline (`_FlashKernel._stream`):
    prefill on a split chip (no KV split, no decode prefetch) whose L1 holds a second Q slot
    (`q_slots`); the pipeline then fills once per core, not once per item."""
    return (target.arch.split_cores and t.nsplit == 1 and not decode_prefetch(target, sq, t.br) and PRELOAD == UPDATE_LAG == 2
            and q_slots(target, t.mp, t.bc, t.dp, t.dvp, es) == 2)


def balanced(causal: bool, nrb: int, nsplit: int) -> bool:
    """Whether the items of a kernel go to the cores in `causal_items` order: causal prefill
    (more than one row block, no KV split), whose row blocks cost different numbers of KV blocks."""
    return causal and nrb > 1 and nsplit == 1


def head_group(target: HardwareConfig, heads: int, skv: int, d: int, dv: int, es: int) -> int:
    """Heads (batch x K/V heads) whose causal items are interleaved (`causal_items`): the largest
    divisor of `heads` whose K and V take at most L2_SHARE of the L2 [S1 l2_size], so the K/V
    tiles a row block reads are still in L2 when the next row block of the same head reads them.
    All heads at once send the cores to as many heads as there are cores: at 8192 keys 32 heads
    x 4 MiB outgrow the reuse window of the L2 (hit rate 94 % instead of 99 %; 33.8 % of the
    cube instead of 37.0 % with groups of 16 heads)."""
    per_head = skv * (d + dv) * es
    fit = max(1, int(target.memory.l2_bytes * L2_SHARE) // per_head)
    return max(g for g in range(1, heads + 1) if heads % g == 0 and g <= fit)


def causal_items(w: np.ndarray, cores: int, items: int, nrb: int, group: int) -> tuple[np.ndarray, np.ndarray]:
    """(head, row block) of causal item w, run by core w mod cores in round w // cores.

    The row blocks of a causal triangle cost 1 .. nrb KV blocks, so the block-cyclic order
    loads the cores unevenly (the busiest 1.23x the mean at 4096 queries, 32 heads, Br 128, 24
    cores; 1.83x at 1024). Here rank k goes to the cores forwards in even rounds and backwards in
    odd ones (zig-zag), and the ranks list, per group of `group` heads (`head_group`), the row
    blocks in order of cost, the group's heads side by side: a core that gets the costlier item
    of one round gets the cheaper one of the next, so every core ends with about the same number
    of KV blocks (at most 1.09x the mean for 1024-16384 queries over 32 heads, 1.03x from 4096
    on), and the cores of a round read the K/V of a few heads, from L2. The cheapest row blocks come first: the cores
    then reach the long items at different times instead of all reading the same K/V tiles in
    step (the descending order measured 0.1-0.6 points of the cube lower at 4096-16384).
    CANN's FlashAttentionScore balances its causal S1 blocks over the cores likewise (row
    blocks of complementary cost on each core)."""
    r, c = w // cores, w % cores
    n_r = np.minimum(cores, items - r * cores)  # items of round r
    k = r * cores + c + (r % 2) * (n_r - 1 - 2 * c)
    q = k % (group * nrb)
    return (k // (group * nrb)) * group + q % group, q // group


@dataclass(frozen=True)
class FlashTiling:
    """Tile sizes of one flash_attention kernel (elements).

    br: query rows per head per item; bc: keys per block; g: heads stacked per item; m = g·br;
    mp: m rounded up to 16; dp, dvp: D, Dv rounded up to 16; nsplit: KV splits per item (decode);
    per: KV blocks per split.
    """

    br: int
    bc: int
    g: int
    m: int
    mp: int
    dp: int
    dvp: int
    nsplit: int = 1
    per: int = 0

    def to_attr(self) -> TilingAttr:
        """The chosen fields as recorded on the nn.attention: `#ascend.tiling<{br, bc}>` (the rest
        follows from them and the shape)."""
        return attention_attr(self.br, self.bc)

    def text(self) -> str:
        return f"br={self.br},bc={self.bc}"


def aiv_count(target: HardwareConfig, m: int) -> int:
    """Vector cores sharing the rows of an item: the group's two AIVs on 910B (S1 aiv_per_aic,
    S2 KERNEL_TYPE_MIX_AIC_1_2; CANN's A2 FA kernels split the rows of a block between them),
    one when there is a single row or the core is coupled (910A, 310P)."""
    return 2 if target.arch.split_cores and target.aiv_per_aic >= 2 and m >= 2 else 1


def cube_cols(target: HardwareConfig, bc: int, mp: int, dp: int, dvp: int, es: int) -> int:
    """Keys one cube step takes (columns of S, rows of V): Bc, halved while Kᵀ + V do not fit
    L0B, Q + P L0A or S + O (fp32) L0C. On a split chip (S goes out through the workspace
    anyway) a block of Bc keys is then 2, 4, .. cube steps into column slices of S, and P·V
    accumulates its slices in L0C: the vector cores see Bc = 256 keys at once while each mmad
    takes 128, as pto-isa's FA kernel (TILE_S1 = 256, CUBE_S1 = 128). A coupled core reads S
    from L0C and keeps one step (Bc itself must fit), and so does decode: its AIVs' L2 prefetch
    streams K / V in tiles of one cube step (`decode_prefetch`)."""
    cap = target.capacity

    def fits(c: int) -> bool:
        return ((mp * dp + mp * c) * es <= cap("l0a") and (dp * c + c * dvp) * es <= cap("l0b")
                and (mp * c + mp * dvp) * 4 <= cap("l0c"))

    c = bc
    while target.arch.split_cores and not fits(c) and c % 32 == 0:
        c //= 2
    return c


def score_cols(target: HardwareConfig, bc: int, cb: int, mp: int, dp: int, dvp: int, es: int) -> tuple[int, int]:
    """(keys of one Q·Kᵀ cube step, its L0B / L0C slots): on a split chip with a block of
    several steps, Kᵀ (L0B) and S (L0C) ping-pong, so the cube computes S step h+1 while
    FixPipe drains step h and MTE1 loads the next Kᵀ (pto-isa's FA double-buffers its left /
    right tiles and assigns its accumulator tiles in turn, `assign_running_acc_tile`): the step
    is cb (P·V's), halved until two Kᵀ slots + V fit L0B and two S slots + O fit L0C; steps of
    a block stay even, so step h of every block takes slot h mod 2. One slot when nothing
    smaller fits or the block is one step (coupled cores, decode)."""
    cap = target.capacity
    c = cb
    if not target.arch.split_cores:
        return cb, 1
    while c % 32 == 0:
        if 2 * dp * c * es + c * dvp * es <= cap("l0b") and 2 * mp * c * 4 + mp * dvp * 4 <= cap("l0c") and (bc // c) % 2 == 0:
            return c, 2
        c //= 2
    return cb, 1


def l1_slots(target: HardwareConfig, mp: int, bc: int, dp: int, dvp: int, es: int) -> int:
    """L1 slots of the K, V and P tiles: 2 on a split chip when Q + two of each fit L1 (pto-isa's
    FA double-buffers its k / p / v mat tiles), else 1 (a coupled core writes P into L1 from its
    vector unit in program order: one slot)."""
    need = mp * dp * es + 2 * (bc * dp + bc * dvp + mp * bc) * es
    return 2 if target.arch.split_cores and need <= target.capacity("l1") else 1


def q_slots(target: HardwareConfig, mp: int, bc: int, dp: int, dvp: int, es: int) -> int:
    """L1 slots of Q: 2 (the next item's loads during this one, `_next_ahead`) on a split chip
    when they fit beside two slots of K, V and P (`l1_slots`), else 1."""
    if l1_slots(target, mp, bc, dp, dvp, es) != 2:
        return 1
    need = 2 * mp * dp * es + 2 * (bc * dp + bc * dvp + mp * bc) * es
    return 2 if need <= target.capacity("l1") else 1


def buffer_needs(target: HardwareConfig, br: int, bc: int, g: int, d: int, dv: int, es: int, mask_elems: int, wide_mask: bool,
                 causal_helpers: bool, prefetch: bool = False) -> dict[str, int]:
    """Bytes one item's resident buffers take in each on-chip space (see the module docstring),
    each buffer aligned to the space's alignment; UB holds the rows of one AIV (ceil(m / 2) when
    the group's two AIVs share the item) and, with `prefetch` (decode), the [Bc, D] / [Bc, Dv]
    scratch tile the AIV's L2 prefetch of K / V lands in."""
    m = g * br
    mp, dp, dvp = round_up(m, 16), round_up(d, 16), round_up(dv, 16)
    mu = aiv_rows(m, aiv_count(target, m))[0][1]

    def total(space: str, sizes: list[int]) -> int:
        return sum(aligned_bytes(target, space, n) for n in sizes)

    cb = bc if prefetch else cube_cols(target, bc, mp, dp, dvp, es)
    cs, ns = (cb, 1) if prefetch else score_cols(target, bc, cb, mp, dp, dvp, es)
    lag = UPDATE_LAG if target.arch.split_cores else 1
    # across items (`_FlashKernel.cross`) a second l, by item parity
    ls = 2 if target.arch.split_cores and not prefetch and q_slots(target, mp, bc, dp, dvp, es) == 2 else 1
    # m, m', l, row sum and α of the last lag + 1 blocks
    ub = [mu * bc * 4, mu * bc * es, mu * dv * 4, mu * dv * 4] + [mu * 4] * (4 + ls + lag)
    ub.append(mu * _red_cols(bc) * 4)
    if es != 4 and dv > bc:  # else the output tile is a view of P's (`_aiv_buffers`)
        ub.append(mu * dv * es)
    if mask_elems:
        ub.append(mask_elems * es)
        if wide_mask:
            ub.append(mask_elems * 4)
    if causal_helpers:
        ub += [min(mu, br) * bc, bc * 4, br * 4, br * 4, 4, 4]  # the compare mask: one head segment's rows
    if prefetch:
        ub.append(bc * max(d, dv) * es)
    return {
        "l1": total("l1", [mp * dp * es] * (1 if prefetch else q_slots(target, mp, bc, dp, dvp, es))
                    + [bc * dp * es, bc * dvp * es, mp * bc * es] * l1_slots(target, mp, bc, dp, dvp, es)),
        "l0a": total("l0a", [mp * dp * es, mp * cb * es]),
        "l0b": total("l0b", [dp * cs * es] * ns + [cb * dvp * es]),
        "l0c": total("l0c", [mp * cs * 4] * ns + [mp * dvp * 4]),
        "ub": total("ub", ub),
    }


@dataclass(frozen=True)
class Shape:
    """What the tile choice of one attention depends on: batch, K/V heads, query heads per K/V
    head (g), query / key lengths, QK and V head dims, element size (bytes), the additive mask
    padded to rank 4 ([B|1, Hq|1, Sq|1, Skv|1]) or None, causality."""

    batch: int
    hkv: int
    g: int
    sq: int
    skv: int
    d: int
    dv: int
    es: int
    mask_shape: tuple[int, int, int, int] | None = None
    causal: bool = False
    block: int = 0  # paged KV: the pool's block size (positions per block); 0 = contiguous K/V

    def pages(self, bc: int) -> bool:
        """Whether a KV tile of `bc` keys holds whole blocks or lies inside one (always when contiguous)."""
        return not self.block or bc % self.block == 0 or self.block % bc == 0

    def needs(self, target: HardwareConfig, br: int, bc: int) -> dict[str, int]:
        """buffer_needs of tile (br, bc) for this attention."""
        mask_elems = 0
        if self.mask_shape is not None:
            _, mh, ms, mk = self.mask_shape
            mask_elems = (self.g if mh > 1 else 1) * (br if ms > 1 else 1) * (bc if mk > 1 else 1)
        helpers = self.causal or self.skv % bc != 0
        return buffer_needs(target, br, bc, self.g, self.d, self.dv, self.es, mask_elems, self.es != 4, helpers,
                            decode_prefetch(target, self.sq, br))

    def misfit(self, target: HardwareConfig, br: int, bc: int) -> tuple[str, int, int] | None:
        """(space, bytes needed, bytes available) of the first space tile (br, bc) overflows, else None."""
        for space, need in self.needs(target, br, bc).items():
            if need > target.capacity(space):
                return space, need, target.capacity(space)
        return None

    def clamp(self, br: int, bc: int) -> tuple[int, int]:
        """(br, bc) no larger than the padded sequence lengths (Sq itself below 16 rows), the
        grid the search uses: a bigger tile would only add padding."""
        return (self.sq if self.sq < 16 else min(br, round_up(self.sq, 16))), min(bc, round_up(self.skv, 16))

    def tiling(self, target: HardwareConfig, br: int, bc: int) -> FlashTiling:
        """The FlashTiling of tile (br, bc), with its KV split (decode shapes)."""
        g = self.g
        t = FlashTiling(br, bc, g, g * br, round_up(g * br, 16), round_up(self.d, 16), round_up(self.dv, 16))
        return _with_split(target, t, self.batch * self.hkv, self.sq, self.skv)

    def cycles(self, target: HardwareConfig, t: FlashTiling) -> float:
        return estimate_cycles(target, t, batch=self.batch, hkv=self.hkv, sq=self.sq, skv=self.skv, d=self.d, dv=self.dv,
                               es=self.es, causal=self.causal, block=self.block)


def choose_flash_tiling(
    target: HardwareConfig,
    *,
    batch: int,
    hkv: int,
    g: int,
    sq: int,
    skv: int,
    d: int,
    dv: int,
    el: Attribute,
    mask_shape: tuple[int, int, int, int] | None = None,
    causal: bool = False,
) -> FlashTiling:
    """Br, Bc (and the KV split for decode shapes) for one attention on `target`.

    Args:
        batch, hkv, g: batch, K/V heads, query heads per K/V head.
        sq, skv, d, dv: query / key lengths, QK and V head dims.
        el: element type of q, k, v.
        mask_shape: the additive mask padded to rank 4 ([B|1, Hq|1, Sq|1, Skv|1]), or None.

    Returns the fitting tiling (see the module docstring for what must fit where) with the
    fewest estimated cycles (`estimate_cycles`, the interpreter's cost tables applied
    analytically; ties: larger g·Br·Bc, then larger Bc).

    Raises:
        ValueError: when not even Br = Bc = 16 fits (e.g. a head dim of several thousand).
    """
    s = Shape(batch, hkv, g, sq, skv, d, dv, itemsize(el), mask_shape, causal)
    return search(s, target)[0]


def search(s: Shape, target: HardwareConfig, br: int | None = None, bc: int | None = None) -> tuple[FlashTiling, int]:
    """(best tiling, candidates scored) of choose_flash_tiling; `br` / `bc` hold that size fixed
    (clamped as Shape.clamp does) and search the other.

    Raises:
        ValueError: no candidate fits."""
    rsq, rskv = round_up(s.sq, 16), round_up(s.skv, 16)
    g = s.g
    brs = [s.sq] if s.sq < 16 else sorted({min(b, rsq) for b in BR_CANDIDATES}, reverse=True)
    bcs = sorted({min(b, rskv) for b in BC_CANDIDATES}, reverse=True)
    if br is not None:
        brs = [s.clamp(br, 16)[0]]
    if bc is not None:
        bcs = [s.clamp(16, bc)[1]]
    best: tuple[float, int, int, FlashTiling] | None = None
    scored = 0
    for r in brs:
        if g * r > MAX_ROWS and r != brs[-1] and br is None:
            continue
        for c in bcs:
            if c > 256 and g * r > WIDE_BC_MAX_ROWS and bc is None:
                continue
            if not s.pages(c) or s.misfit(target, r, c) is not None:
                continue
            t = s.tiling(target, r, c)
            cyc = s.cycles(target, t)
            scored += 1
            if best is None or (cyc, -g * r * c, -c) < (best[0], -best[1], -best[2]):
                best = (cyc, g * r * c, c, t)
    if best is None:
        raise ValueError(f"no flash-attention tile fits {target.name} for D = {s.d}, Dv = {s.dv}, g = {g}")
    return best[3], scored


def largest_fit(s: Shape, target: HardwareConfig, br: int, bc: int) -> tuple[int, int] | None:
    """The largest tile (br', bc') that fits `target` with br' <= br and bc' <= bc (multiples of
    16; Br = Sq when Sq < 16): "largest" = most stacked scores per block (br'·bc'), then the
    larger bc', then the fewest fields changed. None when not even 16 x 16 fits."""
    brs = [s.sq] if s.sq < 16 else range(max(16, br - br % 16), 15, -16)
    best = None
    for r in brs:
        for c in range(max(16, bc - bc % 16), 15, -16):  # needs grow with bc: the first fit is the widest
            if s.misfit(target, r, c) is None:
                key = (r * c, c, -((r != br) + (c != bc)))
                if best is None or key > best[0]:
                    best = (key, (r, c))
                break
    return best[1] if best else None


def forced(s: Shape, target: HardwareConfig, br: int, bc: int, what: str) -> FlashTiling:
    """The tiling of a forced tile (from `ascend.tiling` or --tiling), clamped (Shape.clamp).

    Raises:
        AscendirError: br / bc not multiples of 16 (or Br = Sq < 16), or a tile that does not
            fit: names the space, bytes needed vs available and the largest tile that fits."""
    from ascendir.errors import AscendirError

    r, c = s.clamp(br, bc)
    if c < 16 or c % 16 or (r != s.sq and (r < 16 or r % 16)):
        raise AscendirError(f"{what}: tiling br={br},bc={bc} is not aligned (br, bc multiples of 16, or br = Sq when Sq < 16)")
    if not s.pages(c):
        raise AscendirError(f"{what}: tiling bc={c} neither holds whole KV blocks of {s.block} nor lies inside one")
    bad = s.misfit(target, r, c)
    if bad is not None:
        space, need, cap = bad
        fit = largest_fit(s, target, r, c)
        hint = f"; largest tile that fits: br={fit[0]},bc={fit[1]}" if fit else "; no tile fits (not even br=16,bc=16)"
        asked = f"br={br},bc={bc}" + (f" (br={r},bc={c} within the sequence lengths)" if (r, c) != (br, bc) else "")
        raise AscendirError(f"{what}: tiling {asked} needs {need} bytes of {space.upper()}, {target.name} has {cap}{hint}")
    return s.tiling(target, r, c)


def _with_split(target: HardwareConfig, t: FlashTiling, heads: int, sq: int, skv: int) -> FlashTiling:
    """`t` with its KV split (decode: one row block and fewer items than cores; decode shapes
    of <= DECODE_MAX_SQ query rows: the split that balances the KV blocks over the cores,
    flash-decoding).

    Decode shapes take the split with the fewest KV blocks on the busiest core: (rounds of
    items·nsplit over the cores) × (blocks per split), the fewer splits on a tie (each adds a
    partial to combine). 32 heads of 32 blocks on 24 cores: no split runs 2 items (64 blocks)
    on 8 cores, 3 splits of 11 blocks run at most 4 (44; the even share is 42.7)."""
    items = heads * ceil_div(sq, t.br)
    nkv = ceil_div(skv, t.bc)
    if ceil_div(sq, t.br) == 1 and sq <= DECODE_MAX_SQ and nkv >= 2 * MIN_BLOCKS_PER_SPLIT:
        best = (ceil_div(items, target.num_aic) * nkv, 1, nkv)
        for ns in range(2, nkv // MIN_BLOCKS_PER_SPLIT + 1):
            per = ceil_div(nkv, ns)
            ns = ceil_div(nkv, per)
            best = min(best, (ceil_div(items * ns, target.num_aic) * per, ns, per))
        if best[1] > 1:
            return FlashTiling(t.br, t.bc, t.g, t.m, t.mp, t.dp, t.dvp, best[1], best[2])
        return t
    if ceil_div(sq, t.br) == 1 and items < target.num_aic and nkv >= 2 * MIN_BLOCKS_PER_SPLIT:
        nsplit = min(ceil_div(target.num_aic, items), nkv // MIN_BLOCKS_PER_SPLIT)
        per = ceil_div(nkv, nsplit)
        nsplit = ceil_div(nkv, per)
        if nsplit > 1:
            return FlashTiling(t.br, t.bc, t.g, t.m, t.mp, t.dp, t.dvp, nsplit, per)
    return t


def estimate_cycles(target: HardwareConfig, t: FlashTiling, *, batch: int, hkv: int, sq: int, skv: int, d: int, dv: int, es: int, causal: bool,
                    block: int = 0) -> float:
    """Analytic cycles of the flash kernel with tiling `t` (ranking tilings; no simulation).

    Per KV block, each pipe's occupancy from the target's cost tables (mmad fractals, DMA rates
    and start-ups, vector op costs via cost.vector_cycles on one AIV's rows); the pipes overlap
    (the software pipeline), so a block costs the busiest pipe. A core runs the blocks of its
    items (block-cyclic over min(cores, items), causal blocks above the diagonal skipped, KV
    splits). What the kernel's schedule adds to that:
    * each DMA's completion latency [S5] on its pipe (the flag after it waits for it): the L2
      hit latency, the DDR read / write latency for what goes to HBM;
    * the pipeline fill (one block through every stage in turn): once per core when the core's
      items are one stream (`streams`), else once per item with its Q load and output store;
      streamed, Q adds to the AIC's MTE2 and the output's acc / l to the vector pipe;
    * first touches from HBM (interpreter/timing/l2.py): each K / V tile's first read (of a
      head's nj.sum() block loads, nkv), and every workspace ring slot a core uses, its first
      write (DDR rates [S1] at the core's HBM share; the read after it hits, as the write
      allocated its lines), each on the pipe that makes it (FixPipe, the AIVs' MTE3): with its
      blocks' share a pipe may become the core's busiest;
    * a partial last KV block loads only its keys;
    * decode with the AIVs' L2 prefetch: their K / V reads from HBM on the AIV MTE2;
    * a floor: the hierarchical bandwidth bound (costmodel.bandwidth_bound_cycles: every block's
      K, V and workspace bytes through L2 [S8], K / V, Q, the output and the workspace's first
      touches through HBM).
    Within 0.92-1.05x of the simulation for 32 heads x 128 (f16, 910B2) from 512 to 8192 keys,
    causal or not, prefill and decode, Bc 64-256 (benchmarks/fa_estimate.py --long;
    tests/test_tiling_attention.py holds 0.85-1.08 on a set).
    Mask and causal-diagonal vector work are left out (the same for every tiling to first
    order). A paged K/V (`block` > 0) loads a tile in max(1, Bc / block) DMAs each for K and V,
    each after a table read on the scalar pipe.
    """
    r, st, cube = target.rates, target.startup, target.cube
    m, mp, dp, dvp, bc = t.m, t.mp, t.dp, t.dvp, t.bc
    n = aiv_rows(m, aiv_count(target, m))[0][1]
    nrb = ceil_div(sq, t.br)
    items = batch * hkv * nrb * t.nsplit
    cores = min(target.num_aic, items)
    dt = {2: "f16", 4: "f32"}.get(es, "f16")
    dt = dt if dt in cube.k_per_cycle else "f16"

    def mmad(a: int, b: int, k: int) -> float:
        return mmad_cycles(target, dt, a, b, k)

    l2 = min(r["l2_to_l1"], target.hbm_bytes_per_cycle / cores * target.memory.l2_bw_over_hbm)
    # every DMA here is followed by a flag to its consumer, and a set_flag waits until its pipe
    # completed what came before it, GM latency included [S5] (interpreter/exec/sync_ops.py): an L2
    # hit (or a rewrite of a tile dirty in L2) holds the pipe hit_lat more, an HBM read read_lat,
    # an HBM write write_lat (costmodel.CostEnv.gm_latency)
    mem = target.memory
    hit_lat, read_lat, write_lat = mem.l2_hit_latency, mem.gm_read_latency, mem.gm_write_latency
    prefetch = decode_prefetch(target, sq, t.br)
    cb = bc if prefetch else cube_cols(target, bc, mp, dp, dvp, es)
    cs = cb if prefetch else score_cols(target, bc, cb, mp, dp, dvp, es)[0]
    steps, steps_s = bc // cb, bc // cs
    pipes = [
        steps_s * mmad(mp, cs, dp) + steps * mmad(mp, dvp, cb),
        (bc * (dp + dvp) * es) / r["l1_to_l0b"] + mp * bc * es / r["l1_to_l0a"] + (2 * steps + steps_s) * st["mte1"],
    ]
    vec = vector_cycles(target, "vmuls", n * bc, 4) + vector_cycles(target, "vsub", n * bc, 4) + vector_cycles(target, "vexp", n * bc, 4)
    if es != 4:
        vec += vector_cycles(target, "vcast", n * bc, 4)
    for step, width in row_reduce_steps(bc):
        vec += sum(vector_cycles(target, ops[step], n * width, 4) for ops in _REDUCE_OPS.values())
    for op in ("vmax", "vcopy", "vsub", "vexp", "vmul", "vadd", "vcopy"):
        vec += vector_cycles(target, op, n, 4)
    vec += vector_cycles(target, "vmul", n * dv, 4) + vector_cycles(target, "vadd", n * dv, 4)
    if target.arch.split_cores:
        pipes.append((bc * (dp + dvp) + mp * bc) * es / l2 + 3 * (st["mte2_nd2nz"] + hit_lat))  # AIC MTE2: K, V, P
        pipes.append((mp * bc + mp * dvp) * 4 / r["l0c_to_l2"] + (steps_s + 1) * (st["fix"] + hit_lat))  # FixPipe: S, O
        pipes.append((n * bc + n * dv) * 4 / min(r["l2_to_ub"], l2) + 2 * (st["mte2"] + hit_lat))  # AIV MTE2: S, O
        pipes.append(n * bc * es / r["ub_to_l2"] + st["mte3"] + hit_lat)  # AIV MTE3: P
        ws_bytes = m * bc * (4 + es) + m * dv * 4  # S, P and O_j written and read back (stay dirty in L2)
    else:  # coupled: L0C -> UB on the vector pipe, P through UB -> L1
        pipes.append(bc * (dp + dvp) * es / l2 + 2 * (st["mte2_nd2nz"] + hit_lat))
        vec += (mp * bc + mp * dvp) * 4 / r["l0c_to_ub"] + 2 * st["vector"]
        pipes.append(n * bc * es / r["ub_to_l1"] + st["mte3"])
        ws_bytes = 0
    if block:  # paged: a DMA start-up more per further block of K and V, a table read per block
        pieces = max(1, bc // block)
        pipes[2] += 2 * (pieces - 1) * st["mte2_nd2nz"]
        # the scalar pipe: the K and V loads each read the tile's `pieces` i32 table entries
        pipes.append(sequential_get_value_cycles(target, 2 * pieces, 4, pieces))
    # visible KV blocks of every item (w = ((b·Hkv + h)·nrb + i)·nsplit + s), summed per core
    nkv = ceil_div(skv, bc)
    q0 = np.arange(nrb) * t.br
    nj = np.full(nrb, nkv)
    if causal:
        qsz = np.minimum(t.br, sq - q0)
        nj = np.clip((q0 + qsz + (skv - sq) - 1) // bc + 1, 1, nkv)
    # the first read of each K / V tile comes from HBM (DDR rate, the core's share), the row
    # blocks after it read it from L2: of a head's nj.sum() block loads, nkv miss
    hbm = min(r["gm_to_l1"], target.hbm_bytes_per_cycle / cores)
    miss = min(1.0, nkv / max(1, int(nj.sum())))
    if prefetch:  # the AIVs read K (AIV 0) and V (AIV 1) from HBM into L2 for the AIC (`_prefetch`)
        pipes[4] += bc * max(d, dv) * es / min(r["gm_to_ub"], hbm) + st["mte2"]
    else:
        pipes[2] += miss * (bc * (d + dv) * es * (1 / hbm - 1 / l2) + 2 * (read_lat - hit_lat))  # the MTE2 that loads K and V
    per_block = max(*pipes, vec)
    # the first block of a pipeline runs through the stages one after another (nothing yet to
    # overlap with): the fill. A streamed kernel (`streams`) fills once per core, else once per
    # item, which short causal items (few blocks) pay most
    fill = sum(pipes) + vec - per_block
    stream = streams(target, t, sq, es)
    q_load = m * dp * es / hbm + t.g * st["mte2_nd2nz"] + read_lat
    if stream:  # the next item's Q loads into its second L1 slot and this one's output leaves
        # while the blocks go on: Q adds to the AIC's MTE2, the output's acc / l to the vector pipe
        per_item = vector_cycles(target, "vdiv", n * dv, 4) + (vector_cycles(target, "vcast", n * dv, 4) if es != 4 else 0.0)
    else:
        per_item = fill + q_load + m * dv * es / r["ub_to_gm"]
    if t.nsplit > 1:
        lo = np.arange(t.nsplit) * t.per
        end = np.minimum(lo[None, :] + t.per, nj[:, None])
        per_item_blocks = np.clip(end - lo[None, :], 1, None).ravel()
        per_item_last = (end == nkv).ravel()
    else:
        per_item_blocks, per_item_last = nj, nj == nkv
    blocks, last = np.tile(per_item_blocks, batch * hkv), np.tile(per_item_last, batch * hkv)
    if balanced(causal, nrb, t.nsplit):  # the row block each item runs (causal_items)
        group = head_group(target, batch * hkv, skv, d, dv, es)
        rb = causal_items(np.arange(items), cores, items, nrb, group)[1]
        blocks, last = nj[rb], nj[rb] == nkv
    core = np.arange(items) % cores
    per_core = np.bincount(core, weights=blocks * per_block + per_item, minlength=cores)
    # what a pipe does besides its share of every block, per core: it may make that pipe the
    # busiest, and then the core's time is that pipe's (the others overlap with it)
    extra: dict[int, np.ndarray] = {}
    if stream:  # the items' Q loads on the AIC's MTE2
        extra[2] = np.bincount(core, minlength=cores) * q_load
    first_bytes = half_bytes = 0.0
    if target.arch.split_cores:
        # the workspace rings (S, P: PRELOAD slots, O_j: UPDATE_LAG, a set per item parity when
        # streamed) are not yet in L2 when a core first writes a slot: that write goes to HBM,
        # once per slot a core touches (the read after it hits: the write allocated the lines,
        # interpreter/timing/l2.py). Each first write costs its own pipe the DDR rate [S1] at the
        # core's HBM share (and the DDR latency [S5]) instead of the L2 one; the pipes overlap
        # like the blocks'.
        par = (np.arange(items) // cores) % 2 if stream else np.zeros(items, np.int64)
        most = np.zeros((cores, 2))
        np.maximum.at(most, (core, par), blocks)  # the most blocks an item of each parity runs
        sp_slots, o_slots = np.minimum(most, PRELOAD).sum(1), np.minimum(most, UPDATE_LAG).sum(1)
        s_first, p_first, o_first = sp_slots * m * bc * 4, sp_slots * m * bc * es, o_slots * m * dv * 4
        aivs = aiv_count(target, m)

        def first(nbytes: np.ndarray, path: str, hit_rate: float) -> np.ndarray:  # extra cycles of first touches
            return nbytes * (1 / min(r[path], target.hbm_bytes_per_cycle / cores) - 1 / hit_rate)

        extra[3] = first(s_first + o_first, "l0c_to_gm", r["l0c_to_l2"]) + (sp_slots * steps_s + o_slots) * (write_lat - hit_lat)
        extra[5] = first(p_first / aivs, "ub_to_gm", r["ub_to_l2"]) + sp_slots * (write_lat - hit_lat)
        first_bytes = float((s_first + p_first + o_first).sum())
        if causal and t.nsplit == 1:
            # a causal diagonal block whose keys end in the first score step(s) of a Bc tile: the
            # cube writes only those steps of S, the AIVs read the whole [rows, Bc] slot, which
            # no write then holds whole: a miss (l2.py hits only a fully held tile)
            lim = np.minimum(skv, q0 + np.minimum(t.br, sq - q0) + (skv - sq))
            written = np.minimum(bc, -(-(lim - (nj - 1) * bc) // cs) * cs)
            rbs = rb if balanced(causal, nrb, t.nsplit) else np.tile(np.arange(nrb), batch * hkv)
            half = np.bincount(core, weights=(written < bc)[rbs], minlength=cores)
            extra[4] = first(half * m * bc * 4 / aivs, "gm_to_ub", min(r["l2_to_ub"], l2)) + half * (read_lat - hit_lat)
            half_bytes = float(half.sum()) * m * bc * 4
    # an item that reaches the last KV block loads only its skv - (nkv - 1)·Bc keys of K and V
    # (the DMA takes the valid rows, `_kv_load`): its MTE2 does the rest of a block's copy less
    short = (bc * nkv - skv) * (d + dv) * es * last
    extra[2] = extra.get(2, 0.0) - np.bincount(core, weights=short, minlength=cores) * (
        1 / l2 + (0.0 if prefetch else miss * (1 / hbm - 1 / l2)))
    nb = np.bincount(core, weights=blocks, minlength=cores)
    for i, e in extra.items():
        per_core = np.maximum(per_core, nb * pipes[i] + e)
    per_core = per_core + (fill if stream else 0.0)
    # the hierarchical bandwidth floor: every block's K, V and workspace bytes pass L2; HBM sees
    # K and V once per head (their first reads, `miss`), Q once, the output, and every workspace
    # slot's first write (decode's prefetch: the AIVs' reads are the misses, the AIC's reads of
    # the same lines hit)
    kv, ws = blocks.sum() * bc * (d + dv) * es - short.sum(), blocks.sum() * ws_bytes
    rows = batch * hkv * t.g * sq
    floor = bandwidth_bound_cycles(kv + ws + rows * d * es, ws + rows * dv * es, target,
                                   l2_hit=(0.0 if prefetch else kv * (1 - miss)) + ws - half_bytes, l2_write=ws - first_bytes)
    return float(max(per_core.max(), floor))


def shape_of(att: nn.AttentionOp) -> Shape:
    """The Shape (what the tile choice depends on) of `att`."""
    b, hq, sq, d = nn.shape_of(att.q)
    hkv, skv = nn.shape_of(att.k)[1], nn.shape_of(att.k)[2]
    mask4 = None
    if att.mask is not None:
        ms = nn.shape_of(att.mask)
        mask4 = (1,) * (4 - len(ms)) + tuple(ms)
    paged = att.k.owner if isinstance(att.k.owner, nn.PagedKVOp) else None
    return Shape(b, hkv, hq // hkv, sq, skv, d, nn.shape_of(att.v)[3], itemsize(att.q.type.element_type), mask4,
                 bool(att.causal.value.data), nn.shape_of(paged.pool)[2] if paged else 0)


def tiling_for(att: nn.AttentionOp, target: HardwareConfig, what: str = "nn.attention") -> FlashTiling:
    """The tile of `att`: the `ascend.tiling` {br, bc} choose-tiling (or IR text) recorded on it,
    a missing one of the two searched; without the attribute, choose_flash_tiling's.

    Raises:
        ValueError: no tile fits (see choose_flash_tiling).
        AscendirError: a recorded tile that is misaligned or does not fit (see `forced`).
    """
    s = shape_of(att)
    fields = attention_fields(att.attributes.get(TILING_ATTR), what)
    if not fields:
        return search(s, target)[0]
    if "br" in fields and "bc" in fields:
        return forced(s, target, fields["br"], fields["bc"], what)
    try:
        t = search(s, target, fields.get("br"), fields.get("bc"))[0]
    except ValueError:  # nothing fits with the given one: its error names the buffer
        t = None
    return forced(s, target, fields.get("br", t.br if t else 128), fields.get("bc", t.bc if t else 128), what)


def fits(att: nn.AttentionOp, target: HardwareConfig) -> bool:
    """Whether the template has a tile for `att` on `target`. When it has none (e.g. 8 f32
    query heads of D = 128 stacked on one K/V head: even Br = Bc = 16 overflows UB), the driver
    lowers the attention unfused (decompose-attention) rather than failing on a valid model.
    A tile recorded in `ascend.tiling` counts as one: if it does not fit, lowering says why."""
    if TILING_ATTR in att.attributes:
        return True
    try:
        tiling_for(att, target)
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------------------------
# synchronization with explicit units
# ----------------------------------------------------------------------------------------------
class _Sync:
    """Flags of one kernel; on a split chip each names the units it connects (FLAG_UNITS_ATTR)."""

    def __init__(self, kb: KernelBuilder, split_cores: bool):
        self.kb, self.split_cores = kb, split_cores
        self.queues: list[_Q] = []

    def flag(self, wait: bool, src: Pipe, dst: Pipe, event: int, units: str) -> None:
        op = (ascend.WaitFlagOp if wait else ascend.SetFlagOp)(src, dst, event)
        if self.split_cores:
            op.attributes[FLAG_UNITS_ATTR] = FlagUnitsAttr(*units.split("->"))
        self.kb.emit(op)

    def queue(self, producer: Pipe, consumer: Pipe, units: str, slots: int = 1) -> _Q:
        """A producer → consumer hand-off (an Ascend C TQue) of `slots` slots; the WAR flag is
        primed `slots` times here (kernel entry) and drained by `drain`. More than one slot only
        across units (AIC <-> AIV): cross-core flags count pending sets (up to 16, S2
        CrossCoreSetFlag), intra-core event flags do not."""
        src, dst = units.split("->")
        assert slots == 1 or src != dst  # cross-unit only (the AIVs are "aiv" and "aiv1")
        q = _Q(self, producer, consumer, self.kb.event(producer, consumer), self.kb.event(consumer, producer), units, slots)
        for _ in range(slots):
            q.release()
        self.queues.append(q)
        return q

    def drain(self) -> None:
        for q in reversed(self.queues):
            for _ in range(q.slots):
                q.acquire()


@dataclass
class _Q:
    sync: _Sync
    producer: Pipe
    consumer: Pipe
    raw: int
    war: int
    units: str  # "producer unit->consumer unit"
    slots: int = 1

    @property
    def back(self) -> str:
        a, b = self.units.split("->")
        return f"{b}->{a}"

    def acquire(self) -> None:
        self.sync.flag(True, self.consumer, self.producer, self.war, self.back)

    def enque(self) -> None:
        self.sync.flag(False, self.producer, self.consumer, self.raw, self.units)

    def deque(self) -> None:
        self.sync.flag(True, self.producer, self.consumer, self.raw, self.units)

    def release(self) -> None:
        self.sync.flag(False, self.consumer, self.producer, self.war, self.back)

    def handoff(self) -> None:
        self.enque()
        self.deque()


def _v(name: str) -> type:
    return ascend.vector_op(name)


# ----------------------------------------------------------------------------------------------
# the template
# ----------------------------------------------------------------------------------------------
def emit_flash_attention(ctx: LoweringContext, att: nn.AttentionOp, q: SSAValue, k: SSAValue, v: SSAValue,
                         mask: SSAValue | None, table: SSAValue | None = None, layout: dict[str, str] | None = None) -> SSAValue:
    """One kernel (plus a combine kernel for a KV split) computing `att` over the GM buffers q
    [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] and the optional mask (broadcast to
    [B, Hq, Sq, Skv]), float elements; returns the output buffer [B, Hq, Sq, Dv]. `layout`
    ("q", "k", "v", "out" -> BNSD (default) or BSND) says which of them are in BSND order
    instead ([B, Sq, Hq, D], ...; any shape of that many elements: see "Layouts" above). The
    tile is the one recorded on `att` (`tiling_for`). With a block `table` [B, max_blocks]
    (i32), k and v are paged pools [blocks, Hkv, block_size, D|Dv] read through it (att's K/V
    are nn.paged_kv of them; see "Paged KV cache" above).

    Raises:
        AscendirError: fp32/bf16 on a cube without them (910A: f16 only), or no tile fits.
    """
    if no_mmad := ctx.target.arch.no_mmad(str(elem(q))):
        raise ctx.error(
            f"{ctx.target.name} ({ctx.target.arch}) {no_mmad}; "
            "cast the model to float16 (ascendir --dtype fp16)"
        )
    return _FlashKernel(ctx, att, q, k, v, mask, table, layout).emit()


@dataclass(frozen=True)
class _It:
    """Index values of one work item: its round parity on the core (static), batch, K/V head,
    KV split, first query row, query rows, KV blocks it visits (nj), first block on or past the
    diagonal (n_full) and one past its last visible key (vis_end)."""

    par: int
    bb: Index
    kh: Index
    sp: Index
    q0: Index
    qsz: Index
    nj: Index
    n_full: Index
    vis_end: Index


@dataclass(frozen=True)
class _Seg:
    """Rows of one query head inside an AIV's share of the stacked tile: head `h`, rows a .. a+n-1
    of that head, at row `lo` of the AIV's buffers."""

    h: int
    a: int
    n: int
    lo: int


def aiv_rows(m: int, nsub: int) -> list[tuple[int, int]]:
    """(first stacked row, rows) of each AIV: the first takes ceil(m / 2) when two share an item."""
    if nsub == 1:
        return [(0, m)]
    n0 = ceil_div(m, 2)
    return [(0, n0), (n0, m - n0)]


def _segments(r0: int, n: int, br: int, g: int) -> list[_Seg]:
    out = []
    for h in range(g):
        lo, hi = max(r0, h * br), min(r0 + n, (h + 1) * br)
        if lo < hi:
            out.append(_Seg(h, lo - h * br, hi - lo, lo - r0))
    return out


class _Aiv:
    """One vector core's share of every item: stacked rows r0 .. r0+n-1, its own UB buffers,
    running statistics and queues (see `_FlashKernel._aiv_buffers`)."""

    def __init__(self, sub: int, r0: int, n: int, segs: list[_Seg]):
        self.sub, self.r0, self.n, self.segs = sub, r0, n, segs
        self.name = "aiv1" if sub else "aiv"  # the unit in flag `units` attributes


class _FlashKernel:
    """Builds the kernel(s) of one attention; see the module docstring for the structure."""

    def __init__(self, ctx: LoweringContext, att: nn.AttentionOp, q: SSAValue, k: SSAValue, v: SSAValue, mask: SSAValue | None,
                 table: SSAValue | None = None, layout: dict[str, str] | None = None):
        self.ctx, self.att = ctx, att
        self.b, self.hq, self.sq, self.d = nn.shape_of(att.q)
        self.hkv, self.skv = nn.shape_of(att.k)[1], nn.shape_of(att.k)[2]  # (att.k: the logical K of a paged pool)
        self.table, self.block = table, shape(k)[2] if table is not None else 0
        self.dv = nn.shape_of(att.v)[3]
        self.layout = {n: (layout or {}).get(n, BNSD) for n in ("q", "k", "v", "out")}
        self.g = self.hq // self.hkv
        self.el = elem(q)
        self.es = itemsize(self.el)
        self.causal = bool(att.causal.value.data)
        self.scale = att.scale.value.data
        self.split_cores = ctx.target.arch.split_cores
        self.q, self.k, self.v, self.mask = q, k, v, mask
        self.mask4 = (1,) * (4 - len(shape(mask))) + shape(mask) if mask is not None else None
        try:
            self.t = tiling_for(att, ctx.target, ctx.current)
        except ValueError as e:
            raise ctx.error(str(e)) from None
        self.off = self.skv - self.sq  # query i sees keys j <= i + off (aligned to the last query)
        # score tiles the cube runs ahead of the vector cores (workspace ring slots per stage);
        # a coupled core keeps S in its one L0C slot until the vector unit has read it: 1
        self.depth = PRELOAD if self.split_cores else 1
        # blocks the acc update trails the softmax by (UPDATE_LAG on 910B; a coupled core reads
        # O_j from its one L0C slot: 1), and the O_j workspace ring that lets it trail
        self.lag = UPDATE_LAG if self.split_cores else 1
        self.depth_o = self.lag if self.split_cores else 1
        self.prefetch = decode_prefetch(ctx.target, self.sq, self.t.br)
        # prefill on 910B: the software pipeline runs across the items of a core (`_stream`):
        # the next item's Q comes into a second L1 slot and its first score tiles are computed
        # while this item's last softmax / P·V / update finish
        self.cross = streams(ctx.target, self.t, self.sq, self.es)
        # a set of workspace ring slots and row sums l per item parity (`_stream`)
        self.rings = 2 if self.cross else 1
        self.ring_par = 0  # the item parity whose stages are being emitted
        nsub = aiv_count(ctx.target, self.t.m)
        self.aivs = [_Aiv(i, r0, n, _segments(r0, n, self.t.br, self.t.g)) for i, (r0, n) in enumerate(aiv_rows(self.t.m, nsub))]

    # ------------------------------------------------------------------------------------------
    def emit(self) -> SSAValue:
        ctx, t = self.ctx, self.t
        b, hq, sq, hkv, skv, d, dv = self.b, self.hq, self.sq, self.hkv, self.skv, self.d, self.dv
        out = ctx.buffer(layout_shape(self.layout["out"], b, hq, sq, dv), self.el)
        nrb = ceil_div(sq, t.br)
        items = b * hkv * nrb * t.nsplit
        block_dim = self.block_dim = min(ctx.target.num_aic, items)
        if self.block:  # pool: [blocks·Hkv·block_size, D]
            kv_rows = shape(self.k)[0] * hkv * self.block
            kv = [ctx.view(self.k, [kv_rows, d]), ctx.view(self.v, [kv_rows, dv])]
        else:
            kv = [gm_2d(ctx, self.k, self.layout["k"], b, hkv, skv, d), gm_2d(ctx, self.v, self.layout["v"], b, hkv, skv, dv)]
        args = [gm_2d(ctx, self.q, self.layout["q"], b, hq, sq, d), *kv]
        if self.block:
            args.append(self.table)
        if self.mask is not None:
            mb, mh, ms, mk = self.mask4
            args.append(ctx.view(self.mask, [mb * mh * ms, mk]))
        if t.nsplit > 1:
            rows = b * hkv * t.nsplit * t.m
            partial = [ctx.buffer([rows, dv], f32), ctx.buffer([rows, 1], f32), ctx.buffer([rows, 1], f32)]
            args += partial
        else:
            args.append(gm_2d(ctx, out, self.layout["out"], b, hq, sq, dv))
        if self.split_cores:  # per-core GM workspace rings of the AIC <-> AIV hand-offs (stay in L2)
            rows = block_dim * t.m * self.depth * self.rings
            args += [ctx.buffer([rows, t.bc], f32), ctx.buffer([rows, t.bc], self.el),
                     ctx.buffer([block_dim * t.m * self.depth_o * self.rings, dv], f32)]
        core = CoreType.MIX if self.split_cores else CoreType.AIC
        kb = KernelBuilder(ctx, ctx.name("flash_attention"), [a.type for a in args], core, block_dim, ctx.current)
        self.kb = kb
        it = iter(kb.args)
        self.gq, self.gk, self.gv = next(it), next(it), next(it)
        self.gtable = next(it) if self.block else None
        self.gmask = next(it) if self.mask is not None else None
        if t.nsplit > 1:
            self.gacc, self.gm_, self.gl = next(it), next(it), next(it)
        else:
            self.gout = next(it)
        if self.split_cores:
            self.ws_s, self.ws_p, self.ws_o = next(it), next(it), next(it)
        self._buffers()
        self.ws_row = kb.mul(kb.block_idx, t.m * self.depth * self.rings)
        self.ws_row_o = kb.mul(kb.block_idx, t.m * self.depth_o * self.rings)
        if self.cross:
            self._stream(nrb, items)
        else:
            with kb.tiles(items) as w:
                self._item(w, nrb)
        self.sync.drain()
        ctx.launch(kb.finish(), args)
        if t.nsplit > 1:
            _emit_combine(ctx, partial, out, self)
        return out

    # ------------------------------------------------------------------------------------------
    def _buffers(self) -> None:
        kb, t, el = self.kb, self.t, self.el
        L1, L0A, L0B, L0C = MemSpace.L1, MemSpace.L0A, MemSpace.L0B, MemSpace.L0C
        # K, V and P ping-pong in L1 by block parity (pto-isa's FA double-buffers its k / p / v
        # mat tiles), so MTE2 loads block j+1's tiles while MTE1 still reads block j's
        ns = self.l1_slots = l1_slots(self.ctx.target, t.mp, t.bc, t.dp, t.dvp, itemsize(el))
        # across items (`_stream`) the next item's Q comes into a second L1 slot while this item
        # runs, so the cube starts the next item without waiting for its HBM read
        self.q_l1 = [kb.alloc([t.mp, t.dp], el, L1) for _ in range(2 if self.cross else 1)]
        self.k_l1 = [kb.alloc([t.bc, t.dp], el, L1) for _ in range(ns)]
        self.v_l1 = [kb.alloc([t.bc, t.dvp], el, L1) for _ in range(ns)]
        self.p_l1 = [kb.alloc([t.mp, t.bc], el, L1) for _ in range(ns)]
        self.q_l0a = kb.alloc([t.mp, t.dp], el, L0A)
        cb = self.cb = t.bc if self.prefetch else cube_cols(self.ctx.target, t.bc, t.mp, t.dp, t.dvp, itemsize(el))
        cs, self.s_slots = (cb, 1) if self.prefetch else score_cols(self.ctx.target, t.bc, cb, t.mp, t.dp, t.dvp, itemsize(el))
        self.cs = cs
        self.p_l0a = kb.alloc([t.mp, cb], el, L0A)
        self.kt_l0b = [kb.alloc([t.dp, cs], el, L0B) for _ in range(self.s_slots)]
        self.v_l0b = kb.alloc([cb, t.dvp], el, L0B)
        self.s_l0c = [kb.alloc([t.mp, cs], f32, L0C) for _ in range(self.s_slots)]
        self.o_l0c = kb.alloc([t.mp, t.dvp], f32, L0C)
        self.helpers = self.causal or self.skv % t.bc != 0
        for a in self.aivs:
            with kb.on_subblock(a.sub):
                self._aiv_buffers(a)
        if self.prefetch:  # scratch tiles of the L2 prefetch (nobody reads them): K on AIV 0, V on AIV 1
            self.pf_ub = []
            for sub, cols in ((0, self.d), (1, self.dv)):
                with kb.on_subblock(sub):
                    self.pf_ub.append(kb.alloc([t.bc, cols], el, MemSpace.UB))

        s = self.sync = _Sync(kb, self.split_cores)
        AIC = "aic->aic"
        M2, M1, M, FIX, V, M3 = Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX, Pipe.V, Pipe.MTE3
        self.q_q1, self.q_q0 = [s.queue(M2, M1, AIC) for _ in self.q_l1], s.queue(M1, M, AIC)
        self.q_k1 = [s.queue(M2, M1, AIC) for _ in range(ns)]
        self.q_k0 = [s.queue(M1, M, AIC) for _ in range(self.s_slots)]
        self.q_v1, self.q_v0 = [s.queue(M2, M1, AIC) for _ in range(ns)], s.queue(M1, M, AIC)
        self.q_p0 = s.queue(M1, M, AIC)
        if self.split_cores:
            self.q_p1 = [s.queue(M2, M1, AIC) for _ in range(ns)]
            self.q_sc = [s.queue(M, FIX, AIC) for _ in range(self.s_slots)]
            self.q_oc = s.queue(M, FIX, AIC)
        else:  # coupled core: L0C -> UB on the vector pipe, UB -> L1 on MTE3
            self.q_sc, self.q_oc = [s.queue(M, V, AIC)], s.queue(M, V, AIC)
            self.q_p1 = [s.queue(M3, M1, AIC)]
        for a in self.aivs:
            u = f"{a.name}->{a.name}"
            with kb.on_subblock(a.sub):
                a.q_out = s.queue(V, M3, u)
                a.q_p = s.queue(V, M3, u)
                if self.split_cores:
                    a.q_ws_s = s.queue(FIX, M2, f"aic->{a.name}", self.depth)
                    a.q_ws_o = s.queue(FIX, M2, f"aic->{a.name}", self.depth_o)
                    a.q_ws_p = s.queue(M3, M2, f"{a.name}->aic", self.depth)
                    a.q_s, a.q_o = s.queue(M2, V, u), s.queue(M2, V, u)
                if self.mask is not None:
                    a.q_mask = s.queue(M2, V, u)

    def _aiv_buffers(self, a: _Aiv) -> None:
        """UB of one vector core for its n rows (each AIV of a 910B group has its own 192 KiB)."""
        kb, t, el, UB = self.kb, self.t, self.el, MemSpace.UB
        n, dv = a.n, self.dv
        a.s_ub = kb.alloc([n, t.bc], f32, UB)
        a.p_ub = kb.alloc([n, t.bc], el, UB)
        a.o_ub = kb.alloc([n, dv], f32, UB)
        a.acc = kb.alloc([n, dv], f32, UB)
        # the output tile (input dtype): P's UB tile is free once the item's last P is out
        # (q_p), so the output is cast into it rather than into a tile of its own
        a.out_in_p = el != f32 and dv <= t.bc
        a.out_ub = a.acc if el == f32 else kb.subview(a.p_ub, [0, 0], [n, dv]) if a.out_in_p else kb.alloc([n, dv], el, UB)
        a.m_old, a.m_new, a.rowsum = (kb.alloc([n, 1], f32, UB) for _ in range(3))
        # the row sums l by item parity across items (`_stream`): the next item's softmax starts
        # before this item's output is divided by its l
        a.ls = [kb.alloc([n, 1], f32, UB) for _ in range(self.rings)]
        a.l = a.ls[0]
        # α_j, α_{j-1}, .. α_{j-lag}: the deferred updates' rescale factors
        a.alphas = [kb.alloc([n, 1], f32, UB) for _ in range(self.lag + 1)]
        a.red = kb.alloc([n, _red_cols(t.bc)], f32, UB)
        if self.mask is not None:
            _, mh, ms, mk = self.mask4
            a.mcols = t.bc if mk > 1 else 1
            # mask rows laid out like the score rows (ms > 1), one row per head segment (ms = 1,
            # mh > 1), or one row for every row (ms = mh = 1)
            a.mrows = n if ms > 1 else len(a.segs) if mh > 1 else 1
            a.mask_ub = kb.alloc([a.mrows, a.mcols], el, UB)
            a.mask32 = kb.alloc([a.mrows, a.mcols], f32, UB) if el != f32 else a.mask_ub
        if self.helpers:
            rows = max(s.n for s in a.segs) if self.causal else 1
            a.cmp = kb.alloc([rows, t.bc], i1, UB)
            a.colidx = kb.alloc([1, t.bc], f32, UB)
            a.rowidx = kb.alloc([t.br, 1], f32, UB)
            rowraw = kb.alloc([1, t.br], f32, UB)
            a.lowest = kb.alloc([1, 1], f32, UB)
            a.zero = kb.alloc([1, 1], f32, UB)
            # constant helpers, written once per core before the item loop
            kb.emit(ascend.VarangeOp(kb.const(0), rowraw))
            kb.emit(ascend.VtransposeOp(rowraw, a.rowidx, [1, 0]))
            kb.emit(ascend.VdupOp(a.lowest, LOWEST))
            kb.emit(ascend.VdupOp(a.zero, 0.0))

    def _each_aiv(self, fn: Callable[[_Aiv], None]) -> None:
        """fn(a) for every vector core, its ops tagged with its sub-block (program order: AIV 0's
        part, then AIV 1's; they run concurrently, each on its own pipes)."""
        for a in self.aivs:
            with self.kb.on_subblock(a.sub):
                fn(a)

    # ------------------------------------------------------------------------------------------
    def _item_index(self, w: Index, nrb: int) -> tuple[Index, Index, Index, Index, Index]:
        """(batch, K/V head, KV split, first query row, query rows) of item w."""
        kb, t = self.kb, self.t
        if balanced(self.causal, nrb, t.nsplit):
            bb, kh, i = self._balanced_item(w, nrb)
            sp = 0
        else:
            (bb, kh, i, sp), _ = kb.grid(w, [self.b, self.hkv, nrb, t.nsplit], [1, 1, 1, 1])
        q0 = kb.mul(i, t.br)
        return bb, kh, sp, q0, kb.boundary(t.br, self.sq, q0)

    def _item_ctx(self, w: Index, nrb: int, par: int = 0) -> _It:
        """The index values of item w (emitted here): see `_It`."""
        kb, t = self.kb, self.t
        bb, kh, sp, q0, qsz = self._item_index(w, nrb)
        if self.causal:
            # last visible key of the item's last row: q0 + qsz - 1 + off  (block skipping)
            nj = kb.add(kb.div(kb.add(kb.add(q0, qsz), self.off - 1), t.bc), 1)
            n_full = kb.div(kb.add(q0, self.off + 1), t.bc)
        else:
            nkv = ceil_div(self.skv, t.bc)
            nj, n_full = nkv, (nkv - 1 if self.skv % t.bc else nkv)
        # one past the last key any row of the item sees (cube steps from there on are skipped)
        vis_end = kb.add(kb.add(q0, qsz), self.off) if self.causal else self.skv
        return _It(par, bb, kh, sp, q0, qsz, nj, n_full, vis_end)

    @contextmanager
    def _use(self, it: _It) -> Iterator[None]:
        """Stages emitted inside work on item `it` (its indices, its workspace ring set and row
        sums); the previous item's are restored after."""
        names = ("bb", "kh", "sp", "q0", "qsz", "n_full", "vis_end")
        old = [getattr(self, n, None) for n in names], self.ring_par, [a.l for a in self.aivs]
        for n in names:
            setattr(self, n, getattr(it, n))
        self.ring_par = it.par
        for a in self.aivs:
            a.l = a.ls[it.par]
        try:
            yield
        finally:
            for n, v in zip(names, old[0]):
                setattr(self, n, v)
            self.ring_par = old[1]
            for a, l in zip(self.aivs, old[2]):
                a.l = l

    def _stream(self, nrb: int, items: int) -> None:
        """The items of a core as one software pipeline (split chips, prefill): CANN's
        FlashAttentionScore issues the next S1 block's first Q·Kᵀ while the current one's last
        softmax, P·V and output update finish, so the cube never drains between items.

        Stream step t (block j of item X) is softmax(t), update(t - 2), S(t + 2), P·V(t), as in
        `_item`, but t runs on across items: the last two steps of X compute S of the next item
        N's blocks 0 and 1 (N's Q into L0A before its first), and the first two steps of N do
        the updates of X's last two blocks and X's output (`_finish_item`). The S stage looks at most
        one item ahead and the updates one item back: an item of one block does both of its
        neighbour's (S of N's blocks 0 and 1, X's last updates); stages never reorder. Each item
        parity has its own workspace ring slots (block j of X in slot j mod depth of X's set:
        consecutive blocks never share a slot, so the counting rings stay FIFO; a slot from the
        stream position would need it carried over the item loop, which insert-sync's analysis
        cannot follow) and row sums l (the next item's softmax starts before X's output is
        divided by X's l); the running max m is
        reset at each item's first softmax, acc after each output store. Q of N comes into L1
        slot 1 - parity at the start of X."""
        kb, bd = self.kb, self.block_dim
        first = self._item_ctx(kb.block_idx, nrb, 0)
        with self._use(first):
            self._q_to_l1(0)
            self._q_to_l0a(0)
            self._s_stage(0)
            self._when(first.nj, 1, "sgt", lambda: self._s_stage(1))
        self._each_aiv(lambda a: kb.emit(ascend.VdupOp(a.acc, 0.0)))
        with kb.tiles(items) as w:
            _by_parity(kb, kb.div(w, bd), 1, 2, lambda par: self._stream_item(w, nrb, par, items))
        # the core's last item: its last two updates and its output
        last_round = kb.div(kb.sub(items - 1, kb.block_idx), bd)

        def tail(par: int) -> None:
            x = self._item_ctx(kb.add(kb.block_idx, kb.mul(last_round, bd)), nrb, par)
            with self._use(x):
                self._each_aiv(lambda a: self._when(x.nj, 1, "sgt", lambda: self._update(a, kb.sub(x.nj, 2), a.alphas[1])))
                self._each_aiv(lambda a: self._update(a, kb.sub(x.nj, 1), a.alphas[0]))
                self._finish_item(True)

        _by_parity(kb, last_round, 1, 2, tail)
        self.q_q0.release()  # the last mmad reading the last Q is done

    def _stream_item(self, w: SSAValue, nrb: int, par: int, items: int) -> None:
        """Item w (round parity `par`) in the core's stream (`_stream`): its blocks 0 and 1 were
        scored by the previous item's steps (or the prologue)."""
        kb, bd = self.kb, self.block_dim  # (depth = lag = 2: `cross`)
        x = self._item_ctx(w, nrb, par)
        # (round 0 has none: its own indices stand in, unused)
        prev = self._item_ctx(kb.sub(w, bd if par else kb.mul(kb.min(kb.div(w, bd), 1), bd)), nrb, 1 - par)
        nxt = self._item_ctx(kb.min(kb.add(w, bd), items - 1), nrb, 1 - par)
        n = x.nj

        def with_prev(fn: Callable[[], None]) -> None:  # round 0 has no previous item
            if par:
                fn()
            else:
                self._when(w, bd - 1, "sgt", fn)

        def with_next(fn: Callable[[], None]) -> None:
            self._when(items, kb.add(w, bd), "sgt", fn)

        def s_next(k: int) -> None:  # S of the next item's block k (k = 0: its Q into L0A first)
            def run() -> None:
                with self._use(nxt):
                    if k == 0:
                        self.q_q0.release()  # the last mmad reading this item's Q is done
                        self._q_to_l0a(1 - par)
                        self._s_stage(0)
                    else:
                        self._when(nxt.nj, 1, "sgt", lambda: self._s_stage(1))
            with_next(run)

        def prev_update(j: Index, d: int) -> None:  # update of the previous item's block j after d softmaxes
            with self._use(prev):
                self._each_aiv(lambda a: self._when(j, -1, "sgt", lambda: self._update(a, j, a.alphas[d])))

        def prev_finish() -> None:
            with self._use(prev):
                self._finish_item(True)

        def softmax(j: Index) -> None:
            self._each_aiv(lambda a: self._softmax(a, j))

        with self._use(x):
            with_next(lambda: self._use_call(nxt, lambda: self._q_to_l1(1 - par)))
            # step 0
            def init_stats(a: _Aiv) -> None:
                kb.emit(ascend.VdupOp(a.m_old, LOWEST))
                kb.emit(ascend.VdupOp(a.l, 0.0))
            self._each_aiv(init_stats)
            softmax(0)

            def step0_prev() -> None:
                prev_update(kb.sub(prev.nj, 2), 2)
                self._when(n, 1, "eq", lambda: (prev_update(kb.sub(prev.nj, 1), 1), prev_finish()))
            with_prev(step0_prev)
            self._when(n, 2, "sgt", lambda: self._s_stage(2), lambda: (
                s_next(0), self._when(n, 1, "eq", lambda: s_next(1))))
            self._pv(0)

            def step1() -> None:
                softmax(1)
                with_prev(lambda: (prev_update(kb.sub(prev.nj, 1), 2), prev_finish()))
                self._when(n, 3, "sgt", lambda: self._s_stage(3), lambda: self._when(
                    n, 3, "eq", lambda: s_next(0), lambda: s_next(1)))
                self._pv(1)
            self._when(n, 1, "sgt", step1)
            # steps 2 .. n-3: every stage in this item
            with kb.loop(2, kb.sub(n, 2), 1) as j:
                softmax(j)
                self._each_aiv(lambda a: self._update(a, kb.sub(j, 2), a.alphas[2]))
                self._s_stage(kb.add(j, 2))
                self._pv(j)

            def step(j: Index, k: int) -> None:  # step j >= 2 whose S stage is the next item's block k
                softmax(j)
                self._each_aiv(lambda a: self._update(a, kb.sub(j, 2), a.alphas[2]))
                s_next(k)
                self._pv(j)
            self._when(n, 3, "sgt", lambda: step(kb.sub(n, 2), 0))
            self._when(n, 2, "sgt", lambda: step(kb.sub(n, 1), 1))

    def _use_call(self, it: _It, fn: Callable[[], None]) -> None:
        with self._use(it):
            fn()

    def _item(self, w: SSAValue, nrb: int) -> None:
        """Item w on its own (coupled cores, decode, KV splits): its pipeline fills and drains."""
        kb, t = self.kb, self.t
        it = self._item_ctx(w, nrb)
        self.bb, self.kh, self.sp, self.q0, self.qsz = it.bb, it.kh, it.sp, it.q0, it.qsz
        self.vis_end, self.n_full, nj, sp = it.vis_end, it.n_full, it.nj, it.sp
        nkv = ceil_div(self.skv, t.bc)
        if t.nsplit > 1:
            jl = kb.mul(sp, t.per)
            jh = kb.min(kb.add(jl, t.per), nj)
        else:
            jl, jh = 0, nj
        self._init_item()
        if self.prefetch:  # the first blocks: V ahead of the AIC from the start, K from block PRELOAD on
            for k in range(PREFETCH_AHEAD):
                self._when(jh, kb.add(jl, k), "sgt", lambda k=k: self._prefetch(kb.add(jl, k), k >= self.depth))
        # Software pipeline (program order = numerics; the pipes overlap in time): the cube runs
        # `depth` score tiles ahead (S(j+depth) is issued before PV(j), CANN's bmm1 preload), so
        # the vector cores' softmax(j) overlaps the cube's S(j+1..) and PV(j-1..); the update of
        # block j - lag comes after softmax(j), so the round trip of P(j-1) through the cube and
        # of O(j-1) back never stalls the vector cores (pto-isa's GU stage trailing compute_p).
        self._s_stage(jl)  # every item has at least one visible block
        for k in range(1, self.depth):
            if isinstance(jl, int) and jl + k >= nkv:
                continue  # past the last block for every item (jh <= nkv): never runs
            self._when(jh, kb.add(jl, k), "sgt", lambda k=k: self._s_stage(kb.add(jl, k)))
        last = kb.sub(jh, 1)
        lag = self.lag
        if not (isinstance(jl, int) and isinstance(last, int) and last <= jl):
            with kb.loop(jl, last, 1) as j:
                if self.prefetch:
                    ahead = kb.add(j, PREFETCH_AHEAD)
                    self._when(jh, ahead, "sgt", lambda: self._prefetch(ahead, True))
                self._each_aiv(lambda a: self._softmax(a, j))
                self._each_aiv(lambda a: self._when(j, kb.add(jl, lag - 1), "sgt",
                                                    lambda: self._update(a, kb.sub(j, lag), a.alphas[lag])))
                nxt = kb.add(j, self.depth)
                if self.depth == 1:
                    self._s_stage(nxt)  # j + 1 <= last < jh inside this loop
                else:
                    self._when(jh, nxt, "sgt", lambda: self._s_stage(nxt))
                self._pv(j)
        self._each_aiv(lambda a: self._softmax(a, last))
        for d in range(lag, 0, -1):
            self._each_aiv(lambda a, d=d: self._when(last, kb.add(jl, d - 1), "sgt",
                                                     lambda: self._update(a, kb.sub(last, d), a.alphas[d])))
        self._pv(last)
        self._each_aiv(lambda a: self._update(a, last, a.alphas[0]))
        self._finish_item()

    def _balanced_item(self, w: SSAValue, nrb: int) -> tuple[Index, Index, Index]:
        """(batch, K/V head, row block) of item w: `causal_items`, in index arithmetic."""
        kb = self.kb
        cores, items = self.block_dim, self.b * self.hkv * nrb
        grp = head_group(self.ctx.target, self.b * self.hkv, self.skv, self.d, self.dv, self.es)
        r, c = kb.div(w, cores), kb.rem(w, cores)
        n_r = kb.min(cores, kb.sub(items, kb.mul(r, cores)))
        back = kb.sub(kb.sub(n_r, 1), kb.mul(c, 2))  # may be negative: only multiplied and added
        k = kb.add(kb.mul(r, cores), kb.add(c, kb.mul(kb.rem(r, 2), back)))
        q = kb.rem(k, grp * nrb)
        h = kb.add(kb.mul(kb.div(k, grp * nrb), grp), kb.rem(q, grp))
        i = kb.div(q, grp)
        return kb.div(h, self.hkv), kb.rem(h, self.hkv), i

    def _prefetch(self, j: Index, with_k: bool) -> None:
        """AIV 0 reads K_j, AIV 1 V_j, GM -> UB scratch, nobody reading the copy: the lines land
        in L2 and the AIC's loads of the same tiles (the same GM subviews: the L2 model keys on
        them) hit, at the L2 rate instead of its one DDR read port's 32 B/cycle [S1]. Decode
        attention streams K and V once, so without this the AIC's MTE2 alone (24 x 32 B/cycle =
        86 % of the 1.6 TB/s) bounds it; the group's two AIVs add their own read ports (as
        matmul.py's weight prefetch). No flag: the data never changes, only where it is read from."""
        kb, t = self.kb, self.t
        kv0 = kb.mul(j, t.bc)
        ksz = kb.boundary(t.bc, self.skv, kv0)
        if with_k:
            with kb.on_subblock(0):
                self._kv_load("k", self.pf_ub[0], kv0, ksz)
        with kb.on_subblock(1):
            self._kv_load("v", self.pf_ub[1], kv0, ksz)

    def _slot(self, j: Index) -> Index:
        """First workspace row of block j's S / P ring slot on this core."""
        kb = self.kb
        base = self.ring_par * self.depth  # the item parity's set of slots (`_stream`)
        return kb.add(self.ws_row, kb.mul(kb.add(kb.rem(j, self.depth), base), self.t.m)) if self.depth > 1 else self.ws_row

    def _slot_o(self, j: Index) -> Index:
        """First workspace row of block j's O ring slot on this core (lag slots: O(j) waits for
        update(j - lag), which follows softmax(j), whose P(j) P·V(j) waits for anyway; a third
        slot gained nothing and made the ring's period 6, past the steady-state detector)."""
        kb = self.kb
        base = self.ring_par * self.depth_o
        return kb.add(self.ws_row_o, kb.mul(kb.add(kb.rem(j, self.depth_o), base), self.t.m)) if self.depth_o > 1 else self.ws_row_o

    def _q_at(self, h: int, out: bool = False) -> tuple[Index, Index]:
        """(row, column) of the item's first query row of its group's head h in the 2-D view of
        Q (or of the output)."""
        kb = self.kb
        head = kb.add(kb.mul(self.kh, self.t.g), h)
        return gm_at(kb, self.layout["out" if out else "q"], self.bb, self.hq, self.sq, self.dv if out else self.d, head, self.q0)

    def _kv_load(self, which: str, dst: SSAValue, kv0: Index, ksz: Index, layout: str | None = None) -> None:
        """The KV tile of keys kv0 .. kv0 + ksz - 1 of the item's K (`which` "k") or V head into
        the first rows of `dst`: one DMA (strided in BSND: ksz rows of D elements, H·D apart);
        paged, one DMA per block of the tile (or the part of one block the tile is), each at the
        pool block the table names (a scalar read of table[b, logical block]), landing at the
        block's rows of the tile. A tile of a static size <= 0 loads nothing: the cross-item
        stream (`_stream`) emits blocks 1..3 with a static index under a guard (nj > j) that never
        holds when the keys are fewer, and a negative static size cannot be printed as a memref
        type."""
        kb = self.kb
        if isinstance(ksz, int) and ksz <= 0:
            return
        src, cols = (self.gk, self.d) if which == "k" else (self.gv, self.dv)
        if not self.block:
            row, col = gm_at(kb, self.layout[which], self.bb, self.hkv, self.skv, cols, self.kh, kv0)
            kb.copy(kb.subview(src, [row, col], [ksz, cols]), dst, layout=layout)
            return
        bs, bc = self.block, self.t.bc

        def block_row(logical: Index) -> Index:  # first row of (pool block table[b, logical], this head)
            phys = kb.emit(ascend.GetValueOp(self.gtable, [kb.idx(self.bb), kb.idx(logical)])).result
            return kb.mul(kb.add(kb.mul(phys, self.hkv), self.kh), bs)

        if bs >= bc:  # the tile lies inside one block
            row = kb.add(block_row(kb.div(kv0, bs)), kb.rem(kv0, bs))
            kb.copy(kb.subview(src, [row, 0], [ksz, cols]), dst, layout=layout)
            return
        dcols = shape(dst)[1]
        for i in range(bc // bs):
            def piece(i: int = i) -> None:
                start = kb.add(kv0, i * bs)
                n = kb.boundary(bs, self.skv, start)
                kb.copy(kb.subview(src, [block_row(kb.add(kb.div(kv0, bs), i)), 0], [n, cols]),
                        kb.subview(dst, [i * bs, 0], [bs, dcols]), layout=layout)
            if i == 0:
                piece()
            else:  # a last tile may end before this block
                self._when(self.skv, kb.add(kv0, i * bs), "sgt", piece)

    def _valid_rows(self, seg: _Seg, fn: Callable[[Index], None]) -> None:
        """fn(rows) with the rows of `seg` that exist in this item (min(n, qsz - a)); nothing when
        the item's last row block ends before the segment."""
        kb = self.kb
        if isinstance(self.qsz, int):
            if self.qsz > seg.a:
                fn(min(seg.n, self.qsz - seg.a))
            return
        self._when(self.qsz, seg.a, "sgt", lambda: fn(kb.min(seg.n, kb.sub(self.qsz, seg.a))))

    def _init_item(self) -> None:
        """The item's Q into L1 and L0A and the vector cores' running statistics."""
        self._q_to_l1(0)
        self._q_to_l0a(0)
        self._init_stats()

    def _q_to_l1(self, slot: int) -> None:
        """AIC: the stacked query tile of the group, GM -> L1 slot `slot`."""
        kb, t = self.kb, self.t
        self.q_q1[slot].acquire()
        for h in range(t.g):
            dst = kb.subview(self.q_l1[slot], [h * t.br, 0], [t.br, t.dp])
            row, col = self._q_at(h)
            kb.copy(kb.subview(self.gq, [row, col], [self.qsz, self.d]), dst, layout="nd2nz")
        self.q_q1[slot].enque()

    def _q_to_l0a(self, slot: int) -> None:
        """AIC: Q L1 -> L0A, resident for the whole item."""
        kb = self.kb
        self.q_q1[slot].deque()
        self.q_q0.acquire()
        kb.copy(self.q_l1[slot], self.q_l0a)
        self.q_q1[slot].release()
        self.q_q0.handoff()

    def _init_stats(self) -> None:
        kb = self.kb

        def stats(a: _Aiv) -> None:
            # running statistics (the previous item's output store must be done: q_out)
            a.q_out.acquire()
            kb.emit(ascend.VdupOp(a.m_old, LOWEST))
            kb.emit(ascend.VdupOp(a.l, 0.0))
            kb.emit(ascend.VdupOp(a.acc, 0.0))

        self._each_aiv(stats)

    def _s_stage(self, j: Index) -> None:
        """AIC: S_j = Q · K_jᵀ into L0C, one cube step of `cs` keys at a time (step h in L0B / L0C
        slot h mod s_slots, `score_cols`), each out of L0C (GM workspace on 910B, read by each
        AIV) into its columns of the block's S; K_j in L1 slot j mod l1_slots."""
        _by_parity(self.kb, j, 1, self.l1_slots, lambda p: self._s_stage_slot(j, p))

    def _s_stage_slot(self, j: Index, p: int) -> None:
        kb, t, cs = self.kb, self.t, self.cs
        k_l1, q_k1 = self.k_l1[p], self.q_k1[p]
        kv0 = kb.mul(j, t.bc)
        ksz = kb.boundary(t.bc, self.skv, kv0)
        q_k1.acquire()
        self._kv_load("k", k_l1, kv0, ksz, "nd2nz")
        q_k1.handoff()
        steps = t.bc // cs

        def step(h: int) -> None:
            x = h % self.s_slots
            kt, sc, q_k0, q_sc = self.kt_l0b[x], self.s_l0c[x], self.q_k0[x], self.q_sc[x]
            q_k0.acquire()
            k = k_l1 if steps == 1 else kb.subview(k_l1, [h * cs, 0], [cs, t.dp])
            kb.emit(ascend.CopyOp(k, kt, transpose=True))
            q_k0.handoff()
            q_sc.acquire()
            kb.emit(ascend.MmadOp(self.q_l0a, kt, sc, True))
            q_k0.release()
            q_sc.enque()
            if self.split_cores:
                q_sc.deque()
                if h == 0:
                    for a in self.aivs:  # both AIVs have read the previous S
                        a.q_ws_s.acquire()
                kb.copy(sc, kb.subview(self.ws_s, [self._slot(j), h * cs], [t.m, cs]), layout="nz2nd")
                q_sc.release()

        step(0)  # every block has a visible key in its first step
        for h in range(1, steps):  # steps wholly past the last visible key are skipped
            self._when(self.vis_end, kb.add(kv0, h * cs), "sgt", lambda h=h: step(h))
        q_k1.release()  # (MTE1: after its last copy from K_j)
        if self.split_cores:
            for a in self.aivs:
                a.q_ws_s.enque()

    def _softmax(self, a: _Aiv, j: Index) -> None:
        """Vector (one AIV, its rows): scale, mask, online softmax of block j; P to the cube."""
        kb, t = self.kb, self.t
        s = a.s_ub
        if self.split_cores:
            a.q_ws_s.deque()
            a.q_s.acquire()
            kb.copy(kb.subview(self.ws_s, [kb.add(self._slot(j), a.r0), 0], [a.n, t.bc]), s)
            a.q_ws_s.release()
            a.q_s.handoff()
        else:
            self.q_sc[0].deque()
            sc = self.s_l0c[0]
            kb.copy(sc if a.n == t.mp else kb.subview(sc, [a.r0, 0], [a.n, t.bc]), s)  # L0C -> UB (vector pipe)
            self.q_sc[0].release()
        kb.emit(_v("vmuls")(s, s, self.scale))
        kv0 = kb.mul(j, t.bc)
        if self.mask is not None:
            self._add_mask(a, kv0)
        if self.helpers:  # causal, or a last partial block
            self._when(j, self.n_full, "sge", lambda: self._mask_block(a, kv0))
        self._row_reduce(a, "max", s, a.rowsum)
        kb.emit(_v("vmax")(a.m_old, a.rowsum, a.m_new))
        kb.emit(_v("vsub")(s, a.m_new, s))
        a.q_p.acquire()
        if self.el == f32:
            kb.emit(_v("vexp")(s, a.p_ub))
            self._row_reduce(a, "sum", a.p_ub, a.rowsum)
        else:
            kb.emit(_v("vexp")(s, s))
            kb.emit(ascend.VcastOp(s, a.p_ub))
            self._row_reduce(a, "sum", s, a.rowsum)
        if self.split_cores:
            a.q_s.release()
        for d in range(self.lag, 0, -1):  # α_{j-d}, for the deferred update(j-d)
            kb.emit(_v("vcopy")(a.alphas[d - 1], a.alphas[d]))
        alpha = a.alphas[0]
        kb.emit(_v("vsub")(a.m_old, a.m_new, alpha))
        kb.emit(_v("vexp")(alpha, alpha))
        kb.emit(_v("vmul")(a.l, alpha, a.l))
        kb.emit(_v("vadd")(a.l, a.rowsum, a.l))
        kb.emit(_v("vcopy")(a.m_new, a.m_old))
        a.q_p.handoff()
        if self.split_cores:
            a.q_ws_p.acquire()
            kb.copy(a.p_ub, kb.subview(self.ws_p, [kb.add(self._slot(j), a.r0), 0], [a.n, t.bc]))
            a.q_ws_p.enque()
        else:
            if a.sub == 0:
                self.q_p1[0].acquire()
            p_l1 = self.p_l1[0]
            kb.copy(a.p_ub, p_l1 if a.n == t.mp else kb.subview(p_l1, [a.r0, 0], [a.n, t.bc]))  # UB -> L1 (MTE3, coupled)
            if a is self.aivs[-1]:
                self.q_p1[0].enque()
        a.q_p.release()

    def _when(self, a: Index, b: Index, pred: str, fn: Callable[[], None], otherwise: Callable[[], None] | None = None) -> None:
        """fn() when `a pred b` ("sge", "sgt" or "eq"), else otherwise(): decided in Python when
        both are static, else under an scf.if."""
        kb = self.kb
        otherwise = otherwise or (lambda: None)
        if isinstance(a, int) and isinstance(b, int):
            (fn if {"sge": a >= b, "sgt": a > b, "eq": a == b}[pred] else otherwise)()
            return
        cond = kb.emit(arith.CmpiOp(kb.idx(a), kb.idx(b), pred)).results[0]
        kb.if_else(cond, fn, otherwise)

    def _row_reduce(self, a: _Aiv, kind: str, src: SSAValue, dst: SSAValue) -> None:
        """dst [n, 1] = row max / sum of src [n, Bc] (fp32), in the steps of `row_reduce_steps`
        (through `a.red`)."""
        kb, ops = self.kb, _REDUCE_OPS[kind]
        cur = src
        for step, width in row_reduce_steps(self.t.bc):
            w = width // BLOCK_F32 if step == "block" else 1
            out = dst if w == 1 else kb.subview(a.red, [0, 0], [a.n, w])
            kb.emit(_v(ops[step])(kb.subview(cur, [0, 0], [a.n, width]), out))
            cur = out
        if cur is src:  # a single column: nothing to reduce
            kb.emit(_v("vcopy")(src, dst))

    def _rows(self, buf: SSAValue, lo: int, n: int, full: int) -> SSAValue:
        """Rows lo .. lo+n-1 of a [full, *] buffer (the buffer itself when that is all of it)."""
        if lo == 0 and n == full:
            return buf
        cols = buf.type.get_shape()[1]
        return self.kb.subview(buf, [lo, 0], [n, cols])

    def _add_mask(self, a: _Aiv, kv0: Index) -> None:
        kb, t = self.kb, self.t
        mb, mh, ms, mk = self.mask4
        ksz = kb.boundary(t.bc, self.skv, kv0) if mk > 1 else 1
        col = kv0 if mk > 1 else 0
        a.q_mask.acquire()

        def src_row(seg: _Seg) -> Index:
            head = kb.add(kb.mul(self.kh, t.g), seg.h) if mh > 1 else 0
            return kb.add(kb.mul(kb.add(kb.mul(self.bb if mb > 1 else 0, mh), head), ms), kb.add(self.q0, seg.a) if ms > 1 else 0)

        if ms > 1:  # the segment's rows, at the score rows they add to
            for seg in a.segs:
                self._valid_rows(seg, lambda rows, seg=seg: kb.copy(
                    kb.subview(self.gmask, [src_row(seg), col], [rows, ksz]),
                    self._rows(a.mask_ub, seg.lo, seg.n, a.mrows)))
        elif mh > 1:  # one row per head segment
            for i, seg in enumerate(a.segs):
                kb.copy(kb.subview(self.gmask, [src_row(seg), col], [1, ksz]), self._rows(a.mask_ub, i, 1, a.mrows))
        else:
            kb.copy(kb.subview(self.gmask, [src_row(a.segs[0]), col], [1, ksz]), a.mask_ub)
        a.q_mask.handoff()
        if a.mask32 is not a.mask_ub:
            kb.emit(ascend.VcastOp(a.mask_ub, a.mask32))
        if ms == 1 and mh == 1:
            kb.emit(_v("vadd")(a.s_ub, a.mask32, a.s_ub))  # one row for every row
        else:
            for i, seg in enumerate(a.segs):
                sh = self._rows(a.s_ub, seg.lo, seg.n, a.n)
                mt = self._rows(a.mask32, seg.lo, seg.n, a.mrows) if ms > 1 else self._rows(a.mask32, i, 1, a.mrows)
                kb.emit(_v("vadd")(sh, mt, sh))
        a.q_mask.release()

    def _mask_block(self, a: _Aiv, kv0: Index) -> None:
        """Write the lowest float where key kv0 + c is invisible: above the diagonal (causal) or
        past Skv (the zero-padded columns of a last partial block)."""
        kb = self.kb
        if self.causal:
            # masked iff kv0 + c > q0 + r + off  <=>  c + (kv0 - q0 - off) > r  (r: row in its head)
            kb.emit(ascend.VarangeOp(kb.idx(kb.sub(kv0, kb.add(self.q0, self.off))), a.colidx))
            done: dict[tuple[int, int], SSAValue] = {}
            for seg in a.segs:
                cmp = done.get((seg.a, seg.n))
                if cmp is None:
                    cmp = done[(seg.a, seg.n)] = self._rows(a.cmp, 0, seg.n, a.cmp.type.get_shape()[0])
                    kb.emit(ascend.VcmpOp("gt", a.colidx, self._rows(a.rowidx, seg.a, seg.n, self.t.br), cmp))
                sh = self._rows(a.s_ub, seg.lo, seg.n, a.n)
                kb.emit(ascend.VselOp(cmp, a.lowest, sh, sh))
        else:
            # masked iff kv0 + c >= Skv
            kb.emit(ascend.VarangeOp(kb.idx(kb.sub(kv0, self.skv)), a.colidx))
            kb.emit(ascend.VcmpOp("ge", a.colidx, a.zero, a.cmp))
            kb.emit(ascend.VselOp(a.cmp, a.lowest, a.s_ub, a.s_ub))

    def _pv(self, j: Index) -> None:
        """AIC: O_j = P · V_j into L0C (the cube steps of `cb` keys accumulating), then out of L0C;
        V_j and P_j in L1 slot j mod l1_slots."""
        _by_parity(self.kb, j, 1, self.l1_slots, lambda p: self._pv_slot(j, p))

    def _pv_slot(self, j: Index, p: int) -> None:
        kb, t, cb = self.kb, self.t, self.cb
        v_l1, p_l1, q_v1, q_p1 = self.v_l1[p], self.p_l1[p], self.q_v1[p], self.q_p1[p]
        kv0 = kb.mul(j, t.bc)
        ksz = kb.boundary(t.bc, self.skv, kv0)
        q_v1.acquire()
        self._kv_load("v", v_l1, kv0, ksz, "nd2nz")
        q_v1.handoff()
        if self.split_cores:
            for a in self.aivs:  # every AIV wrote its rows of P
                a.q_ws_p.deque()
            q_p1.acquire()
            kb.copy(kb.subview(self.ws_p, [self._slot(j), 0], [t.m, t.bc]), p_l1, layout="nd2nz")
            for a in self.aivs:
                a.q_ws_p.release()
            q_p1.handoff()
        else:
            q_p1.deque()
        steps = t.bc // cb
        self.q_oc.acquire()

        def step(h: int) -> None:
            self.q_v0.acquire()
            kb.copy(v_l1 if steps == 1 else kb.subview(v_l1, [h * cb, 0], [cb, t.dvp]), self.v_l0b)
            self.q_v0.handoff()
            self.q_p0.acquire()
            kb.copy(p_l1 if steps == 1 else kb.subview(p_l1, [0, h * cb], [t.mp, cb]), self.p_l0a)
            self.q_p0.handoff()
            kb.emit(ascend.MmadOp(self.p_l0a, self.v_l0b, self.o_l0c, h == 0))
            self.q_p0.release()
            self.q_v0.release()

        step(0)
        for h in range(1, steps):  # P is 0 past the last visible key: those steps add nothing
            self._when(self.vis_end, kb.add(kv0, h * cb), "sgt", lambda h=h: step(h))
        q_v1.release()  # (MTE1: after its last copies from V_j and P_j)
        q_p1.release()
        self.q_oc.enque()
        if self.split_cores:
            self.q_oc.deque()
            for a in self.aivs:
                a.q_ws_o.acquire()
            kb.copy(self.o_l0c, kb.subview(self.ws_o, [self._slot_o(j), 0], [t.m, self.dv]), layout="nz2nd")
            self.q_oc.release()
            for a in self.aivs:
                a.q_ws_o.enque()

    def _update(self, a: _Aiv, j: Index, alpha: SSAValue) -> None:
        """Vector: acc = α_j·acc + O_j (α_j is `alphas[d]` when softmax(j+d) already ran)."""
        kb, t = self.kb, self.t
        o = a.o_ub
        if self.split_cores:
            a.q_ws_o.deque()
            a.q_o.acquire()
            kb.copy(kb.subview(self.ws_o, [kb.add(self._slot_o(j), a.r0), 0], [a.n, self.dv]), o)
            a.q_ws_o.release()
            a.q_o.handoff()
        else:
            if a.sub == 0:
                self.q_oc.deque()
            kb.copy(self.o_l0c if a.n == t.mp else kb.subview(self.o_l0c, [a.r0, 0], [a.n, t.dvp]), o)  # L0C -> UB (vector pipe)
            if a is self.aivs[-1]:
                self.q_oc.release()
        kb.emit(_v("vmul")(a.acc, alpha, a.acc))
        kb.emit(_v("vadd")(a.acc, o, a.acc))
        if self.split_cores:
            a.q_o.release()

    def _finish_item(self, stream: bool = False) -> None:
        """The item's output acc / l, cast, per head to GM (or its KV split's partial). In a
        stream (`_stream`) the Q release is the next item's Q load's, and acc is reset here for
        the next item (whose first update comes after this)."""
        kb, t = self.kb, self.t
        if not stream:
            self.q_q0.release()  # the last mmad reading Q is done: the next item may reload L0A
        if t.nsplit > 1:
            # partial (acc, m, l) of this KV split, for the combine kernel
            row = kb.mul(kb.add(kb.mul(kb.add(kb.mul(self.bb, self.hkv), self.kh), t.nsplit), self.sp), t.m)

            def partial(a: _Aiv) -> None:
                r = kb.add(row, a.r0)
                a.q_out.handoff()
                kb.copy(a.acc, kb.subview(self.gacc, [r, 0], [a.n, self.dv]))
                kb.copy(a.m_old, kb.subview(self.gm_, [r, 0], [a.n, 1]))
                kb.copy(a.l, kb.subview(self.gl, [r, 0], [a.n, 1]))
                a.q_out.release()

            self._each_aiv(partial)
            return

        def store(a: _Aiv) -> None:
            if stream:  # (else `_init_stats` waited for the previous store)
                a.q_out.acquire()
            kb.emit(_v("vdiv")(a.acc, a.l, a.acc))
            if a.out_in_p:
                a.q_p.acquire()  # the item's last P has left the tile
            if a.out_ub is not a.acc:
                kb.emit(ascend.VcastOp(a.acc, a.out_ub))
            a.q_out.handoff()
            for seg in a.segs:
                src = self._rows(a.out_ub, seg.lo, seg.n, a.n)
                row, col = self._q_at(seg.h, out=True)
                self._valid_rows(seg, lambda rows, seg=seg, src=src, row=row, col=col: kb.copy(
                    src, kb.subview(self.gout, [kb.add(row, seg.a), col], [rows, self.dv])))
            a.q_out.release()
            if a.out_in_p:
                a.q_p.release()
            if stream:
                if a.out_ub is a.acc:  # fp32: the store reads acc itself
                    a.q_out.acquire()
                kb.emit(ascend.VdupOp(a.acc, 0.0))
                if a.out_ub is a.acc:
                    a.q_out.release()

        self._each_aiv(store)


def _emit_combine(ctx: LoweringContext, partial: list[SSAValue], out: SSAValue, fk: _FlashKernel) -> None:
    """Vector kernel merging the KV splits of every (batch, K/V head): with M = max_s m_s,
    out = Σ_s e^{m_s - M} acc_s / Σ_s e^{m_s - M} l_s (the flash-decoding reduction), per head to GM.
    The partials of an item lie in consecutive rows: up to COMBINE_UB_BYTES of them come in one
    copy of each of acc, m and l (three DMAs per item instead of three per split: each pays the
    DMA start-up and the 307-cycle GM read latency [S5])."""
    t = fk.t
    items = fk.b * fk.hkv
    block_dim = min(ctx.target.num_aiv, items)
    args = [*partial, gm_2d(ctx, out, fk.layout["out"], fk.b, fk.hq, fk.sq, fk.dv)]
    core = CoreType.AIV
    kb = KernelBuilder(ctx, ctx.name("flash_combine"), [a.type for a in args], core, block_dim, ctx.current)
    gacc, gm_, gl, gout = kb.args
    m, dv, el = t.m, fk.dv, fk.el
    chunk = max(1, min(t.nsplit, COMBINE_UB_BYTES // (m * (dv + 2) * 4)))  # splits per copy
    UB = MemSpace.UB
    o = kb.alloc([m, dv], f32, UB)
    a_all, ms_all, ls_all = kb.alloc([chunk * m, dv], f32, UB), kb.alloc([chunk * m, 1], f32, UB), kb.alloc([chunk * m, 1], f32, UB)
    mx, lsum, mn, ca, cb = (kb.alloc([m, 1], f32, UB) for _ in range(5))
    res = kb.alloc([m, dv], el, UB) if el != f32 else o
    q_in = kb.queue(Pipe.MTE2, Pipe.V)
    q_out = kb.queue(Pipe.V, Pipe.MTE3)
    with kb.tiles(items) as w:
        (bb, kh), _ = kb.grid(w, [fk.b, fk.hkv], [1, 1])
        base = kb.mul(kb.add(kb.mul(bb, fk.hkv), kh), t.nsplit)
        q_out.acquire()
        kb.emit(ascend.VdupOp(mx, LOWEST))
        kb.emit(ascend.VdupOp(lsum, 0.0))
        kb.emit(ascend.VdupOp(o, 0.0))
        with kb.range(0, t.nsplit, chunk) as c:
            csz = kb.boundary(chunk, t.nsplit, c)
            row = kb.mul(kb.add(base, c), m)
            rows = kb.mul(csz, m)
            q_in.acquire()
            kb.copy(kb.subview(gacc, [row, 0], [rows, dv]), a_all)
            kb.copy(kb.subview(gm_, [row, 0], [rows, 1]), ms_all)
            kb.copy(kb.subview(gl, [row, 0], [rows, 1]), ls_all)
            q_in.handoff()
            with kb.loop(0, csz, 1) as s:
                r = kb.mul(s, m)
                a, ms, ls = (kb.subview(x, [r, 0], [m, x.type.get_shape()[1]]) for x in (a_all, ms_all, ls_all))
                kb.emit(_v("vmax")(mx, ms, mn))
                kb.emit(_v("vsub")(mx, mn, ca))
                kb.emit(_v("vexp")(ca, ca))
                kb.emit(_v("vsub")(ms, mn, cb))
                kb.emit(_v("vexp")(cb, cb))
                kb.emit(_v("vmul")(o, ca, o))
                kb.emit(_v("vmul")(a, cb, a))
                kb.emit(_v("vadd")(o, a, o))
                kb.emit(_v("vmul")(lsum, ca, lsum))
                kb.emit(_v("vmul")(ls, cb, ls))
                kb.emit(_v("vadd")(lsum, ls, lsum))
                kb.emit(_v("vcopy")(mn, mx))
            q_in.release()
        kb.emit(_v("vdiv")(o, lsum, o))
        if res is not o:
            kb.emit(ascend.VcastOp(o, res))
        q_out.handoff()
        for h in range(t.g):
            src = kb.subview(res, [h * t.br, 0], [t.br, dv]) if t.g > 1 else res
            row, col = gm_at(kb, fk.layout["out"], bb, fk.hq, fk.sq, dv, kb.add(kb.mul(kh, t.g), h), 0)
            kb.copy(src, kb.subview(gout, [row, col], [fk.sq, dv]))
        q_out.release()
    ctx.launch(kb.finish(), args)
