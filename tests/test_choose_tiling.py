"""choose-tiling: the analytic search, the `ascend.tiling` attribute the matmul template obeys
(base tiles, L1 depth, split-K, swizzle), forced tilings and their fit errors."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.session import make_context
from ascendir.dialects import ascend, nn
from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.transforms.nn.choose_tiling import ChooseTiling
from ascendir.conversion.nn_to_ascend.tiling import TILING_ATTR, Problem, Tiling, candidates, check_fits, estimate, misfit, parse_tiling, search, split_misfit, splits_of, tiling_from_attr
from lowering_harness import check, lower_text, parse, printed, rand
from test_lowering_matmul import epilogue_text, fuse, kernels, matmul_text


def with_tiling(text: str, spec: str) -> str:
    """`text` after choose-tiling with `spec` forced on every matmul."""
    module = parse(text)
    ChooseTiling(tiling=spec).apply(make_context(), module)
    return printed(module)


def l1_shapes(module) -> set[tuple[int, ...]]:
    return {
        tuple(op.result.type.get_shape())
        for k in kernels(module)
        for op in k.walk()
        if isinstance(op, ascend.AllocOp) and ascend.space_of(op.result.type).value == "l1"
    }


@pytest.mark.parametrize(
    "m,k,n,spec",
    [
        (130, 300, 129, "m=64,n=64,k=32,l1_depth=3,split_k=2"),  # ragged K split, odd depth
        (200, 100, 90, "m=32,n=32,k=16,l1_depth=1,swizzle=3"),  # 7 tile rows: last group of 1
        (96, 520, 48, "m=16,n=16,k=16,l1_depth=5,split_k=3,swizzle=2"),
    ],
)
def test_forced_tilings_compute_the_same_product(m, k, n, spec):
    text = with_tiling(matmul_text((m, k), (k, n), (m, n), "f16"), spec)
    lowered = check(text, {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16)}, rtol=2e-2, atol=2e-2)
    t = Tiling(**{kv.split("=")[0]: int(kv.split("=")[1]) for kv in spec.split(",")})
    assert (t.m, t.k_l1) in l1_shapes(lowered)
    names = [k.sym_name.data for k in kernels(lowered)]
    assert any(n.startswith("matmul_split_k_reduce") for n in names) == (t.split_k > 1)


def test_split_k_f32_workspace_and_batch_fold():
    a, b, out = (3, 8, 256), (256, 40), (3, 8, 40)
    text = with_tiling(matmul_text(a, b, out), "m=16,n=32,k=32,l1_depth=2,split_k=4")
    lowered = check(text, {"a": rand(a), "b": rand(b)})
    mm = kernels(lowered)[0]
    # 4 partial [24, 40] f32 sums
    assert mm.function_type.inputs.data[2].get_shape() == (96, 40)


@pytest.mark.sampled
@pytest.mark.parametrize(
    "m,k,n,spec",
    [
        # 256 x 1024 f32 = 64 reduce tiles of 4096 on 48 AIVs: 16 of them reduce two tiles
        (256, 64, 1024, "m=128,n=128,k=32,split_k=2"),
        # 44 tiles on 24 AICs: 20 tail tiles in 4 pieces each, 80 pieces on 48 AIVs
        (512, 256, 1408, "m=128,n=128,k=32,l1_depth=2,tail_split=2"),
    ],
)
def test_f32_partials_reduce_races_no_store(m, k, n, spec):
    """An f32 result's split-K / tail reduction (templates/matmul.py `_sum_partials`) on AIVs
    that take more than one tile: the next tile's partial loads (MTE2) must not overwrite the
    buffer the previous tile's store (MTE3) reads. The sum was stored from the first partial's
    own UB buffer, ordered after the vector work only: the race check failed ('ascend.copy on
    MTE3 and ascend.copy on MTE2 touch overlapping bytes')."""
    text = with_tiling(matmul_text((m, k), (k, n), (m, n)), spec)
    lowered = check(text, {"a": rand((m, k)), "b": rand((k, n))})
    assert any("reduce" in kern.sym_name.data for kern in kernels(lowered))


def test_swizzled_gelu_epilogue_keeps_aic_and_aiv_order():
    text = with_tiling(fuse(epilogue_text(100, 64, 96, "gelu")), "m=16,n=32,k=32,swizzle=4")
    m, k, n = 100, 64, 96
    check(text, {"a": rand((m, k)), "b": rand((k, n)), "c": rand((n,))}, rtol=2e-3, atol=2e-3)


def test_split_k_refused_with_an_epilogue():
    text = fuse(epilogue_text(64, 256, 64, "relu"))
    module = parse(text)
    for op in module.walk():
        if isinstance(op, nn.MatmulOp):
            op.attributes[TILING_ATTR] = Tiling(16, 64, 32, 1, 2, 1).to_attr()
    with pytest.raises(AscendirError, match="split-K"):
        lower_text(printed(module))


def test_tile_that_does_not_fit_names_buffer_bytes_and_largest_fit():
    with pytest.raises(AscendirError) as e:
        with_tiling(matmul_text((512, 512), (512, 512), (512, 512), "f16"), "m=256,n=256,k=64,l1_depth=1")
    msg = str(e.value)
    assert "L0C" in msg and "262144" in msg and "131072" in msg and "largest tile that fits" in msg
    # the suggestion must itself fit
    fit = msg.split("largest tile that fits: ")[1]
    t = Tiling(**{kv.split("=")[0]: int(kv.split("=")[1]) for kv in fit.split(",")})
    check_fits(Problem(1, 512, 512, 512, "f16", 2), t, load_target("ascend910b2"))


def test_ir_text_tiling_attribute_is_obeyed():
    text = matmul_text((64, 256), (256, 96), (64, 96), "f16").replace(
        "-> tensor<64x96xf16>\n", "-> tensor<64x96xf16>\n", 1
    )
    module = parse(text)
    (mm,) = [o for o in module.walk() if isinstance(o, nn.MatmulOp)]
    mm.attributes[TILING_ATTR] = Tiling(32, 48, 64, 2).to_attr()
    again = printed(module)
    assert "ascend.tiling" in again
    lowered = lower_text(again)
    assert l1_shapes(lowered) == {(32, 128), (128, 48)}
    assert tiling_from_attr(mm.attributes[TILING_ATTR])["n"] == 48


def test_search_splits_k_for_decode_and_estimate_tracks_simulation():
    hw = load_target("ascend910b1")
    p = Problem(1, 16, 5120, 17408, "bf16", 2)
    res = search(p, hw)
    # 5120 / 128 = 40 tiles would take two uneven waves on 24 AICs; the weight-streaming AICs are
    # held to their 32 B/cycle HBM path: the search either splits K (even waves) or prefetches the
    # weight into L2 on the AIVs (the AIC then reads it at the L2 rate), whichever is cheaper
    assert res.best.split_k > 1 or res.best.prefetch == 1
    naive = estimate(p, Tiling(16, 128, 64, 4), hw)
    assert res.estimate.cycles < naive.cycles
    assert res.scored > 100
    # without the prefetch the search still evens the waves out by splitting K
    plain = min((t for t in candidates(p, hw) if not t.prefetch), key=lambda t: estimate(p, t, hw).cycles)
    assert plain.split_k > 1
    assert res.estimate.cycles < estimate(p, plain, hw).cycles


def test_search_keeps_large_base_tiles_for_square_gemm():
    res = search(Problem(1, 4096, 4096, 4096, "f16", 2), load_target("ascend910b2"))
    assert res.best.m * res.best.n >= 128 * 256 and res.best.split_k == 1


def test_cli_tiling_option(tmp_path):
    from click.testing import CliRunner

    from ascendir.api.cli import main

    src = tmp_path / "mm.mlir"
    src.write_text(matmul_text((64, 256), (256, 96), (64, 96), "f16"))
    out = tmp_path / "out.mlir"
    r = CliRunner().invoke(main, ["compile", str(src), "--emit", "nn", "--tiling", "m=32,n=48,k=32", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "m = 32" in out.read_text() and "n = 48" in out.read_text()
    r = CliRunner().invoke(main, ["compile", str(src), "--tiling", "m=512,n=512"])
    assert r.exit_code == 2 and "largest tile that fits" in r.output


def _suggested(msg: str) -> Tiling:
    fit = msg.split("largest tile that fits: ")[1]
    return Tiling(**{kv.split("=")[0]: int(kv.split("=")[1]) for kv in fit.split(",")})


@pytest.mark.parametrize("p,forced", [
    # L0C: m·n ≤ 32768 f32 elements; both 256 x 128 and 128 x 256 are that large (the old
    # halving suggested 128 x 192)
    (Problem(1, 1024, 1024, 1024, "f16", 2), Tiling(256, 384, 16, 1)),
    # llama_small's fp32 matmuls: L0B holds 2·k·256·4 B only up to k = 32, and then L1 takes
    # l1_depth 4 (393216 B); the old one suggested n=128, l1_depth=2
    (Problem(1, 128, 256, 1024, "f32", 4), Tiling(128, 256, 64, 4)),
])
def test_largest_fit_is_the_largest(p, forced):
    hw = load_target("ascend910b2")
    with pytest.raises(AscendirError) as e:
        check_fits(p, forced, hw)
    got = _suggested(str(e.value))
    check_fits(p, got, hw)  # fits
    ka = 32 // p.es
    best = max(
        (m * n, k, d)
        for m in range(16, forced.m + 1, 16) for n in range(16, forced.n + 1, 16)
        for k in range(ka, forced.k + 1, ka) for d in range(1, forced.l1_depth + 1)
        if misfit(p, Tiling(m, n, k, d), hw) is None
    )
    assert (got.m * got.n, got.k, got.l1_depth) == best
    assert got.m <= forced.m and got.n <= forced.n and got.k <= forced.k and got.l1_depth <= forced.l1_depth


def test_split_k_is_checked_against_k_chunks_and_the_reduce_kernels_ub():
    """split_k used to pass the fit check: 1000 ranges of a 1024-long K compiled (exit 0), 16
    failed only in lowering ("kernel matmul_split_k_reduce_0 needs 212992 bytes of UB") with no
    hint. Now both fail at choose-tiling with the largest split that works, which lowers."""
    hw = load_target("ascend910b2")
    p = Problem(1, 1024, 1024, 1024, "f16", 2)
    with pytest.raises(AscendirError, match=r"cannot split K = 1024 1000 ways: it has 16 chunks of k·l1_depth = 64; "
                                            r"largest tile that fits: m=128,n=256,k=64,l1_depth=1,split_k=8,swizzle=1$"):
        check_fits(p, Tiling(128, 256, 64, 1, 1000), hw)
    with pytest.raises(AscendirError) as e:
        check_fits(p, Tiling(128, 256, 64, 1, 16), hw)
    msg = str(e.value)
    assert "needs 270336 bytes of UB for its split-K reduction (16 f32 partial tiles), ascend910b2 has 196608" in msg
    fit = _suggested(msg)
    assert fit.split_k == 8 and splits_of(p, fit) == 8
    text = with_tiling(matmul_text((1024, 1024), (1024, 1024), (1024, 1024), "f16"), fit.text())
    names = [k.sym_name.data for k in kernels(lower_text(text))]
    assert any(n.startswith("matmul_split_k_reduce") for n in names)
    # 11 ranges of 4096 f32 fit the 192 KiB UB beside the output tile, f32 (a buffer of its own:
    # test_f32_partials_reduce_races_no_store) or f16
    assert split_misfit(Problem(1, 64, 64, 1536, "f32", 4), Tiling(64, 64, 8, 1, 11), hw) is None
    assert "212992 bytes of UB" in split_misfit(Problem(1, 64, 64, 1536, "f32", 4), Tiling(64, 64, 8, 1, 12), hw)
    assert "204800 bytes of UB" in split_misfit(Problem(1, 64, 64, 1536, "f16", 2), Tiling(64, 64, 16, 1, 12), hw)


def test_cli_split_k_beyond_k_fails_at_compile(tmp_path):
    from cli_helpers import assert_clean_error, run_cli

    src = tmp_path / "mm.mlir"
    src.write_text(matmul_text((1024, 1024), (1024, 1024), (1024, 1024), "f16"))
    assert_clean_error(run_cli("compile", src, "--emit", "nn", "--tiling", "split_k=1000"), "cannot split K = 1024 1000 ways",
                       "split_k=8")
    assert_clean_error(run_cli("run", src, "--timing-only", "--tiling", "split_k=16"), "bytes of UB for its split-K reduction",
                       "largest tile that fits")


@pytest.mark.parametrize("spec,why", [
    ("m=128,m=64", "key 'm' given twice"),
    ("m=128,,n=128", "empty entry"),
    ("m=128,", "empty entry"),
    ("br=64,br=32", "key 'br' given twice"),
])
def test_sloppy_tiling_specs_are_rejected(spec, why, tmp_path):
    from cli_helpers import assert_clean_error, run_cli

    with pytest.raises(AscendirError, match=why):
        parse_tiling(spec)
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_text((64, 256), (256, 96), (64, 96), "f16"))
    assert_clean_error(run_cli("compile", src, "--emit", "nn", "--tiling", spec), why)
    assert parse_tiling("m=128, n=64 ;br=16") == {"m": 128, "n": 64, "br": 16}
