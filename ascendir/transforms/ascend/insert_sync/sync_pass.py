"""The `insert-sync` pass: rounds of analysis and insertion per kernel until no conflict is left,
then the redundant events removed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, space_of, subblock
from ascendir.dtypes import itemsize
from ascendir.errors import AscendirError
from ascendir.session import session_of
from ascendir.transforms.ascend.insert_sync.analysis import conflicts
from ascendir.transforms.ascend.insert_sync.conflict import Conflict
from ascendir.transforms.ascend.insert_sync.flags import insert_pair
from ascendir.transforms.ascend.insert_sync.redundant import remove_redundant
from ascendir.transforms.ascend.ir_level import require_ascend_ir

MAX_ROUNDS = 64


def insert_sync(kernel: ascend.KernelOp, unfixed: list[Conflict] | None = None) -> int:
    """Insert the flag pairs `kernel` needs; returns how many (0 for kernels not analysed).

    A conflict between the same pipe of two units of a mix kernel (AIV 0's MTE3 and AIV 1's
    MTE3 writing one GM range) has no flag (set_flag needs two different pipes): it is left as
    it is and appended to `unfixed` (the pass leaves a note naming it).

    Raises:
        AscendirError: more than 8 events needed for one pipe pair."""
    added = 0
    for _ in range(MAX_ROUNDS):
        found = conflicts(kernel) or []
        fixable = [c for c in found if c.src != c.dst]
        if unfixed is not None:
            unfixed += [c for c in found if c.src == c.dst and c not in unfixed]
        if not fixable:
            return added
        done: set = set()
        for c in fixable:
            if c.slots not in done:
                done.add(c.slots)
                insert_pair(kernel, c)
                added += 1
    raise AscendirError(f"insert-sync: kernel @{kernel.sym_name.data}: conflicts left after {MAX_ROUNDS} rounds")


def shares_bytes(kernel: ascend.KernelOp) -> bool:
    """Two buffers of one space placed (plan-memory) on overlapping bytes."""
    spans: dict = {}
    for op in kernel.walk():
        if isinstance(op, ascend.AllocOp) and "offset" in op.attributes and space_of(op.result) != MemSpace.GM:
            lo = op.attributes["offset"].value.data
            sub = subblock(op)  # AIV 1's own UB
            spans.setdefault((space_of(op.result), sub), []).append((lo, lo + math.prod(op.result.type.get_shape()) * itemsize(op.result.type.element_type)))
    for lst in spans.values():
        lst.sort()
        if any(b[0] < a[1] for a, b in zip(lst, lst[1:])):
            return True
    return False


@dataclass(frozen=True)
class InsertSync(ModulePass):
    """Flags where a pipe really waits for another (see the module docstring).

    Without trust_flags, events the analysis shows to be redundant are removed afterwards
    (`remove_redundant`), so the kernel keeps flags only where a pipe really waits.

    trust_flags: analyse only kernels without flags and kernels whose buffers share bytes, and
    remove nothing (the lowering pipeline: the templates' flags are complete, which
    tests/test_insert_sync.py checks with this same analysis, so compiling a 32-layer model does
    not re-prove it per kernel)."""

    name = "insert-sync"
    trust_flags: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_ascend_ir(op, self.name)
        for k in list(op.ops):
            if not isinstance(k, ascend.KernelOp):
                continue
            if self.trust_flags and any(isinstance(o, ascend.FlagOp) for o in k.walk()) and not shares_bytes(k):
                continue
            unfixed: list[Conflict] = []
            insert_sync(k, unfixed)
            for c in unfixed:
                session_of(ctx).note(f"{self.name}: kernel @{k.sym_name.data}: {c.describe()} touch the same bytes unordered, "
                     "and no set_flag joins one pipe to itself on another unit (left as it is)")
            if not self.trust_flags:
                remove_redundant(k)
