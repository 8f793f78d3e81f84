"""Tile ops that are the same op again (same class, operand values, attributes and properties)
share one compiled closure within a compile (tile_ops.py `TileOps.tile`): each still runs where
it stands, an op differing in an attribute gets its own, the timed walk's GM copies and ops of
registered semantics are compiled per op."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import StringAttr

from ascendir.dialects import ascend
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import registry, tile_ops
from ascendir.interpreter.testing import parse

HW = load_target("ascend910b2")
UB = "memref<8x16xf32, #ascend<space ub>>"
GM = "memref<8x16xf32, #ascend<space gm>>"

# the GM load twice, then u = t + 1, u += 1 twice (the same op twice), u += 2 (another scalar)
KERNEL = f"""
builtin.module {{
  ascend.kernel @k(%x: {GM}, %y: {GM}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}} {{
    %t = ascend.alloc : {UB}
    %u = ascend.alloc : {UB}
    ascend.copy %x, %t : {GM}, {UB}
    ascend.copy %x, %t : {GM}, {UB}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.vadds %t, %u {{scalar = 1.0 : f64}} : {UB}, {UB}
    ascend.vadds %u, %u {{scalar = 1.0 : f64}} : {UB}, {UB}
    ascend.vadds %u, %u {{scalar = 1.0 : f64}} : {UB}, {UB}
    ascend.vadds %u, %u {{scalar = 2.0 : f64}} : {UB}, {UB}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %u, %y : {UB}, {GM}
    ascend.return
  }}
  func.func @main(%x: {GM} {{onnx.name = "x"}}) -> ({GM} {{onnx.name = "y"}}) {{
    %y = ascend.alloc : {GM}
    ascend.launch @k(%x, %y) : {GM}, {GM}
    func.return %y : {GM}
  }}
}}
"""


def _run(monkeypatch, note: bool = False) -> tuple[np.ndarray, dict]:
    """y of KERNEL on a random x, and per compile (True: the data walk's) the tile ops compiled.
    `note`: the second `u += 1` carries an attribute of its own (nothing reads it)."""
    built: dict[bool, list] = {False: [], True: []}
    inner = tile_ops.TileOps._tile

    def spy(self, op):
        built[self.k.data_only].append(op.name)
        return inner(self, op)

    monkeypatch.setattr(tile_ops.TileOps, "_tile", spy)
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    module = parse(KERNEL)
    if note:
        adds = [o for o in module.walk() if o.name == "ascend.vadds"]
        adds[2].attributes["note"] = StringAttr("again")
    res = simulate(module, None, {"x": x}, HW)
    assert np.array_equal(res.outputs["y"], x + 1 + 1 + 1 + 2)
    return x, built


def test_same_ops_compiled_once_and_each_run(monkeypatch):
    """The data walk compiles the repeated GM load and the repeated `u += 1` once each, `u += 2`
    apart (its scalar differs): 5 of 7 ops; every op still runs (y = x + 5). The timed walk
    compiles both GM loads (their closures log their op): 6."""
    _, built = _run(monkeypatch)
    assert built[True] == ["ascend.copy", "ascend.vadds", "ascend.vadds", "ascend.vadds", "ascend.copy"]
    assert built[False] == ["ascend.copy", "ascend.copy", "ascend.vadds", "ascend.vadds", "ascend.vadds", "ascend.copy"]


def test_an_attribute_of_its_own_compiles_apart(monkeypatch):
    """The repeated `u += 1` with an attribute the first lacks is compiled for itself."""
    _, built = _run(monkeypatch, note=True)
    assert built[True] == ["ascend.copy", "ascend.vadds", "ascend.vadds", "ascend.vadds", "ascend.vadds", "ascend.copy"]


def test_registered_semantics_compiled_per_op(monkeypatch):
    """An op class whose semantics were registered (register_op) gets its factory called for
    every op of the data walk, repeated ones too: nothing says what the factory reads."""
    calls = []
    builtin = registry.SEMANTICS[ascend.vector_op("vadds")]

    def factory(op):
        calls.append(op)
        return builtin(op)

    monkeypatch.setitem(registry.SEMANTICS, ascend.vector_op("vadds"), factory)
    _run(monkeypatch)
    assert len(calls) == 4
