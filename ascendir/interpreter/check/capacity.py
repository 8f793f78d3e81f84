"""Capacity and placement checks of a kernel before it runs: every on-chip space fits (per AIV for
UB), placed buffers are aligned, and on a split chip (910B) every buffer and op sits on a unit of
the kernel's core type.

Raises AscendirError naming the kernel, the space or op, the bytes needed and the bytes there are
(for unplanned buffers that overflow, plan-memory's own error when its placement cannot fit them
either: the buffer and the largest tile that fits).
"""

from __future__ import annotations

import math

from xdsl.ir import Operation

from ascendir.costmodel import space_unit
from ascendir.costmodel.memory import plan_kernel
from ascendir.dialects import ascend
from ascendir.dialects.ascend import space_of, subblock
from ascendir.dtypes import packed_nbytes
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter.exec.compiler import np_dtype
from ascendir.interpreter.exec.walk import _is_a, walk_ops


def check_capacity(kernel: ascend.KernelOp, target: HardwareConfig, ops: list[Operation] | None = None) -> None:
    """Every on-chip space fits; UB is counted per AIV (SUBBLOCK_ATTR), each AIV having its own.
    A placed buffer (`offset`, bytes into its space) starts at a multiple of the space's address
    alignment (target `align`: L1/UB 32 B, L0A/L0B 512 B, L0C/BT/FB 64 B; reference §2 "buffer
    address alignment", S3) and ends inside the space. Placed buffers may share bytes (plan-memory
    reuses the bytes of dead buffers; hand-written IR may reuse them behind flags): whether two of
    them are used concurrently is a race, which race.py finds by byte range at run time.

    Raises:
        AscendirError: a space the target lacks, a misaligned or negative offset, or too many bytes.
    """
    need: dict[tuple[str, int], int] = {}
    planned: dict[tuple[str, int], int] = {}  # space -> end of the highest buffer placed by plan-memory
    for op in ops if ops is not None else walk_ops(kernel):
        if _is_a(type(op), ascend.AllocOp):
            t = op.result.type
            space = space_of(t).value
            if space == "gm":
                continue
            key = (space, subblock(op))
            nbytes = packed_nbytes(np_dtype(t), math.prod(t.get_shape()))
            align = target.align.get(space, 1)
            if "offset" in op.attributes:  # placed by plan-memory: buffers may share bytes
                off = op.attributes["offset"].value.data
                if off < 0 or off % align:
                    desc = "x".join(map(str, t.get_shape())) + f"x{t.element_type}"
                    raise AscendirError(
                        f"kernel @{kernel.sym_name.data}: ascend.alloc of {space} buffer {desc} at offset = {off}: "
                        + ("negative offset" if off < 0 else
                           f"{space} addresses on {target.name} are aligned to {align} B (offset % {align} = {off % align})")
                    )
                planned[key] = max(planned.get(key, 0), off + nbytes)
            need[key] = need.get(key, 0) + -(-nbytes // align) * align
    need.update(planned)
    for (space, sub), n in need.items():
        if space not in target.buffers:
            raise AscendirError(f"kernel @{kernel.sym_name.data}: {target.name} has no {space} buffer")
        if n > target.buffers[space]:
            if (space, sub) in planned:
                how = "the end of the highest buffer plan-memory placed"
            else:
                _raise_plan_error(kernel, target)
                how = (f"summed over every ascend.alloc, aligned to {target.align.get(space, 1)} B; plan-memory "
                       "(ascendir-opt -p plan-memory) would let buffers with disjoint lifetimes share bytes")
            whose = f" of AIV {sub}" if sub else ""
            raise AscendirError(
                f"kernel @{kernel.sym_name.data}: {space} buffers{whose} need {n} bytes but {target.name} has "
                f"{target.buffers[space]} bytes of {space} per core ({how})"
            )


def _raise_plan_error(kernel: ascend.KernelOp, target: HardwareConfig) -> None:
    """For unplanned buffers that overflow a space: raise plan-memory's error when its placement
    (buffers with disjoint lifetimes sharing bytes) cannot fit them either: it names the buffer,
    the bytes needed vs available and the largest tile that fits. Returns when plan-memory would
    fit them (the caller then says the sum overflows)."""
    try:
        plan_kernel(kernel.clone(), target)
    except AscendirError as e:
        raise AscendirError(str(e).removeprefix("plan-memory: ")) from None


def check_units(kernel: ascend.KernelOp, order: list[Operation], statics: dict, target: HardwareConfig) -> None:
    """On a split chip (910B) an aic kernel runs on cube cores only (L1/L0/BT/FB, cube, MTE1/FIX)
    and an aiv kernel on vector cores only (UB, vector unit); a mix kernel has both.

    Raises:
        AscendirError: a buffer or op of the other unit, naming the kernel and the op.
    """
    core = kernel.core_type.data
    for o in order:
        if _is_a(type(o), ascend.AllocOp):
            space = space_of(o.result.type).value
            unit = None if space == "gm" else space_unit(space)
            what = f"a {space} buffer"
        else:
            unit = statics[o][1] if statics.get(o) else None
            what = o.name
        if unit is not None and unit != core:
            raise AscendirError(
                f"kernel @{kernel.sym_name.data} ({core}): {what} needs an {unit} core; {target.name} "
                f"({target.arch}) has separate cube (aic) and vector (aiv) cores (use core_type = #ascend.core_type<mix>)"
            )
