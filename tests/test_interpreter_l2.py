"""The tile-granular L2 model (interpreter/timing/l2.py): hits, residency, who pays, numerics untouched."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.timing.l2 import L2Cache, L2Pass
from ascendir.interpreter.testing import matmul_ir, parse

HW = load_target("ascend910b2")


def _gm(shape, dt="f32"):
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space gm>>"


def _ub(shape, dt="f32"):
    return f"memref<{'x'.join(map(str, shape))}x{dt}, #ascend<space ub>>"


def _negate_twice(rows: int) -> str:
    """@main launches the same in-place kernel (y = -y over one [rows, 64] tile) twice."""
    g, u = _gm((rows, 64)), _ub((rows, 64))
    return f"""
builtin.module {{
  ascend.kernel @neg(%y: {g}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %u = ascend.alloc : {u}
    ascend.copy %y, %u : {g}, {u}
    ascend.pipe_barrier ALL
    ascend.vneg %u, %u : {u}, {u}
    ascend.pipe_barrier ALL
    ascend.copy %u, %y : {u}, {g}
    ascend.return
  }}
  func.func @main(%x: {g} {{onnx.name = "x"}}) -> ({g} {{onnx.name = "y"}}) {{
    ascend.launch @neg(%x) : {g}
    ascend.launch @neg(%x) : {g}
    func.return %x : {g}
  }}
}}
"""


def test_second_kernel_hits_what_the_first_wrote_and_numerics_run_once():
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    res = simulate(parse(_negate_twice(16)), None, {"x": x}, HW)
    # the recording pass must not apply the in-place negation a second time
    np.testing.assert_array_equal(res.outputs["y"], x)
    k1, k2 = res.report["kernels"]
    assert "l2_hit" not in k1["bytes"]  # first read of the input: miss
    assert k2["bytes"]["l2_hit"] == k2["bytes"]["gm_read"] == 16 * 64 * 4  # written by kernel 1: hit
    assert k2["cycles"] < k1["cycles"]
    none = simulate(parse(_negate_twice(16)), None, {"x": x}, HW.with_l2_model("none")).report
    assert none["kernels"][1]["cycles"] == pytest.approx(k1["cycles"])


def test_residency_window_evicts():
    c = L2Cache(HW)
    assert c.window == pytest.approx(HW.memory.l2_bytes / HW.hbm_bytes_per_cycle)
    key = c.key("root", 0, (16, 16), (16, 1))
    assert key != c.key("root", 16, (16, 16), (16, 1)) and key != c.key("root", 0, (16, 8), (16, 1))
    c.write(key, 0.0)
    assert not c.resident_before(key, c.window * 0.5, t_start=c.window * 0.4)  # not committed: same kernel
    c.commit()  # a new kernel starts
    assert c.resident_before(key, c.window * 0.5, t_start=c.window * 0.4)
    assert not c.resident_before(key, c.window * 1.01, t_start=c.window * 0.4)  # idle for longer than the window
    c.write(key, c.window * 0.9)
    c.commit()
    assert c.resident_before(key, c.window * 1.6, t_start=c.window * 1.55)  # the latest access counts


def test_simultaneous_readers_take_turns_paying():
    p = L2Pass(window=1e9)
    for tile in range(4):  # 4 blocks read 4 tiles at the same pass-1 times
        for b in range(4):
            p.ordinal[b] = tile
            p.read(None, tile, 100.0 * tile, b, 0.0)  # tile keys are ints (l2.py)
    p.settle()
    assert len(p.misses) == 4
    assert {b for b, _ in p.misses} == {0, 1, 2, 3}  # one miss each, not all on block 0


def _designate(rows, window: float) -> set[tuple[int, int]]:
    """The misses L2Pass.settle designates for recorded reads `rows` of (key, time, block,
    ordinal), logged in the order given."""
    p = L2Pass(window=window)
    for key, t, b, j in rows:
        p.ordinal[b] = j
        p.read(None, key, t, b, 0.0)
    p.settle()
    return p.misses


def test_who_pays_tied_misses_does_not_depend_on_the_log_order():
    """The round-robin over tied readers follows simulated time, block and tile key, not the
    order the interpreter logged the reads in: the same reads (each keeping its block and its
    ordinal) logged block by block, in time order or shuffled designate the same misses."""
    window = 500.0
    rows = []
    for b in range(4):  # 4 blocks run the same schedule: every tile is a tie of 4 readers
        j = 0
        for rnd in range(2):  # the second round comes after the residency window: misses again
            base = rnd * 2000.0
            # each block's program order is not its time order (a prefetching unit's fill of
            # tile 10 + s is logged after the main unit's reads of later tiles)
            for s in range(6):
                rows.append((s, base + 100.0 * s, b, j))
                j += 1
            for s in range(6):
                rows.append((10 + s, base + 100.0 * s + 50.0, b, j))
                j += 1
    want = _designate(rows, window)
    assert len(want) == 2 * 12  # one miss per tile and residency period
    per_block = np.bincount([b for b, _ in want], minlength=4)
    assert per_block.tolist() == [6, 6, 6, 6]  # the turns spread them evenly
    by_time = sorted(rows, key=lambda r: (r[1], r[2]))  # blocks interleaved as time goes
    assert _designate(by_time, window) == want
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert _designate([rows[i] for i in rng.permutation(len(rows))], window) == want


def test_each_group_of_tied_readers_takes_turns_over_its_own_members():
    """Three groups of three blocks read their own tile at the same times: each group's misses
    rotate over its members. (A turn counter shared by the groups would step each group's payer
    by 3, the number of groups: the same block would pay every time.)"""
    rows = []
    for step in range(6):
        for b in range(9):  # group b // 3 reads tile 100 * (b // 3) + step
            rows.append((100 * (b // 3) + step, 10.0 * step, b, step))
    misses = _designate(rows, 1e9)
    assert len(misses) == 18
    assert np.bincount([b for b, _ in misses], minlength=9).tolist() == [2] * 9


def test_matmul_hit_rate_is_unique_over_total():
    n, tm, tn, lk = 1024, 128, 256, 256
    rep = simulate(parse(matmul_ir(n, n, n, tm=tm, tn=tn, tk=64, l1_k=lk, block_dim=24)), None, {}, HW, timing_only=True).report
    # every A and B tile is fetched once from HBM (the working set fits L2), re-reads hit
    tiles = (n // tm) * (n // tn)
    total = tiles * (tm * n + n * tn) * 2
    unique = 2 * n * n * 2
    assert rep["bytes"]["gm_read"] == total
    assert rep["l2_hit_rate"] == pytest.approx(1 - unique / total)


def test_timing_identical_with_and_without_numerics():
    mod = parse(matmul_ir(256, 256, 256, tm=64, tn=64, tk=64, block_dim=4))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float16)
    b = rng.standard_normal((256, 256)).astype(np.float16)
    num = simulate(mod, None, {"a": a, "b": b}, HW).report
    tim = simulate(mod, None, {}, HW, timing_only=True).report
    assert num["total_cycles"] == tim["total_cycles"] and num["bytes"] == tim["bytes"]


def _store_three_times(rows: int, same_tile: bool) -> str:
    """One AIV kernel storing one UB tile to GM three times: to the same tile (a scratch buffer
    rewritten in place) or to three different tiles."""
    g, u, out = _gm((rows, 64)), _ub((rows, 64)), _gm((3 * rows, 64))
    offs = [0, 0, 0] if same_tile else [0, rows, 2 * rows]
    sv = "memref<{r}x64xf32, strided<[64, 1], offset: {o}>, #ascend<space gm>>"
    body = "\n".join(
        f"""    %v{i} = memref.subview %y[{o}, 0] [{rows}, 64] [1, 1] : {out} to {sv.format(r=rows, o=o * 64)}
    ascend.copy %u, %v{i} : {u}, {sv.format(r=rows, o=o * 64)}"""
        for i, o in enumerate(offs)
    )
    return f"""
builtin.module {{
  ascend.kernel @st(%x: {g}, %y: {out}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %u = ascend.alloc : {u}
    ascend.copy %x, %u : {g}, {u}
    ascend.pipe_barrier ALL
{body}
    ascend.return
  }}
  func.func @main(%x: {g} {{onnx.name = "x"}}, %y: {out} {{onnx.name = "y"}}) -> ({out} {{onnx.name = "y"}}) {{
    ascend.launch @st(%x, %y) : {g}, {out}
    func.return %y : {out}
  }}
}}
"""


def test_rewriting_a_dirty_tile_stays_in_l2():
    """A write that rewrites a tile its kernel left dirty in L2 counts as l2_write (not HBM write
    traffic in the bandwidth floor) and runs at the path's L2 write rate; fresh tiles do not."""
    from ascendir.costmodel import bandwidth_bound_cycles

    rows = 64
    tile = rows * 64 * 4
    x = np.arange(rows * 64, dtype=np.float32).reshape(rows, 64)
    y = np.zeros((3 * rows, 64), np.float32)
    same = simulate(parse(_store_three_times(rows, True)), None, {"x": x, "y": y}, HW)
    fresh = simulate(parse(_store_three_times(rows, False)), None, {"x": x, "y": y}, HW)
    np.testing.assert_array_equal(same.outputs["y"][:rows], x)
    np.testing.assert_array_equal(fresh.outputs["y"], np.concatenate([x, x, x]))
    ks, kf = same.report["kernels"][0], fresh.report["kernels"][0]
    assert ks["bytes"]["gm_write"] == kf["bytes"]["gm_write"] == 3 * tile
    assert ks["bytes"]["l2_write"] == 2 * tile  # the 2nd and 3rd stores rewrite the dirty tile
    assert "l2_write" not in kf["bytes"]
    assert ks["bandwidth_bound_cycles"] < kf["bandwidth_bound_cycles"]
    hbm = HW.hbm_sustained_bytes_per_cycle  # the HBM roof: what the chip sustains (V7 fit)
    l2bw = HW.hbm_bytes_per_cycle * HW.memory.l2_bw_over_hbm
    # the slowest level: HBM sees one write-back of the tile, L2 all three writes
    assert bandwidth_bound_cycles(0, 3 * tile, HW, 0, 2 * tile) == pytest.approx(max(tile / hbm, 3 * tile / l2bw))
    # reads: hits and miss fills all pass L2, only misses reach HBM; the levels run concurrently
    # (a hierarchical roofline, S30), so half hits cost the HBM time of the misses alone, not
    # that plus the hits' L2 time
    assert bandwidth_bound_cycles(4 * tile, 0, HW, 2 * tile) == pytest.approx(max(4 * tile / l2bw, 2 * tile / hbm)) == 2 * tile / hbm
    assert bandwidth_bound_cycles(4 * tile, 0, HW, 4 * tile) == pytest.approx(4 * tile / l2bw)
    # MTE3 busy: ub_to_l2 equals ub_to_gm on 910B [S1] (64 B/cycle both), so only the latency and
    # the floor differ here; FixPipe's L0C -> L2 (86) vs L0C -> GM (32) is covered by the FA tests
    assert HW.rates["ub_to_l2"] == HW.rates["ub_to_gm"]
    assert HW.rates["l0c_to_l2"] > HW.rates["l0c_to_gm"]


def test_the_bandwidth_floor_is_the_slowest_level_at_the_sustained_hbm_rate(tmp_path):
    """costmodel.bandwidth_bound_cycles is max(L2 bytes / L2 bw, HBM bytes / sustained HBM bw),
    not their sum, and its HBM roof is memory.hbm_efficiency x the peak (910B2: 0.80, fitted on
    calibration V7 [S16]); the L2 roof stays l2_bw_over_hbm x the peak [S8]."""
    from ascendir.costmodel import bandwidth_bound_cycles
    from ascendir.hardware.config import CHIPS

    peak = HW.hbm_bytes_per_cycle
    assert HW.memory.hbm_efficiency == 0.80
    assert HW.hbm_sustained_bytes_per_cycle == pytest.approx(0.80 * peak)
    mib = 2.0**20
    # streaming: every byte misses, so HBM binds at the sustained rate, 1.25x the peak-rate time
    assert bandwidth_bound_cycles(mib, mib, HW) == pytest.approx(2 * mib / (0.80 * peak))
    # a quarter misses: HBM 0.25 MiB at 0.8 x peak vs L2 1 MiB at 5 x peak; the slower alone counts
    l2_time, hbm_time = mib / (5 * peak), 0.25 * mib / (0.80 * peak)
    assert bandwidth_bound_cycles(mib, 0, HW, 0.75 * mib) == pytest.approx(max(l2_time, hbm_time)) == pytest.approx(hbm_time)
    # a tenth misses: the L2 level binds, and it does not move with the HBM share
    assert bandwidth_bound_cycles(mib, 0, HW, 0.95 * mib) == pytest.approx(mib / (5 * peak))
    # the share comes from the target file: half of it doubles the HBM-bound floor, not the L2-bound one
    text = (CHIPS / "ascend910b2.toml").read_text()
    assert "hbm_efficiency = 0.80 " in text
    p = tmp_path / "half.toml"
    p.write_text(text.replace("hbm_efficiency = 0.80 ", "hbm_efficiency = 0.40 ").replace('name = "ascend910b2"', 'name = "half_hbm"'))
    half = load_target(p)
    assert bandwidth_bound_cycles(mib, mib, half) == pytest.approx(2 * bandwidth_bound_cycles(mib, mib, HW))
    assert bandwidth_bound_cycles(mib, 0, half, 0.95 * mib) == pytest.approx(bandwidth_bound_cycles(mib, 0, HW, 0.95 * mib))



def test_fixpipe_rewrite_runs_at_the_l2_write_rate():
    """FixPipe (L0C -> GM) writing a tile it wrote before, still dirty in L2: L0C -> L2 rate
    (86 B/cycle [S4] = [S1] l2_write_rate) instead of L0C -> GM (32 [S4]), hit latency."""
    g, c = _gm((64, 64)), "memref<64x64xf32, #ascend<space l0c>>"

    def ir(n: int) -> str:
        copies = "\n".join(f"    ascend.copy %c, %y : {c}, {g}" for _ in range(n))
        return f"""
builtin.module {{
  ascend.kernel @k(%y: {g}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aic>}} {{
    %c = ascend.alloc : {c}
{copies}
    ascend.return
  }}
  func.func @main(%y: {g} {{onnx.name = "y"}}) -> ({g} {{onnx.name = "y"}}) {{
    ascend.launch @k(%y) : {g}
    func.return %y : {g}
  }}
}}
"""

    y = np.zeros((64, 64), np.float32)
    busy = [simulate(parse(ir(n)), None, {"y": y}, HW, timing_only=True).report["kernels"][0]["pipe_busy"]["FIX"] for n in (1, 2)]
    nbytes = 64 * 64 * 4
    assert busy[0] == pytest.approx(HW.startup["fix"] + nbytes / HW.rates["l0c_to_gm"])
    assert busy[1] - busy[0] == pytest.approx(HW.startup["fix"] + nbytes / HW.rates["l0c_to_l2"])


def test_read_many_records_first_changes_conversions_as_its_own():
    """steady.py hands `read_many` the designated reads `first_change` converted (`seen`): the
    memo checks must be those read_many builds itself, for every prefix a cut-short jump records."""
    c = L2Cache(HW)
    c.write(5, 0.0)
    c.commit()  # key 5 resident from an earlier kernel, the others not
    keys = np.array([5, 6, 7, 5, 6, 7, 5, 6], np.int64)
    times = np.arange(8, dtype=np.float64) + 10.0
    expect = [True, False, True, True]  # a sampled period of 4 reads: the second one missed
    for n in range(0, 9):
        got = []
        for seen in (None, []):
            p = L2Pass.settled(c.window, {(0, 1), (0, 3), (0, 5), (0, 7)})
            p.checks = []
            first = p.first_change(c, keys, times, 0, 0.0, expect, [1], seen)
            assert first == 7  # designated reads 1, 3, 5 get their sampled outcome; 7 (key 6) misses
            p.read_many(c, keys[:n], times[:n], 0, 0.0, np.array([expect[i % 4] for i in range(n)]), seen=seen if n <= first else None)
            got.append(p.checks)
        assert got[0] == got[1]


def _write_then_read(rows: int, same_tile: bool) -> str:
    """One AIV kernel: x -> UB -> y[0:rows], then reads y[0:rows] (or y[rows:2 rows], never
    written) back and stores it to x."""
    g, u, out = _gm((rows, 64)), _ub((rows, 64)), _gm((2 * rows, 64))
    sv = "memref<{r}x64xf32, strided<[64, 1], offset: {o}>, #ascend<space gm>>"
    w, r = sv.format(r=rows, o=0), sv.format(r=rows, o=0 if same_tile else rows * 64)
    return f"""
builtin.module {{
  ascend.kernel @wr(%x: {g}, %y: {out}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %u = ascend.alloc : {u}
    %v = ascend.alloc : {u}
    ascend.copy %x, %u : {g}, {u}
    ascend.pipe_barrier ALL
    %w = memref.subview %y[0, 0] [{rows}, 64] [1, 1] : {out} to {w}
    ascend.copy %u, %w : {u}, {w}
    ascend.pipe_barrier ALL
    %r = memref.subview %y[{0 if same_tile else rows}, 0] [{rows}, 64] [1, 1] : {out} to {r}
    ascend.copy %r, %v : {r}, {u}
    ascend.pipe_barrier ALL
    ascend.copy %v, %x : {u}, {g}
    ascend.return
  }}
  func.func @main(%x: {g} {{onnx.name = "x"}}, %y: {out} {{onnx.name = "y"}}) -> ({g} {{onnx.name = "x"}}) {{
    ascend.launch @wr(%x, %y) : {g}, {out}
    func.return %x : {g}
  }}
}}
"""


@pytest.mark.parametrize("same_tile", [True, False])
def test_a_tile_written_earlier_in_the_launch_is_read_from_l2(same_tile):
    """Write-allocate inside one launch: reading back a tile the kernel wrote (a workspace
    hand-off) hits; a tile it never wrote misses, as does the first read of the input."""
    rows = 16
    x = np.arange(rows * 64, dtype=np.float32).reshape(rows, 64)
    y = np.full((2 * rows, 64), 7.0, np.float32)
    res = simulate(parse(_write_then_read(rows, same_tile)), None, {"x": x, "y": y}, HW)
    np.testing.assert_array_equal(res.outputs["x"], x if same_tile else y[rows:])
    k = res.report["kernels"][0]
    tile = rows * 64 * 4
    assert k["bytes"]["gm_read"] == 2 * tile
    assert k["bytes"].get("l2_hit", 0) == (tile if same_tile else 0)


_SV = "memref<32x64xf32, strided<[64, 1], offset: {o}>, #ascend<space gm>>"


def _halves(var: str, write: bool, which=(0, 32)) -> str:
    """Copies between UB %h [32, 64] and the row halves `which` of GM %var [64, 64], a barrier after each."""
    g, h = _gm((64, 64)), _ub((32, 64))
    out = []
    for o in which:
        t = _SV.format(o=o * 64)
        out.append(f"    %c{var}{o} = memref.subview %{var}[{o}, 0] [32, 64] [1, 1] : {g} to {t}")
        out.append(f"    ascend.copy %h, %c{var}{o} : {h}, {t}" if write else f"    ascend.copy %c{var}{o}, %h : {t}, {h}")
        out.append("    ascend.pipe_barrier ALL")
    return "\n".join(out)


def _kernels(*bodies: str) -> str:
    """@main launches one AIV kernel per body, each on (%x, %y: [64, 64] f32) with UB %u [64, 64], %h [32, 64]."""
    g, u, h = _gm((64, 64)), _ub((64, 64)), _ub((32, 64))
    ks = "".join(f"""
  ascend.kernel @k{i}(%x: {g}, %y: {g}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %u = ascend.alloc : {u}
    %h = ascend.alloc : {h}
{b}
    ascend.return
  }}""" for i, b in enumerate(bodies))
    launches = "".join(f"    ascend.launch @k{i}(%x, %y) : {g}, {g}\n" for i in range(len(bodies)))
    return f"""
builtin.module {{{ks}
  func.func @main(%x: {g} {{onnx.name = "x"}}, %y: {g} {{onnx.name = "y"}}) -> ({g} {{onnx.name = "y"}}) {{
{launches}    func.return %y : {g}
  }}
}}
"""


_G, _U = _gm((64, 64)), _ub((64, 64))
_X_TO_Y = f"    ascend.copy %x, %u : {_G}, {_U}\n    ascend.pipe_barrier ALL\n    ascend.copy %u, %y : {_U}, {_G}\n    ascend.pipe_barrier ALL"
_X_TO_U = f"    ascend.copy %x, %u : {_G}, {_U}\n    ascend.pipe_barrier ALL"
_Y_TO_U = f"    ascend.copy %y, %u : {_G}, {_U}\n    ascend.pipe_barrier ALL"
_HALF = 32 * 64 * 4


@pytest.mark.parametrize("bodies,hits", [
    ((_X_TO_Y + "\n" + _halves("y", False),), [2 * _HALF]),  # written whole, read in halves
    ((_X_TO_U + "\n" + _halves("y", True) + "\n" + _Y_TO_U,), [2 * _HALF]),  # written in halves, read whole
    ((_X_TO_U + "\n" + _halves("y", True, (0,)) + "\n" + _Y_TO_U,), [0]),  # half written: the whole read misses
    ((_X_TO_Y, _halves("y", False)), [0, 2 * _HALF]),  # an earlier kernel's whole tile, read in halves
    ((_X_TO_U + "\n" + _halves("y", True, (0,)), _Y_TO_U), [0, 0]),  # an earlier kernel's half: a miss
])
def test_a_read_hits_when_other_tiles_hold_all_its_elements(bodies, hits):
    """Coverage (l2.Geometry, RunTable): a read whose elements other tiles of its buffer, read or
    written before it within the residency window, hold whole hits (in its launch: L2Pass.settle;
    from an earlier kernel: L2Cache.covered_before); held in part, it misses whole. The first read
    of x always misses."""
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    res = simulate(parse(_kernels(*bodies)), None, {"x": x, "y": np.zeros_like(x)}, HW)
    assert [k["bytes"].get("l2_hit", 0) for k in res.report["kernels"]] == hits


def test_coverage_of_a_tile_whose_bounding_range_meets_no_run():
    """A tile of the root whose address range overlaps the read's but none of whose runs does
    (rows 0-3, columns 0-15 against row 0, columns 32-47 of a [*, 64] buffer): no cover, no
    error, across kernels and inside a launch (found end to end in `ascendir generate`)."""
    c = L2Cache(HW)
    c.write(c.key("A", 0, (4, 16), (64, 1)), 10.0)
    c.commit()
    assert not c.resident_before(c.key("A", 32, (1, 16), (64, 1)), 100.0, 50.0)
    assert c.resident_before(c.key("A", 64, (1, 16), (64, 1)), 100.0, 50.0)  # row 1, columns 0-15: inside it
    p = L2Pass(c.window)
    p.read(c, c.key("B", 0, (4, 16), (64, 1)), 10.0, 0, 0.0)
    p.read(c, c.key("B", 32, (1, 16), (64, 1)), 20.0, 0, 0.0)
    p.read(c, c.key("B", 0, (1, 64), (64, 1)), 30.0, 0, 0.0)
    p.read(c, c.key("B", 128, (1, 16), (64, 1)), 40.0, 0, 0.0)  # row 2, columns 0-15: inside the first
    p.settle(c)
    assert sorted(p.misses) == [(0, 0), (0, 1), (0, 2)]
