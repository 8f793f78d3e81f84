"""WeightStore: model parameters kept outside the IR, referenced by `nn.weight @name`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np


class WeightStore:
    """Name → array. Entries may be lazy (a callable producing the array, e.g. an ONNX
    external-data memmap), so a shape-only compile never reads weight bytes.
    """

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}
        self._lazy: dict[str, Callable[[], np.ndarray]] = {}

    def add(self, name: str, value: np.ndarray | Callable[[], np.ndarray]) -> str:
        """Store `value` under a unique name derived from `name`; returns the name used."""
        unique, n = name, 1
        while unique in self:
            unique, n = f"{name}_{n}", n + 1
        if callable(value):
            self._lazy[unique] = value
        else:
            self._arrays[unique] = value
        return unique

    def convert(self, name: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
        """Replace entry `name` by `fn(entry)`. A lazy entry stays lazy: `fn` runs when it is
        first read (so converting an external-data weight reads nothing at import).

        Raises:
            KeyError: no such entry.
        """
        if name in self._arrays:
            self._arrays[name] = fn(self._arrays[name])
        elif name in self._lazy:
            load = self._lazy[name]
            self._lazy[name] = lambda: fn(load())
        else:
            raise KeyError(f"weight @{name} is not in the WeightStore")

    def __contains__(self, name: str) -> bool:
        return name in self._arrays or name in self._lazy

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            if name not in self._lazy:
                raise KeyError(f"weight @{name} is not in the WeightStore")
            # Keep the loader until it succeeds, so a failed read (file moved) can be retried.
            self._arrays[name] = self._lazy[name]()
            del self._lazy[name]
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        # A snapshot: reading an entry while iterating (as `save` does) moves it from _lazy to
        # _arrays.
        yield from list(self._arrays) + list(self._lazy)

    def __len__(self) -> int:
        return len(self._arrays) + len(self._lazy)

    def save(self, path: str) -> None:
        """Write every entry to an .npz file (keys = weight names)."""
        np.savez(path, **{k: self[k] for k in self})

    @classmethod
    def load(cls, path: str) -> WeightStore:
        store = cls()
        with np.load(path) as data:
            for k in data.files:
                store._arrays[k] = data[k]
        return store
