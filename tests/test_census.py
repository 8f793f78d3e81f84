"""The census of a launch's GM reads (interpreter/exec/census.py): super-tiles compute only the
rows some block reads over exactly their K slice, and a wrong census still gives exact results."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import census, deferred
from tests.blas_order import assert_same_sums

HW = load_target("ascend910b2")
M, K, N = 512, 2048, 1024


@functools.cache
def _tail_split():
    # 512 x 2048 x 1024 in 128 x 128 tiles on 24 AICs: a wave of 24 whole-K tiles (rows 0-383),
    # then the 8 tiles of rows 384-511 in 3 K ranges (templates/matmul.py tail split)
    from lowering_harness import lower_text, rand
    from test_choose_tiling import with_tiling
    from test_lowering_matmul import matmul_text

    module = lower_text(with_tiling(matmul_text((M, K), (K, N), (M, N), "f16"), "m=128,n=128,k=64,l1_depth=2,tail_split=3"))
    return module, {"a": rand((M, K), np.float16), "b": rand((K, N), np.float16, seed=1)}


def _flops(monkeypatch) -> list:
    flops = []
    once = deferred.CubeDeferral._once
    monkeypatch.setattr(deferred.CubeDeferral, "_once", lambda self, a, b: (flops.append(2 * a.shape[0] * a.shape[1] * b.shape[1]), once(self, a, b))[1])
    return flops


def test_a_tail_split_gemm_computes_the_products_its_tiles_ask_for(monkeypatch):
    # the whole-K super-tile (512 rows) computes rows 0-383 only, the K ranges rows 384-511 only:
    # 1.02x the GEMM's flops (the first tile alone besides) against 1.33x with every row; bit for
    # bit what each tile's own product gives, same report
    module, feeds = _tail_split()
    flops = _flops(monkeypatch)
    new = simulate(module, None, feeds, HW)
    assert sum(flops) <= 1.05 * 2 * M * N * K
    flops.clear()
    monkeypatch.setattr(census.Census, "rows", lambda self, *a: a[-4:-2])  # (r0, r1): every row
    simulate(module, None, feeds, HW)
    assert sum(flops) >= 1.25 * 2 * M * N * K
    monkeypatch.setattr(deferred, "_super", lambda ga, gb: None)
    old = simulate(module, None, feeds, HW)
    assert new.report == old.report
    (name,) = new.outputs
    assert_same_sums(new.outputs[name], old.outputs[name], feeds["a"], feeds["b"])


@pytest.mark.parametrize("wrong", ["top", "below", "one"])
def test_a_wrong_census_still_gives_the_tiles_bits(monkeypatch, wrong):
    # rows left out that tiles ask for are computed alone: the same sums whatever the census says
    # (bit for bit where the BLAS orders K independently of the shape: tests/blas_order.py)
    module, feeds = _tail_split()

    def rows(self, oa, ob, sa, sb, kc, k, kb, r0, r1, c0, c1):
        return {"top": (r0, r0 + 16), "below": (r0 + 128, r1), "one": (r0 + 1, r0 + 2)}[wrong]

    monkeypatch.setattr(census.Census, "rows", rows)
    new = simulate(module, None, feeds, HW)
    monkeypatch.undo()
    monkeypatch.setattr(deferred, "_super", lambda ga, gb: None)
    old = simulate(module, None, feeds, HW)
    assert new.report == old.report
    (name,) = new.outputs
    assert_same_sums(new.outputs[name], old.outputs[name], feeds["a"], feeds["b"])


def _census(reads: list, owners: dict) -> census.Census:
    """A census of `reads` = (root, first row, first column, rows, columns, block) in program
    order per block; roots are the keys of `owners` (root -> 2-D ndarray)."""
    streams, keys, blocks, ords, sid = [], [], [], [], {}
    n: dict = {}
    for root, r, c, h, w, b in reads:
        st = (owners[root].shape[1], 1)
        s = sid.setdefault((root, (h, w), st), len(streams))
        if s == len(streams):
            streams.append((root, (h, w), st))
        keys.append(s * (1 << 40) + r * st[0] + c)
        blocks.append(b)
        ords.append(n.get(b, 0))
        n[b] = ords[-1] + 1
    args = list(owners.values())
    tags = [(root, 0, (a.shape[1], 1)) for root, a in owners.items()]
    return census.Census(np.array(keys, np.int64), np.array(blocks, np.int64), np.array(ords, np.int64), 1 << 40, streams, args, tags)


def test_census_pairs_each_b_read_with_its_k_steps_a_read():
    a, b = np.zeros((64, 32), np.float16), np.zeros((32, 64), np.float16)
    reads = []
    for k0 in range(0, 32, 8):  # block 0: rows 0-15 x columns 0-15, whole K (8 per step)
        reads += [("A", 0, k0, 16, 8, 0), ("B", k0, 0, 8, 16, 0)]
    for k0 in range(0, 32, 8):  # block 1: rows 16-31 over columns 16-31 whole K, A re-read each step
        reads += [("A", 16, k0, 16, 8, 1), ("B", k0, 16, 8, 16, 1), ("A", 16, k0, 16, 8, 1)]
    # block 2: rows 32-47 x columns 0-15, K 0-15 only; then rows 48-63 x columns 32-47 whole K,
    # its B reads of one step twice
    reads += [("A", 32, 0, 16, 8, 2), ("B", 0, 0, 8, 16, 2), ("A", 32, 8, 16, 8, 2), ("B", 8, 0, 8, 16, 2)]
    for k0 in range(0, 32, 8):
        reads += [("A", 48, k0, 16, 8, 2), ("B", k0, 32, 8, 16, 2), ("B", k0, 32, 8, 16, 2)]
    c = _census(reads, {"A": a, "B": b})
    whole = lambda c0, c1, r0=0, r1=64: c.rows(a, b, 32, 64, 0, 32, 0, r0, r1, c0, c1)  # noqa: E731
    assert whole(0, 16) == (0, 16)  # (rows 32-47 read over K 0-15 only)
    assert whole(16, 32) == (16, 32)
    assert whole(0, 64) == (0, 64)
    assert whole(40, 64) == (48, 64)
    assert whole(0, 16, 8, 64) == (8, 16)
    assert whole(48, 64) == (0, 64)  # (none read there: every row)
    assert c.rows(a, b, 32, 64, 0, 16, 0, 0, 64, 0, 16) == (32, 48)  # the K piece 0-15: block 2's first tile only
    other = np.zeros((64, 32), np.float16)  # a buffer no read maps to: nothing seen
    assert c.rows(other, b, 32, 64, 0, 32, 0, 0, 64, 0, 16) == (0, 64)
