"""A `simulate` leaves (almost) no objects in reference cycles: reference counting frees its
compiled program as the run ends (sim/chip.py ModuleProg.close), rather than the cyclic
collector's next full pass (on a 7B layer ~320,000 objects, ~0.5 s CPU). Each case runs once to
warm the process's caches, then counts what `gc.collect()` finds after a second run made with
the collector off."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from ascendir.costmodel.memory import plan_gm
from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import compile_module, simulate
from ascendir.interpreter.testing import add_ir, matmul_ir, parse

HW = load_target("ascend910b2")
# what a run may leave of its own (a few objects of library code); c20e03f left 1,300-6,300 in
# these cases, a closure holding itself again or a cycle ModuleProg.close misses 40 or more
BOUND = 20


def _planned(text: str):
    """The module of IR `text` with its GM planned (plan-memory), as a lowered model is: a
    simulate of unplanned IR plans a copy of @main (memory.check_module_gm_fits), and xDSL IR
    links parents and children."""
    module = parse(text)
    plan_gm(next(op for op in module.ops if getattr(op, "sym_name", None) and op.sym_name.data == "main"), HW, module)
    return module


def _cyclic_garbage(run) -> int:
    """Objects in reference cycles that `run()` leaves (collected afterwards, the collector off
    during the run)."""
    run()  # (warm: imports, generated-code caches)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        run()
        return gc.collect()
    finally:
        if was:
            gc.enable()


def _early_vadd() -> str:
    """add_ir single-buffered with its `wait_flag MTE2 -> V` and vadd moved ahead of the MTE2
    copies and their set: the V pipe is held (timing/holds.py) in every iteration of the loop."""
    src = add_ir(1024, 64, 16, block_dim=2, nbuf=1).splitlines()
    moved = [src.pop(next(i for i, x in enumerate(src) if x.strip().startswith(w)))
             for w in ("ascend.wait_flag MTE2 -> V, 0", "ascend.vadd")]
    j = next(i for i, x in enumerate(src) if x.strip().startswith("%xs0 = memref.subview"))
    return "\n".join(src[:j] + moved + src[j:])


def _xy():
    rng = np.random.default_rng(1)
    return {k: rng.standard_normal((1024, 64)).astype(np.float16) for k in ("x", "y")}


@pytest.mark.parametrize("timing_only", [False, True], ids=["numerics", "timing"])
def test_held_pipe_kernel_leaves_no_cycles(timing_only):
    # numerics: the timing-only twin and the data walk, each with the pipe held (their flag and
    # tile closures queue themselves: sync_ops.py, tile_ops.py); timing-only: steady loops
    # with their checked values and loop memos, the race check on
    module, xy = _planned(_early_vadd()), _xy()
    n = _cyclic_garbage(lambda: simulate(module, None, xy, HW, timing_only=timing_only, check_races=True))
    assert n <= BOUND


@pytest.mark.parametrize("timing_only", [False, True], ids=["numerics", "timing"])
def test_matmul_leaves_no_cycles(timing_only):
    # cube data deferred and loop memos in the data walk, shared copy and mmad cost functions
    module = _planned(matmul_ir(256, 256, 512, block_dim=2))
    rng = np.random.default_rng(2)
    ab = {"a": rng.standard_normal((256, 512)).astype(np.float16), "b": rng.standard_normal((512, 256)).astype(np.float16)}
    n = _cyclic_garbage(lambda: simulate(module, None, ab, HW, timing_only=timing_only))
    assert n <= BOUND


def test_compiled_program_runs_until_closed():
    # a compile_module program keeps running until it is closed; what its runs gave stays valid
    module, xy = parse(_early_vadd()), _xy()
    prog = compile_module(module, HW)
    out, recs = prog.run(xy)
    again, recs2 = prog.run(xy)
    np.testing.assert_array_equal(out["z"], xy["x"] + xy["y"])
    np.testing.assert_array_equal(again["z"], out["z"])
    assert recs2[0].cycles == recs[0].cycles
    prog.close()
    assert recs[0].cycles == recs2[0].cycles and out["z"].shape == (1024, 64)
    with pytest.raises(AscendirError, match="closed"):
        prog.run(xy)


def test_a_run_that_raises_still_closes_its_program():
    # simulate closes its program whatever its run does: an input the run refuses (its shape)
    # leaves no more cycles than a run that ends (662 objects when the program was not closed)
    module, xy = _planned(_early_vadd()), _xy()

    def run():
        with pytest.raises(AscendirError, match="input 'y' has shape"):
            simulate(module, None, {"x": xy["x"], "y": xy["y"][:512]}, HW, check_races=True)

    assert _cyclic_garbage(run) <= BOUND
