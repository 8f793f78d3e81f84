"""N devices joined by a topology: each device is one chip (chip.py) running its own module.

This is the interface the multi-device work fills in. Today a device's module has no
cross-device ops, so devices run independently and no link carries bytes; `Link` and
`Topology` say what a link is (bandwidth, latency, endpoints) so that comm ops (a DMA from this
device's GM to a peer's over a link, cross-device notify / wait) can be timed on shared link
timelines without changing how a caller builds or runs a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter.accel import Accel
from ascendir.interpreter.sim.chip import ModuleProg, compile_module
from ascendir.interpreter.state import KernelRecord
from ascendir.weights import WeightStore


@dataclass(frozen=True)
class Link:
    """A one-way link from device `src` to device `dst`: `bytes_per_cycle` (device clock cycles)
    and `latency` (cycles from the first byte sent to the first byte visible at `dst`)."""

    src: int
    dst: int
    bytes_per_cycle: float
    latency: float = 0.0


@dataclass(frozen=True)
class Topology:
    """`devices` devices and the links between them (none: devices that never talk)."""

    devices: int
    links: tuple[Link, ...] = ()

    def link(self, src: int, dst: int) -> Link:
        """The link from `src` to `dst`.

        Raises:
            AscendirError: when the topology has no such link."""
        for ln in self.links:
            if ln.src == src and ln.dst == dst:
                return ln
        raise AscendirError(f"topology of {self.devices} devices has no link from device {src} to device {dst}")


@dataclass
class DeviceRun:
    """What one device of a cluster run gave: @main's outputs and its kernel launch records."""

    outputs: dict[str, np.ndarray]
    records: list[KernelRecord] = field(default_factory=list)


class Cluster:
    """`topology.devices` chips of `target`, device d running `modules[d]` with `weights[d]`.

    Raises:
        AscendirError: a module count other than the topology's device count, or any error of
            compile_module on a device's module."""

    def __init__(self, modules: list[ModuleOp], weights: list[WeightStore | None], target: HardwareConfig, topology: Topology,
                 timing_only: bool = False, accel: Accel | None = None):
        if len(modules) != topology.devices or len(weights) != topology.devices:
            raise AscendirError(f"a cluster of {topology.devices} devices needs {topology.devices} modules and weight stores, "
                                f"got {len(modules)} and {len(weights)}")
        self.topology = topology
        self.devices: list[ModuleProg] = [
            compile_module(m, target, w, timing_only=timing_only, accel=accel) for m, w in zip(modules, weights)
        ]

    def run(self, inputs: list[dict[str, np.ndarray]]) -> list[DeviceRun]:
        """Run every device on its inputs (device order); returns one DeviceRun per device."""
        if len(inputs) != len(self.devices):
            raise AscendirError(f"a cluster of {len(self.devices)} devices needs {len(self.devices)} input dicts, got {len(inputs)}")
        return [DeviceRun(*dev.run(feeds)) for dev, feeds in zip(self.devices, inputs)]
