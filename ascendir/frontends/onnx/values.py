"""What an ONNX value name stands for during import: a constant known at import time, an SSA
value of the `nn` function being built, or a sequence of those (ONNX's seq(tensor))."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeAlias

import numpy as np
from xdsl.ir import SSAValue


class Constant:
    """A tensor whose value is known at import (initializer, Constant node, folded node output).

    The array may be lazy (ONNX external data): `shape` and `dtype` are known without reading it,
    so a constant that only becomes an `nn.weight` is never read during import.
    """

    def __init__(
        self,
        name: str,
        value: np.ndarray | Callable[[], np.ndarray],
        shape: tuple[int, ...] | None = None,
        dtype: np.dtype | None = None,
        parameter: bool = False,
    ):
        self.name = name
        # A model parameter (an initializer, or folded from one) is a weight, never an inline
        # literal, whatever its size; only single-element parameters (epsilons, exponents) inline.
        self.parameter = parameter
        if callable(value):
            assert shape is not None and dtype is not None, "a lazy constant needs its shape and dtype"
            self._array: np.ndarray | None = None
            self._loader: Callable[[], np.ndarray] | None = value
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        else:
            self._array = np.asarray(value)
            self._loader = None
            self.shape, self.dtype = self._array.shape, self._array.dtype
        # The SSA value this constant was materialized as (one nn.constant / nn.weight per constant).
        self.ssa: SSAValue | None = None

    @property
    def array(self) -> np.ndarray:
        """The value (reads external data on first access)."""
        if self._array is None:
            assert self._loader is not None
            self._array = np.asarray(self._loader()).reshape(self.shape)
        return self._array

    @property
    def lazy_source(self) -> Callable[[], np.ndarray] | None:
        """The loader if the array has not been read yet (so the WeightStore can stay lazy)."""
        return self._loader if self._array is None else None

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"Constant({self.name!r}, {self.dtype}{list(self.shape)})"


class TensorSequence:
    """An ONNX sequence of tensors, resolved at import: its length and every element are known
    then (the sequence ops take constant positions), so it exists only while importing — each
    element is a Constant or an SSA value, and no sequence reaches the `nn` module."""

    def __init__(self, items: tuple[SSAValue | Constant, ...], dtype: np.dtype):
        self.items, self.dtype = tuple(items), np.dtype(dtype)

    def __repr__(self) -> str:
        return f"TensorSequence({len(self.items)} x {self.dtype})"


def element_name(name: str, i: int) -> str:
    """The name element i of sequence `name` takes as an @main argument or result (and as an
    --inputs / --outputs key): `name[i]`."""
    return f"{name}[{i}]"


def element_names(name: str, keys: Collection[str]) -> list[str]:
    """`name[0]`, `name[1]`, ... as far as `keys` holds them without a gap."""
    out: list[str] = []
    while element_name(name, len(out)) in keys:
        out.append(element_name(name, len(out)))
    return out


def with_elements(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with each list (a sequence's elements) replaced by its elements under their
    `element_name`s; other entries as they are."""
    out: dict[str, Any] = {}
    for name, v in values.items():
        out.update({element_name(name, i): e for i, e in enumerate(v)} if isinstance(v, list) else {name: v})
    return out


Value: TypeAlias = SSAValue | Constant | TensorSequence
"""What an ONNX value name maps to while importing."""
