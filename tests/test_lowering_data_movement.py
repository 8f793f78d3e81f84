"""convert-nn-to-ascend, data movement: reshape/expand views, transpose, slice, concat, expand,
gather — simulated vs the numpy nn reference (bit exact)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendir.conversion.nn_to_ascend.templates import data_movement as dm
from ascendir.dialects import ascend
from ascendir.errors import AscendirError
from lowering_harness import check, lower_text, module, printed, rand, ty


def kernels(m):
    return [op for op in m.ops if isinstance(op, ascend.KernelOp)]


def one_op(op: str, x_shape, out_shape, attrs: str = "", dt: str = "f32") -> str:
    return module(
        [("x", x_shape, dt)],
        f"%y = nn.{op} %x {attrs} : ({ty(x_shape, dt)}) -> {ty(out_shape, dt)}",
        ("y", out_shape, dt),
    )


def test_reshape_and_layout_preserving_expand_are_free():
    text = module(
        [("x", (2, 3, 4), "f32")],
        """%r = nn.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %e = nn.expand %r : (tensor<6x4xf32>) -> tensor<1x6x4xf32>
  %y = nn.identity %e : (tensor<1x6x4xf32>) -> tensor<1x6x4xf32>""",
        ("y", (1, 6, 4), "f32"),
    )
    lowered = check(text, {"x": rand((2, 3, 4))}, exact=True)
    assert kernels(lowered) == []
    assert "ascend.view" in printed(lowered)


@pytest.mark.parametrize(
    "shape,perm",
    [
        ((33, 47), [1, 0]),
        ((2, 32, 4, 16), [0, 2, 1, 3]),  # head split: rows of 64 B -> vtranspose
        ((4, 3, 256), [1, 0, 2]),  # rows of 1 KiB: [t, C] slabs, the permutation in the addresses
        ((64, 48, 160), [1, 0, 2]),
        ((2, 33, 5, 128), [0, 2, 1, 3]),  # head split with 512 B rows
        ((2, 5, 7, 3), [3, 1, 0, 2]),
        ((1, 8, 1, 9), [2, 0, 3, 1]),  # only unit dims move around 8x9 -> transposes 8 and 9
        ((3, 1, 5), [1, 0, 2]),  # a unit dim moves: a view
        ((600, 130), [1, 0]),  # several tiles with partial edges
    ],
)
def test_transpose(shape, perm):
    out = tuple(shape[p] for p in perm)
    perm_s = ", ".join(map(str, perm))
    lowered = check(one_op("transpose", shape, out, f"{{perm = array<i64: {perm_s}>}}"), {"x": rand(shape)}, exact=True)
    if shape == (3, 1, 5):
        assert kernels(lowered) == []
    if shape in ((4, 3, 256), (64, 48, 160), (2, 33, 5, 128)):
        assert "ascend.vtranspose" not in printed(lowered)


def test_transpose_fp16_and_int():
    check(one_op("transpose", (9, 70), (70, 9), "{perm = array<i64: 1, 0>}", "f16"), {"x": rand((9, 70), np.float16)}, exact=True)
    x = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    check(one_op("transpose", (2, 3, 4), (4, 2, 3), "{perm = array<i64: 2, 0, 1>}", "i64"), {"x": x}, exact=True)


@pytest.mark.parametrize(
    "shape,starts,steps,out",
    [
        ((10, 20), [2, 3], [1, 1], (5, 17)),
        ((10, 20), [1, 0], [2, 3], (4, 7)),
        ((2, 32, 64), [0, 0, 32], [1, 1, 1], (2, 32, 32)),  # rotary half
        ((50,), [7], [5], (9,)),
    ],
)
def test_slice(shape, starts, steps, out):
    attrs = f"{{starts = array<i64: {', '.join(map(str, starts))}>, steps = array<i64: {', '.join(map(str, steps))}>}}"
    check(one_op("slice", shape, out, attrs), {"x": rand(shape)}, exact=True)


@pytest.mark.parametrize(
    "shape,starts,out",
    [
        ((6, 3, 8), [2, 0, 0], (3, 3, 8)),  # rows of the outer dim (an LSTM's time steps)
        ((1, 1, 40), [0, 0, 16], (1, 1, 8)),  # unit leading dims: a run of the last one
        ((2, 4, 5), [1, 2, 0], (1, 2, 5)),  # one outer index, a row block inside it
    ],
)
def test_contiguous_slice_is_a_view_not_a_kernel(shape, starts, out):
    attrs = f"{{starts = array<i64: {', '.join(map(str, starts))}>, steps = array<i64: 1, 1, 1>}}"
    lowered = check(one_op("slice", shape, out, attrs), {"x": rand(shape)}, exact=True)
    assert kernels(lowered) == []
    assert "memref.subview" in printed(lowered)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
# no example database: it would be written into the checkout (.hypothesis/), by every xdist worker
@settings(max_examples=300, deadline=None, database=None)
def test_contiguous_window_is_the_slice(in_shape, data):
    """Where contiguous_window answers, the flat run it names is exactly numpy's slice."""
    starts, out = [], []
    for d in in_shape:
        a = data.draw(st.integers(0, d - 1))
        starts.append(a)
        out.append(data.draw(st.integers(1, d - a)))
    window = dm.contiguous_window(in_shape, out, starts, [1] * len(in_shape))
    x = np.arange(math.prod(in_shape)).reshape(in_shape)
    want = x[tuple(slice(a, a + n) for a, n in zip(starts, out))]
    if window is None:
        assert not np.array_equal(np.sort(want.ravel()), np.arange(want.ravel()[0], want.ravel()[0] + want.size))
    else:
        off, count = window
        np.testing.assert_array_equal(x.ravel()[off:off + count].reshape(out), want)


def test_slice_beside_an_in_place_cache_append_stays_a_copy():
    """A view reads its source when its consumer runs; nn.cache_append writes the cache in place
    in between, so slices of a function with one are copied where they stand."""
    text = module(
        [("c", (1, 2, 8, 4), "f32"), ("n", (1, 2, 1, 4), "f32")],
        """%s = nn.slice %c {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x8x4xf32>) -> tensor<1x1x8x4xf32>
  %p = nn.cache_append %c, %n {axis = 2 : i64, offset = 3 : i64} : (tensor<1x2x8x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x8x4xf32>
  %q = nn.slice %p {starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : (tensor<1x2x8x4xf32>) -> tensor<1x1x8x4xf32>
  %y = nn.add %s, %q : (tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32>""",
        ("y", (1, 1, 8, 4), "f32"),
    )
    c, n = rand((1, 2, 8, 4)), rand((1, 2, 1, 4))
    lowered = check(text, {"c": c, "n": n}, exact=True)
    assert any(k.sym_name.data.startswith("slice") for k in kernels(lowered))


def test_slice_negative_step_is_a_clear_error():
    attrs = "{starts = array<i64: 9>, steps = array<i64: -1>}"
    with pytest.raises(AscendirError, match=r"nn.slice #0: negative slice steps"):
        lower_text(one_op("slice", (10,), (10,), attrs))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat(axis):
    a, b = [2, 3, 4], [2, 3, 4]
    b[axis] = 5
    out = list(a)
    out[axis] = a[axis] + b[axis]
    text = module(
        [("a", tuple(a), "f32"), ("b", tuple(b), "f32")],
        f"%y = nn.concat %a, %b, %a {{axis = {axis} : i64}} : ({ty(a, 'f32')}, {ty(b, 'f32')}, {ty(a, 'f32')}) -> "
        f"{ty([o + (a[axis] if i == axis else 0) for i, o in enumerate(out)], 'f32')}",
        ("y", tuple(o + (a[axis] if i == axis else 0) for i, o in enumerate(out)), "f32"),
    )
    check(text, {"a": rand(tuple(a)), "b": rand(tuple(b), seed=1)}, exact=True)


def test_concat_of_differently_tiled_parts_fits_ub():
    """The parts' tiles [rows, cols] differ ([1, 64·40·40] wide, [64, 40] tall); the shared UB
    buffer took the most rows of one and the most columns of the other (204800 bytes > 910B2's
    196608): ConvTranspose and Pad concatenate such parts."""
    a, b = (1, 64, 40, 40), (1, 64, 1, 40)
    text = module(
        [("a", a, "f32"), ("b", b, "f32")],
        f"%y = nn.concat %a, %b {{axis = 2 : i64}} : ({ty(a, 'f32')}, {ty(b, 'f32')}) -> {ty((1, 64, 41, 40), 'f32')}",
        ("y", (1, 64, 41, 40), "f32"),
    )
    check(text, {"a": rand(a), "b": rand(b, seed=1)}, exact=True)


def test_expand_replicates():
    lowered = check(one_op("expand", (3, 1, 5), (2, 3, 4, 5)), {"x": rand((3, 1, 5))}, exact=True)
    assert "ascend.vcopy" in printed(lowered)


@pytest.mark.parametrize("idx_dt", ["i64", "i32"])
def test_gather_embedding(idx_dt):
    text = module(
        [("t", (50, 24), "f32"), ("i", (2, 7), idx_dt)],
        f"%y = nn.gather %t, %i {{axis = 0 : i64}} : (tensor<50x24xf32>, {ty((2, 7), idx_dt)}) -> tensor<2x7x24xf32>",
        ("y", (2, 7, 24), "f32"),
    )
    idx = np.random.default_rng(0).integers(-50, 50, (2, 7)).astype(np.int64 if idx_dt == "i64" else np.int32)
    lowered = check(text, {"t": rand((50, 24)), "i": idx}, exact=True)
    assert "ascend.gather_rows" in printed(lowered)


def test_gather_scalar_index_and_inner_axis():
    text = module(
        [("x", (1, 6, 8), "f32"), ("i", (), "i64")],
        "%y = nn.gather %x, %i {axis = 1 : i64} : (tensor<1x6x8xf32>, tensor<i64>) -> tensor<1x8xf32>",
        ("y", (1, 8), "f32"),
    )
    check(text, {"x": rand((1, 6, 8)), "i": np.array(-1, np.int64)}, exact=True)
    text = module(
        [("x", (3, 6, 4), "f32"), ("i", (5,), "i64")],
        "%y = nn.gather %x, %i {axis = 1 : i64} : (tensor<3x6x4xf32>, tensor<5xi64>) -> tensor<3x5x4xf32>",
        ("y", (3, 5, 4), "f32"),
    )
    check(text, {"x": rand((3, 6, 4)), "i": np.array([0, 5, 2, 2, -3], np.int64)}, exact=True)
