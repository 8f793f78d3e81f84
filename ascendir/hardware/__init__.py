"""Hardware descriptions: one TOML per chip, loaded into `HardwareConfig`."""

from ascendir.hardware.config import HardwareConfig, load_target, TARGETS

__all__ = ["HardwareConfig", "load_target", "TARGETS"]
