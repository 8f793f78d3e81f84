"""Registry of ascendir's passes and named pipelines (shared by the CLI, ascendir-opt and Python)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass

from ascendir.errors import AscendirError, one_line
from ascendir.hardware.config import DEFAULT_TARGET


def _lowering():
    from ascendir.conversion.nn_to_ascend.convert_nn_to_ascend import ConvertNNToAscend

    return ConvertNNToAscend


def _fuse_matmul_epilogue():
    from ascendir.transforms.nn.fuse_matmul_epilogue import FuseMatmulEpilogue

    return FuseMatmulEpilogue


def _recompose_nn():
    from ascendir.transforms.nn.recompose_nn import RecomposeNN

    return RecomposeNN


def _decompose_attention():
    from ascendir.conversion.nn_to_ascend.decompose_attention import DecomposeAttention

    return DecomposeAttention


def _fold_batchnorm():
    from ascendir.transforms.nn.fold_batchnorm import FoldBatchNorm

    return FoldBatchNorm


def _fuse_ffn():
    from ascendir.transforms.nn.fuse_ffn import FuseFFN

    return FuseFFN


def _fuse_norm_matmul():
    from ascendir.transforms.nn.fuse_norm_matmul import FuseNormMatmul

    return FuseNormMatmul


def _fuse_add_rms_norm():
    from ascendir.transforms.nn.fuse_add_rms_norm import FuseAddRmsNorm

    return FuseAddRmsNorm


def _fuse_moe_gating():
    from ascendir.transforms.nn.fuse_moe_gating import FuseMoeGating

    return FuseMoeGating


def _fuse_moe_experts():
    from ascendir.transforms.nn.fuse_moe_experts import FuseMoeExperts

    return FuseMoeExperts


def _fuse_moe_finalize():
    from ascendir.transforms.nn.fuse_moe_finalize import FuseMoeFinalizeRouting

    return FuseMoeFinalizeRouting


def _fuse_conv_activation():
    from ascendir.transforms.nn.fuse_conv_activation import FuseConvActivation

    return FuseConvActivation


def _fuse_elementwise():
    from ascendir.transforms.nn.fuse_elementwise import FuseElementwise

    return FuseElementwise


def _shard_tensor_parallel():
    from ascendir.transforms.nn.shard_tensor_parallel import ShardTensorParallel

    return ShardTensorParallel


def _shard_expert_parallel():
    from ascendir.transforms.nn.shard_expert_parallel import ShardExpertParallel

    return ShardExpertParallel


def _fuse_matmul_allreduce():
    from ascendir.transforms.nn.fuse_matmul_allreduce import FuseMatmulAllReduce

    return FuseMatmulAllReduce


def _fuse_matmul_reducescatter():
    from ascendir.transforms.nn.fuse_matmul_reducescatter import FuseMatmulReduceScatter

    return FuseMatmulReduceScatter


def _fuse_allgather_matmul():
    from ascendir.transforms.nn.fuse_allgather_matmul import FuseAllGatherMatmul

    return FuseAllGatherMatmul


def _choose_tiling():
    from ascendir.transforms.nn.choose_tiling import ChooseTiling

    return ChooseTiling


def _fuse_attention():
    from ascendir.transforms.nn.fuse_attention import FuseAttention

    return FuseAttention


def _plan_memory():
    from ascendir.transforms.ascend.plan_memory import PlanMemory

    return PlanMemory


def _insert_sync():
    from ascendir.transforms.ascend.insert_sync import InsertSync

    return InsertSync


def _double_buffer():
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer

    return DoubleBuffer


def _cache_append():
    from ascendir.transforms.nn.cache_append import CacheAppend

    return CacheAppend


def _page_kv_cache():
    from ascendir.transforms.nn.page_kv_cache import PageKVCache

    return PageKVCache


def _constants_to_weights():
    from ascendir.conversion.nn_to_ascend.constants_to_weights import ConstantsToWeights

    return ConstantsToWeights


def _canonicalize():
    from xdsl.transforms.canonicalize import CanonicalizePass

    return CanonicalizePass


def _cse():
    from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

    return CommonSubexpressionElimination


def _dce():
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    return DeadCodeElimination


PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "canonicalize": _canonicalize,
    "cse": _cse,
    "dce": _dce,
    "recompose-nn": _recompose_nn,
    "fold-batchnorm": _fold_batchnorm,
    "fuse-ffn": _fuse_ffn,
    "cache-append": _cache_append,
    "page-kv-cache": _page_kv_cache,
    "fuse-attention": _fuse_attention,
    "fuse-norm-matmul": _fuse_norm_matmul,
    "fuse-add-rms-norm": _fuse_add_rms_norm,
    "fuse-moe-gating": _fuse_moe_gating,
    "fuse-moe-finalize-routing": _fuse_moe_finalize,
    "fuse-moe-experts": _fuse_moe_experts,
    "fuse-matmul-epilogue": _fuse_matmul_epilogue,
    "fuse-conv-activation": _fuse_conv_activation,
    "fuse-elementwise": _fuse_elementwise,
    "decompose-attention": _decompose_attention,
    "constants-to-weights": _constants_to_weights,
    "shard-tensor-parallel": _shard_tensor_parallel,
    "shard-expert-parallel": _shard_expert_parallel,
    "fuse-matmul-allreduce": _fuse_matmul_allreduce,
    "fuse-matmul-reducescatter": _fuse_matmul_reducescatter,
    "fuse-allgather-matmul": _fuse_allgather_matmul,
    "choose-tiling": _choose_tiling,
    "convert-nn-to-ascend": _lowering,
    "plan-memory": _plan_memory,
    "insert-sync": _insert_sync,
    "double-buffer": _double_buffer,
}

# Named pipelines: the nn-level passes each optimization level runs before lowering.
# fuse-attention is in O1 too: FlashAttention is the only lowering of attention that does not
# materialize the [B, H, Sq, Skv] scores in GM (O(S^2) bytes), so it is not an optional extra.
# fuse-norm-matmul (O2 only: a two-kernel region) runs after fuse-ffn, so a norm feeding a
# gated FFN leaves gate/up to fuse-ffn (whose ffn_up shares each x tile between them) and it
# takes the Q/K/V projections; it runs before fuse-matmul-epilogue, which would otherwise claim
# the projections' bias adds.
# fuse-moe-experts (O2: a MoE block's gathered-weight experts -> init-routing + grouped MatMul)
# runs after fuse-ffn, whose SwiGLU region it takes, and before fuse-moe-gating, which hides the
# router's TopK it finds the block by.
# fuse-moe-gating and fuse-moe-finalize-routing (O2: MoE routers and combines, each one vector
# kernel) run after fuse-ffn (which takes the experts' SwiGLU) and before fuse-matmul-epilogue
# and fuse-elementwise, which would otherwise take the shared expert's add, the sigmoid or the
# division of the renormalisation.
# fuse-elementwise runs after every fusion whose template takes elementwise ops (bias, activation,
# residual add, SwiGLU's mul), so it only takes what they leave.
PIPELINES: dict[str, str] = {
    "O0": "",
    "O1": "fold-batchnorm,recompose-nn,fuse-attention,fuse-matmul-epilogue,fuse-conv-activation,fuse-elementwise,choose-tiling",
    "O2": (
        "fold-batchnorm,recompose-nn,fuse-attention,fuse-ffn,fuse-moe-experts,fuse-moe-gating,fuse-moe-finalize-routing,"
        "fuse-norm-matmul,fuse-matmul-epilogue,fuse-conv-activation,fuse-elementwise,choose-tiling"
    ),
}


# What each optimization level runs on a sharded module (after shard-tensor-parallel, which
# follows the level's pipeline): -O2 fuses each MatMul with its collective (MC2,
# templates/mc2.py); -O1 keeps the MatMul and a separate collective kernel, so the two can be
# compared (or by naming the passes: `O1,shard-tensor-parallel{tp=2},fuse-matmul-allreduce`).
AFTER_SHARD: dict[str, str] = {"O0": "", "O1": "", "O2": "fuse-matmul-allreduce,fuse-allgather-matmul,fuse-matmul-reducescatter"}


def after_shard(opt_level: str) -> tuple[ModulePass, ...]:
    """The passes of AFTER_SHARD for `opt_level` ("O2" or "2")."""
    spec = AFTER_SHARD.get(opt_level if opt_level.startswith("O") else f"O{opt_level}", "")
    return tuple(PASSES[name]()() for name in spec.split(",") if name)


LOWERING = "ascend-lowering"
"""The named pipeline from an nn module to planned, synchronized ascend kernels; its one option
is `target` (`ascend-lowering{target=ascend910a}`; the default chip without it)."""


def ascend_lowering(target: str = "", topology: str = "") -> tuple[ModulePass, ...]:
    """The passes of `ascend-lowering` for `target` (a chip name or TOML path; "" = default) on
    `topology` (a topology name or TOML path, "" = default: what MC2 chunk counts are chosen for):
    decompose-attention (an attention without a template, or too big for it on the chip, becomes
    matmul / softmax ops), constants-to-weights (into the session's store, when it has one),
    convert-nn-to-ascend, then the ascend-level passes every lowering needs: double-buffer
    (flag-free loops; quiet, since the templates pipeline their own kernels), plan-memory and
    insert-sync (kernels without flags, and kernels whose buffers share bytes)."""
    from ascendir.conversion.nn_to_ascend.constants_to_weights import ConstantsToWeights
    from ascendir.conversion.nn_to_ascend.convert_nn_to_ascend import ConvertNNToAscend
    from ascendir.conversion.nn_to_ascend.decompose_attention import DecomposeAttention
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer
    from ascendir.transforms.ascend.insert_sync import InsertSync
    from ascendir.transforms.ascend.plan_memory import PlanMemory

    return (
        DecomposeAttention(target=target), ConstantsToWeights(), ConvertNNToAscend(target=target or DEFAULT_TARGET, topology=topology),
        DoubleBuffer(target=target, quiet=True), PlanMemory(target=target, order_shared=False), InsertSync(trust_flags=True),
    )


def _lowering_spec(item: str, spec: str) -> str:
    """`ascend-lowering{target=...}` as the passes it names, in pipeline text."""
    from xdsl.utils.arg_spec import parse_spec
    from xdsl.utils.exceptions import ArgSpecParseError

    try:
        arg = parse_spec(item)
    except (ArgSpecParseError, ValueError) as e:
        raise AscendirError(f"bad pass pipeline '{spec}': {one_line(e)}") from None
    extra = set(arg.parameters) - {"target", "topology"}
    if extra:
        raise AscendirError(f"bad pass pipeline '{spec}': {LOWERING} takes the options 'target' and 'topology', not '{sorted(extra)[0]}'")
    target, topology = (str(v[0]) if (v := arg.parameters.get(k)) else "" for k in ("target", "topology"))
    return ",".join(str(p.pipeline_pass_spec()) for p in ascend_lowering(target, topology))


def _repeated_option(spec: str) -> tuple[str, str] | None:
    """(pass, option) of the first option a pass is given twice in `spec`, else None. xDSL's
    parser keeps the last value silently (`plan-memory{target=a target=b}` plans for b); a
    spec it cannot lex returns None here and its parser reports the error."""
    from xdsl.utils.arg_spec import PipelineLexer, SpecTokenKind
    from xdsl.utils.exceptions import ArgSpecParseError

    lexer = PipelineLexer(spec)
    name, seen, expect = "", None, False
    try:
        while (tok := lexer.lex()).kind is not SpecTokenKind.EOF:
            kind, text = tok.kind, tok.span.text
            if seen is None:  # between passes
                if kind is SpecTokenKind.IDENT:
                    name = text
                elif kind is SpecTokenKind.L_BRACE:
                    seen, expect = set(), True
            elif kind is SpecTokenKind.R_BRACE:
                seen = None
            elif kind is SpecTokenKind.SPACE:
                expect = True  # options are separated by spaces; values follow `=`
            elif kind is SpecTokenKind.IDENT and expect:
                if text in seen:
                    return name, text
                seen.add(text)
                expect = False
            else:
                expect = False
    except ArgSpecParseError:
        return None
    return None


def pass_name(item: str) -> str:
    """The pass or pipeline an item of pipeline text names (`choose-tiling{tiling="m=16"}` ->
    `choose-tiling`)."""
    return item.split("{", 1)[0].strip()


def expand_pipelines(spec: str) -> str:
    """`spec` (xdsl-opt pass pipeline text) with each named pipeline (O0, O1, O2) replaced by its
    passes; the one expansion the CLI's -p and ascendir-opt's -p share, so both say the same.

    Raises:
        AscendirError: a named pipeline given options (`O2{x=1}`): they would apply to no pass;
            a pass given the same option twice.
    """
    repeated = _repeated_option(spec)
    if repeated is not None:
        name, opt = repeated
        raise AscendirError(f"bad pass pipeline '{spec}': {name} is given option '{opt}' twice (give it once)")
    for p in spec.split(","):
        name = pass_name(p)
        if name == LOWERING:
            continue
        if "{" in p and name in PIPELINES:
            raise AscendirError(
                f"bad pass pipeline '{spec}': the named pipeline '{name}' takes no options (give its passes with "
                f"their options instead: {PIPELINES[name] or 'it is empty'})"
            )
    items = [_lowering_spec(p.strip(), spec) if pass_name(p) == LOWERING else PIPELINES.get(p, p) for p in spec.split(",")]
    return ",".join(i for i in items if i.strip())


# The attribute a pass plugin module defines: its ModulePass subclasses (docs/writing-a-pass.md).
PLUGIN_ATTR = "ASCENDIR_PASSES"


def load_pass_plugin(module: str) -> dict[str, Callable[[], type[ModulePass]]]:
    """The passes of a plugin: import `module` (a dotted name importable from sys.path, e.g.
    with PYTHONPATH or pip install) and read its ASCENDIR_PASSES, a sequence of xDSL ModulePass
    subclasses, each offered under its `name` (`ascendir-opt --load-pass-plugin MODULE`).

    Raises:
        AscendirError: the module does not import, has no ASCENDIR_PASSES, lists something that
            is not a ModulePass subclass with a name, or a name already taken by one of
            ascendir's passes or named pipelines.
    """
    import importlib

    try:
        mod = importlib.import_module(module)
    except (Exception, SystemExit) as e:  # a plugin that fails to import is bad input, whatever it raised
        raise AscendirError(f"pass plugin '{module}' does not import: {type(e).__name__}: {e}") from None
    found = getattr(mod, PLUGIN_ATTR, None)
    if found is None:
        raise AscendirError(f"pass plugin '{module}' has no {PLUGIN_ATTR} (a list of its ModulePass classes)")
    passes: dict[str, Callable[[], type[ModulePass]]] = {}
    for cls in found:
        if not (isinstance(cls, type) and issubclass(cls, ModulePass) and isinstance(getattr(cls, "name", None), str)):
            raise AscendirError(f"pass plugin '{module}': {PLUGIN_ATTR} holds {cls!r}, not a ModulePass subclass with a name")
        if cls.name in PASSES or cls.name in PIPELINES or cls.name == LOWERING or cls.name in passes:
            raise AscendirError(f"pass plugin '{module}': the pass name '{cls.name}' is taken (give the pass another name)")
        passes[cls.name] = lambda cls=cls: cls
    return passes


# Distributions whose xDSL universes are not "other plugins": xDSL's own passes stay out of
# ascendir's registries (as before), and ascendir's universe is PASSES itself (api/universe.py).
_OWN_UNIVERSES = ("xdsl", "ascendir")


def _plugin_universes() -> list:
    """(name, Universe) of every other installed xDSL plugin (entry point group `xdsl.universe`,
    as xDSL's Universe.get_multiverse finds them), sorted by name.

    Raises:
        AscendirError: a plugin that does not load or is no Universe, naming it.
    """
    from importlib.metadata import entry_points

    from xdsl.universe import Universe

    found = []
    for ep in entry_points(group="xdsl.universe"):
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.name
        if dist.lower() in _OWN_UNIVERSES:
            continue
        try:
            universe = ep.load()
        except (Exception, SystemExit) as e:
            raise AscendirError(f"xDSL plugin '{ep.name}' ({ep.value}) does not load: {type(e).__name__}: {one_line(e)}") from None
        if not isinstance(universe, Universe):
            raise AscendirError(f"xDSL plugin '{ep.name}' ({ep.value}) is {type(universe).__name__}, not an xdsl.universe.Universe")
        found.append((ep.name, universe))
    return sorted(found, key=lambda t: t[0])


def plugin_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """The passes other installed xDSL plugins offer (their `xdsl.universe` entry points): usable in
    `ascendir-opt -p` and `ascendir compile -p` beside ascendir's own. A name ascendir already
    uses (a pass, a named pipeline, ascend-lowering) stays ascendir's.

    Raises:
        AscendirError: a plugin that does not load, or two plugins defining one pass name.
    """
    passes: dict[str, Callable[[], type[ModulePass]]] = {}
    owner: dict[str, str] = {}
    for plugin, universe in _plugin_universes():
        for name, factory in universe.all_passes.items():
            if name in PASSES or name in PIPELINES or name == LOWERING:
                continue
            if name in passes:
                raise AscendirError(f"xDSL plugins '{owner[name]}' and '{plugin}' both define the pass '{name}'")
            passes[name], owner[name] = factory, plugin
    return passes


def plugin_dialects() -> dict[str, Callable]:
    """The dialects other installed xDSL plugins offer (name -> factory), for IR that uses them."""
    return {name: f for _, universe in _plugin_universes() for name, f in universe.all_dialects.items()}


def available_passes(spec: str) -> dict[str, Callable[[], type[ModulePass]]]:
    """The registry a pipeline `spec` is parsed with: PASSES, and other plugins' passes when the
    spec names a pass that is not ascendir's (so a plain pipeline loads no plugin)."""
    if all(pass_name(p) in PASSES for p in spec.split(",") if p.strip()):
        return PASSES
    return {**plugin_passes(), **PASSES}
