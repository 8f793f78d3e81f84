"""insert-sync and double-buffer on real kernels: the templates' own flags leave nothing to insert
(910B mix kernels included: AIC, AIV 0 and AIV 1 each analysed, and their GM hand-offs); with
every flag stripped, insert-sync alone makes the kernels race-free (the interpreter's race and
deadlock detectors run on every simulation) with unchanged numerics; a single-buffered matmul
ping-ponged by double-buffer + insert-sync runs like the hand-written double-buffered one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ascendir.dialects import ascend
from ascendir.driver import compile_model
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.testing import matmul_ir, parse
from ascendir.transforms.ascend.double_buffer import double_buffer
from ascendir.transforms.ascend.insert_sync import conflicts, insert_sync

DATA = Path(__file__).parent / "data"
MIX_IR = Path(__file__).parent / "filecheck" / "insert-sync" / "mix_kernel.mlir"
HW = load_target("ascend910b2")


def _kernels(module):
    return [k for k in module.ops if isinstance(k, ascend.KernelOp)]


def _strip(kernel) -> int:
    flags = [o for o in kernel.walk() if isinstance(o, ascend.FlagOp)]
    for o in flags:
        o.detach()
        o.erase()
    return len(flags)


def _model(name: str):
    ref = np.load(DATA / name / "reference.npz")
    inputs = {k[len("input:"):]: ref[k] for k in ref.files if k.startswith("input:")}
    module, weights = compile_model(DATA / name / "model.onnx")
    return module, weights, inputs, ref


@pytest.fixture(scope="module")
def mlp():
    """mlp_small with its FFN as the fused kernel, the mix kernel whose GM hand-offs run both
    ways (accumulators AIC -> AIV, h AIV -> AIC); forced, as the cost model picks two kernels
    for it (templates/ffn.py choose_plan)."""
    import ascendir.conversion.nn_to_ascend.templates.ffn as ffn

    choose = ffn.choose_plan

    def fused(target, s, dt, *tilings):
        t, e = ffn.ffn_fused.choose(s, target, dt)
        return ffn.Plan(t, e["cycles"], choose(target, s, dt, *tilings).two_kernel_cycles)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ffn, "choose_plan", fused)
        mp.setattr(ffn, "_PLANS", {})
        return _model("mlp_small")


def _need_no_flag(module) -> None:
    analysed = [k for k in _kernels(module) if conflicts(k) is not None]
    assert analysed
    mix = [k.sym_name.data for k in _kernels(module) if k.core_type.data == "mix"]
    assert set(mix) <= {k.sym_name.data for k in analysed}  # mix kernels are analysed too
    for k in analysed:
        assert conflicts(k) == [], k.sym_name.data
        assert insert_sync(k) == 0


def test_template_kernels_need_no_flag(mlp) -> None:
    assert any(k.core_type.data == "mix" for k in _kernels(mlp[0]))  # ffn_fused on 910B (forced, see `mlp`)
    _need_no_flag(mlp[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir() if (p / "model.onnx").exists()))
def test_template_kernels_need_no_flag_corpus(name: str) -> None:
    _need_no_flag(compile_model(DATA / name / "model.onnx")[0])


def test_stripped_kernels_resynchronised(mlp) -> None:
    module, weights, inputs, ref = mlp
    module = module.clone()
    stripped = sum(_strip(k) for k in _kernels(module) if conflicts(k) is not None)
    assert stripped > 0
    with pytest.raises(Exception, match="race"):
        simulate(module, weights, inputs, HW)
    added = sum(insert_sync(k) for k in _kernels(module))
    assert added > 0 and all(not conflicts(k) for k in _kernels(module))
    # the mix kernel's AIC <-> AIV hand-offs through GM came back, in both directions
    units = {o.attributes["units"].units for k in _kernels(module) if k.core_type.data == "mix"
             for o in k.walk() if isinstance(o, ascend.FlagOp)}
    assert {("aic", "aiv"), ("aiv", "aic")} <= units
    out = simulate(module, weights, inputs, HW).outputs  # raises on a race or a deadlock
    for key in ref.files:
        if key.startswith("output:"):
            np.testing.assert_allclose(out[key[len("output:"):]], ref[key], rtol=1e-3, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir() if (p / "model.onnx").exists()))
def test_stripped_mix_kernels_resynchronised_corpus(name: str) -> None:
    """Every template mix kernel of a corpus model (FlashAttention, FFN/SwiGLU, matmul+epilogue,
    conv) with all its flags stripped: insert-sync alone makes the model run again (race and
    deadlock detectors on) with the reference outputs."""
    module, weights, inputs, ref = _model(name)
    mix = [k for k in _kernels(module) if k.core_type.data == "mix"]
    if not mix:
        pytest.skip(f"{name} has no mix kernel")
    assert all(_strip(k) > 0 for k in mix)
    assert all(insert_sync(k) > 0 and conflicts(k) == [] for k in mix)
    out = simulate(module, weights, inputs, HW).outputs
    for key in ref.files:
        if key.startswith("output:"):
            np.testing.assert_allclose(out[key[len("output:"):]], ref[key], rtol=1e-3, atol=1e-4)


def _single_buffered(n: int, k: int):
    module = parse(matmul_ir(n, n, k, tm=128, tn=256, tk=64, l1_k=256, block_dim=HW.num_aic, nbuf=1, out_dtype="f32"))
    for kern in _kernels(module):
        _strip(kern)
    return module


def test_double_buffer_then_insert_sync_matches_hand_written_ping_pong() -> None:
    """512^3: nbuf=1 hand-written, nbuf=2 hand-written, and nbuf=1 with its flags stripped then
    double-buffer + insert-sync (timing-only cycles)."""
    cycles = lambda m: simulate(m, None, {}, HW, timing_only=True).report["total_cycles"]  # noqa: E731
    kw = dict(tm=128, tn=256, tk=64, l1_k=256, block_dim=HW.num_aic, out_dtype="f32")
    one, two = (cycles(parse(matmul_ir(512, 512, 512, nbuf=nb, **kw))) for nb in (1, 2))
    module = _single_buffered(512, 512)
    (kern,) = _kernels(module)
    assert double_buffer(kern, HW) == 2  # the L1 chunk loop and the L0 step loop
    slots = [o for o in kern.walk() if isinstance(o, ascend.AllocOp) and "ascend.slot" in o.attributes]
    assert len(slots) == 8  # L1 A/B and L0A/L0B, two slots each
    assert insert_sync(kern) > 0
    got = cycles(module)
    assert got < 0.9 * one and got <= 1.02 * two, (one, two, got)


def test_double_buffered_matmul_numerics() -> None:
    """A 256 x 256 x 1024 product (4 L1 chunks of 4 L0 steps: both slots of both levels run) vs numpy."""
    module = _single_buffered(256, 1024)
    (kern,) = _kernels(module)
    double_buffer(kern, HW)
    insert_sync(kern)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 1024)).astype(np.float16)
    b = rng.standard_normal((1024, 256)).astype(np.float16)
    out = simulate(module, None, {"a": a, "b": b}, HW).outputs["c"]
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-3, atol=2e-2)


def test_remove_redundant_keeps_template_kernels_race_free(mlp) -> None:
    """Events the analysis shows redundant removed from the templates' kernels: the full
    simulation (every block, every iteration, race and deadlock detectors on) still passes, the
    outputs are the reference's and the cycles are not worse."""
    from ascendir.transforms.ascend.insert_sync import remove_redundant

    module, weights, inputs, ref = mlp
    before = simulate(module, weights, inputs, HW).report["total_cycles"]
    module = module.clone()
    assert sum(remove_redundant(k) for k in _kernels(module)) > 0
    res = simulate(module, weights, inputs, HW)
    assert res.report["total_cycles"] <= before
    for key in ref.files:
        if key.startswith("output:"):
            np.testing.assert_allclose(res.outputs[key[len("output:"):]], ref[key], rtol=1e-3, atol=1e-4)


def _mix_inputs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    return a, b, np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0)


def test_mix_kernel_without_flags_races() -> None:
    """The hand-written mix kernel of filecheck/insert-sync/mix_kernel.mlir as written (no flag):
    the interpreter's race detector rejects it."""
    a, b, _ = _mix_inputs()
    with pytest.raises(Exception, match="race in kernel @mm_relu"):
        simulate(parse(MIX_IR.read_text()), None, {"a": a, "b": b}, HW)


@pytest.mark.parametrize("plan", [False, True])
def test_mix_kernel_insert_sync_runs(plan: bool) -> None:
    """After insert-sync (planned first or not) the mix kernel runs with the race and deadlock
    detectors on, z = relu(a @ b) as numpy computes it, and what insert-sync leaves is exactly
    what it needs: no conflict left, and each cross-unit event removed alone is a race again."""
    from ascendir.hardware import load_target as _lt
    from ascendir.costmodel.memory import plan_kernel

    a, b, ref = _mix_inputs()
    module = parse(MIX_IR.read_text())
    (kern,) = _kernels(module)
    if plan:
        plan_kernel(kern, _lt("ascend910b2"))
    assert insert_sync(kern) > 0 and conflicts(kern) == []
    out = simulate(module, None, {"a": a, "b": b}, HW).outputs["z"]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    cross = sorted({(o.src.data, o.dst.data, o.event.value.data) for o in kern.walk()
                    if isinstance(o, ascend.FlagOp) and o.attributes["units"].src != o.attributes["units"].dst})
    assert len(cross) == 4  # FIX -> MTE2 to each AIV, MTE2 -> FIX from each
    for key in cross:
        trial = module.clone()
        (k2,) = _kernels(trial)
        for o in [o for o in k2.walk() if isinstance(o, ascend.FlagOp) and (o.src.data, o.dst.data, o.event.value.data) == key]:
            o.detach()
            o.erase()
        with pytest.raises(Exception, match="race in kernel @mm_relu"):
            simulate(trial, None, {"a": a, "b": b}, HW)


def test_double_buffered_mix_kernel_runs() -> None:
    """double-buffer then insert-sync on the 910B mix kernel of filecheck/double-buffer/
    mix_subblock.mlir (rows added on AIV 0 and AIV 1, each ping-ponged in its own UB): each
    AIV's slots get their own events and the kernel runs race- and deadlock-free, z = x + y."""
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer
    from ascendir.transforms.ascend.insert_sync import InsertSync
    from xdsl.context import Context

    text = (Path(__file__).parent / "filecheck" / "double-buffer" / "mix_subblock.mlir").read_text()
    t = "memref<768x128xf16, #ascend<space gm>>"
    host = f"""  func.func @main(%x: {t} {{onnx.name = "x"}}, %y: {t} {{onnx.name = "y"}}) -> ({t} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {t}
    ascend.launch @add(%x, %y, %z) : {t}, {t}, {t}
    func.return %z : {t}
  }}
}}
"""
    module = parse(text[: text.rstrip().rindex("}")] + host)
    DoubleBuffer(target=HW.name, quiet=True).apply(Context(), module)
    assert any("ascend.slot" in o.attributes for o in module.walk())
    InsertSync().apply(Context(), module)
    add = next(k for k in _kernels(module) if k.sym_name.data == "add")
    assert {o.attributes["units"].units for o in add.walk() if isinstance(o, ascend.FlagOp)} == {("aiv", "aiv"), ("aiv1", "aiv1")}
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((768, 128)).astype(np.float16) for _ in range(2))
    out = simulate(module, None, {"x": x, "y": y}, HW).outputs["z"]
    np.testing.assert_array_equal(out, x + y)


def _lowering_insertions(monkeypatch) -> list[int]:
    """The pairs the lowering's insert-sync inserts, one entry per kernel it analyses."""
    import ascendir.transforms.ascend.insert_sync as mod
    from ascendir.transforms.ascend.insert_sync import sync_pass

    added: list[int] = []
    real = mod.insert_sync
    spy = lambda k, unfixed=None: added.append(real(k, unfixed)) or added[-1]  # noqa: E731
    monkeypatch.setattr(mod, "insert_sync", spy)  # plan-memory's call (it imports from the package)
    monkeypatch.setattr(sync_pass, "insert_sync", spy)  # the pass's own
    return added


@pytest.mark.parametrize("hq, hkv, s, flags", [(1, 1, 1024, 1040), (1, 1, 4096, 1040), (2, 1, 4096, 1040)])
def test_causal_flash_attention_template_gets_no_flag(monkeypatch, hq: int, hkv: int, s: int, flags: int) -> None:
    """The causal FlashAttention template (its KV loop runs 1..s/128 - 1 times, S and P pass
    through 2-slot GM rings picked by j % 2) has every flag it needs: the lowering's insert-sync
    analyses it (its UB buffers share bytes) and inserts nothing. The KV loop of the last q block
    runs 7 (1024) or more times; a sampled run that skipped an odd number of its iterations paired
    the AIV's wait for S slot 1 with the AIC's set after slot 0 and inserted 4 cross-unit pairs
    (140 flag ops instead of 132, +9.8 % cycles on the 4096 causal steady case). The template's
    own count was 154 since its 256-key blocks run as two 128-key cube steps (132 before); 457
    since K, V, P and Q ping-pong in L1 (the S and P·V stages and the item emitted once per
    slot parity) and Q·Kᵀ runs in 64-key steps whose Kᵀ and S ping-pong in L0B / L0C; 800 with
    Bc = 128 (1040 with 256) since the software pipeline crosses items (the next item's first key
    blocks emitted under the current item's tail). The search takes Bc = 256 for all three since
    its estimate counts the workspace's first touches per pipe (simulated 19,425 vs 21,496 cycles
    with Bc = 128 at 1024, 85,156 vs 89,261 at 4096)."""
    from test_flash_attention import attention_ir, compile_attention

    added = _lowering_insertions(monkeypatch)
    module = compile_attention(attention_ir(1, hq, hkv, s, s, 128, 128, True, dt="f16"), "ascend910b2")
    assert added and added == [0] * len(added)
    (fa,) = [k for k in _kernels(module) if k.core_type.data == "mix"]
    assert conflicts(fa) == []
    sets = [o for o in fa.walk() if isinstance(o, ascend.SetFlagOp)]
    assert len(sets) == len([o for o in fa.walk() if isinstance(o, ascend.WaitFlagOp)]) == flags


def _ring3(tiles: int) -> str:
    """z = 2 x over `tiles` 32-row tiles through a 3-slot UB ring (slot j % 3), flags as an
    Ascend C TQue of depth 3: the WAR event MTE3 -> MTE2 primed three times."""
    g, u = f"memref<{32 * tiles}x128xf16, #ascend<space gm>>", "memref<32x128xf16, #ascend<space ub>>"
    gs = "memref<32x128xf16, strided<[128, 1], offset: ?>, #ascend<space gm>>"
    us = "memref<32x128xf16, strided<[128, 1], offset: ?>, #ascend<space ub>>"
    return f"""builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">}} {{
  ascend.kernel @ring3(%x: {g}, %z: {g}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %ring = ascend.alloc : memref<96x128xf16, #ascend<space ub>>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %n = arith.constant {tiles} : index
    ascend.set_flag MTE3 -> MTE2, 0
    ascend.set_flag MTE3 -> MTE2, 0
    ascend.set_flag MTE3 -> MTE2, 0
    scf.for %j = %c0 to %n step %c1 {{
      %row = arith.muli %j, %c32 : index
      %slot = arith.remui %j, %c3 : index
      %srow = arith.muli %slot, %c32 : index
      %xs = memref.subview %x[%row, 0] [32, 128] [1, 1] : {g} to {gs}
      %zs = memref.subview %z[%row, 0] [32, 128] [1, 1] : {g} to {gs}
      %b = memref.subview %ring[%srow, 0] [32, 128] [1, 1] : memref<96x128xf16, #ascend<space ub>> to {us}
      ascend.wait_flag MTE3 -> MTE2, 0
      ascend.copy %xs, %b : {gs}, {us}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.vmuls %b, %b {{scalar = 2.0 : f64}} : {us}, {us}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      ascend.copy %b, %zs : {us}, {gs}
      ascend.set_flag MTE3 -> MTE2, 0
    }}
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.wait_flag MTE3 -> MTE2, 0
    ascend.return
  }}
  func.func @main(%x: {g} {{onnx.name = "x"}}) -> ({g} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {g}
    ascend.launch @ring3(%x, %z) : {g}, {g}
    func.return %z : {g}
  }}
}}"""


@pytest.mark.parametrize("tiles", [7, 8, 9, 10, 11, 13])
def test_three_slot_ring_needs_no_flag(tiles: int) -> None:
    """A 3-slot ring (slot j % 3) with complete flags, over trip counts whose sampled middle is
    not a multiple of 3 unless the head grows: nothing to insert, and the interpreter (race
    detector on) computes z = 2 x."""
    module = parse(_ring3(tiles))
    (kern,) = _kernels(module)
    assert conflicts(kern) == []
    assert insert_sync(kern) == 0
    x = np.random.default_rng(0).standard_normal((32 * tiles, 128)).astype(np.float16)
    np.testing.assert_array_equal(simulate(module, None, {"x": x}, HW).outputs["z"], x * 2)


def test_partly_written_buffer_is_not_ping_ponged() -> None:
    """@ring of filecheck/double-buffer/partial_write.mlir: a 32-row UB window of which each
    iteration refreshes one 16-row half (through a subview) and stores all of it, so the other
    half carries the previous iteration's rows. double-buffer used to give it a second slot
    (its first op in the loop writes it), and each slot then held only every other iteration's
    rows: 112 of 256 output rows wrong. After double-buffer + insert-sync it runs as numpy says."""
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer
    from ascendir.transforms.ascend.insert_sync import InsertSync
    from xdsl.context import Context

    text = (Path(__file__).parent / "filecheck" / "double-buffer" / "partial_write.mlir").read_text()
    tx, tz = "memref<128x128xf32, #ascend<space gm>>", "memref<256x128xf32, #ascend<space gm>>"
    host = f"""  func.func @main(%x: {tx} {{onnx.name = "x"}}) -> ({tz} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {tz}
    ascend.launch @ring(%x, %z) : {tx}, {tz}
    func.return %z : {tz}
  }}
}}
"""
    module = parse(text[: text.rstrip().rindex("}")] + host)
    DoubleBuffer(target=HW.name, quiet=True).apply(Context(), module)
    InsertSync().apply(Context(), module)
    x = np.random.default_rng(5).standard_normal((128, 128)).astype(np.float32)
    want, window = np.zeros((256, 128), np.float32), np.zeros((32, 128), np.float32)
    for i in range(8):
        window[16 * i % 32:][:16] = x[16 * i:16 * i + 16]
        want[32 * i:32 * i + 32] = window
    np.testing.assert_array_equal(simulate(module, None, {"x": x}, HW).outputs["z"], want)


def test_plan_memory_after_insert_sync_runs() -> None:
    """filecheck/plan-memory/after_insert_sync.mlir through insert-sync then plan-memory (the
    order `-p double-buffer,insert-sync,plan-memory` runs them): plan-memory shares bytes between
    buffers of disjoint lifetimes, which the flags placed before did not order; it used to leave
    a V -> MTE2 race there. Now it adds the flags and the kernel runs as numpy says."""
    from ascendir.transforms.ascend.plan_memory import PlanMemory
    from ascendir.transforms.ascend.insert_sync import InsertSync
    from xdsl.context import Context

    module = parse((Path(__file__).parent / "filecheck" / "plan-memory" / "after_insert_sync.mlir").read_text())
    InsertSync().apply(Context(), module)
    PlanMemory().apply(Context(), module)
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    out = simulate(module, None, {"x": x, "y": y}, HW).outputs
    np.testing.assert_array_equal(out["z"], np.exp(x))
    np.testing.assert_array_equal(out["z2"], np.exp(y))


def test_paged_kernels_are_analysed_and_need_no_flag() -> None:
    """A paged KV cache's kernels place GM windows by data (a block table entry read with
    ascend.get_value): the analysis takes such a window as anywhere in its buffer instead of
    giving up on the kernel, so on-chip buffers sharing bytes still get their flags; the
    templates themselves need none."""
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.session import Session

    text = (Path(__file__).parent / "filecheck" / "page-kv-cache" / "decode_step.mlir").read_text()
    module = parse("\n".join(line for line in text.splitlines() if not line.startswith("//")))
    session = Session(echo_notes=False)
    spec = "cache-append,fuse-attention,page-kv-cache{block_size=16 blocks=3 pool=3},choose-tiling"
    run_passes(module, parse_pipeline(spec, "O2", "ascend910b2", None), None, None, session)
    lower(module, None, "ascend910b2", session)
    kernels = {k.sym_name.data: k for k in _kernels(module)}
    assert {"flash_attention_0", "paged_cache_append_0"} <= set(kernels)
    assert any(isinstance(o, ascend.GetValueOp) for o in kernels["flash_attention_0"].walk())
    _need_no_flag(module)


DYN_IR = Path(__file__).parent / "filecheck" / "insert-sync" / "mix_data_dependent.mlir"


def _dyn_inputs(tiles: int, relu: bool):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((256, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    return {"a": a, "b": b, "g": np.array([tiles, int(relu)], np.int64)}, (np.maximum(ref, 0) if relu else ref)[: 32 * tiles]


def test_data_dependent_mix_kernel_without_flags_races() -> None:
    """filecheck/insert-sync/mix_data_dependent.mlir as written (a loop bound and a branch read
    from GM, no flag): the interpreter's race detector rejects it."""
    inputs, _ = _dyn_inputs(3, True)
    with pytest.raises(Exception, match="race in kernel @mm_dyn"):
        simulate(parse(DYN_IR.read_text()), None, inputs, HW)


def test_data_dependent_mix_kernel_insert_sync_runs() -> None:
    """insert-sync analyses a kernel whose loop bound and branch are data (each data trip count
    and branch outcome executed: analysis._data_trips), and the result runs race- and
    deadlock-free against numpy for both outcomes of the branch and 0, 1, 2 and all 8 row
    tiles; no conflict is left in any covered execution."""
    module = parse(DYN_IR.read_text())
    (kern,) = _kernels(module)
    assert conflicts(kern)  # analysed, with conflicts (None before: data-dependent control flow)
    assert insert_sync(kern) > 0 and conflicts(kern) == []
    for tiles in (0, 1, 2, 8):
        for relu in (False, True):
            inputs, ref = _dyn_inputs(tiles, relu)
            out = simulate(module, None, inputs, HW).outputs["z"]  # raises on a race or a deadlock
            np.testing.assert_allclose(out[: 32 * tiles], ref, rtol=1e-5, atol=1e-5)


def _one_tile_per_core() -> str:
    """z tile t = 2 x tile t (4 tiles of 32 rows), block b doing tile (s + b) % 8 when it is below
    4, s read from GM: the tile loop `(s + b) % 8 to 4 step 8` runs at most once (the MoE
    grouped_matmul N-tile loop's shape), its second-tile `scf.if` (t + 8 < 4) is never taken.
    Flags only for the hand-offs within one tile: a second trip or the branch would race
    (WAR: MTE2 rewriting %u while V reads it, V rewriting %v while MTE3 stores it)."""
    g, u = "memref<128x128xf32, #ascend<space gm>>", "memref<32x128xf32, #ascend<space ub>>"
    gs = "memref<32x128xf32, strided<[128, 1], offset: ?>, #ascend<space gm>>"
    return f"""builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">}} {{
  ascend.kernel @tile1(%x: {g}, %sv: memref<1xi64, #ascend<space gm>>, %z: {g}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}} {{
    %u = ascend.alloc : {u}
    %v = ascend.alloc : {u}
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c32 = arith.constant 32 : index
    %blk = ascend.block_idx : index
    %s = ascend.get_value %sv[%c0] : memref<1xi64, #ascend<space gm>>
    %sb = arith.addi %s, %blk : index
    %first = arith.remui %sb, %c8 : index
    scf.for %t = %first to %c4 step %c8 {{
      %row = arith.muli %t, %c32 : index
      %xs = memref.subview %x[%row, 0] [32, 128] [1, 1] : {g} to {gs}
      %zs = memref.subview %z[%row, 0] [32, 128] [1, 1] : {g} to {gs}
      ascend.copy %xs, %u : {gs}, {u}
      ascend.set_flag MTE2 -> V, 0
      ascend.wait_flag MTE2 -> V, 0
      ascend.vmuls %u, %v {{scalar = 2.0 : f64}} : {u}, {u}
      ascend.set_flag V -> MTE3, 0
      ascend.wait_flag V -> MTE3, 0
      ascend.copy %v, %zs : {u}, {gs}
      %t2 = arith.addi %t, %c8 : index
      %more = arith.cmpi slt, %t2, %c4 : index
      scf.if %more {{
        ascend.copy %xs, %u : {gs}, {u}
        ascend.vmuls %u, %v {{scalar = 2.0 : f64}} : {u}, {u}
      }}
    }}
    ascend.return
  }}
  func.func @main(%x: {g} {{onnx.name = "x"}}, %sv: memref<1xi64, #ascend<space gm>> {{onnx.name = "s"}}) -> ({g} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {g}
    ascend.launch @tile1(%x, %sv, %z) : {g}, memref<1xi64, #ascend<space gm>>, {g}
    func.return %z : {g}
  }}
}}"""


def test_bounded_data_loop_needs_no_flag() -> None:
    """A data-bound loop whose trip count the analysis bounds by [0, 1] (its start is `% 8`,
    insert_sync/bounds.py) and a branch it proves never taken: only the 0 and 1 trip runs, no
    conflict (before: 6 trips and the branch run, loop-carried WARs reported that no execution
    has); the interpreter (race detector on) agrees for every start, and z = 2 x on the tiles
    the blocks do."""
    module = parse(_one_tile_per_core())
    (kern,) = _kernels(module)
    assert conflicts(kern) == []
    x = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    for s in range(8):
        z = simulate(module, None, {"x": x, "s": np.array([s], np.int64)}, HW).outputs["z"]
        for t in {(s + b) % 8 for b in range(2)} & set(range(4)):
            np.testing.assert_array_equal(z[32 * t : 32 * t + 32], 2 * x[32 * t : 32 * t + 32])


def test_bounds_rules() -> None:
    """The interval rules insert-sync decides by (insert_sync/bounds.py): each contains every
    value the op gives (checked on samples), and a comparison is decided only when every pair
    of values agrees; an unsigned one never on values that may be negative."""
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IndexType

    from ascendir.transforms.ascend.insert_sync.bounds import UNBOUNDED, decide, interval, trip_counts
    from ascendir.transforms.ascend.insert_sync.symbolic import ARITH

    a, b = arith.ConstantOp.from_int_and_width(0, IndexType()), arith.ConstantOp.from_int_and_width(1, IndexType())
    spans = {"x": (-5, 30), "c": (24, 24), "y": (0, 7)}
    samples = {"x": range(-5, 31), "c": [24], "y": range(8)}
    for cls in (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.RemUIOp, arith.RemSIOp, arith.DivUIOp, arith.MinSIOp, arith.MaxSIOp):
        for p, q in (("x", "c"), ("x", "y"), ("y", "c")):
            op = cls(a.result, b.result)
            lo, hi = interval(op, [spans[p], spans[q]], [None, 24 if q == "c" else None])
            vals = [ARITH[op.name](i, j) for i in samples[p] for j in samples[q] if j != 0 or cls in (arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.MinSIOp, arith.MaxSIOp)]
            assert lo <= min(vals) and max(vals) <= hi, (op.name, p, q, (lo, hi))
    assert interval(arith.RemUIOp(a.result, b.result), [UNBOUNDED, (24, 24)], [None, 24]) == (0, 23)
    assert decide(2, (24, 31), (8, 8)) is False and decide(2, (0, 7), (8, 8)) is True and decide(2, (0, 8), (8, 8)) is None
    assert decide(6, (-1, 7), (8, 8)) is None  # ult on a value that may be negative
    assert decide(1, (0, 3), (4, 9)) is True and decide(0, (0, 4), (4, 9)) is None
    assert trip_counts((0, 23), (8, 8), 48) == (0, 1) and trip_counts(UNBOUNDED, (8, 8), 1)[1] == float("inf")


def test_a_wait_on_the_scalar_unit_orders_the_units_later_ops() -> None:
    """add_ir with its MTE2 -> V hand-off written as a wait of the scalar unit (MTE2 -> S, as
    wait_flag_dev / CrossCoreWaitFlag stop it): the vadd after the wait follows the copies, so
    nothing is missing; as a wait of MTE3 it orders the vadd after nothing."""
    from ascendir.interpreter.testing import add_ir

    base = add_ir(256, 64, 16, block_dim=2, nbuf=1)

    def moved(dst: str, ev: int):
        text = base.replace("ascend.set_flag MTE2 -> V, 0", f"ascend.set_flag MTE2 -> {dst}, {ev}")
        (kern,) = _kernels(parse(text.replace("ascend.wait_flag MTE2 -> V, 0", f"ascend.wait_flag MTE2 -> {dst}, {ev}")))
        return kern

    assert conflicts(moved("S", 0)) == []
    assert conflicts(moved("MTE3", 1))
