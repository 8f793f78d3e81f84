"""Regressions found by the breaker of issue 22 part 3 (session 27): inputs on which a branch
bound for int differed from main.

- vreduce_max / vreduce_min over a view with no rows (a tail of 0 rows): main writes nothing
  (numpy reduces an empty batch of rows); fa27 46adb5d's short-row path (`_short_extreme`) raised
  ValueError (np.minimum.reduce of an empty array) out of `simulate`."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.dialects import ascend
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import registry
from ascendir.interpreter.testing import parse

HW = load_target("ascend910b2")

G = "memref<16x12xf32, #ascend<space gm>>"
GO = "memref<16x1xf32, #ascend<space gm>>"
U = "memref<16x12xf32, #ascend<space ub>>"
UO = "memref<16x1xf32, #ascend<space ub>>"
DU = "memref<?x12xf32, strided<[12, 1]>, #ascend<space ub>>"
DUO = "memref<?x1xf32, strided<[1, 1]>, #ascend<space ub>>"


def _reduce_rows(name: str, rows: int) -> str:
    """One block: y = 1.0, then `name` of x's first `rows` rows (12 float32 each) into y's."""
    return f"""builtin.module {{
  ascend.kernel @k(%x: {G}, %y: {GO}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %n = arith.constant {rows} : index
    %t = ascend.alloc : {U}
    %m = ascend.alloc : {UO}
    ascend.copy %x, %t : {G}, {U}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.vdup %m {{scalar = 1.0 : f64}} : {UO}
    %ts = memref.subview %t[0, 0] [%n, 12] [1, 1] : {U} to {DU}
    %ms = memref.subview %m[0, 0] [%n, 1] [1, 1] : {UO} to {DUO}
    ascend.{name} %ts, %ms : {DU}, {DUO}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %m, %y : {UO}, {GO}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) -> ({GO} {{onnx.name = "y"}}) {{
    %y = ascend.alloc : {GO}
    ascend.launch @k(%x, %y) : {G}, {GO}
    func.return %y : {GO}
  }}
}}"""


@pytest.mark.parametrize("name, fn", [("vreduce_max", np.maximum), ("vreduce_min", np.minimum)])
@pytest.mark.parametrize("rows", [0, 3])
def test_reduce_of_a_tail_of_no_rows(name, fn, rows):
    x = np.random.default_rng(0).standard_normal((16, 12)).astype(np.float32)
    y = np.asarray(list(simulate(parse(_reduce_rows(name, rows)), None, {"x": x}, HW).outputs.values())[0])
    want = np.ones((16, 1), np.float32)
    want[:rows] = fn.reduce(x[:rows], axis=-1, keepdims=True)
    assert y.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["vreduce_max", "vreduce_min"])
@pytest.mark.parametrize("shape", [(0, 12), (4, 0, 12), (0, 2)])
def test_reduce_semantics_of_no_rows(name, shape):
    t = ascend.vector_op(name)
    x = np.empty(shape, np.float32)
    for sem in (registry.SEMANTICS[t](None), registry.BATCHED[t][0](None)):
        dst = np.empty(shape[:-1] + (1,), np.float32)
        sem(x, dst)  # nothing to write; no error
