"""The cycle quantum: every duration the interpreter's timeline adds is a multiple of 2^-14 cycles.

Why. The timeline is sums and maxima of durations (interpreter/timing/timeline.py). In binary
floating point a sum of arbitrary durations depends on the order of the additions, so two ways of
computing the same schedule (running every loop iteration, or adding m x one period's delta as
interpreter/accel/steady.py's jump does) would agree only to the last few bits. A multiple of
2^-14 below 2^39 cycles (~5.5e11: about 300 s of device time at 1.85 GHz) is held exactly by a
float64 (53-bit significand), and so is every sum, difference, maximum and integer multiple of
such values that stays below that bound: the timeline's arithmetic is then exact, its result does
not depend on the order of operations, and every speed-up of interpreter/accel gives the cycles
of the plain run bit for bit.

What it costs. A duration moves by at most 2^-15 cycles (3.1e-5; rounding to nearest): the
corpus models' totals move by less than a cycle (docs/results.md, benchmarks/corpus.py). The
cost formulas (ops.py) stay exact: the templates' analytic estimates use them as they are; the
interpreter quantises what enters its timeline (`quantise`).
"""

from __future__ import annotations

import math

QUANTUM_BITS = 14
QUANTUM = 2.0**-QUANTUM_BITS  # cycles
EXACT_BELOW = 2.0 ** (53 - QUANTUM_BITS)  # cycles: sums of quanta below this are exact in float64
_SCALE = float(2**QUANTUM_BITS)


def quantise(cycles: float) -> float:
    """`cycles` rounded to the nearest multiple of QUANTUM (ties to even), as a float.

    Raises:
        ValueError: `cycles` is infinite or NaN (callers check durations first and name the op).
    """
    if not math.isfinite(cycles):
        raise ValueError(f"duration {cycles} is not finite")
    return round(cycles * _SCALE) / _SCALE
