"""A stored launch of the launch memo (accel/memo.py) is built from its logs when it is first
looked at (`Launches.stored`), not when the launch ends: a launch that no later launch of its key
asks about costs no build, a reused one the same as before (the results are the eager ones:
tests/test_interpreter_steady.py's launch-memo tests compare them with runs without reuse)."""

from __future__ import annotations

from ascendir.hardware import load_target
from ascendir.interpreter import compile_module
from ascendir.interpreter.accel import memo
from ascendir.interpreter.testing import parse

from test_interpreter_steady import _chained_adds

HW = load_target("ascend910b2")


def test_launches_build_on_first_look_only():
    built = []

    def pending(name):
        return lambda: built.append(name) or memo.Memo([], [], 0, 0, 0, [], None, None, None, None, owner=name)

    ls = memo.Launches([])
    for i in range(memo.VARIANTS + 2):  # the two oldest are dropped unbuilt
        ls.add(pending(i))
    assert built == []
    got = ls.stored()
    assert [m.owner for m in got] == list(range(2, memo.VARIANTS + 2)) and built == list(range(2, memo.VARIANTS + 2))
    assert ls.stored() == got and len(built) == memo.VARIANTS  # built once


def test_unasked_launches_are_not_built(monkeypatch):
    calls = []
    build = memo.Memo.build.__func__
    monkeypatch.setattr(memo.Memo, "build", classmethod(lambda cls, *a: calls.append(1) or build(cls, *a)))
    # one launch per key: stored, never looked at again
    prog = compile_module(parse(_chained_adds(1)), HW, None, timing_only=True)
    prog.run({})
    assert calls == [] and sum(len(v.variants) for v in prog.memo.values()) == 1
    # launches 2.. of one key look at the stored ones: built then, and reused
    prog = compile_module(parse(_chained_adds(4)), HW, None, timing_only=True)
    prog.run({})
    assert prog.memo_hits >= 2 and 1 <= len(calls) <= 2
