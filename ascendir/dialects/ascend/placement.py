"""Placement: which unit and which pipe runs an op. The one place that answers it.

    placement(op, arch) -> Placement(unit, pipe) | None

* `ascend.copy`: the pipe of its (src, dst) path on `arch` (COPY_PATHS), the unit owning its
  on-chip end (L1 / L0A / L0B / L0C / BT / FB are the AIC's, UB an AIV's);
* `ascend.mmad`: the cube, M, on the AIC;
* vector ops: V on an AIV; `ascend.gather_rows` (scalar-addressed MTE2 rows into UB): MTE2 on
  an AIV;
* `ascend.set_flag` runs on its src pipe, `ascend.wait_flag` on its dst pipe,
  `ascend.pipe_barrier` on its pipe (None for ALL), each on the unit owning that pipe when only
  one unit has it (M, MTE1, FIX: AIC; V: AIV), else no fixed unit (MTE2, MTE3, S are on both:
  the flag's `units` attribute or its neighbours decide);
* `memref.load` / `memref.store` in a kernel: the scalar pipe S, no fixed unit;
* anything else (index math, allocs, views, loops): None, no pipe.

An op says which of these rules applies by its `RunsOn` trait; `placement` is the only reader.
Units are those of a split chip (dav-c220: one AIC and two AIV per group, S1, S2 architecture
page); on a coupled chip (dav-c100, dav-m200) both units are the one core.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.ir import Operation
from xdsl.irdl import OpTrait
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from ascendir.dialects.ascend.attrs import MemSpace, Pipe, space_of


class Unit(StrEnum):
    """The core of a group that runs an op: the cube core or a vector core."""

    AIC = "aic"
    AIV = "aiv"


@dataclass(frozen=True)
class Placement:
    """`pipe` runs the op; `unit` owns that pipe, or None when both units have it (MTE2, MTE3,
    S) and the op alone does not say which."""

    unit: Unit | None
    pipe: Pipe


# Paths each architecture's DMA engines connect, with the pipe that moves the data.
# dav-c220 = 910B (split AIC/AIV, S2 architecture page; S1 intrinsic map, §4.1 of the reference).
# dav-c100 = 910A and dav-m200 = 310P (coupled core: L0C leaves through UB, l12ub/ub2l1 exist).
_COMMON_PATHS = {
    (MemSpace.GM, MemSpace.L1): Pipe.MTE2,
    (MemSpace.GM, MemSpace.UB): Pipe.MTE2,
    (MemSpace.L1, MemSpace.L0A): Pipe.MTE1,
    (MemSpace.L1, MemSpace.L0B): Pipe.MTE1,
    (MemSpace.L1, MemSpace.BT): Pipe.MTE1,
    (MemSpace.L1, MemSpace.FB): Pipe.MTE1,
    (MemSpace.UB, MemSpace.GM): Pipe.MTE3,
    (MemSpace.UB, MemSpace.UB): Pipe.V,
}
COPY_PATHS: dict[str, dict[tuple[MemSpace, MemSpace], Pipe]] = {
    "dav-c220": {
        **_COMMON_PATHS,
        (MemSpace.GM, MemSpace.L0A): Pipe.MTE2,
        (MemSpace.GM, MemSpace.L0B): Pipe.MTE2,
        (MemSpace.L0C, MemSpace.GM): Pipe.FIX,
        (MemSpace.L0C, MemSpace.L1): Pipe.FIX,
        (MemSpace.L1, MemSpace.GM): Pipe.MTE3,
    },
    "dav-c100": {
        **_COMMON_PATHS,
        (MemSpace.L0C, MemSpace.UB): Pipe.V,
        (MemSpace.UB, MemSpace.L1): Pipe.MTE3,
        (MemSpace.L1, MemSpace.UB): Pipe.MTE1,
    },
}
COPY_PATHS["dav-m200"] = COPY_PATHS["dav-c100"]
_ALL_PATHS = {k: v for paths in COPY_PATHS.values() for k, v in paths.items()}

# Pipes of one unit only on a split (dav-c220) chip: the cube, its L1 -> L0 loads and FixPipe
# are the AIC's, the vector pipe the AIV's; MTE2 / MTE3 / S exist on both (S2 architecture
# page, S1).
PIPE_UNIT: dict[Pipe, Unit] = {Pipe.M: Unit.AIC, Pipe.MTE1: Unit.AIC, Pipe.FIX: Unit.AIC, Pipe.V: Unit.AIV}
AIC_PIPES = frozenset(p.value for p, u in PIPE_UNIT.items() if u is Unit.AIC)
AIV_PIPES = frozenset(p.value for p, u in PIPE_UNIT.items() if u is Unit.AIV)

# The AIC's buffers; UB (and GM, the chip's) are not (S1: L1 / L0 / BT / FB sit in the cube core).
AIC_SPACES = frozenset({MemSpace.L1, MemSpace.L0A, MemSpace.L0B, MemSpace.L0C, MemSpace.BT, MemSpace.FB})


def copy_pipe(src: MemSpace, dst: MemSpace, arch: str | None = None) -> Pipe:
    """The pipe that executes a copy from `src` to `dst` on `arch` (all archs when None).

    Raises:
        VerifyException: when the architecture has no such path.
    """
    paths = COPY_PATHS.get(arch, _ALL_PATHS) if arch else _ALL_PATHS
    if (src, dst) not in paths:
        where = f" on {arch}" if arch else ""
        raise VerifyException(f"no DMA path {src.value} -> {dst.value}{where}")
    return paths[(src, dst)]


def pipe_unit(pipe: str) -> Unit | None:
    """The unit owning `pipe` on a split chip, None for the pipes both units have."""
    return PIPE_UNIT.get(pipe)


def default_unit(pipe: str) -> Unit:
    """The unit an op on `pipe` runs on when nothing else says (no `placement` unit, no flag
    `units`): the pipe's owner, else the AIV for MTE3 (it leaves UB, an AIV's), else the AIC
    (MTE2, S)."""
    unit = PIPE_UNIT.get(pipe)
    if unit is None:
        unit = Unit.AIV if pipe == Pipe.MTE3 else Unit.AIC
    return unit


def space_unit(space: str) -> Unit:
    """The unit owning the on-chip buffers of `space` on a split chip (UB: an AIV)."""
    return Unit.AIC if space in AIC_SPACES else Unit.AIV


@dataclass(frozen=True)
class RunsOn(OpTrait):
    """Which placement rule applies to an op: `unit` and `pipe` for ops that always run there,
    else `rule` names one computed from the op: "copy" (its path), "src" / "dst" (the flag's
    src / dst pipe), "barrier" (its pipe). Read only by `placement`."""

    unit: Unit | None = None
    pipe: Pipe | None = None
    rule: str | None = None


def placement(op: Operation, arch: str | None = None) -> Placement | None:
    """The unit and pipe that run `op` on architecture `arch` (None: any; copy paths of all
    architectures), or None for an op that runs on no pipe.

    Raises:
        VerifyException: an `ascend.copy` whose path `arch` lacks.
    """
    if isinstance(op, (memref.LoadOp, memref.StoreOp)):
        return Placement(None, Pipe.S)
    t = op.get_trait(RunsOn)
    if t is None:
        return None
    if t.rule is None:
        return Placement(t.unit, t.pipe)
    if t.rule == "copy":
        src, dst = space_of(op.operands[0]), space_of(op.operands[1])
        return Placement(space_unit(src if src != MemSpace.GM else dst), copy_pipe(src, dst, arch))
    pipe = {"src": "src", "dst": "dst", "barrier": "pipe"}[t.rule]
    p = op.properties[pipe].data
    if p == "ALL":
        return None
    return Placement(pipe_unit(p), Pipe(p))
