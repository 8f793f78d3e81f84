"""exec/wide.py: the fp32 copies GM fp16 reads into L1 come from give the values the fp16 view
holds, whatever the view (slices, strides, a transposed or reshaped view); a buffer is converted
chunk by chunk as reads reach it, each chunk once, and writes go into the copy too."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.interpreter.exec import wide
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
def test_wide_view_equals_astype_first_and_again(gm, name):
    sh = GmShadows()
    v = VIEWS[name](gm)
    first = sh.wide(v)
    again = sh.wide(v)
    assert id(gm) in sh.copies
    for got in (first, again):
        assert got.dtype == F32 and got.shape == v.shape
        np.testing.assert_array_equal(got.view(np.uint32), v.astype(F32).view(np.uint32))


def test_chunks_converted_once_and_only_those_read(monkeypatch):
    monkeypatch.setattr(wide, "CHUNK", 96)  # one row of the 64 x 96 buffer per chunk
    gm = np.arange(64 * 96, dtype=np.float32).reshape(64, 96).astype(F16)
    sh = GmShadows()
    sh.wide(gm[8:16, 10:20])
    done = sh.copies[id(gm)][2]
    assert [i for i, f in enumerate(done) if f] == list(range(8, 16))
    gm[9, 12] = -1.0  # behind the copy's back (no op wrote it): a converted chunk is not converted again
    assert sh.wide(gm[9:10, 12:13])[0, 0] == np.float32(gm.astype(F32)[8, 12] + 96)
    assert sh.wide(gm[20:21, 0:3])[0].tolist() == [20 * 96, 20 * 96 + 1, 20 * 96 + 2]  # a new chunk: converted


def test_writes_go_into_the_copy(gm):
    sh = GmShadows()
    c = sh.wide(gm)
    gm[3:5, 1:4] = 7.0
    sh.write(gm[3:5, 1:4])  # an op wrote a tile
    gm[6, 2] = 1.5
    sh.write(gm[6:7], (0, 2))  # a scalar store
    np.testing.assert_array_equal(sh.wide(gm).view(np.uint32), gm.astype(F32).view(np.uint32))
    assert np.shares_memory(sh.wide(gm[3:9, 1:5]), c)
    gm.view(np.int16)[0, 0] = 0  # written as another type: the copy is forgotten
    sh.write(gm.view(np.int16)[:1])
    assert not sh.copies
    assert sh.wide(gm[0:1, 0:1])[0, 0] == np.float32(0)
    sh.clear()
    assert not sh.copies


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


# GM f16 workspace %w read into L1 (its fp32 copy made), then rewritten by FixPipe (L0C f32 ->
# GM f16) and read back in the same launch: the second read must see what FixPipe wrote (rounded
# to fp16), not the copy made before the write
ROUND_TRIP = f"""
builtin.module {{
  ascend.kernel @ws(%a: {_gm((32, 32), "f16")}, %b: {_gm((32, 32), "f16")}, %w: {_gm((32, 32), "f16")}, %y: {_gm((32, 32))}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aic>}} {{
    %l1a = ascend.alloc : {_sp("l1", "f16")}
    %l1b = ascend.alloc : {_sp("l1", "f16")}
    %l1w = ascend.alloc : {_sp("l1", "f16")}
    %l0a = ascend.alloc : {_sp("l0a", "f16")}
    %l0b = ascend.alloc : {_sp("l0b", "f16")}
    %l0c = ascend.alloc : {_sp("l0c", "f32")}
    ascend.copy %w, %l1w : {_gm((32, 32), "f16")}, {_sp("l1", "f16")}
    ascend.copy %a, %l1a : {_gm((32, 32), "f16")}, {_sp("l1", "f16")}
    ascend.copy %b, %l1b : {_gm((32, 32), "f16")}, {_sp("l1", "f16")}
    ascend.set_flag MTE2 -> MTE1, 0
    ascend.wait_flag MTE2 -> MTE1, 0
    ascend.set_flag MTE2 -> FIX, 0
    ascend.wait_flag MTE2 -> FIX, 0
    ascend.copy %l1a, %l0a : {_sp("l1", "f16")}, {_sp("l0a", "f16")}
    ascend.copy %l1b, %l0b : {_sp("l1", "f16")}, {_sp("l0b", "f16")}
    ascend.set_flag MTE1 -> M, 0
    ascend.wait_flag MTE1 -> M, 0
    ascend.mmad %l0a, %l0b, %l0c {{init = true}} : {_sp("l0a", "f16")}, {_sp("l0b", "f16")}, {_sp("l0c", "f32")}
    ascend.set_flag M -> FIX, 0
    ascend.wait_flag M -> FIX, 0
    ascend.copy %l0c, %w : {_sp("l0c", "f32")}, {_gm((32, 32), "f16")}
    ascend.set_flag FIX -> MTE2, 0
    ascend.wait_flag FIX -> MTE2, 0
    ascend.set_flag MTE1 -> MTE2, 1
    ascend.wait_flag MTE1 -> MTE2, 1
    ascend.copy %w, %l1a : {_gm((32, 32), "f16")}, {_sp("l1", "f16")}
    ascend.set_flag MTE2 -> MTE1, 1
    ascend.wait_flag MTE2 -> MTE1, 1
    ascend.set_flag M -> MTE1, 1
    ascend.wait_flag M -> MTE1, 1
    ascend.copy %l1a, %l0a : {_sp("l1", "f16")}, {_sp("l0a", "f16")}
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
  func.func @main(%a: {_gm((32, 32), "f16")}, %b: {_gm((32, 32), "f16")}, %w: {_gm((32, 32), "f16")}) -> {_gm((32, 32))} {{
    %y = ascend.alloc : {_gm((32, 32))}
    ascend.launch @ws(%a, %b, %w, %y) : {_gm((32, 32), "f16")}, {_gm((32, 32), "f16")}, {_gm((32, 32), "f16")}, {_gm((32, 32))}
    func.return %y : {_gm((32, 32))}
  }}
}}
"""


def test_gm_workspace_rewritten_in_the_launch_is_read_back_as_written():
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.interpreter.testing import parse

    rng = np.random.default_rng(6)
    a, b, w = (rng.standard_normal((32, 32)).astype(F16) for _ in range(3))
    out = simulate(parse(ROUND_TRIP), None, {"arg0": a, "arg1": b, "arg2": w}, load_target("ascend910b2")).outputs["out0"]
    p = (a.astype(F32) @ b.astype(F32)).astype(F16).astype(F32)
    np.testing.assert_array_equal(out, p @ b.astype(F32))


def test_a_read_converts_only_chunks_not_converted_yet(monkeypatch):
    monkeypatch.setattr(wide, "CHUNK", 96)
    gm = np.arange(64 * 96, dtype=np.float32).reshape(64, 96).astype(F16)
    sh = GmShadows()
    sh.wide(gm[10:12])
    gm[10, 0] = -1.0  # behind the copy's back: shows whether rows 10..11 are converted again
    got = sh.wide(gm[8:16, 0:4])  # spans rows 8..15: 8, 9 and 12..15 are new
    assert got[2, 0] == np.float32(10 * 96)
    np.testing.assert_array_equal(got[[0, 1, 4, 7]], gm[[8, 9, 12, 15], 0:4].astype(F32))
    assert all(sh.copies[id(gm)][2][8:16])


def test_next_launch_reuses_the_copies_memory(gm):
    sh = GmShadows()
    c = sh.copies
    sh.wide(gm)
    mem = c[id(gm)][1]
    sh.clear()
    sh.clear()  # (a launch's end and the next one's start)
    other = gm.copy()
    np.testing.assert_array_equal(sh.wide(other).view(np.uint32), other.astype(F32).view(np.uint32))
    assert sh.copies[id(other)][1] is mem


def test_copies_and_work_buffers_serve_the_next_simulations_chip(monkeypatch, gm):
    # the pool outlives a chip's GmShadows: a later simulation's launches convert into memory an
    # earlier one touched (a fresh buffer's first touch costs more than converting into it); a
    # buffer serves any request it fits, within POOL_BYTES, the oldest dropped first
    monkeypatch.setattr(wide, "_pool", [])
    monkeypatch.setattr(wide, "_pooled", [0])
    first = GmShadows()
    first.wide(gm)
    w = first.widened(gm[:, :32], 0)
    copy, work = first.copies[id(gm)][1], w.base
    first.clear()
    second = GmShadows()  # the next simulation's chip
    small = gm[:8].copy()  # a smaller buffer takes the smallest kept buffer that fits: the work buffer
    np.testing.assert_array_equal(second.wide(small).view(np.uint32), small.astype(F32).view(np.uint32))
    assert second.copies[id(small)][1] is work
    got = second.widened(gm[:, 40:72], 0)
    np.testing.assert_array_equal(got, gm[:, 40:72].astype(F32))
    assert got.base is copy
    second.clear()
    monkeypatch.setattr(wide, "POOL_BYTES", copy.nbytes + work.nbytes - 4)
    wide._give(np.empty(1, F32))  # over the bound: the oldest given back go first
    assert [b.size for b in wide._pool] == [copy.size, 1]
    assert wide._pooled[0] == copy.nbytes + 4


def test_the_pool_keeps_a_super_tiles_weight_slice_between_launches():
    # a super-tile's B work buffer (K x GRID_COLS fp32, exec/deferred.py) of the 7B layer's down
    # projection (K 11008, the layer's widest weight slice) and the largest other (K 4096) are
    # kept by the pool for the next launch (beyond POOL_BYTES they would be fresh memory again,
    # page faults that cost more than converting into them)
    from ascendir.interpreter.exec import deferred

    assert (11008 + 4096) * deferred.GRID_COLS * 4 <= wide.POOL_BYTES


def test_a_box_of_what_a_work_buffer_holds_is_not_converted_again(monkeypatch, gm):
    # a tail-split GEMM's K pieces (exec/deferred.py) read row slices of the weight columns its
    # whole-K super-tile converted into the work buffer just before: views of it, same values;
    # a view reaching past the held box, another slot or another buffer converts
    calls = []
    into = wide.widen_into
    monkeypatch.setattr(wide, "widen_into", lambda d, s: (calls.append(s.shape), into(d, s))[1])
    sh = GmShadows()
    held = sh.widened(gm[8:56, 16:80], 0)
    for v in (gm[8:56, 16:80], gm[20:40, 16:48], gm[50:56, 70:80], gm[8:9, 79:80]):
        got = sh.widened(v, 0)
        np.testing.assert_array_equal(got.view(np.uint32), v.astype(F32).view(np.uint32))
        assert np.shares_memory(got, held)
    assert calls == [(48, 64)]
    other = gm.copy()
    for v, slot in ((gm[8:56, 70:81], 0), (gm[7:20, 16:32], 0), (gm[10:20, 20:30], 1), (other[10:20, 20:30], 0)):
        calls.clear()
        sh.widened(gm[8:56, 16:80], 0)
        np.testing.assert_array_equal(sh.widened(v, slot).view(np.uint32), v.astype(F32).view(np.uint32))
        assert calls[-1] == v.shape


def test_a_gm_write_under_a_held_view_converts_it_again(gm):
    sh = GmShadows()
    sh.widened(gm[8:56, 16:80], 0)
    gm[30, 90] = 1.0  # beside the held box (bytes within its span: converted again, as written)
    sh.write(gm[30:31, 90:91])
    gm[30, 40] = 5.0
    np.testing.assert_array_equal(sh.widened(gm[30:32, 40:42], 0), gm[30:32, 40:42].astype(F32))
    sh.widened(gm[8:56, 16:80], 0)
    gm[0, 0] = 3.0  # before the held box's first byte: still held
    sh.write(gm[0:1, 0:1])
    gm[30, 40] = 6.0  # behind its back (no op wrote it): the held values
    assert sh.widened(gm[30:32, 40:42], 0)[0, 0] == 5.0
    sh.clear()
    assert sh.widened(gm[30:32, 40:42], 0)[0, 0] == 6.0


def test_tile_ops_memref_facts_are_the_wide_rules():
    # tile_ops._memref_facts (dtype, space, widened) is read once per memref type for both the
    # data walk's GM operands and `_wide`: the same as np_dtype / space_name / storage_dtype,
    # fp16 cube buffers widened and the rest not
    from ascendir.interpreter.exec.common import np_dtype, space_name
    from ascendir.interpreter.exec.tile_ops import _memref_facts
    from ascendir.interpreter.exec.wide import storage_dtype
    from ascendir.interpreter.testing import matmul_ir, parse
    from xdsl.dialects.builtin import MemRefType

    module = parse(matmul_ir(256, 256, 256, tm=128, tn=128, tk=128, block_dim=2, nbuf=2))
    types = {id(v.type): v.type for op in module.walk() for v in op.operands if isinstance(v.type, MemRefType)}
    seen = set()
    for t in types.values():
        dt, space = np_dtype(t), space_name(t)
        assert _memref_facts(t) == (dt, space, storage_dtype(space, dt) != dt)
        seen.add((space, _memref_facts(t)[2]))
    assert ("gm", False) in seen and any(w for _, w in seen)
