"""Runs of a GEMM tile that hold its FixPipes (interpreter/exec/data_loop_memo.py, "Runs with
FixPipes"): a later tile's run replayed with its FixPipes run on the moved views gives the outputs,
report and race verdicts of the walk that runs every op, bit for bit; tiles whose views or state
differ run instead."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec import data_loop_memo
from ascendir.interpreter.testing import matmul_ir, parse
from test_data_loop_memo import _counted, _template_gemm

HW = load_target("ascend910b2")


def _fx_counted(monkeypatch) -> dict:
    """Counts of replays of stored executions holding FixPipes, and of the FixPipes they ran."""
    n = {"replayed": 0, "fixpipes": 0}
    orig = data_loop_memo._moved_effects

    def moved(fx, *a):
        got = orig(fx, *a)
        n["replayed"] += 1
        n["fixpipes"] += len(got)
        return got

    monkeypatch.setattr(data_loop_memo, "_moved_effects", moved)
    return n


@pytest.mark.parametrize("m, k, n, tiling, replays", [
    (384, 1024, 1536, "m=64,n=128,k=64,l1_depth=2,split_k=1,swizzle=1", True),
    # edge tiles in M and N: the last tiles' shapes differ (their runs are keyed apart or run)
    (330, 640, 1400, "m=64,n=128,k=32,l1_depth=3,split_k=1,swizzle=1", False),
])
@pytest.mark.parametrize("races", [True, False])
def test_tiles_with_fixpipes_replayed_bit_for_bit(monkeypatch, m, k, n, tiling, replays, races):
    module, feeds = _template_gemm(m, k, n, tiling)
    counts = _fx_counted(monkeypatch)
    new = simulate(module, None, feeds, HW, check_races=races)
    assert not replays or counts["replayed"] > 0 and counts["fixpipes"] >= 2 * counts["replayed"], counts
    _counted(monkeypatch, False)
    plain = simulate(module, None, feeds, HW, check_races=races)
    assert new.report == plain.report
    (name,) = new.outputs
    assert np.array_equal(new.outputs[name], plain.outputs[name])


def test_tail_split_k_pieces_replayed_bit_for_bit(monkeypatch):
    # the last wave's tiles split along K (catlass TailSplitK): their K pieces' sums and the
    # reduction's inputs as the walk of every op gives them
    module, feeds = _template_gemm(512, 1024, 1024, "m=128,n=128,k=64,l1_depth=2,tail_split=3")
    _fx_counted(monkeypatch)
    new = simulate(module, None, feeds, HW)
    _counted(monkeypatch, False)
    plain = simulate(module, None, feeds, HW)
    assert new.report == plain.report
    for name in new.outputs:
        assert np.array_equal(new.outputs[name], plain.outputs[name])


def test_a_race_in_a_later_tile_is_still_caught(monkeypatch):
    # the FixPipe no longer waits for the last mmads (M -> FIX): every tile of the checked block
    # races, the replayed ones through their tapes
    from test_interpreter_race import _drop

    text = _drop(matmul_ir(256, 256, 1024, block_dim=2), "ascend.wait_flag M -> FIX, 0")
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((256, 1024)).astype(np.float16), "b": rng.standard_normal((1024, 256)).astype(np.float16)}
    _fx_counted(monkeypatch)
    with pytest.raises(AscendirError, match="race") as e:
        simulate(parse(text), None, feeds, HW)
    _counted(monkeypatch, False)
    with pytest.raises(AscendirError, match="race") as f:
        simulate(parse(text), None, feeds, HW)
    assert str(e.value) == str(f.value)


def test_a_moved_fixpipe_leaving_its_row_is_not_replayed():
    # a GM view moved past its row's end (a wrap into the next row stays inside the buffer, where
    # no ndarray check sees it): the walk's subview raises there, so the run runs
    import types

    bases = {"c": (np.zeros(64, np.float16), 0, 5)}
    spec = ("c", 2, (8, 1), (2, 4), np.dtype(np.float16))
    sem = lambda c, g: None  # noqa: E731
    cube = types.SimpleNamespace(sums={}, gm={})
    with pytest.raises(ValueError):
        data_loop_memo._moved_effects(((sem, spec, spec, ()),), bases, {}, {}, cube)


def test_fixpipe_runs_hand_the_race_check_the_walks_calls(monkeypatch):
    # the block checked in full replays its later tiles' runs from tapes holding their FixPipes'
    # accesses (RaceChecker.play), the cheap blocks from the decisions and GM logs (with the
    # FixPipes' GM operands) of the first block's runs: the same calls, decisions and GM logs as
    # the walk that replays nothing
    from test_data_loop_memo import _cheap_logs, _race_calls

    module, feeds = _template_gemm(384, 1024, 1536, "m=64,n=128,k=64,l1_depth=2,split_k=1,swizzle=1")
    calls, logs, outs, fx = [], [], [], []
    for on in (True, False):
        with monkeypatch.context() as mp:
            fx.append(_fx_counted(mp))
            _counted(mp, on)
            calls.append(_race_calls(mp))
            logs.append(_cheap_logs(mp))
            outs.append(simulate(module, None, feeds, HW, check_races=True))
    assert fx[0]["replayed"] > 0 == fx[1]["replayed"], fx
    assert calls[0] == calls[1] and logs[0] == logs[1]
    assert outs[0].report == outs[1].report
    (name,) = outs[0].outputs
    assert np.array_equal(outs[0].outputs[name], outs[1].outputs[name])


def test_a_write_between_the_runs_reads_and_earlier_ones_meets_their_span():
    # while a run is stored, the GM spans its records read are kept apart from those recorded
    # before it (`outer`); a write meets what one span of both would hold, as the walk's check
    # of one span does (a write in the gap between them materialises everything there too)
    from ascendir.interpreter.exec.deferred import CubeDeferral

    cube = CubeDeferral([])
    cube.gm, cube.outer = {"x": [0, 99]}, {"x": [200, 299]}
    assert cube._meets_gm(("x", 150, (10, 1)), (1, 10))
    assert not cube._meets_gm(("x", 300, (10, 1)), (1, 10))
    cube.gm, cube.outer = {}, {"x": [200, 299]}
    assert not cube._meets_gm(("x", 150, (10, 1)), (1, 10)) and cube._meets_gm(("x", 295, (10, 1)), (1, 10))


def test_a_fixpipe_meeting_a_read_recorded_before_its_run_is_not_replayed(monkeypatch):
    # before the tile loop the block loads rows 128..255, columns 0..127 of C into L1 (a recorded
    # read of C: its span stays in the deferral's GM spans until a flush). Tiles (0, 0) and (0, 1)
    # write C elsewhere, so their runs store and replay; tile (1, 0) writes that region, where the
    # walk materialises everything first: its run runs (`_moved_effects`, "meets a recorded read")
    region = "%c[128, 0] [128, 128] [1, 1]"
    view = "memref<128x128xf16, strided<[256, 1], offset: 32768>, #ascend<space gm>>"
    load = (f"    %rsub = memref.subview {region} : memref<512x256xf16, #ascend<space gm>> to {view}\n"
            f"    ascend.copy %rsub, %l1a0 {{layout = #ascend.layout<nd2nz>}} : {view}, memref<128x128xf16, #ascend<space l1>>\n")
    text = matmul_ir(512, 256, 256, block_dim=1, out_dtype="f16")
    at = text.index("    scf.for %t = ")
    module = parse(text[:at] + load + text[at:])
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((512, 256)).astype(np.float16), "b": rng.standard_normal((256, 256)).astype(np.float16)}
    written = []  # (first row, first column) in C of each GM view a replayed FixPipe writes
    orig = data_loop_memo._moved_effects

    def moved(fx, bases, *a):
        got = orig(fx, bases, *a)
        written.extend(divmod(g[1] + bases[g[0]][2], g[2][0]) for _, _, g, _ in fx)
        return got

    monkeypatch.setattr(data_loop_memo, "_moved_effects", moved)
    new = simulate(module, None, feeds, HW, check_races=False)
    assert written and (128, 0) not in written, written
    _counted(monkeypatch, False)
    plain = simulate(module, None, feeds, HW, check_races=False)
    assert new.report == plain.report
    assert np.array_equal(new.outputs["c"], plain.outputs["c"])
