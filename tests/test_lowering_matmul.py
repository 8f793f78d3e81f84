"""convert-nn-to-ascend, cube templates: nn.matmul and nn.fused matmul_epilogue, lowered,
simulated with ascendir.interpreter and compared with the numpy nn reference."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.session import make_context
from ascendir.dialects import ascend
from ascendir.errors import AscendirError
from ascendir.transforms.nn.fuse_matmul_epilogue import FuseMatmulEpilogue
from lowering_harness import check, lower_text, parse, printed, rand
from sampling import first_then_sampled


def matmul_text(a: tuple[int, ...], b: tuple[int, ...], out: tuple[int, ...], dt: str = "f32") -> str:
    def t(s):
        return f"tensor<{'x'.join(map(str, s))}x{dt}>"

    return f"""
func.func @main(%a: {t(a)} {{onnx.name = "a"}}, %b: {t(b)} {{onnx.name = "b"}}) -> ({t(out)} {{onnx.name = "y"}}) {{
  %y = nn.matmul %a, %b : ({t(a)}, {t(b)}) -> {t(out)}
  func.return %y : {t(out)}
}}"""


def epilogue_text(
    m: int, k: int, n: int, act: str | None, bias: bool = True, dt: str = "f32", batch: int = 0, residual: bool = False
) -> str:
    lead = f"{batch}x" if batch else ""
    a, out = f"tensor<{lead}{m}x{k}x{dt}>", f"tensor<{lead}{m}x{n}x{dt}>"
    b, c = f"tensor<{k}x{n}x{dt}>", f"tensor<{n}x{dt}>"
    lines = [f"%m = nn.matmul %a, %b : ({a}, {b}) -> {out}"]
    last = "%m"
    if bias:
        lines.append(f"%y = nn.add %m, %c : ({out}, {c}) -> {out}")
        last = "%y"
    if act:
        lines.append(f"%z = nn.{act} {last} : ({out}) -> {out}")
        last = "%z"
    skip = ""
    if residual:
        lines.append(f"%s = nn.add %r, {last} : ({out}, {out}) -> {out}")
        last, skip = "%s", f', %r: {out} {{onnx.name = "r"}}'
    body = "\n  ".join(lines)
    return f"""
func.func @main(%a: {a} {{onnx.name = "a"}}, %b: {b} {{onnx.name = "b"}}, %c: {c} {{onnx.name = "c"}}{skip}) -> ({out} {{onnx.name = "y"}}) {{
  {body}
  func.return {last} : {out}
}}"""


def fuse(text: str) -> str:
    module = parse(text)
    FuseMatmulEpilogue().apply(make_context(), module)
    return printed(module)


def kernels(module) -> list[ascend.KernelOp]:
    return [op for op in module.ops if isinstance(op, ascend.KernelOp)]


@pytest.mark.parametrize(
    "m,k,n",
    [(33, 47, 65), (1, 16, 16), (130, 300, 129), (257, 600, 70)],
)
def test_matmul_odd_shapes_fp32(m, k, n):
    check(matmul_text((m, k), (k, n), (m, n)), {"a": rand((m, k)), "b": rand((k, n))})


def test_matmul_fp16_multi_tile_multi_k_chunk():
    # K = 1100 > kL1 = 512: two full L1 chunks and a partial one with a partial base K block
    m, k, n = 200, 1100, 300
    lowered = check(
        matmul_text((m, k), (k, n), (m, n), "f16"),
        {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16)},
        rtol=2e-2,
        atol=2e-2,
    )
    (kernel,) = kernels(lowered)
    # 2 x 3 tiles of 128 x 128 would leave 18 of 24 AICs idle: the base tiles shrink to 64 x 64
    assert kernel.block_dim.value.data == 24
    assert kernel.core_type.data == "aic"


def test_matmul_batched_broadcast():
    a, b, out = (2, 1, 33, 47), (3, 47, 65), (2, 3, 33, 65)
    check(matmul_text(a, b, out), {"a": rand(a), "b": rand(b)})


def test_matmul_batch_folds_into_m_for_weights():
    a, b, out = (4, 9, 40), (40, 24), (4, 9, 24)
    lowered = check(matmul_text(a, b, out), {"a": rand(a), "b": rand(b)})
    (kernel,) = kernels(lowered)
    assert kernel.function_type.inputs.data[0].get_shape() == (36, 40)


def test_matmul_vector_operands():
    check(matmul_text((47,), (47, 65), (65,)), {"a": rand((47,)), "b": rand((47, 65))})
    check(matmul_text((2, 33, 47), (47,), (2, 33)), {"a": rand((2, 33, 47)), "b": rand((47,))})


def test_matmul_910a_fp16_goes_through_ub():
    m, k, n = 70, 90, 150
    lowered = check(
        matmul_text((m, k), (k, n), (m, n), "f16"),
        {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16)},
        target="ascend910a",
        rtol=2e-2,
        atol=2e-2,
    )
    text = printed(lowered)
    assert "#ascend<space fb>" not in text
    assert 'ascend.set_flag M -> V' in text and "ascend.set_flag V -> MTE3" in text


def test_matmul_910a_rejects_fp32():
    with pytest.raises(AscendirError, match=r"nn.matmul #0.*ascend910a.*no f32 mmad"):
        lower_text(matmul_text((16, 16), (16, 16), (16, 16)), target="ascend910a")


def test_lowering_numbers_an_op_as_choose_tiling_does():
    """`nn.matmul #n` is the op's place among the module's matmuls, in every pass: the lowering
    used to count every op of the block (this matmul, after a relu, was `nn.matmul #1` there and
    `#0` in choose-tiling's errors)."""
    t = "tensor<16x16xf32>"
    text = f"""
func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %r = nn.relu %a : ({t}) -> {t}
  %y = nn.matmul %r, %b : ({t}, {t}) -> {t}
  func.return %y : {t}
}}"""
    with pytest.raises(AscendirError, match=r"^nn.matmul #0: ascend910a"):
        lower_text(text, target="ascend910a")


@pytest.mark.parametrize("target", ["ascend910b2", "ascend910a"])
@pytest.mark.parametrize("act", first_then_sampled([None, "relu", "gelu", "silu"], keep=2))
def test_matmul_epilogue_fused_matches_unfused(target, act):
    text = epilogue_text(45, 70, 150, act, dt="f16", batch=2)
    inputs = {"a": rand((2, 45, 70), np.float16), "b": rand((70, 150), np.float16), "c": rand((150,), np.float16)}
    fused = fuse(text)
    assert "matmul_epilogue" in fused
    lowered = check(fused, inputs, target=target, rtol=2e-2, atol=2e-2)
    (kernel,) = kernels(lowered)
    expect_mix = target == "ascend910b2" and act in ("gelu", "silu")
    assert kernel.core_type.data == ("mix" if expect_mix else "aic")
    check(text, inputs, target=target, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("target", ["ascend910b2", "ascend910a"])
@pytest.mark.parametrize("act,bias", first_then_sampled([(None, False), ("relu", True), ("silu", True)]))
def test_matmul_epilogue_residual_matches_unfused(target, act, bias):
    """o_proj / down_proj + skip connection: one kernel (mix on 910B: the AIV adds the residual
    tile; 910A: added in UB before the only GM write), same values as matmul then add."""
    text = epilogue_text(45, 70, 150, act, bias=bias, dt="f16", batch=2, residual=True)
    inputs = {"a": rand((2, 45, 70), np.float16), "b": rand((70, 150), np.float16), "c": rand((150,), np.float16),
              "r": rand((2, 45, 150), np.float16)}
    fused = fuse(text)
    assert fused.count("nn.add") == 1 + bias and "nn.fused" in fused
    lowered = check(fused, inputs, target=target, rtol=2e-2, atol=2e-2)
    (kernel,) = kernels(lowered)
    assert kernel.core_type.data == ("mix" if target == "ascend910b2" else "aic")
    body = printed(lowered)
    assert body.count("ascend.vadd") == (1 if target == "ascend910b2" else 1 + bias)


def test_matmul_epilogue_fp32_bias_gelu_910b():
    text = epilogue_text(33, 47, 200, "gelu")
    inputs = {"a": rand((33, 47)), "b": rand((47, 200)), "c": rand((200,))}
    lowered = check(fuse(text), inputs)
    body = printed(lowered)
    assert "bias(" in body and "#ascend<space bt>" in body
    assert "ascend.vgelu" in body and "ascend.set_flag FIX -> MTE2" in body


def test_matmul_epilogue_activation_only_relu_in_fixpipe():
    text = epilogue_text(40, 40, 40, "relu", bias=False)
    lowered = check(fuse(text), {"a": rand((40, 40)), "b": rand((40, 40)), "c": rand((40,))})
    assert "relu = true" in printed(lowered)


def test_matmul_bias_row_fits_the_bias_table(tmp_path):
    """Issue 19: [1,40,120] x [120,6625] + bias in fp32 chose n = 384, whose bias row needs
    1536 bytes of BT (910B2 has 1024); the tiling model now counts BT, so choose-tiling picks
    a tile whose bias row fits, and the result matches onnxruntime."""
    import onnx
    from onnx import helper

    from ascendir.driver import compile_model
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.conversion.nn_to_ascend.tiling import Problem, Tiling, buffer_needs, candidates
    from onnx_builders import make_model, run_onnxruntime

    hw = load_target("ascend910b2")
    p = Problem(1, 40, 6625, 120, "f32", 4, 4, True)
    assert buffer_needs(p, Tiling(48, 384, 8), hw)["bt"] == 1536
    assert all(t.n * 4 <= hw.capacity("bt") for t in candidates(p, hw))
    rng = np.random.default_rng(19)
    x = rng.standard_normal((1, 40, 120)).astype(np.float32)
    init = {"w": (0.1 * rng.standard_normal((120, 6625))).astype(np.float32), "b": rng.standard_normal(6625).astype(np.float32)}
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
                       {"x": x}, ["y"], init)
    onnx.save(model, tmp_path / "m.onnx")
    module, weights = compile_model(tmp_path / "m.onnx", "ascend910b2")
    got = simulate(module, weights, {"x": x}, hw).outputs["y"]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})["y"], rtol=1e-3, atol=1e-4)


def _tiled(text: str, tiling: str) -> str:
    fields = ", ".join(f"{k} = {v} : i64" for k, v in (kv.split("=") for kv in tiling.split(",")))
    return text.replace("nn.matmul %a, %b :", f"nn.matmul %a, %b {{ascend.tiling = #ascend.tiling<{{{fields}}}>}} :", 1)


@pytest.mark.parametrize(
    "m,k,n,tiling",
    [
        (320, 64, 640, "m=64,n=128,k=32,l1_depth=2,split_k=1,swizzle=1"),  # one L1 chunk: first = last
        (320, 192, 640, "m=64,n=128,k=32,l1_depth=3,split_k=1,swizzle=1"),  # two chunks, odd L0 steps
        (330, 160, 640, "m=64,n=128,k=32,l1_depth=2,split_k=1,swizzle=1"),  # a middle chunk, a partial last one, partial rows
        (320, 208, 640, "m=64,n=128,k=32,l1_depth=2,split_k=1,swizzle=1,prefetch=1"),  # B prefetched by the AIVs
    ],
)
def test_matmul_fixpipe_halves_match_numpy(m, k, n, tiling):
    """Tiles run by L0C column halves (FixPipe drains one half while the cube works on the
    other, templates/matmul.py `_tile_halves`): two half-width FixPipe copies per tile, the same
    values as the nn reference (f16 operands, f32 accumulation), across several tiles per core."""
    text = _tiled(matmul_text((m, k), (k, n), (m, n), "f16"), tiling)
    lowered = check(text, {"a": rand((m, k), np.float16), "b": rand((k, n), np.float16)}, rtol=2e-2, atol=2e-2)
    body = printed(lowered)
    bm, bn = (int(tiling.split(f"{f}=")[1].split(",")[0]) for f in ("m", "n"))
    assert f"layout<nz2nd>}} : memref<{bm}x{bn // 2}xf32" in body
    assert f"layout<nz2nd>}} : memref<{bm}x{bn}xf32" not in body


def test_matmul_fixpipe_halves_batched_broadcast():
    """Column halves on a batched, broadcasting matmul (each output batch its own A and B)."""
    a, b, out = (2, 1, 260, 48), (3, 48, 128), (2, 3, 260, 128)
    text = _tiled(matmul_text(a, b, out, "f16"), "m=64,n=128,k=16,l1_depth=3,split_k=1,swizzle=1")
    lowered = check(text, {"a": rand(a, np.float16), "b": rand(b, np.float16)}, rtol=2e-2, atol=2e-2)
    assert "layout<nz2nd>} : memref<64x64xf32" in printed(lowered)


def test_matmul_fixpipe_halves_with_aiv_epilogue():
    """o_proj + residual (mix kernel: the AIV adds the residual once FixPipe wrote the tile):
    with column halves the AIV's flag follows the second half's copy; same values as unfused."""
    text = epilogue_text(520, 64, 256, "silu", bias=False, dt="f16", batch=2, residual=True)
    inputs = {"a": rand((2, 520, 64), np.float16), "b": rand((64, 256), np.float16), "c": rand((256,), np.float16),
              "r": rand((2, 520, 256), np.float16)}
    lowered = check(fuse(text), inputs, rtol=2e-2, atol=2e-2)
    (kernel,) = kernels(lowered)
    assert kernel.core_type.data == "mix"
    body = printed(lowered)
    assert "layout<nz2nd>} : memref<" in body and "ascend.set_flag FIX -> MTE2" in body
    tile = next(op for op in kernel.walk() if op.name == "ascend.alloc" and "l0c" in str(op.results[0].type))
    bm, bn = tile.results[0].type.get_shape()
    assert f"layout<nz2nd>}} : memref<{bm}x{bn // 2}xf32" in body


def test_matmul_fixpipe_halves_not_for_one_tile_per_core():
    """A core with one tile has no next tile to overlap FixPipe with: the full-width schedule
    (one FixPipe copy of the whole L0C tile), as the corpus models' small projections keep."""
    text = _tiled(matmul_text((70, 64), (64, 128), (70, 128), "f16"), "m=64,n=128,k=32,l1_depth=2,split_k=1,swizzle=1")
    lowered = check(text, {"a": rand((70, 64), np.float16), "b": rand((64, 128), np.float16)}, rtol=2e-2, atol=2e-2)
    body = printed(lowered)
    assert "layout<nz2nd>} : memref<64x128xf32" in body and "layout<nz2nd>} : memref<64x64xf32" not in body


def test_matmul_fixpipe_overlaps_the_cube():
    """3072 x 256 x 3072 f16 on 910B2, 128 x 256 tiles, K in one L1 chunk, every read an L2 hit:
    per tile 4 mmad steps (~2,130 cycles) and a FixPipe copy of 64 KiB at 32 B/cycle (~2,060,
    S4). With the tile's FixPipe time hidden behind the other half's mmads (`_tile_halves`) the
    kernel beats the single-accumulator schedule, whose tiles take at least mmad + FixPipe each
    (what it took before the halves)."""
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate

    hw = load_target("ascend910b2").with_l2_model("hit")
    m = n = 3072
    text = _tiled(matmul_text((m, 256), (256, n), (m, n), "f16"), "m=128,n=256,k=64,l1_depth=4,split_k=1,swizzle=1")
    rep = simulate(lower_text(text), None, {}, hw, timing_only=True).report
    tiles_per_core = (m // 128) * (n // 256) // hw.num_aic
    mmad = 4 * (8 * 16 * 4 + hw.cube.mmad_startup)  # 4 k-steps of 128 x 256 x 64 per tile
    fix = 128 * 256 * 2 / 32
    assert rep["total_cycles"] < 0.8 * tiles_per_core * (mmad + fix)
