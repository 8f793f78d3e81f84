"""The host memory a numerics run takes, estimated before anything is allocated, against a budget.

The interpreter keeps every GM buffer of a run as a numpy array on the host, so a 200-byte IR file
declaring a 65536x65536 f32 input asks 16 GiB for the input, 32 GiB more for the float64 draw of
its random values, and as much again for the simulator's GM copy and the output. Those bytes are
known from the types before any is allocated: `check_host_bytes` refuses a run above the budget
with one line naming its largest buffer, instead of failing (or being killed) after allocating.

Estimate (bytes; `run_host_bytes`), the larger of two moments of a run on a lowered module:
- making the inputs: every input array, plus the float64 draw of the largest random float input
  (numpy's `standard_normal` draws float64, then casts: 8 bytes an element);
- simulating: each input twice (the caller's array and the simulator's GM copy), the weights,
  the GM intermediates (plan-memory's arena when @main has `ascend.gm_footprint`, plus the GM
  `ascend.alloc`s of @main outside it; else every GM `ascend.alloc` of @main), each output twice
  (its GM buffer and the copy the run returns); times the devices of an SPMD run (one process
  holds them all).
Measured: `ascendir run` of an 8192x8192 f32 add (estimate 1.00 GiB) peaked at 1.03 GiB above the
process' start-up RSS. Kernel-local buffers (UB, L1, L0) are small and not counted.

Budget (`host_budget`): the environment variable ASCENDIR_HOST_MEMORY (bytes, or with a K, M,
G or T suffix: KiB ... TiB) when set; else the least of this machine's physical memory, the
cgroup's memory.max, and what the address-space limit (RLIMIT_AS, `ulimit -v`) leaves above what
the process already maps.
"""

from __future__ import annotations

import math
import os
import re
import resource
from collections.abc import Sequence
from pathlib import Path

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType

from ascendir.costmodel.buffer_lifetimes import root_of
from ascendir.costmodel.memory import gm_footprint
from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, space_of
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError

ENV = "ASCENDIR_HOST_MEMORY"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def fmt(n: int) -> str:
    """`n` bytes in binary units, e.g. '16.0 GiB'."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def value_bytes(t) -> int:
    """Host bytes of a statically shaped tensor or memref type as a numpy array (sub-byte types
    take a byte an element there); 0 for a dynamic or non-shaped type."""
    if not isinstance(t, (TensorType, MemRefType)):
        return 0
    shape = t.get_shape()
    if any(d < 0 for d in shape):
        return 0
    try:
        return to_numpy_dtype(t.element_type).itemsize * math.prod(shape)
    except (AscendirError, KeyError, TypeError, ValueError):  # an element type with no array form
        return 0


def _float_elements(t) -> int:
    """Elements of a float-typed tensor / memref (what a random draw makes in float64), else 0."""
    if not isinstance(t, (TensorType, MemRefType)) or any(d < 0 for d in t.get_shape()):
        return 0
    try:
        return math.prod(t.get_shape()) if to_numpy_dtype(t.element_type).kind == "f" else 0
    except (AscendirError, KeyError, TypeError, ValueError):
        return 0


def input_host_bytes(main: func.FuncOp, names: Sequence[str], random: bool) -> tuple[int, list[tuple[str, int]]]:
    """(peak bytes, [(what, bytes)]) of making @main's inputs: each argument's array, plus the
    float64 draw of the largest float argument when `random` (names: the arguments' onnx.names)."""
    items = [(f"input '{n[:60]}'", value_bytes(t)) for n, t in zip(names, main.function_type.inputs.data)]
    peak = sum(b for _, b in items)
    if random:
        draw = max((8 * _float_elements(t) for t in main.function_type.inputs.data), default=0)
        peak += draw
    return peak, items


def run_host_bytes(module: ModuleOp, main: func.FuncOp, names: Sequence[str], random: bool,
                   devices: int = 1) -> tuple[int, list[tuple[str, int]]]:
    """(estimated peak bytes, [(what, bytes)] of the buffers counted) of a numerics run of the
    lowered `module` (see the module docstring); `names`: @main's argument names."""
    made, items = input_host_bytes(main, names, random)
    block = main.body.block
    ret = block.last_op
    outputs = {root_of(v) for v in ret.operands} if isinstance(ret, func.ReturnOp) else set()
    weights = outs = gm = unplanned = planned_end = 0
    for op in block.ops:
        if isinstance(op, ascend.WeightOp):
            weights += value_bytes(op.result.type)
        elif isinstance(op, ascend.AllocOp) and space_of(op.result) == MemSpace.GM:
            n = value_bytes(op.result.type)
            if op.result in outputs:
                outs += n
                items.append((f"output buffer %{op.result.name_hint or '?'}", n))
            else:
                gm += n
                if (offset := op.attributes.get("offset")) is None:
                    unplanned += n
                else:
                    planned_end = max(planned_end, offset.value.data + n)
    fp = gm_footprint(module)
    # the attribute covers the allocs plan-memory placed (an `offset` in its arena); one it did
    # not place, or one reaching past the arena (IR edited after planning), is counted on top
    arena = max(fp["arena"], planned_end) + unplanned if fp is not None else gm
    if weights:
        items.append(("the weights", weights))
    if arena:
        items.append(("the GM intermediates", arena))
    inputs = sum(b for w, b in items if w.startswith("input "))
    simulating = devices * (2 * inputs + weights + arena + 2 * outs)
    return max(made, simulating), items


def host_budget() -> tuple[int, str]:
    """(bytes, where they come from) a run may take on the host (module docstring).

    Raises:
        AscendirError: ASCENDIR_HOST_MEMORY set to something that is not a byte count."""
    env = os.environ.get(ENV)
    if env is not None:
        m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", env, re.IGNORECASE)
        if not m:
            raise AscendirError(f"{ENV}={env[:40]!r} is not a byte count (e.g. 8G, 512M or 1073741824)")
        return int(m.group(1)) * _UNITS[m.group(2).upper()], f"{ENV}"
    limits = [(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "this machine's memory")]
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if text.isdigit():
            limits.append((int(text), "the cgroup's memory.max"))
    except OSError:
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append((max(soft - _mapped(), 0), "what the address-space limit (ulimit -v) leaves"))
    return min(limits)


def _mapped() -> int:
    """Bytes of address space this process maps now (VmSize)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def check_host_bytes(what: str, total: int, items: list[tuple[str, int]]) -> None:
    """Refuse `what` (e.g. "run of m.mlir") when its estimated `total` host bytes exceed the budget.

    Raises:
        AscendirError: one line naming the estimate, the budget and where it comes from, and the
            largest of `items` (what, bytes) with its size."""
    budget, source = host_budget()
    if total <= budget:
        return
    name, size = max(items, key=lambda i: i[1], default=("?", 0))
    raise AscendirError(
        f"{what} needs about {fmt(total)} of host memory, more than the budget of {fmt(budget)} ({source}); "
        f"the largest buffer is {name} ({fmt(size)}); --timing-only moves no data, {ENV} sets another budget"
    )
