"""The converter table: ONNX op_type → function emitting `nn` ops for one node."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ascendir.frontends.onnx.conversion import NodeContext
from ascendir.frontends.onnx.values import Value

Converter = Callable[[NodeContext], Sequence[Value | None]]
"""Returns one value per node output (None for an optional output the node does not produce)."""

CONVERTERS: dict[str, Converter] = {}


def converts(*op_types: str) -> Callable[[Converter], Converter]:
    """Register a converter for default-domain `op_types`."""

    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            assert op_type not in CONVERTERS, f"two converters for {op_type}"
            CONVERTERS[op_type] = fn
        return fn

    return register


CONTRIB_CONVERTERS: dict[tuple[str, str], Converter] = {}
"""Converters of ops outside the default domain, by (domain, op_type): onnxruntime's contrib ops
(com.microsoft) that its quantizers write."""


def converts_contrib(domain: str, *op_types: str) -> Callable[[Converter], Converter]:
    """Register a converter for `op_types` of `domain` (e.g. "com.microsoft")."""

    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            assert (domain, op_type) not in CONTRIB_CONVERTERS, f"two converters for {domain}.{op_type}"
            CONTRIB_CONVERTERS[(domain, op_type)] = fn
        return fn

    return register
