"""A cheap block's GM log with its tags moved lazily (check/race.py `log_moved`, `moved_log`;
exec/data_loop_memo.py `replay` hands a stored K loop's log over unmoved): the tags the race
check reads are those the loop would have logged, and a block where two pipes touch a GM buffer,
one writing, is checked on the moved tags. Also the cached values of a checked block's decisions
a replay compares with (`ctl_values`)."""

from __future__ import annotations

import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.check.race import RaceChecker

from test_data_loop_memo import _counted, _template_gemm, root_namer

HW = load_target("ascend910b2")
ROOT = ("input", "x")  # a GM root (compiler.py tags an input so)


class _Frame:
    races = None
    slow_path = False


def _cheap_block(read_at: int, write_at: int, shift: int) -> RaceChecker:
    """A checker whose checked block 0 read 16 elements of ROOT at `read_at` on pipe 0 and wrote
    16 at `write_at` on pipe 1, unordered; block 1 runs cheap, its read logged as it is and its
    write logged at `write_at` to be moved by `shift`."""
    rc = RaceChecker("k", ["MTE2", "FIX"], frame=_Frame())
    assert not rc.reset(0)
    rc.access(0, [((ROOT, read_at, (1,)), (16,), False)], "ascend.copy", 0)
    rc.access(1, [((ROOT, write_at, (1,)), (16,), True)], "ascend.fixpipe", 0)
    rc.finish(True)
    assert rc.reset(1)  # (cheap: the frame is given, block 0 raised nothing)
    rc.gmlog.append([((ROOT, read_at, (1,)), (16,), False)])
    rc.log_moved([[((ROOT, write_at, (1,)), (16,), True)]], {ROOT: shift} if shift else {})
    return rc


def test_a_cheap_block_is_checked_on_its_moved_tags():
    # block 0's write (elements 32..47) misses its read (0..15); block 1's, moved by -32, meets it
    with pytest.raises(AscendirError, match=r"race in kernel @k \(block 1\): buffer GM input 'x'"):
        _cheap_block(0, 32, -32).finish(True)


def test_a_move_that_keeps_the_views_apart_raises_nothing():
    _cheap_block(0, 32, 16).finish(True)
    _cheap_block(0, 32, 0).finish(True)


def test_moved_log_gives_the_moved_tags():
    # (what a woken block (`_wake`) and a stored execution (`DataLoopMemo.stop`) read)
    rc = _cheap_block(0, 32, -32)
    other = ("input", "w")
    rc.log_moved([[((other, 5, (1,)), (4,), False), ((ROOT, 7, (1,)), (4,), True)]], {ROOT: 100})
    log = rc.moved_log()
    assert log == [[((ROOT, 0, (1,)), (16,), False)], [((ROOT, 0, (1,)), (16,), True)],
                   [((other, 5, (1,)), (4,), False), ((ROOT, 107, (1,)), (4,), True)]]
    assert rc.moved_log() == log  # (moved once)


def test_ctl_values_follow_the_checked_block_followed():
    rc = RaceChecker("k", ["V"], frame=_Frame())
    rc.cheap_ctl = [(True, 0), (False, 3)]
    assert rc.ctl_values() == [True, False]
    rc.cheap_ctl = [(False, 0)]
    assert rc.ctl_values() == [False]


def _cheap_logs(monkeypatch, on: bool, module, feeds) -> list:
    """Per cheap block, at its end, its GM log with tags moved, each root named by its first
    appearance (the runs with and without the memo have buffers of their own)."""
    named = root_namer()

    logs: list = []
    finish = RaceChecker.finish

    def logged(self, complete):
        if self.cheap is not None:
            logs.append([[(named(t), sh, w) for t, sh, w in ops] for ops in self.moved_log()])
        return finish(self, complete)

    with monkeypatch.context() as mp:
        counts = _counted(mp, on)
        mp.setattr(RaceChecker, "finish", logged)
        simulate(module, None, feeds, HW, check_races=True)
    return logs, counts


@pytest.mark.parametrize("m, k, n, tiling", [
    (384, 1024, 1536, "m=64,n=128,k=64,l1_depth=2,split_k=1,swizzle=1"),
])
def test_replays_in_cheap_blocks_log_what_the_loops_log(monkeypatch, m, k, n, tiling):
    module, feeds = _template_gemm(m, k, n, tiling)
    moves = []
    log_moved = RaceChecker.log_moved
    monkeypatch.setattr(RaceChecker, "log_moved", lambda self, log, shifts: (
        moves.append(bool(shifts)), log_moved(self, log, shifts))[1])
    new, counts = _cheap_logs(monkeypatch, True, module, feeds)
    assert counts["replayed"] > 0 and any(moves), (counts, moves)  # (tags moved lazily)
    old, _ = _cheap_logs(monkeypatch, False, module, feeds)
    assert new and any(new)
    assert new == old
