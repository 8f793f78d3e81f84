"""Copies into an on-chip buffer no op reads skip their data (interpreter/exec/semantics.py
`never_read`): the matmul template's L2 prefetch reads weight chunks GM -> UB into a scratch tile
only to warm L2. The proof looks at every use of the buffer's alloc; the outputs, cycles and
race check are those of the copies run."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.exec import semantics
from ascendir.interpreter.testing import parse

HW = load_target("ascend910b2")
GM, UB = "memref<32x32xf16, #ascend<space gm>>", "memref<32x32xf16, #ascend<space ub>>"
SUB = "memref<16x32xf16, strided<[32, 1], offset: ?>, #ascend<space ub>>"


def _kernel(body: str) -> str:
    return f"""builtin.module {{
  ascend.kernel @k(%a: {GM}, %y: {GM}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %s = ascend.alloc : {UB}
    %t = ascend.alloc : {UB}
    %h = memref.subview %s[%c16, %c0] [16, 32] [1, 1] : {UB} to {SUB}
{body}
    ascend.return
  }}
  func.func @main(%a: {GM}) -> {GM} {{
    %y = ascend.alloc : {GM}
    ascend.launch @k(%a, %y) : {GM}, {GM}
    func.return %y : {GM}
  }}
}}"""


FILL = f"""    ascend.copy %a, %s : {GM}, {UB}
    ascend.copy %a, %h : {GM}, {SUB}
    ascend.copy %a, %t : {GM}, {UB}
    ascend.set_flag MTE2 -> MTE3, 0
    ascend.wait_flag MTE2 -> MTE3, 0
    ascend.copy %t, %y : {UB}, {GM}"""
READ_BACK = f"""
    ascend.set_flag MTE3 -> MTE2, 1
    ascend.wait_flag MTE3 -> MTE2, 1
    ascend.copy %s, %y : {UB}, {GM}"""
VECTOR = f"""
    ascend.vexp %h, %h : {SUB}, {SUB}"""


def _never_read(text: str) -> dict[str, bool]:
    """never_read of each copy's destination, by the destination's SSA name."""
    return {op.dest.name_hint: semantics.never_read(op.dest) for op in parse(text).walk() if op.name == "ascend.copy"}


def test_a_buffer_only_copied_into_is_never_read():
    assert _never_read(_kernel(FILL)) == {"s": True, "h": True, "t": False, "y": False}


@pytest.mark.parametrize("extra", [READ_BACK, VECTOR], ids=["copied out", "vector op"])
def test_a_buffer_read_through_a_view_is_read(extra):
    # %s copied out, or %h (a subview of %s) read by a vector op: %s and %h are read
    got = _never_read(_kernel(FILL + extra))
    assert got["s"] is False and got["h"] is False and got["t"] is False


def test_outputs_and_report_as_with_the_copies_run(monkeypatch):
    a = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float16)
    for body in (FILL, FILL + READ_BACK):
        module = parse(_kernel(body))
        skipped = []
        orig = semantics.never_read
        monkeypatch.setattr(semantics, "never_read", lambda d: (skipped.append(orig(d)), skipped[-1])[1])
        new = simulate(module, None, {"arg0": a}, HW, accel=Accel.none())
        monkeypatch.setattr(semantics, "never_read", lambda d: False)
        old = simulate(parse(_kernel(body)), None, {"arg0": a}, HW, accel=Accel.none())
        assert any(skipped) == (body == FILL)
        assert new.report == old.report
        np.testing.assert_array_equal(new.outputs["out0"], old.outputs["out0"])
    np.testing.assert_array_equal(old.outputs["out0"][16:], a[:16])  # (read back: %s, its rows 16.. through %h)


def test_prefetching_matmul_skips_its_scratch_copies(monkeypatch):
    # templates/matmul.py `_Prefetch`: the AIVs' GM -> UB chunks of B, beside an AIV epilogue
    # (residual + SiLU: UB tiles that are read); numbers and report as with the copies run
    from lowering_harness import lower_text, rand
    from test_choose_tiling import with_tiling
    from test_lowering_matmul import epilogue_text, fuse

    text = fuse(epilogue_text(40, 700, 333, "silu", bias=True, dt="f16", residual=True))
    lowered = lower_text(with_tiling(text, "m=16,n=128,k=64,l1_depth=4,prefetch=1"), "ascend910b2", None)
    inputs = {"a": rand((40, 700), np.float16), "b": rand((700, 333), np.float16), "c": rand((333,), np.float16),
              "r": rand((40, 333), np.float16)}
    proved = []
    orig = semantics.never_read
    monkeypatch.setattr(semantics, "never_read", lambda d: (proved.append(orig(d)), proved[-1])[1])
    new = simulate(lowered, None, inputs, HW)
    assert True in proved and False in proved
    monkeypatch.setattr(semantics, "never_read", lambda d: False)
    old = simulate(lowered, None, inputs, HW)
    assert new.report == old.report
    np.testing.assert_array_equal(new.outputs["y"], old.outputs["y"])
