"""benchmarks/wait_flag_deletion.py: replaying only the deleted wait's kernel (KernelRuns) gives
the verdicts of re-simulating the whole model (WholeModel), on a committed corpus model."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.sampled
def test_kernel_replay_gives_the_whole_model_verdicts():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import wait_flag_deletion as w

    # 6 kernels: router MatMul, gating, routing (it gathers the expert-major rows from the tokens:
    # no expand or row-gather kernel), the grouped MatMuls (SwiGLU fused into the gate/up one),
    # finalize (it reads the expert-major rows: no un-permute kernel)
    data = ROOT / "tests" / "data" / "mixtral_moe_block_small"
    module, weights = w.compile_model(data / "model.onnx", w.TARGET, opt_level="O2", dtype="fp16")
    inputs = w._inputs(data)
    flags = w._flags(module)[::5]  # one in five of its wait_flags, in every kernel
    replay = w.KernelRuns(module, weights, inputs)
    assert len(replay.launches) == 6
    fast = [w.classify(replay, kernel, wait) for kernel, _, wait in flags]
    whole = w.WholeModel(module, weights, inputs)
    slow = [w.classify(whole, kernel, wait) for kernel, _, wait in flags]
    assert fast == slow
    # the sample holds every verdict, so a replay that missed races (or saw races the whole run
    # does not) would differ above
    assert set(collections.Counter(fast)) == {"detected: race", "redundant: covered by the queue",
                                              "redundant: pair, at kernel level", "redundant: pair, in a loop"}


def test_copies_keep_aliasing():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import numpy as np
    from wait_flag_deletion import _copies

    base = np.arange(24, dtype=np.float16)
    a, b, c = base[:12].reshape(3, 4), base[8:], np.ones(3, np.float32)
    a2, b2, c2 = _copies([a, b, c])
    a2[2, 0] = -1  # element 8 of the buffer: b2's first
    assert b2[0] == -1 and base[8] == 8  # aliased among the copies, not with the originals
    assert np.array_equal(c2, c) and c2 is not c
