"""Load a chip description (TOML) into a `HardwareConfig`.

Every number in the TOML files carries a comment naming its source in
../shared/reference/ascend-hardware.md ([Sn] ids) and its confidence (doc / rep / INF).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendir.errors import AscendirError

_HERE = Path(__file__).parent
TARGETS = sorted(p.stem for p in _HERE.glob("*.toml"))
DEFAULT_TARGET = "ascend910b2"


@dataclass(frozen=True)
class HardwareConfig:
    """One chip. Sizes in bytes, rates in bytes/cycle per core, times in cycles of `clock_hz`."""

    name: str
    arch: str  # "dav-c220" (910B, split AIC/AIV), "dav-c100" (910A), "dav-m200" (310P)
    clock_hz: float
    num_aic: int  # cube cores (AI Cores on coupled chips)
    num_aiv: int  # vector cores (equal to num_aic on coupled chips)
    buffers: dict[str, int]  # space -> bytes per core: l1, l0a, l0b, l0c, ub, bt, fb
    align: dict[str, int]  # space -> address alignment in bytes
    raw: dict[str, Any] = field(repr=False, default_factory=dict)  # the whole TOML, for the cost model

    @property
    def split(self) -> bool:
        """True when cube and vector cores are separate (910B): results cross through GM/L2."""
        return self.arch == "dav-c220"

    def capacity(self, space: str) -> int:
        """Bytes of `space` per core.

        Raises:
            AscendirError: if the chip has no such buffer.
        """
        if space not in self.buffers:
            raise AscendirError(f"target {self.name} has no {space} buffer")
        return self.buffers[space]


def load_target(target: str | Path | None = None) -> HardwareConfig:
    """Load a shipped target by name (e.g. "ascend910b2", "910b2") or a TOML file path.

    Raises:
        AscendirError: unknown target name, unreadable file or missing keys.
    """
    target = target or DEFAULT_TARGET
    path = Path(target)
    if path.suffix != ".toml":
        name = str(target).lower()
        name = name if name.startswith("ascend") else f"ascend{name}"
        path = _HERE / f"{name}.toml"
        if not path.exists():
            raise AscendirError(f"unknown target '{target}'; shipped targets: {', '.join(TARGETS)}")
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise AscendirError(f"cannot read target file {path}: {e}") from None
    try:
        chip = raw["chip"]
        return HardwareConfig(
            name=chip["name"],
            arch=chip["arch"],
            clock_hz=float(chip["clock_hz"]),
            num_aic=int(chip["num_aic"]),
            num_aiv=int(chip["num_aiv"]),
            buffers={k: int(v) for k, v in raw["buffers"].items()},
            align={k: int(v) for k, v in raw["align"].items()},
            raw=raw,
        )
    except KeyError as e:
        raise AscendirError(f"target file {path} lacks key {e}") from None
