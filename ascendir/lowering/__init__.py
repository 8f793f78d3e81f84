"""nn → ascend lowering: `convert-nn-to-ascend` and its templates.

    from ascendir.lowering import lower
    lower(module, load_target("ascend910b2"), weights)   # in place; returns the module
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from ascendir.hardware.config import HardwareConfig
from ascendir.weights import WeightStore


def lower(module: ModuleOp, target: HardwareConfig, weights: WeightStore | None = None) -> ModuleOp:
    """Lower an nn module to the ascend dialect for `target`, in place.

    When `weights` is given, `nn.constant` values are first moved into it
    (`constants_to_weights`); without it, a remaining nn.constant is an error.

    Raises:
        AscendirError: an op without template, a tile that does not fit, an nn.constant left.
    """
    from ascendir.lowering.constants_to_weights import constants_to_weights
    from ascendir.lowering.convert_nn_to_ascend import lower_module

    if weights is not None:
        constants_to_weights(module, weights)
    lower_module(module, target)
    return module


__all__ = ["lower"]
