"""tail_split (catlass TailSplitK): the tiles of the last, partial wave over the AICs run as K
ranges spread over every AIC; their f32 partials leave through FixPipe in pieces into a GM
workspace and an AIV kernel adds them (templates/matmul.py `_tail_item`, `_emit_tail_reduce`).
Same product as without; the reduction finds every piece in L2; forced tilings it cannot take
are one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import scf

from ascendir.conversion.nn_to_ascend.tiling import TILING_ATTR, Problem, Tiling, fit_error, tail_geometry
from ascendir.dialects import ascend, nn
from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from lowering_harness import check, lower_text, parse, printed, rand
from test_choose_tiling import with_tiling
from test_lowering_matmul import epilogue_text, fuse, kernels, matmul_text


def fixpipe_widths(module) -> set[tuple[int, ...]]:
    """Shapes of the L0C -> GM copies of the cube kernel."""
    (mm,) = [k for k in kernels(module) if k.sym_name.data.startswith("matmul_") and "reduce" not in k.sym_name.data]
    return {tuple(op.source.type.get_shape()) for op in mm.walk()
            if isinstance(op, ascend.CopyOp) and ascend.space_of(op.source).value == "l0c"}


@pytest.mark.sampled
@pytest.mark.parametrize(
    "m,k,n,spec",
    [
        # 8 tiles on 24 AICs: no whole wave, every tile in 3 K ranges
        (256, 1024, 512, "m=128,n=128,k=64,l1_depth=2,tail_split=3"),
        # 32 tiles: one whole wave, then 8 tail tiles in 3 ranges (8 chunks: 3 + 3 + 2), column halves
        (512, 1024, 1024, "m=128,n=128,k=64,l1_depth=2,tail_split=3"),
        # the same with the AIVs prefetching B along the AIC's walk (whole tiles, then the ranges)
        (512, 1024, 1024, "m=128,n=128,k=64,l1_depth=2,tail_split=3,prefetch=1"),
        # 5 chunks in 2 ranges of 3 + 2, ragged last chunk (K = 1000)
        (256, 1000, 512, "m=128,n=64,k=64,l1_depth=3,tail_split=2"),
    ],
)
def test_tail_split_computes_the_same_product(m, k, n, spec):
    text = with_tiling(matmul_text((m, k), (k, n), (m, n), "f16"), spec)
    lowered = check(text, {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16)}, rtol=2e-2, atol=2e-2)
    names = [kern.sym_name.data for kern in kernels(lowered)]
    assert any(x.startswith("matmul_tail_reduce") for x in names)
    # the partial tiles leave in pieces the reduction reads back as they are (L2 hits)
    hw = load_target("ascend910b2")
    rep = simulate(lowered, None, {}, hw, timing_only=True).report
    (red,) = [kern for kern in rep["kernels"] if kern["name"].startswith("matmul_tail_reduce")]
    assert red["bytes"]["l2_hit"] == red["bytes"]["gm_read"] > 0


@pytest.mark.sampled
def test_tail_items_overlap_fixpipe_by_column_halves():
    """Ranges of two chunks or more run their first and last chunk by L0C column halves: the
    partial leaves as half-width pieces while the cube computes."""
    text = with_tiling(matmul_text((512, 1024), (1024, 1024), (512, 1024), "f16"), "m=128,n=128,k=64,l1_depth=2,tail_split=3")
    lowered = check(text, {"a": rand((512, 1024), np.float16), "b": rand((1024, 1024), np.float16)}, rtol=2e-2, atol=2e-2)
    assert (64, 64) in fixpipe_widths(lowered)  # 128 x 64 halves in pieces of 4096 f32 elements
    (mm,) = [kern for kern in kernels(lowered) if kern.sym_name.data.startswith("matmul_") and "reduce" not in kern.sym_name.data]
    loop = next(op for op in mm.walk() if isinstance(op, scf.ForOp))
    branch = next(op for op in loop.body.block.ops if isinstance(op, scf.IfOp))  # t < normal: whole tile, else a range
    widths = {op.b.type.get_shape()[1] for op in branch.false_region.walk() if isinstance(op, ascend.MmadOp)}
    assert widths == {64, 128}  # half-width mmads of the first / last chunk, whole ones between


def test_tail_geometry_spreads_the_partial_wave():
    hw = load_target("ascend910b2")
    p = Problem(1, 512, 4096, 4096, "f16", 2)
    # 2 x 32 tiles of 256 x 128 on 24 AICs: 16 in the partial wave, each in 3 ranges (48 items)
    assert tail_geometry(p, Tiling(256, 128, 64, 4, tail_split=3), hw) == (16, 3)
    assert tail_geometry(p, Tiling(256, 128, 64, 4), hw) is None
    # whole waves (4096 x 4096 at 256 x 256 would be 256 tiles; 128 x 128: 32 x 32 = 1024 = 42 x 24 + 16)
    assert tail_geometry(Problem(1, 3072, 1024, 1024, "f16", 2), Tiling(128, 128, 64, 4, tail_split=3), hw) is None


@pytest.mark.parametrize(
    "p,t,why",
    [
        (Problem(1, 3072, 1024, 1024, "f16", 2), Tiling(128, 128, 64, 4, tail_split=3), "no partial wave"),
        (Problem(1, 500, 1024, 1024, "f16", 2), Tiling(128, 128, 64, 4, tail_split=3), "whole tiles"),
        (Problem(1, 512, 1024, 1024, "f16", 2, epilogue=True), Tiling(128, 128, 64, 4, tail_split=3), "plain"),
        (Problem(1, 512, 1024, 256, "f16", 2), Tiling(128, 128, 64, 2, tail_split=3), "cannot split K"),
        (Problem(1, 512, 1024, 256, "f16", 2), Tiling(128, 128, 64, 4, tail_split=3), "it has 1 chunk of"),
    ],
)
def test_tail_split_misfits_name_the_reason(p, t, why):
    assert why in fit_error(p, t, load_target("ascend910b2"))
    assert "tail_split" in fit_error(p, t, load_target("ascend910b2")) or why in ("cannot split K", "it has 1 chunk of")


def test_tail_split_refused_on_a_coupled_chip_and_with_an_epilogue():
    assert "split-core" in fit_error(Problem(1, 512, 1024, 1024, "f16", 2), Tiling(128, 128, 64, 4, tail_split=3), load_target("ascend910a"))
    module = parse(fuse(epilogue_text(512, 1024, 1024, "relu", dt="f16")))
    for op in module.walk():
        if isinstance(op, nn.MatmulOp):
            op.attributes[TILING_ATTR] = Tiling(128, 128, 64, 2, tail_split=3).to_attr()
    with pytest.raises(AscendirError, match="tail_split = 3"):
        lower_text(printed(module))
    # forced (--tiling) on such a matmul: an error naming the reason, never silently dropped
    with pytest.raises(AscendirError, match="plain float matmul.*tail_split = 3"):
        with_tiling(fuse(epilogue_text(512, 1024, 1024, "relu", dt="f16")), "m=128,n=128,k=64,tail_split=3")


@pytest.mark.sampled
def test_search_splits_the_partial_wave_of_a_prefill_projection_and_it_runs_faster():
    """LLaMA-7B's down projection at prefill 512 (512 x 4096 x 11008, f16 weight) makes 64
    tiles of 256 x 128 on 24 AICs: 16 cores run 3, 8 run 2. The search splits the 16 tiles of
    the partial wave into K ranges over every AIC (its estimate scores the ranges and the
    reduction kernel), and the simulated kernels (cube + reduction) are faster than the same
    tiling without the split, as the estimate says. Candidates split only prefetching tilings
    (no runtime-B or warm-up ones: tiling.TAIL_SPLIT_CHOICES)."""
    from ascendir.conversion.nn_to_ascend.tiling import candidates, estimate, search, warms_a
    from test_matmul_nz_weight import weight_text

    hw = load_target("ascend910b2")
    p = Problem(1, 512, 4096, 11008, "f16", 2, b_nz=True)
    best = search(p, hw).best
    assert best.tail_split >= 2 and best.prefetch == 1
    whole = Tiling(**{**best.__dict__, "tail_split": 0})
    est = [estimate(p, t, hw).cycles for t in (best, whole)]
    assert est[0] < est[1]
    cyc = [simulate(lower_text(with_tiling(weight_text(512, 11008, 4096), t.text())), None, {}, hw, timing_only=True).report["total_cycles"]
           for t in (best, whole)]
    assert cyc[0] < 0.95 * cyc[1]
    for c, e in zip(cyc, est):  # the estimate tracks both within 10 %
        assert abs(e - c) / c < 0.10, (e, c)
    cands = list(candidates(p, hw, (1,)))
    assert any(t.tail_split for t in cands)
    assert all(t.prefetch and not warms_a(p, Tiling(**{**t.__dict__, "tail_split": 0}), hw) for t in cands if t.tail_split)
    # 512 x 4096 x 4096: the warm-up's tilings keep the partial wave's slack for it
    q = Problem(1, 512, 4096, 4096, "f16", 2, b_nz=True)
    assert search(q, hw).best.tail_split == 0 and warms_a(q, search(q, hw).best, hw)


def test_forced_modes_no_tile_takes_name_their_own_reason():
    """A forced split_k / prefetch / tail_split no tile of a matmul can take is shown on a tile
    that fits the buffers: the error gives the mode's reason (was: the L0B overflow of a default
    n = 256 tile of llama_small's gate matmul, an ffn_up), and split_k with tail_split suggests
    one of the two (was: "no tile fits")."""
    from pathlib import Path

    from cli_helpers import assert_clean_error, run_cli

    llama = Path(__file__).parent / "data" / "llama_small" / "model.onnx"
    line = assert_clean_error(run_cli("run", llama, "--timing-only", "--tiling", "prefetch=1"), "gate_proj", "cannot prefetch B")
    assert "L0B" not in line
    with pytest.raises(AscendirError, match=r"without split_k for tail_split = 3; largest tile that fits: tail_split=3,split_k=1"):
        with_tiling(matmul_text((512, 1024), (1024, 1024), (512, 1024), "f16"), "tail_split=3,split_k=2")
    # and the suggestion is honoured: the same product as onnxruntime's reference (numpy here)
    text = with_tiling(matmul_text((512, 1024), (1024, 1024), (512, 1024), "f16"), "tail_split=3,split_k=1")
    check(text, {"a": rand((512, 1024), np.float16), "b": rand((1024, 1024), np.float16)}, rtol=2e-2, atol=2e-2)
