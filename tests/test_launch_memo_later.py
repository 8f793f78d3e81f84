"""The launch memo keeps a stored launch unbuilt (`memo.Later`) until a launch with its key looks
it up: never built when none does, built on the first look-up into the `Memo` an immediate build
gives, and owned by no run that can look it up once its run has ended."""

from __future__ import annotations

import gc

import numpy as np

from ascendir.hardware import load_target
from ascendir.interpreter import compile_module
from ascendir.interpreter.accel import memo
from ascendir.interpreter.testing import parse

from test_interpreter_steady import _chained_adds

HW = load_target("ascend910b2")


def _run(n: int, monkeypatch):
    """A timing-only run of n chained launches of one kernel; (program, Memo.build calls)."""
    calls = []
    build = memo.Memo.build.__func__
    monkeypatch.setattr(memo.Memo, "build", classmethod(lambda cls, *a: calls.append(1) or build(cls, *a)))
    prog = compile_module(parse(_chained_adds(n)), HW, None, timing_only=True)
    prog.run({})
    return prog, len(calls)


def _fields(m: memo.Memo) -> list:
    out = [m.cores, m.acct, m.skipped, m.hits, m.misses, m.streams, m.trace]
    for t in (m.checks, m.wchecks, m.touched, m.written):
        out += [None if a is None else a.tolist() for a in (t.stream, t.off, t.rel, t.out)]
    return out


def test_stored_launch_built_only_when_looked_up(monkeypatch):
    prog, built = _run(1, monkeypatch)
    (launches,) = prog.memo.values()
    assert built == 0 and [type(v) for v in launches.variants] == [memo.Later]
    prog, built = _run(3, monkeypatch)
    (launches,) = prog.memo.values()
    # launch 2 (reading launch 1's output from L2: another outcome than launch 1's fresh input)
    # builds launch 1's and is stored; launch 3 builds launch 2's, which serves it
    assert prog.memo_hits == 1 and built == 2
    assert [type(v) for v in launches.variants] == [memo.Memo, memo.Memo]


def test_later_build_equals_the_immediate_one(monkeypatch):
    prog, _ = _run(1, monkeypatch)
    (launches,) = prog.memo.values()
    later = launches.variants[0]
    got = later.build()
    want = memo.Memo.build(*later.args, prog, later.trace)
    assert _fields(got) == _fields(want) and got.owner is want.owner
    assert np.array_equal(got.checks.keys(np.arange(len(got.streams))), want.checks.keys(np.arange(len(want.streams))))


def test_later_of_an_ended_run_is_owned_by_no_run(monkeypatch):
    prog, _ = _run(1, monkeypatch)
    (launches,) = prog.memo.values()
    later = launches.variants[0]
    args = later.args
    # a stored launch that reaches a GM root no argument has (`foreign`) names its run as owner
    later.args = (*args[:5], [(object(), 0, (256, 1))] * len(args[5]), *args[6:])
    assert later.build().owner is prog
    prog.close()
    del prog, launches
    gc.collect()
    m = later.build()
    assert m.owner is not None  # an ended run's: applies in no run, not in any
