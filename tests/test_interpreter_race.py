"""Race detection (interpreter/check/race.py): two pipes touching overlapping elements of a buffer, one
writing, with no set/wait flag pair or barrier ordering them, is an error naming the kernel, the
buffer, both ops and both pipes; the correctly synchronised generators run clean."""

from __future__ import annotations

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
