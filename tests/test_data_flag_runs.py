"""The data walk's flag ops written inline (exec/data_codegen.py `_flag_lines`): a run of
consecutive set_flag / wait_flag ops moves only the counts it leaves in the flag queues when no
pipe is held, no race check runs and every wait of the run finds a pending set; otherwise each op
runs through sync_ops.py `data_flag_fns`, in order. Checked against the single walk (Accel.none():
timing, data and race check in one walk), bit for bit with its errors, on a kernel whose runs
leave sets behind (net appends), consume sets made before them (a wait before its set in one
run), cancel out (a set and its wait) and hold a pipe (a wait whose set comes after a V op); and
that blocks past the race-checked one take the inline path."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import sync_ops
from ascendir.interpreter.testing import parse

from test_data_walk_equivalence import _assert_same, _mutants

G = "memref<256x64xf16, #ascend<space gm>>"
G_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"
U = "memref<16x64xf16, #ascend<space ub>>"

# block b: tiles i = 0..3 of 16 rows from row 64 b, each doubled into z; then tile 0's rows of z
# get the last tile times 4, computed by a V op queued behind a wait whose set comes after it
KERNEL = f'''builtin.module {{
  ascend.kernel @k(%a: {G}, %b: {G}) attributes {{block_dim = 3 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c64 = arith.constant 64 : index
    %bid = ascend.block_idx : index
    %base = arith.muli %bid, %c64 : index
    %u = ascend.alloc : {U}
    %w = ascend.alloc : {U}
    ascend.set_flag MTE3 -> MTE2, 0
    ascend.set_flag MTE3 -> MTE2, 1
    scf.for %i = %c0 to %c4 step %c1 {{
      %off = arith.muli %i, %c16 : index
      %row = arith.addi %base, %off : index
      ascend.wait_flag MTE3 -> MTE2, 0
      %xs = memref.subview %a[%row, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      ascend.copy %xs, %u : {G_TILE}, {U}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.vadd %u, %u, %w : {U}, {U}, {U}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      %zs = memref.subview %b[%row, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      ascend.copy %w, %zs : {U}, {G_TILE}
      ascend.wait_flag MTE3 -> MTE2, 1
      ascend.set_flag MTE3 -> MTE2, 1
      ascend.set_flag MTE3 -> MTE2, 0
    }}
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.wait_flag MTE3 -> MTE2, 1
    ascend.wait_flag MTE3 -> V, 1
    ascend.vadd %w, %w, %u : {U}, {U}, {U}
    ascend.set_flag MTE3 -> V, 1
    ascend.set_flag V -> MTE3, 1
    ascend.wait_flag V -> MTE3, 1
    %z0 = memref.subview %b[%base, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %u, %z0 : {U}, {G_TILE}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) -> ({G} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {G}
    ascend.launch @k(%x, %z) : {G}, {G}
    func.return %z : {G}
  }}
}}'''


def _feeds() -> dict:
    return {"x": np.random.default_rng(11).standard_normal((256, 64)).astype(np.float16)}


def test_kernel_output():
    """What the kernel computes (so that a wrong flag path shows in its output), against numpy."""
    x = _feeds()["x"]
    z = simulate(parse(KERNEL), None, {"x": x}, load_target("ascend910b2")).outputs["z"]
    want = np.zeros_like(x)
    want[:192] = x[:192] + x[:192]
    for b in range(3):
        last = want[64 * b + 48: 64 * b + 64]
        want[64 * b: 64 * b + 16] = last + last
    np.testing.assert_array_equal(z, want)


def test_flag_runs_equal_single_walk(monkeypatch):
    """The data walk is the single walk's on the kernel and on mutations dropping a flag op
    (deadlocks, races, longer holds)."""
    kinds = [_assert_same(KERNEL, None, _feeds(), "as written", monkeypatch)]
    for what, mutant in _mutants(KERNEL, 8, seed=4):
        kinds.append(_assert_same(mutant, None, _feeds(), what, monkeypatch))
    assert kinds[0] == "ok" and "error" in kinds


def test_unchecked_blocks_take_the_inline_path(monkeypatch):
    """Block 0 (race-checked) runs every flag op through its function; blocks 1 and 2 (no race
    check) only the run of the wait that holds V (the loop's drain and that wait: 3 ops) and the
    run behind the V op (3: the pipe is held then)."""
    calls: dict[int, int] = {}
    made = sync_ops.SyncOps.data_flag_fns

    def counted(self):
        if self.flag_fns is None:
            fs, fw = made(self)
            F = self.F

            def count(fn):
                def run(*a):
                    calls[F.block] = calls.get(F.block, 0) + 1
                    fn(*a)
                return run

            self.flag_fns = (count(fs), count(fw))
        return self.flag_fns

    monkeypatch.setattr(sync_ops.SyncOps, "data_flag_fns", counted)
    simulate(parse(KERNEL), None, _feeds(), load_target("ascend910b2"))
    per_iter = 8
    assert calls == {0: 2 + 4 * per_iter + 3 + 3, 1: 6, 2: 6}


@pytest.mark.parametrize("lines", [
    ("    ascend.set_flag MTE3 -> MTE2, 1\n    scf.for", "    scf.for"),  # the run's wait finds no set: held MTE2, never released
    ("      ascend.set_flag MTE3 -> MTE2, 0\n    }}", "    }}"),  # the next iteration's wait: held, a deadlock
])
def test_short_queue_takes_the_functions(lines, monkeypatch):
    """A run whose wait has no pending set goes through the functions (a hold, then the
    deadlock error), in unchecked blocks too: the single walk's error."""
    text = KERNEL.replace(*[s.replace("}}", "}") for s in lines])
    assert text != KERNEL
    assert _assert_same(text, None, _feeds(), lines[0], monkeypatch) == "error"


def test_flag_lines_move_what_the_ops_would():
    """`_flag_lines` on seeded runs of sets and waits over three keys, from seeded queue lengths:
    the inline path is taken exactly when each wait in turn finds a pending set, and then leaves
    the lengths the ops one by one leave; otherwise the functions run, each op in order."""
    from collections import deque
    from types import SimpleNamespace

    from ascendir.interpreter.exec.data_codegen import _flag_lines
    from ascendir.interpreter.exec.scalar_codegen import generated

    rng = np.random.default_rng(8)
    for _ in range(300):
        run = [(bool(rng.integers(2)), (0, int(rng.integers(3)))) for _ in range(int(rng.integers(1, 6)))]
        start = [int(n) for n in rng.integers(0, 3, size=3)]
        log: list = []
        fns = (lambda *a: log.append(("set", a[1])), lambda *a: log.append(("wait", a[1])))
        env: dict = {}
        lines = ["Q = F.flags.queues"]
        _flag_lines(run, fns, env, lines, "", "g0")
        F = SimpleNamespace(slow_path=False, flags=SimpleNamespace(queues=[deque([0.0] * n) for n in start]))
        env["F"] = F
        generated("def run() -> None:", lines, env, "run")()
        lengths, inline = list(start), True
        for is_set, (_, k) in run:
            if not is_set and lengths[k] == 0:
                inline = False
            lengths[k] += 1 if is_set else -1
        if inline:
            assert log == [] and [len(q) for q in F.flags.queues] == lengths, (run, start)
        else:
            assert log == [("set" if s else "wait", a[1]) for s, a in run] and [len(q) for q in F.flags.queues] == start, (run, start)
        F.slow_path = True
        F.flags.queues = [deque([0.0] * n) for n in start]
        log.clear()
        generated("def run() -> None:", lines, env, "run")()
        assert len(log) == len(run)
