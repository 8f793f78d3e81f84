"""Blocks of a numerics data walk the race check follows without running (race.py `reset`,
check/uniform.py): same verdicts and messages as the full check (`RaceChecker.follow` False),
on races that only a later block makes, on-chip or in GM (through an alias of a buffer the
kernel only reads under another name)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.check import race, uniform
from ascendir.interpreter.sim.kernel import KernelProgram
from ascendir.interpreter.testing import matmul_ir, parse

from test_interpreter_race import _full_and_followed

HW = load_target("ascend910b2")
G = "memref<256x64xf16, #ascend<space gm>>"
G_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"
U2 = "memref<32x64xf16, #ascend<space ub>>"
U_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space ub>>"
U = "memref<16x64xf16, #ascend<space ub>>"
KERNEL = f"ascend.kernel @k(%a: {G}, %b: {G}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}}"


def _module(body: str, aliased: bool) -> str:
    args = "%x, %x" if aliased else "%x, %z"
    return f'''builtin.module {{
  {KERNEL} {{
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %bid = ascend.block_idx : index
{body}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) -> ({G} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {G}
    ascend.launch @k({args}) : {G}, {G}
    func.return %z : {G}
  }}
}}'''


# V reads rows 16 * block of a 32-row UB buffer, then MTE2 refills rows 16..31 with no flag after
# that read: block 0 read rows 0..15 (race-free), block 1 reads rows 16..31 (V read / MTE2
# write). Same control decisions in both blocks, different on-chip offsets: not uniform
ON_CHIP = _module(f'''    %u = ascend.alloc : {U2}
    %uc = ascend.alloc : {U}
    %row = arith.muli %bid, %c16 : index
    %xs = memref.subview %a[%row, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    %u0 = memref.subview %u[0, 0] [16, 64] [1, 1] : {U2} to {U_TILE}
    ascend.copy %xs, %u0 : {G_TILE}, {U_TILE}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    %ur = memref.subview %u[%row, 0] [16, 64] [1, 1] : {U2} to {U_TILE}
    ascend.vadd %ur, %ur, %uc : {U_TILE}, {U_TILE}, {U}
    %u1 = memref.subview %u[16, 0] [16, 64] [1, 1] : {U2} to {U_TILE}
    ascend.copy %xs, %u1 : {G_TILE}, {U_TILE}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    %zs = memref.subview %b[%row, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %uc, %zs : {U}, {G_TILE}''', aliased=False)

# MTE2 reads rows 32..47 of %a, MTE3 writes rows 16 * (block + 1) of %b, then MTE2 reads rows
# 32..47 of %a again with no flag after the write: %a is only read, so the kernel races only when
# %b is %a (launched on one buffer twice), and then in block 1 only (write / read)
ALIAS = f'''    %ua = ascend.alloc : {U}
    %ub = ascend.alloc : {U}
    %uc = ascend.alloc : {U}
    %b1 = arith.addi %bid, %c1 : index
    %rw = arith.muli %b1, %c16 : index
    %xs = memref.subview %a[%c32, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %xs, %ua : {G_TILE}, {U}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.vadd %ua, %ua, %uc : {U}, {U}, {U}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    %zw = memref.subview %b[%rw, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %uc, %zw : {U}, {G_TILE}
    ascend.copy %xs, %ub : {G_TILE}, {U}'''


def _full_and_cheap(monkeypatch, text: str) -> tuple[str, str]:
    """The verdicts of the full check and of the data walk's (with its cheap blocks)."""
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float16)
    return _full_and_followed(monkeypatch, text, {"x": x})


@pytest.mark.parametrize("text, match", [
    (ON_CHIP, r"\(block 1\): buffer ub buffer %u #1 32x64xfloat16: ascend.vadd on V and ascend.copy on MTE2 .*\(read / write\)"),
    (_module(ALIAS, aliased=True), r"\(block 1\): buffer GM input 'x': ascend.copy on MTE3 and ascend.copy on MTE2 .*\(write / read\)"),
    (_module(ALIAS, aliased=False), r"^ok$"),
], ids=["on-chip offset", "GM alias", "GM no alias"])
def test_races_of_a_later_block_only_are_caught(monkeypatch, text, match):
    full, cheap = _full_and_cheap(monkeypatch, text)
    assert re.search(match, full), full
    assert cheap == full


def test_uniform_blocks():
    # on-chip offsets from ascend.block_idx are not uniform; GM offsets from it are
    def tile(o):
        return True if o.name in ("ascend.copy", "ascend.vadd") else None

    for text, want in ((ON_CHIP, False), (_module(ALIAS, aliased=True), True)):
        k = next(o for o in parse(text).walk() if o.name == "ascend.kernel")
        assert uniform.uniform_blocks(list(k.walk())[1:], tile) is want


def test_later_blocks_of_a_uniform_kernel_run_unchecked(monkeypatch):
    # the shortcut is taken: blocks 1..3 of a race-free matmul make no race-check access (their
    # decisions are block 0's), and their GM operands are logged
    per: list[int] = []
    access, finish = race.RaceChecker.access, race.RaceChecker.finish
    logged: list[int] = []

    def counting(self, pid, operands, name, block):
        per.append(block)
        return access(self, pid, operands, name, block)

    def finishing(self, complete):
        if self.cheap is not None:
            logged.append(len(self.gmlog))
        return finish(self, complete)

    monkeypatch.setattr(race.RaceChecker, "access", counting)
    monkeypatch.setattr(race.RaceChecker, "finish", finishing)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((512, 512)).astype(np.float16), rng.standard_normal((512, 256)).astype(np.float16)
    res = simulate(parse(matmul_ir(512, 256, 512, block_dim=4)), None, {"a": a, "b": b}, HW)
    assert np.allclose(res.outputs["c"], a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-1)
    assert per and set(per) == {0} and len(logged) == 3 and min(logged) > 0


def _woken(monkeypatch) -> list[int]:
    """The blocks that wake from cheap mode (race.py `_wake`), in order, from now on."""
    woke: list[int] = []
    wake = race.RaceChecker._wake

    def waking(self, v):
        woke.append(self.block)
        return wake(self, v)

    monkeypatch.setattr(race.RaceChecker, "_wake", waking)
    return woke


def test_a_woken_block_checks_what_it_logged(monkeypatch):
    # the fallback: a block whose decisions differ from block 0's mid-way is followed (checked)
    # from there, its GM operands logged so far given to the check first: same verdict when the
    # write of the race was logged before the decision that differs and the read comes after
    text = _module(ALIAS, aliased=True).replace(
        "    ascend.copy %xs, %ub : ",
        "    %c0i = arith.constant 0 : index\n    %first = arith.cmpi eq, %bid, %c0i : index\n"
        "    scf.if %first {\n    }\n    ascend.copy %xs, %ub : ")
    woke = _woken(monkeypatch)
    full, cheap = _full_and_cheap(monkeypatch, text)
    assert "(block 1)" in full and cheap == full and woke == [1]


def test_a_block_followed_to_its_end_is_followed_cheaply(monkeypatch):
    # block 0 takes a branch the others skip (the same events either way: a fused Q / K / V GEMM
    # picks its weights so): block 1 wakes and follows block 0 to its end; blocks 2 and 3 decide
    # as block 1 did and run cheap behind it instead of waking each. Same verdict as the full check
    text = matmul_ir(512, 256, 512, block_dim=4).replace(
        "    %bid = ascend.block_idx : index\n",
        "    %bid = ascend.block_idx : index\n    %first = arith.cmpi eq, %bid, %c0 : index\n    scf.if %first {\n    }\n")
    woke = _woken(monkeypatch)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((512, 512)).astype(np.float16), rng.standard_normal((512, 256)).astype(np.float16)
    res = simulate(parse(text), None, {"a": a, "b": b}, HW)
    assert woke == [1]
    assert np.allclose(res.outputs["c"], a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-1)
    full, cheap = _full_and_followed(monkeypatch, text, {"a": a, "b": b})
    assert full == cheap == "ok"


def test_a_block_with_fewer_tiles_follows_cheaply_to_its_loop_end(monkeypatch):
    # 8 output tiles over 3 blocks: blocks 0 and 1 take 3, block 2 takes 2. Each iteration is a
    # decision (scf_ops.py `_iteration_decided`), so block 2 keeps block 0's through its two tiles
    # and wakes only where its tile loop ends (decided by the trip count at the loop's start, it
    # woke there and was followed op by op). Same verdict as the full check
    text = matmul_ir(512, 256, 512, block_dim=3)
    woke: list = []
    wake = race.RaceChecker._wake

    def waking(self, v):
        woke.append((self.block, self.nctl, len(self.cheap_ctl)))
        return wake(self, v)

    monkeypatch.setattr(race.RaceChecker, "_wake", waking)
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((512, 512)).astype(np.float16), rng.standard_normal((512, 256)).astype(np.float16)
    res = simulate(parse(text), None, {"a": a, "b": b}, HW)
    (block, at, of), = woke
    assert block == 2 and 0.5 < at / of < 1, woke
    assert np.allclose(res.outputs["c"], a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-1)
    full, cheap = _full_and_followed(monkeypatch, text, {"a": a, "b": b})
    assert full == cheap == "ok"
