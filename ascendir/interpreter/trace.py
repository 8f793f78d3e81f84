"""Chrome / Perfetto trace events (the `traceEvents` list of the JSON trace format).

pid 0 = host (one span per kernel launch); pid i+1 = the i-th kernel launch; within a launch
tid = core · 32 + pipe slot, named "core 3 MTE2" (or "core 3 aiv.MTE2" in mixed kernels).
Times are µs at the target clock. set_flag → wait_flag hand-offs are flow events ("s"/"f").
"""

from __future__ import annotations

from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter.executor import KernelRecord


def trace_events(records: list[KernelRecord], target: HardwareConfig) -> list[dict]:
    us = 1e6 / target.clock_hz
    ev: list[dict] = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "host"}}]
    offset = 0.0
    for n, rec in enumerate(records):
        pid = n + 1
        ev.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"#{n} @{rec.name}"}})
        ev.append({"ph": "X", "pid": 0, "tid": 0, "name": rec.name, "ts": offset * us, "dur": rec.cycles * us,
                   "args": {"block_dim": rec.block_dim, "core_type": rec.core_type, "cycles": rec.cycles}})
        base = offset + rec.launch_cycles
        tids = set()
        for core, slot, start, cyc, name in rec.events:
            tid = core * 32 + slot
            tids.add((tid, core, slot))
            ev.append({"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": (base + start) * us, "dur": cyc * us,
                       "args": {"cycles": cyc}})
        for phase, core, slot, t, fid in rec.flows:
            tid = core * 32 + slot
            tids.add((tid, core, slot))
            e = {"ph": phase, "pid": pid, "tid": tid, "name": "flag", "cat": "flag", "id": f"{n}.{fid}", "ts": (base + t) * us}
            if phase == "f":
                e["bp"] = "e"
            ev.append(e)
        for tid, core, slot in sorted(tids):
            ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                       "args": {"name": f"core {core} {rec.pipe_labels[slot]}"}})
        offset += rec.cycles
    return ev
