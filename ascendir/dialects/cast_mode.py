"""The conversion mode of a cast (`nn.cast`, `ascend.vcast`): ONNX Cast's `saturate` and
`round_mode` (`#ascend.round_mode<nearest>`), stored as properties only where they differ from
ONNX's defaults (saturate, up)."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BoolAttr,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    i1,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Operation
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from ascendir.dialects.enum_attr import AngleEnum


class RoundMode(StrEnum):
    """How a cast to f8E8M0FNU (a power of two) rounds: ONNX Cast's `round_mode` (opset 24)."""

    UP = "up"
    DOWN = "down"
    NEAREST = "nearest"


@irdl_attr_definition
class RoundModeAttr(AngleEnum, EnumAttribute[RoundMode]):
    """`#ascend.round_mode<nearest>` (on nn.cast and ascend.vcast; registered by the ascend
    dialect, like the #ascend.tiling of nn.matmul)."""

    name = "ascend.round_mode"


CAST_ROUND_MODES = tuple(RoundMode)

# the results whose conversion has a `saturate` choice (ONNX: the float 8 types)
_SATURATING_FLOATS = (Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type, Float8E5M2FNUZType, Float8E8M0FNUType)


def cast_mode(saturate: bool, round_mode: str) -> dict[str, Attribute]:
    """Properties of a cast (`nn.cast`, `ascend.vcast`) that differ from ONNX's defaults."""
    props: dict[str, Attribute] = {}
    if not saturate:
        props["saturate"] = BoolAttr(False, i1)
    if round_mode != "up":
        props["round_mode"] = RoundModeAttr(RoundMode(round_mode))
    return props


def cast_mode_of(op: Operation) -> tuple[bool, str]:
    """(saturate, round_mode) of a cast op, defaults filled in."""
    saturate, round_mode = op.properties.get("saturate"), op.properties.get("round_mode")
    return (saturate is None or bool(saturate.value.data), "up" if round_mode is None else round_mode.data)


def verify_cast_mode(op: str, elem: Attribute, saturate: BoolAttr | None, round_mode: RoundModeAttr | None) -> None:
    """`saturate` only on float 8 results, `round_mode` only on E8M0."""
    if saturate is not None and not isinstance(elem, _SATURATING_FLOATS):
        raise VerifyException(f"{op}: saturate applies to float 8 results only, not {elem}")
    if round_mode is not None:
        if not isinstance(elem, Float8E8M0FNUType):
            raise VerifyException(f"{op}: round_mode applies to f8E8M0FNU results only, not {elem}")
