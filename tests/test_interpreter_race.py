"""Race detection (interpreter/check/race.py): two pipes touching overlapping elements of a buffer, one
writing, with no set/wait flag pair or barrier ordering them, is an error naming the kernel, the
buffer, both ops and both pipes; the correctly synchronised generators run clean."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import add_ir, matmul_ir, parse

HW = load_target("ascend910b2")


def _drop(text: str, line: str) -> str:
    """`text` without the first line whose stripped form equals `line`."""
    lines = text.splitlines()
    i = next(i for i, x in enumerate(lines) if x.strip() == line)
    return "\n".join(lines[:i] + lines[i + 1:])


@pytest.mark.parametrize("timing_only", [True, False])
def test_missing_wait_before_consumer_is_a_race(timing_only):
    # the vadd no longer waits for MTE2 to have filled its inputs (RAW)
    text = _drop(add_ir(256, 64, 16, block_dim=2, nbuf=1), "ascend.wait_flag MTE2 -> V, 0")
    with pytest.raises(AscendirError, match=r"race in kernel @add .*ub buffer %ux0 #1 .*ascend.copy on MTE2 and ascend.vadd on V .*write / read"):
        simulate(parse(text), None, {}, HW, timing_only=True, check_races=True) if timing_only else simulate(
            parse(text), None, {"x": __import__("numpy").zeros((256, 64), "float16"), "y": __import__("numpy").zeros((256, 64), "float16")}, HW)


def test_ping_pong_buffer_reused_too_early_is_a_war_race():
    # MTE2 refills ping-pong slot 0 without waiting for MTE3 to have drained the slot's previous
    # tile: the vadd of two tiles ago still reads it (write-after-read)
    text = add_ir(1024, 64, 16, block_dim=2, nbuf=2)
    text = _drop(text, "ascend.wait_flag MTE3 -> MTE2, 0")
    with pytest.raises(AscendirError, match=r"race in kernel @add \(block \d+\): buffer ub buffer %ux0 #1 .*on V and ascend.copy on MTE2 .*read / write"):
        simulate(parse(text), None, {}, HW, timing_only=True, check_races=True)


def test_missing_flag_in_matmul_pipeline_is_a_race():
    # mmad no longer waits for MTE1 to have loaded L0A/L0B slot 0
    text = _drop(matmul_ir(256, 256, 512, block_dim=2), "ascend.wait_flag MTE1 -> M, 0")
    with pytest.raises(AscendirError, match=r"race in kernel @matmul .*l0a buffer .*ascend.copy on MTE1 and ascend.mmad on M"):
        simulate(parse(text), None, {}, HW, timing_only=True, check_races=True)


@pytest.mark.parametrize("nbuf", [1, 2])
def test_synchronised_generators_are_race_free(nbuf):
    simulate(parse(add_ir(1024, 64, 16, block_dim=2, nbuf=nbuf)), None, {}, HW, timing_only=True, check_races=True)
    simulate(parse(matmul_ir(300, 260, 700, block_dim=3, nbuf=nbuf)), None, {}, HW, timing_only=True, check_races=True)


def test_timing_only_checks_races_when_asked():
    text = _drop(add_ir(256, 64, 16, block_dim=2, nbuf=1), "ascend.wait_flag MTE2 -> V, 0")
    simulate(parse(text), None, {}, HW, timing_only=True)  # a sweep does not pay for the check
    with pytest.raises(AscendirError, match="race in kernel @add"):
        simulate(parse(text), None, {}, HW, timing_only=True, check_races=True)


def test_cli_check_races_flag(tmp_path):
    from cli_helpers import assert_clean_error, run_cli

    p = tmp_path / "racy.mlir"
    p.write_text(_drop(add_ir(256, 64, 16, block_dim=2, nbuf=1), "ascend.wait_flag MTE2 -> V, 0"))
    assert run_cli("run", p, "--timing-only").exit_code == 0
    assert_clean_error(run_cli("run", p, "--timing-only", "--check-races"), "race in kernel @add")


# -- planned buffers: the race check compares the bytes buffers occupy, not buffer identity ---------
ADD_LOOP = Path(__file__).parent / "filecheck" / "insert-sync" / "add_loop.mlir"


def _planned_add_loop() -> str:
    """tests/filecheck/insert-sync/add_loop.mlir's single-buffered add with a host @main, after
    double-buffer, insert-sync and plan-memory (slot 1 of %ux planned at UB offset 16384)."""
    from xdsl.context import Context

    from ascendir.transforms.ascend.double_buffer import DoubleBuffer
    from ascendir.transforms.ascend.insert_sync import InsertSync
    from ascendir.transforms.ascend.plan_memory import PlanMemory

    text = ADD_LOOP.read_text()
    text = text[text.index("builtin.module"):].rstrip()
    t = "memref<256x128xf16, #ascend<space gm>>"
    main = (
        f'  func.func @main(%x: {t} {{onnx.name = "x"}}, %y: {t} {{onnx.name = "y"}}) -> ({t} {{onnx.name = "z"}}) {{\n'
        f"    %z = ascend.alloc : {t}\n    ascend.launch @add(%x, %y, %z) : {t}, {t}, {t}\n    func.return %z : {t}\n  }}\n}}\n"
    )
    module = parse(text[:-1] + main)
    for p in (DoubleBuffer(), InsertSync(), PlanMemory()):
        p.apply(Context(), module)
    return str(module)


SLOT1 = "{ascend.slot = 1 : i64, offset = 16384 : i64}"


@pytest.fixture(scope="module")
def planned_add() -> str:
    text = _planned_add_loop()
    assert text.count(SLOT1) == 1, text  # the ping-pong twin of %ux, 16 KiB after slot 0
    return text


def _xy():
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal((256, 128)).astype(np.float16) for k in ("x", "y")}


def test_planned_ping_pong_is_race_free(planned_add):
    simulate(parse(planned_add), None, {}, HW, timing_only=True, check_races=True)
    out = simulate(parse(planned_add), None, _xy(), HW).outputs["z"]
    np.testing.assert_array_equal(out, _xy()["x"] + _xy()["y"])


@pytest.mark.parametrize("timing_only", [True, False])
def test_two_slots_planned_onto_the_same_bytes_race(planned_add, timing_only):
    # slot 1 of the ping-pong input buffer moved onto slot 0's UB bytes: MTE2 loads tile i+1 over
    # tile i while V still reads it. The interpreter keeps the two arrays apart (its output would
    # be exact), so only comparing physical bytes finds it.
    text = planned_add.replace(SLOT1, "{ascend.slot = 1 : i64, offset = 0 : i64}")
    # buffers named by their SSA names (the slot-1 twin keeps its original's) and slots
    match = (r"race in kernel @add \(block 0\): buffers ub buffer %ux #1 \(slot 0\) 64x128xfloat16 \(bytes 0\.\.16383 of ub\) and "
             r"ub buffer %ux #2 \(slot 1\) 64x128xfloat16 \(bytes 0\.\.16383 of ub\) share bytes: .* touch overlapping bytes")
    with pytest.raises(AscendirError, match=match):
        if timing_only:
            simulate(parse(text), None, {}, HW, timing_only=True, check_races=True)
        else:
            simulate(parse(text), None, _xy(), HW)


def test_planned_buffers_apart_in_bytes_do_not_race(planned_add):
    # the same slot moved elsewhere, clear of every other buffer (UB is 192 KiB, plan uses 96 KiB)
    simulate(parse(planned_add.replace(SLOT1, "{ascend.slot = 1 : i64, offset = 131072 : i64}")), None, {}, HW,
             timing_only=True, check_races=True)


def test_cli_misaligned_offset_is_a_clean_error(planned_add, tmp_path):
    from cli_helpers import assert_clean_error, run_cli

    p = tmp_path / "mis.mlir"
    p.write_text(planned_add.replace(SLOT1, "{ascend.slot = 1 : i64, offset = 65537 : i64}"))
    assert_clean_error(run_cli("run", p, "--timing-only"), "kernel @add", "ub buffer 64x128xf16 at offset = 65537",
                       "aligned to 32 B")


def _counting_data_walks(monkeypatch) -> list[str]:
    """Names of the kernels whose data walk (sim/kernel.py `_data_walk`) runs, in order."""
    from ascendir.interpreter.sim import kernel

    walks: list[str] = []
    orig = kernel.KernelProgram._data_walk

    def data_walk(self, *a):
        walks.append(self.name)
        return orig(self, *a)

    monkeypatch.setattr(kernel.KernelProgram, "_data_walk", data_walk)
    return walks


def test_numerics_checks_races_in_the_data_walk(monkeypatch):
    # a numerics launch is timed by its timing-only twin, which does not check; its data walk runs
    # every op and checks: the mmad that no longer waits for MTE1 is caught there
    text = _drop(matmul_ir(256, 256, 512, block_dim=2), "ascend.wait_flag MTE1 -> M, 0")
    walks = _counting_data_walks(monkeypatch)
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((256, 512)).astype(np.float16), "b": rng.standard_normal((512, 256)).astype(np.float16)}
    with pytest.raises(AscendirError, match=r"race in kernel @matmul .*l0a buffer .*ascend.copy on MTE1 and ascend.mmad on M"):
        simulate(parse(text), None, feeds, HW)
    assert walks == ["matmul"]


def test_numerics_checks_races_in_a_lowered_layer(monkeypatch):
    # the 7B-shaped decoder layer of benchmarks/fusion.py at small sizes, lowered at -O2: its first
    # kernel with an MTE1 -> M wait (a mix GEMM whose AIC waits on later AIV sets: held pipes)
    # loses that wait; the numerics run stops at that kernel's data walk with the race
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fusion
    import interpreter_speed
    import numerics_speed

    for name, v in (("H", 64), ("HEADS", 2), ("D", 32), ("MLP", 128)):
        monkeypatch.setattr(fusion, name, v)
    module, _ = interpreter_speed.lowered(interpreter_speed.model_text(1, 16), HW)
    weights = numerics_speed.random_weights(module)
    x = np.random.default_rng(3).standard_normal((1, 16, 64)).astype(np.float16)
    simulate(module, weights, {"arg0": x}, HW)  # as lowered: race-free
    broken = parse(_drop(str(module), "ascend.wait_flag MTE1 -> M, 0"))
    walks = _counting_data_walks(monkeypatch)
    with pytest.raises(AscendirError, match=r"race in kernel @(\w+) .*ascend.copy on (aic\.)?MTE1 and ascend.mmad on (aic\.)?M") as e:
        with np.errstate(all="ignore"):
            simulate(broken, weights, {"arg0": x}, HW)
    assert walks and walks[-1] == e.value.args[0].split("@")[1].split(" ")[0]


# -- blocks that repeat a checked block follow it (race.py `RaceChecker.follow`) ------------------
# Each verdict and message is the full check's (`follow` False: every operand of every block).
G = "memref<256x64xf16, #ascend<space gm>>"
G_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space gm>>"
U_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space ub>>"
U_SLOTS = "memref<128x64xf16, #ascend<space ub>>"
U = "memref<16x64xf16, #ascend<space ub>>"
MAIN_XZ = f'''  func.func @main(%x: {G} {{onnx.name = "x"}}) -> ({G} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {G}
    ascend.launch @k(%x, %z) : {G}, {G}
    func.return %z : {G}
  }}
}}'''
KERNEL = "ascend.kernel @k(%x: {G}, %z: {G}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}}"

# z = x + x with no flag ordering MTE3 before the next MTE2: block 0 puts each of its 8 tiles in
# UB slots of its own (race-free), block 1 reuses slot 0 for its 2 tiles (MTE2 refills what V of
# the first tile read): their accesses differ first in an on-chip offset, at that refill, and
# every race of block 1 is with an access made before
SLOTS = f'''builtin.module {{
  {KERNEL.format(G=G)} {{
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %c12 = arith.constant 12 : index
    %c16 = arith.constant 16 : index
    %bid = ascend.block_idx : index
    %ux = ascend.alloc : {U_SLOTS}
    %uz = ascend.alloc : {U_SLOTS}
    %first = arith.subi %c1, %bid : index
    %short = arith.muli %bid, %c12 : index
    %end = arith.subi %c16, %short : index
    scf.for %t = %bid to %end step %c2 {{
      %r0 = arith.muli %t, %c16 : index
      %s = arith.muli %t, %first : index
      %o = arith.muli %s, %c8 : index
      %xs = memref.subview %x[%r0, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      %ut = memref.subview %ux[%o, 0] [16, 64] [1, 1] : {U_SLOTS} to {U_TILE}
      %vt = memref.subview %uz[%o, 0] [16, 64] [1, 1] : {U_SLOTS} to {U_TILE}
      ascend.copy %xs, %ut : {G_TILE}, {U_TILE}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.vadd %ut, %ut, %vt : {U_TILE}, {U_TILE}, {U_TILE}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      %zs = memref.subview %z[%r0, 0] [16, 64] [1, 1] : {G} to {G_TILE}
      ascend.copy %vt, %zs : {U_TILE}, {G_TILE}
    }}
    ascend.return
  }}
{MAIN_XZ}'''

# MTE3 writes rows 16 (block + 1) of z, then MTE2 reads rows 32 of z with no flag after the write:
# the blocks' on-chip accesses and clocks are the same, and only block 1's GM ranges overlap
GM_ROWS = f'''builtin.module {{
  {KERNEL.format(G=G)} {{
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %bid = ascend.block_idx : index
    %ua = ascend.alloc : {U}
    %ub = ascend.alloc : {U}
    %uc = ascend.alloc : {U}
    %b1 = arith.addi %bid, %c1 : index
    %rw = arith.muli %b1, %c16 : index
    %xs = memref.subview %x[%rw, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %xs, %ua : {G_TILE}, {U}
    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.vadd %ua, %ua, %uc : {U}, {U}, {U}
    ascend.set_flag V -> MTE3, 0
    ascend.wait_flag V -> MTE3, 0
    %zw = memref.subview %z[%rw, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %uc, %zw : {U}, {G_TILE}
    %zr = memref.subview %z[%c32, 0] [16, 64] [1, 1] : {G} to {G_TILE}
    ascend.copy %zr, %ub : {G_TILE}, {U}
    ascend.return
  }}
{MAIN_XZ}'''


def _wait_in_block_0_only() -> str:
    """add_ir's kernel whose V waits for MTE2's tile in block 0 only: block 1 has the accesses of
    block 0 (but GM offsets) under other clocks."""
    text = add_ir(256, 64, 16, block_dim=2, nbuf=1)
    out = text.replace("    %bid = ascend.block_idx : index\n", "    %bid = ascend.block_idx : index\n    %c0i = arith.constant 0 : index\n"
                       "    %first = arith.cmpi eq, %bid, %c0i : index\n").replace(
        "      ascend.wait_flag MTE2 -> V, 0\n", "      scf.if %first {\n        ascend.wait_flag MTE2 -> V, 0\n      }\n")
    assert out.count("scf.if %first") == 1
    return out


def _verdict(text: str, feeds: dict | None, timing_only: bool = False) -> str:
    """The race error's message of a run of `text` ("ok": none)."""
    try:
        with np.errstate(all="ignore"):
            simulate(parse(text), None, feeds or {}, HW, timing_only=timing_only, check_races=True if timing_only else None)
    except AscendirError as e:
        return str(e)
    return "ok"


def _full_and_followed(monkeypatch, text: str, feeds: dict | None, timing_only: bool = False) -> tuple[str, str]:
    from ascendir.interpreter.check.race import RaceChecker

    with monkeypatch.context() as m:
        m.setattr(RaceChecker, "follow", False)
        full = _verdict(text, feeds, timing_only)
    return full, _verdict(text, feeds, timing_only)


@pytest.mark.parametrize("timing_only", [True, False])
@pytest.mark.parametrize("kernel, feeds, match", [
    (SLOTS, "x", r"\(block 1\): buffer ub buffer %ux #1 128x64xfloat16: ascend.vadd on V and ascend.copy on MTE2 .*\(read / write\)"),
    (GM_ROWS, "x", r"\(block 1\): buffer GM buffer #\d+: ascend.copy on MTE3 and ascend.copy on MTE2 .*\(write / read\)"),
    (_wait_in_block_0_only(), "xy", r"\(block 1\): buffer ub buffer %ux0 #1 16x64xfloat16: ascend.copy on MTE2 and ascend.vadd on V .*\(write / read\)"),
], ids=["on-chip offset", "GM offset", "clocks"])
def test_a_race_of_a_later_block_only_is_caught(monkeypatch, timing_only, kernel, feeds, match):
    # block 0 is race-free; block 1 differs from it in an on-chip offset, a GM offset or a wait,
    # and races: a block following block 0 past that difference would miss it
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float16)
    full, followed = _full_and_followed(monkeypatch, kernel, None if timing_only else {k: x for k in feeds}, timing_only)
    assert re.search(match, full), full
    assert followed == full


def test_race_free_later_blocks_follow_the_first(monkeypatch):
    # the shortcut is taken: a race-free kernel's later blocks check none of their operands in
    # full (their GM operands: only while one pipe, or only reads, touch a buffer)
    from ascendir.interpreter.check.race import RaceChecker

    checked: list[int] = []
    orig = RaceChecker._check

    def count(self, pid, vc, operands, name, block):
        checked.append(block)
        return orig(self, pid, vc, operands, name, block)

    monkeypatch.setattr(RaceChecker, "_check", count)
    text = matmul_ir(512, 256, 512, block_dim=4)
    full, followed = _full_and_followed(monkeypatch, text, None, timing_only=True)
    assert full == followed == "ok"
    n = len(checked) // 5
    assert n > 0 and checked == [0] * n + [1] * n + [2] * n + [3] * n + [0] * n


def _in_block_0_only(text: str, line: int) -> str:
    """`text` with its `line`-th line (a sync op of the kernel) run by block 0 only."""
    lines = text.splitlines()
    bid = next(i for i, x in enumerate(lines) if x.strip() == "%bid = ascend.block_idx : index")
    ind = lines[line][:len(lines[line]) - len(lines[line].lstrip())]
    lines[line] = f"{ind}scf.if %first {{\n{ind}  {lines[line].strip()}\n{ind}}}"
    lines[bid] += "\n    %c0i = arith.constant 0 : index\n    %first = arith.cmpi eq, %bid, %c0i : index"
    return "\n".join(lines)


@pytest.mark.sampled
def test_seeded_flag_deletions_give_the_full_checks_verdicts(monkeypatch):
    # seeded sync ops of the generators (4 and 3 blocks) dropped (races and deadlocks in every
    # block, as test_data_walk_equivalence.py's mutants) or run by block 0 only (block 0 clean,
    # the later blocks racing where following block 0 would not see it), numerics and timing-only
    rng = np.random.default_rng(5)
    cases = [
        (matmul_ir(512, 256, 512, block_dim=4, nbuf=2),
         {"a": rng.standard_normal((512, 512)).astype(np.float16), "b": rng.standard_normal((512, 256)).astype(np.float16)}),
        (add_ir(1024, 64, 16, block_dim=3, nbuf=2),
         {"x": rng.standard_normal((1024, 64)).astype(np.float16), "y": rng.standard_normal((1024, 64)).astype(np.float16)}),
    ]
    sync = ("ascend.set_flag ", "ascend.wait_flag ", "ascend.pipe_barrier")
    verdicts = []
    for text, feeds in cases:
        lines = text.splitlines()
        picked = np.random.default_rng(7).permutation([i for i, x in enumerate(lines) if x.strip().startswith(sync)])[:10]
        for i in sorted(picked):
            for what, mutant in ((f"line {i + 1} dropped", "\n".join(lines[:i] + lines[i + 1:])),
                                 (f"line {i + 1} in block 0 only", _in_block_0_only(text, i))):
                for timing_only in (False, True):
                    full, followed = _full_and_followed(monkeypatch, mutant, None if timing_only else feeds, timing_only)
                    assert followed == full, (what, timing_only)
                    verdicts.append(full)
    later = [v for v in verdicts if re.match(r"race in kernel @\w+ \(block [1-9]", v)]
    assert len(later) >= 4 and any(v.startswith("race in kernel") and v not in later for v in verdicts) and "ok" in verdicts


def test_race_names_the_oldest_unordered_access_it_meets():
    # pipe 0 writes two overlapping ranges of one GM buffer, then pipe 1 reads over both, with no
    # sync: both writes race with the read; the check reports the older one (as made, oldest first)
    from ascendir.interpreter.check.race import RaceChecker

    rc = RaceChecker("k", ["P0", "P1"])
    rc.reset(0)
    x = ("input", "x")
    rc.access(0, [((x, 0, (16, 1)), (2, 16), True)], "first_write", 0)
    rc.access(0, [((x, 16, (16, 1)), (2, 16), True)], "second_write", 0)
    with pytest.raises(AscendirError, match=r"first_write on P0 and the_read on P1 .*write / read"):
        rc.access(1, [((x, 0, (16, 1)), (4, 16), False)], "the_read", 0)


@pytest.mark.parametrize("timing_only", [True, False])
def test_a_wait_on_the_scalar_unit_orders_every_later_op(timing_only):
    """wait_flag(MTE2 -> S) holds the scalar unit, which issues every later op of the core: the
    vadd after it follows the copies before the set (no race), where a wait on a pipe it does
    not issue on would not order it."""
    base = add_ir(256, 64, 16, block_dim=2, nbuf=1)
    on_s = base.replace("ascend.set_flag MTE2 -> V, 0", "ascend.set_flag MTE2 -> S, 0").replace(
        "ascend.wait_flag MTE2 -> V, 0", "ascend.wait_flag MTE2 -> S, 0")
    on_mte3 = base.replace("ascend.set_flag MTE2 -> V, 0", "ascend.set_flag MTE2 -> MTE3, 1").replace(
        "ascend.wait_flag MTE2 -> V, 0", "ascend.wait_flag MTE2 -> MTE3, 1")
    x, y = (np.random.default_rng(i).standard_normal((256, 64)).astype("float16") for i in (0, 1))

    def run(text):
        if timing_only:
            return simulate(parse(text), None, {}, HW, timing_only=True, check_races=True)
        return simulate(parse(text), None, {"x": x, "y": y}, HW)

    res = run(on_s)
    if not timing_only:
        np.testing.assert_array_equal(res.outputs["z"], x + y)
    with pytest.raises(AscendirError, match=r"race in kernel @add .*ascend.copy on MTE2 and ascend.vadd on V"):
        run(on_mte3)


_HELD = """builtin.module attributes {ascend.arch = #ascend.arch<"dav-c220">} {
  ascend.kernel @k(%x: memref<16x16xf16, #ascend<space gm>>, %g: memref<16x16xf16, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<mix>} {
    %l1 = ascend.alloc : memref<16x16xf16, #ascend<space l1>>
    %ub = ascend.alloc : memref<16x16xf16, #ascend<space ub>>
    ascend.copy %x, %ub : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space ub>>
    ascend.set_flag MTE2 -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
    ascend.wait_flag MTE2 -> MTE3, 0 {units = #ascend.flag_units<aiv -> aiv>}
    ascend.wait_flag V -> MTE2, 1 {units = #ascend.flag_units<aiv -> aic>}
    BEFORE
    ascend.copy %ub, %g : memref<16x16xf16, #ascend<space ub>>, memref<16x16xf16, #ascend<space gm>>
    ascend.set_flag MTE3 -> S, 0 {units = #ascend.flag_units<aiv -> aic>}
    ascend.wait_flag MTE3 -> S, 0 {units = #ascend.flag_units<aiv -> aic>}
    AFTER
    ascend.set_flag V -> MTE2, 1 {units = #ascend.flag_units<aiv -> aic>}
    ascend.return
  }
  func.func @main(%x: memref<16x16xf16, #ascend<space gm>> {onnx.name = "x"}) -> (memref<16x16xf16, #ascend<space gm>> {onnx.name = "g"}) {
    %g = ascend.alloc : memref<16x16xf16, #ascend<space gm>>
    ascend.launch @k(%x, %g) : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space gm>>
    func.return %g : memref<16x16xf16, #ascend<space gm>>
  }
}"""


@pytest.mark.parametrize("timing_only", [True, False])
def test_a_wait_on_s_does_not_order_what_a_held_pipe_queued_before_it(timing_only):
    """The AIC's MTE2 is held by a wait on the AIV's V (set last); its read of %g queued there
    before the AIC's wait on S is released by V alone, which follows nothing of the AIV's MTE3
    write of %g: a race, though the S wait (after the write's set) is reached before the release.
    Issued after the S wait, the same read follows the write: no race."""
    read = "ascend.copy %g, %l1 : memref<16x16xf16, #ascend<space gm>>, memref<16x16xf16, #ascend<space l1>>"

    def run(text):
        if timing_only:
            return simulate(parse(text), None, {}, HW, timing_only=True, check_races=True)
        return simulate(parse(text), None, {"x": np.ones((16, 16), "float16")}, HW)

    run(_HELD.replace("BEFORE", "").replace("AFTER", read))
    with pytest.raises(AscendirError, match=r"race in kernel @k .*ascend.copy on aiv.MTE3 and ascend.copy on aic.MTE2 .*write / read"):
        run(_HELD.replace("BEFORE", read).replace("AFTER", ""))
