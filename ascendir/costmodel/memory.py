"""Where buffers are placed: first fit of the on-chip buffers of a kernel and of @main's GM
intermediates into an arena, and the GM footprint of a lowered module against the target's HBM.

The analysis plan-memory writes into the IR (`offset` on each `ascend.alloc`,
`ascend.gm_footprint` on @main; transforms/ascend/plan_memory.py has the full description) and the
interpreter checks capacity with before it runs a module (on a clone: it never changes the IR
it runs). Placement is first fit, largest buffer first; buffers whose lifetimes
(buffer_lifetimes.live_intervals) do not overlap share bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import SSAValue

from ascendir.costmodel.buffer_lifetimes import live_intervals, nbytes, positions, root_of
from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, space_of, subblock
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig

OFFSET_ATTR = "offset"
FOOTPRINT_ATTR = "ascend.gm_footprint"


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


@dataclass
class _Item:
    value: SSAValue
    size: int  # bytes, aligned
    live: tuple[int, int]
    offset: int = -1


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= a[1] and b[0] <= b[1] and not (a[1] < b[0] or b[1] < a[0])


def _first_fit(items: list[_Item], align: int) -> list[_Item]:
    """Give each item the lowest aligned offset clear of every placed item live with it
    (largest first); returns the items in placement order."""
    placed: list[_Item] = []
    # live starts/ends and byte ranges of the placed items, so that finding the ones live with
    # the next item is one vectorized test (a model has thousands of GM intermediates).
    lo, hi, begin, end = (np.empty(len(items), np.int64) for _ in range(4))
    for it in sorted(items, key=lambda i: (-i.size, i.live)):
        n = len(placed)
        live = (lo[:n] <= hi[:n]) & (lo[:n] <= it.live[1]) & (hi[:n] >= it.live[0])  # as _overlap
        if it.live[0] > it.live[1]:
            live[:] = False
        busy = sorted(zip(begin[:n][live].tolist(), end[:n][live].tolist()))
        off = 0
        for lo_, hi_ in busy:
            if off + it.size <= lo_:
                break
            off = max(off, _round_up(hi_, align))
        it.offset = off
        lo[n], hi[n], begin[n], end[n] = it.live[0], it.live[1], off, off + it.size
        placed.append(it)
    return placed


def _largest_hole(others: list[_Item], it: _Item, cap: int) -> int:
    """Bytes of the largest free range of [0, cap) left by the items live with `it` (clipped to
    the space: an item placed past its end, which does not fit either, leaves [0, cap) free)."""
    busy = sorted((min(p.offset, cap), min(p.offset + p.size, cap)) for p in others if p is not it and _overlap(p.live, it.live))
    best, cur = 0, 0
    for lo, hi in busy:
        best = max(best, lo - cur)
        cur = max(cur, hi)
    return max(best, cap - cur)


def _largest_fit(t, hole: int) -> str:
    """The shape of `t` with its leading dim shrunk to fit `hole` bytes, as text."""
    shape = list(t.get_shape())
    row = nbytes(t) // max(shape[0], 1) if shape else nbytes(t)
    rows = hole // row if row else 0
    if not shape or rows < 1:
        return "none (the buffers live with it leave no room)"
    return "x".join(map(str, [rows, *shape[1:]])) + f"x{t.element_type}"


def plan_kernel(kernel: ascend.KernelOp, target: HardwareConfig) -> dict[str, int]:
    """Set `offset` on every on-chip `ascend.alloc` of `kernel`; returns bytes used per space.

    Raises:
        AscendirError: a space the target lacks, or a buffer that does not fit (kernel, buffer,
            bytes needed vs available, largest tile that fits)."""
    allocs = [op for op in kernel.walk() if isinstance(op, ascend.AllocOp) and space_of(op.result) != MemSpace.GM]
    live = live_intervals(kernel, [a.result for a in allocs])
    used: dict[str, int] = {}
    by_space: dict[str, list[_Item]] = {}
    for a in allocs:
        sp = space_of(a.result).value
        align = target.align.get(sp, 32)
        # each AIV of a 910B group has its own UB: plan the buffers of AIV 1 (subblock) apart
        key = f"{sp}#{subblock(a)}" if subblock(a) else sp
        by_space.setdefault(key, []).append(_Item(a.result, _round_up(max(nbytes(a.result.type), 1), align), live[a.result]))
    for key, items in by_space.items():
        sp = key.split("#")[0]
        cap = target.capacity(sp)
        placed = _first_fit(items, target.align.get(sp, 32))
        for it in placed:
            if it.offset + it.size > cap:
                t = it.value.type
                desc = "x".join(map(str, t.get_shape())) + f"x{t.element_type}"
                raise AscendirError(
                    f"plan-memory: kernel @{kernel.sym_name.data}: {sp.upper()} buffer {desc} ({nbytes(t)} B) does not fit: "
                    f"{it.offset + it.size} B of {sp.upper()} needed, {cap} B available on {target.name}; "
                    f"largest tile that fits: {_largest_fit(t, _largest_hole(placed, it, cap))}"
                )
            it.value.owner.attributes[OFFSET_ATTR] = IntegerAttr(it.offset, i64)
        used[sp] = max(used.get(sp, 0), max((it.offset + it.size for it in placed), default=0))
    return used


def _workspaces(host: func.FuncOp, align: int, module: ModuleOp | None = None) -> list[_Item]:
    """The GM a launched kernel allocates itself (an `ascend.alloc` in gm inside the kernel: a
    workspace, fresh for each launch as the interpreter runs it): one item per launch of such a
    kernel, its aligned bytes live at the launch, with no value (the templates allocate their
    workspaces in @main; hand-written IR may not, and its bytes are device memory too)."""
    module = host.parent_op() if module is None else module
    kernels = {k.sym_name.data: k for k in (module.ops if isinstance(module, ModuleOp) else []) if isinstance(k, ascend.KernelOp)}
    sizes: dict[str, int] = {}
    pos, end = positions(host.regions[0])
    out = []
    for op, p in pos.items():
        if not isinstance(op, ascend.LaunchOp) or op.callee.root_reference.data not in kernels:
            continue
        name = op.callee.root_reference.data
        if name not in sizes:
            sizes[name] = sum(
                _round_up(max(nbytes(a.result.type), 1), align) for a in kernels[name].walk()
                if isinstance(a, ascend.AllocOp) and space_of(a.result) == MemSpace.GM
            )
        if sizes[name]:
            out.append(_Item(None, sizes[name], (p, end[op])))
    return out


def plan_gm(host: func.FuncOp, target: HardwareConfig, module: ModuleOp | None = None) -> dict[str, int]:
    """Pack @main's intermediate GM buffers into an arena (`offset` on each) and set
    `ascend.gm_footprint` on `host`; returns the footprint (bytes). `module` holds the kernels
    @main launches (default: `host`'s parent)."""
    ops = list(host.body.block.ops)
    ret = host.body.block.last_op
    outputs = {root_of(v) for v in ret.operands} if isinstance(ret, func.ReturnOp) else set()
    allocs = [op.result for op in ops if isinstance(op, ascend.AllocOp)]
    weights = sum(nbytes(op.result.type) for op in ops if isinstance(op, ascend.WeightOp))
    inputs = sum(nbytes(a.type) for a in host.body.block.args)
    out_bytes = sum(nbytes(v.type) for v in outputs if v in allocs)
    live = live_intervals(host, allocs)
    align = target.align.get("gm", 32)
    items = [_Item(v, _round_up(max(nbytes(v.type), 1), align), live[v]) for v in allocs if v not in outputs]
    spaces = _workspaces(host, align, module)
    items += spaces
    for it in _first_fit(items, align):
        if it.value is not None:  # a kernel's own workspace gets no offset: only its bytes count
            it.value.owner.attributes[OFFSET_ATTR] = IntegerAttr(it.offset, i64)
    arena = max((it.offset + it.size for it in items), default=0)
    # live peak: the most bytes live at one point (every buffer counted from first to last use),
    # by a sweep over (position, ±bytes) events; a buffer ending at p - 1 is gone before one
    # starting at p arrives (removals sort first).
    events = sorted(
        [e for v in allocs if live[v][0] <= live[v][1]
         for e in ((live[v][0], nbytes(v.type)), (live[v][1] + 1, -nbytes(v.type)))]
        + [e for w in spaces for e in ((w.live[0], w.size), (w.live[1] + 1, -w.size))]
    )
    peak = running = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    fp = {
        "weights": weights,
        "inputs": inputs,
        "outputs": out_bytes,
        "arena": arena,
        "total": weights + inputs + out_bytes + arena,
        "live_peak": weights + inputs + peak,
    }
    check_gm_fits(fp, target, "plan-memory: ")
    host.attributes[FOOTPRINT_ATTR] = DictionaryAttr({k: IntegerAttr(v, i64) for k, v in fp.items()})
    return fp


def check_gm_fits(fp: dict[str, int], target: HardwareConfig, prefix: str = "") -> None:
    """Check a GM footprint (plan_gm's dict, bytes) against the target's HBM capacity: the device
    holds the weights, inputs, outputs and arena at once, so `total` must fit.

    Raises:
        AscendirError: `prefix` + one line naming the total and its parts, the HBM bytes and the
            target, when the total exceeds `memory.hbm_bytes`."""
    hbm = target.memory.hbm_bytes
    if fp["total"] > hbm:
        raise AscendirError(
            f"{prefix}@main needs {fp['total']} B of GM (weights {fp['weights']} + inputs {fp['inputs']} + outputs "
            f"{fp['outputs']} + arena {fp['arena']}), more than the {hbm} B of HBM on {target.name}"
        )


FOOTPRINT_KEYS = ("weights", "inputs", "outputs", "arena", "total", "live_peak")


def gm_footprint(module: ModuleOp) -> dict[str, int] | None:
    """The `ascend.gm_footprint` plan-memory put on @main (bytes), or None.

    Raises:
        AscendirError: an attribute of another shape than plan_gm writes (IR text edited by hand):
            not a dictionary of exactly FOOTPRINT_KEYS, a value not a non-negative integer, or a
            total other than weights + inputs + outputs + arena."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and FOOTPRINT_ATTR in op.attributes:
            attr = op.attributes[FOOTPRINT_ATTR]
            want = "a dictionary of " + ", ".join(f"{k} = N : i64" for k in FOOTPRINT_KEYS) + " (bytes), as plan-memory writes it"
            where = f"@{op.sym_name.data}: {FOOTPRINT_ATTR}"
            if not isinstance(attr, DictionaryAttr) or set(attr.data) != set(FOOTPRINT_KEYS):
                raise AscendirError(f"{where} must be {want}")
            bad = [k for k, v in attr.data.items() if not isinstance(v, IntegerAttr) or v.value.data < 0]
            if bad:
                raise AscendirError(f"{where}: {bad[0]} is not a non-negative integer; it must be {want}")
            fp = {k: attr.data[k].value.data for k in FOOTPRINT_KEYS}
            if fp["total"] != fp["weights"] + fp["inputs"] + fp["outputs"] + fp["arena"]:
                raise AscendirError(f"{where}: total = {fp['total']} is not weights + inputs + outputs + arena = "
                                    f"{fp['weights'] + fp['inputs'] + fp['outputs'] + fp['arena']}")
            return fp
    return None


def check_module_gm_fits(module: ModuleOp, target: HardwareConfig) -> dict[str, int] | None:
    """Check the GM footprint of a lowered module against the target's HBM before it is run:
    plan-memory's `ascend.gm_footprint` when @main has one (planned, maybe for another chip),
    else the footprint plan_gm gives a copy of @main (IR that was never planned: the device
    needs at least the bytes a plan places). Returns the attribute's footprint, or None when
    @main carries none (nothing to report).

    Raises:
        AscendirError: the footprint above `memory.hbm_bytes` (check_gm_fits), or a malformed
            attribute (gm_footprint)."""
    fp = gm_footprint(module)
    if fp is not None:
        check_gm_fits(fp, target)
        return fp
    host = next((op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == "main"), None)
    if host is not None and any(isinstance(op, ascend.KernelOp) for op in module.ops):
        try:
            plan_gm(host.clone(), target, module)
        except AscendirError as e:
            raise AscendirError(str(e).removeprefix("plan-memory: ")) from None
    return None
