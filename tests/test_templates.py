"""The Template protocol (conversion/nn_to_ascend/template.py): every fused kind and op family has
one, plans read the regions the fusion passes build, declines give a reason, and the tiled sites'
candidates / footprint / estimate agree with the search choose-tiling records."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendir.conversion.nn_to_ascend.host_builder import Declined
from ascendir.conversion.nn_to_ascend.kinds.families import FAMILIES
from ascendir.conversion.nn_to_ascend.registry import FUSED_KINDS, OP_FAMILIES, OP_TEMPLATES, template_of
from ascendir.conversion.nn_to_ascend.template import Template, Tiling, TilingFamily, search
from ascendir.conversion.nn_to_ascend.tiling import TILING_ATTR
from ascendir.dialects import nn
from ascendir.driver import parse_pipeline, run_passes
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.transforms.nn.choose_tiling import tiled_sites

DATA = Path(__file__).parent / "data"
KINDS = ("matmul_epilogue", "ffn", "flash_attention", "norm_matmul", "conv_activation", "elementwise", "add_rms_norm",
         "moe_gating", "moe_finalize_routing", "matmul_all_reduce", "matmul_reduce_scatter", "all_gather_matmul", "moe_experts")


def test_every_fused_kind_has_a_template():
    assert set(FUSED_KINDS) == set(KINDS)
    for kind, t in [*FUSED_KINDS.items(), *((c.__name__, t) for c, t in OP_TEMPLATES.items())]:
        assert isinstance(t, Template), kind
    assert all(t.kind == k for k, t in FUSED_KINDS.items())


def test_every_op_family_has_one_template():
    """Each op family's template lowers the classes it names, and no class has two."""
    assert {t.kind for t in OP_FAMILIES} == {"elementwise_op", "matmul", "reduction", "data_movement", "conv2d", "pool2d", "topk",
                                            "collective", "weight_quant_matmul"}
    assert sum(len(t.ops) for t in OP_FAMILIES) == len(OP_TEMPLATES)
    for t in OP_FAMILIES:
        assert all(OP_TEMPLATES[c] is t for c in t.ops), t.kind


@pytest.mark.parametrize("model", sorted(p.name for p in DATA.iterdir() if (p / "model.onnx").exists()))
def test_every_corpus_op_plans_through_its_template(model):
    """Unfused (-O0 imports, no fusion), every nn op of a corpus model has a template whose
    plan takes it: convert-nn-to-ascend has one path for ops and regions."""
    module, _ = import_onnx(DATA / model / "model.onnx", None)
    ops = [o for o in module.walk() if o.dialect_name() == "nn" and not isinstance(o, (nn.WeightOp, nn.ConstantOp, nn.YieldOp))]
    assert ops
    for o in ops:
        t = template_of(o)
        assert t is not None, o.name
        assert not isinstance(t.plan(o), Declined), o.name


def _o2(model: str):
    module, weights = import_onnx(DATA / model / "model.onnx", None)
    run_passes(module, parse_pipeline(None, "O2", "ascend910b2", None), weights)
    return module


@pytest.mark.parametrize("model", ["llama_small", "gpt2_small", "mobilenet_block_small"])
def test_plans_of_corpus_regions(model):
    """Every region -O2 builds on these models is planned (mixtral's gathered-weight experts are
    the one declined ffn in the corpus, see test_declined_ffn_gives_reason)."""
    module = _o2(model)
    regions = [o for o in module.walk() if isinstance(o, nn.FusedOp)]
    assert regions
    for r in regions:
        assert not isinstance(FUSED_KINDS[r.kind.data].plan(r), Declined), r.kind.data


def test_declined_ffn_gives_reason():
    module = _o2("mixtral_moe_block_small")
    plans = [FUSED_KINDS["ffn"].plan(r) for r in module.walk() if isinstance(r, nn.FusedOp) and r.kind.data == "ffn"]
    declined = [p for p in plans if isinstance(p, Declined)]
    assert declined and all("gated" in p.reason for p in declined)


def test_sites_search_agrees_with_candidates_and_footprint():
    """For each distinct tiled site of llama_small -O2 (matmuls, attention): the recorded tiling
    is the template's search's best; every candidate's footprint fits the chip; the generic
    search over all candidates (no pruning) finds no estimate below the template's search by
    more than its rounding (matmul ranks by whole cycles)."""
    target = load_target("ascend910b2")
    module = _o2("llama_small")
    sites = tiled_sites(module, target)
    assert {s.family for _, _, s in sites} == {"matmul", "attention"}
    seen = set()
    for template, plan, site in sites:
        if site.problem in seen or not site.searched:
            continue
        seen.add(site.problem)
        best = template.search(plan, site, target)
        family = next(f for f in FAMILIES if f.name == site.family)
        assert isinstance(family, TilingFamily) and isinstance(best.best, Tiling)
        assert site.op.attributes[TILING_ATTR] == best.best.to_attr()
        cands = list(template.candidates(plan, site, target))
        assert cands
        for t in cands[:50]:
            for space, need in template.footprint(plan, site, t, target).items():
                assert need <= target.capacity(space), (space, t)
        generic = search(template, plan, site, target)
        best_cycles = template.estimate(plan, site, best.best, target)
        assert generic.cycles <= best_cycles + 1e-9
        assert best_cycles <= generic.cycles + 0.5 + 1e-9


@pytest.mark.parametrize("model", ["mixtral_moe_block_small", "llama_small"])
def test_lowering_builds_no_region(model, monkeypatch):
    """Lowering only reads the regions the fusion passes built (and plans them): with region
    building disabled after -O2, the models still lower (mixtral's experts through the
    moe_experts region fuse-moe-experts built, nothing declined)."""
    from ascendir import patterns
    from ascendir.conversion.nn_to_ascend.templates import (
        add_rms_norm, epilogue, fused_elementwise, moe_experts, moe_finalize, moe_gating,
    )
    from ascendir.driver import lower
    from ascendir.session import Session

    module, weights = import_onnx(DATA / model / "model.onnx", None)
    run_passes(module, parse_pipeline(None, "O2", "ascend910b2", None), weights)

    def no_fusion(*args, **kwargs):
        raise AssertionError("a region was built during lowering")

    for mod in (patterns, epilogue, fused_elementwise, add_rms_norm, moe_gating, moe_finalize, moe_experts):
        monkeypatch.setattr(mod, "fuse_ops", no_fusion)
    session = Session()
    lower(module, weights, "ascend910b2", session)
    assert session.declined == []
