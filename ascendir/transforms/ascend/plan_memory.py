"""`plan-memory{target=...}`: static byte offsets for every buffer of a lowered module.

On chip, per `ascend.kernel` and per space (L1, L0A, L0B, L0C, UB, BT, FB): every `ascend.alloc`
gets an `offset` (bytes from the start of the space, aligned to the space's address alignment of
the target). Buffers whose lifetimes do not overlap share bytes (buffer_lifetimes.live_intervals:
a buffer used in a loop lives for the whole loop). Placement is first fit, largest buffer first.
A buffer that does not fit fails on one line naming the kernel, the buffer, the bytes the space
would need vs the bytes it has, and the largest tile of that shape (leading dim shrunk) that fits
in the largest hole left.

In GM, the host `func.func @main`: intermediate buffers (GM `ascend.alloc` not returned) are packed
into one arena by the same first fit over their launch lifetimes (from the first to the last
`ascend.launch` using them, views counting as their source), each getting an `offset` into the
arena (with the GM a kernel allocates itself, a workspace live while its launch runs: counted,
not placed). @main gets `ascend.gm_footprint` (bytes): weights, inputs, outputs, arena, total (the
device memory the program needs: weights + inputs + outputs + arena) and live_peak (the largest
sum of buffers live at one launch, a lower bound of total). The simulation report copies it. A
total above the target's HBM (`memory.hbm_bytes`) fails on one line naming the bytes needed,
their parts and the bytes the target has.

Reuse of on-chip bytes between buffers adds orderings that no flag of the template expresses
(the last reader of one buffer vs the first writer of the next): insert-sync, which runs after
this pass, sees planned buffers by their byte ranges and orders them. Run after insert-sync
(`-p insert-sync,plan-memory`), the pass keeps a kernel that had flags synchronised itself: when
its buffers now share bytes it adds the flags insert-sync's analysis finds missing (a note says
how many); the lowering pipeline, whose insert-sync follows, turns this off (`order_shared`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects import ascend
from ascendir.dialects.ascend.attrs import ARCH_ATTR, TARGET_ATTR, ArchAttr, TargetAttr, attr_text, module_arch
from ascendir.errors import AscendirError
from ascendir.session import session_of
from ascendir.hardware.config import DEFAULT_TARGET, TARGETS, HardwareConfig, load_target
from ascendir.costmodel.memory import (
    plan_gm, plan_kernel,
)
from ascendir.transforms.ascend.ir_level import require_ascend_ir


def module_target(module: ModuleOp, name: str = "") -> HardwareConfig:
    """`name` when given, else the module's `ascend.target` (set by convert-nn-to-ascend), else
    the target of its `ascend.arch`: the one shipped target of that arch, or the default target
    when several have it and the default is one of them (a module with no arch: the default).
    (A 910A module without `ascend.target` used to be planned for the default 910B2.)

    Raises:
        AscendirError: naming the arch, when no shipped target has it or several do and the
            default is not one of them.
    """
    attr = module.attributes.get(TARGET_ATTR)
    if name or isinstance(attr, TargetAttr):
        return load_target(name or attr.data)
    try:
        module_arch(module)  # an ascend.arch that is no #ascend.arch
    except VerifyException as e:
        raise AscendirError(str(e)) from None
    arch = module.attributes.get(ARCH_ATTR)
    default = load_target(DEFAULT_TARGET)
    if not isinstance(arch, ArchAttr):
        return default
    matching = [t for t in TARGETS if load_target(t).arch.name == arch.data]
    if len(matching) == 1:
        return load_target(matching[0])
    if default.arch.name == arch.data:
        return default
    if not matching:
        archs = sorted({load_target(t).arch.name for t in TARGETS})
        raise AscendirError(f"{ARCH_ATTR} = {attr_text(arch)} is the arch of no shipped target (they have {', '.join(archs)})")
    raise AscendirError(
        f"{ARCH_ATTR} = {attr_text(arch)} is the arch of several shipped targets ({', '.join(matching)}): name one "
        f"with ascend.target or target=..."
    )


def plan_module(module: ModuleOp, target: HardwareConfig) -> None:
    """plan_kernel on every kernel and plan_gm on @main (of a lowered module: one with kernels)."""
    if not any(isinstance(op, ascend.KernelOp) for op in module.ops):
        return
    for op in module.ops:
        if isinstance(op, ascend.KernelOp):
            plan_kernel(op, target)
        elif isinstance(op, func.FuncOp) and op.sym_name.data == "main":
            plan_gm(op, target)


@dataclass(frozen=True)
class PlanMemory(ModulePass):
    """Static offsets for on-chip buffers and the GM arena (see the module docstring)."""

    name = "plan-memory"
    target: str = ""
    # Keep synchronised kernels synchronised: a kernel that had flags before planning and whose
    # buffers now share bytes gets the flags the sharing needs (insert-sync's analysis), so
    # `-p insert-sync,plan-memory` gives race-free IR as `-p plan-memory,insert-sync` does. Off in
    # the lowering pipeline, whose insert-sync runs next on exactly these kernels.
    order_shared: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_ascend_ir(op, self.name)
        synced = [k for k in op.ops if isinstance(k, ascend.KernelOp) and any(isinstance(o, ascend.FlagOp) for o in k.walk())]
        plan_module(op, module_target(op, self.target))
        if not self.order_shared:
            return
        from ascendir.transforms.ascend.insert_sync import insert_sync, shares_bytes

        for k in synced:
            if not shares_bytes(k):
                continue
            unfixed: list = []
            added = insert_sync(k, unfixed)
            name = k.sym_name.data
            if added:
                session_of(ctx).note(f"{self.name}: kernel @{name}: {added} flag pair{'s' if added != 1 else ''} added: it had sync flags "
                     "already and its buffers now share bytes (the last use of one must precede the first write of the "
                     "next; insert-sync's analysis)")
            for c in unfixed:
                session_of(ctx).note(f"{self.name}: kernel @{name}: {c.describe()} touch the same bytes unordered, and no set_flag "
                     "joins one pipe to itself on another unit (left as it is)")
