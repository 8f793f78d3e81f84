"""Cost of each ascend tile op: pipe occupancy (cycles), completion latency, bytes per level, flops.

Each entry is a *factory* `factory(op, env) -> fn(*operand_values) -> OpCost`, built once per
kernel launch; the executor caches `fn`'s result per operand-shape tuple. All figures come from
the target's hardware TOML (sources [Sn] in /work/shared/reference/ascend-hardware.md):

* copy  = startup[engine] + bytes_dst / rate[src_to_dst]; GM-side rates are capped by the chip
          HBM share (see `CostEnv`); GM reads/writes add gm_read/write_latency to completion
          (not occupancy: the DMA engine keeps streaming).                     [S1 rates, S4 heads, S5 latency]
* mmad  = ceil(M/16)·ceil(N/16)·ceil(K/k_per_cycle[dtype]) + mmad_startup.    [S1 fractal, S5]
* vector "repeat" ops = ceil(bytes/256)·(256/bpc) + latency + startup.vector  [S5 table, S4 head]
  vector "fit" ops    = k·elements + b                                        [S4 fits]
          (per-element part × the passes of element types without native instructions, emulation.py)
* gather_rows = rows · (startup.mte2 + row_bytes / gm rate), + gm_read_latency.  [S4 head per DMA call]
* scalar ops (arith, subview, loop control) = startup.scalar_alu on pipe S.  [S5]
* get_value (a scalar read) from GM = dcache_hit_latency on a DCache hit, gm_read_latency on a miss
          (interpreter/timing/dcache.py says which); from UB scalar_alu.        [S2 S29 DCache, S5]

Bytes are those *written into* each level (l1, l0a, l0b, l0c, ub, bt, fb) plus gm_read / gm_write,
counted packed: 4-bit types (int4, uint4, float4) take half a byte per element, 2-bit ones a
quarter, rounded up per op (numpy holds them one per byte; the hardware and ONNX pack them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects import ascend
from ascendir.dialects.ascend import Pipe, copy_pipe, space_of
from ascendir.dialects.ascend.placement import space_unit as placement_space_unit
from ascendir.dtypes import bits, packed_nbytes
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.costmodel.emulation import vector_passes

LEVELS = ("gm_read", "gm_write", "l1", "l0a", "l0b", "l0c", "ub", "bt", "fb", "l2_hit", "l2_write")
# "l2_hit": bytes of gm_read served by L2 (a subset of gm_read; L2 model "tile" or "hit").
# "l2_write": bytes of gm_write that rewrote a tile still dirty in L2 (a subset of gm_write; L2
# model "tile"): the write-back L2 absorbs them, HBM sees the tile once (a scratch workspace).


@dataclass(frozen=True, slots=True)
class OpCost:
    """Cost of one execution of an op.

    pipe: the pipe it occupies; cycles: occupancy of that pipe; latency: extra cycles before its
    result is visible to set_flag / pipe_barrier; bytes: level -> bytes written there (gm_read,
    gm_write for GM); flops: cube flops; unit: "aic" / "aiv" where a mixed kernel needs it;
    vector_ops: (rate class, element-ops) of a vector instruction — "f16" when its widest operand
    has at most 2 bytes per element, else "f32" (the vector ceilings of report.ceilings), and
    elements × passes (emulated element types run several); cube_peak_cycles: cycles `flops` take
    at the cube peak of the op's dtype (flops / (2 × MACs per cycle)), which sets a kernel's own
    cube ceiling.
    """

    pipe: str
    cycles: float
    latency: float = 0.0
    bytes: dict[str, float] = field(default_factory=dict)
    flops: float = 0.0
    unit: str | None = None
    vector_ops: tuple[str, float] | None = None
    cube_peak_cycles: float = 0.0


@dataclass
class CostEnv:
    """What cost factories see: the target and the per-stream GM bandwidth share of this launch.

    Approximation (documented in the report): the chip's HBM bandwidth is split evenly over the
    core groups the launch occupies (min(block_dim, cores); a 910B mixed kernel's AIC and its AIVs
    are one group), so a path's HBM rate is min(path rate [S1], hbm_bytes_per_cycle / groups).
    Engines of one group that stream at the same time (AIC MTE2 + FixPipe, AIV MTE2 + MTE3) can
    together exceed that share; the kernel-level floor `bandwidth_bound_cycles` (HBM bytes / chip
    bandwidth) then stretches the kernel. Splitting per group instead of per unit keeps a mixed
    kernel's mostly idle AIV half from halving the AIC's share. The share is of the nominal peak:
    it caps what one stream pulls at a time, while the sustained rate (`hbm_efficiency`, V7)
    bounds the launch as a whole through that floor; a kernel's cycles are max(pipes, floor).

    L2 models (target.memory.l2_model): "none" every read at HBM rate, "hit" every read hits,
    "tile" the interpreter decides per copy (l2.py) and passes `hit` to the cost function.
    """

    target: HardwareConfig
    gm_share: float = math.inf  # bytes/cycle per GM stream
    # cost functions made under this env, by what their factory reads of the op (`shared_cost`)
    functions: dict = field(default_factory=dict, compare=False, repr=False)

    def l2_hits(self, src: str, hit: bool | None = None) -> bool:
        """Whether a GM read is served by L2: `hit` when the caller's L2 model decided (model
        "tile"), else "hit" = always (an upper bound on L2 benefit), "none" = never."""
        if src != "gm":
            return False
        if hit is not None:
            return hit
        return self.target.memory.l2_model == "hit"

    def gm_rate(self, path_rate: float, src: str, dst: str, hit: bool | None = None) -> float:
        """Bytes/cycle of a path touching GM: min(path rate [S1], the launch's HBM share per
        group). An L2 hit uses the L2 read rate [S1 l2_read_rate] capped by l2_bw_over_hbm × the
        share [S8]; a write that rewrites a tile still dirty in L2 (`hit` from the "tile" model)
        uses the path's L2 write rate (`<src>_to_l2`, e.g. FixPipe L0C -> L2 86 [S4], = [S1]
        l2_write_rate) under the same cap."""
        if self.l2_hits(src, hit):
            l2 = self.target.rates.get(f"l2_to_{dst}", path_rate)
            return min(l2, self.gm_share * self.target.memory.l2_bw_over_hbm)
        if dst == "gm" and hit:
            l2 = self.target.rates.get(f"{src}_to_l2", path_rate)
            return min(l2, self.gm_share * self.target.memory.l2_bw_over_hbm)
        return min(path_rate, self.gm_share)

    def gm_latency(self, src: str, dst: str, hit: bool | None = None) -> float:
        """Completion latency of a GM read/write [S5]: L2 hit latency (50) when the read hits,
        the DDR read latency (307) otherwise; + DDR write latency (153) for a GM destination."""
        mem = self.target.memory
        read = (mem.l2_hit_latency if self.l2_hits(src, hit) else mem.gm_read_latency) if src == "gm" else 0
        write = (mem.l2_hit_latency if hit else mem.gm_write_latency) if dst == "gm" else 0
        return float(read + write)


def bandwidth_bound_cycles(gm_read: float, gm_write: float, target: HardwareConfig, l2_hit: float = 0.0, l2_write: float = 0.0) -> float:
    """Cycles the chip needs for this GM traffic: a hierarchical roofline, the slowest memory
    level bounds the kernel (S30: Williams, Waterman, Patterson, "Roofline", CACM 52(4), 2009;
    its per-level form: Yang, Kurth, Williams, "Hierarchical Roofline analysis for GPUs", CCPE
    2020; NVIDIA Nsight Compute's hierarchical roofline). Each level moves its own bytes at its
    own bandwidth, and the levels work concurrently (hits are served while misses are fetched):

        max(L2 bytes / (l2_bw_over_hbm x HBM peak) [S8],  HBM bytes / (hbm_efficiency x HBM peak))

    L2 bytes: every byte that reaches or leaves the cores passes L2, so all of `gm_read` (hits and
    the fills of misses) and all of `gm_write`. HBM bytes: the reads that miss L2 (`gm_read` -
    `l2_hit`; under the "hit" L2 model every read hits, `l2_hit` = `gm_read`) and the writes
    except those that rewrite a tile still dirty in L2 (`l2_write` bytes of `gm_write`: the
    write-back L2 keeps the line, HBM sees one write-back of it, counted with the write that
    first dirtied it). The HBM roof is the bandwidth the chip sustains, not its nominal peak
    (`HardwareConfig.hbm_sustained_bytes_per_cycle`: 0.80 of 1.6 TB/s on the 910B, fitted on
    V7 [S16], validated on V14 [S19]); the L2 roof stays l2_bw_over_hbm x the peak, the ratio S8
    gives between the two nominal figures.

    Args: byte counts (float, bytes) over the whole launch; `l2_hit` <= `gm_read` and
    `l2_write` <= `gm_write` (clamped). Returns cycles of the AI Core clock (hbm_bytes_per_cycle
    is per cycle of it). Raises nothing."""
    l2bw = target.hbm_bytes_per_cycle * target.memory.l2_bw_over_hbm
    if target.memory.l2_model == "hit":
        l2_hit = gm_read
    l2_hit = min(l2_hit, gm_read)
    l2_write = min(l2_write, gm_write)
    return max((gm_read + gm_write) / l2bw, (gm_read - l2_hit + gm_write - l2_write) / target.hbm_sustained_bytes_per_cycle)


def _ub_bytes(dest: np.ndarray) -> int:
    """Bytes a vector op writes into UB: its destination, packed (4-bit types 2 per byte)."""
    return packed_nbytes(dest.dtype, dest.size)


CostFn = Callable[..., OpCost]
CostFactory = Callable[[Operation, CostEnv], CostFn]


def space_unit(space: str) -> str:
    """The unit owning a memory space on a split (910B) chip (placement.space_unit)."""
    return placement_space_unit(space).value


def copy_path(op: ascend.CopyOp, target: HardwareConfig) -> tuple[str, str, Pipe]:
    """(src space, dst space, pipe) of a copy on `target`.

    Raises:
        AscendirError: when the target has no such DMA path.
    """
    # (xDSL's field, as interpreter/exec/walk.py `operands_of` reads it: each named operand
    # accessor is a chain of Python calls, and a compile asks this of every copy)
    src, dst = map(space_of, op._operands)
    try:
        pipe = copy_pipe(src, dst, target.arch.name)
    except VerifyException:
        raise AscendirError(f"ascend.copy {src.value} -> {dst.value}: no such DMA path on {target.name} ({target.arch})") from None
    return src.value, dst.value, pipe


def copy_startup(target: HardwareConfig, pipe: Pipe, layout: str | None) -> int:
    """Head cycles of one copy on `pipe` [S4]: MTE2 pays the nd2nz head only when it converts
    ND -> NZ (layout "nd2nz"); a load of data already in NZ fractals (layout "nz") or any other
    MTE2 copy pays the plain DataCopy head (docs/hardware-reference.md §Startup)."""
    st = target.startup
    if pipe == Pipe.MTE2:
        return st["mte2_nd2nz"] if layout == "nd2nz" else st["mte2"]
    return {Pipe.MTE1: st["mte1"], Pipe.MTE3: st["mte3"], Pipe.FIX: st["fix"], Pipe.V: st["vector"]}[pipe]


def copy(op: ascend.CopyOp, env: CostEnv) -> CostFn:
    """`hit` (keyword, L2 model "tile"): whether this GM read was found in L2 (None: the
    target's fixed model decides)."""
    t = env.target
    src, dst, pipe = copy_path(op, t)
    path = t.rate(src, dst)
    gm = "gm" in (src, dst)
    layout = op.layout.data if op.layout is not None else None
    startup = copy_startup(t, pipe, layout)
    unit = space_unit(src if src != "gm" else dst)
    read_key = "gm_read" if src == "gm" else None
    write_key = "gm_write" if dst == "gm" else dst
    by_hit = {h: (env.gm_rate(path, src, dst, h) if gm else path, env.gm_latency(src, dst, h)) for h in (None, False, True)}
    transpose = op.transpose is not None and op.transpose.value.data != 0

    def run(s: np.ndarray, d: np.ndarray, hit: bool | None = None) -> OpCost:
        """`hit` of a GM write (dst gm): the tile is still dirty in L2 (rewritten scratch)."""
        rate, latency = by_hit[hit]
        s_shape = s.shape[::-1] if transpose else s.shape  # load2d transpose: same bytes, same rate
        n = math.prod(min(a, b) for a, b in zip(s_shape, d.shape))
        nbytes = packed_nbytes(d.dtype, n)
        by = {write_key: nbytes}
        if read_key:
            by[read_key] = packed_nbytes(s.dtype, n)
            if env.l2_hits(src, hit):
                by["l2_hit"] = by[read_key]
        elif dst == "gm" and hit:
            by["l2_write"] = nbytes
        return OpCost(pipe.value, startup + nbytes / rate, latency, by, 0.0, unit)

    return run


_DTYPE_KEY = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "int8": "s8", "uint8": "u8"}
_XDSL_KEY = {"i8": "s8"}  # an xDSL element type's str() where it is not the cube's key (signless i8 is int8)


def mmad_cycles(target: HardwareConfig, dtype: str, m: int, n: int, k: int) -> float:
    """M-pipe cycles of an m×k×n mmad in `dtype` (a k_per_cycle key): ceil(m/16)·ceil(n/16)·
    ceil(k/k_per_cycle) + mmad_startup [S1 fractal, S5] (also used by analytic tilings)."""
    cube = target.cube
    dtype = _XDSL_KEY.get(dtype, dtype)
    return math.ceil(m / cube.fractal_m) * math.ceil(n / cube.fractal_n) * math.ceil(k / cube.k_per_cycle[dtype]) + cube.mmad_startup


def mmad(op: ascend.MmadOp, env: CostEnv) -> CostFn:
    cube = env.target.cube

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray, bias: np.ndarray | None = None) -> OpCost:
        key = _DTYPE_KEY.get(a.dtype.name, a.dtype.name)
        if key not in cube.k_per_cycle:
            raise AscendirError(f"ascend.mmad: {env.target.name} has no {key} cube mode (k_per_cycle has {', '.join(cube.k_per_cycle)})")
        m, k = a.shape
        n = b.shape[1]
        return OpCost("M", mmad_cycles(env.target, key, m, n, k), 0.0, {"l0c": m * n * c.itemsize}, 2.0 * m * n * k, "aic",
                      cube_peak_cycles=m * n * k / cube.macs_per_cycle(key))

    return run


def vector_cycles(target: HardwareConfig, name: str, n: int, wide: float, passes: int = 1) -> float:
    """V-pipe cycles of vector op `name` over n elements whose widest operand has `wide` bytes
    per element (the table of the module docstring; also used by analytic tilings)."""
    entry = target.vector.op(name)
    if entry.kind == "fit":
        k = entry.k16 if wide <= 2 else entry.k32
        return passes * k * n + entry.b
    rep = target.vector.repeat_bytes
    bpc = entry.bpc16 if wide <= 2 else entry.bpc
    return passes * math.ceil(n * wide / rep) * (rep / bpc) + entry.latency + target.startup["vector"]


def vector_rate_class(wide: float) -> str:
    """Vector peak that applies to elements of `wide` bytes: "f16" (2-byte rate, also 1-byte
    types) or "f32" (4-byte rate, also wider types run in passes)."""
    return "f16" if wide <= 2 else "f32"


def vector(op: Operation, env: CostEnv) -> CostFn:
    name = op.name.split(".", 1)[1]
    t = env.target
    # element types the unit has no instruction for run as several passes (emulation.py)
    passes = vector_passes(op)

    def run(*vals: np.ndarray) -> OpCost:
        n = max(v.size for v in vals)
        wide = max(bits(v.dtype) for v in vals) / 8
        return OpCost("V", vector_cycles(t, name, n, wide, passes), 0.0, {"ub": _ub_bytes(vals[-1])}, 0.0, "aiv",
                      (vector_rate_class(wide), float(n * passes)))

    return run


def varange(op: ascend.VarangeOp, env: CostEnv) -> CostFn:
    """CreateVecIndex: the vector cost table entry `varange` of the destination, else the default
    simple op (costed as vadd); the scalar start operand is not data."""
    inner = vector(op, env)

    def run(start: int, d: np.ndarray) -> OpCost:
        return inner(d)

    return run


def gather_rows(op: ascend.GatherRowsOp, env: CostEnv) -> CostFn:
    t = env.target
    rate = env.gm_rate(t.rate("gm", "ub"), "gm", "ub")
    head = t.startup["mte2"]
    lat = env.gm_latency("gm", "ub")

    def run(table: np.ndarray, idx: np.ndarray, d: np.ndarray) -> OpCost:
        rows = min(idx.shape[0], d.shape[0])
        row_bytes = packed_nbytes(d.dtype, min(table.shape[1], d.shape[1]))
        total = rows * row_bytes
        by = {"gm_read": total, "ub": total}
        if env.l2_hits("gm"):
            by["l2_hit"] = total
        return OpCost("MTE2", rows * head + total / rate, lat, by, 0.0, "aiv")

    return run


def shared_cost(factory: CostFactory, op: Operation, env: CostEnv, path: tuple | None = None) -> CostFn:
    """`factory(op, env)`, made once per `env` and per what a built-in factory reads of `op`
    (`_static_key`: a copy its path, layout and transpose; a vector op its name and memref
    element types; mmad and gather_rows nothing) and shared by the ops that read the same: a
    kernel's compile asks for the cost function of every tile op (1,362 on a 7B layer, 25-40 us
    a factory call), and they repeat a few forms. The functions are pure (operand values ->
    OpCost), so sharing one changes no cost. Any other factory (register_op's) is called per op.
    `path`: the copy's `copy_path` when the caller has it. Raises what `factory` raises."""
    key = _static_key(factory, op, env, path)
    if key is None:
        return factory(op, env)
    fn = env.functions.get(key)
    if fn is None:
        fn = env.functions[key] = factory(op, env)
    return fn


def _static_key(factory: CostFactory, op: Operation, env: CostEnv, path: tuple | None) -> tuple | None:
    """What built-in `factory` reads of `op` (with the factory), None for other factories."""
    if factory is copy:
        return (copy, path if path is not None else copy_path(op, env.target), op.layout.data if op.layout is not None else None,
                op.transpose is not None and op.transpose.value.data != 0)
    if factory is vector or factory is varange:
        return (factory, op.name, *[v.type.element_type for v in op.operands if isinstance(v.type, MemRefType)])
    if factory is mmad or factory is gather_rows:
        return (factory,)
    return None


def builtin_costs() -> dict[type, CostFactory]:
    """op class -> cost factory for every ascend tile op."""
    table: dict[type, CostFactory] = {
        ascend.CopyOp: copy,
        ascend.MmadOp: mmad,
        ascend.GatherRowsOp: gather_rows,
        ascend.VarangeOp: varange,
    }
    for cls in (ascend.VcastOp, ascend.VcmpOp, ascend.VselOp, ascend.VdupOp, ascend.VtransposeOp):
        table[cls] = vector
    for group in (ascend.VECTOR_UNARY, ascend.VECTOR_BINARY, ascend.VECTOR_SCALAR, ascend.VECTOR_REDUCE):
        for name in group:
            table[ascend.vector_op(name)] = vector
    return table


def get_value_cycles(op: Operation, target: HardwareConfig, hit: bool = False) -> float:
    """S-pipe cycles of one `ascend.get_value`. From GM: a scalar load that hits the scalar
    DCache (`hit`) costs memory.dcache_hit_latency (S5 scalar LD 6 cycles), a miss waits for HBM
    (memory.gm_read_latency, S5 DDR read latency); the caller's DCache model
    (interpreter/timing/dcache.py) says which. From UB: one scalar ALU op (startup.scalar_alu, S5)."""
    if space_of(op.source.type).value == "gm":
        return float(target.memory.dcache_hit_latency if hit else target.memory.gm_read_latency)
    return float(target.startup["scalar_alu"])


def sequential_get_value_cycles(target: HardwareConfig, reads: float, entry_bytes: int, entries: float) -> float:
    """Expected S-pipe cycles of `reads` scalar reads from GM that walk a table in order (a paged
    KV cache's block-table row): `entries` new entries of `entry_bytes` each, every one read at
    least once. The walk misses the DCache once per line it enters (memory.dcache_line_bytes,
    S29) and hits on every other read (interpreter/timing/dcache.py): the analytic form of that
    model for a template's tile search, in cycles (fractional: lines shared by successive calls)."""
    m = target.memory
    misses = min(reads, entries * entry_bytes / m.dcache_line_bytes)
    return misses * m.gm_read_latency + (reads - misses) * m.dcache_hit_latency
