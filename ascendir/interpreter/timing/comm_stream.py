"""A device's communication stream: comm kernels launched in the background (MC2), overlapping
the compute kernels launched after them.

An MC2 template (conversion/nn_to_ascend/templates/mc2.py) tiles a MatMul and its collective
into chunks and launches the comm kernel of chunk i with `ascend.async`: it runs on the device's
SDMA engines while the compute kernels after it run on the AI Cores (ops-transformer MC2: the
communication of tile i overlaps the matmul of tile i+1; hardware reference §6, S14). The
interpreter models that with two clocks per device:

* the compute clock (`ModuleProg.clock`): where the next compute kernel starts;
* the comm stream (`CommStream.free`): where the next comm kernel starts; comm kernels run one
  after another, in launch order, each from max(compute clock at its launch, stream free).

A launch without `ascend.async` first *joins* the stream: it starts once every background comm
kernel has ended, except the last `ascend.overlap` (an integer attribute, default 0) ones, which
it runs beside. So an MC2 template marks the compute kernel of chunk i+1 `ascend.overlap = 1`,
and the last launch of its sequence joins everything: what follows never sees a comm in flight.

Shared HBM. The SDMA engines read the sender's HBM and write the receiver's (ops_comm.py), so a
comm kernel's HBM bytes (read here + landed here) compete with the matmul's for the chip's HBM
bandwidth, as on the chip. Model (INF; the MC2 sources publish no timing model, §6): a compute
kernel running beside background comm kernels needs at least (its own HBM floor's bytes + the
comm bytes moved during its window) / HBM bandwidth; the comm bytes of a window are the comm
kernel's HBM bytes times the fraction of its span the window covers (its bytes spread evenly
over its span). Only the compute kernel is stretched: the comm kernels are link bound (56 GB/s
per HCCS peer against 1.6 TB/s of HBM on 910B2) and keep their times.

Exposed communication: the part of a comm kernel's span not covered by a compute kernel of the
same device, set in its record (`comm["exposed_cycles"]`) when it is joined; a comm kernel
launched without `ascend.async` is exposed whole, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


@dataclass
class CommStream:
    """The background comm kernels of one device run (records with `comm` figures), the compute
    kernels' spans since the first of them, and when the stream is free (cycles)."""

    free: float = 0.0
    pending: list = field(default_factory=list)  # KernelRecords of comm kernels not joined yet
    busy: list[tuple[float, float]] = field(default_factory=list)  # compute spans beside pending comm

    def reset(self) -> None:
        self.free = 0.0
        self.pending.clear()
        self.busy.clear()

    @staticmethod
    def span(rec) -> tuple[float, float]:
        c = rec.comm
        return c["start_cycle"], c["start_cycle"] + c["cycles"]

    def background(self, rec) -> None:
        """Comm kernel `rec` (already run from `start_cycle`) runs in the background."""
        self.free = self.span(rec)[1]
        self.pending.append(rec)

    def join(self, clock: float, keep: int = 0) -> float:
        """The compute clock after waiting for every pending comm kernel but the last `keep`; sets
        the exposed cycles of those joined."""
        n = max(0, len(self.pending) - keep)
        done, self.pending = self.pending[:n], self.pending[n:]
        for rec in done:
            s, e = self.span(rec)
            covered = sum(_overlap(s, e, b0, b1) for b0, b1 in self.busy)
            rec.comm["exposed_cycles"] = max(0.0, (e - s) - covered)
            clock = max(clock, e)
        if not self.pending:
            self.busy.clear()
        return clock

    def hbm_bytes_during(self, t0: float, t1: float) -> float:
        """HBM bytes the pending comm kernels move in [t0, t1] (each spread evenly over its span)."""
        total = 0.0
        for rec in self.pending:
            s, e = self.span(rec)
            if e > s:
                total += rec.comm["hbm_bytes"] * _overlap(s, e, t0, t1) / (e - s)
        return total

    def computed(self, t0: float, t1: float) -> None:
        """A compute kernel ran over [t0, t1] (kept while comm kernels are pending)."""
        if self.pending:
            self.busy.append((t0, t1))
