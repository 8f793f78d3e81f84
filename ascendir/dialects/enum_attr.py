"""`AngleEnum`: the `#dialect.name<value>` spelling for enum attributes (`#ascend.pipe<MTE2>`,
`#nn.fused_kind<ffn>`), mixed in before xDSL's `EnumAttribute[...]`, which prints its value
without brackets."""

from __future__ import annotations

from xdsl.parser import AttrParser
from xdsl.printer import Printer


class AngleEnum:
    """Print and parse the enum value between angle brackets."""

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_identifier_or_string_literal(self.data.value)
        printer.print_string(">")

    @classmethod
    def parse_parameter(cls, parser: AttrParser):
        with parser.in_angle_brackets():
            return parser.parse_str_enum(cls.enum_type)
