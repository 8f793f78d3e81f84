"""The data walk of a numerics launch (sim/kernel.py `_data_walk`: the body compiled with
KernelInfo.data_only, whose flags, barriers and tile ops drop what only timing needs) gives what
the single walk (Accel.none(): timing, data and race check in one walk) gives, bit for bit:
outputs, cycles, and the race or deadlock error with its message. Checked on kernels as lowered
(mix GEMMs whose AIC waits on later AIV sets: held pipes) and on seeded mutations of them, each
dropping one set_flag, wait_flag or pipe_barrier (races, deadlocks, longer holds). Outputs are
compared with the data walk's deferred cube data off (exec/deferred.py sums a GEMM's K run in
another order: equal within a bound, test_deferred_cube.py); with it on, everything else."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.exec import deferred
from ascendir.interpreter.testing import add_ir, matmul_ir, parse

HW = load_target("ascend910b2")
SYNC = ("ascend.set_flag ", "ascend.wait_flag ", "ascend.pipe_barrier")


def _outcome(text: str, weights, feeds: dict, accel: Accel, outputs: bool) -> tuple:
    """("error", message, None) or ("ok", cycles of the run and of each kernel, {output: bytes}
    if `outputs`)."""
    try:
        with np.errstate(all="ignore"):
            r = simulate(parse(text), weights, feeds, HW, accel=accel)
    except AscendirError as e:
        return ("error", str(e), None)
    cycles = (r.report["total_cycles"], [k["cycles"] for k in r.report["kernels"]])
    return ("ok", cycles, {k: (v.dtype.str, v.shape, v.tobytes()) for k, v in r.outputs.items()} if outputs else None)


def _mutants(text: str, n: int, seed: int) -> list[tuple[str, str]]:
    """(what, text) of `text` with one sync op line dropped, for `n` seeded lines (every one when
    there are fewer)."""
    lines = text.splitlines()
    sync = [i for i, x in enumerate(lines) if x.strip().startswith(SYNC)]
    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(sync, size=min(n, len(sync)), replace=False))
    return [(f"line {i + 1} dropped: {lines[i].strip()}", "\n".join(lines[:i] + lines[i + 1:])) for i in picked]


def _assert_same(text: str, weights, feeds: dict, what: str, monkeypatch) -> str:
    """Asserts the data walk's outcome is the single walk's (outputs compared with deferred cube
    data off); returns "ok" or "error"."""
    single = _outcome(text, weights, feeds, Accel.none(), True)
    assert _outcome(text, weights, feeds, Accel(), False) == single[:2] + (None,), what
    with monkeypatch.context() as m:
        m.setattr(deferred, "eligible", lambda *a, **k: False)
        assert _outcome(text, weights, feeds, Accel(), True) == single, what
    return single[0]


@pytest.fixture(scope="module")
def layer() -> tuple:
    """The 7B-shaped decoder layer of benchmarks/fusion.py at small sizes, lowered at -O2 (its mix
    GEMMs hold pipes in program order), its weights and input."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fusion
    import interpreter_speed
    import numerics_speed

    saved = {name: getattr(fusion, name) for name in ("H", "HEADS", "D", "MLP")}
    try:
        for name, v in (("H", 64), ("HEADS", 2), ("D", 32), ("MLP", 128)):
            setattr(fusion, name, v)
        module, _ = interpreter_speed.lowered(interpreter_speed.model_text(1, 16), HW)
    finally:
        for name, v in saved.items():
            setattr(fusion, name, v)
    weights = numerics_speed.random_weights(module)
    x = np.random.default_rng(3).standard_normal((1, 16, 64)).astype(np.float16)
    return str(module), weights, {"arg0": x}


@pytest.mark.sampled
def test_lowered_layer_data_walk_equals_single_walk(layer, monkeypatch):
    text, weights, feeds = layer
    assert _assert_same(text, weights, feeds, "as lowered", monkeypatch) == "ok"


@pytest.mark.sampled
def test_mutated_layer_data_walk_equals_single_walk(layer, monkeypatch):
    text, weights, feeds = layer
    kinds = []
    for what, mutant in _mutants(text, 24, seed=22):
        kinds.append(_assert_same(mutant, weights, feeds, what, monkeypatch))
    assert "error" in kinds and "ok" in kinds  # the mutations both break and keep programs


@pytest.mark.sampled
@pytest.mark.parametrize("nbuf", [1, 2])
def test_mutated_generators_data_walk_equals_single_walk(nbuf, monkeypatch):
    rng = np.random.default_rng(nbuf)
    cases = [
        (matmul_ir(256, 256, 512, block_dim=2, nbuf=nbuf),
         {"a": rng.standard_normal((256, 512)).astype(np.float16), "b": rng.standard_normal((512, 256)).astype(np.float16)}),
        (add_ir(1024, 64, 16, block_dim=2, nbuf=nbuf),
         {"x": rng.standard_normal((1024, 64)).astype(np.float16), "y": rng.standard_normal((1024, 64)).astype(np.float16)}),
    ]
    kinds = []
    for text, feeds in cases:
        kinds.append(_assert_same(text, None, feeds, "as generated", monkeypatch))
        for what, mutant in _mutants(text, 8, seed=nbuf):
            kinds.append(_assert_same(mutant, None, feeds, what, monkeypatch))
    assert "error" in kinds and "ok" in kinds
