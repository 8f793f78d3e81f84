"""The data walk's blocks as generated functions (exec/data_codegen.py) against the single walk
(Accel.none(): scf_ops.py's closures, timing and race check in one walk) and against the
closures themselves (MAX_NEST = 0: every scf op left to scf_ops.py, the fallback of regions
nested too deep), bit for bit: outputs, cycles, race and deadlock errors. The kernel carries
values through a loop (swapped every iteration: all yielded values are read before any is
written), yields a value out of an scf.if, nests loops in branches in loops, and runs two
blocks with the same decisions (the second one followed cheaply by the race check: race.py
`decide` must see every decision, in order); seeded mutations drop sync ops."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.exec import data_codegen
from ascendir.interpreter.testing import matmul_ir

from test_data_walk_equivalence import _assert_same, _mutants

G = "memref<256x64xf16, #ascend<space gm>>"
G_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"
U = "memref<16x64xf16, #ascend<space ub>>"

# block b: 8 tiles of 16 rows from row 128 b; tile i doubled %m times (the carried pair (%m, %n)
# swapped each iteration: 1, 2, 1, ...), and then %k more times, %k yielded by a branch on i's
# parity (%n on odd tiles, 0 on even ones, which are tripled instead); the loop's results steer
# a last doubling of the block's first tile
KERNEL = f'''builtin.module {{
  ascend.kernel @k(%a: {G}, %b: {G}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %bid = ascend.block_idx : index
    %base = arith.muli %bid, %c128 : index
    %u = ascend.alloc : {U}
    %w = ascend.alloc : {U}
    ascend.set_flag MTE3 -> MTE2, 0
    %r:3 = scf.for %i = %c0 to %c8 step %c1 iter_args(%p = %base, %m = %c1, %n = %c2) -> (index, index, index) {{
      ascend.wait_flag MTE3 -> MTE2, 0
      %xs = memref.subview %a[%p, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      ascend.copy %xs, %u : {G_TILE}, {U}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      scf.for %j = %c0 to %m step %c1 {{
        ascend.vadd %u, %u, %u : {U}, {U}, {U}
      }}
      %odd = arith.remui %i, %c2 : index
      %is_odd = arith.cmpi eq, %odd, %c1 : index
      %k = scf.if %is_odd -> (index) {{
        scf.yield %n : index
      }} else {{
        ascend.vadd %u, %u, %w : {U}, {U}, {U}
        ascend.vadd %w, %u, %u : {U}, {U}, {U}
        scf.yield %c0 : index
      }}
      scf.for %j2 = %c0 to %k step %c1 {{
        %first = arith.cmpi eq, %j2, %c0 : index
        scf.if %first {{
          scf.for %j3 = %c0 to %c1 step %c1 {{
            ascend.vadd %u, %u, %u : {U}, {U}, {U}
          }}
        }} else {{
          ascend.vadd %u, %u, %u : {U}, {U}, {U}
        }}
      }}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      %zs = memref.subview %b[%p, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      ascend.copy %u, %zs : {U}, {G_TILE}
      ascend.set_flag MTE3 -> MTE2, 0
      %p2 = arith.addi %p, %c16 : index
      scf.yield %p2, %n, %m : index, index, index
    }}
    ascend.wait_flag MTE3 -> MTE2, 0
    %more = arith.cmpi ult, %r#1, %r#2 : index
    scf.if %more {{
      %zs = memref.subview %b[%base, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      ascend.copy %zs, %u : {G_TILE}, {U}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.vadd %u, %u, %u : {U}, {U}, {U}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      ascend.copy %u, %zs : {U}, {G_TILE}
    }}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) -> ({G} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {G}
    ascend.launch @k(%x, %z) : {G}, {G}
    func.return %z : {G}
  }}
}}'''


# an on-chip race (V reads %u, MTE2 then writes it, no flag between) that only block 1 makes,
# behind a branch or a loop on the block index: block 1 runs cheap (race.py `reset`) until a
# decision differs from block 0's, so the race is found only when the decision reaches `decide`
LATER = f'''      %xs0 = memref.subview %a[%base, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      ascend.vadd %u, %u, %w : {U}, {U}, {U}
      ascend.copy %xs0, %u : {G_TILE}, {U}
'''
RACY = {
    "branch": KERNEL.replace("    ascend.return", f"    %later = arith.cmpi eq, %bid, %c1 : index\n    scf.if %later {{\n{LATER}    }}\n    ascend.return"),
    "loop": KERNEL.replace("    ascend.return", f"    scf.for %t = %c0 to %bid step %c1 {{\n{LATER}    }}\n    ascend.return"),
}


# V held by a wait whose set comes later; behind it a V read of what MTE2 wrote, then the wait
# that orders that write: the wait runs after the read (the race is found), not when issued
HELD = f'''builtin.module {{
  ascend.kernel @k(%a: {G}, %b: {G}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %x = ascend.alloc : {U}
    %y = ascend.alloc : {U}
    %xs = memref.subview %a[0, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    %zs = memref.subview %b[0, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %xs, %x : {G_TILE}, {U}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE3 -> V, 1
    ascend.vadd %x, %x, %y : {U}, {U}, {U}
    ascend.wait_flag MTE2 -> V, 0
    ascend.set_flag MTE3 -> V, 1
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %y, %zs : {U}, {G_TILE}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) -> ({G} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {G}
    ascend.launch @k(%x, %z) : {G}, {G}
    func.return %z : {G}
  }}
}}'''


def _feeds() -> dict:
    return {"x": np.random.default_rng(7).standard_normal((256, 64)).astype(np.float16)}


@pytest.mark.parametrize("nest", [0, 1, 2, data_codegen.MAX_NEST])
def test_generated_blocks_equal_single_walk(nest, monkeypatch):
    """At every nesting limit (0: scf_ops.py's closures only) the data walk is the single walk's,
    on the kernel and on mutations of it that break it (races, deadlocks) and keep it."""
    monkeypatch.setattr(data_codegen, "MAX_NEST", nest)
    kinds = [_assert_same(KERNEL, None, _feeds(), "as written", monkeypatch)]
    for what, mutant in _mutants(KERNEL, 6, seed=5):
        kinds.append(_assert_same(mutant, None, _feeds(), what, monkeypatch))
    assert kinds[0] == "ok" and "error" in kinds


@pytest.mark.parametrize("nest", [0, data_codegen.MAX_NEST])
@pytest.mark.parametrize("where", sorted(RACY))
def test_race_behind_a_later_blocks_decision(where, nest, monkeypatch):
    """A race only block 1 makes, behind a branch or a loop's trip count: the data walk raises the
    single walk's error (the generated code gives the race check every decision)."""
    monkeypatch.setattr(data_codegen, "MAX_NEST", nest)
    assert _assert_same(RACY[where], None, _feeds(), where, monkeypatch) == "error"


@pytest.mark.parametrize("nest", [0, data_codegen.MAX_NEST])
def test_wait_behind_a_held_pipe(nest, monkeypatch):
    """A wait_flag whose set is pending but whose pipe is held runs when the pipe's earlier ops
    have: the read before it races, in the data walk as in the single walk."""
    monkeypatch.setattr(data_codegen, "MAX_NEST", nest)
    assert _assert_same(HELD, None, _feeds(), "held", monkeypatch) == "error"


def test_kernel_exercises_carried_swap_and_branch_results():
    """The kernel's output depends on the swap and on the branch's result (else the test above
    would not see them go wrong): against a numpy model of it."""
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.interpreter.testing import parse

    x = _feeds()["x"]
    z = simulate(parse(KERNEL), None, {"x": x}, load_target("ascend910b2")).outputs["z"]
    want = np.zeros_like(x)
    for b in range(2):
        m, n = 1, 2
        for i in range(8):
            t = x[128 * b + 16 * i: 128 * b + 16 * i + 16].copy()
            for _ in range(m):
                t = t + t
            k = n if i % 2 else 0
            if i % 2 == 0:
                t = (t + t) + t
            for _ in range(k):
                t = t + t
            want[128 * b + 16 * i: 128 * b + 16 * i + 16] = t
            m, n = n, m
        if m < n:
            want[128 * b: 128 * b + 16] *= 2
    np.testing.assert_array_equal(z, want)


@pytest.mark.sampled
def test_generated_blocks_on_matmul(monkeypatch):
    """A double-buffered GEMM (ping-pong branches in nested loops, held pipes) and its mutations."""
    rng = np.random.default_rng(2)
    feeds = {"a": rng.standard_normal((256, 512)).astype(np.float16), "b": rng.standard_normal((512, 256)).astype(np.float16)}
    text = matmul_ir(256, 256, 512, block_dim=2, nbuf=2)
    kinds = [_assert_same(text, None, feeds, "as generated", monkeypatch)]
    monkeypatch.setattr(data_codegen, "MAX_NEST", 1)
    for what, mutant in _mutants(text, 4, seed=9):
        kinds.append(_assert_same(mutant, None, feeds, what, monkeypatch))
    assert "ok" in kinds
