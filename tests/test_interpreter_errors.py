"""The interpreter reports bad programs instead of hanging or computing garbage: deadlocks,
buffer capacity overflow, out-of-bounds subviews, unsupported ops, missing inputs."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import matmul_ir, parse

HW = load_target("ascend910b2")


def gm(shape, dt="f32"):
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space gm>>"


def kernel(body: str, allocs: str = "", core_type: str = "aiv", shape=(8, 32)) -> str:
    return f"""
builtin.module {{
  ascend.kernel @bad(%x: {gm(shape)}, %y: {gm(shape)}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<{core_type}>}} {{
{allocs}
{body}
    ascend.return
  }}
  func.func @main(%x: {gm(shape)}) -> {gm(shape)} {{
    %y = ascend.alloc : {gm(shape)}
    ascend.launch @bad(%x, %y) : {gm(shape)}, {gm(shape)}
    func.return %y : {gm(shape)}
  }}
}}
"""


UB = "memref<8x32xf32, #ascend<space ub>>"


def test_wait_without_set_is_a_deadlock():
    text = kernel(
        f"""    ascend.copy %x, %t : {gm((8, 32))}, {UB}
    ascend.wait_flag MTE2 -> V, 3
    ascend.vexp %t, %t : {UB}, {UB}""",
        f"    %t = ascend.alloc : {UB}",
    )
    for timing_only in (False, True):
        with pytest.raises(AscendirError, match=r"deadlock in kernel @bad.*wait_flag MTE2 -> V, 3 never returns: "
                                                r"the kernel has no ascend.set_flag MTE2 -> V, 3"):
            simulate(parse(text), None, {"arg0": np.zeros((8, 32), np.float32)}, HW, timing_only=timing_only)


def test_second_wait_for_one_set_is_a_deadlock():
    text = kernel(
        """    ascend.set_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0
    ascend.wait_flag MTE2 -> V, 0"""
    )
    with pytest.raises(AscendirError, match=r"deadlock in kernel @bad \(block 0\): ascend.wait_flag MTE2 -> V, 0 never "
                                            r"returns: no matching ascend.set_flag MTE2 -> V, 0 runs after it"):
        simulate(parse(text), None, {}, HW, timing_only=True)


def test_scalar_wait_before_its_set_is_a_deadlock():
    # a wait blocks only its destination pipe, but that is the scalar unit here: it would have
    # to issue the set that comes after the wait
    text = kernel(
        f"""    ascend.wait_flag MTE2 -> S, 0
    ascend.copy %x, %t : {gm((8, 32))}, {UB}
    ascend.set_flag MTE2 -> S, 0""",
        f"    %t = ascend.alloc : {UB}",
    )
    with pytest.raises(AscendirError, match=r"deadlock in kernel @bad \(block 0\): ascend.wait_flag MTE2 -> S, 0 has no "
                                            r"earlier matching ascend.set_flag MTE2 -> S, 0: it stalls the scalar unit"):
        simulate(parse(text), None, {}, HW, timing_only=True)


def test_scalar_wait_before_another_units_set_is_unsupported_not_a_deadlock():
    """The AIC waits on S for the AIV's MTE3 set, written later: legal on the chip (the AIV issues
    its own stream), so not a deadlock, but the interpreter cannot stop the AIC alone there; the
    error says so, and the same wait on the AIC's MTE2 (a held pipe) runs."""
    mem = "memref<16x16xf16, #ascend<space gm>>"
    text = f"""builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">}} {{
  ascend.kernel @k(%x: {mem}, %g: {mem}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<mix>}} {{
    %l1 = ascend.alloc : memref<16x16xf16, #ascend<space l1>>
    %ub = ascend.alloc : memref<16x16xf16, #ascend<space ub>>
    ascend.wait_flag MTE3 -> DST, 0 {{units = #ascend.flag_units<aiv -> aic>}}
    ascend.copy %g, %l1 : {mem}, memref<16x16xf16, #ascend<space l1>>
    ascend.copy %x, %ub : {mem}, memref<16x16xf16, #ascend<space ub>>
    ascend.set_flag MTE2 -> MTE3, 0 {{units = #ascend.flag_units<aiv -> aiv>}}
    ascend.wait_flag MTE2 -> MTE3, 0 {{units = #ascend.flag_units<aiv -> aiv>}}
    ascend.copy %ub, %g : memref<16x16xf16, #ascend<space ub>>, {mem}
    ascend.set_flag MTE3 -> DST, 0 {{units = #ascend.flag_units<aiv -> aic>}}
    ascend.return
  }}
  func.func @main(%x: {mem} {{onnx.name = "x"}}) -> ({mem} {{onnx.name = "g"}}) {{
    %g = ascend.alloc : {mem}
    ascend.launch @k(%x, %g) : {mem}, {mem}
    func.return %g : {mem}
  }}
}}"""
    simulate(parse(text.replace("DST", "MTE2")), None, {}, HW, timing_only=True, check_races=True)
    with pytest.raises(AscendirError, match=r"unsupported in kernel @k \(block 0\): ascend.wait_flag MTE3 -> S, 0 waits "
                                            r"on S for a set of another unit that comes later in program order"):
        simulate(parse(text.replace("DST", "S")), None, {}, HW, timing_only=True)


def test_barrier_all_while_a_pipe_waits_for_a_later_set_is_a_deadlock():
    # without the barrier V would be released by the set; PIPE_ALL makes the scalar unit wait for
    # V first, so the set is never issued
    body = f"""    ascend.wait_flag MTE2 -> V, 0
    ascend.vexp %t, %t : {UB}, {UB}
{{barrier}}    ascend.copy %x, %t : {gm((8, 32))}, {UB}
    ascend.set_flag MTE2 -> V, 0"""
    ok = kernel(body.format(barrier=""), f"    %t = ascend.alloc : {UB}")
    simulate(parse(ok), None, {}, HW, timing_only=True)
    bad = kernel(body.format(barrier='    ascend.pipe_barrier ALL\n'), f"    %t = ascend.alloc : {UB}")
    with pytest.raises(AscendirError, match=r"deadlock in kernel @bad \(block 0\): ascend.wait_flag MTE2 -> V, 0 never "
                                            r"returns: ascend.pipe_barrier ALL waits for"):
        simulate(parse(bad), None, {}, HW, timing_only=True)


def test_flags_with_other_event_ids_do_not_match():
    text = kernel("""    ascend.set_flag MTE2 -> V, 1
    ascend.wait_flag MTE2 -> V, 2""")
    with pytest.raises(AscendirError, match="deadlock"):
        simulate(parse(text), None, {}, HW, timing_only=True)


def test_capacity_overflow_names_space_and_bytes():
    big = "memref<256x256xf16, #ascend<space l0a>>"
    text = kernel("", f"    %a = ascend.alloc : {big}\n    %b = ascend.alloc : {big}", core_type="aic")
    # each 128 KiB buffer alone overflows the 64 KiB L0A: plan-memory's error (the buffer, bytes
    # needed vs available, the largest tile that fits), not just a sum over every alloc
    with pytest.raises(AscendirError, match=r"kernel @bad: L0A buffer 256x256xf16 \(131072 B\) does not fit: 131072 B of L0A "
                                            r"needed, 65536 B available on ascend910b2; largest tile that fits: 128x256xf16$"):
        simulate(parse(text), None, {}, HW, timing_only=True)


def test_capacity_counts_alignment():
    # 2 x 48 KiB UB fit in 192 KiB; 4 fit exactly; 5 do not
    four = "\n".join(f"    %u{i} = ascend.alloc : memref<12288xf32, #ascend<space ub>>" for i in range(4))
    simulate(parse(kernel("", four)), None, {}, HW, timing_only=True)
    five = four + "\n    %u9 = ascend.alloc : memref<1xf32, #ascend<space ub>>"
    with pytest.raises(AscendirError, match="ub buffers need 196640 bytes"):
        simulate(parse(kernel("", five)), None, {}, HW, timing_only=True)


def test_buffer_space_missing_on_target():
    text = kernel("", "    %b = ascend.alloc : memref<1x16xf32, #ascend<space bt>>", core_type="aic")
    with pytest.raises(AscendirError, match="ascend910a has no bt buffer"):
        simulate(parse(text), None, {}, load_target("910a"), timing_only=True)


def test_fixpipe_path_missing_on_910a():
    with pytest.raises(AscendirError, match="l0c -> gm: no such DMA path on ascend910a"):
        simulate(parse(matmul_ir(32, 32, 32, tm=32, tn=32, tk=32)), None, {}, load_target("910a"), timing_only=True)


def test_subview_out_of_bounds():
    dyn = "memref<?x?xf32, strided<[32, 1], offset: ?>, #ascend<space gm>>"
    text = kernel(
        f"""    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %bid = ascend.block_idx : index
    %o = arith.muli %bid, %c8 : index
    %s = memref.subview %x[%o, 0] [%c4, 32] [1, 1] : {gm((8, 32))} to {dyn}""",
    )
    with pytest.raises(AscendirError, match="memref.subview in kernel @bad: out of bounds on dim 0: offset 8, size 4"):
        simulate(parse(text), None, {}, HW, timing_only=True)


def test_missing_and_misshaped_inputs():
    text = kernel("")
    with pytest.raises(AscendirError, match="missing input 'arg0'"):
        simulate(parse(text), None, {}, HW)
    with pytest.raises(AscendirError, match=r"input 'arg0' has shape \(3, 3\)"):
        simulate(parse(text), None, {"arg0": np.zeros((3, 3))}, HW)


def test_missing_weight():
    text = f"""
builtin.module {{
  func.func @main() -> {gm((2, 2))} {{
    %w = ascend.weight @nope : {gm((2, 2))}
    func.return %w : {gm((2, 2))}
  }}
}}
"""
    with pytest.raises(AscendirError, match="ascend.weight @nope: not in the WeightStore"):
        simulate(parse(text), None, {}, HW)
    out = simulate(parse(text), None, {}, HW, timing_only=True).outputs["out0"]  # timing-only reads no weights
    assert out.shape == (2, 2)


def test_unsupported_op_and_missing_main():
    text = """
builtin.module {
  func.func @main(%a: memref<4xf32, #ascend<space gm>>) -> memref<4xf32, #ascend<space gm>> {
    %b = memref.alloc() : memref<4xf32, #ascend<space gm>>
    func.return %b : memref<4xf32, #ascend<space gm>>
  }
}
"""
    with pytest.raises(AscendirError, match="memref.alloc in the host function: the interpreter does not support this op"):
        simulate(parse(text), None, {}, HW, timing_only=True)
    with pytest.raises(AscendirError, match="no func.func @main"):
        simulate(parse("builtin.module {}"), None, {}, HW)


@pytest.mark.parametrize("space,shape,off,ok", [("l0a", "128x128xf16", 512, True), ("l0a", "128x128xf16", 256, False),
                                                ("l0c", "128x128xf32", 64, True), ("l0c", "128x128xf32", 32, False),
                                                ("l1", "128x128xf16", 32, True), ("l1", "128x128xf16", 16, False),
                                                ("ub", "8x32xf32", -32, False)])
def test_placed_offsets_respect_the_space_alignment(space, shape, off, ok):
    # reference §2 "buffer address alignment" (S3): L0A/L0B 512 B, L0C 64 B, L1/UB 32 B
    core = "aiv" if space == "ub" else "aic"
    text = kernel("", f"    %a = ascend.alloc {{offset = {off} : i64}} : memref<{shape}, #ascend<space {space}>>", core_type=core)
    if ok:
        simulate(parse(text), None, {}, HW, timing_only=True)
    else:
        with pytest.raises(AscendirError, match=rf"kernel @bad: ascend.alloc of {space} buffer {shape} at offset = {off}: "
                                                r"(negative offset|.* aligned to \d+ B)"):
            simulate(parse(text), None, {}, HW, timing_only=True)
