"""Converters of default-domain ONNX ops, grouped by kind; importing this package fills
`CONVERTERS`."""

from ascendir.frontends.onnx.converters import (  # noqa: F401
    activations,
    control_flow,
    convolution,
    elementwise,
    indexing,
    linalg,
    movement,
    normalization,
    pad,
    recurrent,
    reduction,
    resize,
    scan,
)
from ascendir.frontends.onnx.converters.registry import CONVERTERS, Converter

__all__ = ["CONVERTERS", "Converter"]
