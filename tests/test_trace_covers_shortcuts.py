"""A traced timing-only run draws the iterations it applies without running them one by one
(accel/loop_driver.py `_extrapolated`) for every shortcut, including a stored execution entered
part way (accel/loop_memo.py `LoopMemo.prefix`, from an iteration checkpoint): the bytes of all
slices add up to the report's, as test_interpreter_steady.py checks for steady-state jumps."""

from __future__ import annotations

import pytest
from lowering_harness import lower_text
from test_lowering_matmul import matmul_text

from ascendir.interpreter import simulate
from ascendir.interpreter.accel import loop_driver


def test_trace_bytes_add_up_when_a_stored_execution_is_entered_part_way(monkeypatch):
    # 257 x 4096 x 2048 fp16 at the searched tiling: the K loops of later tiles enter stored
    # executions from iteration checkpoints in the traced (timed) pass
    prefixes = []
    orig = loop_driver.LoopDriver._from_prefix
    monkeypatch.setattr(loop_driver.LoopDriver, "_from_prefix", lambda self, sl, pre, n: (prefixes.append(pre[0]), orig(self, sl, pre, n))[1])
    m, k, n = 257, 4096, 2048
    module = lower_text(matmul_text((m, k), (k, n), (m, n), "f16"))
    res = simulate(module, None, {}, "ascend910b2", timing_only=True, trace=True)
    assert sum(prefixes) > 0, "no stored execution entered part way: the case no longer tests LoopMemo.prefix"
    spans = [e for e in res.trace_events if e["ph"] == "X" and e["pid"] > 0]
    for level, total in res.report["bytes"].items():
        assert sum(e["args"].get(level, 0.0) for e in spans) == pytest.approx(total, rel=1e-12), level
