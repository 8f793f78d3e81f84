"""Chrome / Perfetto trace events (the JSON trace format's `traceEvents`), written launch by
launch as the simulation produces them (`TraceWriter`): memory does not grow with the trace.

pid 0 = host: a track "kernel launches" (one slice per launch: name, ONNX node, block_dim,
cycles) and the chip-wide "GM bandwidth" counter. Every core is a process ("AIC 3", "AIV 7",
"AIC+AIV 2" for a mixed kernel's core group on chips with split cores, "core 3" on the others)
whose pipes are threads ("MTE2", or "aic.MTE2" / "aiv.MTE2" in mixed kernels), continuous over
every launch that ran on it. A slice says what the op does: copies by their path ("GM->UB",
"L1->L0A", "L0C->GM"), other ops by name ("mmad", "vexp"), with their cycles and the bytes they
moved per level (gm_read, l2_hit, ...) in args. Iterations the steady-state speed-ups did not
run one by one (interpreter/accel: a loop jumped over whole periods, or a stored execution
applied) are one slice per pipe of category "extrapolated" spanning them ("mmad ×96 iterations"),
with the bytes they moved; a launch repeated from the launch memo (accel/memo.py) repeats its
stored slices. Times are µs at the target clock.

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
the trace (Perfetto reads a string id as hex); a hand-off whose other end fell in extrapolated
iterations has no arrow.

The counter ("C" events, GB/s) sums every core's GM traffic in time bins of each launch: an op's
bytes are spread evenly over its busy interval, HBM (misses and writes) and L2 hits as two stacked
series. It follows the pipe timeline: a launch stretched to the chip bandwidth floor (report key
`bandwidth_floor_applied`) shows its traffic over the shorter timeline.
"""

from __future__ import annotations

import json
import math
from typing import BinaryIO

import numpy as np

from ascendir.hardware.config import HardwareConfig
from ascendir.costmodel import LEVELS
from ascendir.interpreter.state import EXTRAPOLATED as EXTRAPOLATED_SUFFIX, KernelRecord

GM_COUNTER = "GM bandwidth"
SYNC = "sync"  # category of the set_flag / wait_flag slices (not pipe work)
EXTRAPOLATED = "extrapolated"  # category of the slices of iterations not run one by one
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


def gm_counter(rec: KernelRecord, base: float, us: float, clock_hz: float, raw: bool = False) -> list:
    """"C" events of one launch's chip GM bandwidth (GB/s), from `base` (cycles, chip time);
    `raw`: as (cycles from `base`, event) pairs."""
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
    ev = [(float(t), {"ph": "C", "pid": 0, "name": GM_COUNTER, "ts": float(base + t) * us,
                      "args": {"HBM GB/s": round(float(h), 3), "L2 hit GB/s": round(float(c), 3)}})
          for t, h, c in zip(edges[:-1], hbm, l2)]
    ev.append((end, {"ph": "C", "pid": 0, "name": GM_COUNTER, "ts": (base + end) * us, "args": {"HBM GB/s": 0.0, "L2 hit GB/s": 0.0}}))
    return ev if raw else [e for _, e in ev]


class Grid:
    """µs values of chip instants (cycles) on the 1-ns grid (module docstring)."""

    def __init__(self, clock_hz: float) -> None:
        self.ns_per_cycle = 1e9 / clock_hz

    def at(self, cycles: float) -> float:
        """µs of the whole nanosecond nearest to `cycles` (monotone in `cycles`)."""
        return round(cycles * self.ns_per_cycle) / 1000

    def spans(self, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`span` of arrays of starts and ends (cycles): (ts, dur) arrays, the same floats."""
        ts = np.round(starts * self.ns_per_cycle) / 1000
        stop = np.round(ends * self.ns_per_cycle) / 1000
        dur = stop - ts
        for i in np.flatnonzero(ts + dur != stop).tolist():  # the subtraction rounded: step to the end
            dur[i] = self.span(float(starts[i]), float(ends[i]))["dur"]
        return ts, dur

    def span(self, start: float, end: float) -> dict:
        """{"ts", "dur"} of a slice from `start` to `end` (cycles): ts + dur == at(end) exactly."""
        ts, stop = self.at(start), self.at(end)
        dur = stop - ts
        while ts + dur > stop:  # the subtraction rounded up (ts far below end): step back to the end
            dur = math.nextafter(dur, 0.0)
        while ts + dur < stop:
            dur = math.nextafter(dur, math.inf)
        return {"ts": ts, "dur": dur}


def _json(v) -> str:
    return json.dumps(v, separators=(",", ":"), allow_nan=False)


class _Launch:
    """The trace text of one launch's slices relative to its start, made once per slice list: a
    launch the memo repeats (accel/memo.py) hands the same lists again and is only re-timed.

    The text is one %-format string with two values per event (ts and dur of a slice; id and ts
    of a flow event) and one per counter sample (ts), formatted in one call: most of a big
    trace's events are repeats, and this keeps their cost to the formatting of their numbers."""

    __slots__ = ("fmt", "flow", "k", "starts", "ends", "tracks", "nflows", "counter_t", "refs")

    def __init__(self, w: TraceWriter, rec: KernelRecord):
        self.refs = (rec.events, rec.flows)  # held: their ids key the cache
        parts: list[str] = []
        flow: list[bool] = []
        ks: list[int] = []
        starts: list[float] = []
        ends: list[float] = []
        tracks: dict[tuple[int, int], tuple[int, int, str]] = {}
        labels = rec.pipe_labels
        names: dict[str, str] = {}

        def where(core: int, slot: int) -> tuple[int, int]:
            t = tracks.get((core, slot))
            if t is None:
                pid = w.pid(rec.core_type, core)
                t = tracks[(core, slot)] = (pid, w.tids.setdefault(labels[slot], len(w.tids) + 1), labels[slot])
            return t[0], t[1]

        def quoted(name: str) -> str:
            q = names.get(name)
            if q is None:
                q = names[name] = _json(name).replace("%", "%%")
                if name.endswith(EXTRAPOLATED_SUFFIX):
                    q += ',"cat":"extrapolated"'
            return q

        nlevels = len(LEVELS)
        for core, slot, start, cyc, name, items in rec.events:
            pid, tid = where(core, slot)
            moved = "".join(f',"{LEVELS[i]}":{float(b)!r}' for i, b in items if i < nlevels)
            parts.append(f'{{"ph":"X","pid":{pid},"tid":{tid},"name":{quoted(name)},"ts":%r,"dur":%r,"args":{{"cycles":{float(cyc)!r}{moved}}}}}')
            flow.append(False)
            ks.append(0)
            starts.append(start)
            ends.append(start + cyc)
        paired = _paired(rec.flows)
        ids: dict[int, int] = {}
        for phase, core, slot, peer, event, start, end, fid in rec.flows:
            pid, tid = where(core, slot)
            src, dst = (slot, peer) if phase == "s" else (peer, slot)
            what = "set_flag" if phase == "s" else "wait_flag"
            parts.append(f'{{"ph":"X","pid":{pid},"tid":{tid},"name":{quoted(f"{what} {labels[src]}->{labels[dst]}")},"cat":"{SYNC}",'
                         f'"ts":%r,"dur":%r,"args":{{"event":{event},"cycles":{float(end - start)!r}}}}}')
            flow.append(False)
            ks.append(0)
            starts.append(start)
            ends.append(end)
            if fid in paired:
                bp = ',"bp":"e"' if phase == "f" else ""
                parts.append(f'{{"ph":"{phase}","pid":{pid},"tid":{tid},"name":"flag","cat":"flag"{bp},"id":%d,"ts":%r}}')
                flow.append(True)
                ks.append(ids.setdefault(fid, len(ids)))
                starts.append(start)
                ends.append(start)
        counter = gm_counter(rec, 0.0, 1.0, w.target.clock_hz, raw=True)
        for _, ev in counter:
            parts.append(f'{{"ph":"C","pid":0,"name":"{GM_COUNTER}","ts":%r,"args":{_json(ev["args"])}}}')
        self.fmt = ",".join(parts)
        self.tracks, self.nflows = list(tracks.values()), len(ids)
        self.flow, self.k = np.array(flow, dtype=bool), np.array(ks, dtype=float)
        self.starts, self.ends = np.array(starts, dtype=float), np.array(ends, dtype=float)
        self.counter_t = np.array([t for t, _ in counter], dtype=float)

    def text(self, grid: Grid, base: float, us: float, flow0: int) -> str:
        """The launch's events when it starts its body at `base` (cycles) and its first flow id is `flow0`."""
        ts, dur = grid.spans(base + self.starts, base + self.ends)
        pairs = np.empty((len(ts), 2))
        pairs[:, 0] = np.where(self.flow, flow0 + self.k, ts)
        pairs[:, 1] = np.where(self.flow, ts, dur)
        values = pairs.ravel().tolist() + ((base + self.counter_t) * us).tolist()
        return self.fmt % tuple(values)


class TraceWriter:
    """The trace of one chip, built launch by launch (`launch`): written to `out` as it comes
    (then `close(report)` ends the file with the report's run id), or kept in `events` (also
    with `keep`). Each launch's slices are dropped from its KernelRecord once written; the text
    of a launch the memo repeats is made once (`_Launch`), then only re-timed."""

    CACHED = 64  # distinct launches whose text is kept

    def __init__(self, target: HardwareConfig, out: BinaryIO | None = None, keep: bool = False):
        self.target, self.out = target, out
        self.us = 1e6 / target.clock_hz
        self.grid = Grid(target.clock_hz)
        self.split_cores = target.arch.split_cores
        self.events: list[dict] | None = [] if out is None or keep else None
        self.offset = 0.0  # chip time the next launch starts, cycles
        self.launches = 0
        self.next_flow = 0
        self.pids: dict[tuple[str, int], int] = {}
        self.tids: dict[str, int] = {}  # pipe label -> tid, the same in every core's process
        self.named: set[tuple[int, int]] = set()
        self.cache: dict[tuple[int, int], _Launch] = {}
        self.first = True
        self.meta: list[dict] = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "host"}},
                                 {"ph": "M", "pid": 0, "name": "process_sort_index", "args": {"sort_index": 0}},
                                 {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "kernel launches"}}]
        if out is not None:
            out.write(b'{"traceEvents":[')

    def _write(self, text: str) -> None:
        if not text:
            return
        if self.events is not None:
            self.events.extend(json.loads("[" + text + "]"))
        if self.out is not None:
            self.out.write((text if self.first else "," + text).encode())
        self.first = False

    def pid(self, core_type: str, core: int) -> int:
        """The process of core `core` for a kernel of `core_type` (named when first used)."""
        kind = {"aic": "AIC", "aiv": "AIV", "mix": "AIC+AIV"}.get(core_type, core_type) if self.split_cores else "core"
        pid = self.pids.get((kind, core))
        if pid is None:
            pid = self.pids[(kind, core)] = len(self.pids) + 1
            self.meta.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"{kind} {core}"}})
            self.meta.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
        return pid

    def launch(self, rec: KernelRecord) -> None:
        """Add the slices of launch `rec` (after the launches before it), then drop them from it."""
        key = (id(rec.events), id(rec.flows))
        lt = self.cache.get(key)
        if lt is None:
            lt = _Launch(self, rec)
            if len(self.cache) >= self.CACHED:
                del self.cache[next(iter(self.cache))]
            self.cache[key] = lt
        for pid, tid, label in lt.tracks:
            if (pid, tid) not in self.named:
                self.named.add((pid, tid))
                self.meta.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": label}})
        parts = [_json(e) for e in self.meta]
        self.meta = []
        host = {"block_dim": rec.block_dim, "core_type": rec.core_type, "cycles": rec.cycles, "launch": self.launches}
        if rec.node is not None:
            host["onnx_node"] = rec.node
        parts.append(_json({"ph": "X", "pid": 0, "tid": 0, "name": rec.name, **self.grid.span(self.offset, self.offset + rec.cycles),
                            "args": host}))
        if lt.fmt:
            parts.append(lt.text(self.grid, self.offset + rec.launch_cycles, self.us, self.next_flow))
        self.next_flow += lt.nflows
        self._write(",".join(parts))
        rec.events, rec.flows = [], []
        self.offset += rec.cycles
        self.launches += 1

    def close(self, report: dict) -> None:
        """End the file: `otherData` (free-form metadata of the format) holds the run_id, target
        and launch count of the run's report (report.run_id)."""
        if self.out is not None:
            self.out.write(b'],"otherData":' + _json(other_data(report)).encode() + b"}")


def _paired(flows: list) -> set:
    """The flow ids of `flows` with both their set ("s") and their wait ("f")."""
    seen: dict = {}
    for f in flows:
        seen[f[7]] = seen.get(f[7], 0) | (1 if f[0] == "s" else 2)
    return {k for k, v in seen.items() if v == 3}


def other_data(report: dict) -> dict:
    return {"run_id": report.get("run_id"), "target": report.get("target"), "kernels": len(report.get("kernels", []))}


def trace_document(events: list[dict], report: dict) -> dict:
    """The JSON object of a trace file: `traceEvents` and, in `otherData` (free-form metadata of
    the format), the run_id, target and launch count of the run's report (report.run_id)."""
    return {"traceEvents": events, "otherData": other_data(report)}


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
