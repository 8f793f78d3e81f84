"""Converters of default-domain ONNX ops, grouped by kind; importing this package fills
`CONVERTERS`."""

from ascendir.frontends.onnx.converters import (  # noqa: F401
    activations,
    contrib,
    control_flow,
    convolution,
    dft,
    einsum,
    elementwise,
    indexing,
    linalg,
    movement,
    normalization,
    pad,
    quantization,
    recurrent,
    reduction,
    resize,
    scan,
    sequence,
)
from ascendir.frontends.onnx.converters.registry import CONTRIB_CONVERTERS, CONVERTERS, Converter

__all__ = ["CONTRIB_CONVERTERS", "CONVERTERS", "Converter"]
