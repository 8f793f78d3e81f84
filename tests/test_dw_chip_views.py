"""The running block's on-chip buffers and views kept between K-loop replays
(exec/data_loop_memo.py `_Table.chips`, `DataLoopMemo._chips`): a block's tiles replay onto
that block's buffers, a later block's replays onto its own (the kept ones are dropped when the
buffers' slots hold other arrays), bit for bit as running every loop."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import data_loop_memo

from test_data_loop_memo import _both, _template_gemm

HW = load_target("ascend910b2")


@pytest.mark.parametrize("races", [True, False])
def test_replays_land_in_the_running_blocks_buffers(monkeypatch, races):
    # 6 x 12 tiles of 64 x 128 over the cores' blocks: several tiles per block, several blocks
    module, feeds = _template_gemm(384, 1024, 1536, "m=64,n=128,k=64,l1_depth=2,split_k=1,swizzle=1")
    kept = []  # per replay: whether the on-chip bases were the ones kept (a hit) or made again
    chips = data_loop_memo.DataLoopMemo._chips

    def counted(self):
        before = self.table.chips
        got = chips(self)
        kept.append(before is not None and self.table.chips is before)
        return got

    monkeypatch.setattr(data_loop_memo.DataLoopMemo, "_chips", counted)
    new, old, counts = _both(monkeypatch, lambda: simulate(module, None, feeds, HW, check_races=races))
    assert counts["replayed"] > counts["ran"] > 0, counts
    assert any(kept) and not all(kept), kept  # (kept within a block, made again in the next)
    assert new.report == old.report
    (name,) = new.outputs
    assert np.array_equal(new.outputs[name], old.outputs[name])
