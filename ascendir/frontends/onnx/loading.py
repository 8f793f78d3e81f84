"""Reading an ONNX model: the protobuf (weights of external data stay on disk until used)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, helper, numpy_helper

from ascendir.errors import AscendirError
from ascendir.frontends.onnx.validation import check_attributes, clip, tensor_data_problem
from ascendir.frontends.onnx.values import Constant


def load_model(model: str | Path | onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """The ModelProto and the directory its external data is relative to.

    Model-local functions are inlined, so every node is a plain operator.

    Raises:
        AscendirError: the file is missing, truncated or not an ONNX model.
    """
    if isinstance(model, onnx.ModelProto):
        proto, base_dir = model, os.getcwd()
    else:
        path = Path(model)
        if not path.is_file():
            raise AscendirError(f"cannot read ONNX model '{path}': no such file")
        try:
            # External data stays on disk: big weights are read lazily (see initializer_constant).
            proto = onnx.load(str(path), load_external_data=False)
        except Exception as e:  # noqa: BLE001 - protobuf raises DecodeError, RuntimeWarning, ...
            reason = " ".join(str(e).split()) or type(e).__name__
            raise AscendirError(f"cannot read ONNX model '{path}': truncated or not an ONNX protobuf ({reason})") from None
        base_dir = str(path.parent)
        if not proto.graph.node and not proto.graph.output:
            raise AscendirError(f"cannot read ONNX model '{path}': the file holds no graph (empty or truncated?)")
    if proto.functions:
        try:
            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as e:  # noqa: BLE001 - ValidationError: recursive, doubled or unreadable functions
            raise AscendirError(f"model-local functions cannot be inlined: {' '.join(str(e).split())[:300]}") from None
    return upgrade_opset(proto), base_dir


MIN_OPSET = 13
"""Oldest default-domain opset the converters implement; older models are upgraded to it."""

UPGRADED_OPS = frozenset({"Upsample"})
"""Ops that exist only before opset 13: supported through the upgrade, which rewrites them into
ops with converters (Upsample → Resize, its coordinates kept: `_keep_resize10_coordinates`)."""


def upgrade_opset(proto: onnx.ModelProto) -> onnx.ModelProto:
    """`proto` itself if it imports default-domain opset ≥ 13, else the model converted to
    opset 13 by onnx.version_converter, with a one-line note on stderr (converters implement
    the opset-13+ forms only: e.g. Split/Squeeze/ReduceSum take axes as inputs from 13).

    Raises:
        AscendirError: the converter cannot upgrade the model (naming its reason).
    """
    version = next((e.version for e in proto.opset_import if e.domain in ("", "ai.onnx")), None)
    if version is None or version >= MIN_OPSET:
        return proto
    import onnx.version_converter

    for node in proto.graph.node:  # the C++ adapters read attributes unchecked: a STRING axes segfaults
        if node.domain in ("", "ai.onnx"):
            try:
                check_attributes(node, version)
            except AscendirError as e:
                raise AscendirError(f"{node.op_type} '{clip(node.name)}': {e}") from None
    try:
        upgraded = onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # noqa: BLE001 - the C++ converter raises RuntimeError/ValidationError
        reason = " ".join(str(e).split()) or type(e).__name__
        raise AscendirError(f"model uses opset {version}; converting it to opset {MIN_OPSET} failed: {reason}") from None
    if version < 11:
        _keep_resize10_coordinates(upgraded)
    print(f"note: model uses opset {version}; converted to opset {MIN_OPSET} with onnx.version_converter", file=sys.stderr)
    return upgraded


def _keep_resize10_coordinates(model: onnx.ModelProto) -> None:
    """Give the Resize nodes that onnx.version_converter made of Upsample (opset 7–9) or Resize-10
    their opset-10 coordinates, which its adapter drops (it leaves opset 11's defaults,
    half_pixel and round_prefer_floor): asymmetric (x_in = x_out / scale), nearest taken
    towards 0 when upsampling and up when downsampling, as onnxruntime runs those opsets (its
    upsamplebase.h "simple" nearest mode). Only nodes without the opset-11 attributes are
    touched: a pre-11 model cannot have set them."""
    consts = {t.name: t for t in model.graph.initializer}
    consts.update({n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant" for a in n.attribute
                   if a.name == "value"})
    for node in model.graph.node:
        if node.op_type != "Resize" or any(a.name == "coordinate_transformation_mode" for a in node.attribute):
            continue
        node.attribute.append(helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
        scales = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        down = scales is not None and bool(np.all(numpy_helper.to_array(scales) <= 1))
        node.attribute.append(helper.make_attribute("nearest_mode", "ceil" if down else "floor"))


def onnx_dtype_to_numpy(data_type: int, what: str) -> np.dtype:
    """numpy dtype of an ONNX TensorProto element type.

    Raises:
        AscendirError: a type without a numpy equivalent (string, complex, ...), naming `what`.
    """
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(data_type))
    except (KeyError, ValueError, TypeError):
        dtype = np.dtype(object)
    if dtype == np.dtype(object) or dtype.kind == "c":
        name = TensorProto.DataType.Name(data_type) if data_type in TensorProto.DataType.values() else data_type
        raise AscendirError(f"{what}: element type {name} is not supported")
    return dtype


# In shape-only mode an external integer initializer up to this many elements is still read: it
# is almost always a shape, axes or indices operand that import must know to type the graph.
SHAPE_ONLY_READ_LIMIT = 1024


def initializer_constant(tensor: TensorProto, base_dir: str, shape_only: bool = False) -> Constant:
    """A Constant for an initializer; external data is read only when the value is needed, and
    then memory-mapped (never copied whole).

    With `shape_only`, an external initializer (other than a small integer one, see
    SHAPE_ONLY_READ_LIMIT) is never read: its value is a zero-stride view of zeros of its shape and
    dtype, so import, passes, lowering and a timing-only simulation need no weight bytes (the
    file may be sparse, truncated or absent).

    Raises:
        AscendirError: an element type without a numpy equivalent; dims that are negative, too
            many elements (validation.TENSOR_BUDGET), or data that does not match the dims.
    """
    what = f"initializer '{clip(tensor.name)}'"
    dtype = onnx_dtype_to_numpy(tensor.data_type, what)
    problem = tensor_data_problem(tensor)
    if problem:
        raise AscendirError(f"{what}: {problem}")
    shape = tuple(tensor.dims)
    if tensor.data_location == TensorProto.EXTERNAL:
        external_fields(tensor, base_dir)  # bad fields are an error even when the bytes are never read
        size = int(np.prod(shape, dtype=np.int64))
        if shape_only and not read_in_shape_only(dtype, size):
            return Constant(tensor.name, lambda: zero_view(shape, dtype), shape, dtype, parameter=True)
        return Constant(tensor.name, lambda: _read_external(tensor, base_dir, shape, dtype), shape, dtype, parameter=True)
    try:
        array = numpy_helper.to_array(tensor)
    except (ValueError, TypeError) as e:  # e.g. typed values out of the element type's range
        raise AscendirError(f"{what}: cannot read its data ({' '.join(str(e).split())[:200]})") from None
    return Constant(tensor.name, array, parameter=True)


def read_in_shape_only(dtype: np.dtype, size: int) -> bool:
    """Whether a constant of `dtype` and `size` elements is read under --shape-only: small integer
    and bool tensors (shapes, axes, indices) are; weights never are."""
    return dtype.kind in "iub" and size <= SHAPE_ONLY_READ_LIMIT


def zero_view(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A read-only array of zeros of `shape` backed by one element (all strides 0)."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def external_fields(tensor: TensorProto, base_dir: str) -> tuple[str, int, int | None]:
    """(location, offset, length or None) of an external initializer, as the ONNX spec writes
    them: a relative path, and decimal integers >= 0.

    Raises:
        AscendirError: no location, a NUL byte in it, or an offset / length that is not a
            non-negative decimal integer (`abc`, `-64`, `4.0`), naming the initializer.
    """
    info = {e.key: e.value for e in tensor.external_data}
    what = f"initializer '{clip(tensor.name)}': external data"
    location = info.get("location", "")
    if not location:
        raise AscendirError(f"{what} has no location")
    if "\0" in location:
        raise AscendirError(f"{what}: the location has a NUL byte")
    numbers = []
    for key in ("offset", "length"):
        text = info.get(key, "")
        if text == "":
            numbers.append(None)
            continue
        if not (text.isascii() and text.isdigit() and len(text) <= 20):
            raise AscendirError(f"{what}: {key} '{clip(text)}' is not a non-negative integer")
        numbers.append(int(text))
    return location, numbers[0] or 0, numbers[1]


def _read_external(tensor: TensorProto, base_dir: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The initializer's bytes memory-mapped read-only from its external file (offset/length
    keys honoured), so a multi-GB weight costs address space, not RSS, until it is touched.

    Raises:
        AscendirError: the file is missing, escapes the model folder, is shorter than the
            tensor (truncated), or cannot be mapped (its bytes over the process's address-space
            limit), naming the initializer and the file.
    """
    location, offset, length = external_fields(tensor, base_dir)

    def fail(reason: str) -> AscendirError:
        return AscendirError(f"initializer '{clip(tensor.name)}': cannot read external data '{clip(location)}' in '{clip(base_dir)}': {reason}")

    base = Path(base_dir).resolve()
    path = (base / location).resolve()
    if base not in path.parents:  # as onnx does: external data must live under the model folder
        raise fail("the location is outside the model's folder")
    if not path.is_file():
        raise fail("no such file")
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    length = nbytes if length is None else length
    if length != nbytes:
        raise fail(f"length {length} bytes but shape {list(shape)} of {dtype} needs {nbytes}")
    if offset + nbytes > path.stat().st_size:
        raise fail(f"the file has {path.stat().st_size} bytes, the tensor needs bytes {offset}..{offset + nbytes} (truncated?)")
    if nbytes == 0:
        return np.zeros(shape, dtype)
    # mode "r": read-only, mapped in place, no copy. (ONNX raw data is little-endian, as is every
    # host ascendir runs on.)
    try:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
    except OSError as e:  # ENOMEM: the mapping is over the address-space limit (ulimit -v)
        raise fail(f"cannot map its {nbytes} bytes: {e.strerror}") from None
