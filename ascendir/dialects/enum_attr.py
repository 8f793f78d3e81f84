"""`AngleEnum`: the `#dialect.name<value>` spelling for enum attributes (`#ascend.pipe<MTE2>`,
`#nn.fused_kind<ffn>`), mixed in before xDSL's `EnumAttribute[...]`, which prints its value
without brackets.

An enum value has one spelling, the printer's: bare when it is an MLIR identifier (`MTE2`), a
string literal only when it cannot be one (`"dav-c220"`: a hyphen is no identifier character).
xDSL's `parse_str_enum` takes either; `parse_enum_value` takes the one, so `#ascend.pipe<"V">`
(a pipe written as a string) is an error rather than a second way to write `V`."""

from __future__ import annotations

from typing import TypeVar

from xdsl.parser import AttrParser, BaseParser
from xdsl.printer import Printer
from xdsl.utils.mlir_lexer import MLIRLexer
from xdsl.utils.str_enum import StrEnum

E = TypeVar("E", bound=StrEnum)


def parse_enum_value(parser: BaseParser, enum: type[E], what: str) -> E:
    """One value of `enum` in its printed spelling (see the module docstring); `what` names the
    attribute in messages ("#ascend.pipe", "pipe").

    Raises:
        ParseError: a value `enum` lacks, a quoted value that has a bare spelling, or the bare
            start of a value that must be quoted (`dav` of `dav-c220`)."""
    pos = parser.pos
    quoted = parser.parse_optional_str_literal()
    value = quoted if quoted is not None else parser.parse_optional_identifier()
    choices = ", ".join(e.value for e in enum)
    if value is not None and quoted is None and value not in {e.value for e in enum}:
        # `dav-c220` lexes as `dav`, `-`, `c220`: name the spelling the user meant
        meant = [e.value for e in enum if not MLIRLexer.bare_identifier_regex.fullmatch(e.value)
                 and e.value.startswith(value + "-")]
        if meant:
            parser.raise_error(f"{what} {meant[0]} is written as a string \"{meant[0]}\" (a hyphen is no identifier "
                               "character)", pos, parser.pos)
    if value is None or value not in {e.value for e in enum}:
        parser.raise_error(f"unknown {what} {'value' if value is None else value} (expected one of {choices})", pos, parser.pos)
    if quoted is not None and MLIRLexer.bare_identifier_regex.fullmatch(quoted):
        parser.raise_error(f"{what} {quoted} is written bare, not as a string \"{quoted}\"", pos, parser.pos)
    return enum(value)


class AngleEnum:
    """Print and parse the enum value between angle brackets."""

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_identifier_or_string_literal(self.data.value)
        printer.print_string(">")

    @classmethod
    def parse_parameter(cls, parser: AttrParser):
        with parser.in_angle_brackets():
            return parse_enum_value(parser, cls.enum_type, f"#{cls.name}")


class BareEnum:
    """Parse the enum value bare, as xDSL's EnumAttribute prints it (`#ascend<space l0a>`,
    `ascend.vcmp gt ...`), in its one spelling."""

    @classmethod
    def parse_parameter(cls, parser: AttrParser):
        return parse_enum_value(parser, cls.enum_type, f"#{cls.name}")
