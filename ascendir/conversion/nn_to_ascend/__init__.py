"""nn → ascend lowering: `convert-nn-to-ascend` and its templates.

    from ascendir.conversion.nn_to_ascend import lower
    lower(module, load_target("ascend910b2"), weights)   # in place; returns the module
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from ascendir.hardware.config import HardwareConfig
from ascendir.weights import WeightStore


def lower(module: ModuleOp, target: HardwareConfig, weights: WeightStore | None = None) -> ModuleOp:
    """Lower an nn module to the ascend dialect for `target`, in place.

    nn.attention without a flash template (or too big for it on `target`) is decomposed first
    (decompose-attention). When `weights` is given, `nn.constant` values are then moved into it
    (`constants_to_weights`); without it, they stay in the IR as valued `ascend.weight` ops.

    Raises:
        AscendirError: an op without template, a tile that does not fit.
    """
    from ascendir.session import make_context
    from ascendir.transforms.nn.decompose_attention import decompose_attentions
    from ascendir.conversion.nn_to_ascend.constants_to_weights import constants_to_weights
    from ascendir.conversion.nn_to_ascend.convert_nn_to_ascend import lower_module

    decompose_attentions(module, target)
    if weights is not None:
        constants_to_weights(module, weights)
    lower_module(module, target)
    for p in lowered_pipeline(target.name):
        p.apply(make_context(), module)
    return module


def lowered_pipeline(target: str) -> tuple:
    """The ascend-level passes that follow convert-nn-to-ascend: double-buffer (flag-free loops),
    plan-memory, insert-sync (kernels without flags, and kernels whose buffers share bytes)."""
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer
    from ascendir.transforms.ascend.insert_sync import InsertSync
    from ascendir.transforms.ascend.plan_memory import PlanMemory

    # quiet: the templates pipeline their own kernels (flags), so "left alone" is no news here
    return (DoubleBuffer(target=target, quiet=True), PlanMemory(target=target, order_shared=False), InsertSync(trust_flags=True))


__all__ = ["lower", "lowered_pipeline"]
