"""Resize (and Upsample's successor use of it): nearest, linear and cubic interpolation, every
coordinate transformation mode, antialias, exclude_outside, keep_aspect_ratio_policy, axes.

Resize is separable: the result is the input resized along one axis after another, and along
one axis it is a fixed linear map y[j] = sum_k M[j, k] x[k] (plus, for tf_crop_and_resize,
the extrapolation value where the source coordinate leaves the input). The scales or sizes must
be known at import, so M is a constant: it is computed by onnx's reference implementation
applied to the identity matrix (what the reference computes for x is then M x exactly), and
the extrapolated positions by applying it to zeros with extrapolation value 1. Each axis then
becomes, in nn ops, one nn.gather when every output takes one input element (nearest, or any
mode at integer source positions), else a gather per tap (2 for linear, 4 for cubic, more with
antialias) weighted by a constant and summed.

align_corners and tf_crop_and_resize divide by length_resized - 1 with the integer output
length, as the operator's specification and onnxruntime do; onnx's reference (and the node
tests generated from it) use the fractional scale * length_original when a scale does not
divide, so two node tests (test_resize_downsample_scales_{linear,cubic}_align_corners) expect
other values, and onnxruntime fails them the same way.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from ascendir.dialects import nn
from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.converters.registry import converts
from ascendir.frontends.onnx.values import Value

_MODES = ("nearest", "linear", "cubic")
_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


@converts("Resize")
def convert_resize(node: NodeContext) -> list[Value]:
    """Resize with constant roi / scales / sizes → per resized axis an nn.gather (one source
    element per output) or a weighted sum of gathers, and an nn.where for tf_crop_and_resize's
    extrapolated positions. Float inputs; integer inputs only with mode nearest (a copy)."""
    shape = node.shape(0)
    rank = len(shape)
    mode = node.attr("mode", "nearest")
    transform = node.attr("coordinate_transformation_mode", "half_pixel")
    nearest_mode = node.attr("nearest_mode", "round_prefer_floor")
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    for what, value, allowed in (("mode", mode, _MODES), ("coordinate_transformation_mode", transform, _TRANSFORMS),
                                 ("nearest_mode", nearest_mode, _NEAREST_MODES),
                                 ("keep_aspect_ratio_policy", policy, _POLICIES)):
        if value not in allowed:
            raise node.error(f"{what}='{value}' is not one of {', '.join(allowed)}")
    antialias = bool(node.attr("antialias", 0))
    if antialias and mode == "nearest":
        raise node.error("antialias applies to linear and cubic modes only")
    dtype = node.dtype(0)
    if mode != "nearest" and not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise node.error(f"mode '{mode}' on {dtype} (integer results would need rounding) is not supported")

    axes = [node.axis(int(a), rank) for a in node.attr("axes", list(range(rank)))]
    if len(set(axes)) != len(axes):
        raise node.error(f"axes {axes} repeat a dimension")
    scales, sizes = _optional(node, 2, "scales"), _optional(node, 3, "sizes")
    if (scales is None) == (sizes is None):
        raise node.error("exactly one of scales and sizes must be given")
    given = scales if scales is not None else sizes
    if given.size != len(axes):
        raise node.error(f"{'scales' if scales is not None else 'sizes'} has {given.size} entries for {len(axes)} axes")
    roi = _optional(node, 1, "roi") if transform == "tf_crop_and_resize" else None
    if transform == "tf_crop_and_resize" and (roi is None or roi.size != 2 * len(axes)):
        raise node.error("tf_crop_and_resize needs a roi with a start and an end per axis")

    scale_of, out_of = _scales_and_sizes(shape, axes, scales, sizes, policy)
    try:
        coeffs = _coefficients(mode, nearest_mode, float(node.attr("cubic_coeff_a", -0.75)), antialias)
        from onnx.reference.ops.op_resize import _interpolate_1d_along_axis  # noqa: F401
    except ImportError:  # the weights come from the reference's per-axis resize (onnx 1.23's)
        import onnx

        raise node.error(f"needs the per-axis reference resize of onnx >= 1.23 (installed: {onnx.__version__})") from None
    x = original = node.value(0)
    for i, a in enumerate(axes):
        axis_roi = None if roi is None else [float(roi[i]), float(roi[len(axes) + i])]
        identity = np.isclose(scale_of[a], 1.0) and out_of[a] == shape[a] and (
            axis_roi is None or (np.isclose(axis_roi[0], 0.0) and np.isclose(axis_roi[1], 1.0)))
        if identity:
            continue
        if out_of[a] <= 0 or shape[a] == 0:
            raise node.error(f"resizing dim {a} from {shape[a]} to {out_of[a]} elements is not supported")
        matrix, extrapolated = _axis_map(shape[a], scale_of[a], out_of[a], coeffs, axis_roi, transform,
                                         bool(node.attr("exclude_outside", 0)))
        x = _apply(node, x, a, matrix, dtype)
        if extrapolated.any():
            mask_shape = [1] * rank
            mask_shape[a] = out_of[a]
            value = node.scalar(float(node.attr("extrapolation_value", 0.0)), dtype)
            x = node.emit(nn.WhereOp(node.constant(extrapolated.reshape(mask_shape), f"extrapolated{a}"), value, x))
    return [node.input(0) if x is original else x]


def _optional(node: NodeContext, i: int, what: str) -> np.ndarray | None:
    """Input i's constant value, None when omitted or empty (ONNX's way to leave it out)."""
    if not node.has_input(i):
        return None
    value = node.require_const(i, what).reshape(-1)
    return value if value.size else None


def _scales_and_sizes(shape, axes, scales, sizes, policy) -> tuple[list[float], list[int]]:
    """Per dim, the scale of the coordinate transformation and the output size (ONNX Resize:
    sizes give scale = size / input unless keep_aspect_ratio_policy picks the smallest
    (not_larger) or largest (not_smaller) scale of the axes, and then the size is
    round-half-up(scale * input); scales give size = floor(scale * input))."""
    rank = len(shape)
    scale_of, out_of = [1.0] * rank, list(shape)
    if sizes is not None:
        for i, a in enumerate(axes):
            scale_of[a] = float(sizes[i]) / shape[a] if shape[a] else 1.0
            out_of[a] = int(sizes[i])
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            scale = pick(scale_of[a] for a in axes)
            for a in axes:
                scale_of[a], out_of[a] = scale, int(scale * shape[a] + 0.5)
    else:
        for i, a in enumerate(axes):
            scale_of[a] = float(scales[i])
            out_of[a] = int(np.float64(scales[i]) * shape[a])  # as numpy's astype(int): toward zero
    return scale_of, out_of


def _coefficients(mode: str, nearest_mode: str, cubic_a: float, antialias: bool):
    """The reference's tap-weight function (ratio, scale) → weights for `mode`."""
    from onnx.reference.ops import op_resize as ref

    if mode == "nearest":
        return lambda ratio, scale: ref._nearest_coeffs(ratio, mode=nearest_mode)
    if mode == "cubic":
        cubic = ref._cubic_coeffs_antialias if antialias else ref._cubic_coeffs
        return lambda ratio, scale: cubic(ratio, scale, A=cubic_a)
    return ref._linear_coeffs_antialias if antialias else ref._linear_coeffs


def _axis_map(n: int, scale: float, out: int, coeffs, roi, transform: str, exclude_outside: bool):
    """(M [out, n] float64, extrapolated [out] bool) of one axis, by onnx's reference resize."""
    from onnx.reference.ops.op_resize import _interpolate_1d_along_axis

    if transform in ("align_corners", "tf_crop_and_resize"):
        # the spec divides by length_resized - 1, an integer; the reference divides by
        # scale * length_original - 1 (fractional for a scale that does not divide), and
        # onnxruntime follows the spec: a scale giving exactly `out` makes the two agree
        scale = out / n

    def along(data: np.ndarray, extrapolation_value: float) -> np.ndarray:
        return _interpolate_1d_along_axis(data, 0, scale, out, coeffs, roi, extrapolation_value, transform, exclude_outside)

    matrix = along(np.eye(n), 0.0)
    extrapolated = along(np.zeros((n, 1)), 1.0)[:, 0] != 0
    return np.where(extrapolated[:, None], 0.0, matrix), extrapolated


def _apply(node: NodeContext, x: SSAValue, axis: int, matrix: np.ndarray, dtype: np.dtype) -> SSAValue:
    """x resized along `axis` by `matrix` [out, n]: a gather, or a weighted sum of gathers."""
    rank = len(nn.shape_of(x))
    out = matrix.shape[0]
    taps = [np.flatnonzero(row) for row in matrix]
    if all(len(t) == 1 and matrix[j, t[0]] == 1.0 for j, t in enumerate(taps)) or not any(len(t) for t in taps):
        index = np.array([t[0] if len(t) else 0 for t in taps], np.int64)
        return node.emit(nn.GatherOp(x, node.constant(index, f"resize_index{axis}"), axis))
    width = max(len(t) for t in taps)
    weight_shape = [1] * rank
    weight_shape[axis] = out
    total = None
    for k in range(width):
        index = np.array([t[k] if k < len(t) else 0 for t in taps], np.int64)
        weight = np.array([matrix[j, t[k]] if k < len(t) else 0.0 for j, t in enumerate(taps)])
        tap = node.emit(nn.GatherOp(x, node.constant(index, f"resize_index{axis}_{k}"), axis))
        term = node.emit(nn.MulOp(tap, node.constant(weight.astype(dtype).reshape(weight_shape), f"resize_weight{axis}_{k}")))
        total = term if total is None else node.emit(nn.AddOp(total, term))
    return total
