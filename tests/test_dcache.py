"""The scalar DCache (interpreter/timing/dcache.py): which `ascend.get_value` reads from GM hit
(a scalar load) and which miss (a GM read latency), per scalar unit and launch, keyed by GM
address tags so that numerics and timing-only runs agree."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.costmodel import sequential_get_value_cycles
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import parse
from ascendir.interpreter.timing.dcache import ScalarDCache

HW = load_target("ascend910b2")
MISS, HIT, ALU = HW.memory.gm_read_latency, HW.memory.dcache_hit_latency, HW.startup["scalar_alu"]
T = "memref<64xi32, #ascend<space gm>>"
U = "memref<64xi32, #ascend<space ub>>"
SUB = "memref<16xi32, strided<[1], offset: 8>, #ascend<space gm>>"


def _kernel(read: str, n: int) -> str:
    """A one-block AIV kernel reading `n` int32 one by one (`read`: %t from GM, %s a GM view of
    %t[8:24], %b from UB), launched twice."""
    line = {"t": f"ascend.get_value %t[%i] : {T}", "s": f"ascend.get_value %s[%i] : {SUB}",
            "b": f"ascend.get_value %b[%i] : {U}"}[read]
    return f"""
builtin.module {{
  ascend.kernel @k(%t: {T}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cn = arith.constant {n} : index
    %b = ascend.alloc : {U}
    %s = memref.subview %t[8] [16] [1] : {T} to {SUB}
    scf.for %i = %c0 to %cn step %c1 {{
      %v = {line}
    }}
    ascend.return
  }}
  func.func @main(%t: {T}) {{
    ascend.launch @k(%t) : {T}
    ascend.launch @k(%t) : {T}
    func.return
  }}
}}
"""


def _scalar_busy(read: str, n: int, timing_only: bool) -> list[float]:
    """S-pipe busy cycles of each of the two launches."""
    r = simulate(parse(_kernel(read, n)), None, {"arg0": np.arange(64, dtype=np.int32)}, HW, timing_only=timing_only)
    return [k["pipe_busy"]["S"] for k in r.report["kernels"]]


@pytest.mark.parametrize("timing_only", [False, True])
def test_64_consecutive_int32_cost_4_misses_and_60_hits_per_launch(timing_only):
    # 64 x 4 B = four 64-B lines: the first read of each line misses (a GM read), the other 15
    # hit (a scalar load). The same loop reading UB (one scalar ALU op a read) isolates the reads.
    # Both launches pay the 4 misses: a launch starts cold. The timing-only run (zero views)
    # keys lines by address tags as the numerics run does, so both agree.
    gm = _scalar_busy("t", 64, timing_only)
    ub = _scalar_busy("b", 64, timing_only)
    want = 4 * MISS + 60 * HIT - 64 * ALU
    assert [g - u for g, u in zip(gm, ub)] == [want, want]
    # the analytic form a template's tile search uses agrees with the simulated reads
    assert sequential_get_value_cycles(HW, 64, 4, 64) - 64 * ALU == want


def test_lines_follow_the_views_gm_offset():
    # %t[8 + i], i < 16: bytes 32..95 of %t, two lines (from byte 0 of the view: one)
    gm = _scalar_busy("s", 16, False)
    ub = _scalar_busy("b", 16, False)
    assert gm[0] - ub[0] == 2 * MISS + 14 * HIT - 16 * ALU


def test_lru_evicts_the_least_recently_used_line():
    dc = ScalarDCache(2)
    assert [dc.read(x) for x in ("a", "b", "a", "c", "b", "a")] == [False, False, True, False, False, False]
    assert (dc.hits, dc.misses) == (1, 5)
