"""Load a chip description (TOML) into a `HardwareConfig`.

One file per chip in hardware/chips/ (`ascendir --target NAME` finds chips/NAME.toml); its
`chip.arch` names the `ChipArch` (hardware/arch.py) that says what the chip can do. Every number
in the TOML files carries a comment naming its source ([Sn] ids, docs/hardware-reference.md) and
its confidence (doc / rep / INF). Units: bytes, cycles of `clock_hz` (the AI Core clock), rates in
bytes/cycle per core.
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ascendir.dialects.ascend import Ascend, MemSpace
from ascendir.dialects.ascend.ops_vector import VectorOp
from ascendir.errors import AscendirError
from ascendir.hardware.arch import ARCHS, ChipArch

CHIPS = Path(__file__).parent / "chips"
TARGETS = sorted(p.stem for p in CHIPS.glob("*.toml"))
DEFAULT_TARGET = "ascend910b2"
L2_MODELS = ("tile", "none", "hit")


@dataclass(frozen=True)
class CubeSpec:
    """Cube unit: an mmad of M×K×N costs ceil(M/fm)·ceil(N/fn)·ceil(K/k_per_cycle[dtype]) + startup."""

    fractal_m: int
    fractal_n: int
    k_per_cycle: dict[str, int]  # dtype key (f16, bf16, f32, s8, ...) -> K elements per cycle
    mmad_startup: int  # cycles per mmad instruction
    max_mnk: int

    def macs_per_cycle(self, dtype: str) -> int:
        """Multiply-accumulates per cycle per core for `dtype` (e.g. 4096 for f16)."""
        return self.fractal_m * self.fractal_n * self.k_per_cycle[dtype]


@dataclass(frozen=True)
class VectorOpCost:
    """Cost of one vector op kind.

    kind "repeat" (S5 table): cycles = ceil(bytes/repeat)·(repeat/bpc) + latency + vector start-up;
    kind "fit" (S4 fit): cycles = k·elements + b (k per element size: 2-byte or 4-byte).
    """

    kind: str
    bpc: float = 256.0  # bytes/cycle (4-byte and wider elements)
    bpc16: float = 256.0  # bytes/cycle for 2-byte (and 1-byte) elements
    latency: float = 0.0
    k16: float = 0.0
    k32: float = 0.0
    b: float = 0.0


@dataclass(frozen=True)
class VectorSpec:
    bytes_per_cycle: int
    repeat_bytes: int
    block_bytes: int
    max_repeat: int
    pipeline_latency: int
    ops: dict[str, VectorOpCost]

    def op(self, name: str) -> VectorOpCost:
        """Cost entry of vector op `name` (without the `ascend.` prefix), or the default."""
        return self.ops.get(name) or self.ops["default"]


@dataclass(frozen=True)
class MemorySpec:
    """Chip-level memory: HBM (shared by all cores) and L2."""

    hbm_bytes: int
    hbm_bw_Bps: float  # the nominal (peak) HBM bandwidth
    # The share of hbm_bw_Bps a kernel sustains while it streams (0 < share <= 1): fitted once on
    # the one streaming measurement, V7 [S16] (torch.exp fp32 on a 910B: 2 x 642 GB/s = 1.284e12
    # of 1.6e12 = 0.80), validated on V14 [S19] (decode GEMMs on an A3 die; V20 [S27] and V10,
    # bound by L2, do not move): docs/hardware-reference.md §Memory. See
    # `HardwareConfig.hbm_sustained_bytes_per_cycle`.
    hbm_efficiency: float
    gm_read_latency: int  # cycles
    gm_write_latency: int  # cycles
    l2_bytes: int
    l2_line_bytes: int
    l2_bw_over_hbm: float
    l2_hit_latency: int
    l2_miss_latency: int
    l2_model: str  # "tile" (interpreter/l2.py, default), "none" (every read at HBM rate), "hit" (every read hits)
    # the scalar unit's data cache, one per scalar unit (interpreter/timing/dcache.py)
    dcache_bytes: int  # bytes per scalar unit
    dcache_line_bytes: int
    dcache_hit_latency: int  # cycles of a scalar load that hits


@dataclass(frozen=True)
class HardwareConfig:
    """One chip. Sizes in bytes, rates in bytes/cycle per core, times in cycles of `clock_hz`."""

    name: str
    arch: ChipArch  # what the architecture can do (hardware/arch.py); str(arch) is its name
    clock_hz: float
    num_aic: int  # cube cores (AI Cores on coupled chips)
    num_aiv: int  # vector cores (equal to num_aic on coupled chips)
    buffers: dict[str, int]  # space -> bytes per core: l1, l0a, l0b, l0c, ub, bt, fb
    align: dict[str, int]  # space -> address alignment in bytes
    raw: dict[str, Any] = field(repr=False, default_factory=dict)  # the whole TOML
    vector_clock_hz: float = 0.0
    aiv_per_aic: int = 1
    kernel_launch_cycles: int = 0  # fixed cycles added per kernel launch
    memory: MemorySpec | None = None
    cube: CubeSpec | None = None
    vector: VectorSpec | None = None
    rates: dict[str, float] = field(default_factory=dict)  # "src_to_dst" -> bytes/cycle per core
    startup: dict[str, int] = field(default_factory=dict)  # engine -> cycles per call
    event_ids: int = 8

    def capacity(self, space: str) -> int:
        """Bytes of `space` per core.

        Raises:
            AscendirError: if the chip has no such buffer.
        """
        if space not in self.buffers:
            raise AscendirError(f"target {self.name} has no {space} buffer")
        return self.buffers[space]

    def rate(self, src: str, dst: str) -> float:
        """Bytes/cycle per core of the DMA path src → dst (memory space names).

        Raises:
            AscendirError: if the target file gives no rate for the path.
        """
        key = f"{src}_to_{dst}"
        if key not in self.rates:
            raise AscendirError(f"target {self.name} has no rate for path {src} -> {dst} (add rates.{key})")
        return self.rates[key]

    @property
    def hbm_bytes_per_cycle(self) -> float:
        """Chip HBM bandwidth in bytes per AI Core cycle (shared by all cores): the nominal peak,
        what one DMA stream's share of it is capped at (costmodel.CostEnv) and what "% of HBM"
        figures are quoted against."""
        return self.memory.hbm_bw_Bps / self.clock_hz

    @property
    def hbm_sustained_bytes_per_cycle(self) -> float:
        """HBM bytes per AI Core cycle the chip sustains over a kernel: the peak
        `hbm_bytes_per_cycle` x `memory.hbm_efficiency` (0.80 on the 910B and the A3 die, fitted
        on V7 [S16], validated on V14 [S19]; docs/hardware-reference.md §Memory). Every place
        where bytes that reach HBM become time uses it: the chip bandwidth floor
        (costmodel.bandwidth_bound_cycles), the comm kernels' HBM floor and reduction
        (interpreter/sim/comm.py), a compute kernel sharing HBM with background comm
        (exec/compiler.py) and the estimates that mirror them."""
        return self.hbm_bytes_per_cycle * self.memory.hbm_efficiency

    def cores(self, core_type: str) -> int:
        """Cores a kernel of `core_type` (aic, aiv, mix) spreads its blocks over."""
        return self.num_aiv if core_type == "aiv" else self.num_aic

    def with_l2_model(self, model: str) -> HardwareConfig:
        """A copy of this target using L2 model `model` ("tile": tile-granular cache with a
        residency window, interpreter/l2.py; "none": every GM access at HBM rate; "hit": every GM
        read hits L2 — an optimistic bound)."""
        if model not in L2_MODELS:
            raise AscendirError(f"unknown L2 model '{model}' (choose from {', '.join(L2_MODELS)})")
        return replace(self, memory=replace(self.memory, l2_model=model))

    def peak_flops_per_cycle(self, dtype: str = "f16") -> float:
        """Chip cube peak in flops per cycle (2 per MAC, all AIC cores)."""
        return 2.0 * self.cube.macs_per_cycle(dtype) * self.num_aic

    def peak_flops(self, dtype: str = "f16") -> float:
        """Chip cube peak in flops per second."""
        return self.peak_flops_per_cycle(dtype) * self.clock_hz


def _vector_op(name: str, d: dict[str, Any]) -> VectorOpCost:
    if "k16" in d:
        return VectorOpCost("fit", k16=float(d["k16"]), k32=float(d.get("k32", d["k16"])), b=float(d["b"]))
    if "bpc" in d:
        bpc = float(d["bpc"])
        return VectorOpCost("repeat", bpc=bpc, bpc16=float(d.get("bpc16", bpc)), latency=float(d["latency"]))
    raise AscendirError(f"vector.ops.{name}: needs either {{bpc, latency}} or {{k16, k32, b}}")


def _parse(raw: dict[str, Any]) -> HardwareConfig:
    chip, mem, cube, vec = raw["chip"], raw["memory"], raw["cube"], raw["vector"]
    ops = {k: _vector_op(k, v) for k, v in vec["ops"].items()}
    if "default" not in ops:
        raise AscendirError("vector.ops needs a 'default' entry")
    return HardwareConfig(
        name=chip["name"],
        arch=ARCHS[chip["arch"]],
        clock_hz=float(chip["clock_hz"]),
        num_aic=int(chip["num_aic"]),
        num_aiv=int(chip["num_aiv"]),
        buffers={k: int(v) for k, v in raw["buffers"].items()},
        align={k: int(v) for k, v in raw["align"].items()},
        raw=raw,
        vector_clock_hz=float(chip.get("vector_clock_hz", chip["clock_hz"])),
        aiv_per_aic=int(chip.get("aiv_per_aic", 1)),
        kernel_launch_cycles=int(chip["kernel_launch_cycles"]),
        memory=MemorySpec(
            hbm_bytes=int(mem["hbm_bytes"]),
            hbm_bw_Bps=float(mem["hbm_bw_Bps"]),
            hbm_efficiency=float(mem["hbm_efficiency"]),
            gm_read_latency=int(mem["gm_read_latency"]),
            gm_write_latency=int(mem["gm_write_latency"]),
            l2_bytes=int(mem["l2_bytes"]),
            l2_line_bytes=int(mem["l2_line_bytes"]),
            l2_bw_over_hbm=float(mem["l2_bw_over_hbm"]),
            l2_hit_latency=int(mem["l2_hit_latency"]),
            l2_miss_latency=int(mem["l2_miss_latency"]),
            l2_model=str(mem.get("l2_model", "tile")),
            dcache_bytes=int(mem["dcache_bytes"]),
            dcache_line_bytes=int(mem["dcache_line_bytes"]),
            dcache_hit_latency=int(mem["dcache_hit_latency"]),
        ),
        cube=CubeSpec(
            fractal_m=int(cube["fractal_m"]),
            fractal_n=int(cube["fractal_n"]),
            k_per_cycle={k: int(v) for k, v in cube["k_per_cycle"].items()},
            mmad_startup=int(cube["mmad_startup"]),
            max_mnk=int(cube["max_mnk"]),
        ),
        vector=VectorSpec(
            bytes_per_cycle=int(vec["bytes_per_cycle"]),
            repeat_bytes=int(vec["repeat_bytes"]),
            block_bytes=int(vec["block_bytes"]),
            max_repeat=int(vec["max_repeat"]),
            pipeline_latency=int(vec["pipeline_latency"]),
            ops=ops,
        ),
        rates={k: float(v) for k, v in raw["rates"].items()},
        startup={k: int(v) for k, v in raw["startup"].items()},
        event_ids=int(raw.get("sync", {}).get("event_ids", 8)),
    )


# Value rules of the TOML keys (checked on the raw file, so 0.5 is not first truncated to 0):
# "pos" a finite number > 0, "nonneg" a finite number >= 0, "posint" / "nonnegint" the same and
# integral, "rate" a number of bytes per cycle >= MIN_RATE. A "*" stands for every key of that table. Missing required keys are _parse's to report.
_RULES: tuple[tuple[str, str], ...] = (
    ("chip.clock_hz", "pos"), ("chip.vector_clock_hz", "pos"), ("chip.num_aic", "posint"), ("chip.num_aiv", "posint"),
    ("chip.aiv_per_aic", "posint"), ("chip.kernel_launch_cycles", "nonnegint"),
    ("memory.hbm_bytes", "posint"), ("memory.hbm_bw_Bps", "pos"), ("memory.hbm_efficiency", "share"),
    ("memory.gm_read_latency", "nonnegint"),
    ("memory.gm_write_latency", "nonnegint"), ("memory.l2_bytes", "posint"), ("memory.l2_line_bytes", "posint"),
    ("memory.l2_bw_over_hbm", "pos"), ("memory.l2_hit_latency", "nonnegint"), ("memory.l2_miss_latency", "nonnegint"),
    ("memory.dcache_bytes", "posint"), ("memory.dcache_line_bytes", "posint"), ("memory.dcache_hit_latency", "nonnegint"),
    ("buffers.*", "posint"), ("align.*", "posint"), ("rates.*", "rate"), ("startup.*", "nonnegint"),
    ("cube.fractal_m", "posint"), ("cube.fractal_n", "posint"), ("cube.k_per_cycle.*", "posint"),
    ("cube.mmad_startup", "nonnegint"), ("cube.max_mnk", "posint"),
    ("vector.bytes_per_cycle", "posint"), ("vector.repeat_bytes", "posint"), ("vector.block_bytes", "posint"),
    ("vector.max_repeat", "posint"), ("vector.pipeline_latency", "nonnegint"),
    ("vector.ops.*.bpc", "rate"), ("vector.ops.*.bpc16", "rate"), ("vector.ops.*.latency", "nonneg"),
    ("vector.ops.*.k16", "pos"), ("vector.ops.*.k32", "pos"), ("vector.ops.*.b", "nonneg"),
    ("sync.event_ids", "posint"), ("sync.queue_depth", "posint"),
)
# Keys of open tables that the cost model reads by name (cost.py, kernel.py, report.py).
_REQUIRED = ("startup.mte1", "startup.mte2", "startup.mte2_nd2nz", "startup.mte3", "startup.fix", "startup.vector",
             "startup.scalar_alu", "cube.k_per_cycle.f16")
# The keys a target file may have, by table; every other key is an error (a misspelt key used to
# be ignored, its figure silently replaced by a default or a neighbour's). Open tables name their
# keys after things the dialect knows: memory spaces, DMA paths between them, vector ops.
_SPACES = tuple(s.value for s in MemSpace)
_TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "": ("chip", "memory", "buffers", "align", "cube", "rates", "startup", "vector", "sync"),
    "chip": ("name", "arch", "clock_hz", "vector_clock_hz", "num_aic", "num_aiv", "aiv_per_aic", "kernel_launch_cycles"),
    "memory": ("hbm_bytes", "hbm_bw_Bps", "hbm_efficiency", "gm_read_latency", "gm_write_latency", "l2_bytes", "l2_line_bytes",
               "l2_bw_over_hbm", "l2_hit_latency", "l2_miss_latency", "l2_model", "dcache_bytes", "dcache_line_bytes",
               "dcache_hit_latency"),
    "buffers": tuple(s for s in _SPACES if s != "gm"),  # bytes per core of each on-chip buffer
    "align": _SPACES,
    "rates": tuple(f"{a}_to_{b}" for a in (*_SPACES, "l2") for b in (*_SPACES, "l2") if a != b or a == "ub"),
    "startup": ("mte1", "mte2", "mte2_nd2nz", "mte3", "fix", "vector", "scalar_alu"),  # costmodel/ops.py's engines
    "cube": ("fractal_m", "fractal_n", "k_per_cycle", "mmad_startup", "max_mnk"),
    "vector": ("bytes_per_cycle", "repeat_bytes", "block_bytes", "max_repeat", "pipeline_latency", "ops"),
    "vector.ops.*": ("bpc", "bpc16", "latency", "k16", "k32", "b"),
    "sync": ("event_ids", "queue_depth"),
}
# (cube.k_per_cycle's keys are checked against the arch's cube dtypes in _inconsistency)
# The slowest rate a target may state, in bytes per cycle. The timeline is exact up to 2^39 cycles
# (interpreter/timing quantum): at 2^-10 B/cycle a 512 MiB tensor already takes 2^39 cycles, and
# slower figures (hbm_bw_Bps = 1e-300) turned into infinite cycle counts and reports that
# `ascendir report` rejects. No chip of the reference is within six orders of magnitude of it.
MIN_RATE = 2.0**-10
# The largest figure a target may state: fixed costs in cycles up to 2^24 (9 ms at 1.8 GHz; the
# longest fixed cost of the reference is a few microseconds), every other number up to 2^50
# (a PB of HBM, a PB/s). Larger ones (1e308) overflowed the cost model's integer and float
# arithmetic into internal errors and infinite cycle counts.
MAX_CYCLES = 2.0**24
MAX_FIGURE = 2.0**50


def _is_cycles(key: str) -> bool:
    """Whether a target file's key is a fixed cost in cycles (a latency, a startup, a launch)."""
    leaf = key.rsplit(".", 1)[-1]
    return key.startswith("startup.") or leaf in ("latency", "b", "mmad_startup", "kernel_launch_cycles") \
        or leaf.endswith("_latency")


_MEANING = {"rate": f"a number of bytes per cycle >= {MIN_RATE:g}", "share": "a number > 0 and <= 1", "pos": "a positive number", "nonneg": "a number >= 0", "posint": "a positive integer", "nonnegint": "an integer >= 0"}


def _values(raw: Any, parts: list[str], prefix: str = ""):
    """(dotted key, value) of every key of `raw` matching the dotted pattern `parts` ("*" = any)."""
    if not parts or not isinstance(raw, dict):
        return
    head, rest = parts[0], parts[1:]
    for k in (raw if head == "*" else [head] if head in raw else []):
        key = f"{prefix}{k}"
        if rest:
            yield from _values(raw[k], rest, key + ".")
        else:
            yield key, raw[k]


def _unknown_key(raw: dict[str, Any]) -> str | None:
    """What is wrong with the first key of the target file that _TABLE_KEYS does not list (in
    file order), or None."""
    vector_ops = ("default", *sorted(o.name.removeprefix("ascend.") for o in Ascend.operations if issubclass(o, VectorOp)))

    def check(table: dict, name: str, allowed: tuple[str, ...], what: str) -> str | None:
        for k in table:
            if k not in allowed:
                return f"unknown key {name}{k} ({what})"
        return None

    checks = [(raw, "", _TABLE_KEYS[""], "the tables are " + ", ".join(_TABLE_KEYS[""]))]
    for t, keys in _TABLE_KEYS.items():
        if t and "." not in t and isinstance(raw.get(t), dict):
            what = (f"a rate is SRC_to_DST, each one of {', '.join(_SPACES)}, l2" if t == "rates"
                    else f"[{t}] takes " + ", ".join(keys))
            checks.append((raw[t], f"{t}.", keys, what))
    vector = raw.get("vector")
    ops = vector.get("ops") if isinstance(vector, dict) else None
    if isinstance(ops, dict):
        checks.append((ops, "vector.ops.", vector_ops, "not an ascend vector op, nor default"))
        fields = _TABLE_KEYS["vector.ops.*"]
        checks += [(e, f"vector.ops.{k}.", fields, "an entry takes " + ", ".join(fields)) for k, e in ops.items() if isinstance(e, dict)]
    for table, name, allowed, what in checks:
        if (problem := check(table, name, allowed, what)) is not None:
            return problem
    return None


def _validate(raw: dict[str, Any], path: Path) -> None:
    """Check the keys of the target file against _TABLE_KEYS, every number against _RULES, the
    keys of _REQUIRED and the L2 model's name.

    Raises:
        AscendirError: one line naming the first bad key, its value, what it must be, and the file.
    """
    problem = _unknown_key(raw)
    if problem:
        raise AscendirError(f"target file {path}: {problem}")
    for pattern, rule in _RULES:
        for key, v in _values(raw, pattern.split(".")):
            number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            low_ok = number and (v >= MIN_RATE if rule == "rate" else 0 < v <= 1 if rule == "share"
                                 else v > 0 if rule.startswith("pos") else v >= 0)
            ok = low_ok and (not rule.endswith("int") or float(v).is_integer())
            if not ok:
                raise AscendirError(f"target file {path}: {key} = {v!r}, must be {_MEANING[rule]}")
            top = MAX_CYCLES if _is_cycles(key) else MAX_FIGURE
            if v > top:
                raise AscendirError(f"target file {path}: {key} = {v!r}, must be at most {top:.4g}"
                                    + (" cycles" if top == MAX_CYCLES else ""))
    for key in _REQUIRED:
        if not any(True for _ in _values(raw, key.split("."))):
            raise AscendirError(f"target file {path} lacks key {key}")
    model = raw.get("memory", {}).get("l2_model", "tile") if isinstance(raw.get("memory"), dict) else "tile"
    if model not in L2_MODELS:
        raise AscendirError(f"target file {path}: memory.l2_model = {model!r}, must be one of {', '.join(L2_MODELS)}")
    problem = _inconsistency(raw)
    if problem:
        raise AscendirError(f"target file {path}: {problem}")


# The cube's M x N fractal: 16 x 16 for every dtype on every Ascend chip (docs/hardware-reference.md
# §Cube: f16 16x16x16, fp32 16x8x16, int8 16x32x16: only K varies; S1 DtypeMKN). The
# NZ layouts of the lowering assume it; K per cycle is the per-dtype knob (cube.k_per_cycle).
FRACTAL_MN = 16


def _inconsistency(raw: dict[str, Any]) -> str | None:
    """What the values of a target file say that no chip can be, key by key, or None: chip.name
    not a non-empty string (reports and run ids carry it), an arch that is no ChipArch, a cube
    mode or a missing bias table its ChipArch contradicts, a vector core count other than
    num_aic x aiv_per_aic, an alignment that is not a power of two, a cube fractal M or N other
    than 16, a DCache smaller than its line, HBM smaller than the L2 that caches it. Runs after the per-key rules, so the numbers
    are already positive integers."""
    chip, mem, cube = (raw.get(t) if isinstance(raw.get(t), dict) else {} for t in ("chip", "memory", "cube"))
    name = chip.get("name")
    if "name" in chip and not (isinstance(name, str) and name.strip()):
        return f"chip.name = {name!r}, must be a non-empty string"
    # every message about the chip quotes the name: it must stay one short line
    if isinstance(name, str) and (len(name) > 64 or not name.isprintable()):
        shown = name[:40].encode("unicode_escape").decode("ascii")
        return f"chip.name = '{shown}{'…' if len(name) > 40 else ''}' ({len(name)} characters), must be at most 64 printable characters"
    if "arch" in chip and not (isinstance(chip["arch"], str) and chip["arch"] in ARCHS):
        return f"chip.arch = {chip['arch']!r}, must be one of {', '.join(ARCHS)}"
    arch = ARCHS.get(chip.get("arch")) if isinstance(chip.get("arch"), str) else None
    if arch is not None:
        # a chip has the cube modes and buffers of its architecture (templates ask the arch)
        for key, _ in _values(raw, ["cube", "k_per_cycle", "*"]):
            if not arch.cube_has(key.rsplit(".", 1)[1]):
                return f"{key}: the {arch} cube has no such mmad (it has {', '.join(sorted(arch.cube_dtypes))})"
        if arch.bias_table and isinstance(raw.get("buffers"), dict) and "bt" not in raw["buffers"]:
            return f"buffers.bt missing: {arch} has a bias table (BT)"
    if all(k in chip for k in ("num_aic", "num_aiv")):
        per = chip.get("aiv_per_aic", 1)
        if chip["num_aiv"] != chip["num_aic"] * per:
            return (f"chip.num_aiv = {chip['num_aiv']!r}, must be num_aic x aiv_per_aic = "
                    f"{chip['num_aic']!r} x {per!r} = {chip['num_aic'] * per!r}")
    for key, v in _values(raw, ["align", "*"]):
        if int(v) & (int(v) - 1):
            return f"{key} = {v!r}, must be a power of two"
    for k in ("fractal_m", "fractal_n"):
        if k in cube and cube[k] != FRACTAL_MN:
            return f"cube.{k} = {cube[k]!r}, must be {FRACTAL_MN} (the cube fractal is 16 x 16 in M x N on every Ascend chip)"
    if all(k in mem for k in ("hbm_bw_Bps",)) and "clock_hz" in chip and mem["hbm_bw_Bps"] / chip["clock_hz"] < MIN_RATE:
        return (f"memory.hbm_bw_Bps = {mem['hbm_bw_Bps']!r} is {mem['hbm_bw_Bps'] / chip['clock_hz']:.3g} bytes per cycle "
                f"at chip.clock_hz = {chip['clock_hz']!r}, must be >= {MIN_RATE:g}")
    if all(k in mem for k in ("hbm_bw_Bps", "hbm_efficiency")) and "clock_hz" in chip \
            and (sustained := mem["hbm_bw_Bps"] * mem["hbm_efficiency"] / chip["clock_hz"]) < MIN_RATE:
        return (f"memory.hbm_efficiency = {mem['hbm_efficiency']!r} leaves {sustained:.3g} bytes per cycle of HBM "
                f"(hbm_bw_Bps x hbm_efficiency / clock_hz), must be >= {MIN_RATE:g}")
    if all(k in mem for k in ("dcache_bytes", "dcache_line_bytes")) and mem["dcache_bytes"] < mem["dcache_line_bytes"]:
        return (f"memory.dcache_bytes = {mem['dcache_bytes']!r}, must be at least memory.dcache_line_bytes = "
                f"{mem['dcache_line_bytes']!r} (the DCache holds whole lines)")
    if all(k in mem for k in ("hbm_bytes", "l2_bytes")) and mem["hbm_bytes"] < mem["l2_bytes"]:
        return f"memory.hbm_bytes = {mem['hbm_bytes']!r}, must be at least memory.l2_bytes = {mem['l2_bytes']!r} (L2 caches HBM)"
    return None


def _shipped_name_clash(raw: dict[str, Any], path: Path) -> str | None:
    """A custom file (outside ascendir/hardware/chips/) that calls itself a shipped chip must be that
    chip's file: reports, run ids and traces identify the target by its name alone, so a
    910B2-figured file named "ascend910a" would publish 910B2 figures as 910A's. A verbatim copy
    is fine."""
    name = raw["chip"].get("name") if isinstance(raw.get("chip"), dict) else None
    if name not in TARGETS or path.resolve().parent == CHIPS.resolve():
        return None
    shipped = CHIPS / f"{name}.toml"
    if _read_toml(shipped.resolve(), shipped.stat().st_mtime_ns) == raw:
        return None
    return (f"chip.name = {name!r} is the name of the shipped target {shipped.name}, but this file's values differ "
            f"from it: give the chip a name of its own (reports identify the target by name)")


@functools.lru_cache(maxsize=32)
def _read_toml(path: Path, mtime_ns: int) -> dict:
    # Parsing a target file costs ~50 ms and every compile and simulate loads one; _parse only
    # reads the dict, so the parsed text is shared (re-read when the file changes).
    return tomllib.loads(path.read_text())


def load_target(target: str | Path | HardwareConfig | None = None) -> HardwareConfig:
    """Load a shipped target by name (e.g. "ascend910b2", "910b2") or a TOML file path.

    Raises:
        AscendirError: unknown target name, unreadable file or missing keys.
    """
    if isinstance(target, HardwareConfig):
        return target
    target = target or DEFAULT_TARGET
    path = Path(target)
    if path.suffix != ".toml":
        name = str(target).lower()
        name = name if name.startswith("ascend") else f"ascend{name}"
        path = CHIPS / f"{name}.toml"
        if not path.exists():
            raise AscendirError(f"unknown target '{target}'; shipped targets: {', '.join(TARGETS)}")
    try:
        raw = _read_toml(path.resolve(), path.stat().st_mtime_ns)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise AscendirError(f"cannot read target file {path}: {' '.join(str(e).split())}") from None
    except UnicodeDecodeError as e:  # TOML is UTF-8 (its spec)
        raise AscendirError(f"cannot read target file {path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from None
    except RecursionError:  # tomllib parses nested arrays recursively
        raise AscendirError(f"cannot read target file {path}: arrays or tables nested too deeply") from None
    _validate(raw, path)
    try:
        config = _parse(raw)
    except KeyError as e:
        raise AscendirError(f"target file {path} lacks key {e}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise AscendirError(f"target file {path}: bad value ({' '.join(str(e).split())})") from None
    except AscendirError as e:  # _parse's own (vector.ops entries) name the key, not the file
        raise AscendirError(f"target file {path}: {e}") from None
    clash = _shipped_name_clash(raw, path)
    if clash:
        raise AscendirError(f"target file {path}: {clash}")
    return config


def arch_named(name: str | None) -> ChipArch | None:
    """The ChipArch a lowered module's `ascend.arch` names; a module naming none was lowered for
    the default target, so it gets that target's arch; None for a name no ChipArch has."""
    return _default_arch() if name is None else ARCHS.get(name)


@functools.cache
def _default_arch() -> ChipArch:
    # insert-sync asks once per conflict; loading (and checking) the target file each time is not free
    return load_target(DEFAULT_TARGET).arch
