"""Window attributes of ONNX convolutions and pools (strides, pads with auto_pad resolved,
dilations), shared by convolution.py and the integer convolutions of quantization.py."""

from __future__ import annotations

from ascendir.frontends.onnx.conversion import NodeContext


def _window_attrs(
    node: NodeContext, spatial: tuple[int, ...], kernel: tuple[int, ...]
) -> tuple[list[int], list[int], list[int]]:
    """(strides, pads [begin..., end...], dilations) with auto_pad resolved, in ONNX's dim order."""
    rank = len(spatial)
    strides = list(node.attr("strides", [1] * rank))
    dilations = list(node.attr("dilations", [1] * rank))
    pads = list(node.attr("pads", [0] * 2 * rank))
    auto_pad = node.attr("auto_pad", "NOTSET")
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise node.error(f"strides/dilations/pads do not match {rank} spatial dims")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for d in range(rank):
            out = -(-spatial[d] // strides[d])
            total = max(0, (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - spatial[d])
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            pads[d], pads[rank + d] = begin, total - begin
    elif auto_pad == "VALID":
        pads = [0] * 2 * rank
    elif auto_pad != "NOTSET":
        raise node.error(f"auto_pad '{auto_pad}' is not an ONNX padding mode")
    return strides, pads, dilations


def _as_2d(strides: list[int], pads: list[int], dilations: list[int]) -> tuple[list[int], list[int], list[int]]:
    """1-D window attributes as 2-D ones over a unit height."""
    if len(strides) == 2:
        return strides, pads, dilations
    return [1, *strides], [0, pads[0], 0, pads[1]], [1, *dilations]


def _spatial_rank(node: NodeContext, shape: tuple[int, ...], ranks: tuple[int, ...] = (1, 2)) -> int:
    rank = len(shape) - 2
    if rank not in ranks:
        dims = ", ".join(f"{r}-D" for r in ranks)
        raise node.error(f"only {dims} windows are supported, got input shape {list(shape)}")
    return rank
