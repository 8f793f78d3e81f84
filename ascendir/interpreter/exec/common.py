"""What the op compilers of compiler.py share: the closure type, the host's return, the facts
about the kernel being compiled, and numpy views of memref types."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import numpy as np
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation
from ascendir.dtypes import to_numpy_dtype
from ascendir.costmodel import CostEnv
from ascendir.dialects.ascend import AIC_PIPES, AIV_PIPES, space_of
from ascendir.dialects.ascend.placement import default_unit
from ascendir.interpreter.exec.walk import OpTree
from ascendir.interpreter.timing.timeline import NPIPES


Closure = Callable[[], None]

class Return(Exception):
    """Raised by func.return in the host program to hand back its values."""

    def __init__(self, values: list):
        self.values = values

@dataclass
class KernelInfo:
    """Compile-time facts about the kernel whose body is being compiled."""

    name: str
    nunits: int
    env: CostEnv
    # flag op -> (source pipe slot, destination pipe slot, event): its ends on the units
    # flag_placement.flag_units gives it (sim/kernel.py `_prewalk`; sync_ops.flag_slots)
    flag_ends: dict[Operation, tuple[int, int, int]]
    flag_keys: dict[tuple[int, int, int], int]
    alu: float
    timing_only: bool
    set_keys: set = field(default_factory=set)  # flag keys some set_flag sets (holds.py deadlock messages)
    tree: OpTree | None = None  # the kernel's ops (walk.OpTree): walks and decoded subviews for steady.py, remap.py, `subview`
    # op -> the units of a mix kernel that run it (scalar_units.py); an op absent: every unit
    scalar_units: dict = field(default_factory=dict)
    # flag op / tile op of a static pipe -> bit mask of the units whose clocks it reads and moves
    # (bit u = unit u: a flag's both ends, a tile op's unit); empty on a single unit
    op_units: dict = field(default_factory=dict)
    # the data walk of a numerics launch (sim/kernel.py): tile ops run their semantics only (no
    # cost, pipe clock, race check or L2: the timing-only twin accounts for those) and scalar ops
    # charge nothing; flags and pipe_barrier ALL keep what orders data (held pipes, holds.py) and
    # the race check's clocks, without the pipe clocks (sync_ops.py `data_flag_fns`, ...)
    data_only: bool = False
    # a data walk that records its tile ops, then computes them batched (exec/tape.py): only its
    # tile ops need their `batch_facts` (tile_ops.py)
    batched: bool = False
    # tile op -> its cost function (the registry.COSTS factory's on `env`): built once for the
    # compiles of one kernel that share the dict (sim/kernel.py: the twin's and the data walk's)
    costs: dict = field(default_factory=dict)
    # ascend.copy op -> costmodel.copy_path's (src space, dst space, pipe): read once per kernel
    # (sim/kernel.py `_prewalk`) for the compiles that ask it again (trace labels, GM copies)
    paths: dict = field(default_factory=dict)

    def s_ids(self, op: Operation | None) -> list[int]:
        """Timeline slots of the S pipes that run the scalar op `op` (every unit's when unknown)."""
        units = self.scalar_units.get(op) if op is not None else None
        return [u * NPIPES for u in (units if units is not None else range(self.nunits))]


def np_dtype(t: MemRefType) -> np.dtype:
    """The numpy dtype of memref type `t`'s elements, remembered per type object (`_per_type`:
    compiling asks it of every memref operand of every tile op, twice per kernel)."""
    return _per_type(_DTYPES, t, lambda: to_numpy_dtype(t.element_type))


def space_name(t: MemRefType) -> str:
    """`ascend.space_of(t).value` ("gm", "ub", ...), remembered per type object (`_per_type`): the
    compilers ask it of every memref operand of every tile op, and space_of's ABC isinstance
    tests and the enum's value property cost more than a lookup.

    Raises: VerifyException (space_of) when `t` is not a memref in an #ascend<space>."""
    return _per_type(_SPACES, t, lambda: space_of(t).value)


# id(memref type) -> (the type, its numpy dtype / its space's name); an entry holds its type, so
# the id stays its own
_DTYPES: dict[int, tuple[MemRefType, np.dtype]] = {}
_SPACES: dict[int, tuple[MemRefType, str]] = {}
TYPES = 65536  # types remembered at most per fact


def _per_type(cache: dict, t: MemRefType, derive):
    """derive() for type `t`, kept in `cache` by the type's id (at most TYPES entries)."""
    got = cache.get(id(t))
    if got is None:
        got = (t, derive())
        if len(cache) < TYPES:
            cache[id(t)] = got
    return got[1]


def zero_view(shape, dtype: np.dtype) -> np.ndarray:
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def unit_of(pipe: str, unit: str | None, nunits: int, sub: int = 0) -> int:
    """Unit index of an op: 0 = AIC (or the only unit), 1 = AIV 0, 2 = AIV 1 (`sub`, the op's
    SUBBLOCK_ATTR, moves AIV work to the group's second AIV)."""
    if nunits == 1:
        return 0
    if unit is None:  # no unit from the cost: the pipe's (placement.default_unit)
        unit = default_unit(pipe)
    return 0 if unit == "aic" else 1 + sub
