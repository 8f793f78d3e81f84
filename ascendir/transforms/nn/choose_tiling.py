"""`choose-tiling{target=ascend910b2 tiling=""}`: pick each matmul's and attention's tiling with the cost model.

For every `nn.matmul` (also the ones inside `nn.fused` regions: matmul_epilogue, ffn, ...) the
pass enumerates candidate tilings and scores each ANALYTICALLY with the interpreter's own cost
pieces (ascendir/interpreter/cost.py: `CostEnv.gm_rate` / `gm_latency` for GM paths and their HBM
share, `bandwidth_bound_cycles` for the chip floor, the copy start-ups of `_copy_startup`, the
mmad formula of `cost.mmad`, the launch head of the target), with the L2 residency window of
interpreter/l2.py. No candidate is simulated. The best one is recorded on the op as

    nn.matmul ... {ascend.tiling = #ascend.tiling<{m = 128 : i64, n = 256 : i64, k = 64 : i64, l1_depth = 4 : i64,
                                    split_k = 1 : i64, swizzle = 4 : i64}>}

which templates/matmul.py obeys (IR text may set or edit it by hand; keys left out take the
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
* prefetch (0 or 1, written only when 1): the group's two AIVs read each B chunk into L2 just
  ahead of the AIC (a mix kernel; the vendor's weight prefetch, torch_npu.npu_prefetch), so the
  AIC loads B at the L2 rate instead of its 32 B/cycle DDR path; beside an AIV epilogue (AIV 0)
  the second AIV alone; 910B-class chips, one B chunk [l1_depth·k, n] in UB. The search offers
  it on tiles with n >= m (B the larger part of each L1 chunk; the AIC streams A itself) unless
  M < N, and ranks it with a 5 % margin when B is not a constant weight (tiling.PREFETCH_MARGIN).
  When the items do not make whole waves, the AIVs of the cores with one item fewer also warm
  every A chunk into L2 at the start, where the cost model says it fits (tiling._warm_a_cycles,
  no field of its own: the estimate of a prefetching tiling includes it).
* tail_split (0 = none, written only when >= 2): the tiles of the last, partial wave over the
  AICs (tiles mod AICs) each run as tail_split K ranges of whole L1 chunks, spread over every
  AIC (catlass TailSplitK); their f32 partials leave through FixPipe into a GM workspace and an
  AIV kernel adds them (tiling.tail_misfit says where it applies). The search offers it (2, 3,
  4 or 6 ranges) on prefetching tilings without the A warm-up (tiling.TAIL_SPLIT_CHOICES says
  why), scored with its reduction kernel; 910B2 fp16 weight GEMMs 512x4096x11008 79.0 -> 87.0 %
  and 512x11008x4096 82.9 -> 88.6 % of the cube.

Buffers per core (the template's layout): L1 2·(m + n)·l1_depth·k·size (+ bias row), L0A
2·m·k·size, L0B 2·k·n·size (ping-pong, S2 InitBuffer BUFFER_NUM = 2), L0C m·n·4 (one f32
accumulator), UB the output stage's tiles (epilogue_ub_bytes: the epilogue of a
matmul_epilogue region); split_k needs a plain matmul, one L1 chunk (k·l1_depth of K) per K range
and its reduction kernel `splits` f32 tiles of REDUCE_TILE elements (+ one of the output type)
in UB. The gate/up matmuls of an ffn region are checked against `ffn_up`'s buffers instead
(nacc accumulators of [m, n], templates/ffn.py), its down matmul against `ffn_down`'s.

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
Without a forced tiling the pass records none on the gate/up matmuls, so templates/ffn.py's
planner still chooses between the fused kernel and the two kernels.

Flash attention: for every `nn.attention` inside an `nn.fused {kind = #nn.fused_kind<flash_attention>}` the
pass scores the template's (Br, Bc) tiles that fit with templates/flash_attention.py's
`estimate_cycles` (its `search`; Br query rows per head per item, Bc keys per block) and records

    nn.attention ... {ascend.tiling = #ascend.tiling<{br = 64 : i64, bc = 256 : i64}>}

which the template obeys (IR text may set it; a missing one of the two is searched). An attention
no tile fits is left without it (lowering decomposes it); a forced one that does not fit fails
naming the buffer, bytes needed vs available and the largest (Br, Bc) that fits.

`tiling` (and `--tiling`) may give fields of both kinds: m, n, k, l1_depth, split_k, swizzle, prefetch
apply to every matmul, br, bc to every flash attention; the rest are searched. How many
candidates were scored and how long it took (per op kind) goes to the session's `search_log`; the
CLI prints it (`compile`, `ascendir-opt`: stderr; `run`: the report's `tiling_search`).

How the pass finds what to tile: it is generic over templates (conversion/nn_to_ascend/
template.py). Each op's and nn.fused region's template (registry.template_of: the fused kinds
and the op families) plans it and lists its tiled *sites* (the ops carrying `ascend.tiling`,
each with a tiling family and a problem); the ops inside a planned region are that region's.
Today the sites are matmuls (plain, or in matmul_epilogue / ffn / norm_matmul regions) and the
attentions of flash_attention regions. The pass asks each site's template to `search` (equal problems once) and records the
best; forced fields go to the site's family (kinds/families.py), which completes and checks them.
The matmul template's search is tiling.search, the flash-attention one flash_attention.search.

What the estimate leaves out (and the simulation has): the exact start-up / fill of the first
tile per core, flag hand-off waits, and per-access L2 tie-breaking; the search only needs the
ranking to be right, `benchmarks/tiling_search.py` prints estimate vs simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.session import SearchStats, Session, session_of
from ascendir.hardware.config import DEFAULT_TARGET, HardwareConfig, load_target
from ascendir.conversion.nn_to_ascend.convert_nn_to_ascend import op_numbers
from ascendir.conversion.nn_to_ascend.host_builder import Declined
from ascendir.conversion.nn_to_ascend.kinds.families import FAMILIES, MATMUL as MATMUL_FAMILY
from ascendir.conversion.nn_to_ascend.registry import template_of
from ascendir.conversion.nn_to_ascend.template import Site, Template
from ascendir.conversion.nn_to_ascend.tiling import TILING_ATTR, parse_tiling


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


def tiled_sites(module: ModuleOp, target: HardwareConfig) -> list[tuple[Template, object, Site]]:
    """(template, plan, site) of every op choose-tiling tiles, in program (walk) order: the sites
    of each op and fused region whose template (registry.template_of) plans it, the ops inside a
    planned region being that region's (a region whose kind has no template, or whose template
    declines it, lowers op by op: its body ops are planned on their own)."""
    found = []
    covered: set[Operation] = set()
    for op in module.walk():
        if op in covered or (template := template_of(op)) is None:
            continue
        plan = template.plan(op)
        if isinstance(plan, Declined):
            continue
        if isinstance(op, nn.FusedOp):
            covered.update(op.body.walk())
        found += [(template, plan, site) for site in template.sites(plan, target)]
    return found


def annotate(module: ModuleOp, target: HardwareConfig, forced: str = "", stats: list | None = None,
             session: Session | None = None) -> None:
    """ChooseTiling's work (see there), generic over templates: each tiled site's template
    searches its candidates (`Template.search`) and the best tiling is recorded on the site's op;
    with forced fields, each family (kinds/families.py) completes and checks them instead.
    `stats` gets (op, problem, tiling.SearchResult or None) per matmul site; what was searched
    goes to `session.search_log`."""
    session = session or Session()
    force = parse_tiling(forced, ChooseTiling.name) if forced else {}
    sites = tiled_sites(module, target)
    index = op_numbers(module)  # how errors name an op (`nn.matmul #3`), as the lowering does
    for family in FAMILIES:
        mine = [(t, p, s) for t, p, s in sites if s.family == family.name]
        fam_force = {k: v for k, v in force.items() if k in family.fields}
        if fam_force:
            family.force([(family.describe(s.op, index[s.op]), s) for _, _, s in mine], fam_force, target, session,
                         stats if family is MATMUL_FAMILY else None)
            continue
        searched: dict = {}  # a model repeats its layers' shapes
        for template, plan, site in mine:
            if TILING_ATTR in site.op.attributes or not site.searched:
                continue
            new = site.problem not in searched
            if new:
                searched[site.problem] = template.search(plan, site, target)
            res = searched[site.problem]
            if res is None:  # no tile fits: left bare (lowering says why, or decomposes an attention)
                continue
            site.op.attributes[TILING_ATTR] = res.best.to_attr()
            session.record_search(family.name, new, res.scored if new else 0, res.seconds if new else 0.0)
            if stats is not None and family is MATMUL_FAMILY:
                stats.append((site.op, site.problem, res.detail))
