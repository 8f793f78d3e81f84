"""How insert-sync sees an op of a kernel: the pipe and the unit it runs on (as the interpreter
places it), the buffer it writes, whether the kernel's units have pipes of their own, and the
units each existing flag joins."""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.ir import Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import CoreType, Pipe, module_arch, subblock
from ascendir.dialects.ascend.flag_placement import flag_units
from ascendir.dialects.ascend.placement import Unit, default_unit, placement
from ascendir.hardware.config import arch_named


def op_pipe(op: Operation, arch: str | None) -> Pipe | None:
    """The pipe a memory-touching op runs on (`placement`), None for ops that touch no buffer
    (flags and barriers run on a pipe but touch none).

    Raises:
        VerifyException: a copy whose path `arch` lacks."""
    if isinstance(op, (ascend.FlagOp, ascend.PipeBarrierOp)):
        return None
    p = placement(op, arch)
    return None if p is None else p.pipe


def op_unit(op: Operation, pipe: Pipe) -> int:
    """The unit of a 910B mix kernel that runs `op` on `pipe` (0 = AIC, 1 = AIV 0, 2 = AIV 1), as
    the interpreter places it (compiler.unit_of): the unit `placement` gives (copies by their
    on-chip space, mmad on the AIC, vector ops and gather_rows on an AIV; `subblock` = 1: AIV 1),
    else the pipe's default unit (scalar loads/stores on the AIC)."""
    p = placement(op)
    unit = p.unit if p is not None and p.unit is not None else default_unit(pipe)
    return 0 if unit is Unit.AIC else 1 + subblock(op)


def split_units(kernel: ascend.KernelOp, arch: str | None = None) -> bool:
    """A mix kernel for split cube / vector cores (910B; also when the module names no arch): its
    AIC and AIVs have separate pipes, synchronised by flags naming their units (FLAG_UNITS_ATTR).
    On a coupled chip (910A) a mix kernel runs on one core, analysed like any other."""
    arch = module_arch(kernel) if arch is None else arch
    caps = arch_named(arch)
    return kernel.core_type.data == CoreType.MIX.value and caps is not None and caps.split_cores


def written(op: Operation) -> SSAValue | None:
    """The memref operand `op` writes (the others it reads)."""
    if isinstance(op, ascend.CopyOp):
        return op.dest
    if isinstance(op, ascend.MmadOp):
        return op.c
    if isinstance(op, memref.StoreOp):
        return op.memref
    return getattr(op, "dest", None)



def kernel_flag_units(kernel: ascend.KernelOp, arch: str | None) -> dict:
    """flag op -> (src unit, dst unit) of a split mix kernel, by the interpreter's rule
    (flag_placement.flag_units; scalar loads/stores are not placed there either)."""
    order = list(kernel.body.walk())
    placed = []
    for o in order:
        p = None if isinstance(o, (memref.LoadOp, memref.StoreOp)) else op_pipe(o, arch)
        placed.append(None if p is None else (p.value, op_unit(o, p)))
    return flag_units(order, placed)
