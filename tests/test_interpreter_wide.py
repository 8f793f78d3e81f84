"""exec/wide.py: the fp32 copies GM fp16 reads into L1 come from give the values the fp16 view
holds, whatever the view (slices, strides, a transposed or reshaped view); a buffer is copied
once its reads add up to its size, and a write drops the copy."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.exec.wide import F16, F32, GmShadows, declared, storage_dtype


@pytest.fixture
def gm() -> np.ndarray:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((64, 96)) * 100).astype(F16)
    a[0, :4] = [np.inf, -np.inf, np.nan, 6e-8]  # non-finite and subnormal values convert as astype does
    return a


VIEWS = {
    "whole": lambda a: a,
    "tile": lambda a: a[16:48, 32:96],
    "strided": lambda a: a[1:60:3, 5:90:7],
    "row": lambda a: a[7],
    "transposed": lambda a: a[8:40, :16].T,
    "reshaped": lambda a: a.reshape(32, 192)[4:12],
}


@pytest.mark.parametrize("name", VIEWS)
def test_wide_view_equals_astype_before_and_after_the_copy(gm, name):
    sh = GmShadows()
    v = VIEWS[name](gm)
    first = sh.wide(v)  # before the copy: the tile converted
    for _ in range(64 * 96 // max(v.size, 1) + 1):
        last = sh.wide(v)
    assert sh.copies, "the reads added up to the buffer's size: it is copied"
    for got in (first, last):
        assert got.dtype == F32 and got.shape == v.shape
        np.testing.assert_array_equal(got.view(np.uint32), v.astype(F32).view(np.uint32))


def test_copy_made_once_reads_reach_the_size_and_dropped_on_write(gm):
    sh = GmShadows()
    half = gm[:32]
    sh.wide(half)
    assert not sh.copies  # 32 of 64 rows read: tile by tile still
    sh.wide(gm[32:])
    assert id(gm) in sh.copies
    c = sh.copies[id(gm)][1]
    assert np.shares_memory(sh.wide(gm[3:9, 1:5]), c)
    gm[5, 2] = 1.5
    sh.drop(gm[5:6])  # an op wrote the buffer
    assert not sh.copies
    assert sh.wide(gm[5:6, 2:3])[0, 0] == np.float32(1.5)
    sh.clear()
    assert not sh.copies and not sh.read


def test_only_fp16_cube_operand_buffers_widen():
    assert storage_dtype("l1", F16) == F32
    assert storage_dtype("l0a", F16) == F32 and storage_dtype("l0b", F16) == F32
    for space in ("ub", "l0c", "gm", "bt"):
        assert storage_dtype(space, F16) == F16
    for dt in (np.dtype(np.int8), np.dtype(np.float32)):
        assert storage_dtype("l1", dt) == dt


def test_costs_see_declared_dtypes():
    wide_a = np.zeros((16, 32), F32)
    vals = declared((wide_a, 3, np.zeros(4, F32)), (F16, None, F32))
    assert vals[0].dtype == F16 and vals[0].shape == (16, 32)
    assert vals[1] == 3 and vals[2].dtype == F32


def _gm(shape, dt="f32") -> str:
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space gm>>"


def _sp(space: str, dt: str) -> str:
    return f"memref<32x32x{dt}, #ascend<space {space}>>"


# GM f16 -> L1 -> L0A / L0B -> mmad; FixPipe L0C f32 -> L1 f16 (rounds) -> L0A -> mmad with b
# again -> GM f32: the second product must see the fp16-rounded first one
CHAIN = f"""
builtin.module {{
  ascend.kernel @chain(%a: {_gm((32, 32), "f16")}, %b: {_gm((32, 32), "f16")}, %y: {_gm((32, 32))}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aic>}} {{
    %l1a = ascend.alloc : {_sp("l1", "f16")}
    %l1b = ascend.alloc : {_sp("l1", "f16")}
    %l1p = ascend.alloc : {_sp("l1", "f16")}
    %l0a = ascend.alloc : {_sp("l0a", "f16")}
    %l0b = ascend.alloc : {_sp("l0b", "f16")}
    %l0c = ascend.alloc : {_sp("l0c", "f32")}
    ascend.copy %a, %l1a : {_gm((32, 32), "f16")}, {_sp("l1", "f16")}
    ascend.copy %b, %l1b : {_gm((32, 32), "f16")}, {_sp("l1", "f16")}
    ascend.set_flag MTE2 -> MTE1, 0
    ascend.wait_flag MTE2 -> MTE1, 0
    ascend.copy %l1a, %l0a : {_sp("l1", "f16")}, {_sp("l0a", "f16")}
    ascend.copy %l1b, %l0b : {_sp("l1", "f16")}, {_sp("l0b", "f16")}
    ascend.set_flag MTE1 -> M, 0
    ascend.wait_flag MTE1 -> M, 0
    ascend.mmad %l0a, %l0b, %l0c {{init = true}} : {_sp("l0a", "f16")}, {_sp("l0b", "f16")}, {_sp("l0c", "f32")}
    ascend.set_flag M -> FIX, 0
    ascend.wait_flag M -> FIX, 0
    ascend.copy %l0c, %l1p : {_sp("l0c", "f32")}, {_sp("l1", "f16")}
    ascend.set_flag FIX -> MTE1, 0
    ascend.wait_flag FIX -> MTE1, 0
    ascend.set_flag M -> MTE1, 1
    ascend.wait_flag M -> MTE1, 1
    ascend.copy %l1p, %l0a : {_sp("l1", "f16")}, {_sp("l0a", "f16")}
    ascend.set_flag MTE1 -> M, 1
    ascend.wait_flag MTE1 -> M, 1
    ascend.set_flag FIX -> M, 2
    ascend.wait_flag FIX -> M, 2
    ascend.mmad %l0a, %l0b, %l0c {{init = true}} : {_sp("l0a", "f16")}, {_sp("l0b", "f16")}, {_sp("l0c", "f32")}
    ascend.set_flag M -> FIX, 3
    ascend.wait_flag M -> FIX, 3
    ascend.copy %l0c, %y : {_sp("l0c", "f32")}, {_gm((32, 32))}
    ascend.return
  }}
  func.func @main(%a: {_gm((32, 32), "f16")}, %b: {_gm((32, 32), "f16")}) -> {_gm((32, 32))} {{
    %y = ascend.alloc : {_gm((32, 32))}
    ascend.launch @chain(%a, %b, %y) : {_gm((32, 32), "f16")}, {_gm((32, 32), "f16")}, {_gm((32, 32))}
    func.return %y : {_gm((32, 32))}
  }}
}}
"""


def test_fixpipe_into_a_widened_l1_rounds_to_fp16():
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.interpreter.testing import parse

    rng = np.random.default_rng(5)
    a = rng.standard_normal((32, 32)).astype(F16)
    b = rng.standard_normal((32, 32)).astype(F16)
    out = simulate(parse(CHAIN), None, {"arg0": a, "arg1": b}, load_target("ascend910b2")).outputs["out0"]
    p = (a.astype(F32) @ b.astype(F32)).astype(F16).astype(F32)
    np.testing.assert_array_equal(out, p @ b.astype(F32))
    assert not np.array_equal(out, (a.astype(F32) @ b.astype(F32)) @ b.astype(F32))  # the rounding shows
