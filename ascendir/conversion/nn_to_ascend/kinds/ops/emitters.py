"""The op families whose template is only a table: plan = the op itself, emit = the kernel
emitter of templates/ for its op class, no tiled sites (each emitter picks its tiles at emit
time from the UB budget)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import LoweringContext
from ascendir.conversion.nn_to_ascend.template import TemplateBase

Emitter = Callable[[LoweringContext, Operation, list[SSAValue]], list[SSAValue]]


class EmitterFamily(TemplateBase):
    """An op family `kind` lowered by `emitters[type(op)]` (its `ops`: the table's classes)."""

    def __init__(self, kind: str, emitters: dict[type[Operation], Emitter]):
        self.kind = kind
        self.emitters = emitters
        self.ops = tuple(emitters)

    def plan(self, op: Operation) -> Operation:
        return op

    def emit(self, ctx: LoweringContext, plan: Operation, operands: list[SSAValue]) -> list[SSAValue]:
        return self.emitters[type(plan)](ctx, plan, operands)
