"""`ascendir generate`: simulated LLM serving of a KV-cache decoder, prefill then greedy decode.

    ascendir generate MODEL --prompt-len P --new-tokens N [--batch B] [--inputs PROMPT.npz]
        [--outputs OUT.npz] [--report R.json] [--plots DIR] [--timing-only] [--dtype fp16] [--tp N]

A step is one forward pass of MODEL (see frontends/onnx/kv_cache.py for the signature it
needs): the prefill feeds the P prompt tokens with an empty cache and picks the first new token;
each of the N - 1 decode steps feeds the last token with the cache the previous step returned
(its `present` outputs become the next `past` inputs) and picks the next one. Tokens are greedy
(argmax of the last position's logits). With numerics, `generated_ids` [B, N] and `final_logits`
[B, vocab] (the logits of the step that picked the last token) are the outputs; they equal
onnxruntime's step-by-step generation of the same model.

Each step is compiled (-O2, ascend-lowering) and simulated at its own static shapes; the steps
share one launch memo (interpreter/accel/memo.py), so a launch of a later step whose kernel,
argument aliasing and L2 checks equal those of an earlier launch (of any step: a decode step's
kernels but the attention's and the cache append's are the step before's) is applied, not
simulated again, exactly as between the layers of one step. Timing of
decode steps in --timing-only: a decode step's shapes differ from the next one's only in the
cache length L, so its cycles are a function T(L), piecewise affine (each step reads one more
key; a new KV tile or another KV split adds a jump). The jumps are found from the tiling
decisions, not from cycles: [first L, last L] is cut where the decode attention's tiling (tile,
KV split) or its number of KV blocks changes (`regions`, `_Model.tiling_key`, choose-tiling's own
search at each L, no simulation). In each piece T is simulated at both ends and next to them;
where the four lie on one line (to 1e-9 relative or half a cycle) the rest is interpolated,
else a kink is looked for where the end lines cross, or a jump by bisection, and each part
checked the same way (affine_fill). tests/test_generate.py checks the result equal to simulating
every step, across KV blocks too. Numerics runs simulate every step (each needs the previous
one's data).

Figures (report JSON, see generate.schema.json; seconds at the chip's clock):
* TTFT: the prefill's simulated time; TPOT: each decode step's (N - 1 of them) and their mean;
  tokens/s: B * N / (TTFT + sum of TPOT), and the decode rate B / mean TPOT.
* HBM bytes per token (per decode step / B): weights (the GM footprint of the weights but the
  embedding tables, of which a step gathers a few rows: read once a step at least), KV (the cache read, plus the new rows written, in place: the least a
  step moves), and what the simulation moved (GM reads that missed L2 + GM writes).
* roofline TPOT: (weight bytes + KV bytes of the step) / HBM bandwidth (the chip TOML's
  `hbm_Bps`), beside the simulated TPOT.
* bound of each phase (prefill, last decode step): the share of cycles of launches bound by
  cube, vector, HBM, L2, launch or latency (interpreter/report/headline.py's rule).

Paged KV (`kv_block_size` > 0, `--kv-block-size N`): every step runs page-kv-cache after -O2
(transforms/nn/page_kv_cache.py): each cache is a pool [blocks, kv_heads, N, head_dim] of
B · ceil(capacity / N) blocks (capacity: the positions the last step holds) and one block table
[B, ceil(capacity / N)] (i32) addresses them. The host allocates like vLLM's block manager
(`block_table`): the prompt's blocks per sequence at prefill, then a block per sequence each
time the sequences cross a block boundary, so after the prompt a sequence's blocks interleave
with the others'. The pools are the steps' present outputs and the next step's past inputs; the
table is fed in timing-only runs too (the kernels address by it). The report's `kv_cache` gives
the layout, block size, blocks used and allocated bytes. Under `tp` > 1 the pools are paged
after shard-tensor-parallel, each rank's holding its KV heads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ascendir.errors import AscendirError

AFFINE_RTOL = 1e-9  # T(L) on the chord within this: the interval is affine at the checked points
# ... or within this many cycles: a 32-layer step sums ~350 launches' fractional cycles, which
# leave points 0.03 cycles off a chord (1.5e-9 of the step) that no counter could show
CYCLE_TOL = 0.5


@dataclass
class StepResult:
    """One simulated step: its report (interpreter/report), logits and cache (None when timing-only)."""

    report: dict
    unread: int = 0  # weight bytes a step does not read whole: embedding tables only gathered from
    logits: np.ndarray | None = None
    cache: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Generation:
    """What `generate` returns: the outputs (numerics only) and the report dict."""

    outputs: dict[str, np.ndarray]
    report: dict


class _Model:
    """A KV-cache decoder and how to compile and simulate one step of it at given shapes."""

    def __init__(self, path: Path, target: str, dtype: str, shape_only: bool, in_place: bool = True, opt_level: str = "2",
                 tp: int = 1, topology: str | None = None, kv_block_size: int = 0, capacity: int = 0, prompt_len: int = 0):
        from ascendir.frontends.onnx.kv_cache import kv_signature
        from ascendir.frontends.onnx.loading import load_model
        from ascendir.hardware import load_target

        self.path, self.target, self.dtype, self.shape_only, self.opt_level = path, target, dtype, shape_only, opt_level
        self.in_place = in_place
        self.hw = load_target(target)
        self.tp, self.topology = tp, None
        if tp > 1:
            from ascendir.hardware.topology import load_topology

            self.topology = load_topology(topology)
            if tp > self.topology.devices:
                raise AscendirError(f"generate: --tp {tp} does not fit topology {self.topology.name} ({self.topology.devices} devices)")
        proto, _ = load_model(path)
        self.sig = kv_signature(proto)
        # one launch memo for every step (interpreter/accel/memo.py): a decode step's kernels but
        # the attention's are those of the step before, and their launches are reused across
        # steps exactly as across layers (each checked against the chip L2 it meets)
        from ascendir.interpreter import LaunchMemo

        self.launch_memo = LaunchMemo()
        self.past_axis = {c.past: c.axis for c in self.sig.cache}
        # paged KV: block size, table width (blocks a sequence holds at `capacity` positions), prompt
        self.kv_block, self.prompt_len = kv_block_size, prompt_len
        self.kv_blocks = -(-capacity // kv_block_size) if kv_block_size else 0
        if kv_block_size:
            from ascendir.transforms.nn.page_kv_cache import check_block_size

            check_block_size(kv_block_size)
            if not in_place:
                raise AscendirError("generate: a paged KV cache is kept in place (cache-append)")
            bad = [c.past for c in self.sig.cache if len(c.shape) != 4 or c.axis != 2]
            if bad:
                raise AscendirError(f"generate: --kv-block-size needs caches [batch, kv_heads, positions, head_dim]; {bad[0]} is not")

    def vocab_size(self) -> int | None:
        """Rows of the embedding table input_ids index (None when no Gather reads them)."""
        from ascendir.driver import gather_bounds, main_func
        from ascendir.frontends.onnx import import_onnx

        module, _ = import_onnx(self.path, self.sig.shapes(1, 1, 0), shape_only=True, dtype=self.dtype)
        return gather_bounds(main_func(module)).get(self.sig.input_ids)

    def step(self, batch: int, seq: int, past: int, feeds: dict[str, np.ndarray] | None) -> StepResult:
        """Compile and simulate one step: `seq` new tokens after `past` cached positions;
        `feeds` None = timing-only."""
        timing_only = feeds is None
        from ascendir.driver import io_names, lower, main_func, parse_pipeline, run_passes
        from ascendir.frontends.onnx import import_onnx
        from ascendir.interpreter import simulate
        from ascendir.session import Session

        module, weights = import_onnx(self.path, self.sig.shapes(batch, seq, past), shape_only=self.shape_only, dtype=self.dtype)
        unread = _gathered_tables(module)
        if seq > 1:
            _last_logits(module, self.sig.logits)
        session = Session(echo_notes=False)
        spec = ("cache-append," if self.in_place else "") + f"O{self.opt_level}"
        run_passes(module, parse_pipeline(spec, f"O{self.opt_level}", self.target, None), weights, None, session)
        tiling = parse_pipeline("choose-tiling", f"O{self.opt_level}", self.target, None).passes
        page = ()
        if self.kv_block:  # the caches in blocks through a table, the attention's tile searched again
            from ascendir.transforms.nn.page_kv_cache import PageKVCache

            page = (PageKVCache(block_size=self.kv_block, blocks=self.kv_blocks, pool=batch * self.kv_blocks,
                                presents=",".join(f"{c.past}={c.present}" for c in self.sig.cache)),)
        if page and self.tp == 1:  # (under --tp after sharding: each rank pages its KV heads' caches)
            from ascendir.driver import PassPipeline

            run_passes(module, PassPipeline((*page, *tiling)), weights, None, session)
        if seq == 1:
            self._record_attention(module, past)
        in_place = {n for n, t in zip(io_names(main_func(module), False), main_func(module).function_type.inputs.data)
                    if n in self.past_axis and t.get_shape()[self.past_axis[n]] == past + seq and not self.kv_block}
        stores = [weights]
        if self.tp > 1:  # Megatron tensor parallelism: one SPMD module, rank r's weight slices in stores[r]
            from ascendir.driver import lower_tensor_parallel
            from ascendir.pipelines import after_shard

            # the shard pass leaves the attention of each rank's heads outside a region (it reads
            # them out of the all-gathered cache): put it back into the flash template's region;
            # a paged cache is paged then, per rank: its pools hold the rank's KV heads (the
            # shard pass split the contiguous caches along them), the block table is every rank's
            fuse = parse_pipeline("fuse-attention", f"O{self.opt_level}", self.target, None).passes
            again = (*fuse, *page, *tiling)
            _mark_presents(module, {c.present for c in self.sig.cache})  # kept per rank, a prefill's too
            module, stores = lower_tensor_parallel(module, weights, self.tp, self.target, False, session,
                                                   (*again, *after_shard(str(self.opt_level))),
                                                   topology=self.topology.source if self.topology else None)
        else:
            lower(module, weights, self.target, session)
        if feeds is not None:  # a cache written in place: the past in its first positions, room for the new rows
            feeds = {n: _grow(a, self.past_axis[n], seq) if n in in_place else a for n, a in feeds.items()}
        if self.kv_block:  # the table is fed in timing-only runs too: the kernels address by it
            from ascendir.transforms.nn.page_kv_cache import TABLE_NAME

            feeds = {**(feeds or {}), TABLE_NAME: self.block_table(batch, past + seq)}
        if self.tp > 1:  # every rank gets the inputs, of its caches its KV heads (shard-tensor-parallel)
            from ascendir.driver import simulate_ranks

            from ascendir.costmodel.memory import check_module_gm_fits

            heads = {n: t.get_shape()[1] for n, t in zip(io_names(main_func(module), False), main_func(module).function_type.inputs.data)
                     if n in self.past_axis}
            ranks = [{n: _rank_heads(a, heads[n], self.tp, r) if n in heads else a for n, a in (feeds or {}).items()}
                     for r in range(self.tp)]
            res = simulate_ranks([module] * self.tp, stores, ranks, self.hw, self.topology, timing_only=timing_only)
            fp = check_module_gm_fits(module, self.hw)  # one device's (rank 0's slices); the cluster report has none
            if fp is not None:
                res.report["gm_footprint"] = fp
        else:
            res = simulate(module, weights, feeds or {}, self.hw, timing_only=timing_only, launch_memo=self.launch_memo)
        if timing_only:
            return StepResult(res.report, unread)
        logits = np.asarray(res.outputs[self.sig.logits], np.float32)
        if self.tp > 1:  # each rank returned its KV heads: the whole cache again, one copy of each head
            cache = {c.past: _all_heads([res.outputs[f"{c.present}@{r}" if r else c.present] for r in range(self.tp)],
                                        feeds[c.past].shape[1]) for c in self.sig.cache}
        else:
            cache = {c.past: res.outputs[c.present] for c in self.sig.cache}
        return StepResult(res.report, unread, logits, cache)

    def _record_attention(self, module, past: int) -> None:
        """Keep the Shape (flash_attention.Shape) of every attention of a decode step at cache
        length `past`, one rank's under tp (its query heads, its K/V heads: shard-tensor-parallel's
        split, replicated when fewer than ranks), for `tiling_key`."""
        from dataclasses import replace

        from ascendir.conversion.nn_to_ascend.templates.flash_attention import shape_of
        from ascendir.dialects import nn

        shapes = []
        for op in module.walk():
            if isinstance(op, nn.AttentionOp):
                s = shape_of(op)
                if self.tp > 1:  # (recorded before sharding, and so before a paged cache is paged)
                    hkv = max(1, s.hkv // self.tp)
                    s = replace(s, hkv=hkv, g=s.hkv * s.g // self.tp // hkv, block=self.kv_block or s.block)
                shapes.append(s)
        self.attention = (past, sorted(set(shapes), key=repr))

    def tiling_key(self, past: int) -> tuple:
        """What the decode attention's kernels are at cache length `past`: per distinct attention
        shape, its tiling as choose-tiling picks it (flash_attention.search: tile, KV split and
        blocks per split) and its KV blocks. Steps with equal keys run the same loops but for
        the rows of the last KV block (`regions`); a full last block (no mask of its padding) is
        left to affine_fill's check of the interval's end. Empty before a decode step was
        compiled or when the model has no attention. A paged cache adds its number of blocks."""
        from dataclasses import replace

        from ascendir.conversion.nn_to_ascend.templates.flash_attention import search

        if not getattr(self, "attention", None):
            return ()
        past0, shapes = self.attention
        key = []
        for s in shapes:
            s = replace(s, skv=s.skv + past - past0)
            try:
                t = search(s, self.hw)[0]
            except ValueError:  # no flash tile fits: lowered otherwise, no key
                return ()
            # paged: the pool blocks read too (a tile of several blocks loads one more each block_size keys)
            key.append((t.br, t.bc, t.nsplit, t.per, -(-s.skv // t.bc), -(-s.skv // s.block) if s.block else 0))
        return tuple(key)

    def feeds(self, ids: np.ndarray, past: int, cache: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        b, s = ids.shape
        out = {self.sig.input_ids: ids.astype(np.int64)}
        if self.sig.attention_mask:
            out[self.sig.attention_mask] = np.ones((b, past + s), np.int64)
        if self.sig.position_ids:
            out[self.sig.position_ids] = np.broadcast_to(np.arange(past, past + s, dtype=np.int64), (b, s)).copy()
        if self.sig.cache_position:
            out[self.sig.cache_position] = np.arange(past, past + s, dtype=np.int64)
        for c in self.sig.cache:
            if past:
                out[c.past] = cache[c.past]
            elif self.kv_block:  # an empty pool [blocks, kv_heads, block size, head_dim]
                _, h, _, d = c.dims(b, 0)
                out[c.past] = np.zeros((b * self.kv_blocks, h, self.kv_block, d), np.float32)
            else:
                out[c.past] = np.zeros(c.dims(b, 0), np.float32)
        return out

    def block_table(self, batch: int, length: int) -> np.ndarray:
        """The block table [batch, table width] (i32) when each sequence holds `length`
        positions, as a block manager allocating on demand fills it: the prompt's
        ceil(prompt_len / block) blocks of sequence 0, then 1, ..; past the prompt, each time the
        sequences reach a new block, one block each in sequence order. Entries past a
        sequence's blocks are 0 (never read: the kernels read the blocks of `length` only)."""
        bs, table = self.kv_block, np.zeros((batch, self.kv_blocks), np.int32)
        first = -(-min(self.prompt_len, length) // bs)
        table[:, :first] = np.arange(batch * first).reshape(batch, first)
        more = -(-length // bs) - first
        if more > 0:
            table[:, first:first + more] = batch * first + np.arange(more * batch).reshape(more, batch).T
        return table

    def blocks_used(self, batch: int, length: int) -> int:
        """Pool blocks the sequences hold at `length` positions (0 when contiguous)."""
        return batch * -(-length // self.kv_block) if self.kv_block else 0


def _gathered_tables(module) -> int:
    """Bytes of the weights read only by nn.gather (embedding tables): a step reads the rows of
    its tokens, not the table, so the roofline leaves them out."""
    from ascendir.dialects import nn
    from ascendir.driver import main_func
    from ascendir.dtypes import itemsize

    total = 0
    for op in main_func(module).body.block.ops:
        if isinstance(op, nn.WeightOp):
            uses = [u for u in op.result.uses]
            if uses and all(isinstance(u.operation, nn.GatherOp) and u.index == 0 for u in uses):
                total += math.prod(op.result.type.get_shape()) * itemsize(op.result.type.element_type)
    return total


def _last_logits(module, logits: str) -> None:
    """Compute @main's result `logits` [batch, seq, vocab] for the last position only
    ([batch, 1, vocab]): its lm_head matmul reads the last row of its activations (an nn.slice
    before it). Greedy decoding reads only that row, and serving engines compute no others
    (vLLM's LogitsProcessor gathers the sampled positions' hidden states before the lm_head), so
    a prefill of P tokens does not pay P - 1 rows of the vocabulary projection (and, under --tp,
    their all-gather over the vocab). Left as it is when the result is not a matmul of a
    [batch, seq, hidden] activation by a weight."""
    from xdsl.dialects.builtin import FunctionType
    from xdsl.rewriter import InsertPoint, Rewriter

    from ascendir.dialects import nn
    from ascendir.dialects.ascend.attrs import TILING_ATTR
    from ascendir.driver import main_func

    main = main_func(module)
    names = [d.data["onnx.name"].data if "onnx.name" in d.data else None for d in main.res_attrs.data] if main.res_attrs else []
    if logits not in names:
        return
    ret, i = main.body.block.last_op, names.index(logits)
    mm = ret.operands[i].owner
    if not (isinstance(mm, nn.MatmulOp) and isinstance(mm.rhs.owner, nn.WeightOp) and len(nn.shape_of(mm.lhs)) == 3
            and len(nn.shape_of(mm.rhs)) == 2 and len(list(mm.result.uses)) == 1):
        return
    b, s, h = nn.shape_of(mm.lhs)
    last = nn.SliceOp(mm.lhs, [0, s - 1, 0], [1, 1, 1], [b, 1, h])
    head = nn.MatmulOp(last.result, mm.rhs, mm.result.type.element_type)
    for k, v in mm.attributes.items():  # onnx.name: the report names the node
        if k != TILING_ATTR:
            head.attributes[k] = v
    Rewriter.insert_op([last, head], InsertPoint.before(mm))
    ret.operands = [*ret.operands[:i], head.result, *ret.operands[i + 1:]]
    Rewriter.erase_op(mm)
    main.function_type = FunctionType.from_lists(main.function_type.inputs.data, [v.type for v in ret.operands])


def _mark_presents(module, presents: set[str]) -> None:
    """Mark @main's results named in `presents` (the KV caches' present outputs) KV_CACHE_ATTR:
    shard-tensor-parallel returns them with each rank's KV heads, so a prefill's new K / V (no
    cache argument to append to) are not all-gathered only for the host to keep one copy."""
    from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, UnitAttr

    from ascendir.driver import main_func
    from ascendir.transforms.nn.shard_tensor_parallel import KV_CACHE_ATTR

    main = main_func(module)
    if main.res_attrs is None:
        return
    main.res_attrs = ArrayAttr([DictionaryAttr({**d.data, KV_CACHE_ATTR: UnitAttr()})
                                if "onnx.name" in d.data and d.data["onnx.name"].data in presents else d for d in main.res_attrs.data])


def _rank_heads(cache: np.ndarray, heads: int, tp: int, rank: int) -> np.ndarray:
    """Rank `rank`'s KV heads of `cache` [batch, kv_heads, positions, head_dim] when a rank holds
    `heads` of them (shard-tensor-parallel's split: kv_heads / heads parts, a part held by
    tp / parts ranks)."""
    from ascendir.transforms.nn.shard_tensor_parallel import rank_slice, split

    return rank_slice(cache, split(1, tp, parts=cache.shape[1] // heads), tp, rank) if heads != cache.shape[1] else cache


def _all_heads(ranks: list[np.ndarray], kv_heads: int) -> np.ndarray:
    """The cache of all `kv_heads` from the ranks' caches (`_rank_heads`): part c from the
    first rank holding it."""
    parts, tp = kv_heads // ranks[0].shape[1], len(ranks)
    if parts == 1:
        return ranks[0]
    return np.concatenate([ranks[c * tp // parts] for c in range(parts)], axis=1)


def _grow(past: np.ndarray, axis: int, rows: int) -> np.ndarray:
    """`past` with `rows` zero positions appended along `axis`: the preallocated cache a step
    writes its new rows into (cache-append)."""
    pad = [(0, 0)] * past.ndim
    pad[axis] = (0, rows)
    return np.pad(past, pad)


def regions(lo: int, hi: int, key: Callable[[int], object]) -> list[tuple[int, int]]:
    """[lo, hi] cut into the runs of consecutive L with equal `key(L)` (the decode attention's
    tiling decisions at cache length L: tile, KV split, KV blocks): the places a KV tile or a
    changed split adds a jump to T(L), found without simulating."""
    out, start, k0 = [], lo, key(lo)
    for x in range(lo + 1, hi + 1):
        k = key(x)
        if k != k0:
            out.append((start, x - 1))
            start, k0 = x, k
    out.append((start, hi))
    return out


def affine_fill(lo: int, hi: int, cost: Callable[[int], float], pieces: list[tuple[int, int]] | None = None,
                abs_tol: float = 1e-12) -> tuple[dict[int, float], set[int]]:
    """T(L) for every L in [lo, hi], simulating (`cost`) only some L.

    `pieces` (consecutive intervals covering [lo, hi], e.g. `regions`) are filled one by one:
    a jump known to sit between two of them is not searched for. Two values are equal within
    AFFINE_RTOL or `abs_tol` (generate passes a fraction of a cycle, in seconds: the cycles
    summed over hundreds of launches carry fractions of a cycle that are no cost).

    A decode step's cost is piecewise affine in the cache length L: each step reads one more key
    (a constant slope) and a new KV tile adds a jump. For an interval [a, b] T is simulated at
    a, a + 1, b - 1 and b (the slope at each end):
    * all four on one line (AFFINE_RTOL): interpolated linearly;
    * different slopes: first the kink of a maximum of the two end lines (a step is bound by one
      resource up to some L, by another after it: the HBM floor against the pipeline) is tried:
      x0 = floor of where the lines through (a, a + 1) and (b - 1, b) cross; if x0 - 1, x0 lie on
      the left line and x0 + 1, x0 + 2 on the right one, [a, x0] and [x0 + 1, b] each passed the
      four-point check above and are interpolated;
    * otherwise (a jump, or a kink and a jump): the first L off the line through a and a + 1 is
      found by bisection (each probe simulated); up to it T is that line, and the rest
      [first, b] is filled the same way (it may hold more jumps and kinks).
    Intervals of four or fewer points are simulated point by point. Sampling at fixed strides
    instead would alias with the tile period (jumps every 128 keys look like one line at a stride
    of 128); the end slopes cannot.

    Returns:
        (T by L, the L that were simulated)."""
    known: dict[int, float] = {}

    def at(x: int) -> float:
        if x not in known:
            known[x] = cost(x)
        return known[x]

    def same(u: float, v: float) -> bool:
        return math.isclose(u, v, rel_tol=AFFINE_RTOL, abs_tol=abs_tol)

    def line(x0: int, s: float, x: int) -> float:
        return known[x0] + s * (x - x0)

    out: dict[int, float] = {}
    stack = list(reversed(pieces)) if pieces else [(lo, hi)]
    while stack:
        a, b = stack.pop()
        if b - a <= 3:
            out.update((x, at(x)) for x in range(a, b + 1))
            continue
        ta, ta1, tb1, tb = at(a), at(a + 1), at(b - 1), at(b)
        left, right = ta1 - ta, tb - tb1
        if same(line(a, left, b - 1), tb1) and same(line(a, left, b), tb):
            out.update((x, known.get(x, line(a, left, x))) for x in range(a, b + 1))
            continue
        if not same(left, right):
            x0 = math.floor((tb - ta + left * a - right * b) / (left - right))
            if a + 2 <= x0 <= b - 3 and same(at(x0 - 1), line(a, left, x0 - 1)) and same(at(x0), line(a, left, x0)) \
                    and same(at(x0 + 1), line(b, right, x0 + 1)) and same(at(x0 + 2), line(b, right, x0 + 2)):
                out.update((x, known.get(x, line(a, left, x))) for x in range(a, x0 + 1))
                out.update((x, known.get(x, line(b, right, x))) for x in range(x0 + 1, b + 1))
                continue
        if same(line(a, left, b - 1), tb1):  # only b is off the line
            out.update((x, known.get(x, line(a, left, x))) for x in range(a, b + 1))
            out[b] = tb
            continue
        on, off = a + 1, b - 1  # on the line through a, a + 1 / off it
        while off - on > 1:
            m = (on + off) // 2
            if same(at(m), line(a, left, m)):
                on = m
            else:
                off = m
        out.update((x, known.get(x, line(a, left, x))) for x in range(a, on + 1))
        stack.append((off, b))
    return out, set(known)


def _kv_layout(m: _Model, batch: int, length: int, itemsize: dict[int, int]) -> dict:
    """The report's cache layout: contiguous, or paged with its block size, blocks used at
    `length` positions, blocks allocated per pool, and the bytes the used blocks hold (all
    layers, K and V: a partly filled last block counts whole) and the pools' bytes."""
    if not m.kv_block:
        return {"layout": "contiguous"}
    used = m.blocks_used(batch, length)
    block_bytes = _kv_bytes(m.sig, 1, m.kv_block, itemsize)  # one block of every cache tensor
    return {"layout": "paged", "block_size": m.kv_block, "blocks_used": used, "blocks_allocated": batch * m.kv_blocks,
            "bytes_used_blocks": used * block_bytes, "bytes_allocated": batch * m.kv_blocks * block_bytes}


def _kv_bytes(sig, batch: int, length: int, itemsize: dict[int, int]) -> int:
    return sum(math.prod(c.dims(batch, length)) * itemsize[c.elem] for c in sig.cache)


def _kv_parts(sig, tp: int) -> int:
    """Parts the cache is held in over `tp` devices: its K/V heads are dealt over the ranks
    (axis 1 of [batch, kv_heads, length, head_dim]), replicated when there are fewer heads than
    ranks (shard-tensor-parallel), so a device holds and reads 1 / min(tp, kv_heads) of it."""
    heads = min((c.shape[1] for c in sig.cache if len(c.shape) == 4 and c.shape[1]), default=1)
    return max(1, min(tp, heads))


def _itemsizes(sig, dtype: str) -> dict[int, int]:
    """Bytes per cache element: the model's, or the --dtype policy's for float caches."""
    import onnx

    out = {}
    for c in sig.cache:
        np_t = onnx.helper.tensor_dtype_to_np_dtype(c.elem)
        out[c.elem] = 2 if dtype in ("fp16", "bf16") and np.issubdtype(np_t, np.floating) else np.dtype(np_t).itemsize
    return out


def _phase(report: dict) -> dict:
    from ascendir.interpreter.report.headline import bound_shares

    b = report["bytes"]
    hbm = max(0.0, b.get("gm_read", 0.0) - b.get("l2_hit", 0.0)) + b.get("gm_write", 0.0)
    return {"cycles": report["total_cycles"], "seconds": report["total_seconds"], "hbm_bytes": hbm,
            "bound": [{"resource": r, "share": s} for r, s in bound_shares(report)]}


def generate(model: str | Path, prompt_len: int, new_tokens: int, batch: int = 1, prompt: np.ndarray | None = None,
             target: str = "ascend910b2", dtype: str = "fp32", timing_only: bool = False, shape_only: bool = False,
             seed: int = 0, every_step: bool = False, in_place: bool = True, progress: Callable[[str], None] | None = None,
             tp: int = 1, topology: str | None = None, kv_block_size: int = 0) -> Generation:
    """Prefill `prompt` ([batch, prompt_len] int64; seeded random ids in [0, vocab) when None),
    then greedy decode until `new_tokens` tokens are generated (see the module docstring).

    `every_step` simulates every decode step in timing-only runs too (the reference of the
    interpolation). Timing-only needs no prompt and returns no outputs. `tp` > 1 shards every
    step Megatron-style over `tp` devices of `topology` (shard-tensor-parallel; default topology
    the 8-NPU Atlas 800 A2) and simulates the ranks together (driver.simulate_ranks): the
    figures are the cluster's (its slowest device), bytes and roofline per device.
    `kv_block_size` > 0 keeps the caches paged in blocks of that many positions (module docstring).

    Raises:
        AscendirError: a model without a usable KV-cache signature (kv_signature), a prompt of
            the wrong shape or with ids out of the vocabulary, new_tokens < 1, a batch the model
            was not exported for, a KV block size out of 16..512 or not a multiple of 16, or with
            tp > 1, and anything compiling or simulating a step raises.
    """
    path = Path(model)
    if prompt is not None:
        prompt = np.asarray(prompt)
        if prompt.ndim != 2 or not np.issubdtype(prompt.dtype, np.integer):
            raise AscendirError(f"generate: the prompt (input_ids) must be an integer array [batch, seq], got {prompt.dtype} {list(prompt.shape)}")
        batch, prompt_len = prompt.shape
    if new_tokens < 1 or prompt_len < 1 or batch < 1:
        raise AscendirError(f"generate: --prompt-len, --new-tokens and --batch must be >= 1 (got {prompt_len}, {new_tokens}, {batch})")
    shape_only = shape_only or False
    if shape_only:
        timing_only = True
    if tp < 1:
        raise AscendirError(f"generate: --tp must be >= 1 (got {tp})")
    m = _Model(path, target, dtype, shape_only, in_place, tp=tp, topology=topology, kv_block_size=kv_block_size,
               capacity=prompt_len + new_tokens - 1, prompt_len=prompt_len)
    sig = m.sig
    if sig.fixed_batch is not None and sig.fixed_batch != batch:
        raise AscendirError(f"generate: input_ids axis 0 (the batch) is static ({sig.fixed_batch}); --batch {batch} needs it free")
    say = progress or (lambda _msg: None)

    say(f"prefill: {batch} x {prompt_len} tokens")
    if timing_only:
        pre = m.step(batch, prompt_len, 0, None)
    else:
        vocab = m.vocab_size()
        if prompt is None:
            prompt = np.random.default_rng(seed).integers(0, vocab or 2, (batch, prompt_len), dtype=np.int64)
        if vocab is not None and (prompt.min() < 0 or prompt.max() >= vocab):
            raise AscendirError(f"generate: prompt ids must lie in [0, {vocab}) (the embedding's rows); got {prompt.min()}..{prompt.max()}")
        pre = m.step(batch, prompt_len, 0, m.feeds(prompt, 0, {}))

    unread = pre.unread
    decode_reports: dict[int, dict] = {}
    steps = new_tokens - 1
    lengths = list(range(prompt_len, prompt_len + steps))  # the cache length each decode step reads
    outputs: dict[str, np.ndarray] = {}
    if timing_only:
        def cost(length: int) -> float:
            if length not in decode_reports:
                say(f"decode step at cache length {length}")
                decode_reports[length] = m.step(batch, 1, length, None).report
            return decode_reports[length]["total_seconds"]

        if steps and every_step:
            tpot = {length: cost(length) for length in lengths}
        elif steps:
            cost(lengths[0])  # compiles a decode step: the attention shapes tiling_key needs
            tpot, _ = affine_fill(lengths[0], lengths[-1], cost, regions(lengths[0], lengths[-1], m.tiling_key),
                                  CYCLE_TOL / pre.report["clock_hz"])
        else:
            tpot = {}
    else:
        tokens = [pre.logits[:, -1].argmax(-1)]
        last, cache = pre.logits[:, -1], pre.cache
        tpot = {}
        for length in lengths:
            say(f"decode step {length - prompt_len + 1}/{steps} at cache length {length}")
            r = m.step(batch, 1, length, m.feeds(tokens[-1][:, None], length, cache))
            decode_reports[length] = r.report
            tpot[length] = r.report["total_seconds"]
            last, cache = r.logits[:, -1], r.cache
            tokens.append(last.argmax(-1))
        outputs = {"generated_ids": np.stack(tokens, 1).astype(np.int64), "final_logits": last.astype(np.float32)}

    report = _report(m, pre.report, unread, decode_reports, [tpot[x] for x in lengths], lengths, batch, prompt_len, new_tokens,
                     timing_only, dtype, seed if prompt is None or timing_only else None)
    return Generation(outputs, report)


def decode_step(model: str | Path, batch: int, cache_len: int, target: str = "ascend910b2", dtype: str = "fp32",
                shape_only: bool = True, in_place: bool = True, tp: int = 1, topology: str | None = None,
                kv_block_size: int = 0) -> dict:
    """One timing-only decode step (one new token per sequence after `cache_len` cached ones):
    `tpot_s` simulated, `roofline_s` ((weights + KV read + new rows written) / HBM bandwidth),
    `weights_bytes`, `kv_bytes` (the least the step moves for its cache), `hbm_bytes` (what the
    simulation moved: GM reads missing L2 + GM writes), `bound` (resource, share) and the time of
    each kernel kind (`kinds`: name -> seconds). With `tp` > 1 (see `generate`) the bytes and
    the roofline are one device's, the kinds rank 0's. `kv_block_size` > 0: the cache paged in
    blocks of that many positions (prompt `cache_len`, pools of the blocks the step needs).

    Raises:
        AscendirError: as `generate` (e.g. a cache larger than the chip's HBM)."""
    from ascendir.interpreter.report.headline import by_kind

    m = _Model(Path(model), target, dtype, shape_only, in_place, tp=tp, topology=topology, kv_block_size=kv_block_size,
               capacity=cache_len + 1, prompt_len=cache_len)
    step = m.step(batch, 1, cache_len, None)
    r = step.report
    itemsize = _itemsizes(m.sig, dtype)
    kv = (_kv_bytes(m.sig, batch, cache_len, itemsize) + _kv_bytes(m.sig, batch, 1, itemsize)) // _kv_parts(m.sig, tp)
    weights = r["gm_footprint"]["weights"] - step.unread // tp
    phase = _phase(r)
    return {"tpot_s": r["total_seconds"], "roofline_s": (weights + kv) / r["ceilings"]["hbm_Bps"], "weights_bytes": weights,
            "kv_bytes": kv, "hbm_bytes": phase["hbm_bytes"], "bound": [(b["resource"], b["share"]) for b in phase["bound"]],
            "kinds": {k: c / r["clock_hz"] for k, _, c in by_kind(r)}}


def _report(m: _Model, pre: dict, unread: int, decodes: dict[int, dict], tpot: list[float], lengths: list[int], batch: int,
            prompt_len: int, new_tokens: int, timing_only: bool, dtype: str, seed: int | None) -> dict:
    sig, hw = m.sig, m.hw
    hbm_bps = pre["ceilings"]["hbm_Bps"]
    itemsize = _itemsizes(sig, dtype)
    parts = _kv_parts(sig, m.tp)  # per device with tp: its slices (vocab-parallel embedding tables too)
    weights = pre["gm_footprint"]["weights"] - unread // m.tp  # what a decode step reads at least
    kv_row = _kv_bytes(sig, batch, 1, itemsize)  # one position of every cache tensor, whole batch
    kv_step = [(_kv_bytes(sig, batch, length, itemsize) + kv_row) // parts for length in lengths]  # read the cache, write the new rows
    roofline = [(weights + kv) / hbm_bps for kv in kv_step]
    ttft = pre["total_seconds"]
    total = ttft + sum(tpot)
    mean = sum(tpot) / len(tpot) if tpot else None
    last = decodes[max(decodes)] if decodes else None
    sim_bytes = [_phase(decodes[x])["hbm_bytes"] / batch for x in sorted(decodes)]
    return {
        "schema_version": 1,
        "kind": "generate",
        "model": {"path": str(m.path)},
        "target": hw.name,
        "clock_hz": pre["clock_hz"],
        "dtype": dtype,
        "timing_only": timing_only,
        "seed": seed,
        "tp": m.tp,
        "topology": m.topology.name if m.topology is not None else None,
        "batch": batch,
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "tpot_cache_len": lengths,
        "tpot_mean_s": mean,
        "tokens_per_s": batch * new_tokens / total if total else None,
        "decode_tokens_per_s": batch / mean if mean else None,
        "roofline_tpot_s": roofline,
        "roofline_tpot_mean_s": sum(roofline) / len(roofline) if roofline else None,
        "hbm_bytes_per_token": {
            "weights": weights / batch,
            "kv": (sum(kv_step) / len(kv_step) / batch) if kv_step else None,
            "simulated": (sum(sim_bytes) / len(sim_bytes)) if sim_bytes else None,
        },
        "kv_cache": {
            "layers": len(sig.cache) // 2,
            "tensors": len(sig.cache),
            "bytes_per_token": kv_row // batch,
            "bytes_final": _kv_bytes(sig, batch, prompt_len + new_tokens - 1, itemsize),
            "bytes_final_per_device": _kv_bytes(sig, batch, prompt_len + new_tokens - 1, itemsize) // parts,
            **_kv_layout(m, batch, prompt_len + new_tokens - 1, itemsize),
        },
        "phases": {"prefill": _phase(pre), "decode": _phase(last) if last else None},
        "steps": {
            "simulated_cache_len": sorted(decodes),
            "interpolated": len(lengths) - len([x for x in lengths if x in decodes]),
            "method": "every step" if len(decodes) == len(lengths) else ("affine where checked: pieces of equal decode-attention tiling and KV blocks; in each, the "
                                                                           f"ends and their slopes on one line within {CYCLE_TOL} cycle; other jumps located by bisection"),
        },
    }


SCHEMA_PATH = Path(__file__).with_name("generate.schema.json")


def schema_problem(report: dict) -> str | None:
    """The first way `report` breaks generate.schema.json (JSON Schema 2020-12), or None."""
    import json

    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).iter_errors(report), key=lambda e: list(e.path))
    if not errors:
        return None
    e = errors[0]
    where = ".".join(str(p) for p in e.path) or "(top)"
    return f"{where}: {e.message}"


def plot_tpot(report: dict, directory: Path) -> list[Path]:
    """tpot.png / tpot.svg in `directory`: simulated and roofline TPOT (ms) over the generated
    length (the cache length each decode step reads), the TTFT in the title.

    Raises:
        AscendirError: matplotlib missing (api/plots.require_matplotlib)."""
    from ascendir.api.plots import require_matplotlib

    plt = require_matplotlib()
    directory.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    x = report["tpot_cache_len"]
    ax.plot(x, [t * 1e3 for t in report["tpot_s"]], label="simulated TPOT")
    ax.plot(x, [t * 1e3 for t in report["roofline_tpot_s"]], "--", label="HBM roofline (bytes / bandwidth)")
    ax.set_xlabel("cache length (tokens)")
    ax.set_ylabel("time per output token (ms)")
    ax.set_title(f"{Path(report['model']['path']).parent.name or report['model']['path']} on {report['target']}, batch {report['batch']}: "
                 f"TTFT {report['ttft_s'] * 1e3:.3f} ms", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        p = directory / f"tpot.{ext}"
        fig.savefig(p)
        paths.append(p)
    plt.close(fig)
    return paths
