"""shard-tensor-parallel: partition an nn module Megatron-style over `tp` devices (SPMD).

    shard-tensor-parallel{tp=4 sequence-parallel=true}
    module, stores = shard_module(module, weights, tp=4, sequence_parallel=True)

The result is one module every rank runs (the types are one rank's) and one WeightStore per rank
holding that rank's slices under the unsharded weight names; the ranks meet at the nn collectives
(dialects/nn/collectives.py) over `#ascend.device_group<[0, .., tp-1]>`.

How a module is split (Megatron-LM, Shoeybi et al. 2019, §3; sequence parallelism: Korthikanti
et al. 2022, §4.2.2). Every value gets a layout: replicated (R: every rank holds all of it),
split (S: rank r holds chunk r of one dim) or partial (P: the value is the sum of the ranks'
values). Layouts are propagated through the ops in program order, and a collective is placed
where a consumer needs another layout than its operand has:

* a matmul by a weight whose activation is replicated is column-parallel (the weight's output
  dim split: QKV, gate, up, lm_head), one whose activation is split on the contracted dim is
  row-parallel (the weight's input dim split: o_proj, down), giving a partial sum;
* a partial sum is all-reduced (`nn.all_reduce`) before the first op that is not linear in it
  (the residual add, a norm, an activation); with sequence parallelism it is reduce-scattered
  along the token dim (dim -2) instead (`nn.reduce_scatter`), norms and residuals then run on
  the token shard, and the shard is all-gathered (`nn.all_gather`) before the next
  column-parallel matmul. Partial sums add into one partial sum (BERT's word + token-type
  embeddings: one all_reduce); once summed, every later reader reads the summed value;
* a weight-only quantized matmul (nn.weight_quant_matmul, W8A16 / W4A16 antiquant) is split the
  same way, its per-group scales and offsets with its weight: by columns, or by rows when each
  rank's rows are whole groups;
* a matmul whose output dim does not split over tp (ViT's 10-class head at tp=4), or whose
  split a later op cannot use (a softmax / top-k over it: the MoE router), is replicated;
* a stack of expert matrices gathered by the router's choices (Mixtral's gate_up / down) splits
  each expert's intermediate dim: column- then row-parallel, one all_reduce after the combine;
* a bias added to a partial sum is held by rank 0 only (zeros elsewhere), so the region that
  adds it stays one region (vLLM's RowParallelLinear does the same);
* attention runs on the rank's heads; with grouped-query attention and tp > KV heads each rank
  keeps the KV head its query heads read (the K/V projections are replicated per KV head; one
  KV head, as Mistral's or MQA's: the K/V projections are replicated whole on every rank);
* an embedding table is vocab-parallel: rank r holds rows [r V/tp, (r+1) V/tp), looks up the ids
  in its range (masked gather: other ids read row 0 and are zeroed) and the partial sums are
  all-reduced (or reduce-scattered); a table under `SMALL_TABLE_BYTES` whose rows do not divide
  (BERT's token types) stays replicated;
* a fused packed projection (GPT-2's c_attn: q|k|v in one matmul) splits each part: the weight's
  columns are dealt per part ("blocks"), found when the slices that separate the parts are met;
* a function result is replicated (the vocab-parallel logits are all-gathered along the vocab).

Fused regions (-O1/-O2) are sharded through when their body needs no collective (flash
attention on the rank's heads, ffn column/row, norm_matmul column, elementwise); a region whose
body would need one (matmul_epilogue adding a residual to a row-parallel output; norm_matmul
under sequence parallelism, where the all_gather sits between the norm and the matmul) is
dissolved into its ops, which are sharded at top level. The `ascend.tiling` of every matmul and
attention is dropped (its tiles were chosen for the unsharded shapes); `shard_module` runs
choose-tiling again when given a target.

A rank-dependent value in an SPMD module comes from the rank's WeightStore: weights named
`tp.*` hold the rank's vocabulary start and the indices of its chunk (a replicated activation
cut to the rank's chunk is an `nn.gather` of those indices).

A split is chosen where it starts (a matmul) and revised when a later op contradicts it (a
reshape into fewer heads than ranks: KV heads held by several ranks; a slice separating q|k|v:
the packed columns dealt per part; a softmax over the split dim: replicated); the analysis then
rolls back to the revised op and resumes there (the layouts are journaled), so a module is
analysed in about one pass.

KV heads fewer than ranks are held by tp / kv_heads ranks each; where they are returned
(present keys / values) outside a KV cache kept in place, they are all-gathered and one copy of
each head kept.

A KV cache kept in place (nn.cache_append of an @main argument, ascendir generate) stays with
its heads: the argument, the append and the present it returns are split along the KV heads
(dim 1) as the attention reads them (each rank its KV heads, or the one it shares with tp /
kv_heads - 1 other ranks when there are fewer heads than ranks), so no rank holds or gathers
the others' cache. So does a result @main marks `nn.kv_cache` (KV_CACHE_ATTR in its result
attributes: generate's presents, e.g. a prefill's new K / V, returned without a cache argument):
it is returned with the rank's KV heads, never gathered. Such arguments and results have the
rank's types; the caller feeds rank r its heads (`rank_slice` of the argument's layout) and
keeps the ones it returns.

Errors (AscendirError, one line naming the op): heads, KV heads or tokens (sequence parallelism)
that do not split over `tp` (KV heads an op other than the cache's computes on), a vocabulary (a table of `SMALL_TABLE_BYTES` or more) that does not
split, an already sharded module.

Limits: function arguments (but the KV caches above) are replicated inputs (with sequence parallelism the first
reduce-scatter starts the token shard; Mixtral's MoE block, whose input goes straight to the
experts, has nothing to scatter). Two uses of one region argument in two layouts (a weight
shared by a norm and a projection bias, as in the corpus ViT whose zero biases are one
initializer) dissolve the region.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, FunctionType, IntegerAttr, ModuleOp, StringAttr, TensorType, i64
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.dialects.ascend.attrs import DeviceGroupAttr
from ascendir.dialects.nn.collectives import AllGatherOp, AllReduceOp, CollectiveOp, ReduceScatterOp
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.patterns import inline_region
from ascendir.session import Session, session_of
from ascendir.weights import WeightStore

TILING_ATTR = "ascend.tiling"
KV_CACHE_ATTR = "nn.kv_cache"
"""A result attribute of @main: this result is a KV cache [batch, kv_heads, positions, head_dim]
the caller keeps per rank, so it is returned with the rank's KV heads (module docstring)."""
SMALL_TABLE_BYTES = 1 << 20
"""An embedding table smaller than this whose rows do not split over tp stays replicated
(replicating it costs less than the collective; BERT's 2-row token-type table)."""

# ----------------------------------------------------------------------------------------------
# layouts
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Where one rank's part of a value lies.

    kind "R": replicated. "P": partial (the value is the sum over ranks). "S": split along `dim`:
    the dim is `blocks` equal blocks, each cut into `parts` equal chunks, and rank r holds chunk
    r * parts // tp of every block (parts = tp: one chunk each; parts < tp: a chunk is held by
    tp / parts ranks, as replicated KV heads). One rank's size along `dim` is size / parts.
    `origin` (not compared) is the op that chose the split, which a later conflict can revise.
    """

    kind: str
    dim: int = 0
    blocks: int = 1
    parts: int = 0
    origin: Operation | None = field(default=None, compare=False, hash=False)

    def tag(self) -> str:
        if self.kind != "S":
            return self.kind.lower()
        return f"s{self.dim}" + (f"b{self.blocks}" if self.blocks > 1 else "") + (f"p{self.parts}" if self.parts else "")


R, P = Layout("R"), Layout("P")


def split(dim: int, tp: int, blocks: int = 1, parts: int = 0, origin: Operation | None = None) -> Layout:
    return Layout("S", dim, blocks, 0 if parts in (0, tp) else parts, origin)


def _parts(lay: Layout, tp: int) -> int:
    return lay.parts or tp


def refines(cur: Layout, want: Layout, tp: int) -> bool:
    """Whether every rank's chunk in `want` lies inside its chunk in `cur` (a local cut: KV heads
    held in fewer parts than ranks, read by one query head each)."""
    return (
        cur.kind == want.kind == "S" and cur.dim == want.dim and cur.blocks == want.blocks
        and _parts(want, tp) % _parts(cur, tp) == 0 and cur != want
    )


def refine_indices(size: int, cur: Layout, want: Layout, tp: int, rank: int) -> np.ndarray:
    """Indices, within rank `rank`'s chunk of `cur` (of a dim of `size`), of its chunk of `want`."""
    block = size // cur.blocks
    have, need = block // _parts(cur, tp), block // _parts(want, tp)
    offset = (rank * _parts(want, tp) // tp) * need - (rank * _parts(cur, tp) // tp) * have
    return np.concatenate([np.arange(b * have + offset, b * have + offset + need) for b in range(cur.blocks)])


def chunk_indices(size: int, lay: Layout, tp: int, rank: int) -> np.ndarray:
    """Indices along lay.dim (of `size`) that `rank` holds."""
    parts = _parts(lay, tp)
    block = size // lay.blocks
    chunk = block // parts
    c = rank * parts // tp
    return np.concatenate([np.arange(b * block + c * chunk, b * block + (c + 1) * chunk) for b in range(lay.blocks)])


def rank_slice(array: np.ndarray, lay: Layout, tp: int, rank: int) -> np.ndarray:
    """Rank `rank`'s part of a replicated `array` in layout `lay` (a view when the chunk is one
    contiguous range; P: rank 0 holds the array, the others zeros)."""
    if lay.kind == "R":
        return array
    if lay.kind == "P":
        return array if rank == 0 else np.zeros_like(array)
    parts = _parts(lay, tp)
    if lay.blocks == 1:
        chunk = array.shape[lay.dim] // parts
        c = rank * parts // tp
        index = [slice(None)] * array.ndim
        index[lay.dim] = slice(c * chunk, (c + 1) * chunk)
        return array[tuple(index)]
    return np.take(array, chunk_indices(array.shape[lay.dim], lay, tp, rank), axis=lay.dim)


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def local_type(t: TensorType, lay: Layout, tp: int) -> TensorType:
    if lay.kind != "S":
        return t
    shape = list(t.get_shape())
    shape[lay.dim] //= _parts(lay, tp)
    return TensorType(t.element_type, shape)


def _node(op: Operation) -> str:
    name = op.attributes.get("onnx.node")
    return f"{op.name} '{name.data}'" if isinstance(name, StringAttr) else op.name


_MISSING = object()


class _Journaled(dict):
    """A dict whose writes go to a shared log (key, previous value), so the analysis can resume
    from any op after a revision instead of starting over (linear, not quadratic, in layers)."""

    def __init__(self, log: list):
        super().__init__()
        self._log = log

    def __setitem__(self, key, value) -> None:
        self._log.append((self, key, self.get(key, _MISSING)))
        super().__setitem__(key, value)


class _Retry(Exception):
    """Revise the split chosen at `origin` (hint) and analyse again."""

    def __init__(self, origin: Operation, hint: tuple):
        self.origin, self.hint = origin, hint


class _Dissolve(Exception):
    """The body of `region` needs a collective: inline it and analyse again."""

    def __init__(self, region: nn.FusedOp):
        self.region = region


_LINEAR_UNARY = (nn.NegOp, nn.IdentityOp)
_ELEMENTWISE = (nn.UnaryOp, nn.BinaryOp, nn.WhereOp, nn.CastOp)


# ----------------------------------------------------------------------------------------------
# analysis: a layout per value, a conversion per operand that needs one
# ----------------------------------------------------------------------------------------------
class _Analysis:
    def __init__(self, tp: int, sp: bool, hints: dict[Operation, dict]):
        self.tp, self.sp, self.hints = tp, sp, hints
        self.log: list[tuple[dict, object, object]] = []  # every write, so a revision can roll back
        self.lay: dict[SSAValue, Layout] = _Journaled(self.log)
        self.edge: dict[tuple[Operation, int], Layout] = _Journaled(self.log)  # operand -> the layout its consumer gets
        self.late: dict[SSAValue, tuple] = _Journaled(self.log)  # values whose split a consumer may still choose
        self.vocab: dict[Operation, bool] = _Journaled(self.log)  # vocab-parallel gathers
        self.body: nn.FusedOp | None = None
        self.notes: dict[Operation, str] = _Journaled(self.log)
        self.summed: dict[SSAValue, Layout] = _Journaled(self.log)  # partial values summed so far, and into what
        self.kv_results: set[int] = set()  # @main's results marked KV_CACHE_ATTR

    def rollback(self, length: int) -> None:
        """Undo the writes after the first `length` ones."""
        while len(self.log) > length:
            d, key, old = self.log.pop()
            if old is _MISSING:
                dict.pop(d, key)
            else:
                dict.__setitem__(d, key, old)

    # -- queries ------------------------------------------------------------------------------
    def of(self, op: Operation, i: int) -> Layout:
        return self.edge.get((op, i), self.lay.get(op.operands[i], R))

    def is_leaf_static(self, v: SSAValue) -> bool:
        return isinstance(v, OpResult) and isinstance(v.op, (nn.WeightOp, nn.ConstantOp))

    def weight_like(self, v: SSAValue) -> bool:
        return self.is_leaf_static(v) or (v in self.late and v not in self.lay)

    # -- choosing a layout for an operand -------------------------------------------------------
    def demand(self, op: Operation, i: int, want: Layout) -> bool:
        """Give operand i of op the layout `want` by slicing weights (no collective)."""
        v = op.operands[i]
        if self.is_leaf_static(v):
            if want.kind == "P" and not _is_float(v.type.element_type):
                return False
            self.edge[(op, i)] = want
            return True
        if v in self.late and v not in self.lay:
            src = self.late[v]
            if src[0] == "arg":
                fused, j = src[1], src[2]
                if not self.demand(fused, j, want):
                    return False
            elif want == R:
                pass
            else:  # ("gather", gather op): the table's dims after the gathered axis
                gather = src[1]
                if want.kind != "S":
                    return False
                nidx = len(_shape(gather.indices))
                axis = gather.axis.value.data
                if want.dim < axis + nidx:
                    return False
                data_dim = want.dim - nidx + 1
                if not self.demand(gather, 0, Layout("S", data_dim, want.blocks, want.parts, want.origin)):
                    return False
            self.lay[v] = want
            return True
        return False

    def pin(self, op: Operation) -> None:
        """Operands of `op` still undecided (late weights) are replicated from now on."""
        for i, v in enumerate(op.operands):
            if v in self.late and v not in self.lay:
                self.demand(op, i, R)

    def coerce(self, op: Operation, i: int, want: Layout) -> None:
        """Give operand i of op the layout `want`, by a weight slice or else a collective."""
        cur = self.of(op, i)
        if cur == want and not (op.operands[i] in self.late and op.operands[i] not in self.lay):
            return
        if self.demand(op, i, want):
            return
        v = op.operands[i]
        self._check_conversion(op, v, cur, want)
        if self.body is not None:
            raise _Dissolve(self.body)
        self.edge[(op, i)] = want
        if cur.kind == "P" and v not in self.summed:
            self.summed[v] = want

    def _check_conversion(self, op: Operation, v: SSAValue, cur: Layout, want: Layout) -> None:
        tp = self.tp
        if refines(cur, want, tp):
            return
        if want.kind == "P":
            raise AscendirError(f"shard-tensor-parallel: {_node(op)}: internal: no conversion from {cur.tag()} to a partial sum")
        # only heads fewer than ranks are held in fewer parts; stored into the KV cache or returned
        # (the present keys / values) they are gathered, one copy of each head, but no op
        # computes on them so
        if cur.kind == "S" and cur.parts and (cur.blocks != 1 or not isinstance(op, (func.ReturnOp, nn.CacheAppendOp))):
            source = f" of {_node(cur.origin)}" if cur.origin is not None else ""
            raise AscendirError(f"shard-tensor-parallel: {_node(op)}: the {cur.parts} heads{source} do not split over {tp} devices")
        if cur.kind == "S" and cur.blocks != 1:
            raise AscendirError(
                f"shard-tensor-parallel: {_node(op)}: an operand of {cur.blocks} packed parts (q|k|v) along dim {cur.dim} "
                "cannot be gathered"
            )
        if want.kind == "S":
            size = _shape(v)[want.dim]
            if size % (want.blocks * _parts(want, tp)):
                raise AscendirError(f"shard-tensor-parallel: {_node(op)}: dim {want.dim} ({size}) does not split over {tp} devices")

    def materialize(self, op: Operation, i: int) -> Layout:
        """A partial operand summed across ranks: replicated, or on the token shard (SP)."""
        shape = _shape(op.operands[i])
        if self.sp and len(shape) >= 2 and shape[-2] > 1:
            d = len(shape) - 2
            if shape[d] % self.tp:
                raise AscendirError(
                    f"shard-tensor-parallel: {_node(op)}: sequence parallelism: {shape[d]} tokens (dim {d} of "
                    f"{list(shape)}) do not split over {self.tp} devices"
                )
            want = split(d, self.tp)
        else:
            want = R
        self.coerce(op, i, want)
        return want

    def unpartial(self, op: Operation, idx=None) -> None:
        for i in idx if idx is not None else range(len(op.operands)):
            if self.of(op, i).kind == "P":
                self.materialize(op, i)

    # -- walking ------------------------------------------------------------------------------
    def run_block(self, block: Block) -> None:
        for op in block.ops:
            self.visit(op)

    def visit(self, op: Operation) -> None:
        tp = self.tp
        if isinstance(op, (nn.WeightOp, nn.ConstantOp)):
            self.lay[op.result] = R
            return
        if isinstance(op, func.ReturnOp):  # results are replicated (all-reduced / all-gathered)
            for i, v in enumerate(op.operands):
                if isinstance(v, OpResult) and isinstance(v.op, nn.CacheAppendOp) and self.lay.get(v, R).kind == "S":
                    continue  # a KV cache kept in place stays with its heads
                heads = _kv_layout(tp, _shape(v)[1]) if i in self.kv_results and len(_shape(v)) == 4 else None
                self.coerce(op, i, heads or R)  # a marked KV cache: the rank's heads (a slice, no collective)
            return
        if isinstance(op, nn.YieldOp):
            return
        if self.body is None:  # a partial sum already summed is read summed (no second collective)
            for i, v in enumerate(op.operands):
                if v in self.summed and self.of(op, i).kind == "P":
                    self.coerce(op, i, self.summed[v])
        if isinstance(op, nn.FusedOp):
            return self.visit_fused(op)
        handler = _RULES.get(type(op))
        if handler is None:
            for base, fn in _BASE_RULES:
                if isinstance(op, base):
                    handler = fn
                    break
        if handler is None:
            handler = _replicated
        handler(self, op)
        self.pin(op)

    def visit_fused(self, op: nn.FusedOp) -> None:
        if self.body is None and any(self.of(op, i).kind == "P" for i in range(len(op.operands))):
            mark = len(self.log)
            try:  # a body linear in its partial operands keeps them partial (BERT's embedding sum)
                return self._visit_body(op)
            except _Dissolve as e:
                if e.region is not op:
                    raise
                self.rollback(mark)
        self.unpartial(op)  # else they are summed before it: a region holds no collective
        self._visit_body(op)

    def _visit_body(self, op: nn.FusedOp) -> None:
        block = op.body.block
        for i, arg in enumerate(block.args):
            v = op.operands[i]
            if self.weight_like(v):
                self.late[arg] = ("arg", op, i)
            else:
                self.lay[arg] = self.of(op, i)
        outer, self.body = self.body, op
        try:
            self.run_block(block)
        finally:
            self.body = outer
        for j, arg in enumerate(block.args):  # weights the body left undecided are replicated
            if arg in self.late and arg not in self.lay:
                self.demand(op, j, R)
                self.lay[arg] = R
        term = block.last_op
        for r, v in zip(op.results, term.operands):
            self.lay[r] = self.lay.get(v, R)

    def set_results(self, op: Operation, lay: Layout) -> None:
        for r in op.results:
            self.lay[r] = lay

    def origin_hint(self, lay: Layout, hint: tuple) -> None:
        """Ask the op that chose `lay` to choose otherwise (raises _Retry), when it can."""
        origin = lay.origin
        if origin is None:
            return
        current = self.hints.get(origin, {})
        key, value = hint
        if current.get(key) == value or (key == "replicate" and current.get("replicate")):
            return
        raise _Retry(origin, hint)


def _is_float(elem: Attribute) -> bool:
    dtype = np.dtype(to_numpy_dtype(elem))
    return dtype.kind == "f" or dtype.name == "bfloat16"


# ----------------------------------------------------------------------------------------------
# rules per op family
# ----------------------------------------------------------------------------------------------
def _replicated(a: _Analysis, op: Operation) -> None:
    for i in range(len(op.operands)):
        if a.of(op, i).kind == "P":
            a.materialize(op, i)
        if a.of(op, i) != R:
            a.coerce(op, i, R)
    a.set_results(op, R)


def _broadcast_dim(op: Operation, i: int, out_dim: int) -> int | None:
    """The dim of operand i that maps to result dim out_dim (None: the operand lacks it or
    broadcasts it from size 1)."""
    shape, out = _shape(op.operands[i]), _shape(op.results[0])
    d = out_dim - (len(out) - len(shape))
    if d < 0 or shape[d] == 1 and out[out_dim] != 1:
        return None
    return d


def _elementwise(a: _Analysis, op: Operation) -> None:
    n = len(op.operands)
    lays = [a.of(op, i) for i in range(n)]
    out_rank = len(_shape(op.results[0]))
    if any(lay.kind == "P" for lay in lays):
        linear = False
        if isinstance(op, (nn.AddOp, nn.SubOp)):
            # a bias joins the partial sum on rank 0, and two partial sums add into one (BERT's
            # word + token-type embeddings: one all_reduce); a residual stream is read summed
            # (see visit), so the row-parallel output is summed before the residual add
            others = [i for i in range(n) if lays[i].kind != "P"]
            linear = all(a.weight_like(op.operands[i]) and a.demand(op, i, P) for i in others)
        elif isinstance(op, nn.MulOp):
            linear = sum(lay.kind == "P" for lay in lays) == 1 and all(lay.kind == "R" for lay in lays if lay.kind != "P")
        elif isinstance(op, nn.DivOp):
            linear = lays[0].kind == "P" and lays[1].kind == "R"
        elif isinstance(op, _LINEAR_UNARY):
            linear = True
        if linear:
            a.set_results(op, P)
            return
        a.unpartial(op)
        lays = [a.of(op, i) for i in range(n)]
    # the result is split like its first split operand (mapped to result dims)
    out: Layout = R
    for i, lay in enumerate(lays):
        if lay.kind == "S":
            out = Layout("S", lay.dim + out_rank - len(_shape(op.operands[i])), lay.blocks, lay.parts, lay.origin)
            break
    if out.kind == "S":
        for i in range(n):
            d = _broadcast_dim(op, i, out.dim)
            want = R if d is None else Layout("S", d, out.blocks, out.parts, out.origin)
            if a.of(op, i) != want:
                a.coerce(op, i, want)
    a.set_results(op, out)


def _transpose(a: _Analysis, op: nn.TransposeOp) -> None:
    lay = a.of(op, 0)
    if lay.kind == "S":
        perm = list(op.perm.get_values())
        lay = Layout("S", perm.index(lay.dim), lay.blocks, lay.parts, lay.origin)
    a.set_results(op, lay)


def _reshape(a: _Analysis, op: nn.ReshapeOp) -> None:
    lay = a.of(op, 0)
    if lay.kind != "S":
        a.set_results(op, lay)
        return
    src, dst = _shape(op.input), _shape(op.result)
    pre, size = math.prod(src[: lay.dim]), src[lay.dim]
    unit = lay.blocks * _parts(lay, a.tp)
    candidates = [d for d in range(len(dst)) if math.prod(dst[:d]) == pre and dst[d] > 1]
    exact = [d for d in candidates if dst[d] == size]
    for d in exact or candidates:
        n = dst[d]
        if n >= size and n % size == 0:  # merged with inner dims: the split stays on the outer factor
            a.set_results(op, Layout("S", d, lay.blocks, lay.parts, lay.origin))
            return
        if n < size and size % n == 0:  # split into dims: the split goes to the outer one
            if n % unit == 0:
                a.set_results(op, Layout("S", d, lay.blocks, lay.parts, lay.origin))
                return
            # fewer outer rows (heads) than chunks: hold whole rows, shared by tp / n ranks (GQA)
            if lay.blocks == 1 and a.tp % n == 0 and n < _parts(lay, a.tp):
                a.origin_hint(lay, ("parts", n))
        break
    a.coerce(op, 0, R)
    a.set_results(op, R)


def _slice(a: _Analysis, op: nn.SliceOp) -> None:
    lay = a.of(op, 0)
    if lay.kind != "S":
        a.set_results(op, lay)
        return
    d = lay.dim
    full, size = _shape(op.input)[d], _shape(op.result)[d]
    start, step = op.starts.get_values()[d], op.steps.get_values()[d]
    if size == full and start == 0:
        a.set_results(op, lay)
        return
    block = full // lay.blocks
    if step == 1 and start % block == 0 and size % block == 0:
        a.set_results(op, Layout("S", d, size // block, lay.parts, lay.origin))
        return
    # a packed projection (q|k|v, gate|up): deal each part's columns over the ranks
    if step == 1 and lay.blocks == 1 and full % size == 0 and start % size == 0:
        a.origin_hint(lay, ("blocks", full // size))
    a.coerce(op, 0, R)
    a.set_results(op, R)


def _concat(a: _Analysis, op: nn.ConcatOp) -> None:
    axis = op.axis.value.data
    lays = [a.of(op, i) for i in range(len(op.operands))]
    if all(lay.kind == "P" for lay in lays):
        a.set_results(op, P)
        return
    a.unpartial(op)
    lays = [a.of(op, i) for i in range(len(op.operands))]
    first = next((lay for lay in lays if lay.kind == "S" and lay.dim != axis), None)
    want = first if first is not None else R
    for i in range(len(op.operands)):
        if a.of(op, i) != want:
            a.coerce(op, i, want)
    a.set_results(op, want)


def _expand(a: _Analysis, op: nn.ExpandOp) -> None:
    lay = a.of(op, 0)
    if lay.kind == "S":
        src, dst = _shape(op.input), _shape(op.result)
        d = lay.dim + len(dst) - len(src)
        if src[lay.dim] == dst[d]:
            a.set_results(op, Layout("S", d, lay.blocks, lay.parts, lay.origin))
            return
        a.coerce(op, 0, R)
        lay = R
    a.set_results(op, lay)


def _norm(a: _Analysis, op: Operation) -> None:
    a.unpartial(op)
    axis = op.axis.value.data % len(_shape(op.operands[0]))
    lay = a.of(op, 0)
    if lay.kind == "S" and lay.dim >= axis:
        a.coerce(op, 0, R)
        lay = R
    for i in range(1, len(op.operands)):
        if a.of(op, i) != R:
            a.coerce(op, i, R)
    a.set_results(op, lay)


def _softmax(a: _Analysis, op: nn.SoftmaxOp) -> None:
    a.unpartial(op)
    lay = a.of(op, 0)
    if lay.kind == "S" and lay.dim == op.axis.value.data % len(_shape(op.input)):
        a.origin_hint(lay, ("replicate", True))
        a.coerce(op, 0, R)
        lay = R
    a.set_results(op, lay)


def _reduce(a: _Analysis, op: nn.ReduceOp) -> None:
    rank = len(_shape(op.operands[0]))
    axes = sorted(x % rank for x in op.axes.get_values())
    keep = op.keepdims.value.data != 0
    lay = a.of(op, 0)
    if lay.kind == "P":
        if isinstance(op, nn.ReduceSumOp):
            a.set_results(op, P)
            return
        lay = a.materialize(op, 0)
    if lay.kind == "S":
        if lay.dim in axes:
            if isinstance(op, nn.ReduceSumOp) and lay.blocks == 1 and not lay.parts:
                a.set_results(op, P)
                return
            a.coerce(op, 0, R)
            lay = R
        else:
            d = lay.dim if keep else lay.dim - sum(x < lay.dim for x in axes)
            lay = Layout("S", d, lay.blocks, lay.parts, lay.origin)
    a.set_results(op, lay)


def _topk(a: _Analysis, op: nn.TopKOp) -> None:
    a.unpartial(op)
    lay = a.of(op, 0)
    if lay.kind == "S" and lay.dim == op.axis.value.data % len(_shape(op.operands[0])):
        a.origin_hint(lay, ("replicate", True))
        a.coerce(op, 0, R)
        lay = R
    a.set_results(op, lay)


def _gather(a: _Analysis, op: nn.GatherOp) -> None:
    data, idx = op.input, op.indices
    axis = op.axis.value.data % len(_shape(data))
    if a.of(op, 1).kind == "P":
        a.materialize(op, 1)
    if a.of(op, 1) != R:
        a.coerce(op, 1, R)
    if a.is_leaf_static(data) and axis == 0:
        shape = _shape(data)
        if len(shape) == 2:  # an embedding table: vocab-parallel
            vocab = shape[0]
            nbytes = math.prod(shape) * np.dtype(to_numpy_dtype(data.type.element_type)).itemsize
            if vocab % a.tp == 0 and _is_float(data.type.element_type):
                a.demand(op, 0, split(0, a.tp))
                a.vocab[op] = True
                a.set_results(op, P)
                return
            if nbytes >= SMALL_TABLE_BYTES:
                raise AscendirError(
                    f"shard-tensor-parallel: {_node(op)}: the vocabulary ({vocab} rows) does not split over {a.tp} devices"
                )
            a.set_results(op, R)
            return
        if len(list(op.result.uses)) == 1:  # a stack of expert matrices: its consumer chooses the split
            a.late[op.result] = ("gather", op)
            return
    lay = a.of(op, 0)
    if lay.kind == "P":
        a.set_results(op, P)
        return
    if lay.kind == "S":
        if lay.dim == axis:
            a.coerce(op, 0, R)
            lay = R
        else:
            nidx = len(_shape(idx))
            d = lay.dim if lay.dim < axis else lay.dim + nidx - 1
            lay = Layout("S", d, lay.blocks, lay.parts, lay.origin)
    a.set_results(op, lay)


def _matmul(a: _Analysis, op: nn.MatmulOp) -> None:
    x_rank, w_rank = len(_shape(op.lhs)), len(_shape(op.rhs))
    hint = a.hints.get(op, {})
    wl = [a.weight_like(op.lhs), a.weight_like(op.rhs)]
    if wl[0] == wl[1] or min(x_rank, w_rank) < 2:
        return _matmul_plain(a, op)
    wi = 1 if wl[1] else 0  # the weight operand
    xi = 1 - wi
    w_shape = _shape(op.operands[wi])
    out_rank = len(_shape(op.result))
    # X @ W: W's dim -1 is the output dim, -2 the contracted one; W @ X: W's -2 is the output
    # dim (result dim -2), -1 the contracted one.
    w_out, w_in = (len(w_shape) - 1, len(w_shape) - 2) if wi == 1 else (len(w_shape) - 2, len(w_shape) - 1)
    x_contract = len(_shape(op.operands[xi])) - 1 if wi == 1 else len(_shape(op.operands[xi])) - 2
    res_dim = out_rank - 1 if wi == 1 else out_rank - 2
    lx = a.of(op, xi)
    if hint.get("replicate"):
        if lx.kind == "S" and lx.dim == x_contract:
            a.coerce(op, xi, R)
            lx = R
        elif lx.kind == "S":
            lx = Layout("S", lx.dim + out_rank - len(_shape(op.operands[xi])), lx.blocks, lx.parts, lx.origin)
        a.set_results(op, lx)
        return
    if lx.kind == "S" and lx.dim == x_contract and lx.blocks == 1 and not lx.parts:
        if a.demand(op, wi, split(w_in, a.tp)):  # row-parallel
            a.set_results(op, P)
            return
    if lx.kind != "R":
        if lx.kind == "P":
            a.materialize(op, xi)
        if a.of(op, xi) != R:
            a.coerce(op, xi, R)
    blocks, parts = hint.get("blocks", 1), hint.get("parts", 0)
    n = w_shape[w_out]
    if n % (blocks * (parts or a.tp)):
        a.notes[op] = f"{_node(op)}: {n} output columns do not split over {a.tp} devices; replicated"
        a.set_results(op, R)
        return
    want = split(w_out, a.tp, blocks, parts)  # column-parallel
    if not a.demand(op, wi, want):
        a.coerce(op, wi, want)
    a.set_results(op, split(res_dim, a.tp, blocks, parts, origin=op))


def _weight_quant_matmul(a: _Analysis, op: nn.WeightQuantMatmulOp) -> None:
    """Antiquant (W8A16 / W4A16: x [..., K] @ dequantise(w [K, N], scale / offset [K / group, N]))
    split as `_matmul` splits x @ W: row-parallel when x arrives split along K and each rank's K
    rows are whole groups (w by rows, scale and offset by groups, or replicated when one group
    spans K: per-channel scales; a partial sum), else
    column-parallel (w, scale and offset by columns; x replicated). Replicated when a weight
    operand is an activation or N does not split."""
    tp, hint = a.tp, a.hints.get(op, {})
    quant = [i for i in range(1, len(op.operands))]  # weight, scale, offset: one row per group
    if not all(a.weight_like(op.operands[i]) for i in quant):
        return _replicated(a, op)
    x_rank = len(_shape(op.input))
    k, n = _shape(op.weight)
    group = op.group_size.value.data
    lx = a.of(op, 0)
    if hint.get("replicate"):
        if lx.kind != "R":
            a.unpartial(op, [0])
            if a.of(op, 0) != R:
                a.coerce(op, 0, R)
        a.pin(op)
        a.set_results(op, R)
        return
    # row-parallel: the rank's K rows of w, and of scale / offset its groups (one group over all
    # of K, per-channel scales: every rank's rows share it, replicated)
    per_group = [split(0, tp) if i == 1 or op.groups > 1 else R for i in quant]
    if lx.kind == "S" and lx.dim == x_rank - 1 and lx.blocks == 1 and not lx.parts and k % tp == 0 \
            and (op.groups == 1 or k % (tp * group) == 0):
        if all(a.demand(op, i, want) for i, want in zip(quant, per_group)):
            a.set_results(op, P)
            return
    a.unpartial(op, [0])
    if a.of(op, 0) != R:
        a.coerce(op, 0, R)
    blocks, parts = hint.get("blocks", 1), hint.get("parts", 0)
    if n % (blocks * (parts or tp)):
        a.notes[op] = f"{_node(op)}: {n} output columns do not split over {tp} devices; replicated"
        a.pin(op)
        a.set_results(op, R)
        return
    for i in quant:  # column-parallel
        want = split(1, tp, blocks, parts)
        if not a.demand(op, i, want):
            a.coerce(op, i, want)
    a.set_results(op, split(x_rank - 1, tp, blocks, parts, origin=op))


def _matmul_plain(a: _Analysis, op: nn.MatmulOp) -> None:
    """A product of two activations (or two weights): follows its operands' splits."""
    la, lb = a.of(op, 0), a.of(op, 1)
    ra, rb, ro = len(_shape(op.lhs)), len(_shape(op.rhs)), len(_shape(op.result))
    if min(ra, rb) >= 2:
        if la.kind == "P" and lb == R or lb.kind == "P" and la == R:
            a.set_results(op, P)
            return
        if la.kind == "S" and lb.kind == "S" and la.dim == ra - 1 and lb.dim == rb - 2 and la.blocks == lb.blocks == 1 \
                and not la.parts and not lb.parts:
            a.set_results(op, P)
            return
        if la.kind == "S" and la.dim < ra - 2 and lb.kind == "S" and lb.dim == la.dim + rb - ra:  # batch (heads)
            wa, wb = Layout("S", la.dim, lb.blocks, lb.parts), Layout("S", lb.dim, la.blocks, la.parts)
            if refines(lb, wb, a.tp):  # K / V heads held in fewer parts than Q's (GQA, tp > KV heads)
                a.coerce(op, 1, wb)
                lb = wb
            elif refines(la, wa, a.tp):
                a.coerce(op, 0, wa)
                la = Layout("S", la.dim, lb.blocks, lb.parts, la.origin)
            if la.blocks == lb.blocks and la.parts == lb.parts:
                a.set_results(op, Layout("S", la.dim + ro - ra, la.blocks, la.parts, la.origin))
                return
        if la.kind == "S" and la.dim == ra - 2 and lb == R:
            a.set_results(op, Layout("S", ro - 2, la.blocks, la.parts, la.origin))
            return
        if la == R and lb.kind == "S" and lb.dim == rb - 1:
            a.set_results(op, Layout("S", ro - 1, lb.blocks, lb.parts, lb.origin))
            return
    _replicated(a, op)


def _attention(a: _Analysis, op: nn.AttentionOp) -> None:
    tp = a.tp
    a.unpartial(op)
    hq, hkv = _shape(op.q)[1], _shape(op.k)[1]
    if hq % tp:
        raise AscendirError(f"shard-tensor-parallel: {_node(op)}: {hq} query heads do not split over {tp} devices")
    if hkv % tp == 0:
        kv = split(1, tp)
    elif tp % hkv == 0:
        kv = split(1, tp, parts=hkv)
    else:
        raise AscendirError(
            f"shard-tensor-parallel: {_node(op)}: {hkv} KV heads neither split over nor replicate evenly to {tp} devices"
        )
    want_q = split(1, tp)
    for i, want in ((0, want_q), (1, kv), (2, kv)):
        lay = a.of(op, i)
        if lay != want:
            _ask_whole_heads(a, lay, want)
            a.coerce(op, i, want)
    if len(op.operands) > 3:
        mshape = _shape(op.operands[3])
        mask_want = split(1, tp) if len(mshape) == 4 and mshape[1] == hq else R
        if a.of(op, 3) != mask_want:
            a.coerce(op, 3, mask_want)
    a.set_results(op, want_q)


def _ask_whole_heads(a: _Analysis, lay: Layout, want: Layout) -> None:
    """K / V split otherwise than the KV heads `want` (held by tp / parts ranks each): ask the
    projection that chose the split to hold whole heads (raises _Retry). One KV head over all
    ranks (Mistral's, MQA): the projection's output is not heads-major anywhere it could be
    split (its reshape to [.., 1, head_dim] keeps the split on head_dim, which RoPE's halves
    then deal as packed parts), so it is replicated: every rank computes the one KV head, as
    vLLM / MindIE replicate KV heads fewer than the TP ranks."""
    if lay.kind != "S" or lay.origin is None or not want.parts:
        return
    if want.parts == 1:
        a.origin_hint(lay, ("replicate", True))
    elif lay.dim == 1 and not lay.parts:
        a.origin_hint(lay, ("parts", want.parts))


def _kv_layout(tp: int, heads: int) -> Layout | None:
    """The split of `heads` KV heads over tp ranks the attention reads (`_attention`), None when
    they neither split nor replicate evenly."""
    if heads % tp == 0:
        return split(1, tp)
    if tp % heads == 0:
        return split(1, tp, parts=heads)
    return None


def _cache_append(a: _Analysis, op: nn.CacheAppendOp) -> None:
    """The cache keeps its layout (its KV heads, `_analyse`); the new rows are given it."""
    want = a.of(op, 0)
    if want.kind != "S":
        return _replicated(a, op)
    a.unpartial(op, [1])
    lay = a.of(op, 1)
    if lay != want:
        _ask_whole_heads(a, lay, want)
        a.coerce(op, 1, want)
    a.set_results(op, want)


_RULES: dict[type, Callable] = {
    nn.MatmulOp: _matmul, nn.TransposeOp: _transpose, nn.ReshapeOp: _reshape, nn.SliceOp: _slice,
    nn.ConcatOp: _concat, nn.ExpandOp: _expand, nn.LayerNormOp: _norm, nn.RmsNormOp: _norm,
    nn.SoftmaxOp: _softmax, nn.TopKOp: _topk, nn.GatherOp: _gather, nn.AttentionOp: _attention,
    nn.CacheAppendOp: _cache_append, nn.WeightQuantMatmulOp: _weight_quant_matmul,
}
_BASE_RULES: list[tuple[type, Callable]] = [(nn.ReduceOp, _reduce), (_ELEMENTWISE, _elementwise)]


# ----------------------------------------------------------------------------------------------
# rewriting: one rank's module
# ----------------------------------------------------------------------------------------------
class _Rewriter:
    def __init__(self, a: _Analysis, used_names: set[str]):
        self.a, self.tp = a, a.tp
        self.group = DeviceGroupAttr(list(range(a.tp)))
        self.entries: dict[str, Callable[[WeightStore, int], np.ndarray]] = {}
        self.used = used_names
        self.static_ops: dict[tuple[Operation, Layout], SSAValue] = {}
        self.names: dict[tuple[str, Layout], str] = {}
        self.conv_cache: dict[tuple[SSAValue, Layout], SSAValue] = {}
        self.collectives = 0

    # -- names and weights ----------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.used:
            name, n = f"{base}.{n}", n + 1
        self.used.add(name)
        return name

    def static_value(self, leaf: Operation, lay: Layout, ip: list) -> SSAValue:
        """The weight op holding `leaf` (nn.weight / nn.constant) in layout `lay`."""
        key = (leaf, lay)
        if key in self.static_ops:
            return self.static_ops[key]
        tp = self.tp
        if isinstance(leaf, nn.WeightOp):
            base = leaf.weight_name
            nkey = (base, lay)
            if nkey not in self.names:
                taken = any(b == base for b, _ in self.names)
                name = self.fresh(f"{base}.tp.{lay.tag()}") if taken else base
                self.names[nkey] = name
                self.entries[name] = lambda store, r, base=base, lay=lay: rank_slice(store[base], lay, tp, r)
            name = self.names[nkey]
        elif lay == R:
            c = leaf.clone()
            ip.append(c)
            self.static_ops[key] = c.result
            return c.result
        else:
            array = _constant_array(leaf)
            name = self.fresh(f"tp.const.{lay.tag()}")
            self.entries[name] = lambda store, r, array=array, lay=lay: rank_slice(array, lay, tp, r)
        w = nn.WeightOp(name, local_type(leaf.result.type, lay, tp))
        ip.append(w)
        self.static_ops[key] = w.result
        return w.result

    def rank_weight(self, base: str, make: Callable[[int], np.ndarray], ttype: TensorType, ip: list) -> SSAValue:
        name = self.fresh(base)
        self.entries[name] = lambda store, r, make=make: make(r)
        w = nn.WeightOp(name, ttype)
        ip.append(w)
        return w.result

    # -- conversions ----------------------------------------------------------------------------
    def convert(self, v: SSAValue, cur: Layout, want: Layout, full: TensorType, ip: list) -> SSAValue:
        """v (one rank's part in layout cur of a value of type `full`) in layout `want`."""
        key = (v, want)
        if key in self.conv_cache:
            return self.conv_cache[key]
        tp = self.tp
        if cur.kind == "R" and want.kind == "S" and _parts(want, tp) == 1:
            return v  # one part (a single KV head every rank holds): the rank's chunk is all of it
        if cur.kind == "P":
            if want.kind == "R":
                op = AllReduceOp(v, self.group)
            else:
                op = ReduceScatterOp(v, self.group, want.dim)
            ip.append(op)
            self.collectives += 1
            out = op.result
        elif cur.kind == "S" and want.kind == "R":
            op = AllGatherOp(v, self.group, cur.dim)
            ip.append(op)
            self.collectives += 1
            out = op.result
            if cur.parts:  # KV heads held by tp / parts ranks each: keep one copy of every chunk
                size = full.get_shape()[cur.dim]
                chunk = size // cur.parts
                keep = np.concatenate([np.arange(chunk) + (c * tp // cur.parts) * chunk for c in range(cur.parts)])
                idx = self.rank_weight(f"tp.index.d{cur.dim}.{size}.{cur.tag()}.gathered", lambda r, keep=keep: keep,
                                       TensorType(i64, [size]), ip)
                op = nn.GatherOp(out, idx, cur.dim)
                ip.append(op)
                out = op.result
        elif refines(cur, want, tp):
            size = full.get_shape()[want.dim]
            idx = self.rank_weight(
                f"tp.index.d{want.dim}.{size}.{cur.tag()}.{want.tag()}", lambda r: refine_indices(size, cur, want, tp, r),
                TensorType(i64, [size // _parts(want, tp)]), ip,
            )
            op = nn.GatherOp(v, idx, want.dim)
            ip.append(op)
            out = op.result
        elif cur.kind == "S" and want.kind == "S":
            r = self.convert(v, cur, R, full, ip)
            out = self.convert(r, R, want, full, ip)
        elif cur.kind == "R" and want.kind == "S":
            size = full.get_shape()[want.dim]
            n = size // _parts(want, tp)
            idx = self.rank_weight(
                f"tp.index.d{want.dim}.{size}.{want.tag()}", lambda r: chunk_indices(size, want, tp, r),
                TensorType(i64, [n]), ip,
            )
            op = nn.GatherOp(v, idx, want.dim)
            ip.append(op)
            out = op.result
        else:
            raise AscendirError(f"shard-tensor-parallel: internal: no conversion from {cur.tag()} to {want.tag()}")
        self.conv_cache[key] = out
        return out

    # -- ops ------------------------------------------------------------------------------------
    def operand(self, op: Operation, i: int, vm: dict, ip: list) -> SSAValue:
        a = self.a
        v = op.operands[i]
        want = a.edge.get((op, i))
        if a.is_leaf_static(v) and (v not in vm or want is not None):
            return self.static_value(v.op, want or R, ip)
        nv = vm[v]
        cur = a.lay.get(v, R)
        if want is None or want == cur:
            return nv
        return self.convert(nv, cur, want, v.type, ip)

    def rebuild(self, block: Block, new_block: Block, vm: dict) -> None:
        ip: list[Operation] = []
        for op in block.ops:
            if isinstance(op, (nn.WeightOp, nn.ConstantOp)):
                continue  # created at each use, in the layout that use needs
            operands = [self.operand(op, i, vm, ip) for i in range(len(op.operands))]
            new = self.clone(op, operands, vm, ip)
            if new is not None:
                ip.append(new)
                for r, nr in zip(op.results, new.results):
                    vm[r] = nr
            for o in ip:
                new_block.add_op(o)
            ip.clear()

    def clone(self, op: Operation, operands: list[SSAValue], vm: dict, ip: list) -> Operation | None:
        a, tp = self.a, self.tp
        if op in a.vocab:
            vm[op.result] = self.vocab_gather(op, operands, ip)
            return None
        result_types = [local_type(r.type, a.lay.get(r, R), tp) for r in op.results]
        props = dict(op.properties)
        attrs = {k: v for k, v in op.attributes.items() if k != TILING_ATTR}
        regions = []
        if isinstance(op, nn.FusedOp):
            old = op.body.block
            nb = Block(arg_types=[o.type for o in operands])
            self.rebuild(old, nb, dict(zip(old.args, nb.args)))  # isolated from above: its own values only
            regions = [Region(nb)]
        elif isinstance(op, nn.SliceOp):
            lay = a.lay.get(op.operands[0], R)
            if lay.kind == "S":
                starts = list(op.starts.get_values())
                d = lay.dim
                full = _shape(op.input)[d]
                block = full // lay.blocks
                starts[d] = starts[d] // block * (block // _parts(lay, tp))
                props["starts"] = DenseArrayBase.from_list(i64, starts)
        elif isinstance(op, nn.AttentionOp):
            props["num_heads"] = IntegerAttr(operands[0].type.get_shape()[1], i64)
            props["num_kv_heads"] = IntegerAttr(operands[1].type.get_shape()[1], i64)
        return type(op).create(
            operands=operands, result_types=result_types, properties=props, attributes=attrs, regions=regions,
            successors=[],
        )

    def vocab_gather(self, op: nn.GatherOp, operands: list[SSAValue], ip: list) -> SSAValue:
        """Rank r's rows [r V/tp, (r+1) V/tp) of the table: ids outside give zeros (a partial sum)."""
        tp = self.tp
        table, ids = operands
        vocab = _shape(op.input)[0]
        rows = vocab // tp
        it = ids.type.element_type
        idt = to_numpy_dtype(it)
        scalar = TensorType(it, [])
        start = self.rank_weight(f"tp.vocab_start.{vocab}", lambda r: np.asarray(r * rows, idt), scalar, ip)
        limit = self.rank_weight(f"tp.vocab_rows.{vocab}", lambda r: np.asarray(rows, idt), scalar, ip)
        zero = self.rank_weight("tp.zero.index", lambda r: np.asarray(0, idt), scalar, ip)
        ft = op.result.type.element_type
        fzero = self.rank_weight("tp.zero.value", lambda r: np.zeros((), to_numpy_dtype(ft)), TensorType(ft, []), ip)
        local = nn.SubOp(ids, start)
        lo = nn.GreaterEqualOp(local.result, zero)
        hi = nn.LessOp(local.result, limit)
        ok = nn.AndOp(lo.result, hi.result)
        safe = nn.WhereOp(ok.result, local.result, zero)
        rows_of = nn.GatherOp(table, safe.result, 0)
        ok_cols = nn.ReshapeOp(ok.result, [*_shape(ids), *([1] * (len(_shape(op.input)) - 1))])
        out = nn.WhereOp(ok_cols.result, rows_of.result, fzero)
        ip.extend([local, lo, hi, ok, safe, rows_of, ok_cols, out])
        return out.result


def _constant_array(op: nn.ConstantOp) -> np.ndarray:
    ttype = op.value.type
    dtype = to_numpy_dtype(ttype.element_type)
    if dtype == np.bool_:
        array = np.frombuffer(op.value.data.data, np.uint8) != 0
    else:
        array = np.frombuffer(op.value.data.data, dtype)
    shape = tuple(ttype.get_shape())
    if array.size == 1 and math.prod(shape) != 1:
        return np.broadcast_to(array.reshape(()), shape)
    return array.reshape(shape)


def _top(op: Operation, block: Block) -> Operation:
    """The op of `block` that holds `op` (itself, or the region around it)."""
    while op.parent_block() is not block:
        op = op.parent_op()
    return op


def _analyse(block: Block, tp: int, sp: bool) -> tuple[_Analysis, int]:
    """Layouts of every value of the function body `block`, revising choices and dissolving
    regions as conflicts are met: each revision rolls the analysis back to the op that made the
    choice and resumes there. Returns the analysis and the number of regions dissolved.

    Raises:
        AscendirError: an op that cannot be split; no consistent split (a revision loop).
    """
    hints: dict[Operation, dict] = {}
    a = _Analysis(tp, sp, hints)
    # a MoE block's moe_experts region (-O2: grouped MatMuls over whole experts) goes back to the
    # gathered-weight form it wraps, whose ffn region is split column / row like a dense FFN
    for region in [o for o in block.ops if isinstance(o, nn.FusedOp) and o.kind.data == "moe_experts"]:
        inline_region(region)
    for arg in block.args:
        a.lay[arg] = R
    res_attrs = getattr(block.parent_op(), "res_attrs", None)
    a.kv_results = {i for i, d in enumerate(res_attrs.data if res_attrs is not None else ()) if KV_CACHE_ATTR in d.data}
    for op in block.ops:  # a KV cache kept in place: split along its heads (the module docstring)
        if isinstance(op, nn.CacheAppendOp) and op.cache in block.args and op.axis.value.data != 1 and len(_shape(op.cache)) == 4:
            lay = _kv_layout(tp, _shape(op.cache)[1])
            if lay is not None:
                a.lay[op.cache] = lay
    start: dict[Operation, int] = {}  # op -> log length before it
    dissolved = revisions = 0
    # every revision dissolves a region or changes one op's split (replicate, blocks, parts)
    limit = 4 * sum(1 for _ in block.walk()) + 1
    op = block.first_op
    while op is not None:
        start[op] = len(a.log)
        try:
            a.visit(op)
        except _Retry as e:
            hints.setdefault(e.origin, {}).update([e.hint])
            op = _top(e.origin, block)
        except _Dissolve as e:
            op = _top(e.region, block)
            a.rollback(start[op])
            before = op.prev_op
            inline_region(e.region)
            dissolved += 1
            if op.parent is None:  # the region itself went: resume at its first op
                op = before.next_op if before is not None else block.first_op
        else:
            op = op.next_op
            continue
        a.rollback(start.get(op, len(a.log)))
        revisions += 1
        if revisions > limit:
            raise AscendirError(f"shard-tensor-parallel: no consistent split over {tp} devices found")
    return a, dissolved


def _main(module: ModuleOp) -> func.FuncOp:
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    raise AscendirError("shard-tensor-parallel: the module has no func.func @main")


def _weight_names(module: ModuleOp) -> set[str]:
    return {op.weight_name for op in module.walk() if isinstance(op, nn.WeightOp)}


@dataclass
class ShardPlan:
    """What sharding did: per-rank weight recipes, notes, and counts for the report."""

    tp: int
    entries: dict[str, Callable[[WeightStore, int], np.ndarray]]
    notes: list[str]
    collectives: int
    dissolved: int

    def rank_stores(self, weights: WeightStore) -> list[WeightStore]:
        """One WeightStore per rank: entry `name` of rank r is cut from `weights` when first read
        (a view of the unsharded array where the chunk is contiguous; unsplit weights are the
        same array objects), so no rank copies the whole model."""
        stores = []
        for r in range(self.tp):
            store = WeightStore()
            for name, make in self.entries.items():
                store.add(name, lambda make=make, r=r: make(weights, r))
            stores.append(store)
        return stores


def shard_tensor_parallel(module: ModuleOp, tp: int, sequence_parallel: bool = False) -> ShardPlan:
    """Rewrite `module` in place into one rank's SPMD module over `tp` devices.

    Args:
        module: an nn module (func @main; fused regions allowed: -O0/-O1/-O2 output).
        tp: the tensor-parallel degree (devices 0 .. tp-1 form the group).
        sequence_parallel: reduce-scatter / all-gather along the token dim (dim -2 of the
            activations) instead of all-reducing; norms and residuals run on the token shard.

    Returns:
        The ShardPlan: `rank_stores(weights)` gives each rank's WeightStore.

    Raises:
        AscendirError: tp < 1, or an op that cannot be split tp ways (one line naming it).
    """
    if tp < 1:
        raise AscendirError(f"shard-tensor-parallel: tp must be at least 1, got {tp}")
    main = _main(module)
    names = _weight_names(module)
    collective = next((op for op in module.walk() if isinstance(op, CollectiveOp)), None)
    if collective is not None:
        raise AscendirError(f"shard-tensor-parallel: the module is already sharded (it holds {collective.name})")
    if tp == 1:
        return ShardPlan(1, {n: (lambda store, r, n=n: store[n]) for n in names}, [], 0, 0)
    a, dissolved = _analyse(main.body.block, tp, sequence_parallel)
    rw = _Rewriter(a, set(names))
    block = main.body.block
    new_block = Block(arg_types=[local_type(arg.type, a.lay.get(arg, R), tp) for arg in block.args])
    vm = dict(zip(block.args, new_block.args))
    rw.rebuild(block, new_block, vm)
    ret = new_block.last_op
    if isinstance(ret, func.ReturnOp):  # KV caches kept in place: arguments and results of the rank's heads
        main.function_type = FunctionType.from_lists(new_block.arg_types, [v.type for v in ret.operands])
    for old, new in zip(block.args, new_block.args):
        old.replace_all_uses_with(new)
    main.body.detach_block(block)
    main.body.add_block(new_block)
    block.erase(safe_erase=False)
    return ShardPlan(tp, rw.entries, list(a.notes.values()), rw.collectives, dissolved)


def shard_module(
    module: ModuleOp, weights: WeightStore, tp: int, sequence_parallel: bool = False, target: str | None = None,
    session: Session | None = None,
) -> tuple[ModuleOp, list[WeightStore]]:
    """The driver's entry: shard `module` (in place, and returned) over `tp` devices and cut
    `weights` into one WeightStore per rank (lazily: slices are views where contiguous). Rank r
    runs the returned module with stores[r]; `interpreter.exec.spmd_reference.run_spmd` runs
    all ranks at the nn level.

    With `target` (a chip name or TOML), choose-tiling runs again for the sharded shapes (the
    pass drops the tilings chosen for the unsharded ones). Notes (a matmul left replicated) go
    to `session` when given.

    Raises:
        AscendirError: an op that cannot be split tp ways, or IR that fails to verify after.
    """
    return finish_sharding("shard-tensor-parallel", module, shard_tensor_parallel(module, tp, sequence_parallel), weights,
                           target, session)


def finish_sharding(name: str, module: ModuleOp, plan: ShardPlan, weights: WeightStore, target: str | None,
                    session: Session | None) -> tuple[ModuleOp, list[WeightStore]]:
    """What every sharding pass `name` does after rewriting `module` by `plan`: its notes to
    `session`, the module verified, choose-tiling again for `target` (the sharded shapes) when
    given; returns the module and one WeightStore per rank.

    Raises:
        AscendirError: the sharded module fails to verify."""
    from xdsl.utils.exceptions import VerifyException

    if session is not None:
        for note in plan.notes:
            session.note(f"{name}: {note}")
    try:
        module.verify()
    except VerifyException as e:
        raise AscendirError(f"{name}: the sharded module fails to verify: {e}") from None
    if target is not None:
        from ascendir.session import make_context
        from ascendir.transforms.nn.choose_tiling import ChooseTiling

        ChooseTiling(target=str(target)).apply(make_context(session or Session(weights=weights)), module)
    return module, plan.rank_stores(weights)


@dataclass(frozen=True)
class ShardTensorParallel(ModulePass):
    """`shard-tensor-parallel{tp=N sequence-parallel=bool}`: see the module docstring. The
    session's WeightStore is replaced by rank 0's; `Session.rank_stores` (set here) holds all
    ranks' stores (the driver's `shard_module` returns them directly)."""

    name = "shard-tensor-parallel"
    tp: int = 2
    sequence_parallel: bool = False

    def apply(self, ctx, op: ModuleOp) -> None:
        session = session_of(ctx)
        plan = shard_tensor_parallel(op, self.tp, self.sequence_parallel)
        for note in plan.notes:
            session.note(f"{self.name}: {note}")
        if plan.tp > 1:
            sp = " with sequence parallelism" if self.sequence_parallel else ""
            session.note(f"{self.name}: {plan.tp} devices{sp}: {plan.collectives} collectives, {plan.dissolved} fused regions dissolved")
        weights = session.weights if session.weights is not None else WeightStore()
        session.rank_stores = plan.rank_stores(weights)
        session.weights = session.rank_stores[0]
