"""Synchronization ops of the `ascend` dialect: flags between pipes and pipe barriers.

* `ascend.set_flag MTE2 -> M, 0`: issued on the src pipe after its earlier instructions, it
  releases one matching `ascend.wait_flag MTE2 -> M, 0`, which blocks the dst pipe (event ids
  0-7 per pipe pair, S6 EVENT_ID0-7). In a dav-c220 mix kernel the optional `units` attribute
  (`#ascend.flag_units<aic -> aiv>`, ...) names the units a flag joins when the pipes leave it open.
* `ascend.pipe_barrier V` orders all instructions of one pipe; `ascend.pipe_barrier ALL` every
  pipe of the core.

Pipes print bare; they are `PipeAttr` / `BarrierPipeAttr` properties.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.irdl import IRDLOperation, irdl_op_definition, opt_attr_def, prop_def, traits_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from ascendir.dialects.ascend.attrs import (
    FLAG_UNITS_ATTR,
    SUBBLOCK_ATTR,
    BarrierPipe,
    BarrierPipeAttr,
    FlagUnitsAttr,
    Pipe,
    PipeAttr,
    attr_text,
)
from ascendir.dialects.ascend.placement import RunsOn, Unit, pipe_unit
from ascendir.dialects.enum_attr import parse_enum_value


class FlagOp(IRDLOperation):
    """`ascend.set_flag MTE2 -> M, 0`: event `event` (0-7) from pipe `src` to pipe `dst`.

    Optional attributes: `units` (#ascend.flag_units<SRC -> DST>: the units of a dav-c220 mix
    kernel the flag joins), `subblock` (the AIV that runs it).

    Raises (verify): equal pipes, an event id outside [0, 8), a `units` that puts a pipe on a
    unit lacking it (IRDL: a `units` that is no #ascend.flag_units)."""

    src = prop_def(PipeAttr)
    dst = prop_def(PipeAttr)
    event = prop_def(IntegerAttr)
    units = opt_attr_def(FlagUnitsAttr, attr_name=FLAG_UNITS_ATTR)
    subblock = opt_attr_def(IntegerAttr, attr_name=SUBBLOCK_ATTR)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(self, src: Pipe, dst: Pipe, event: int):
        super().__init__(properties={"src": PipeAttr(Pipe(src)), "dst": PipeAttr(Pipe(dst)), "event": IntegerAttr(event, i64)})

    def verify_(self) -> None:
        if self.src.data == self.dst.data:
            raise VerifyException(f"{self.name}: src and dst pipes must differ (use pipe_barrier)")
        if not 0 <= self.event.value.data < 8:
            raise VerifyException(f"{self.name}: event id must be in [0, 8) (S6 EVENT_ID0-7)")
        units = self.attributes.get(FLAG_UNITS_ATTR)
        if units is None:
            return
        # src unit issues the set on the src pipe, dst unit waits on the dst pipe: a pipe the
        # unit lacks (MTE1 on an AIV) was silently run on a pipe of the other unit
        for pipe, unit in ((self.src.data, units.src.data), (self.dst.data, units.dst.data)):
            owner = pipe_unit(pipe)
            if owner is not None and (unit == Unit.AIC) != (owner is Unit.AIC):
                raise VerifyException(
                    f"{self.name} {self.src.data} -> {self.dst.data}, {self.event.value.data}: {FLAG_UNITS_ATTR} = "
                    f"{attr_text(units)} puts pipe {pipe} on {unit}, but {pipe} is a pipe of the {owner.value.upper()} only"
                )

    @classmethod
    def parse(cls, parser: Parser) -> FlagOp:
        src = _parse_pipe(parser, Pipe)
        parser.parse_punctuation("->")
        dst = _parse_pipe(parser, Pipe)
        parser.parse_punctuation(",")
        event = parser.parse_integer()
        attrs = parser.parse_optional_attr_dict()
        op = cls(src, dst, event)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.src.data} -> {self.dst.data}, {self.event.value.data}")
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class SetFlagOp(FlagOp):
    """Runs on its src pipe (`placement`). Issued on the src pipe after its earlier instructions; releases one matching wait."""

    name = "ascend.set_flag"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect(), RunsOn(rule="src"))


@irdl_op_definition
class WaitFlagOp(FlagOp):
    """Runs on its dst pipe (`placement`). Blocks the dst pipe until the matching set_flag has happened."""

    name = "ascend.wait_flag"
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect(), RunsOn(rule="dst"))


@irdl_op_definition
class PipeBarrierOp(IRDLOperation):
    """`ascend.pipe_barrier V`: orders all instructions of one pipe (`ALL` = every pipe of the
    core, PIPE_ALL)."""

    name = "ascend.pipe_barrier"
    pipe = prop_def(BarrierPipeAttr)
    subblock = opt_attr_def(IntegerAttr, attr_name=SUBBLOCK_ATTR)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect(), RunsOn(rule="barrier"))

    def __init__(self, pipe: str):
        super().__init__(properties={"pipe": BarrierPipeAttr(BarrierPipe(pipe))})

    @classmethod
    def parse(cls, parser: Parser) -> PipeBarrierOp:
        op = cls(_parse_pipe(parser, BarrierPipe))
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.pipe.data}")
        printer.print_op_attributes(self.attributes)


def _parse_pipe(parser: Parser, enum: type[Pipe] | type[BarrierPipe]) -> Pipe | BarrierPipe:
    """A bare pipe name (`MTE2`).

    Raises:
        ParseError: a name that is not a pipe of `enum`, or a quoted one ("MTE2")."""
    return parse_enum_value(parser, enum, "pipe")
