"""A cheap block's GM check proved once per shape of its accesses (race.py `RaceChecker.proved`,
`_shifted`): later cheap blocks repeating a proved buffer's accesses, shifted by a multiple of
the views' largest stride, skip its check; any other shift or pattern is checked, with the full
check's verdict."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.check import race
from ascendir.interpreter.check.race import RaceChecker, _shifted

from test_interpreter_race import _full_and_followed

G = "memref<256x64xf16, #ascend<space gm>>"
G_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"
U = "memref<16x64xf16, #ascend<space ub>>"


def _module(blocks: int, body: str) -> str:
    return f'''builtin.module {{
  ascend.kernel @k(%a: {G}, %b: {G}) attributes {{block_dim = {blocks} : i64, core_type = #ascend.core_type<aiv>}} {{
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c48 = arith.constant 48 : index
    %bid = ascend.block_idx : index
    %ua = ascend.alloc : {U}
    %ub = ascend.alloc : {U}
{body}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) -> ({G} {{onnx.name = "z"}}) {{
    ascend.launch @k(%x, %x) : {G}, {G}
    func.return %x : {G}
  }}
}}'''


# each block writes GM rows 16 * block of %b (MTE3), then reads them back (MTE2) after a flag:
# a buffer two pipes touch, one writing, race-free, the same accesses per block moved by 16 rows
ROUND_TRIP = _module(4, f'''    %row = arith.muli %bid, %c16 : index
    %xs = memref.subview %a[%row, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %xs, %ua : {G_TILE}, {U}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.vadd %ua, %ua, %ub : {U}, {U}, {U}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    %zs = memref.subview %b[%row, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %ub, %zs : {U}, {G_TILE}
    ascend.set_flag MTE3 -> MTE2, 0
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.copy %zs, %ua : {G_TILE}, {U}''')

# %a and %b are one buffer: MTE3 writes rows 16 * (block + 1), then MTE2 reads rows 48..63 with no
# flag after the write: blocks 0 and 1 write rows 16..47 (race-free), block 2 rows 48..63 (write /
# read). Every cheap block's accesses differ from the last one's but for a shift: the proof of
# block 1's must not cover block 2's
LATE = _module(4, f'''    %b1 = arith.addi %bid, %c1 : index
    %rw = arith.muli %b1, %c16 : index
    %xs = memref.subview %a[%c48, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %xs, %ua : {G_TILE}, {U}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.vadd %ua, %ua, %ub : {U}, {U}, {U}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    %zw = memref.subview %b[%rw, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %ub, %zw : {U}, {G_TILE}
    %uc = ascend.alloc : {U}
    ascend.copy %xs, %uc : {G_TILE}, {U}''')


def _finish_checks(monkeypatch) -> dict[int, int]:
    """Per block, the `_check` calls its cheap block's `finish` makes, from now on."""
    per: dict[int, int] = {}
    finish, check = RaceChecker.finish, RaceChecker._check
    inside = [False]

    def finishing(self, complete):
        inside[0] = self.cheap is not None
        per.setdefault(self.block, 0)
        try:
            return finish(self, complete)
        finally:
            inside[0] = False

    def checking(self, *a, **k):
        if inside[0]:
            per[self.block] += 1
        return check(self, *a, **k)

    monkeypatch.setattr(RaceChecker, "finish", finishing)
    monkeypatch.setattr(RaceChecker, "_check", checking)
    return per


def test_a_proved_buffer_is_not_checked_again(monkeypatch):
    # block 1 (cheap) checks its round trip through GM and proves it; blocks 2 and 3 repeat it 16
    # rows on (a multiple of the 64-element row stride): no check. Same verdict as the full check
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float16)
    full, cheap = _full_and_followed(monkeypatch, ROUND_TRIP, {"x": x})
    assert full == cheap == "ok"
    per = _finish_checks(monkeypatch)
    full, cheap = _full_and_followed(monkeypatch, ROUND_TRIP, {"x": x})
    assert per[1] > 0 and per[2] == per[3] == 0, per


def test_a_later_pattern_is_checked(monkeypatch):
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float16)
    full, cheap = _full_and_followed(monkeypatch, LATE, {"x": x})
    assert "(block 2)" in full and "(write / read)" in full, full
    assert cheap == full


def _accesses(offsets: list[int], shapes: list[tuple], st: tuple = (10, 1)) -> list:
    """(log position, operand number, operand) of GM accesses to one buffer, the first a write."""
    return [(j, 0, (("gm", off, st), shape, j == 0)) for j, (off, shape) in enumerate(zip(offsets, shapes))]


@pytest.mark.parametrize("shift, same", [(20, True), (-30, True), (5, False), (7, False)])
def test_shifted_keys(shift, same):
    # views_overlap decomposes absolute offsets along the strides: a (1, 6) row view at 0 meets a
    # one-element view at 5 (its 6th element), at 5 it does not meet one at 10 (its 6th element,
    # 10, wraps into the next row, which the box decomposition does not see). Only shifts by a
    # multiple of the largest stride (10) keep every verdict: those alone keep the key
    ref: list = []
    shapes = [(1, 6), (1, 1)]
    a = _accesses([0, 5], shapes)
    b = _accesses([shift, 5 + shift], shapes)
    assert (_shifted(ref, a) == _shifted(ref, b)) is same
    assert race.views_overlap(0, (10, 1), (1, 6), 5, (10, 1), (1, 1))
    assert not race.views_overlap(5, (10, 1), (1, 6), 10, (10, 1), (1, 1))
