"""A block that diverges from the checked block it follows starts its full check from that
block's kept on-chip state (race.py `RaceChecker._snap` every SNAP events, `_diverge`): the same
clocks, pending sets, active slots, ranges and recorded events as replaying every event before,
and the same verdicts as the full check of every block."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.check import race
from ascendir.interpreter.check.race import ChipBuffer, RaceChecker
from ascendir.interpreter.testing import add_ir, matmul_ir, parse

HW = load_target("ascend910b2")
RNG = np.random.default_rng(2)
# 64 tiles over 3 blocks: blocks 1 and 2 run one tile fewer than block 0, so they follow it to
# their loop's end and diverge there, past most of its events
ADD = (add_ir(1024, 64, 16, block_dim=3, nbuf=2),
       {"x": RNG.standard_normal((1024, 64)).astype(np.float16), "y": RNG.standard_normal((1024, 64)).astype(np.float16)})
MATMUL = (matmul_ir(512, 256, 512, block_dim=3, nbuf=2),
          {"a": RNG.standard_normal((512, 512)).astype(np.float16), "b": RNG.standard_normal((512, 256)).astype(np.float16)})


def _named(x):
    """`x` with every on-chip buffer root by its name (runs compile buffers of their own)."""
    if isinstance(x, ChipBuffer):
        return repr(x)
    if isinstance(x, (tuple, list)):
        return type(x)(_named(y) for y in x)
    return x


def _state(c: RaceChecker) -> tuple:
    """Everything the check of the events after a divergence reads, orders kept."""
    seen = [(k, [(pk, list(d.items())) for pk, d in per.items()], list(latest.items())) for k, (per, latest) in c.seen.items()]
    return _named(([r[:] for r in c.vc], [list(q) for q in c.queues], c.active[:], seen, list(c.rec)))


def _diverged(monkeypatch, text: str, feeds: dict, snap: int, timing_only: bool) -> list:
    """The checker's state right after each divergence of a run of `text`, states kept every
    `snap` events."""
    states = []
    orig = RaceChecker._diverge

    def diverge(self, n):
        orig(self, n)
        states.append((self.block, n, _state(self)))

    with monkeypatch.context() as m:
        m.setattr(race, "SNAP", snap)
        m.setattr(RaceChecker, "_diverge", diverge)
        simulate(parse(text), None, {} if timing_only else feeds, HW, timing_only=timing_only,
                 check_races=True if timing_only else None)
    return states


@pytest.mark.parametrize("case, timing_only", [(ADD, False), (MATMUL, False), (MATMUL, True)],
                         ids=["add", "matmul", "matmul timing-only"])
def test_a_divergence_restores_the_state_a_replay_of_every_event_gives(monkeypatch, case, timing_only):
    text, feeds = case
    replayed = _diverged(monkeypatch, text, feeds, 1 << 40, timing_only)  # (no state kept: every event replayed)
    assert replayed and max(n for _, n, _ in replayed) > 40
    for snap in (3, 16):
        assert _diverged(monkeypatch, text, feeds, snap, timing_only) == replayed, snap


def _verdict(text: str, feeds: dict) -> str:
    try:
        with np.errstate(all="ignore"):
            simulate(parse(text), None, feeds, HW)
    except AscendirError as e:
        return str(e)
    return "ok"


def test_mutants_diverging_late_give_the_full_checks_verdicts(monkeypatch):
    # sync ops dropped from the adds' kernel: its later blocks diverge from block 0 at their loop's
    # end, their checks starting from kept states every 5 events
    text, feeds = ADD
    lines = text.splitlines()
    sync = [i for i, x in enumerate(lines) if x.strip().startswith(("ascend.set_flag ", "ascend.wait_flag "))]
    verdicts = []
    for i in sync[:6]:
        mutant = "\n".join(lines[:i] + lines[i + 1:])
        with monkeypatch.context() as m:
            m.setattr(RaceChecker, "follow", False)
            full = _verdict(mutant, feeds)
        with monkeypatch.context() as m:
            m.setattr(race, "SNAP", 5)
            assert _verdict(mutant, feeds) == full, i
        verdicts.append(full)
    assert any(v.startswith("race in kernel") for v in verdicts)
