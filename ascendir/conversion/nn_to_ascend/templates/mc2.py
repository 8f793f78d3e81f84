"""MC2: a MatMul fused with its collective (ops-transformer's `mc2/` family: MatmulAllReduce,
AllGatherMatmul, MatmulReduceScatter; hardware reference §6, S13 / S14): the matchers the fusion
passes use, what the kind templates read back from their regions, the chunk-count model and the
emitters.

Mechanism (S14): the MatMul and the collective are split into tiles; the kernel pipelines them
so that the communication of tile i overlaps the MatMul of tile i+1, the communication issued
from within the fused operator and moved by the chip's own DMA. Here a region lowers to one
sequence of launches per chunk of rows:

    matmul(chunk 0); comm(chunk 0, async); matmul(chunk 1, overlap 1); comm(chunk 1, async); ...
    matmul(chunk c-1, overlap 1); comm(chunk c-1)            (+ the epilogue kernel, if any)

Each comm kernel is the collective template's (templates/collectives.py: remote_copy /
comm_reduce with notify_record / notify_wait across devices, HCCL's mesh) on the chunk; the
`ascend.async` / `ascend.overlap` launch attributes put it on the device's comm stream beside the
next chunk's matmul, sharing the chip's HBM bandwidth with it (interpreter/timing/comm_stream.py
says how that is modelled). The chunk count is chosen by the cost model (`choose_chunks`): the
matmul estimate of choose-tiling (tiling.search) for a chunk and the mesh collective's cost
from the figures of the topology the module is lowered for (`collective_cycles`; `ascendir run
--topology` sets it), pipelined.

Numerics: a chunk runs a tiling that splits K as the matmul's recorded one (choose-tiling's
`ascend.tiling` for all its rows; `chunk_search` looks for the best chunk tiling among those with
its K tile and split), so every output row is the same sequence of K-tile products and f32
accumulations as unfused, and the collective sums the same values in the same rank order (f32
for 16-bit types): the result equals the unfused path bit for bit (tests/test_mc2.py: the corpus
at tp 2 / 4 with and without sequence parallelism). A matmul without a recorded tiling takes
tiling.search's tiling for the chunk; where that splits K otherwise, rows differ within the f32
accumulation bound (K · 2^-24 · sum_k |a_ik · b_kj| before the one rounding to the output type).

Sequence parallelism (AllGatherMatmul, MatmulReduceScatter) needs whole rows per shard: the
gathered / scattered axis has only 1s before it (a batch of one; BERT's batch of 2 is left).
The ffn region's gate / up part is one ffn_up kernel over every row before the chunked down
projection (the ffn template's two-kernel form); with one chunk the ffn template chooses.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, UnitAttr
from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend import tiling
from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext, elem, shape
from ascendir.conversion.nn_to_ascend.templates.collectives import CommKernel, emit_all_gather, emit_all_reduce, emit_reduce_scatter
from ascendir.conversion.nn_to_ascend.templates.elementwise import emit_elementwise, vector_map_of
from ascendir.conversion.nn_to_ascend.templates.epilogue import Epilogue, residual_of, row_bias_of
from ascendir.conversion.nn_to_ascend.templates.ffn import emit_ffn, ffn_problems
from ascendir.conversion.nn_to_ascend.templates.ffn_region import keeps_rows, parse_ffn
from ascendir.conversion.nn_to_ascend.templates.ffn_up import emit_up, up_tiling
from ascendir.conversion.nn_to_ascend.templates.matmul import emit_matmul
from ascendir.dialects import ascend, nn
from ascendir.dtypes import itemsize
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.hardware.topology import Link, Topology, load_topology
from ascendir.patterns import fuse_ops, single_use

MATMUL_ALL_REDUCE = "matmul_all_reduce"
ASYNC_ATTR = "ascend.async"
OVERLAP_ATTR = "ascend.overlap"
CHUNKS_ATTR = "mc2.chunks"
MAX_CHUNKS = 16
MIN_CHUNK_ROWS = 16  # one cube fractal of rows: a thinner chunk wastes the cube's M side


# ----------------------------------------------------------------------------------------------
# matching (the fusion passes) and parsing (the kind templates)
# ----------------------------------------------------------------------------------------------
def _weight_matmul(op: Operation | None) -> bool:
    return (isinstance(op, nn.MatmulOp) and len(shape(op.rhs)) == 2 and len(shape(op.lhs)) >= 2
            and elem(op.lhs) == elem(op.rhs) and str(elem(op.lhs)) in ("f16", "bf16", "f32"))


def _matmul_and_bias(v: SSAValue) -> list[Operation] | None:
    """[matmul] or [matmul, row-bias add] producing `v`, each used once; None otherwise."""
    op = v.owner
    if isinstance(op, nn.AddOp):
        for cand in (op.lhs, op.rhs):
            if _weight_matmul(cand.owner) and row_bias_of(op, cand) is not None and single_use(cand) is op:
                return [cand.owner, op]
        return None
    return [op] if _weight_matmul(op) else None


def _ffn_region(v: SSAValue) -> nn.FusedOp | None:
    op = v.owner
    return op if isinstance(op, nn.FusedOp) and op.kind.data == "ffn" and len(op.outputs) == 1 else None


def match_matmul_all_reduce(ar: nn.AllReduceOp) -> list[Operation] | None:
    """The ops of MatmulAllReduce ending at or after `ar`: matmul [+ row bias] (or an ffn region,
    whose down projection is the row-parallel matmul) → all_reduce [→ add of a residual of the
    output's shape] (ops-transformer MatmulAllReduce: x1 @ x2 + bias, summed over the group, +
    x3), each intermediate used once; None otherwise. A matmul_epilogue region holding matmul +
    bias is inlined first by the pass."""
    if ar.group.size < 2 or single_use(ar.input) is not ar:
        return None
    v, reshape = ar.input, []
    if keeps_rows(v.owner) and single_use(v.owner.input) is v.owner:  # GPT-2's Conv1D: [M, N] -> [1, M, N]
        reshape, v = [v.owner], v.owner.input
    front = [ffn] if (ffn := _ffn_region(v)) is not None else _matmul_and_bias(v)
    if front is None:
        return None
    ops = [*front, *reshape, ar]
    user = single_use(ar.result)
    if user is not None and residual_of(user, ar.result) is not None:
        ops.append(user)
    return ops


def fuse_mc2(kind: str, ops: list[Operation], chunks: int = 0) -> nn.FusedOp:
    """Replace `ops` (a match, in program order) by one nn.fused of `kind` yielding the last;
    `chunks` > 0 is recorded as its CHUNKS_ATTR (the row chunks the template must use)."""
    region = fuse_ops(kind, ops, [ops[-1].results[0]])
    if chunks > 0:
        region.attributes[CHUNKS_ATTR] = IntegerAttr(chunks, 64)
    return region


def chunks_of(ctx: LoweringContext, region: nn.FusedOp, rows: int | None) -> int | None:
    """The region's recorded chunk count (CHUNKS_ATTR), None without one; `rows`: what the chunks
    must split evenly (None: stages of row blocks, which the SP templates bound themselves).

    Raises:
        AscendirError: a count that does not divide the rows."""
    attr = region.attributes.get(CHUNKS_ATTR)
    if attr is None:
        return None
    c = attr.value.data
    if c < 1 or (rows is not None and rows % c):
        raise ctx.error(f"{CHUNKS_ATTR} = {c} does not split the {rows} rows into equal chunks")
    return c


@dataclass(frozen=True)
class MatmulAllReduceParts:
    """A matmul_all_reduce body: the matmul and its bias-add (or None), or instead an ffn region
    (the matmul is its down projection, inside it); the all_reduce; the residual add after it
    (or None)."""

    mm: nn.MatmulOp | None
    bias_add: nn.AddOp | None
    ffn: nn.FusedOp | None
    ar: nn.AllReduceOp
    residual_add: nn.AddOp | None

    @property
    def bias(self) -> SSAValue | None:
        return row_bias_of(self.bias_add, self.mm.result) if self.bias_add is not None else None


def parse_matmul_all_reduce(region: nn.FusedOp) -> MatmulAllReduceParts | Declined:
    """The parts of a region fuse-matmul-allreduce built, or Declined with the reason."""
    block = region.body.block
    body = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    why = Declined("the body is not matmul [+ row bias] (or an ffn region) → all_reduce [+ residual] yielding its last value")
    if not body:
        return why
    mm = ffn = bias_add = None
    if isinstance(body[0], nn.FusedOp) and body[0].kind.data == "ffn":
        ffn, rest = body[0], body[1:]
        if parse_ffn(ffn, {a: a for a in ffn.body.block.args}) is None or any(v not in block.args for v in ffn.operands):
            return Declined("the ffn region is not one the ffn template lowers")
        value = ffn.outputs[0]
    elif isinstance(body[0], nn.MatmulOp) and _weight_matmul(body[0]):
        mm, rest = body[0], body[1:]
        if rest and isinstance(rest[0], nn.AddOp):
            if row_bias_of(rest[0], mm.result) not in block.args:
                return why
            bias_add, rest = rest[0], rest[1:]
        value = (bias_add or mm).results[0]
        if mm.lhs not in block.args or mm.rhs not in block.args:
            return why
    else:
        return why
    if rest and keeps_rows(rest[0]) and rest[0].input == value:
        value, rest = rest[0].results[0], rest[1:]
    if not rest or not isinstance(rest[0], nn.AllReduceOp) or rest[0].input != value:
        return why
    ar, rest = rest[0], rest[1:]
    res_add = None
    if rest:
        if len(rest) != 1 or residual_of(rest[0], ar.result) not in block.args:
            return why
        res_add = rest[0]
    if list(block.last_op.operands) != [body[-1].results[0]]:
        return why
    return MatmulAllReduceParts(mm, bias_add, ffn, ar, res_add)


# ----------------------------------------------------------------------------------------------
# the cost model
# ----------------------------------------------------------------------------------------------
def topology_for(ctx: LoweringContext, ranks: tuple[int, ...]) -> Topology:
    """The topology the chunk counts are chosen for: the lowering's (convert-nn-to-ascend's
    `topology` option, which `ascendir run --topology` sets), else the default one (an Atlas 800
    A2 server of 910B2: hardware/topologies/atlas800-a2.toml).

    Raises:
        AscendirError: naming the region, when that topology cannot run the group `ranks`."""
    topo = _topology(ctx.topology)
    try:
        topo.check_group(tuple(ranks), "its group")
    except AscendirError as e:
        raise ctx.error(f"{e}: lower it for a topology that has the group (ascend-lowering{{topology=...}}, "
                        "ascendir run --topology)") from None
    return topo


def _ranks(ranks: tuple[int, ...] | int) -> tuple[int, ...]:
    return tuple(range(ranks)) if isinstance(ranks, int) else tuple(ranks)


@functools.lru_cache(maxsize=8)
def _topology(name: str) -> Topology:
    return load_topology(name or None)


def group_link(topo: Topology, ranks: tuple[int, ...], nbytes: int = 0) -> Link:
    """The slowest link from the group's first device to its peers (one transfer of `nbytes`):
    a mesh step waits for its slowest flow (on a group spanning servers, the RoCE one)."""
    if len(ranks) < 2:
        return topo.link(0, 1, nbytes)
    links = [topo.link(ranks[0], r, nbytes) for r in ranks[1:]]
    return min(links, key=lambda ln: (ln.flow_GBps, -ln.head_us))


def _us(target: HardwareConfig, us: float) -> float:
    return us * 1e-6 * target.clock_hz


def _copy_cycles(target: HardwareConfig, topo: Topology, ranks: tuple[int, ...], nbytes: float, peers: int) -> float:
    """One mesh step: `nbytes` to each of `peers` peers at once, per links.py's model (each flow
    at the link rate, all of them within the port's total rate, plus the transfer head)."""
    if peers == 0 or nbytes == 0:
        return 0.0
    ln = group_link(topo, ranks, int(nbytes))
    flow = nbytes / (ln.flow_GBps * 1e9) * target.clock_hz
    port = peers * nbytes / (ln.domain.total_GBps * 1e9) * target.clock_hz
    return _us(target, ln.head_us) + max(flow, port)


def _sync_cycles(target: HardwareConfig, topo: Topology, ranks: tuple[int, ...]) -> float:
    """A handshake: notify record + wait + link latency (HCCL constants, S23)."""
    h = topo.hccl
    return _us(target, h.notify_record_us + h.notify_wait_us + group_link(topo, ranks).domain.latency_us)


def collective_cycles(kind: str, nbytes: float, ranks: tuple[int, ...], target: HardwareConfig, topo: Topology) -> float:
    """Analytic cycles of the collective template's comm kernel (templates/collectives.py) over
    the devices `ranks`: `nbytes` = the operand of all_reduce / reduce_scatter, the result of
    all_gather. Handshakes cost a notify record + wait + link latency each (HCCL constants, S23)."""
    n = len(ranks)
    sync = _sync_cycles(target, topo, ranks)
    hbm = target.hbm_sustained_bytes_per_cycle  # comm_reduce's rate in interpreter/sim/comm.py
    part = nbytes / n
    if kind == "all_reduce":
        return 3 * sync + 2 * _copy_cycles(target, topo, ranks, part, n - 1) + (n + 1) * part / hbm
    if kind == "reduce_scatter":
        return 2 * sync + _copy_cycles(target, topo, ranks, part, n - 1) + (n + 1) * part / hbm
    return 2 * sync + _copy_cycles(target, topo, ranks, part, n - 1)  # all_gather


def chunk_problem(p: tiling.Problem, rows: int) -> tiling.Problem:
    """The matmul Problem of `rows` rows of `p` (a 2-D weight: batch folded into m)."""
    return replace(p, batch=1, m=rows, a_batch=1)


def pipelined(compute: float, comm: float, chunks: int) -> float:
    """Cycles of `chunks` matmul chunks of `compute` cycles each whose comm chunks of `comm`
    cycles run on the comm stream behind them: fill, steady state, drain."""
    return compute + (chunks - 1) * max(compute, comm) + comm


@dataclass(frozen=True)
class ChunkChoice:
    """The chunk count and what the model said: per candidate count (estimated cycles)."""

    chunks: int
    scores: tuple[tuple[int, float], ...]


def choose_chunks(p: tiling.Problem, kind: str, comm_bytes_per_row: float, ranks: tuple[int, ...], target: HardwareConfig,
                  fixed: tiling.Tiling | None = None, topo: Topology | None = None) -> ChunkChoice:
    """The chunk count in 1, 2, 4, .. MAX_CHUNKS (dividing the rows into chunks of at least
    MIN_CHUNK_ROWS) with the fewest pipelined cycles: per chunk the matmul estimate of
    chunk_search (launch head included) and `collective_cycles` over `ranks` on `topo` (None:
    the default topology)."""
    topo = topo or _topology("")
    ranks = _ranks(ranks)
    scores = []
    c = 1
    while c <= MAX_CHUNKS:
        if p.m % c == 0 and (c == 1 or p.m // c >= MIN_CHUNK_ROWS):
            rows = p.m // c
            compute = chunk_search(p, rows, target, fixed)[1]
            comm = collective_cycles(kind, rows * comm_bytes_per_row, ranks, target, topo)
            scores.append((c, pipelined(compute, comm, c)))
        c *= 2
    best = min(scores, key=lambda s: (s[1], s[0]))
    return ChunkChoice(best[0], tuple(scores))


# ----------------------------------------------------------------------------------------------
# emission
# ----------------------------------------------------------------------------------------------
def chunk_search(problem: tiling.Problem, rows: int, target: HardwareConfig, fixed: tiling.Tiling | None) -> tuple[tiling.Tiling, float]:
    """The tiling of a chunk of `rows` rows of `problem` and its estimated cycles: choose-tiling's
    search for the chunk, among the tilings that split and order K as `fixed` (the matmul's
    recorded tiling for every row: same k tile and split_k) when there is one, so every output
    row is summed exactly as unfused and comes out bit-equal."""
    p = chunk_problem(problem, rows)
    if fixed is not None and rows == problem.m:  # one chunk: the matmul exactly as unfused
        return fixed, tiling.estimate(p, fixed, target).cycles
    if fixed is None:
        r = tiling.search(p, target)
        return r.best, r.estimate.cycles
    best = None
    for c in tiling.candidates(p, target):
        if c.k == fixed.k and c.split_k == fixed.split_k:
            e = tiling.ranked(p, tiling.estimate(p, c, target), c)
            if best is None or e < best[1]:
                best = (c, e)
    if best is None:  # nothing else fits: the recorded tiling with its M tile cut to the chunk
        c = replace(fixed, m=min(fixed.m, -(-rows // 16) * 16))
        return c, tiling.estimate(p, c, target).cycles
    return best


def recorded(ctx: LoweringContext, mm: nn.MatmulOp, problem: tiling.Problem) -> tiling.Tiling | None:
    """The matmul's checked `ascend.tiling` for every row (tiling_of), None without one. A
    tail_split that `problem` cannot take (tiling.tail_misfit: the MC2 problem carries the bias
    row in its epilogue, which the tail reduction lacks) is dropped rather than refused:
    choose-tiling picked it for the plain matmul kernel, whose partial last wave it splits over
    K. Those tail tiles' rows are then summed over K in one range instead of tail_split f32
    partials: equal to the unfused kernel's up to that summation order.

    Raises:
        AscendirError: the recorded tiling does not fit `problem` (tiling_of)."""
    fields = tiling.tiling_from_attr(mm.attributes.get(tiling.TILING_ATTR), ctx.current)
    if fields is None or not isinstance(mm, nn.MatmulOp):
        return None
    t = tiling.complete(problem, fields, ctx.target)
    if t.tail_split > 1 and tiling.tail_misfit(problem, t, ctx.target) is not None:
        t = replace(t, tail_split=1)
    tiling.check_fits(problem, t, ctx.target, ctx.current)
    return t


def rows_of(ctx: LoweringContext, buf: SSAValue, start: int, count: int) -> SSAValue:
    """Rows [start, start + count) of the 2-D GM buffer `buf`, as a contiguous buffer (a row
    block of a row-major buffer is contiguous: a host memref.subview, then ascend.view)."""
    total, cols = buf.type.get_shape()
    if start == 0 and count == total:
        return buf
    rtype = memref.SubviewOp.infer_result_type(buf.type, [start, 0], [count, cols], [1, 1])
    sub = ctx.emit(memref.SubviewOp.get(buf, [start, 0], [count, cols], [1, 1], rtype)).results[0]
    return ctx.view(sub, [count, cols])


def _launches_after(ctx: LoweringContext, mark: Operation | None) -> list[ascend.LaunchOp]:
    op = mark.next_op if mark is not None else ctx.host.first_op
    out = []
    while op is not None:
        if isinstance(op, ascend.LaunchOp):
            out.append(op)
        op = op.next_op
    return out


def _overlap(ctx: LoweringContext, mark: Operation | None) -> None:
    for launch in _launches_after(ctx, mark):
        launch.attributes[OVERLAP_ATTR] = IntegerAttr(1, 64)


def _background(ctx: LoweringContext) -> None:
    last = ctx.host.last_op
    assert isinstance(last, ascend.LaunchOp)
    last.attributes[ASYNC_ATTR] = UnitAttr()


def _chunked(ctx: LoweringContext, mm: nn.MatmulOp, a2: SSAValue, w: SSAValue, bias: SSAValue | None, out_el, y2: SSAValue,
             group, problem: tiling.Problem, chunks: int) -> None:
    """The pipelined chunks of MatmulAllReduce: a2 [rows, K] @ w [K, N] (+ bias row) summed over
    `group` into y2 [rows, N] (module docstring)."""
    rows, n_out = shape(y2)
    epilogue = Epilogue(bias=bias) if bias is not None else Epilogue()
    step = rows // chunks
    best = chunk_search(problem, step, ctx.target, recorded(ctx, mm, problem))[0]
    for i in range(chunks):
        mark = ctx.host.last_op
        part = emit_matmul(ctx, rows_of(ctx, a2, i * step, step), w, (step, n_out), out_el, epilogue, base="mc2_matmul", tiling=best)
        if i:
            _overlap(ctx, mark)
        emit_all_reduce(ctx, group, part, rows_of(ctx, y2, i * step, step), base="mc2_all_reduce")
        if i < chunks - 1:
            _background(ctx)


def ffn_buffers(ffn: nn.FusedOp, args: dict[SSAValue, SSAValue]) -> dict:
    """parse_ffn's parts of the inner ffn region with x, wg, wu, b1, wd, b2 as GM buffers (`args`:
    the MC2 region's arguments -> buffers)."""
    inner = {ba: args[v] for ba, v in zip(ffn.body.block.args, ffn.operands)}
    parts = parse_ffn(ffn, {a: a for a in ffn.body.block.args})
    return {**parts, **{k: inner[parts[k]] for k in ("x", "wg", "wu", "b1", "wd", "b2") if parts[k] is not None}}


def emit_matmul_all_reduce(ctx: LoweringContext, parts: MatmulAllReduceParts, args: dict[SSAValue, SSAValue],
                           problem: tiling.Problem, chunks: int) -> SSAValue:
    """Launch MatmulAllReduce over GM buffers (`args`: region argument -> buffer) in `chunks` row
    chunks; returns the result buffer (the all_reduce's shape, + the residual when present).
    With an ffn region: ffn_up over every row, then the down projection in chunks (one chunk:
    the ffn template's own choice of kernels, then the all_reduce)."""
    ar = parts.ar
    y = ctx.buffer(list(shape(ar.result)), elem(ar.result))
    rows, n_out = problem.m, problem.n
    y2 = ctx.view(y, [rows, n_out])
    if parts.ffn is not None:
        fp = ffn_buffers(parts.ffn, args)
        out = parts.ffn.outputs[0]
        if chunks == 1:
            emit_all_reduce(ctx, ar.group, emit_ffn(ctx, fp, ffn_problems(fp_values(parts.ffn)), shape(out), elem(out)), y,
                            base="mc2_all_reduce")
        else:
            x, wg = fp["x"], fp["wg"]
            hdim, idim = shape(wg)
            el = elem(x)
            tiles = up_tiling(ctx, rows, idim, hdim, el, 2 if fp["wu"] is not None else 1, fp["b1"] is not None)
            h = emit_up(ctx, ctx.view(x, [rows, hdim]), wg, fp["wu"], fp["b1"], fp["act"], rows, hdim, idim, el, tiles)
            _chunked(ctx, fp["down"], h, fp["wd"], fp["b2"], elem(out), y2, ar.group, problem, chunks)
    else:
        mm = parts.mm
        x2 = ctx.view(args[mm.lhs], [rows, shape(mm.lhs)[-1]])
        _chunked(ctx, mm, x2, args[mm.rhs], args[parts.bias] if parts.bias is not None else None, elem(mm.result), y2, ar.group,
                 problem, chunks)
    if parts.residual_add is None:
        return y
    add = parts.residual_add
    gm = {ar.result: y, **args}
    return emit_elementwise(ctx, add, vector_map_of(add), [gm[add.lhs], gm[add.rhs]])[0]


def down_of(parts: MatmulAllReduceParts) -> nn.MatmulOp:
    """The row-parallel matmul: the plain one, or the ffn region's down projection."""
    return parts.mm if parts.ffn is None else fp_values(parts.ffn)["down"]


def fp_values(ffn: nn.FusedOp) -> dict:
    """parse_ffn's parts of `ffn` over its own values (what ffn_problems reads)."""
    return parse_ffn(ffn, {a: a for a in ffn.body.block.args})


def matmul_all_reduce_problem(parts: MatmulAllReduceParts) -> tiling.Problem:
    """The Problem of the row-parallel matmul (the ffn's down projection) as emitted, every row
    of its lhs folded into m: with its bias row in the epilogue."""
    if parts.ffn is not None:
        fp = fp_values(parts.ffn)
        down = fp["down"]
        return replace(ffn_problems(fp)[down], batch=1, m=math.prod(shape(down.lhs)[:-1]), a_batch=1)
    mm = parts.mm
    p = tiling.problem_of(mm, bias_bytes=itemsize(elem(mm.lhs)) if parts.bias is not None else 0,
                          epilogue=parts.bias is not None)
    return replace(p, batch=1, m=math.prod(shape(mm.lhs)[:-1]), a_batch=1)


# ----------------------------------------------------------------------------------------------
# sequence parallelism: MatmulReduceScatter, AllGatherMatmul
# ----------------------------------------------------------------------------------------------
MATMUL_REDUCE_SCATTER = "matmul_reduce_scatter"
ALL_GATHER_MATMUL = "all_gather_matmul"


def row_blocks(v_shape: tuple[int, ...], axis: int) -> bool:
    """Whether chunks along `axis` of a row-major tensor of `v_shape` are contiguous blocks of
    whole rows (every dim before `axis` is 1 and `axis` is not the last dim)."""
    return axis < len(v_shape) - 1 and math.prod(v_shape[:axis]) == 1


def match_matmul_reduce_scatter(rs: nn.ReduceScatterOp) -> list[Operation] | None:
    """matmul [+ row bias] [→ row-keeping reshape] → reduce_scatter along the rows (ops-transformer MatmulReduceScatter:
    x1 @ x2 + bias, reduce-scattered over the group), the matmul's result used once; None
    otherwise."""
    if rs.group.size < 2 or single_use(rs.input) is not rs or not row_blocks(shape(rs.input), rs.axis.value.data):
        return None
    v, reshape = rs.input, []
    if keeps_rows(v.owner) and single_use(v.owner.input) is v.owner:  # GPT-2's Conv1D: [M, N] -> [1, M, N]
        reshape, v = [v.owner], v.owner.input
    front = _matmul_and_bias(v)
    return [*front, *reshape, rs] if front is not None else None


def match_all_gather_matmul(ag: nn.AllGatherOp) -> list[Operation] | None:
    """all_gather along the rows → the first matmul (2-D weight) of the gathered rows [+ row bias]
    (ops-transformer AllGatherMatmul, whose gatherOut gives the gathered rows to the other users:
    the K / V or up projections), every other user of the gathered value after that matmul;
    None otherwise."""
    if ag.group.size < 2 or not row_blocks(shape(ag.result), ag.axis.value.data):
        return None
    users = [u.operation for u in ag.result.uses]
    block = ag.parent_block()
    if block is None or any(u.parent_block() is not block for u in users):
        return None
    pos = {op: i for i, op in enumerate(block.ops)}
    mms = sorted((u for u in users if _weight_matmul(u) and u.lhs == ag.result and u.rhs != ag.result), key=pos.__getitem__)
    if not mms:
        return None
    mm = mms[0]
    if any(pos[u] < pos[mm] for u in users):
        return None
    ops: list[Operation] = [ag, mm]
    add = single_use(mm.result)
    if add is not None and row_bias_of(add, mm.result) is not None:
        ops.append(add)
    return ops


def fuse_all_gather_matmul(ops: list[Operation], chunks: int = 0) -> nn.FusedOp:
    """The AllGatherMatmul region of a match: yields the product and, when others use them, the
    gathered rows."""
    ag = ops[0]
    outputs = [ops[-1].results[0]]
    if any(u.operation not in ops for u in ag.result.uses):
        outputs.append(ag.result)
    region = fuse_ops(ALL_GATHER_MATMUL, ops, outputs)
    if chunks > 0:
        region.attributes[CHUNKS_ATTR] = IntegerAttr(chunks, 64)
    return region


@dataclass(frozen=True)
class SpParts:
    """A matmul_reduce_scatter or all_gather_matmul body: the collective, the matmul and its
    bias add (or None)."""

    coll: nn.ReduceScatterOp | nn.AllGatherOp
    mm: nn.MatmulOp
    bias_add: nn.AddOp | None

    @property
    def bias(self) -> SSAValue | None:
        return row_bias_of(self.bias_add, self.mm.result) if self.bias_add is not None else None


def parse_sp(region: nn.FusedOp, gather: bool) -> SpParts | Declined:
    """The parts of a region fuse-matmul-reducescatter (`gather` False) or fuse-allgather-matmul
    built, or Declined with the reason."""
    block = region.body.block
    body = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
    why = Declined("the body is not all_gather → matmul [+ row bias]" if gather else
                   "the body is not matmul [+ row bias] → reduce_scatter yielding its result")
    if gather:
        if len(body) < 2 or not isinstance(body[0], nn.AllGatherOp) or not isinstance(body[1], nn.MatmulOp):
            return why
        coll, mm, rest = body[0], body[1], body[2:]
        if coll.input not in block.args or mm.lhs != coll.result or mm.rhs not in block.args or not _weight_matmul(mm):
            return why
    else:
        if len(body) < 2 or not isinstance(body[0], nn.MatmulOp) or not isinstance(body[-1], nn.ReduceScatterOp):
            return why
        mm, coll, rest = body[0], body[-1], body[1:-1]
        if mm.lhs not in block.args or mm.rhs not in block.args or not _weight_matmul(mm):
            return why
    if not gather and rest and keeps_rows(rest[-1]):  # a row-keeping reshape before the reduce_scatter
        reshape, rest = rest[-1], rest[:-1]
        if coll.input != reshape.results[0]:
            return why
    else:
        reshape = None
    bias_add = None
    if rest:
        if len(rest) != 1 or row_bias_of(rest[0], mm.result) not in block.args:
            return why
        bias_add = rest[0]
    if not gather and (reshape or coll).input != (bias_add or mm).results[0]:
        return why
    if not row_blocks(shape(coll.result if gather else coll.input), coll.axis.value.data):
        return Declined(f"{coll.name} along axis {coll.axis.value.data}: its chunks are not blocks of whole rows")
    return SpParts(coll, mm, bias_add)


def sp_problem(parts: SpParts) -> tiling.Problem:
    """The Problem of the whole matmul (every row), with its bias row in the epilogue."""
    mm = parts.mm
    p = tiling.problem_of(mm, bias_bytes=itemsize(elem(mm.lhs)) if parts.bias is not None else 0, epilogue=parts.bias is not None)
    return replace(p, batch=1, m=math.prod(shape(mm.lhs)[:-1]), a_batch=1)


@dataclass(frozen=True)
class SpPlan:
    """The plan of an all_gather_matmul or matmul_reduce_scatter region."""

    region: nn.FusedOp
    parts: SpParts
    problem: tiling.Problem  # the whole matmul, rows folded into m


def sp_plan(region: nn.FusedOp, gather: bool) -> SpPlan | Declined:
    """parse_sp's parts of `region` with the problem of their whole matmul, or Declined."""
    parts = parse_sp(region, gather)
    if isinstance(parts, Declined):
        return parts
    return SpPlan(region, parts, sp_problem(parts))


def gather_stages(n: int, chunks: int) -> list[list[int]]:
    """The peer offsets of each exchange of an AllGatherMatmul in `chunks` stages (1 < chunks <=
    n): the n - 1 offsets in chunks - 1 consecutive groups, as even as can be, larger first. In
    exchange e rank r sends its rows to r + o and receives those of r - o for every o of group e,
    at once (one flow per peer); stage 0 multiplies the own rows, stage e the rows of exchange e."""
    steps = chunks - 1
    sizes = [(n - 1) // steps + (1 if i < (n - 1) % steps else 0) for i in range(steps)]
    out, o = [], 1
    for k in sizes:
        out.append(list(range(o, o + k)))
        o += k
    return out


def gather_cycles(block: float, n: int, chunks: int, block_bytes: float, ranks: tuple[int, ...], target: HardwareConfig,
                  topo: Topology) -> float:
    """Estimated cycles of an AllGatherMatmul in `chunks` stages (gather_stages), each block's
    matmul `block` cycles: exchange e runs beside the matmuls of stage e - 1 (the first after
    HCCL's pre-sync), the last stage's after its exchange."""
    sync = _sync_cycles(target, topo, ranks)
    stages = gather_stages(n, chunks)
    total, compute = sync, block  # stage 0: the own rows
    for peers in stages:
        comm = sync + _copy_cycles(target, topo, ranks, block_bytes, len(peers))
        total += max(compute, comm)
        compute = len(peers) * block
    return total + compute


def scatter_cycles(block: float, n: int, chunks: int, block_bytes: float, ranks: tuple[int, ...], target: HardwareConfig,
                   topo: Topology) -> float:
    """Estimated cycles of a MatmulReduceScatter in `chunks` stages (gather_stages: stage e
    multiplies the row blocks of the owners r + o, o in group e, then sends them to their owners
    beside the next stage's matmuls; the own block last), each block's matmul `block` cycles;
    then the done handshake and the sum of the n received blocks (comm_reduce)."""
    sync = _sync_cycles(target, topo, ranks)
    total, comm = sync, 0.0  # HCCL's pre-sync
    for peers in gather_stages(n, chunks):
        total += max(len(peers) * block, comm)
        comm = _copy_cycles(target, topo, ranks, block_bytes, len(peers))
    return total + max(block, comm) + sync + (n + 1) * block_bytes / target.hbm_sustained_bytes_per_cycle


def choose_sp_chunks(p: tiling.Problem, ranks: tuple[int, ...] | int, row_bytes: float, target: HardwareConfig, gather: bool,
                     fixed: tiling.Tiling | None = None, topo: Topology | None = None) -> ChunkChoice:
    """Stages of an AllGatherMatmul or a MatmulReduceScatter (1 .. n; gather_stages: exchanges
    with as many peers at once as the stage has row blocks): the pipelined estimate of the blocks'
    matmuls and the copies to the peers (gather_cycles, scatter_cycles) against 1 (the matmul and
    the collective kernel one after the other, as unfused), on `topo` (None: the default
    topology)."""
    topo = topo or _topology("")
    ranks = _ranks(ranks)
    n = len(ranks)
    kind = "all_gather" if gather else "reduce_scatter"
    scores = [(1, chunk_search(p, p.m, target, fixed)[1] + collective_cycles(kind, p.m * row_bytes, ranks, target, topo))]
    if p.m % n == 0:
        block = chunk_search(p, p.m // n, target, fixed)[1]
        cost = gather_cycles if gather else scatter_cycles
        scores += [(c, cost(block, n, c, p.m // n * row_bytes, ranks, target, topo)) for c in range(2, n + 1)]
    best = min(scores, key=lambda s: (s[1], s[0]))
    return ChunkChoice(best[0], tuple(scores))


def emit_matmul_reduce_scatter(ctx: LoweringContext, parts: SpParts, args: dict[SSAValue, SSAValue], problem: tiling.Problem,
                               chunks: int) -> SSAValue:
    """MatmulReduceScatter over the group's n row blocks (block p is owner p's) in `chunks` stages
    (1 <= chunks <= n; gather_stages), rank-symmetric: stage e multiplies the blocks of the owners
    r + o (o in group e) and sends them, on the comm stream beside the next stage's matmuls, into
    row r of each owner's stack [n, rows / n, N], one flow per owner; the own block is multiplied
    last, straight into row r of the own stack; then the done handshake and the sum of the stack
    (comm_reduce: the unfused reduce_scatter's sum, rank order, f32). Every block's matmul has the
    same tiling, so the result does not depend on the stages."""
    mm, rs = parts.mm, parts.coll
    group = rs.group
    n = group.size
    rows, n_out = problem.m, problem.n
    el = elem(rs.result)
    epilogue = Epilogue(bias=args[parts.bias]) if parts.bias is not None else Epilogue()
    if chunks == 1:  # the model sees no gain: the matmul, then the reduce_scatter kernel
        part = emit_matmul(ctx, args[mm.lhs], args[mm.rhs], shape(mm.result), el, epilogue, base="mc2_matmul",
                           tiling=recorded(ctx, mm, problem))
        y = ctx.buffer(list(shape(rs.result)), el)
        emit_reduce_scatter(ctx, group, ctx.view(part, shape(rs.input)), y, rs.axis.value.data, base="mc2_reduce_scatter")
        return y
    step = rows // n
    x2 = ctx.view(args[mm.lhs], [rows, shape(mm.lhs)[-1]])
    y = ctx.buffer(list(shape(rs.result)), el)
    stack = ctx.buffer([n, step, n_out], el)
    stack2 = ctx.view(stack, [rows, n_out])
    best = chunk_search(problem, step, ctx.target, recorded(ctx, mm, problem))[0]
    rank = _host_index(ctx, ascend.GroupRankOp(group))
    cst = {v: _host_index(ctx, arith.ConstantOp(IntegerAttr(v, IndexType()))) for v in sorted({n, step, *range(n)})}

    def block_of(o: int) -> SSAValue:  # first row of owner (r + o) mod n's block
        dst = _host_index(ctx, arith.RemUIOp(_host_index(ctx, arith.AddiOp(rank, cst[o % n])), cst[n]))
        return _host_index(ctx, arith.MuliOp(dst, cst[step]))

    for e, offsets in enumerate(gather_stages(n, chunks)):
        mark = ctx.host.last_op
        got = [emit_matmul(ctx, rows_at(ctx, x2, block_of(o), step), args[mm.rhs], (step, n_out), el, epilogue,
                           base="mc2_matmul", tiling=best) for o in offsets]
        if e:
            _overlap(ctx, mark)
        ck = CommKernel(ctx, group, "mc2_reduce_scatter", [*got, stack])
        gs = ck.args[-1]
        if e == 0:
            ck.sync()  # HCCL's pre-sync: every peer has reached the collective
        mine = ck.kb.subview(gs, [ck.rank, 0, 0], [1, step, n_out])
        for o, gp in zip(offsets, ck.args[:-1]):
            ck.copy(gp, mine, ck.peers[o])
        ck.finish(ctx, [*got, stack])
        _background(ctx)
    mark = ctx.host.last_op
    own = block_of(0)
    _matmul_into(ctx, rows_at(ctx, x2, own, step), args[mm.rhs], rows_at(ctx, stack2, own, step), el, epilogue, best)
    _overlap(ctx, mark)
    ck = CommKernel(ctx, group, "mc2_reduce_scatter", [stack, ctx.view(y, [step, n_out])])
    gs, gy = ck.args
    ck.sync()
    ck.kb.emit(ascend.CommReduceOp(gs, gy))
    ck.finish(ctx, [stack, ctx.view(y, [step, n_out])])
    return y


def _host_index(ctx: LoweringContext, op: Operation) -> SSAValue:
    return ctx.emit(op).results[0]


def rows_at(ctx: LoweringContext, buf: SSAValue, start: SSAValue, count: int) -> SSAValue:
    """Rows [start, start + count) of the 2-D GM buffer `buf` at a host index `start` (a
    rank-dependent chunk), as a contiguous buffer."""
    cols = buf.type.get_shape()[1]
    rtype = memref.SubviewOp.infer_result_type(buf.type, [start, 0], [count, cols], [1, 1])
    sub = ctx.emit(memref.SubviewOp.get(buf, [start, 0], [count, cols], [1, 1], rtype)).results[0]
    return ctx.view(sub, [count, cols])


def _matmul_into(ctx: LoweringContext, a: SSAValue, w: SSAValue, out: SSAValue, el, epilogue: Epilogue, t) -> None:
    """emit_matmul writing into the GM buffer `out` (its fresh result buffer replaced by `out`,
    which has the same contiguous type)."""
    got = emit_matmul(ctx, a, w, tuple(out.type.get_shape()), el, epilogue, base="mc2_matmul", tiling=t)
    alloc = got.owner
    got.replace_all_uses_with(out)
    alloc.detach()
    alloc.erase()


def emit_all_gather_matmul(ctx: LoweringContext, parts: SpParts, args: dict[SSAValue, SSAValue], problem: tiling.Problem,
                           gathered: bool, chunks: int) -> list[SSAValue]:
    """AllGatherMatmul over the group's n row blocks in `chunks` stages (1 <= chunks <= n;
    gather_stages), rank-symmetric (HCCL's mesh): this rank's own block is multiplied first,
    straight from its input, while the comm stream sends it to the peers r + o of the first
    exchange and receives their blocks r - o; the blocks of exchange e are multiplied beside
    exchange e + 1. Every block's matmul has the same tiling (the block's rows), so the result
    does not depend on the stages. Returns the product [and the gathered rows, when `gathered`:
    ops-transformer's gatherOut]."""
    ag, mm = parts.coll, parts.mm
    group = ag.group
    n = group.size
    rows, n_out = problem.m, problem.n
    k = shape(mm.lhs)[-1]
    step = rows // n
    el = elem(mm.result)
    x = ctx.view(args[ag.input], [step, k])
    g = ctx.buffer(list(shape(ag.result)), elem(ag.result))
    g2 = ctx.view(g, [rows, k])
    y = ctx.buffer(list(shape(mm.result)), el)
    y2 = ctx.view(y, [rows, n_out])
    w = args[mm.rhs]
    epilogue = Epilogue(bias=args[parts.bias]) if parts.bias is not None else Epilogue()
    if chunks == 1:  # the model sees no gain: the all_gather kernel, then the matmul
        emit_all_gather(ctx, group, args[ag.input], g, ag.axis.value.data, base="mc2_all_gather")
        got = emit_matmul(ctx, g, w, shape(mm.result), el, epilogue, base="mc2_matmul", tiling=recorded(ctx, mm, problem))
        return [got, g] if gathered else [got]
    best = chunk_search(problem, step, ctx.target, recorded(ctx, mm, problem))[0]
    idx = IndexType()
    rank = _host_index(ctx, ascend.GroupRankOp(group))
    cst = {v: _host_index(ctx, arith.ConstantOp(IntegerAttr(v, idx))) for v in sorted({n, step, *range(n)})}

    def block_of(o: int) -> SSAValue:  # first row of block (r - o) mod n
        src = _host_index(ctx, arith.RemUIOp(_host_index(ctx, arith.AddiOp(rank, cst[(n - o) % n])), cst[n]))
        return _host_index(ctx, arith.MuliOp(src, cst[step]))

    stages = gather_stages(n, chunks)
    for e in range(len(stages) + 1):
        if e < len(stages):  # exchange e + 1: send x to r + o, receive block r - o, for o in stages[e]
            ck = CommKernel(ctx, group, "mc2_all_gather", [x, g2])
            gx, gg = ck.args
            if e == 0:
                ck.sync()
                ck.copy(gx, ck.chunk(gg, 0, ck.rank, step), ck.rank)  # gatherOut's own chunk
            for o in stages[e]:
                ck.copy(gx, ck.chunk(gg, 0, ck.rank, step), ck.peers[o])
            for o in stages[e]:
                ck.kb.emit(ascend.NotifyRecordOp(ck.peers[o], group))
            for o in stages[e]:
                ck.kb.emit(ascend.NotifyWaitOp(ck.peers[n - o], group))
            ck.finish(ctx, [x, g2])
            _background(ctx)
        mark = ctx.host.last_op
        for o in ([0] if e == 0 else stages[e - 1]):
            a = x if o == 0 else rows_at(ctx, g2, block_of(o), step)
            _matmul_into(ctx, a, w, rows_at(ctx, y2, block_of(o), step), el, epilogue, best)
        if e < len(stages):
            _overlap(ctx, mark)
    return [y, g] if gathered else [y]
