"""`choose-tiling{target=ascend910b2 tiling=""}`: pick each matmul's and attention's tiling with the cost model.

For every `nn.matmul` (also the ones inside `nn.fused` regions: matmul_epilogue, ffn, ...) the
pass enumerates candidate tilings and scores each ANALYTICALLY with the interpreter's own cost
pieces (ascendir/interpreter/cost.py: `CostEnv.gm_rate` / `gm_latency` for GM paths and their HBM
share, `bandwidth_bound_cycles` for the chip floor, the copy start-ups of `_copy_startup`, the
mmad formula of `cost.mmad`, the launch head of the target), with the L2 residency window of
interpreter/l2.py. No candidate is simulated. The best one is recorded on the op as

    nn.matmul ... {ascend.tiling = #ascend.tiling<{m = 128 : i64, n = 256 : i64, k = 64 : i64, l1_depth = 4 : i64,
                                    split_k = 1 : i64, swizzle = 4 : i64}>}

which lowering/matmul.py obeys (IR text may set or edit it by hand; keys left out take the
template's defaults). Fields, all in elements unless said:

* m, n, k: base tile (L0A [m, k], L0B [k, n], L0C [m, n] f32). m, n multiples of 16 and k of
  32 B / element size (S3 alignment table).
* l1_depth: k-steps per GM->L1 load (L1 chunks [m, l1_depth·k] and [l1_depth·k, n]).
* split_k: K ranges computed by different cores ("mn" split when 1). Partial [M, N] f32 sums go
  to a GM workspace and a vector kernel adds them (the way CANN's split-K matmuls without atomic
  add do it); only for a plain matmul (no bias / activation epilogue).
* swizzle: output tiles are visited in groups of `swizzle` tile rows, column by column inside a
  group (catlass GemmIdentityBlockSwizzle), so the B panel of a column is re-read by the other
  rows of the group while it is still in L2 (reference §4.5 / V10 [S17]).

Buffers per core (the template's layout): L1 2·(m + n)·l1_depth·k·size (+ bias row), L0A
2·m·k·size, L0B 2·k·n·size (ping-pong, S2 InitBuffer BUFFER_NUM = 2), L0C m·n·4 (one f32
accumulator), UB the output stage's tiles (epilogue_ub_bytes: the epilogue of a
matmul_epilogue region); split_k needs a plain matmul, one L1 chunk (k·l1_depth of K) per K range
and its reduction kernel `splits` f32 tiles of REDUCE_TILE elements (+ one of the output type)
in UB. The gate/up matmuls of an ffn region are checked against `ffn_up`'s buffers instead
(nacc accumulators of [m, n], lowering/ffn.py), its down matmul against `ffn_down`'s.

Every field given (`--tiling`, the pass option, an IR attribute) must be a decimal integer >= 1,
m, n, bc multiples of 16 and k of 8 (checked before anything else; per op: k of 32 B / element
size, br of 16 unless Br = Sq < 16); whitespace around entries, keys and values is ignored. A
forced tiling (`tiling="m=128,n=128,k=64"`, or `ascendir compile --tiling`) that does not fit
raises AscendirError naming the matmul, the buffer, bytes needed vs available and, as the
largest tile that fits, the largest values of the forced fields with which EVERY matmul fits
(`suggest`): the flag applies to all of them. A tiling in IR text that does not fit names its
op and the largest whole tiling that fits it (`largest_fit`).

FFN regions: a tiling on the gate/up matmuls is obeyed by `ffn_up` (the region then lowers as
ffn_up + ffn_down: the fused single kernel has its own plan, no per-matmul tiles; swizzle does
not apply to ffn_up, which visits its tiles row-major), the down matmul's by `ffn_down`.
Without a forced tiling the pass records none on the gate/up matmuls, so lowering/ffn.py's
planner still chooses between the fused kernel and the two kernels.

Flash attention: for every `nn.attention` inside an `nn.fused {kind = #nn.fused_kind<flash_attention>}` the
pass scores the template's (Br, Bc) tiles that fit with lowering/flash_attention.py's
`estimate_cycles` (its `search`; Br query rows per head per item, Bc keys per block) and records

    nn.attention ... {ascend.tiling = #ascend.tiling<{br = 64 : i64, bc = 256 : i64}>}

which the template obeys (IR text may set it; a missing one of the two is searched). An attention
no tile fits is left without it (lowering decomposes it); a forced one that does not fit fails
naming the buffer, bytes needed vs available and the largest (Br, Bc) that fits.

`tiling` (and `--tiling`) may give fields of both kinds: m, n, k, l1_depth, split_k, swizzle
apply to every matmul, br, bc to every flash attention; the rest are searched. How many
candidates were scored and how long it took (per op kind) goes to the session's `search_log`; the
CLI prints it (`compile`, `ascendir-opt`: stderr; `run`: the report's `tiling_search`).

What the estimate leaves out (and the simulation has): the exact start-up / fill of the first
tile per core, flag hand-off waits, and per-access L2 tie-breaking; the search only needs the
ranking to be right, `benchmarks/tiling_search.py` prints estimate vs simulation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.session import SearchStats, Session, session_of
from ascendir.errors import AscendirError
from ascendir.hardware.config import DEFAULT_TARGET, HardwareConfig, load_target
from ascendir.conversion.nn_to_ascend.tiling import (
    ATTENTION_FIELDS, FIELDS, Problem, SearchResult, TILING_ATTR, Tiling, attention_attr, complete, fit_error, largest_fit, parse_tiling, problem_of, search,
)


@dataclass(frozen=True)
class ChooseTiling(ModulePass):
    """Annotate every nn.matmul with the cost-model-best `ascend.tiling` for `target`, and every
    nn.attention of a flash_attention region with its best {br, bc}; with `tiling`
    ("m=128,n=128,k=64,br=64"), force the given matmul fields on every matmul and the given
    attention fields on every attention instead (the rest are searched). Existing
    `ascend.tiling` attributes (from IR text) are kept unless `tiling` gives fields of that op
    kind. Candidates scored and seconds go to the session's `search_log`.

    Raises:
        AscendirError: a forced tiling that does not fit (see check_fits, flash_attention.forced)."""

    name = "choose-tiling"

    target: str = ""
    tiling: str = ""

    def __post_init__(self) -> None:
        if self.tiling:  # a bad spec fails when the pipeline is parsed, in every driver
            parse_tiling(self.tiling, self.name)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate(op, load_target(self.target or DEFAULT_TARGET), self.tiling, session=session_of(ctx))


def log_summary(log: dict[str, SearchStats]) -> str | None:
    """One line for users: `choose-tiling: 7 matmuls (3 searched, 4,821 candidates scored), ...
    in 0.41 s`; None when nothing was tiled."""
    if not log:
        return None
    parts = [f"{st.ops} {kind}{'s' if st.ops != 1 else ''} ({st.searches} searched, {st.candidates:,} candidates scored)"
             for kind, st in log.items()]
    return f"choose-tiling: {', '.join(parts)} in {sum(st.seconds for st in log.values()):.3f} s"


def log_json(log: dict[str, SearchStats]) -> dict[str, dict]:
    """The log as the run report's `tiling_search` entry."""
    return {kind: {"ops": st.ops, "searches": st.searches, "candidates": st.candidates, "seconds": st.seconds}
            for kind, st in log.items()}


def annotate(module: ModuleOp, target: HardwareConfig, forced: str = "", stats: list | None = None,
             session: Session | None = None) -> None:
    """ChooseTiling's work (see there); `stats` gets (op, problem, SearchResult or None) per matmul;
    what was searched goes to `session.search_log`."""
    session = session or Session()
    force = parse_tiling(forced, ChooseTiling.name) if forced else {}
    mm_force = {k: v for k, v in force.items() if k in FIELDS}
    att_force = {k: v for k, v in force.items() if k in ATTENTION_FIELDS}
    searched: dict[Problem, SearchResult] = {}  # a model repeats its layers' shapes
    todo = []
    for i, mm in enumerate(o for o in module.walk() if isinstance(o, nn.MatmulOp)):
        p = problem_of(mm)
        if not all(isinstance(d, int) and d > 0 for d in (p.m, p.n, p.k)) or p.dtype not in ("f16", "bf16", "f32"):
            continue
        if p.dtype not in target.cube.k_per_cycle:  # no such mmad (910A f32): the template says so
            continue
        todo.append((i, mm, p))
    if mm_force:
        _force_matmuls(todo, mm_force, target, stats, session)
    for i, mm, p in todo if not mm_force else ():
        if TILING_ATTR in mm.attributes:
            continue
        if p.ffn_up:  # ffn_up picks its own nacc-accumulator tile; one recorded here would be obeyed
            continue  # (and rule out the fused FFN kernel, which has no per-matmul tiles)
        new = p not in searched
        if new:
            searched[p] = search(p, target)
        res = searched[p]
        mm.attributes[TILING_ATTR] = res.best.to_attr()
        session.record_search("matmul", new, res.scored if new else 0, res.seconds if new else 0.0)
        if stats is not None:
            stats.append((mm, p, res))
    _annotate_attention(module, target, att_force, session)


def _name(mm: nn.MatmulOp, i: int) -> str:
    """How errors name a matmul: `nn.matmul #3` and its ONNX node when the importer kept one."""
    node = mm.attributes.get("onnx.node") or mm.attributes.get("onnx.name")
    return f"nn.matmul #{i}" + (f" ('{node.data}')" if node is not None and hasattr(node, "data") else "")


def _force_matmuls(todo: list, force: dict[str, int], target: HardwareConfig, stats: list | None, session: Session) -> None:
    """Record `force` (completed per matmul, see `complete`) on every matmul of `todo` ((index,
    op, Problem) triples).

    Raises:
        AscendirError: on the first matmul the completed tiling does not fit: names the buffer,
            the bytes needed vs available and, as `largest tile that fits`, the largest values of
            the forced fields that fit EVERY matmul of `todo` (`suggest`) -- the flag applies to all
            of them, so a per-op fit could just move the error to the next matmul."""
    done: dict[Problem, tuple[Tiling, int]] = {}
    for i, mm, p in todo:
        t0 = time.perf_counter()
        new = p not in done
        if new:
            done[p] = complete(p, force, target, count=True)
        t, n = done[p]
        why = fit_error(p, t, target)
        if why is not None:
            if why.startswith("is not aligned"):
                raise AscendirError(f"{_name(mm, i)}: tiling {t.text()} {why}")
            fit = suggest([q for _, _, q in todo], force, target)
            spec = ",".join(f"{k}={v}" for k, v in fit.items()) if fit else None
            hint = f"; largest tile that fits: {spec}" if spec else "; no tile fits"
            raise AscendirError(f"{_name(mm, i)}: tiling {t.text()} {why}{hint}")
        mm.attributes[TILING_ATTR] = t.to_attr()
        session.record_search("matmul", new and n > 0, n if new else 0, time.perf_counter() - t0)
        if stats is not None:
            stats.append((mm, p, None))


def suggest(problems: list[Problem], force: dict[str, int], target: HardwareConfig) -> dict[str, int] | None:
    """The largest values of the forced fields (none above the forced ones) with which every
    problem's completed tiling (`complete`) fits `target`, or None: start from `force`, and while
    some problem's completion does not fit, take the forced fields of its largest_fit (each no
    larger than before, so this ends)."""
    f = dict(force)
    distinct = list(dict.fromkeys(problems))
    while True:
        for p in distinct:
            t = complete(p, f, target)
            if fit_error(p, t, target) is None:
                continue
            fit = largest_fit(p, t, target)
            if fit is None:
                return None
            nf = {k: getattr(fit, k) for k in f}
            if nf == f:  # its fitting tile needs other non-forced fields than `complete` finds
                return None
            f = nf
            break
        else:
            return f


def _annotate_attention(module: ModuleOp, target: HardwareConfig, force: dict[str, int], session: Session) -> None:
    """{br, bc} on every nn.attention the flash_attention template lowers (flash_attention.py's
    search: estimate_cycles over the tiles that fit). One without any fitting tile is left bare
    (lowering decomposes it), unless the tile is forced: then the fit error."""
    from ascendir.conversion.nn_to_ascend.templates import flash_attention as fa
    from ascendir.transforms.nn.fuse_attention import KIND

    searched: dict = {}
    atts = [o for o in module.walk() if isinstance(o, nn.AttentionOp)]
    for i, att in enumerate(atts):
        parent = att.parent_op()
        if not (isinstance(parent, nn.FusedOp) and parent.kind.data == KIND):
            continue
        if target.arch.no_mmad(str(att.q.type.element_type)):
            continue  # no such mmad: lowering says so
        if not force and TILING_ATTR in att.attributes:
            continue
        s = fa.shape_of(att)
        t0 = time.perf_counter()
        if force:
            br, bc, n = force.get("br"), force.get("bc"), 0
            if br is None or bc is None:
                try:
                    t, n = fa.search(s, target, br, bc)
                    br, bc = t.br if br is None else br, t.bc if bc is None else bc
                except ValueError:
                    br, bc = br or 128, bc or 128
            t = fa.forced(s, target, br, bc, f"nn.attention #{i}")
            att.attributes[TILING_ATTR] = attention_attr(t.br, t.bc)
            session.record_search("attention", n > 0, n, time.perf_counter() - t0)
            continue
        new = s not in searched
        if new:
            try:
                searched[s] = fa.search(s, target)
            except ValueError:
                searched[s] = None
        if searched[s] is None:
            continue
        t, n = searched[s]
        att.attributes[TILING_ATTR] = attention_attr(t.br, t.bc)
        session.record_search("attention", new, n if new else 0, time.perf_counter() - t0)


