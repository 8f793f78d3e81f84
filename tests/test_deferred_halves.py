"""Deferred L0C sums of a GEMM run by L0C column halves (templates/matmul.py `_tile_halves`: the
first and the last L1 chunk of a tile by column halves, the middle chunks full width) stay one K
run per element (exec/deferred.py `_regroup`: halves merged into the full tile, the full tile
split back into halves; `CubeDeferral._flush_sums`: FixPipe of one half leaves the other
recorded). A regrouping that is not provable (halves of other A rows, B columns that do not
continue each other, other K rows) is refused and the sums are materialised as recorded."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.exec import deferred
from tests.blas_order import assert_same_sums

HW = load_target("ascend910b2")
U = 2.0**-24  # fp32 unit roundoff
K_STEP = 32
C_STRIDE = 128  # row stride (elements) of the L0C buffer of the unit tests


def _halves_module(m: int, k: int, n: int, tiling: str):
    from lowering_harness import lower_text
    from test_lowering_matmul import _tiled, matmul_text

    return lower_text(_tiled(matmul_text((m, k), (k, n), (m, n), "f16"), tiling))


def _within_bound(got: np.ndarray, ref: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Two fp32 sums of a @ b (K terms each) rounded to fp16: within 2 gamma_K sum |a||b| plus an fp16 ulp."""
    k = a.shape[1]
    bound = 2 * k * U / (1 - k * U) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    bound += np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    assert (np.abs(got.astype(np.float64) - ref.astype(np.float64)) <= bound).all()


@pytest.mark.parametrize("m, k, n, bm, bn, bk, depth", [
    (320, 288, 640, 64, 128, 32, 3),  # first, middle, last chunk of 96
    (330, 160, 640, 64, 128, 32, 2),  # a partial last chunk, partial rows
    (512, 1024, 1024, 128, 128, 64, 4),  # halves 128 x 1024 x 64: super-tile blocks
])
def test_column_halves_sum_each_element_in_one_k_run(monkeypatch, m, k, n, bm, bn, bk, depth):
    module = _halves_module(m, k, n, f"m={bm},n={bn},k={bk},l1_depth={depth},split_k=1,swizzle=1")
    rng = np.random.default_rng(m + k)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    runs = []
    orig = deferred.CubeDeferral._sum

    def summed(self, acc, c, terms):
        runs.append((acc, c.shape, [ga.shape[1] for ga, *_ in deferred._runs(terms)]))
        return orig(self, acc, c, terms)

    monkeypatch.setattr(deferred.CubeDeferral, "_sum", summed)
    new = simulate(module, None, {"a": a, "b": b}, HW)
    # every L0C half is written once, from one product over the whole K (before: its first and last
    # chunk apart from the middle ones, three products added)
    assert runs and all(not acc and shape == (bm, bn // 2) and ks == [k] for acc, shape, ks in runs), runs[:8]
    monkeypatch.setattr(deferred.CubeDeferral, "_sum", orig)
    old = simulate(module, None, {"a": a, "b": b}, HW, accel=Accel.none())
    assert new.report == old.report
    (name,) = new.outputs
    _within_bound(new.outputs[name], old.outputs[name], a, b)


def test_refused_regrouping_materialises_the_halves(monkeypatch):
    # the fallback: with no regrouping the halves' sums are written when the full-width mmads
    # meet them, as recorded; the same values within the bound, the same report
    m, k, n, tiling = 320, 288, 640, "m=64,n=128,k=32,l1_depth=3,split_k=1,swizzle=1"
    module = _halves_module(m, k, n, tiling)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    monkeypatch.setattr(deferred, "_regroup", lambda *args: False)
    shapes = []
    orig = deferred.CubeDeferral._sum
    monkeypatch.setattr(deferred.CubeDeferral, "_sum", lambda self, acc, c, terms: (shapes.append(c.shape), orig(self, acc, c, terms))[1])
    new = simulate(module, None, {"a": a, "b": b}, HW)
    assert (64, 128) in shapes and (64, 64) in shapes  # the middle chunk's full-width sums apart from the halves'
    old = simulate(module, None, {"a": a, "b": b}, HW, accel=Accel.none())
    assert new.report == old.report
    (name,) = new.outputs
    _within_bound(new.outputs[name], old.outputs[name], a, b)


# -- `_regroup` on hand-made sums: an L0C buffer of 64 x 128, A 128 x 96 and B 128 x 512 in GM --------
def _operands(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((128, 96)).astype(np.float16), rng.standard_normal((128, 512)).astype(np.float16)


def _terms(a: np.ndarray, b: np.ndarray, row: int, col: int, width: int, b_k0: int = 0) -> list:
    """The terms of a region's sum over three K steps of K_STEP: rows [row, row + 64) of A,
    columns [col, col + width) of B, B's K rows from b_k0 (address tags of row-major buffers)."""
    out = []
    for kk in range(0, 3 * K_STEP, K_STEP):
        kb = b_k0 + kk
        out.append((a[row: row + 64, kk: kk + K_STEP], b[kb: kb + K_STEP, col: col + width],
                    ("A", row * a.shape[1] + kk, (a.shape[1], 1)), ("B", kb * b.shape[1] + col, (b.shape[1], 1))))
    return out


def _region(c: np.ndarray, col: int, width: int, acc: bool, terms: list) -> tuple:
    return (col, (64, width), (C_STRIDE, 1)), [acc, c[:, col: col + width], terms, (0, col, 64, width, C_STRIDE)]


def _materialise(got: dict) -> None:
    cube = deferred.CubeDeferral([])
    for acc, c, terms, _ in got.values():
        cube._sum(acc, c, terms)


def test_regroup_merges_side_by_side_halves_into_one_sum():
    a, b = _operands()
    c = np.full((64, C_STRIDE), np.nan, np.float32)
    got = dict([_region(c, 0, 64, False, _terms(a, b, 0, 0, 64)), _region(c, 64, 64, False, _terms(a, b, 0, 64, 64))])
    key, region = _region(c, 0, 128, True, [])
    assert deferred._regroup(got, key, region[1], region[3])
    assert list(got) == [key] and got[key][0] is False and len(got[key][2]) == 3
    assert [t[1].shape for t in got[key][2]] == [(K_STEP, 128)] * 3
    (run,) = deferred._runs(got[key][2])  # the three K steps: one run over both halves' columns
    assert run[0].shape == (64, 96) and run[1].shape == (96, 128)
    _materialise(got)
    assert_same_sums(c, a[:64].astype(np.float32) @ b[:96, :128].astype(np.float32), a[:64], b[:96, :128])


def test_regroup_splits_a_sum_into_column_ranges():
    a, b = _operands(1)
    c = np.full((64, C_STRIDE), np.nan, np.float32)
    c[:, :] = 1.0  # accumulated onto
    got = dict([_region(c, 0, 128, True, _terms(a, b, 0, 128, 128))])  # B's columns 128 .. 255
    key, region = _region(c, 32, 64, True, [])  # the middle: three ranges
    assert deferred._regroup(got, key, region[1], region[3])
    assert sorted(e[3][1:4:2] for e in got.values()) == [(0, 32), (32, 64), (96, 32)] and got[key][3] == region[3]
    assert all(e[0] is True for e in got.values())
    _materialise(got)
    p = a[:64].astype(np.float64) @ b[:96, 128:256].astype(np.float64)
    bound = 2 * 96 * U / (1 - 96 * U) * (np.abs(a[:64].astype(np.float64)) @ np.abs(b[:96, 128:256].astype(np.float64)))
    assert (np.abs(c - (1.0 + p)) <= bound + U * np.abs(1.0 + p)).all()  # (and the rounding of the addition)


@pytest.mark.parametrize("what, right", [
    ("B columns that do not continue the left half's", lambda a, b: _terms(a, b, 0, 128, 64)),
    ("halves of different tiles (other A rows)", lambda a, b: _terms(a, b, 64, 64, 64)),
    ("B's K rows one step on in the right half", lambda a, b: _terms(a, b, 0, 64, 64, b_k0=K_STEP)),
    ("a term fewer in the right half", lambda a, b: _terms(a, b, 0, 64, 64)[:2]),
    ("another accumulate flag", None),
])
def test_regroup_refuses_halves_that_are_not_one_tile(what, right):
    a, b = _operands(2)
    c = np.zeros((64, C_STRIDE), np.float32)
    left = _region(c, 0, 64, False, _terms(a, b, 0, 0, 64))
    other = _region(c, 64, 64, True, _terms(a, b, 0, 64, 64)) if right is None else _region(c, 64, 64, False, right(a, b))
    got = dict([left, other])
    before = {k: (e[0], list(e[2])) for k, e in got.items()}
    key, region = _region(c, 0, 128, True, [])
    assert not deferred._regroup(got, key, region[1], region[3]), what
    assert {k: (e[0], list(e[2])) for k, e in got.items()} == before


def test_regroup_refuses_regions_of_other_rows():
    a, b = _operands(3)
    c = np.zeros((64, C_STRIDE), np.float32)
    got = dict([_region(c, 0, 128, False, _terms(a, b, 0, 0, 128))])
    # rows 0 .. 31 of the region's left half: not a column range of it
    assert not deferred._regroup(got, (0, (32, 64), (C_STRIDE, 1)), c[:32, :64], (0, 0, 32, 64, C_STRIDE))
    assert len(got) == 1


def test_flushing_one_half_leaves_the_other_recorded():
    a, b = _operands(4)
    c = np.zeros((64, C_STRIDE), np.float32)
    cube = deferred.CubeDeferral([])
    cube.sums["l0c"] = dict([_region(c, 0, 64, False, _terms(a, b, 0, 0, 64)), _region(c, 64, 64, False, _terms(a, b, 0, 64, 64))])
    cube._flush_sums("l0c", ("l0c", 16 * C_STRIDE, (C_STRIDE, 1)), c[16:32, :64])  # rows 16 .. 31 of the left half
    assert [e[3][1] for e in cube.sums["l0c"].values()] == [64] and (c[:, 64:] == 0).all()
    assert_same_sums(c[:, :64], a[:64].astype(np.float32) @ b[:96, :64].astype(np.float32), a[:64], b[:96, :64])
    cube._flush_sums("l0c", ("l0c", 0, (C_STRIDE, 1)), c[:, :].reshape(1, 64, C_STRIDE))  # not a 2-D view: everything
    assert "l0c" not in cube.sums
    assert_same_sums(c[:, 64:], a[:64].astype(np.float32) @ b[:96, 64:128].astype(np.float32), a[:64], b[:96, 64:128])
