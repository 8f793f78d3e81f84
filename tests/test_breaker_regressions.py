"""Edge cases tried against the fp16 <-> fp32 conversions (ort_cast.py, wide.py), the timing closures
generated per form (memref_ops.py, loop_driver.py) and 512-row super-tiles (deferred.py):
outputs and reports held on all of them. One cost did not hold: a GEMM whose super-tile products
outgrew GRID_BYTES started over and computed them again for almost every tile (the last test).

- semantics.py `_store` of float32 into fp16 (ORT's Cast from CAST_ELEMENTS elements, else
  `narrow_f16`, then numpy's cast) against numpy's cast alone, bit for bit and with the same
  warnings: sizes around CAST_ELEMENTS, broadcast, strided and reversed views, inf / NaN (with
  payloads), values at 65504..65536 and at fp16's subnormal edges.
- Timing-only kernels whose loops have constant bounds too short to sample (accel/loop_driver.py
  `_steady_for`'s plain loop), alone and nested in a loop long enough to sample, and static
  subviews (memref_ops.py `_subview_timing_static`: non-zero static offsets, dropped dims, a
  row stride, out-of-bounds errors): the same report as every op run one by one (Accel.none())."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.interpreter.exec import semantics

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)

_EDGES = np.array([0.0, -0.0, 65504.0, -65504.0, 65519.996, 65520.0, 65536.0, np.inf, -np.inf, np.nan, 2.0**-24, 2.0**-25,
                   3 * 2.0**-26, 2.0**-14, 2.0**-14 - 2.0**-25, 1e-45, -1e-45, 2.0**-126], F32)


def _values(n: int, mode: str, rng: np.random.Generator) -> np.ndarray:
    """n float32 values of one kind (`mode`)."""
    if mode == "mixed":  # magnitudes from fp16's subnormals to near its overflow
        return (rng.standard_normal(n) * np.exp(rng.uniform(-25, 11, n))).astype(F32)
    if mode == "edges":
        return rng.choice(_EDGES, n)
    if mode == "nan_payloads":
        x = rng.standard_normal(n).astype(F32)
        v = x.view(np.uint32)
        v[::5] = rng.integers(0x7F800001, 0x7FFFFFFF, v[::5].size).astype(np.uint32)
        return x
    return (rng.standard_normal(n) * 1e-6).astype(F32)  # "tiny": fp16 subnormals


def _layout(x: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(fp16 destination, float32 value) of `x`'s shape laid out as `layout` says."""
    if layout == "strided_dst":
        return np.zeros(x.shape[:-1] + (2 * x.shape[-1],), F16)[..., ::2], x
    if layout == "strided_value":
        return np.empty(x.shape, F16), np.repeat(x, 2, axis=-1)[..., ::2]
    if layout == "reversed":
        return np.empty(x.shape, F16)[..., ::-1], x[..., ::-1]
    if layout == "broadcast":
        return np.empty(x.shape, F16), x[..., :1]
    return np.empty(x.shape, F16), x


@pytest.mark.parametrize("shape", [(4095,), (4096,), (4097,), (64, 64), (1, 4097), (3, 16, 129), (8193,)])
@pytest.mark.parametrize("mode", ["mixed", "edges", "nan_payloads", "tiny"])
@pytest.mark.parametrize("layout", ["plain", "strided_dst", "strided_value", "reversed", "broadcast"])
def test_store_is_numpys_cast_with_its_warnings(shape, mode, layout):
    rng = np.random.default_rng(zlib.crc32(repr((shape, mode, layout)).encode()))
    dst, value = _layout(_values(int(np.prod(shape)), mode, rng).reshape(shape), layout)
    want = np.empty(dst.shape, F16)
    with warnings.catch_warnings(record=True) as expected:
        warnings.simplefilter("always")
        np.copyto(want, value, casting="unsafe")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        semantics._store(dst, value)
    assert np.array_equal(np.ascontiguousarray(dst).view(np.uint16), want.view(np.uint16))
    assert [w.category for w in got] == [w.category for w in expected]


G = "memref<64x64xf16, #ascend<space gm>>"
U = "memref<8x64xf16, #ascend<space ub>>"
T = "memref<8x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"
T1 = "memref<64xf16, strided<[1], offset: ?>, #ascend<space gm>>"
U1 = "memref<64xf16, #ascend<space ub>>"
T7 = "memref<8x64xf16, strided<[448, 1], offset: ?>, #ascend<space gm>>"


def _kernel(body: str, blocks: int = 4) -> str:
    """A timing-only aiv kernel of `blocks` blocks running `body` (%a, %o: 64 x 64 GM; %u, %u1: UB)."""
    consts = "\n".join(f"    %c{n} = arith.constant {n} : index" for n in (0, 1, 2, 7, 8, 16))
    return f'''builtin.module {{
  ascend.kernel @k(%a: {G}, %o: {G}) attributes {{block_dim = {blocks} : i64, core_type = #ascend.core_type<aiv>}} {{
{consts}
    %bid = ascend.block_idx : index
    %u = ascend.alloc : {U}
    %u1 = ascend.alloc : {U1}
{body}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}, %y: {G} {{onnx.name = "y"}}) {{
    ascend.launch @k(%x, %y) : {G}, {G}
    func.return
  }}
}}'''


def _tiles(bounds: str, inner: str = "") -> str:
    """A loop over `bounds` copying 8-row tiles of %a to UB, adding and copying them to %o."""
    return f'''    scf.for %i = {bounds} {{
      %r = arith.muli %i, %c8 : index
      %s = memref.subview %a[%r, 0] [8, 64] [1, 1] : {G} to {T}
      ascend.copy %s, %u : {T}, {U}
      ascend.vadd %u, %u, %u : {U}, {U}, {U}
      %so = memref.subview %o[%r, 0] [8, 64] [1, 1] : {G} to {T}
      ascend.copy %u, %so : {U}, {T}
{inner}
    }}'''


def _inner(trips: int) -> str:
    """A constant loop of `trips` iterations copying a row of %a (the tile's first) to UB."""
    return f'''      %cn = arith.constant {trips} : index
      scf.for %j = %c0 to %cn step %c1 {{
        %q = arith.addi %j, %r : index
        %s2 = memref.subview %a[%q, 0] [1, 64] [1, 1] : {G} to {T1}
        ascend.copy %s2, %u1 : {T1}, {U1}
      }}'''


def _reports(text: str) -> list[dict]:
    """The timing-only reports of `text` with every speed-up and with none (their extrapolated
    iteration counts left out: those differ by design)."""
    from ascendir.hardware import load_target
    from ascendir.interpreter import Accel, build_report, compile_module
    from ascendir.interpreter.testing import parse

    hw = load_target("ascend910b2")
    got = []
    for accel in (Accel(), Accel.none()):
        _, recs = compile_module(parse(text), hw, None, timing_only=True, accel=accel).run({})
        rep = build_report(recs, hw)
        for k in rep["kernels"]:
            k["extrapolated_iterations"] = None
        got.append(rep)
    return got


@pytest.mark.parametrize("text", [
    *[_kernel(f"    %cn = arith.constant {n} : index\n" + _tiles("%c0 to %cn step %c1")) for n in (0, 1, 2, 7, 8)],
    _kernel(_tiles("%c1 to %c8 step %c2")),  # a constant step past 1
    _kernel(_tiles("%c7 to %c2 step %c1")),  # a lower bound past the upper: no iteration
    *[_kernel(f"    scf.for %t = %c0 to %c16 step %c1 {{\n{_tiles('%c0 to %c7 step %c1', _inner(n))}\n    }}") for n in (0, 1, 2, 7)],
    _kernel(f'''    %s = memref.subview %a[8, 0] [8, 64] [1, 1] : {G} to {T}
    ascend.copy %s, %u : {T}, {U}
    %s2 = memref.subview %a[56, 3] [1, 61] [1, 1] : {G} to memref<61xf16, strided<[1], offset: ?>, #ascend<space gm>>
    %s3 = memref.subview %a[%bid, 0] [8, 64] [7, 1] : {G} to {T7}
    ascend.copy %s3, %u : {T7}, {U}
    %so = memref.subview %o[%bid, 0] [1, 64] [1, 1] : {G} to {T1}
    ascend.copy %u1, %so : {U1}, {T1}'''),
], ids=[*[f"const{n}" for n in (0, 1, 2, 7, 8)], "step2", "empty", *[f"nested{n}" for n in (0, 1, 2, 7)], "static_subviews"])
def test_short_constant_loops_and_static_subviews_as_unaccelerated(text):
    fast, plain = _reports(text)
    assert fast["total_cycles"] > 0
    assert fast == plain


@pytest.mark.parametrize("offsets, blocks, message", [
    ("[57, 0]", 4, "offset 57, size 8, stride 1 in a dim of 64"),  # static offset past the end
    ("[%r, 0]", 5, "offset 64, size 8, stride 1 in a dim of 64"),  # dynamic: block 4's
])
def test_timed_subview_bounds_errors(offsets, blocks, message):
    from ascendir.hardware import load_target
    from ascendir.interpreter import compile_module
    from ascendir.interpreter.testing import parse

    text = _kernel(f'''    %r = arith.muli %bid, %c16 : index
    %s = memref.subview %a{offsets} [8, 64] [1, 1] : {G} to {T}
    ascend.copy %s, %u : {T}, {U}''', blocks)
    prog = compile_module(parse(text), load_target("ascend910b2"), None, timing_only=True)
    with pytest.raises(AscendirError, match=f"memref.subview in kernel @k: out of bounds on dim 0: {message}"):
        prog.run({})


def test_super_tile_products_do_not_thrash_when_over_their_bound(monkeypatch):
    """A GEMM whose super-tile products outgrow GRID_BYTES (exec/deferred.py `_product`): the
    products computed stay within 1.5x its useful flops. Scaled down: 2048 x 512 x 4096 fp16
    (8 MiB of fp32 product per 256 rows) under a 16 MiB bound, as the 7B layer's gate and up
    projections (11008 columns) are under 256 MiB from ~6,000 tokens."""
    from xdsl.parser import Parser

    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.interpreter.exec import deferred
    from ascendir.session import make_context
    from ascendir.weights import WeightStore

    m, k, n = 2048, 512, 4096
    a, w, o = f"tensor<{m}x{k}xf16>", f"tensor<{k}x{n}xf16>", f"tensor<{m}x{n}xf16>"
    text = (f"func.func @main(%x: {a}) -> {o} {{\n  %w = nn.weight @w : {w}\n"
            f"  %y = nn.matmul %x, %w : ({a}, {w}) -> {o}\n  func.return %y : {o}\n}}")
    hw = load_target("ascend910b2")
    module = Parser(make_context(), "builtin.module {" + text + "\n}").parse_module()
    run_passes(module, parse_pipeline(None, "O2"))
    weights = WeightStore()
    lower(module, weights, hw.name)
    rng = np.random.default_rng(0)
    wv = (rng.standard_normal((k, n)) * 0.02).astype(F16)
    weights.add("w", wv)
    x = rng.standard_normal((m, k)).astype(F16)
    flops = []
    once = deferred.CubeDeferral._once
    monkeypatch.setattr(deferred, "GRID_BYTES", 16 << 20)
    monkeypatch.setattr(deferred.CubeDeferral, "_once", lambda self, ga, gb: flops.append(2 * ga.shape[0] * ga.shape[1] * gb.shape[1]) or once(self, ga, gb))
    out = np.asarray(next(iter(simulate(module, weights, {"arg0": x}, hw).outputs.values())))
    np.testing.assert_allclose(out.astype(F32), x.astype(F32) @ wv.astype(F32), rtol=2e-2, atol=2e-2)
    assert sum(flops) <= 1.5 * 2 * m * k * n


def test_a_super_tile_is_dropped_once_every_tile_of_it_was_read():
    """exec/deferred.py `_product`: a super-tile's product is kept until as many elements were
    read from it as it has (its first tile, computed alone, counted), then dropped: the bytes it
    held (`grid_bytes`) are free for the GEMM's next super-tiles."""
    from ascendir.interpreter.exec import deferred
    from ascendir.interpreter.exec.wide import GmShadows

    rng = np.random.default_rng(3)
    a = rng.standard_normal((256, 512)).astype(F16)
    b = rng.standard_normal((512, 512)).astype(F16)  # one super-tile: 256 x 512
    cube = deferred.CubeDeferral([])
    cube.reset(GmShadows())
    ref = a.astype(F32) @ b.astype(F32)
    tiles = [(i, j) for i in (0, 128) for j in (0, 128, 256, 384)]
    for n, (i, j) in enumerate(tiles):
        got = cube._product(a[i: i + 128], b[:, j: j + 128])
        np.testing.assert_allclose(got, ref[i: i + 128, j: j + 128], rtol=1e-5, atol=1e-4)
        held = n not in (0, len(tiles) - 1)  # the first alone; the last read frees it
        assert bool(cube.grids) == held and cube.grid_bytes == (256 * 512 * 4 if held else 0)
