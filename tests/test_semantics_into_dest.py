"""The vector semantics' direct paths (interpreter/exec/semantics.py): elementwise ops writing
their dest directly (out=), compare / select into the dest, ufunc reductions without numpy's
wrappers, blocks of 8 float32 reduced by elementwise passes. Each must store the bits the
plain path stores (compute a temporary, then `_store` it); the plain path still serves the
other cases, and its errors stay the ones raised."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ascendir.interpreter.exec import semantics
from ascendir.interpreter.exec.semantics import BINARY, REDUCE, SCALAR, vcmp, vsel

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
RNG = np.random.default_rng(7)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _wide_range(shape) -> np.ndarray:
    """float32 values over many magnitudes (sums whose order shows in the rounding)."""
    return (RNG.standard_normal(shape) * 10.0 ** RNG.integers(-6, 7, shape)).astype(F32)


def _spy(monkeypatch) -> list[bool]:
    """What each `_blocks_of_8` call returned (True: the blocks were reduced by it)."""
    seen: list[bool] = []
    orig = semantics._blocks_of_8

    def spy(*a):
        seen.append(orig(*a))
        return seen[-1]

    monkeypatch.setattr(semantics, "_blocks_of_8", spy)
    return seen


# -- blocks of 8 ------------------------------------------------------------------------------
def test_block_sum_of_8_adds_in_numpys_pairwise_order(monkeypatch):
    seen = _spy(monkeypatch)
    x = _wide_range((64, 96))
    x[3] = -0.0  # a row of -0s: numpy's sum adds them to its identity +0
    x[5, :8] = [np.inf, 1, 2, 3, 4, 5, 6, 7]
    dst = np.full((64, 12), 7, F32)
    REDUCE["vblock_reduce_sum"](None)(x, dst)
    assert seen == [True]
    assert _bits(dst) == _bits(np.sum(x.reshape(64, 12, 8), axis=-1))
    assert not np.signbit(dst[3]).any()


def test_block_max_of_8_gives_numpys_max(monkeypatch):
    seen = _spy(monkeypatch)
    x = _wide_range((64, 96))
    x[7, :8] = [-0.0, 0.0, -0.0, -1, -2, 0.0, -0.0, -3]  # ties of zeros: left to numpy
    dst = np.zeros((64, 12), F32)
    REDUCE["vblock_reduce_max"](None)(x, dst)
    assert _bits(dst) == _bits(np.max(x.reshape(64, 12, 8), axis=-1))
    assert seen == [False]  # (the block of zeros)
    x[7, :8] = 1
    REDUCE["vblock_reduce_max"](None)(x, dst)
    assert seen == [False, True]
    assert _bits(dst) == _bits(np.max(x.reshape(64, 12, 8), axis=-1))


def test_block_max_with_several_nans_is_numpys(monkeypatch):
    """Which NaN numpy's max returns is its reduction's business: elementwise passes pick
    another one here, so the block goes back to numpy's reduction."""
    seen = _spy(monkeypatch)
    x = _wide_range((4, 16))
    x[1, :8] = [np.nan, 1, 2, 3, 4, np.nan, 6, 7]
    x.view(np.uint32)[1, 0] |= 5  # a NaN of another payload first
    dst = np.zeros((4, 2), F32)
    REDUCE["vblock_reduce_max"](None)(x, dst)
    assert seen == [False]
    assert _bits(dst) == _bits(np.max(x.reshape(4, 2, 8), axis=-1))


@pytest.mark.parametrize("op, fn", [("vblock_reduce_sum", np.sum), ("vblock_reduce_max", np.max)])
def test_other_blocks_take_numpys_reduction(monkeypatch, op, fn):
    """fp16 blocks (16 elements, computed in float32), a strided source: numpy's reduction."""
    seen = _spy(monkeypatch)
    h = RNG.standard_normal((8, 64)).astype(F16)
    dst = np.zeros((8, 4), F16)
    REDUCE[op](None)(h, dst)
    assert _bits(dst) == _bits(fn(h.astype(F32).reshape(8, 4, 16), axis=-1).astype(F16))
    x = _wide_range((8, 64))[:, ::2]  # strided (its blocks reshaped as a strided view)
    out = np.zeros((8, 4), F32)
    REDUCE[op](None)(x, out)
    assert _bits(out) == _bits(fn(x.reshape(8, 4, 8), axis=-1))
    assert seen == []


# -- whole-row reductions ---------------------------------------------------------------------
@pytest.mark.parametrize("op, fn", [("vreduce_sum", np.sum), ("vreduce_max", np.max), ("vreduce_min", np.min),
                                    ("vreduce_prod", np.prod)])
@pytest.mark.parametrize("dt", [F32, np.dtype(np.int8)])
def test_row_reductions_are_numpys(op, fn, dt):
    x = (_wide_range((16, 12)) if dt == F32 else RNG.integers(-100, 100, (16, 12))).astype(dt)
    dst = np.zeros((16, 1), dt)
    REDUCE[op](None)(x, dst)
    ref = np.zeros((16, 1), dt)
    np.copyto(ref, fn(x, axis=-1, keepdims=True), casting="unsafe")  # (int8 sums wrap as stored)
    assert _bits(dst) == _bits(ref)


# -- elementwise into the dest ----------------------------------------------------------------
@pytest.mark.parametrize("op, fn", [("vadd", np.add), ("vsub", np.subtract), ("vmul", np.multiply),
                                    ("vdiv", np.divide), ("vmax", np.maximum), ("vmin", np.minimum)])
def test_binary_writes_the_dest_as_the_copy_would(op, fn):
    a, b = _wide_range((64, 96)), _wide_range((64, 1))
    a[0, :4] = [np.nan, -0.0, np.inf, 0.0]
    b[1] = 0.0
    with np.errstate(all="ignore"):
        ref = fn(a, b)
        dst = np.zeros((64, 96), F32)
        BINARY[op](None)(a, b, dst)  # broadcast operand
        assert _bits(dst) == _bits(ref)
        BINARY[op](None)(a, b, a)  # in place
        assert _bits(a) == _bits(ref)
        buf = _wide_range(200)  # the dest overlaps an operand shifted by one element
        x, y = buf[1:].copy(), buf[:-1].copy()
        BINARY[op](None)(buf[1:], y, buf[:-1])
        assert _bits(buf[:-1]) == _bits(fn(x, y))


def test_binary_integer_division_truncates():
    a = np.array([[-7, 7, -8, 9]], np.int32)
    b = np.array([[2, -2, 3, 3]], np.int32)
    dst = np.zeros((1, 4), np.int32)
    BINARY["vdiv"](None)(a, b, dst)
    assert dst.tolist() == [[-3, -3, -2, 3]]


def test_binary_mixed_types_compute_as_before():
    """fp16 operands into an fp32 dest, bf16 operands: the plain path (promotion, bf16 in f32)."""
    h = RNG.standard_normal((4, 8)).astype(F16)
    x = _wide_range((4, 8))
    dst = np.zeros((4, 8), F32)
    BINARY["vadd"](None)(h, x, dst)
    assert _bits(dst) == _bits(h + x)
    bf = semantics.BF16
    p, q = h.astype(bf), x.astype(bf)
    out = np.zeros((4, 8), bf)
    BINARY["vmul"](None)(p, q, out)
    assert _bits(out) == _bits((p.astype(F32) * q.astype(F32)).astype(bf))


def test_binary_shape_error_is_the_stores():
    a, b = _wide_range((4, 8)), _wide_range((4, 8))
    with pytest.raises(ValueError, match="could not broadcast"):
        BINARY["vadd"](None)(a, b, np.zeros((4, 1), F32))


@pytest.mark.parametrize("op, fn", [("vmuls", lambda x, s: x * np.float32(s)), ("vadds", lambda x, s: x + np.float32(s)),
                                    ("vmaxs", np.maximum), ("vmins", np.minimum)])
def test_scalar_ops_write_the_dest(op, fn):
    s = 0.088388346135616302
    run = SCALAR[op](SimpleNamespace(scalar=SimpleNamespace(value=SimpleNamespace(data=s))))
    x = _wide_range((64, 96))
    ref = fn(x, s)
    run(x, x)
    assert _bits(x) == _bits(ref)
    h = RNG.standard_normal((4, 8)).astype(F16)  # fp16: computed in float32, rounded as stored
    dst = np.zeros((4, 8), F16)
    run(h, dst)
    assert _bits(dst) == _bits(fn(h.astype(F32), s).astype(F16))


def test_compare_into_a_bool_dest():
    run = vcmp(SimpleNamespace(cmp=SimpleNamespace(data="gt")))
    a, b = _wide_range((1, 96)), _wide_range((64, 1))
    dst = np.zeros((64, 96), bool)
    run(a, b, dst)
    assert np.array_equal(dst, a > b)
    with pytest.raises(ValueError, match="could not broadcast"):
        run(a, b, np.zeros((64, 1), bool))


def test_select_into_its_false_operand():
    """vsel %c, %a, %b, %b (the attention mask): `a` copied where `c` holds, NaN and -0 bits kept."""
    cond = RNG.random((64, 96)) < 0.5
    a = np.array([[-3.4028234663852886e38]], F32)
    b = _wide_range((64, 96))
    b[0, :3] = [np.nan, -0.0, np.inf]
    ref = np.where(cond, a, b)
    vsel(None)(cond, a, b, b)
    assert _bits(b) == _bits(ref)
    other = _wide_range((64, 96))  # a dest of its own: np.where
    dst = np.zeros((64, 96), F32)
    vsel(None)(cond, other, b, dst)
    assert _bits(dst) == _bits(np.where(cond, other, b))


def _select_cases():
    """(cond, a, dest) cases of vsel %c, %a, %d, %d: one value, a full tile, a row (broadcast),
    `a` overlapping the dest, a strided dest, a broadcast mask."""
    b = _wide_range((64, 96))
    b[0, :3] = [np.nan, -0.0, np.inf]
    cond = RNG.random((64, 96)) < 0.5
    full = _wide_range((64, 96))
    full[1, :3] = [np.nan, -0.0, -np.inf]
    wide = _wide_range((64, 192))
    yield cond, np.array([[-0.0]], F32), b.copy()
    yield cond, full, b.copy()
    yield cond, full[:1], b.copy()
    yield cond, full[::-1].copy(), b.copy()
    yield cond, wide[:, ::2].copy(), wide[:, ::2]  # strided dest
    yield cond[:1], full, b.copy()  # (1, 96) mask
    overlap = b.copy()
    yield cond, overlap[::-1], overlap  # `a` is the dest reversed


def test_select_into_its_false_operand_all_cases():
    for cond, a, dst in _select_cases():
        ref = np.where(cond, a, dst)
        vsel(None)(cond, a, dst, dst)
        assert _bits(dst) == _bits(ref)


# -- mmad into its accumulator ------------------------------------------------------------------
def _mmad(init: int):
    return semantics.mmad(SimpleNamespace(init=SimpleNamespace(value=SimpleNamespace(data=init))))


@pytest.mark.parametrize("mkn", [(128, 128, 96), (128, 96, 128), (64, 256, 64)])
def test_mmad_writes_a_contiguous_accumulator_as_the_copy_would(mkn):
    """init mmad on float32 operands into a C-contiguous float32 c: the bits of `a @ b` (the
    product computed into c directly); c strided, or accumulating, as before."""
    m, k, n = mkn
    a, b = _wide_range((m, k)), _wide_range((k, n))
    want = a @ b
    c = np.full((m, n), 5, F32)
    _mmad(1)(a, b, c)
    assert _bits(c) == _bits(want)
    # a strided accumulator (an L0C view): numpy's matmul into it would leave BLAS, other sums
    big = np.full((m, 2 * n), 5, F32)
    _mmad(1)(a, b, big[:, :n])
    assert _bits(big[:, :n]) == _bits(want) and (big[:, n:] == 5).all()
    acc = np.ones((m, n), F32)
    _mmad(0)(a, b, acc)
    assert _bits(acc) == _bits(np.float32(1) + want)


def test_mmad_into_an_operand_it_reads():
    """c the same buffer as a (square tiles): the product of the values before the write."""
    a = _wide_range((64, 64))
    b = _wide_range((64, 64))
    want = a @ b
    _mmad(1)(a, b, a)
    assert _bits(a) == _bits(want)


def test_mmad_shape_error_is_the_stores():
    with pytest.raises(ValueError):
        _mmad(1)(_wide_range((8, 16)), _wide_range((16, 8)), np.zeros((8, 4), F32))


# -- unary ops into the dest ------------------------------------------------------------------
def _unary_plain(fn, x: np.ndarray) -> np.ndarray:
    """What the plain path computed before the direct one: the temporaries of numpy's own
    expressions (x * (1 / (1 + exp(-x))) for silu)."""
    with np.errstate(all="ignore"):
        return {"vexp": np.exp, "vsigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
                "vsilu": lambda v: v * (1.0 / (1.0 + np.exp(-v)))}[fn](x)


@pytest.mark.parametrize("op", ["vexp", "vsigmoid", "vsilu"])
def test_unary_writes_the_dest_as_the_copy_would(op):
    x = (RNG.standard_normal((64, 128)) * 40).astype(F32)
    x[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40]
    want = _unary_plain(op, x)
    run = semantics.UNARY[op](None)
    for dst in (np.full((64, 128), 7, F32), np.full((64, 256), 7, F32)[:, ::2]):  # contiguous, strided
        with np.errstate(all="ignore"):
            run(x, dst)
        assert _bits(dst) == _bits(want)
    with np.errstate(all="ignore"):
        run(x, x)  # in place
    assert _bits(x) == _bits(want)


def test_unary_fp16_and_broadcast_take_the_plain_path():
    x = RNG.standard_normal((1, 128)).astype(F16)
    dst = np.zeros((4, 128), F32)
    semantics.UNARY["vsilu"](None)(x, dst)
    want = _unary_plain("vsilu", x.astype(F32))
    assert _bits(dst) == _bits(np.broadcast_to(want, (4, 128)))
