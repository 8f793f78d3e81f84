"""Chrome / Perfetto trace events (the `traceEvents` list of the JSON trace format).

pid 0 = host (one span per kernel launch, and the chip-wide "GM bandwidth" counter track);
pid i+1 = the i-th kernel launch; within a launch tid = core · 32 + pipe slot, named "core 3 MTE2"
(or "core 3 aiv.MTE2" in mixed kernels). Times are µs at the target clock.

Slice times lie on a 1-ns grid: every instant (a start or an end, in cycles of chip time) is
rounded to whole nanoseconds by one function (`Grid`), ts = start / 1000 and dur chosen so that
ts + dur is exactly the end's µs value in floats. The rounding is monotone, so slices that touch
in cycles touch in the trace (one's end == the next's start) and nested ones stay nested: no
partial overlap that float error used to create (llama_small: 855 pairs of adjacent slices
overlapping by one float unit, ts + cycles·µs/cycle vs the next op's own start). Perfetto reads
ts and dur separately as llround(µs × 1000) ns, which on this grid gives back the same integers,
so the viewer sees exactly these slices; the cycles of each slice stay exact in its args.

set_flag → wait_flag hand-offs are flow arrows. Viewers bind a flow event to the slice enclosing
it on its own track (Perfetto's JSON importer drops one without: stat flow_no_enclosing_slice), so
every set_flag and wait_flag is also a slice (cat "sync") on its pipe's track: a set spans from its
issue until its pipe completed everything before it, a wait the time its pipe was blocked (zero
length when the flag was already set). Each flow event sits at its slice's start, right after it
in the list (equal timestamps are imported in file order). These slices never overlap the op slices
of their track: they occupy the pipe's in-order clock like an op. Flow ids are integers unique in
the trace (Perfetto reads a string id as hex).

The counter ("C" events, GB/s) sums every core's GM traffic in time bins of each launch: an op's
bytes are spread evenly over its busy interval, HBM (misses and writes) and L2 hits as two stacked
series. It follows the pipe timeline: a launch stretched to the chip bandwidth floor (report key
`bandwidth_floor_applied`) shows its traffic over the shorter timeline.
"""

from __future__ import annotations

import math

import numpy as np

from ascendir.hardware.config import HardwareConfig
from ascendir.costmodel import LEVELS
from ascendir.interpreter.state import KernelRecord

GM_COUNTER = "GM bandwidth"
SYNC = "sync"  # category of the set_flag / wait_flag slices (not pipe work)
BINS_PER_LAUNCH = 200  # counter samples per kernel launch (at most)
_READ, _WRITE, _HIT = (LEVELS.index(lv) for lv in ("gm_read", "gm_write", "l2_hit"))


def _binned(starts: np.ndarray, ends: np.ndarray, nbytes: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bytes falling in each [edges[i], edges[i+1]) when each op moves `nbytes` evenly over
    [start, end) (zero-length ops count at their start). Cycles in, bytes out."""
    dur = ends - starts
    inst = dur <= 0
    rate = np.where(inst, 0.0, nbytes / np.where(inst, 1.0, dur))

    def cumulative(x: np.ndarray) -> np.ndarray:  # bytes moved before time x
        out = np.zeros_like(x)
        for t, sign in ((starts, 1.0), (ends, -1.0)):
            order = np.argsort(t)
            ts, rs = t[order], rate[order]
            r_cum = np.concatenate(([0.0], np.cumsum(rs)))
            rt_cum = np.concatenate(([0.0], np.cumsum(rs * ts)))
            n = np.searchsorted(ts, x, side="right")
            out += sign * (x * r_cum[n] - rt_cum[n])
        ts = np.sort(starts[inst])
        inst_cum = np.concatenate(([0.0], np.cumsum(nbytes[inst][np.argsort(starts[inst])])))
        return out + inst_cum[np.searchsorted(ts, x, side="left")]

    return np.diff(cumulative(edges))


def gm_counter(rec: KernelRecord, base: float, us: float, clock_hz: float) -> list[dict]:
    """"C" events of one launch's chip GM bandwidth (GB/s), from `base` (cycles, chip time)."""
    spans = [(start, start + cyc, items) for _, _, start, cyc, _, items in rec.events if items]
    gm = [(s, e, sum(b for i, b in items if i in (_READ, _WRITE)), sum(b for i, b in items if i == _HIT)) for s, e, items in spans]
    gm = [g for g in gm if g[2]]
    if not gm:
        return []
    s, e, total, hit = (np.array(c, dtype=float) for c in zip(*gm))
    end = max(float(e.max()), float(s.max()) + 1.0)
    edges = np.linspace(0.0, end, min(BINS_PER_LAUNCH, len(gm)) + 1)
    width_s = (edges[1] - edges[0]) / clock_hz
    l2 = _binned(s, e, hit, edges) / width_s / 1e9
    hbm = _binned(s, e, total - hit, edges) / width_s / 1e9
    ev = [{"ph": "C", "pid": 0, "name": GM_COUNTER, "ts": float(base + t) * us, "args": {"HBM GB/s": round(float(h), 3), "L2 hit GB/s": round(float(c), 3)}}
          for t, h, c in zip(edges[:-1], hbm, l2)]
    ev.append({"ph": "C", "pid": 0, "name": GM_COUNTER, "ts": (base + end) * us, "args": {"HBM GB/s": 0.0, "L2 hit GB/s": 0.0}})
    return ev


class Grid:
    """µs values of chip instants (cycles) on the 1-ns grid (module docstring)."""

    def __init__(self, clock_hz: float) -> None:
        self.ns_per_cycle = 1e9 / clock_hz

    def at(self, cycles: float) -> float:
        """µs of the whole nanosecond nearest to `cycles` (monotone in `cycles`)."""
        return round(cycles * self.ns_per_cycle) / 1000

    def span(self, start: float, end: float) -> dict:
        """{"ts", "dur"} of a slice from `start` to `end` (cycles): ts + dur == at(end) exactly."""
        ts, stop = self.at(start), self.at(end)
        dur = stop - ts
        while ts + dur > stop:  # the subtraction rounded up (ts far below end): step back to the end
            dur = math.nextafter(dur, 0.0)
        while ts + dur < stop:
            dur = math.nextafter(dur, math.inf)
        return {"ts": ts, "dur": dur}


def trace_events(records: list[KernelRecord], target: HardwareConfig) -> list[dict]:
    us = 1e6 / target.clock_hz
    grid = Grid(target.clock_hz)
    ev: list[dict] = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "host"}}]
    offset = 0.0
    next_id = 0
    for n, rec in enumerate(records):
        pid = n + 1
        ev.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"#{n} @{rec.name}"}})
        ev.append({"ph": "X", "pid": 0, "tid": 0, "name": rec.name, **grid.span(offset, offset + rec.cycles),
                   "args": {"block_dim": rec.block_dim, "core_type": rec.core_type, "cycles": rec.cycles}})
        base = offset + rec.launch_cycles
        tids = set()
        for core, slot, start, cyc, name, _ in rec.events:
            tid = core * 32 + slot
            tids.add((tid, core, slot))
            ev.append({"ph": "X", "pid": pid, "tid": tid, "name": name, **grid.span(base + start, base + start + cyc),
                       "args": {"cycles": cyc}})
        ids: dict[int, int] = {}
        labels = rec.pipe_labels
        for phase, core, slot, peer, event, start, end, fid in rec.flows:
            tid = core * 32 + slot
            tids.add((tid, core, slot))
            sl = grid.span(base + start, base + end)
            ts = sl["ts"]
            src, dst = (slot, peer) if phase == "s" else (peer, slot)
            what = "set_flag" if phase == "s" else "wait_flag"
            ev.append({"ph": "X", "pid": pid, "tid": tid, "name": f"{what} {labels[src]}->{labels[dst]}", "cat": SYNC,
                       **sl, "args": {"event": event, "cycles": end - start}})
            if fid not in ids:
                ids[fid] = next_id
                next_id += 1
            e = {"ph": phase, "pid": pid, "tid": tid, "name": "flag", "cat": "flag", "id": ids[fid], "ts": ts}
            if phase == "f":
                e["bp"] = "e"
            ev.append(e)
        for tid, core, slot in sorted(tids):
            ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                       "args": {"name": f"core {core} {rec.pipe_labels[slot]}"}})
        ev.extend(gm_counter(rec, base, us, target.clock_hz))
        offset += rec.cycles
    return ev


def trace_document(events: list[dict], report: dict) -> dict:
    """The JSON object of a trace file: `traceEvents` and, in `otherData` (free-form metadata of
    the format), the run_id, target and launch count of the run's report (report.run_id)."""
    other = {"run_id": report.get("run_id"), "target": report.get("target"), "kernels": len(report.get("kernels", []))}
    return {"traceEvents": events, "otherData": other}


def cluster_trace_events(devices: list[list[KernelRecord]], link_spans: dict[tuple[int, int], list[tuple[float, float, float]]],
                         target: HardwareConfig) -> list[dict]:
    """The trace of a cluster run: a process per device (pid d + 1, "device d": one track of its
    kernel launches, comm kernels in category "comm") and a process "links" (pid devices + 1) with
    a track per used link "src -> dst" holding its transfers (`link_spans[(src, dst)]`: (start,
    end, bytes) in cycles of the common clock)."""
    grid = Grid(target.clock_hz)
    ev: list[dict] = []
    for d, records in enumerate(devices):
        pid = d + 1
        ev.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"device {d}"}})
        ev.append({"ph": "M", "pid": pid, "tid": 0, "name": "thread_name", "args": {"name": "kernels"}})
        offset = 0.0
        for rec in records:
            # a comm kernel in the background (MC2) sits on a track of its own from its start
            background = rec.comm is not None and rec.comm.get("background")
            start = rec.comm["start_cycle"] if rec.comm is not None else offset
            if rec.comm is not None and not background:
                start = max(start, offset)
            e = {"ph": "X", "pid": pid, "tid": 1 if background else 0, "name": rec.name, **grid.span(start, start + rec.cycles),
                 "args": {"cycles": rec.cycles}}
            if rec.comm is not None:
                e["cat"] = "comm"
                e["args"].update({k: rec.comm[k] for k in ("wait_cycles", "bytes_sent", "exposed_cycles")})
            ev.append(e)
            if not background:
                offset = start + rec.cycles
        if any(r.comm is not None and r.comm.get("background") for r in records):
            ev.append({"ph": "M", "pid": pid, "tid": 1, "name": "thread_name", "args": {"name": "comm stream (MC2)"}})
    pid = len(devices) + 1
    ev.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": "links"}})
    for tid, (key, spans) in enumerate(sorted(link_spans.items())):
        ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": f"{key[0]} -> {key[1]}"}})
        for start, end, nbytes in spans:
            ev.append({"ph": "X", "pid": pid, "tid": tid, "name": "transfer", "cat": "link", **grid.span(start, end),
                       "args": {"bytes": nbytes, "cycles": end - start}})
    return ev
