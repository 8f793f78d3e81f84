"""Enum attributes of `nn` ops whose ONNX attribute is a string with a closed set of values:

* `#nn.pool_kind<max>`: what an `nn.pool2d` takes of a window (ONNX MaxPool / AveragePool);
* `#nn.gelu_approximate<tanh>`: the form of an `nn.gelu` (ONNX Gelu's `approximate`).

(`#nn.fused_kind<...>` is fused.py's; a cast's `#ascend.round_mode<...>` is cast_mode.py's.)
"""

from __future__ import annotations

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.str_enum import StrEnum

from ascendir.dialects.enum_attr import AngleEnum


class PoolKind(StrEnum):
    """The reduction of a pooling window: its maximum (MaxPool) or its mean (AveragePool)."""

    MAX = "max"
    AVG = "avg"


@irdl_attr_definition
class PoolKindAttr(AngleEnum, EnumAttribute[PoolKind]):
    """`#nn.pool_kind<avg>`."""

    name = "nn.pool_kind"


class GeluApproximate(StrEnum):
    """ONNX Gelu's `approximate` (opset 20): none, the exact 0.5·x·(1 + erf(x/√2)); tanh,
    0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))."""

    NONE = "none"
    TANH = "tanh"


@irdl_attr_definition
class GeluApproximateAttr(AngleEnum, EnumAttribute[GeluApproximate]):
    """`#nn.gelu_approximate<tanh>`."""

    name = "nn.gelu_approximate"
