"""Links of a cluster run as shared timelines: each ordered pair of devices has one link (its
transfers run one after another), each device one egress port per link domain (all its links of
that domain share the port's total bandwidth), and notifies cross a link after its latency.

Times are cycles of the chip clock (`clock_hz`), from the start of the run, common to every
device. A transfer of n bytes from `src` to `dst` that is ready at time t:
    start = max(t, link free)
    port end = start + (n + sum over the port's other transfers o of min(n, o's bytes left at
               start)) / port rate   (the domain's total_GBps)
    end   = max(start + head + n / flow rate, port end + head)
    link free := end
the completion time of a new job under processor sharing when the jobs already on the port keep
their shares (later arrivals ignored): while the port moves n bytes of this transfer it moves at
most n of each other one. So transfers on different links of one port run at once and together
move no more than the port's bandwidth allows, and a small transfer (a handshake, a group-list
entry) is not queued behind the bytes other links booked before it, as a FIFO port would have it.
An other transfer's bytes left at `start` are taken as linear over its [start, end]; one booked to
start later counts whole.
where the flow rate is the link's per-peer rate capped by the transport's per-flow rate and head
its latency + the transport's fixed cost per transfer (Topology.link: HCCL constants S23, link
figures S21 / S12 / §6, all in docs/hardware-reference.md §Interconnect). A copy within one
device takes head + n / (SDMA flow rate) on no link.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ascendir.hardware.topology import Topology


@dataclass
class LinkUse:
    """One link's timeline over a run: when it is free, bytes moved, cycles busy (transfers,
    heads included)."""

    src: int
    dst: int
    domain: str
    free: float = 0.0
    bytes: float = 0.0
    busy: float = 0.0
    transfers: int = 0


def _left(transfer: tuple[float, float, float], t: float) -> float:
    """Bytes of `transfer` (start, end, bytes) not yet moved at time `t`, linear over its span."""
    start, end, nbytes = transfer
    if t <= start or end <= start:
        return nbytes
    return nbytes * max(0.0, end - t) / (end - start)


class Links:
    """The link and port timelines of one cluster run over `topology` at `clock_hz`."""

    def __init__(self, topology: Topology, clock_hz: float, trace: bool = False):
        self.topology = topology
        self.clock_hz = clock_hz
        # (src, dst) -> [(start, end, bytes)] of every transfer, for the trace (None: not kept)
        self.spans: dict[tuple[int, int], list[tuple[float, float, float]]] | None = {} if trace else None
        self.links: dict[tuple[int, int], LinkUse] = {}
        # (src, domain) -> [(start, end, bytes)] of the port's transfers that may still be moving
        self.ports: dict[tuple[int, str], list[tuple[float, float, float]]] = {}

    def cycles(self, us: float) -> float:
        return us * 1e-6 * self.clock_hz

    def per_cycle(self, gbps: float) -> float:
        return gbps * 1e9 / self.clock_hz

    def local_copy(self, nbytes: int, ready: float) -> float:
        """End time of an SDMA copy of `nbytes` within one device that may start at `ready`."""
        h = self.topology.hccl
        head = h.sdma_large_head_us if nbytes >= h.sdma_large_bytes else h.sdma_head_us
        return ready + self.cycles(head) + nbytes / self.per_cycle(h.sdma_GBps)

    def transfer(self, src: int, dst: int, nbytes: int, ready: float, by_cores: bool = False) -> float:
        """Time the last byte of a `nbytes` transfer from `src` to `dst`, ready at `ready`, lands.
        `by_cores`: the AI Cores' DMA moves it (sim/comm.py's AIV rows), not the transport's engine:
        no transport head and no per-flow cap (the die's vector cores are many flows at once), so
        the link's per-peer rate, its latency and the port's share bound it; the cores' own per-row
        costs are charged by the caller.

        Raises:
            AscendirError: devices the topology does not join (Topology.link)."""
        ln = self.topology.link(src, dst, nbytes)
        if by_cores:
            ln = replace(ln, flow_GBps=ln.domain.per_peer_GBps, head_us=ln.domain.latency_us)
        use = self.links.get((src, dst))
        if use is None:
            use = self.links[(src, dst)] = LinkUse(src, dst, ln.domain.name)
        start = max(ready, use.free)
        booked = [b for b in self.ports.get((src, ln.domain.name), []) if b[1] > start]
        shared = sum(min(nbytes, _left(b, start)) for b in booked)
        port_end = start + (nbytes + shared) / self.per_cycle(ln.domain.total_GBps)
        head = self.cycles(ln.head_us)
        end = max(start + head + nbytes / self.per_cycle(ln.flow_GBps), port_end + head)
        booked.append((start, end, float(nbytes)))
        self.ports[(src, ln.domain.name)] = booked
        use.busy += end - start
        use.free = end
        use.bytes += nbytes
        use.transfers += 1
        if self.spans is not None:
            self.spans.setdefault((src, dst), []).append((start, end, float(nbytes)))
        return end

    def latency(self, src: int, dst: int) -> float:
        """Cycles a notify from `src` takes to be seen at `dst` (the link latency)."""
        return self.cycles(self.topology.link(src, dst).domain.latency_us)

    def report(self, total_cycles: float) -> list[dict]:
        """Per used link: src, dst, domain, bytes, transfers, busy_cycles and busy_fraction (of
        `total_cycles`, the run's length)."""
        return [
            {"src": u.src, "dst": u.dst, "domain": u.domain, "bytes": u.bytes, "transfers": u.transfers,
             "busy_cycles": u.busy, "busy_fraction": min(1.0, u.busy / total_cycles) if total_cycles else 0.0}
            for (_, _), u in sorted(self.links.items())
        ]
