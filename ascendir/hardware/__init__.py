"""Hardware descriptions: one TOML per chip (chips/*.toml), loaded into `HardwareConfig`, and one
`ChipArch` per architecture (arch.py) saying what its chips can do."""

from ascendir.hardware.arch import ARCHS, ChipArch, L0COut
from ascendir.hardware.config import HardwareConfig, load_target, TARGETS

__all__ = ["ARCHS", "ChipArch", "HardwareConfig", "L0COut", "load_target", "TARGETS"]
