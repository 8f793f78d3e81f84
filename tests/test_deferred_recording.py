"""The recording closures of deferred cube data (interpreter/exec/deferred.py `_load`, `_mmad`)
on hand-made operands and address tags: a recorded GM load spans the elements race.py's
`extent` gives, and an mmad over B's pieces side by side records into the L0C view it is given
when its views over the pieces were kept for other operands."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.check.race import extent
from ascendir.interpreter.exec import deferred


def _never(*vals) -> None:
    raise AssertionError("recorded ops do not fall back")


@pytest.mark.parametrize("shape, strides", [((4, 6), (10, 1)), ((3, 5), (20, 2)), ((0, 6), (10, 1)), ((3, 0), (10, 1)),
                                            ((4, 6), (10,))])
def test_a_recorded_load_spans_the_elements_extent_gives(shape, strides):
    # the span a GM write is checked against (`CubeDeferral.gm`): race.py's extent of the tag,
    # empty rows or columns and a tag of other strides (one here) included
    gm = np.zeros(400, np.float16)
    s = gm[: shape[0] * shape[1]].reshape(shape)
    d = np.zeros(shape, np.float32)
    tags = [("A", 7, strides), ("l1", 0, (max(shape[1], 1), 1))]
    cube = deferred.CubeDeferral(tags)
    cube._load(None, _never, 0, 1)(s, d)
    assert cube.gm["A"] == list(extent(tags[0], shape))
    assert list(cube.copies["l1"]) == [(0, shape, tags[1][2])]


def test_a_recorded_load_widens_the_span_of_its_buffer():
    gm = np.zeros((8, 16), np.float16)
    tags = [None, ("l1", 0, (16, 1))]
    cube = deferred.CubeDeferral(tags)
    load = cube._load(None, _never, 0, 1)
    for off, rows in ((40, 2), (16, 1), (64, 3)):
        tags[0] = ("A", off, (16, 1))
        load(gm[:rows], np.zeros((rows, 16), np.float32))
    assert cube.gm["A"] == [16, 64 + 2 * 16 + 15]


def _unread(src, dst) -> None:
    """A recorded copy's materialisation where its destination is not looked at."""


def _b_in_pieces(cube: deferred.CubeDeferral, rng) -> tuple[np.ndarray, np.ndarray]:
    """Record an L0A region holding GM A (16 x 32) and an L0B region (32 x 16) holding two GM
    views of B's buffer side by side (a fused FFN's gate and up columns); their fp32 product."""
    a = rng.standard_normal((16, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    ga, gb1, gb2 = a[:, :], b[:, 0:8], b[:, 32:40]
    cube.copies["l0a"] = {(0, (16, 32), (32, 1)): (_unread, None, None, ((0, 32, ga, ("A", 0, (32, 1))),), (0, 0, 16, 32, 32))}
    cube.copies["l0b"] = {(0, (32, 16), (16, 1)): (_unread, None, None, ((0, 8, gb1, ("B", 0, (64, 1))), (8, 8, gb2, ("B", 32, (64, 1)))),
                                                   (0, 0, 32, 16, 16))}
    return a.astype(np.float32) @ np.concatenate([gb1, gb2], axis=1).astype(np.float32), b


def test_an_mmad_over_pieces_of_b_records_into_the_c_it_is_given():
    # `_mmad` keeps C's views over B's pieces while c and its tag are the same objects: a call
    # with another c (another L0C buffer, or the same buffer's other slot) records into that c
    rng = np.random.default_rng(0)
    tags = [("l0a", 0, (32, 1)), ("l0b", 0, (16, 1)), None]
    cube = deferred.CubeDeferral(tags)
    want, _ = _b_in_pieces(cube, rng)
    mmad = cube._mmad(_never, True, [0, 1, 2])
    a, b = np.zeros((16, 32), np.float32), np.zeros((32, 16), np.float32)
    c1 = np.full((16, 16), np.nan, np.float32)
    slots = np.full((16, 32), np.nan, np.float32)  # one L0C buffer of two 16 x 16 slots
    for c, tag in ((c1, ("C1", 0, (16, 1))), (c1, ("C1", 0, (16, 1))), (slots[:, :16], ("C2", 0, (32, 1))),
                   (slots[:, 16:], ("C2", 16, (32, 1)))):
        tags[2] = tag
        mmad(a, b, c)
    assert len(cube.sums["C1"]) == 2 and len(cube.sums["C2"]) == 4  # (per piece of B)
    cube.flush()
    for c in (c1, slots[:, :16], slots[:, 16:]):
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_an_mmad_of_an_unrecorded_operand_falls_back():
    rng = np.random.default_rng(1)
    tags = [("l0a", 0, (32, 1)), ("l0b", 0, (16, 1)), ("C", 0, (16, 1))]
    cube = deferred.CubeDeferral(tags)
    _b_in_pieces(cube, rng)
    ran = []
    mmad = cube._mmad(lambda *vals: ran.append(vals), True, [0, 1, 2])
    a, b, c = np.zeros((16, 32), np.float32), np.zeros((32, 16), np.float32), np.zeros((16, 16), np.float32)
    mmad(a, b, c)
    tags[0] = ("l0a", 16, (32, 1))  # another region of L0A: nothing recorded there
    mmad(a, b, c)
    assert len(ran) == 1 and ran[0][2] is c
