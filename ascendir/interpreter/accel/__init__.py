"""Speed-ups that give the cycles (and, with numerics, the outputs) of running every op, bit for
bit, each switchable through `Accel` and tested equal to the run without it
(tests/test_interpreter_accel.py).

* steady.py  steady-state extrapolation of timing-only loops (`steady`), and the loop memo that
             applies a stored whole execution of a loop entered again from the same relative
             state (`loop_memo`);
* remap.py   the loop memo's address values that are not affine in the iv (`remap`);
* xblock.py  whole loop executions reused by later blocks on other cores (`xblock`);
* memo.py    identical timing-only launches served from an earlier launch (`launch_memo`), of
             this run or of another run given the same `LaunchMemo` (generate's decode steps);
* sim/chip.py gc_paused: Python's cyclic garbage collector paused while a module compiles and
             runs (`gc_pause`; 3-4 % of the 4096^3 timing-only wall time, 8-13 % of the 7B 32-layer
             one are collections that find next to nothing).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Accel:
    """Which speed-ups run. They nest: `loop_memo`, `remap` and `xblock` work inside the steady
    loop driver, so `steady=False` turns them off too; `xblock` needs `loop_memo` and `remap`
    (a block's stored execution is a loop memo entry with remapped addresses). Every combination
    gives the same results bit for bit (cycles, bytes, L2 counters, outputs; durations are
    multiples of the cycle quantum, costmodel/quantum.py, so the timeline's sums are exact in any
    order): only the wall time and `extrapolated_iterations` differ."""

    steady: bool = True
    loop_memo: bool = True
    remap: bool = True
    xblock: bool = True
    launch_memo: bool = True
    gc_pause: bool = True

    @classmethod
    def none(cls) -> Accel:
        """Every op run: the reference the speed-ups are tested against."""
        return cls(steady=False, loop_memo=False, remap=False, xblock=False, launch_memo=False, gc_pause=False)
