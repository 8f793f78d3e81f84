"""The conversion mode of a cast (`nn.cast`, `ascend.vcast`): ONNX Cast's `saturate` and
`round_mode`, stored as properties only where they differ from ONNX's defaults (saturate,
"up")."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BoolAttr,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    StringAttr,
    i1,
)
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import VerifyException

CAST_ROUND_MODES = ("up", "down", "nearest")

# the results whose conversion has a `saturate` choice (ONNX: the float 8 types)
_SATURATING_FLOATS = (Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type, Float8E5M2FNUZType, Float8E8M0FNUType)


def cast_mode(saturate: bool, round_mode: str) -> dict[str, Attribute]:
    """Properties of a cast (`nn.cast`, `ascend.vcast`) that differ from ONNX's defaults."""
    props: dict[str, Attribute] = {}
    if not saturate:
        props["saturate"] = BoolAttr(False, i1)
    if round_mode != "up":
        props["round_mode"] = StringAttr(round_mode)
    return props


def cast_mode_of(op: Operation) -> tuple[bool, str]:
    """(saturate, round_mode) of a cast op, defaults filled in."""
    saturate, round_mode = op.properties.get("saturate"), op.properties.get("round_mode")
    return (saturate is None or bool(saturate.value.data), "up" if round_mode is None else round_mode.data)


def verify_cast_mode(op: str, elem: Attribute, saturate: BoolAttr | None, round_mode: StringAttr | None) -> None:
    """`saturate` only on float 8 results, `round_mode` (one of CAST_ROUND_MODES) only on E8M0."""
    if saturate is not None and not isinstance(elem, _SATURATING_FLOATS):
        raise VerifyException(f"{op}: saturate applies to float 8 results only, not {elem}")
    if round_mode is not None:
        if not isinstance(elem, Float8E8M0FNUType):
            raise VerifyException(f"{op}: round_mode applies to f8E8M0FNU results only, not {elem}")
        if round_mode.data not in CAST_ROUND_MODES:
            raise VerifyException(f"{op}: round_mode must be one of {', '.join(CAST_ROUND_MODES)}, got '{round_mode.data}'")
