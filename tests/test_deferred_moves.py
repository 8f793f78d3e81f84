"""The recording of L1 -> L0 copies of deferred cube data (interpreter/exec/deferred.py `_move`)
through its plans (`_plan`: which recorded regions of the L1 buffer, by region key, hold the box
a copy moves): a plan is kept per source tag and reused while its regions are recorded and not
stale, so a K loop's moves record the GM views of the loads made since, and a plan whose regions
were overwritten is searched again (or the copy runs, when no recorded regions hold its box)."""

from __future__ import annotations

import numpy as np

from ascendir.interpreter.exec import deferred

W = 16  # columns of the L1 buffer (two 8-column halves side by side)


def _never(*vals) -> None:
    raise AssertionError("a recorded copy does not fall back")


class _Walk:
    """One L1 buffer (4 x W), GM -> L1 loads into its boxes and L1 -> L0 moves of its boxes, on
    hand-made address tags (slot 0: GM source, 1: L1 box, 2: L0 destination)."""

    def __init__(self):
        self.tags = [None, None, None]
        self.cube = deferred.CubeDeferral(self.tags)
        self.ran = []  # the moves that fell back
        self.load = self.cube._load(None, _never, 0, 1)
        self.move = self.cube._move(None, lambda *vals: self.ran.append(vals), 1, 2)
        self.l1 = np.zeros((4, W), np.float32)

    def fill(self, gm: np.ndarray, gm_off: int, row: int, col: int, rows: int, cols: int) -> np.ndarray:
        """Load GM `gm` (its rows x cols box at element `gm_off`, row stride 64) into the L1 box at
        (row, col); the GM view."""
        r, c = divmod(gm_off, 64)
        g = gm[r: r + rows, c: c + cols]
        self.tags[0] = ("G", gm_off, (64, 1))
        self.tags[1] = ("L1", row * W + col, (W, 1))
        self.load(g, self.l1[row: row + rows, col: col + cols])
        return g

    def moved(self, row: int, col: int, rows: int, cols: int, dst: str = "L0") -> tuple | None:
        """Move the L1 box at (row, col) into a fresh L0 buffer `dst`: the recorded pieces (column,
        width, GM view, its tag), or None when the copy ran."""
        n = len(self.ran)
        self.tags[1] = ("L1", row * W + col, (W, 1))
        self.tags[2] = (dst, 0, (cols, 1))
        self.move(self.l1[row: row + rows, col: col + cols], np.zeros((rows, cols), np.float32))
        if len(self.ran) > n:
            return None
        return self.cube.copies[dst][(0, (rows, cols), (cols, 1))][3]


def _same(piece: tuple, col: int, g: np.ndarray, tag: tuple) -> None:
    c0, w, v, t = piece
    assert (c0, w) == (col, g.shape[1]) and t == tag
    assert v.shape == g.shape and v.base is g.base and v.__array_interface__["data"] == g.__array_interface__["data"]


def test_a_reused_plan_records_the_loads_made_since():
    # the K loop: the same L1 halves reloaded from other GM columns, the same boxes moved; a plan
    # holding the pieces it found (not the regions' keys) would record the first loads' views
    gm = np.arange(4 * 64 * 4, dtype=np.float16).reshape(-1, 64)
    w = _Walk()
    for k in range(3):
        left = w.fill(gm, 16 * k, 0, 0, 4, 8)
        right = w.fill(gm, 16 * k + 8, 0, 8, 4, 8)
        pieces = w.moved(1, 0, 2, W)  # across both halves
        _same(pieces[0], 0, left[1:3], ("G", 16 * k + 64, (64, 1)))
        _same(pieces[1], 8, right[1:3], ("G", 16 * k + 8 + 64, (64, 1)))
        (one,) = w.moved(0, 8, 4, 8, "L0b")  # inside the right half
        _same(one, 0, right, ("G", 16 * k + 8, (64, 1)))


def test_a_plan_whose_regions_were_replaced_is_searched_again():
    # the two halves' regions dropped by one load over the whole width (a new region key): the
    # plan's keys are gone, the box is found in the new region
    gm = np.arange(4 * 64 * 2, dtype=np.float16).reshape(-1, 64)
    w = _Walk()
    w.fill(gm, 0, 0, 0, 4, 8)
    w.fill(gm, 8, 0, 8, 4, 8)
    assert len(w.moved(0, 0, 4, W)) == 2
    whole = w.fill(gm, 32, 0, 0, 4, W)
    (one,) = w.moved(0, 0, 4, W)
    _same(one, 0, whole, ("G", 32, (64, 1)))


def test_a_plan_over_a_stale_region_falls_back():
    # a load over part of the right half leaves that region stale (its copy still materialises
    # before the new one): no recorded regions hold the box side by side, the copy runs (a plan
    # taken without checking staleness would record the stale half)
    gm = np.arange(4 * 64, dtype=np.float16).reshape(-1, 64)
    w = _Walk()
    w.fill(gm, 0, 0, 0, 4, 8)
    w.fill(gm, 8, 0, 8, 4, 8)
    assert len(w.moved(0, 0, 4, W)) == 2
    w.fill(gm, 40, 0, 12, 2, 4)
    assert w.moved(0, 0, 4, W) is None
    assert w.moved(0, 0, 4, 8) is not None  # (the left half's region is still recorded)


def test_a_plan_is_for_its_destination():
    # the same box moved into destinations of other tags: each recorded under its own region key
    gm = np.arange(4 * 64, dtype=np.float16).reshape(-1, 64)
    w = _Walk()
    g = w.fill(gm, 0, 0, 0, 4, W)
    w.moved(0, 0, 4, 8, "L0")
    w.tags[1] = ("L1", 0, (W, 1))
    w.tags[2] = ("L0", 32, (8, 1))
    w.move(w.l1[:, :8], np.zeros((4, 8), np.float32))
    assert sorted(w.cube.copies["L0"]) == [(0, (4, 8), (8, 1)), (32, (4, 8), (8, 1))]
    for piece in w.cube.copies["L0"].values():
        _same(piece[3][0], 0, g[:, :8], ("G", 0, (64, 1)))
