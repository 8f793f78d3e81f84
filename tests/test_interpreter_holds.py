"""A wait_flag issued before its matching set_flag in program order holds only its destination
pipe until the set runs (interpreter/timing/holds.py, reference §5): ops on other pipes go on, the held
pipe's later ops run after the set with the data the set published. A wait no set releases is
still a deadlock (tests/test_interpreter_errors.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import add_ir, parse

HW = load_target("ascend910b2")


def _move_before(text: str, lines: list[str], anchor: str) -> str:
    """`text` with the first occurrence of each of `lines` (stripped match) moved, in order, to
    just before the first line whose stripped form starts with `anchor`."""
    src = text.splitlines()
    picked = []
    for want in lines:
        i = next(i for i, x in enumerate(src) if x.strip() == want)
        picked.append(src.pop(i))
    j = next(i for i, x in enumerate(src) if x.strip().startswith(anchor))
    return "\n".join(src[:j] + picked + src[j:])


def _xy(rows: int, cols: int):
    rng = np.random.default_rng(1)
    return {k: rng.standard_normal((rows, cols)).astype(np.float16) for k in ("x", "y")}


def _cycles(text: str, **kw) -> float:
    return simulate(parse(text), None, {}, HW, timing_only=True, **kw).report["total_cycles"]


ROWS, COLS, TILE, BD = 1024, 64, 16, 2  # 64 tiles, 32 loop iterations per block (steady.py samples)


@pytest.fixture(scope="module")
def early_vadd():
    """add_ir single-buffered with the V side (`wait_flag MTE2 -> V` and the vadd) moved ahead
    of the MTE2 copies and their set: the vadd is issued before the data it adds is loaded."""
    text = add_ir(ROWS, COLS, TILE, block_dim=BD, nbuf=1)
    vadd = next(x.strip() for x in text.splitlines() if x.strip().startswith("ascend.vadd"))
    moved = _move_before(text, ["ascend.wait_flag MTE2 -> V, 0", vadd], "%xs0 = memref.subview")
    assert moved != text
    return text, moved


def test_held_pipe_runs_its_ops_after_the_set_with_the_loaded_data(early_vadd):
    text, moved = early_vadd
    xy = _xy(ROWS, COLS)
    out = simulate(parse(moved), None, xy, HW).outputs["z"]  # numerics + race check
    np.testing.assert_array_equal(out, xy["x"] + xy["y"])


def test_held_pipe_timing_equals_the_ordered_program(early_vadd):
    # V waits for the set either way, so the cycles are those of the program with the wait after
    # the set; steady-state extrapolation stops once a pipe is held, and agrees with a plain run
    text, moved = early_vadd
    ordered = _cycles(text, extrapolate=False)
    assert _cycles(moved, extrapolate=False) == ordered
    assert _cycles(moved) == ordered
    assert _cycles(moved, check_races=True) == ordered


def test_other_pipes_run_while_one_is_held():
    # V is held by a wait whose set comes after an MTE3 store and an MTE2 load: both run at once
    # (MTE3's store does not wait for V), then V runs its vexp after the load's set
    gm = "memref<8x32xf32, #ascend<space gm>>"
    ub = "memref<8x32xf32, #ascend<space ub>>"
    text = f"""builtin.module {{
  ascend.kernel @k(%x: {gm}, %y: {gm}, %w: {gm}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {ub}
    %b = ascend.alloc : {ub}
    ascend.wait_flag MTE2 -> V, 0
    ascend.vexp %a, %b : {ub}, {ub}
    ascend.copy %x, %a : {gm}, {ub}
    ascend.set_flag MTE2 -> V, 0
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %b, %y : {ub}, {gm}
    ascend.return
  }}
  func.func @main(%x: {gm} {{onnx.name = "x"}}) -> ({gm} {{onnx.name = "y"}}) {{
    %y = ascend.alloc : {gm}
    %w = ascend.alloc : {gm}
    ascend.launch @k(%x, %y, %w) : {gm}, {gm}, {gm}
    func.return %y : {gm}
  }}
}}"""
    x = np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32)
    res = simulate(parse(text), None, {"x": x}, HW, trace=True)
    np.testing.assert_allclose(res.outputs["y"], np.exp(x), rtol=1e-6)
    ev = {e["name"]: e for e in res.trace_events if e.get("ph") == "X" and e["pid"] > 0}
    load, vexp, store = ev["GM->UB"], ev["vexp"], ev["UB->GM"]
    assert vexp["ts"] >= load["ts"] + load["dur"]  # after the load
    assert store["ts"] >= vexp["ts"] + vexp["dur"]  # the store after V


def _exp_ir(tmp_path) -> str:
    """`ascendir compile` of a 3x5x7x11 f32 Exp model (the auditor's reproducer)."""
    from cli_helpers import run_cli

    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 5, 7, 11])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 5, 7, 11])
    g = helper.make_graph([helper.make_node("Exp", ["x"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    onnx.save(m, tmp_path / "m.onnx")
    assert run_cli("compile", tmp_path / "m.onnx", "-o", tmp_path / "exp.mlir").exit_code == 0
    return (tmp_path / "exp.mlir").read_text()


def test_cli_wait_before_its_set_in_program_order_runs(tmp_path):
    from cli_helpers import run_cli

    text = _exp_ir(tmp_path)
    copy = next(x.strip() for x in text.splitlines() if x.strip().startswith("ascend.copy"))
    moved = _move_before(text, ["ascend.wait_flag MTE2 -> V, 0"], copy)
    lines = [x.strip() for x in moved.splitlines()]
    assert lines.index("ascend.wait_flag MTE2 -> V, 0") < lines.index(copy) < lines.index("ascend.set_flag MTE2 -> V, 0")
    (tmp_path / "early.mlir").write_text(moved)
    x = np.random.default_rng(3).standard_normal((3, 5, 7, 11)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    for name in ("exp", "early"):
        r = run_cli("run", tmp_path / f"{name}.mlir", "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / f"{name}.npz",
                    "--report", tmp_path / f"{name}.json")
        assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "early.npz")["y"], np.load(tmp_path / "exp.npz")["y"])
    import json

    cyc = [json.loads((tmp_path / f"{n}.json").read_text())["total_cycles"] for n in ("exp", "early")]
    assert cyc[0] == cyc[1]


def test_wait_whose_set_never_comes_after_it_is_a_deadlock(early_vadd):
    # the same program with the MTE2 -> V set removed: V stays held to the end of the block
    _, moved = early_vadd
    lines = moved.splitlines()
    i = next(i for i, x in enumerate(lines) if x.strip() == "ascend.set_flag MTE2 -> V, 0")
    text = "\n".join(lines[:i] + lines[i + 1:])
    with pytest.raises(AscendirError, match=r"deadlock in kernel @add \(block 0\): ascend.wait_flag MTE2 -> V, 0 never "
                                            r"returns: the kernel has no ascend.set_flag MTE2 -> V, 0"):
        simulate(parse(text), None, {}, HW, timing_only=True)


def test_chained_holds_release_in_program_order_of_each_pipe():
    # V waits for MTE2 (flag 0) before anything is loaded and MTE3 waits for V; MTE2's first set
    # releases V, whose replayed set releases MTE3 (nested), and V's next wait (flag 1) holds it
    # again with the second vexp behind it until MTE2's second set. Each output needs its load.
    gm = "memref<8x32xf32, #ascend<space gm>>"
    ub = "memref<8x32xf32, #ascend<space ub>>"
    text = f"""builtin.module {{
  ascend.kernel @k(%x: {gm}, %x2: {gm}, %y: {gm}, %w: {gm}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {ub}
    %b = ascend.alloc : {ub}
    %c = ascend.alloc : {ub}
    %d = ascend.alloc : {ub}
    ascend.wait_flag MTE2 -> V, 0
    ascend.vexp %a, %b : {ub}, {ub}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag MTE2 -> V, 1
    ascend.vexp %c, %d : {ub}, {ub}
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %b, %y : {ub}, {gm}
    ascend.copy %x, %a : {gm}, {ub}
    ascend.set_flag MTE2 -> V, 0
    ascend.copy %x2, %c : {gm}, {ub}
    ascend.set_flag MTE2 -> V, 1
    ascend.set_flag V -> MTE3, 1
    ascend.wait_flag V -> MTE3, 1
    ascend.copy %d, %w : {ub}, {gm}
    ascend.return
  }}
  func.func @main(%x: {gm} {{onnx.name = "x"}}, %x2: {gm} {{onnx.name = "x2"}}) -> ({gm} {{onnx.name = "y"}}, {gm} {{onnx.name = "w"}}) {{
    %y = ascend.alloc : {gm}
    %w = ascend.alloc : {gm}
    ascend.launch @k(%x, %x2, %y, %w) : {gm}, {gm}, {gm}, {gm}
    func.return %y, %w : {gm}, {gm}
  }}
}}"""
    rng = np.random.default_rng(4)
    x, x2 = (rng.standard_normal((8, 32)).astype(np.float32) for _ in range(2))
    out = simulate(parse(text), None, {"x": x, "x2": x2}, HW).outputs  # numerics + race check
    np.testing.assert_allclose(out["y"], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(out["w"], np.exp(x2), rtol=1e-6)
    simulate(parse(text), None, {}, HW, timing_only=True, check_races=False)


def test_loop_that_leaves_a_pipe_held_is_not_memoised():
    # V is held in the last iteration of a uniform loop and released by a set after the loop:
    # a stored execution of the loop (loop_memo.LoopMemo, shared by the blocks) would apply without
    # the hold, dropping the held vexp of every later block (73 tile ops instead of 76)
    gm = "memref<64x32xf32, #ascend<space gm>>"
    ub = "memref<64x32xf32, #ascend<space ub>>"
    text = f"""builtin.module {{
  ascend.kernel @k(%x: {gm}, %y: {gm}) attributes {{block_dim = 4 : i64, core_type = #ascend.core_type<aiv>}} {{
    %a = ascend.alloc : {ub}
    %b = ascend.alloc : {ub}
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c7 = arith.constant 7 : index
    %c8 = arith.constant 8 : index
    scf.for %i = %c0 to %c8 step %c1 {{
      ascend.vexp %b, %b : {ub}, {ub}
      %last = arith.cmpi eq, %i, %c7 : index
      scf.if %last {{
        ascend.wait_flag MTE2 -> V, 0
      }}
      ascend.vexp %b, %b : {ub}, {ub}
    }}
    ascend.copy %x, %a : {gm}, {ub}
    ascend.set_flag MTE2 -> V, 0
    ascend.vexp %a, %b : {ub}, {ub}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    ascend.copy %b, %y : {ub}, {gm}
    ascend.return
  }}
  func.func @main(%x: {gm} {{onnx.name = "x"}}) -> ({gm} {{onnx.name = "y"}}) {{
    %y = ascend.alloc : {gm}
    ascend.launch @k(%x, %y) : {gm}, {gm}
    func.return %y : {gm}
  }}
}}"""
    reps = [simulate(parse(text), None, {}, HW, timing_only=True, extrapolate=ex).report for ex in (False, True)]
    assert reps[0]["tile_ops"] == 4 * (16 + 3)
    assert [r["tile_ops"] for r in reps] == [reps[0]["tile_ops"]] * 2
    assert reps[1]["total_cycles"] == reps[0]["total_cycles"]
