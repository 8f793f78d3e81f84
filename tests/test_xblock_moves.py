"""Cross-block reuse (interpreter/accel/xblock.py) where the block index moves GM offsets other than
through the address plan's values, and where the iv reaches inner loops through pure scalar ops:
shifts (outside values, or values computed from them, used as GM offsets through +, -, × by a
constant: a per-block workspace row `block · 16`), chained checked values (a checked value used
as a GM offset through such a chain inside an inner loop), hoisted values (`iv == block` in an
inner loop, compared per iteration) and short loops (fewer than steady.MIN_TRIPS trips). Each
case is reused and records what running every block records (the same designated misses, the
same report as without xblock and without any speed-up); offsets that are no constant shift, and
moved writes with other L2 outcomes, fall back to running the block."""

from __future__ import annotations

from dataclasses import replace

from ascendir.hardware import load_target
from ascendir.interpreter import Accel, build_report, compile_module
from ascendir.interpreter.accel import xblock
from ascendir.interpreter.timing import l2
from ascendir.interpreter.testing import parse

HW = load_target("ascend910b2")
UB = "memref<16x256xf16, #ascend<space ub>>"
GM = "memref<1024x256xf16, #ascend<space gm>>"
SV = "memref<16x256xf16, strided<[256, 1], offset: ?>, #ascend<space gm>>"


def _kernel(before: str = "", body: str = "", trips: int = 32) -> str:
    """Blocks 0..3 run t = block .. trips step 4: read x's 16-row tile (t mod 64)·16, add it to
    itself, write it to z's; `before`: IR lines ahead of the loop (%bid is the block index),
    `body`: more lines in the loop's body (%u is the tile, %t the iv)."""
    return f"""builtin.module {{
  ascend.kernel @w(%x: {GM}, %z: {GM}, %ws: {GM}) attributes {{block_dim = 4 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c5 = arith.constant 5 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %cn = arith.constant {trips} : index
    %bid = ascend.block_idx : index
    %u = ascend.alloc : {UB}
    %v = ascend.alloc : {UB}
    ascend.set_flag MTE3 -> MTE2, 0
{before}
    scf.for %t = %bid to %cn step %c4 {{
      %q = arith.remui %t, %c64 : index
      %r = arith.muli %q, %c16 : index
      %xs = memref.subview %x[%r, 0] [16, 256] [1, 1] : {GM} to {SV}
      ascend.wait_flag MTE3 -> MTE2, 0
      ascend.copy %xs, %u : {SV}, {UB}
{body}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.vadd %u, %u, %u : {UB}, {UB}, {UB}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      %zs = memref.subview %z[%r, 0] [16, 256] [1, 1] : {GM} to {SV}
      ascend.copy %u, %zs : {UB}, {SV}
      ascend.set_flag MTE3 -> MTE2, 0
    }}
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.return
  }}
  func.func @main(%x: {GM} {{onnx.name = "x"}}) -> ({GM} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {GM}
    %ws = ascend.alloc : {GM}
    ascend.launch @w(%x, %z, %ws) : {GM}, {GM}, {GM}
    func.return %z : {GM}
  }}
}}"""


def _read(rows: str, into: str = "%v", indent: str = "      ") -> str:
    """IR lines reading the 16-row tile of the workspace at row `rows` into `into`."""
    return (f"{indent}%w{rows[1:]} = memref.subview %ws[{rows}, 0] [16, 256] [1, 1] : {GM} to {SV}\n"
            f"{indent}ascend.copy %w{rows[1:]}, {into} : {SV}, {UB}")


def _write(rows: str, indent: str = "      ") -> str:
    """IR lines writing %v to the 16-row tile of the workspace at row `rows`."""
    return (f"{indent}%o{rows[1:]} = memref.subview %ws[{rows}, 0] [16, 256] [1, 1] : {GM} to {SV}\n"
            f"{indent}ascend.copy %v, %o{rows[1:]} : {UB}, {SV}")


def _run(text: str, accel: Accel, monkeypatch) -> tuple[dict, set, list[bool]]:
    """(report without the skipped-iteration counts, designated misses, BlockMemo.reuse answers
    of the recording passes) of a timing-only run."""
    designated: list[set] = []
    answers: list[bool] = []
    settle, reuse = l2.L2Pass.settle, xblock.BlockMemo.reuse

    def spy_settle(self, l2=None):
        settle(self, l2)
        designated.append(set(self.misses))

    def spy_reuse(self, F, *a):
        got = reuse(self, F, *a)
        if F.l2_pass.recording:
            answers.append(got)
        return got

    monkeypatch.setattr(l2.L2Pass, "settle", spy_settle)
    monkeypatch.setattr(xblock.BlockMemo, "reuse", spy_reuse)
    try:
        prog = compile_module(parse(text), HW, None, timing_only=True, accel=accel)
        _, recs = prog.run({})
    finally:
        monkeypatch.undo()
    rep = build_report(recs, HW)
    for k in rep["kernels"]:
        del k["extrapolated_iterations"]  # what was skipped: differs by design
    return rep, set().union(*designated), answers


def _check(text: str, monkeypatch) -> list[bool]:
    """Runs `text` with every speed-up, without xblock and without any; asserts the same
    designated misses and reports; returns the reuse answers of the first run."""
    on, des_on, answers = _run(text, Accel(), monkeypatch)
    off, des_off, none = _run(text, replace(Accel(), xblock=False), monkeypatch)
    assert not none
    assert des_on == des_off and des_on
    assert on == off
    bare, des_bare, _ = _run(text, Accel.none(), monkeypatch)
    assert des_on == des_bare
    assert on == bare
    return answers


# -- shifts -------------------------------------------------------------------------------------

def test_outside_offset_per_block_moves_the_stored_reads(monkeypatch):
    # each block reads its own workspace tile `block · 16` every iteration: blocks 1-3 reuse
    # block 0's execution with those reads moved by 16 rows per block
    text = _kernel("    %o = arith.muli %bid, %c16 : index", _read("%o"))
    assert _check(text, monkeypatch) == [False, True, True, True]


def test_offset_computed_in_the_body_from_the_block_index(monkeypatch):
    # `block · 16 + 2` computed in the loop (not checked: it does not depend on the iv) and read
    # and written in an inner loop at `that + k` (coefficient 1 through + and the chain)
    body = ("      %o = arith.muli %bid, %c16 : index\n      %o2 = arith.addi %o, %c2 : index\n"
            "      scf.for %k = %c0 to %c2 step %c1 {\n        %ok = arith.addi %o2, %k : index\n"
            f"{_read('%ok', indent='        ')}\n{_write('%ok', indent='        ')}\n      }}")
    assert _check(_kernel("", body), monkeypatch) == [False, True, True, True]


def test_chained_checked_value_moves_inner_loop_reads(monkeypatch):
    # `t mod 4` (the block, a checked value) read at row `(t mod 4) · 32 + k` in an inner loop:
    # compared per iteration it would differ per block; chained, it moves by 32 rows per block
    body = ("      %h = arith.remui %t, %c4 : index\n"
            "      scf.for %k = %c0 to %c2 step %c1 {\n        %hh = arith.muli %h, %c32 : index\n"
            f"        %hk = arith.addi %hh, %k : index\n{_read('%hk', indent='        ')}\n      }}")
    assert _check(_kernel("", body), monkeypatch) == [False, True, True, True]


def test_short_loop_is_reused(monkeypatch):
    # 16 tiles over 4 blocks: 4 trips, under steady.MIN_TRIPS
    text = _kernel("    %o = arith.muli %bid, %c16 : index", _read("%o"), trips=16)
    assert _check(text, monkeypatch) == [False, True, True, True]


# -- hoisted values -------------------------------------------------------------------------------

def _first_tile(cond: str) -> str:
    """An inner loop whose body adds the tile once more where `cond` (IR of an i1 %f from %t,
    %bid or constants) holds."""
    return ("      scf.for %k = %c0 to %c2 step %c1 {\n"
            f"        {cond}\n        scf.if %f {{\n"
            f"          ascend.vadd %u, %u, %u : {UB}, {UB}, {UB}\n        }}\n      }}")


def test_first_tile_test_in_an_inner_loop_is_compared(monkeypatch):
    # `t == block` (a matmul's first tile) in the K loop: the same in every block's iteration 0
    body = _first_tile("%f = arith.cmpi eq, %t, %bid : index")
    assert _check(_kernel("", body), monkeypatch) == [False, True, True, True]


def test_hoisted_value_that_differs_falls_back(monkeypatch):
    # `t == 5`: only block 1 has that tile (its iteration 1), so only block 1 runs an extra vadd
    # in it: compared per iteration, its control values differ and it runs
    body = _first_tile("%f = arith.cmpi eq, %t, %c5 : index")
    assert _check(_kernel("", body), monkeypatch) == [False, False, True, True]


# -- fallbacks ------------------------------------------------------------------------------------

def test_offset_that_is_no_constant_shift_keys_the_loop(monkeypatch):
    # `block · block`: not linear, so no shift; the block index reaches the body through it and
    # the loop gets no BlockMemo
    body = "      %o = arith.muli %bid, %bid : index\n" + _read("%o")
    assert _check(_kernel("", body), monkeypatch) == []


def test_offset_used_as_a_bound_keys_the_loop(monkeypatch):
    # the per-block value also bounds an inner loop: a control value, keyed (no two blocks equal)
    body = f"      scf.for %k = %c0 to %o step %c16 {{\n{_read('%k', indent='        ')}\n      }}"
    assert _check(_kernel("    %o = arith.muli %bid, %c16 : index", body), monkeypatch) == [False, False, False, False]


def test_moved_writes_with_other_outcomes_run(monkeypatch):
    # blocks 0 and 1 write the same workspace tile `(block / 2) · 16`, blocks 2 and 3 another:
    # block 1's writes would be moved by 0 onto tiles block 0 left dirty (rewrites, not first
    # writes), so it runs; block 2's move onto fresh tiles as block 0's, block 3's as block 1's
    before = "    %b2 = arith.divui %bid, %c2 : index\n    %o = arith.muli %b2, %c16 : index"
    text = _kernel(before, _write("%o"))
    assert _check(text, monkeypatch) == [False, False, True, True]


def test_checked_value_of_a_body_value_from_the_block_index_is_reused(monkeypatch):
    # `block · 16` computed in the body and added to the tile row by a checked op: it is checked
    # too (steady._with_body_operands), so it is evaluated with this block's index, not read
    # from its slot, where the last block's `block · 16` is before this block's body runs (a
    # reused block would then record its reads at the last block's rows)
    body = "      %o = arith.muli %bid, %c16 : index\n      %p = arith.addi %o, %q : index\n" + _read("%p")
    assert _check(_kernel("", body), monkeypatch) == [False, True, True, True]
