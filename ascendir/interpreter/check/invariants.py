"""Sanity checks run after every kernel launch; a violation is a cost-model bug, so it raises.

* no negative time: every pipe clock ≥ 0;
* per-pipe busy ≤ kernel cycles (per core: a pipe cannot be busy longer than the kernel ran);
* kernel cycles ≥ compute bound = flops / (cores used × 2 × cube MACs/cycle of the fastest dtype);
* kernel cycles ≥ bandwidth bound = the slowest memory level (a hierarchical roofline,
  costmodel.bandwidth_bound_cycles): max(all GM bytes / L2 bandwidth (5 × HBM), bytes that
  reach HBM (read misses, writes other than rewrites of tiles still dirty in L2) / HBM). The
  kernel time is max(timeline, this bound), so this checks the accounting stays consistent. The
  bound is compared as the kernel holds it, quantised like every duration (costmodel/quantum.py:
  to the nearest 2^-14 cycle, so up to 2^-15 below the exact bound: on a bandwidth-bound launch
  of 18,874 cycles that is 1.6e-9 of it, above the relative tolerance).
"""

from __future__ import annotations

from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.costmodel import LEVELS, bandwidth_bound_cycles, quantise
from ascendir.interpreter.state import FLOPS, KernelRecord

_REL = 1e-9


def bounds(rec: KernelRecord, target: HardwareConfig) -> tuple[float, float]:
    """(compute bound, bandwidth bound) of a launch in cycles (0 when not computable)."""
    cube = target.cube
    fastest = max(cube.macs_per_cycle(k) for k in cube.k_per_cycle)
    ncores = max(1, len(rec.cores))
    compute = rec.acct[FLOPS] / (2.0 * fastest * ncores)
    acct = rec.acct
    bandwidth = bandwidth_bound_cycles(
        acct[LEVELS.index("gm_read")], acct[LEVELS.index("gm_write")], target, acct[LEVELS.index("l2_hit")],
        acct[LEVELS.index("l2_write")],
    )
    return compute, bandwidth


def check(rec: KernelRecord, target: HardwareConfig) -> None:
    """Raise AscendirError naming the kernel and the violated invariant."""
    body = rec.body_cycles
    timeline = rec.timeline_cycles
    tol = _REL * max(1.0, body)
    for core in rec.cores:
        for i, label in enumerate(rec.pipe_labels):
            if core.free[i] < 0 or core.done[i] < 0 or core.busy[i] < 0:
                raise AscendirError(f"invariant: kernel @{rec.name} core {core.index} pipe {label} has negative time")
            if core.busy[i] > timeline + tol:
                raise AscendirError(
                    f"invariant: kernel @{rec.name} core {core.index} pipe {label} busy {core.busy[i]:.1f} > kernel cycles {timeline:.1f}"
                )
    compute, bandwidth = bounds(rec, target)
    if body + tol < compute:
        raise AscendirError(f"invariant: kernel @{rec.name} takes {body:.1f} cycles, below its compute bound {compute:.1f}")
    if body + tol < quantise(bandwidth):
        raise AscendirError(f"invariant: kernel @{rec.name} takes {body:.1f} cycles, below its GM bandwidth bound {bandwidth:.1f}")
