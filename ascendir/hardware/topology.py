"""Topologies: how the devices of a multi-NPU machine are joined (topologies/*.toml), loaded and
checked into a `Topology`.

A topology names its chip and device count, lists link *domains* (a kind of link joining every
pair of devices inside each of its groups: HCCS inside an 8-NPU 910B server, the A3 unified bus,
RoCE between servers) and HCCL's cost constants. A pair of devices is joined by the first domain
whose group holds both. Figures are GB/s (1e9 bytes/s, one direction) and microseconds, as the
sources give them; `Topology.link` answers in those units and the interpreter converts with the
chip clock. Sources of every figure: the comments of each file, docs/hardware-reference.md
§Interconnect.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ascendir.errors import AscendirError

TOPOLOGIES_DIR = Path(__file__).parent / "topologies"
TOPOLOGIES = sorted(p.stem for p in TOPOLOGIES_DIR.glob("*.toml"))
DEFAULT_TOPOLOGY = "atlas800-a2"
TRANSPORTS = ("sdma", "rdma")
HCCL_KEYS = ("sdma_GBps", "sdma_head_us", "sdma_large_head_us", "sdma_large_bytes", "rdma_GBps", "rdma_head_us",
             "notify_record_us", "notify_wait_us")
DOMAIN_KEYS = ("name", "transport", "groups", "per_peer_GBps", "total_GBps", "latency_us")


@dataclass(frozen=True)
class Hccl:
    """HCCL's cost constants (S23, low confidence): SDMA and RDMA rate per flow (GB/s) and fixed
    cost per transfer (us; an SDMA copy of `sdma_large_bytes` or more pays `sdma_large_head_us`),
    notify record / wait (us)."""

    sdma_GBps: float
    sdma_head_us: float
    sdma_large_head_us: float
    sdma_large_bytes: int
    rdma_GBps: float
    rdma_head_us: float
    notify_record_us: float
    notify_wait_us: float


@dataclass(frozen=True)
class Domain:
    """A kind of link: every pair of devices inside one of `groups` is joined by a link of
    `per_peer_GBps`; all of a device's links of this domain share `total_GBps` (its port);
    `latency_us` from the first byte sent to the first byte seen; moved by `transport` (sdma: the
    chip's DMA engines, rdma: the NIC)."""

    name: str
    transport: str
    groups: tuple[tuple[int, ...], ...]
    per_peer_GBps: float
    total_GBps: float
    latency_us: float


@dataclass(frozen=True)
class Link:
    """The one-way link from device `src` to `dst`: its domain, and the rate one transfer gets
    (GB/s: the link's per-peer rate, capped by the transport's per-flow rate) and fixed cost (us:
    link latency + the transfer's head)."""

    src: int
    dst: int
    domain: Domain
    flow_GBps: float
    head_us: float

    @property
    def key(self) -> tuple[int, int]:
        return (self.src, self.dst)


@dataclass(frozen=True)
class Topology:
    """`devices` NPUs of chip `chip`, joined by `domains` (first match wins), with HCCL's
    constants `hccl`. `source`: the file it came from."""

    name: str
    chip: str
    devices: int
    domains: tuple[Domain, ...]
    hccl: Hccl
    source: str = ""

    def domain(self, src: int, dst: int) -> Domain | None:
        """The first domain whose group holds both devices, None if none does."""
        for d in self.domains:
            for g in d.groups:
                if src in g and dst in g:
                    return d
        return None

    def link(self, src: int, dst: int, nbytes: int = 0) -> Link:
        """The link a transfer of `nbytes` from device `src` to device `dst` uses.

        Raises:
            AscendirError: a device outside the topology, or two devices no domain joins."""
        for dev in (src, dst):
            if not 0 <= dev < self.devices:
                raise AscendirError(f"topology {self.name}: device {dev} does not exist ({self.devices} devices)")
        d = self.domain(src, dst)
        if d is None:
            raise AscendirError(f"topology {self.name}: no link joins device {src} and device {dst}")
        h = self.hccl
        if d.transport == "rdma":
            rate, head = h.rdma_GBps, h.rdma_head_us
        else:
            rate, head = h.sdma_GBps, h.sdma_large_head_us if nbytes >= h.sdma_large_bytes else h.sdma_head_us
        return Link(src, dst, d, min(rate, d.per_peer_GBps), d.latency_us + head)

    def check_group(self, ranks: tuple[int, ...], what: str) -> None:
        """Check that a collective over `ranks` can run here: every device exists and every pair
        is joined.

        Raises:
            AscendirError: `what` (the op) with the reason, one line."""
        if len(ranks) > self.devices:
            raise AscendirError(f"{what}: a group of {len(ranks)} devices does not fit topology {self.name} "
                                f"({self.devices} devices)")
        for r in ranks:
            if not 0 <= r < self.devices:
                raise AscendirError(f"{what}: device {r} is not in topology {self.name} (devices 0..{self.devices - 1})")
        for a in ranks:
            for b in ranks:
                if a != b and self.domain(a, b) is None:
                    raise AscendirError(f"{what}: devices {a} and {b} are in no common device group of topology {self.name}")


def load_topology(topology: str | Path | Topology | None = None) -> Topology:
    """A shipped topology by name (`atlas800-a2`, ...) or a TOML file.

    Raises:
        AscendirError: an unknown name, an unreadable file, or a bad key (the message names it)."""
    if isinstance(topology, Topology):
        return topology
    topology = topology or DEFAULT_TOPOLOGY
    path = Path(topology)
    if path.suffix != ".toml":
        path = TOPOLOGIES_DIR / f"{topology}.toml"
        if not path.exists():
            raise AscendirError(f"unknown topology '{topology}'; shipped topologies: {', '.join(TOPOLOGIES)}")
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise AscendirError(f"cannot read topology file {path}: {' '.join(str(e).split())}") from None
    except UnicodeDecodeError:
        raise AscendirError(f"cannot read topology file {path}: not UTF-8 text") from None
    except RecursionError:
        raise AscendirError(f"cannot read topology file {path}: arrays nested too deeply") from None
    try:
        return _parse(raw, str(path))
    except _Bad as e:
        raise AscendirError(f"topology file {path}: {e}") from None


class _Bad(Exception):
    """A bad key: the message starts with its dotted name."""


def _table(raw: dict, key: str, allowed: tuple[str, ...]) -> dict:
    t = raw.get(key)
    if not isinstance(t, dict):
        raise _Bad(f"{key}: missing table" if t is None else f"{key}: must be a table")
    for k in t:
        if k not in allowed:
            raise _Bad(f"{key}.{k}: unknown key (known: {', '.join(allowed)})")
    return t


def _number(t: dict, table: str, key: str, positive: bool = True) -> float:
    v = t.get(key)
    if v is None:
        raise _Bad(f"{table}.{key}: missing")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise _Bad(f"{table}.{key}: must be a {'positive' if positive else 'non-negative'} number, got {v!r}")
    return float(v)


def _parse(raw: dict, source: str) -> Topology:
    for k in raw:
        if k not in ("topology", "domains", "hccl"):
            raise _Bad(f"{k}: unknown table (known: topology, domains, hccl)")
    top = _table(raw, "topology", ("name", "chip", "devices"))
    for k in ("name", "chip"):
        if not isinstance(top.get(k), str) or not top[k]:
            raise _Bad(f"topology.{k}: must be a non-empty string")
    n = top.get("devices")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 4096:
        raise _Bad(f"topology.devices: must be an integer in [1, 4096], got {n!r}")
    hccl_t = _table(raw, "hccl", HCCL_KEYS)
    hccl = Hccl(**{k: _number(hccl_t, "hccl", k, positive=k.endswith("GBps") or k == "sdma_large_bytes") for k in HCCL_KEYS})
    hccl = Hccl(**{**hccl.__dict__, "sdma_large_bytes": int(hccl.sdma_large_bytes)})
    doms = raw.get("domains")
    if not isinstance(doms, list) or not doms:
        raise _Bad("domains: needs at least one [[domains]] table")
    domains, names = [], set()
    for i, d in enumerate(doms):
        where = f"domains[{i}]"
        if not isinstance(d, dict):
            raise _Bad(f"{where}: must be a table")
        for k in d:
            if k not in DOMAIN_KEYS:
                raise _Bad(f"{where}.{k}: unknown key (known: {', '.join(DOMAIN_KEYS)})")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise _Bad(f"{where}.name: must be a non-empty string")
        if name in names:
            raise _Bad(f"{where}.name: domain '{name}' is listed twice")
        names.add(name)
        if d.get("transport") not in TRANSPORTS:
            raise _Bad(f"{where}.transport: must be one of {', '.join(TRANSPORTS)}, got {d.get('transport')!r}")
        groups = d.get("groups")
        if not isinstance(groups, list) or not groups or not all(isinstance(g, list) and g for g in groups):
            raise _Bad(f"{where}.groups: must be a non-empty list of non-empty device lists")
        for g in groups:
            for dev in g:
                if isinstance(dev, bool) or not isinstance(dev, int) or not 0 <= dev < n:
                    raise _Bad(f"{where}.groups: device {dev!r} is not in 0..{n - 1}")
            if len(set(g)) != len(g):
                raise _Bad(f"{where}.groups: a device is listed twice in {g}")
        per_peer, total = _number(d, where, "per_peer_GBps"), _number(d, where, "total_GBps")
        if total < per_peer:
            raise _Bad(f"{where}.total_GBps: {total} is below per_peer_GBps {per_peer} (a port carries at least one link)")
        domains.append(Domain(name, d["transport"], tuple(tuple(g) for g in groups), per_peer, total,
                              _number(d, where, "latency_us", positive=False)))
    return Topology(top["name"], top["chip"], n, tuple(domains), hccl, source)
