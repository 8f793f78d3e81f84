"""Reading an ONNX model: the protobuf (weights of external data stay on disk until used)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, helper, numpy_helper

from ascendir.errors import AscendirError
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
        proto = onnx.inliner.inline_local_functions(proto)
    return proto, base_dir


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


def initializer_constant(tensor: TensorProto, base_dir: str) -> Constant:
    """A Constant for an initializer; external data is read only when the value is needed."""
    dtype = onnx_dtype_to_numpy(tensor.data_type, f"initializer '{tensor.name}'")
    shape = tuple(tensor.dims)
    if tensor.data_location == TensorProto.EXTERNAL:
        return Constant(tensor.name, lambda: _read_external(tensor, base_dir), shape, dtype, parameter=True)
    return Constant(tensor.name, numpy_helper.to_array(tensor), parameter=True)


def _read_external(tensor: TensorProto, base_dir: str) -> np.ndarray:
    try:
        return numpy_helper.to_array(tensor, base_dir)
    except Exception as e:  # noqa: BLE001 - onnx raises ValidationError, OSError, ...
        location = next((e.value for e in tensor.external_data if e.key == "location"), "?")
        reason = " ".join(str(e).split()) or type(e).__name__
        raise AscendirError(
            f"initializer '{tensor.name}': cannot read external data '{location}' in '{base_dir}': {reason}"
        ) from None
