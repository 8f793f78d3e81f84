"""Regressions found by the breaker of issue 22 part 3 (session 26) on the integration branch int:
the batched data walk (exec/batch_run.py, batch 2423c0c) and data errors raised inside a group."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import parse
from ascendir.weights import WeightStore

HW = load_target("ascend910b2")


def _gm(s, dt="f32"):
    return f"memref<{'x'.join(map(str, s))}x{dt}, #ascend<space gm>>"


def _ub(s, dt="f32"):
    return f"memref<{'x'.join(map(str, s))}x{dt}, #ascend<space ub>>"


def _embedding(bd: int, it: int, r: int) -> str:
    """An AIV kernel of `bd` blocks, each `it` iterations of: copy `r` row indices into UB,
    gather_rows from a 100 x 16 table, copy the rows out (3 tile ops an iteration: blocks of
    equal ops, GM accesses apart, so the batched data walk groups them)."""
    n = bd * it * r
    svi = f"memref<{r}x1xi32, strided<[1, 1], offset: ?>, #ascend<space gm>>"
    svo = f"memref<{r}x16xf32, strided<[16, 1], offset: ?>, #ascend<space gm>>"
    return f"""builtin.module {{
  ascend.kernel @emb(%tab: {_gm((100, 16))}, %ids: {_gm((n, 1), "i32")}, %out: {_gm((n, 16))}) attributes {{block_dim = {bd} : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cit = arith.constant {it} : index
    %cr = arith.constant {r} : index
    %bid = ascend.block_idx : index
    %iu = ascend.alloc : {_ub((r, 1), "i32")}
    %d = ascend.alloc : {_ub((r, 16))}
    %base = arith.muli %bid, %cit : index
    scf.for %t = %c0 to %cit step %c1 {{
      ascend.pipe_barrier ALL
      %bt = arith.addi %base, %t : index
      %row = arith.muli %bt, %cr : index
      %is = memref.subview %ids[%row, 0] [{r}, 1] [1, 1] : {_gm((n, 1), "i32")} to {svi}
      ascend.copy %is, %iu : {svi}, {_ub((r, 1), "i32")}
      ascend.pipe_barrier MTE2
      ascend.gather_rows %tab, %iu, %d : {_gm((100, 16))}, {_ub((r, 1), "i32")}, {_ub((r, 16))}
      ascend.set_flag MTE2 -> MTE3, 0
      ascend.wait_flag MTE2 -> MTE3, 0
      %os = memref.subview %out[%row, 0] [{r}, 16] [1, 1] : {_gm((n, 16))} to {svo}
      ascend.copy %d, %os : {_ub((r, 16))}, {svo}
    }}
    ascend.return
  }}
  func.func @main(%ids: {_gm((n, 1), "i32")} {{onnx.name = "input_ids"}}) -> ({_gm((n, 16))} {{onnx.name = "emb"}}) {{
    %tab = ascend.weight @table : {_gm((100, 16))}
    %out = ascend.alloc : {_gm((n, 16))}
    ascend.launch @emb(%tab, %ids, %out) : {_gm((100, 16))}, {_gm((n, 1), "i32")}, {_gm((n, 16))}
    func.return %out : {_gm((n, 16))}
  }}
}}
"""


def test_the_first_block_in_order_raises_its_data_error():
    """Block 2's gather fails at its 60th iteration, block 5's at its 10th: blocks run in order,
    so the error is block 2's (index 1005), as the per-block data walk raises it. The batched
    walk (int 2423c0c) runs a group's ops op after op for all its blocks, so block 5's earlier op
    failed first: "index 1007"."""
    bd, it, r = 8, 100, 8
    ws = WeightStore()
    table = np.random.default_rng(0).standard_normal((100, 16)).astype(np.float32)
    ws.add("table", table)
    ids = np.random.default_rng(1).integers(0, 100, (bd * it * r, 1)).astype(np.int32)
    text = _embedding(bd, it, r)
    got = simulate(parse(text), ws, {"input_ids": ids}, HW).outputs["emb"]
    assert np.array_equal(got, table[ids[:, 0]])  # (valid ids: the rows)
    ids[(2 * it + 60) * r + 3, 0] = 1005  # block 2, iteration 60
    ids[(5 * it + 10) * r + 1, 0] = 1007  # block 5, iteration 10
    with pytest.raises(AscendirError, match=r"kernel @emb: ascend.gather_rows: index 1005 out of range for a table of 100 rows"):
        simulate(parse(text), ws, {"input_ids": ids}, HW)
