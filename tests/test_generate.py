"""`ascendir generate` (api/generate.py): greedy generation from the KV-cache models of
tests/data/kv/* (built by scripts/build_kv_models.py) against onnxruntime's step-by-step
generation stored with them, the timing-only shortcut against simulating every step, and the
errors of models generate cannot feed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ascendir.api.generate import _Model, affine_fill, generate, regions, schema_problem
from ascendir.errors import AscendirError
from tests.cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data" / "kv"  # not tests/data/NAME: the corpus tests iterate those
KV_MODELS = ["llama", "qwen2", "mistral", "gpt2", "llama_dynamo"]


@pytest.mark.sampled
@pytest.mark.parametrize("name", KV_MODELS)
def test_generation_equals_onnxruntime(name: str) -> None:
    ref = np.load(DATA / name / "reference.npz")
    want = ref["generated_ids"]
    g = generate(DATA / name / "model.onnx", 0, want.shape[1], prompt=ref["input:input_ids"])
    np.testing.assert_array_equal(g.outputs["generated_ids"], want)
    np.testing.assert_allclose(g.outputs["final_logits"], ref["final_logits"], rtol=1e-4, atol=1e-5)
    assert schema_problem(g.report) is None
    r = g.report
    assert r["batch"] == want.shape[0] and r["new_tokens"] == want.shape[1]
    assert len(r["tpot_s"]) == want.shape[1] - 1 == r["steps"]["interpolated"] + len(r["steps"]["simulated_cache_len"])
    assert r["tpot_cache_len"] == list(range(6, 6 + want.shape[1] - 1))


@pytest.mark.sampled
def test_cli_numerics_and_timing_only_agree(tmp_path: Path) -> None:
    """The CLI writes generated_ids / final_logits equal to onnxruntime's; --timing-only gives the
    same TTFT and TPOT without data."""
    ref = np.load(DATA / "qwen2" / "reference.npz")
    model = DATA / "qwen2" / "model.onnx"
    res = run_cli("generate", model, "--inputs", DATA / "qwen2" / "reference.npz", "--new-tokens", 3,
                  "--outputs", tmp_path / "o.npz", "--report", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    assert "TTFT" in res.output and "TPOT" in res.output
    out = np.load(tmp_path / "o.npz")
    np.testing.assert_array_equal(out["generated_ids"], ref["generated_ids"][:, :3])
    num = json.loads((tmp_path / "r.json").read_text())
    assert schema_problem(num) is None
    res = run_cli("generate", model, "--prompt-len", 6, "--batch", 2, "--new-tokens", 3, "--timing-only",
                  "--report", tmp_path / "t.json", "--plots", tmp_path / "plots")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "plots" / "tpot.png").stat().st_size > 0 and (tmp_path / "plots" / "tpot.svg").exists()
    tim = json.loads((tmp_path / "t.json").read_text())
    assert tim["ttft_s"] == num["ttft_s"] and tim["tpot_s"] == num["tpot_s"]
    assert tim["timing_only"] and not num["timing_only"]
    # the cache grows by one position of every layer's K and V per step
    kv = num["kv_cache"]
    assert kv["bytes_per_token"] == 2 * 2 * 2 * 16 * 4  # layers x (K, V) x kv_heads x head_dim x fp32
    assert kv["bytes_final"] == 2 * kv["bytes_per_token"] * (6 + 3 - 1)
    assert num["roofline_tpot_s"][0] == pytest.approx(
        (num["hbm_bytes_per_token"]["weights"] * 2 + 2 * kv["bytes_per_token"] * 7) / 1.6e12)


@pytest.mark.sampled
def test_timing_only_interpolation_equals_every_step() -> None:
    """Decode steps differing only in cache length: the interpolated TPOT equals simulating every
    step, and fewer steps are simulated."""
    model = DATA / "llama" / "model.onnx"
    fast = generate(model, 6, 24, batch=1, timing_only=True).report
    full = generate(model, 6, 24, batch=1, timing_only=True, every_step=True).report
    assert fast["ttft_s"] == full["ttft_s"]
    # equal to float rounding (the chord of cycles counted in fractions): 1e-8 relative is
    # 1e-4 of a cycle here; a step that cost one cycle more would be 3e-5 off
    np.testing.assert_allclose(fast["tpot_s"], full["tpot_s"], rtol=1e-8)
    assert fast["steps"]["interpolated"] > 0 and full["steps"]["interpolated"] == 0


@pytest.mark.sampled
def test_interpolation_over_kv_blocks_equals_every_step() -> None:
    """Steps whose decode attention gains a KV block (Bc = 16 here: 128 -> 129 keys): the pieces
    come from the tiling decisions (regions), and the interpolated TPOT still equals simulating
    every step."""
    model = DATA / "llama" / "model.onnx"
    m = _Model(model, "ascend910b2", "fp32", True)
    m.step(1, 1, 120, None)
    starts = [a for a, _ in regions(120, 150, m.tiling_key)]
    assert 128 in starts  # past 128: 129 keys, a KV block more (Bc 16 or 32)
    assert all(m.tiling_key(x)[0][4] == m.tiling_key(x - 1)[0][4] + 1 or m.tiling_key(x)[0][:4] != m.tiling_key(x - 1)[0][:4]
               for x in starts[1:])
    fast = generate(model, 124, 10, batch=1, timing_only=True).report
    full = generate(model, 124, 10, batch=1, timing_only=True, every_step=True).report
    np.testing.assert_allclose(fast["tpot_s"], full["tpot_s"], rtol=1e-8)
    assert fast["steps"]["interpolated"] > 0


@pytest.mark.sampled
def test_launch_reuse_across_layers_and_steps_is_exact(tmp_path: Path, monkeypatch) -> None:
    """A 2-layer LLaMA-2-7B-shaped decoder (benchmarks/kv_decoder_model.py, weights never read),
    timing-only, every step simulated: with the launch memo (interpreter/accel/memo.py) shared by
    the steps, a decode step reuses launches of the step before, its first layer's too; the
    report (TTFT, every TPOT, bytes, bounds) equals the one with launch reuse off."""
    import functools
    import sys

    import ascendir.interpreter as interpreter
    from ascendir.interpreter import Accel

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import kv_decoder_model

    model = kv_decoder_model.build(tmp_path / "m", "llama2-7b", layers=2)
    progs = []
    compile_module = interpreter.compile_module

    def spy(*a, **k):
        progs.append(compile_module(*a, **k))
        return progs[-1]

    monkeypatch.setattr(interpreter, "compile_module", spy)
    on = generate(model, 32, 3, timing_only=True, shape_only=True, every_step=True).report
    # decode steps after the first (progs[0] is the prefill, which may launch as many kernels)
    steps = [p for p in progs[2:] if p.launches == progs[1].launches]
    assert len(steps) == 1
    # layer 0 of a later step: its launches (but the attention's, whose cache grew) come from
    # the step before, not from layer 0 of its own step
    assert all(p.memo_hits > progs[1].memo_hits for p in steps), [p.memo_hits for p in progs]
    simulate = interpreter.simulate
    monkeypatch.setattr(interpreter, "simulate", functools.partial(simulate, accel=Accel(launch_memo=False)))
    progs.clear()
    off = generate(model, 32, 3, timing_only=True, shape_only=True, every_step=True).report
    assert all(p.memo_hits == 0 for p in progs)
    assert on == off


def test_affine_fill_pieces_skip_the_search_of_known_jumps() -> None:
    """Jumps at the boundaries of the given pieces cost no bisection: four points a piece."""
    cost = lambda x: 64.0 * x + 5000.0 * (x // 128)  # noqa: E731
    pieces = regions(2048, 6143, lambda x: x // 128)
    got, simulated = affine_fill(2048, 6143, cost, pieces)
    assert all(got[x] == pytest.approx(cost(x), rel=1e-12) for x in range(2048, 6144))
    assert len(pieces) == 32 and len(simulated) == 4 * 32


@pytest.mark.parametrize("cost, lo, hi, most", [
    (lambda x: 3.0 * x + (5.0 * (x - 70) if x > 70 else 0.0), 10, 200, 8),  # a change of slope: found where the end lines cross
    (lambda x: max(9000.0, 22.0 * x - 37000.0), 2048, 2302, 8),  # flat, then bound by bytes: the kink of a max
    (lambda x: max(9000.0, 22.0 * x - 37000.0) + 5000.0 * (x // 2176), 2048, 2302, 20),  # a kink and a jump
    (lambda x: 64.0 * x + 5000.0 * (x // 128), 2048, 2302, 16),  # a KV tile's jump
    (lambda x: 64.0 * x + 5000.0 * (x // 128), 2048, 6143, 400),  # 32 jumps: quarter points would alias
    (lambda x: 10.0 * x + 777.0 * ((2 * x + 4) // 3), 100, 355, 256),  # rows over cores: no two steps alike
])
def test_affine_fill_is_exact(cost, lo, hi, most) -> None:
    """Every value equals the cost function; only the pieces holding a jump or kink are refined."""
    got, simulated = affine_fill(lo, hi, cost)
    assert sorted(got) == list(range(lo, hi + 1))
    assert all(got[x] == pytest.approx(cost(x), rel=1e-12) for x in got)
    assert len(simulated) <= most


def test_static_cache_model_names_the_axis() -> None:
    res = run_cli("generate", DATA / "llama_static" / "model.onnx", "--new-tokens", 2)
    assert_clean_error(res, "past_key.0", "axis 2", "static (16)", "needs it free")


def test_model_without_cache_is_refused() -> None:
    assert_clean_error(run_cli("generate", DATA.parent / "llama_small" / "model.onnx"), "no KV-cache inputs")


def test_bad_prompt_is_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "p.npz", input_ids=np.array([[1, 999]]))
    assert_clean_error(run_cli("generate", DATA / "llama" / "model.onnx", "--inputs", tmp_path / "p.npz"),
                       "[0, 256)")
    np.savez(tmp_path / "q.npz", other=np.array([[1, 2]]))
    assert_clean_error(run_cli("generate", DATA / "llama" / "model.onnx", "--inputs", tmp_path / "q.npz"), "input_ids")
    assert_clean_error(run_cli("generate", DATA / "llama" / "model.onnx", "--timing-only", "--outputs", tmp_path / "o.npz"),
                       "--outputs needs numerics")
    assert not (tmp_path / "o.npz").exists()
    with pytest.raises(AscendirError, match="must be >= 1"):
        generate(DATA / "llama" / "model.onnx", 4, 0)


def test_outputs_never_overwrite_what_generate_reads(tmp_path: Path) -> None:
    """--outputs / --report naming the model, the prompt or each other: one line, nothing
    written (as run / compile / sweep; generate used to overwrite its own model)."""
    model = tmp_path / "m.onnx"
    model.write_bytes((DATA / "llama" / "model.onnx").read_bytes())
    prompt = tmp_path / "p.npz"
    np.savez(prompt, input_ids=np.array([[1, 2, 3]]))
    before = model.read_bytes(), prompt.read_bytes()
    for args in (("--outputs", model), ("--report", model), ("--inputs", prompt, "--outputs", prompt),
                 ("--outputs", tmp_path / "o", "--report", tmp_path / "o")):
        line = assert_clean_error(run_cli("generate", model, "--new-tokens", 2, *args))
        assert "a file this run reads" in line or "output paths must differ" in line, line
    assert (model.read_bytes(), prompt.read_bytes()) == before
    assert not (tmp_path / "o").exists()


@pytest.mark.sampled
def test_report_renders_a_generate_report(tmp_path: Path) -> None:
    """`ascendir report` on a `generate --report` file prints what generate printed (it used to
    refuse it: "no 'total_cycles'"); a broken one, --diff or --plots on one are one line."""
    r = tmp_path / "g.json"
    ran = run_cli("generate", DATA / "llama" / "model.onnx", "--prompt-len", 4, "--new-tokens", 2, "--timing-only", "--report", r)
    assert ran.exit_code == 0, ran.output
    shown = run_cli("report", r)
    assert shown.exit_code == 0 and shown.output == ran.output, shown.output
    assert_clean_error(run_cli("report", "--diff", r, r), "report of `ascendir generate`", "--diff")
    assert_clean_error(run_cli("report", r, "--plots", tmp_path / "p"), "report of `ascendir generate`")
    data = json.loads(r.read_text())
    data["ttft_s"] = -1.0
    r.write_text(json.dumps(data))
    assert_clean_error(run_cli("report", r), "not a report of `ascendir generate --report`", "ttft_s")


@pytest.mark.sampled
def test_cache_in_place_writes_only_the_new_rows() -> None:
    """cache-append: a decode step launches cache_append kernels (the new row written into the
    cache) instead of concat kernels copying the past; the graph's concat path gives the same
    tokens and logits and costs more."""
    from ascendir.api.generate import _Model

    model = DATA / "llama" / "model.onnx"
    kinds = {}
    for in_place in (True, False):
        report = _Model(model, "ascend910b2", "fp32", False, in_place).step(2, 1, 40, None).report
        kinds[in_place] = {k["name"].rsplit("_", 1)[0]: k for k in report["kernels"]}
        kinds[in_place]["total"] = report["total_cycles"]
    assert "cache_append" in kinds[True] and "cache_append" not in kinds[False]
    # the in-place kernel moves the new rows only: 2 sequences x 2 heads x 16 x fp32, read and written
    assert kinds[True]["cache_append"]["bytes"]["gm_write"] == 2 * 2 * 16 * 4
    assert kinds[True]["total"] < kinds[False]["total"]
    ref = np.load(DATA / "mistral" / "reference.npz")
    g = generate(DATA / "mistral" / "model.onnx", 0, 4, prompt=ref["input:input_ids"], in_place=False)
    np.testing.assert_array_equal(g.outputs["generated_ids"], ref["generated_ids"])
    np.testing.assert_allclose(g.outputs["final_logits"], ref["final_logits"], rtol=1e-4, atol=1e-5)


@pytest.mark.sampled
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_tensor_parallel_generation_equals_onnxruntime(name: str) -> None:
    """--tp 2: every step sharded (shard-tensor-parallel: heads and the MLP split, KV heads dealt
    over the ranks) and the two ranks simulated together give onnxruntime's tokens and logits;
    the report names the devices, its KV bytes are one device's half."""
    ref = np.load(DATA / name / "reference.npz")
    want = ref["generated_ids"]
    g = generate(DATA / name / "model.onnx", 0, want.shape[1], prompt=ref["input:input_ids"], tp=2)
    np.testing.assert_array_equal(g.outputs["generated_ids"], want)
    np.testing.assert_allclose(g.outputs["final_logits"], ref["final_logits"], rtol=1e-4, atol=1e-5)
    r = g.report
    assert schema_problem(r) is None and r["tp"] == 2 and r["topology"] == "atlas800-a2"
    one = generate(DATA / name / "model.onnx", 0, 2, prompt=ref["input:input_ids"], timing_only=True).report
    assert r["hbm_bytes_per_token"]["kv"] < one["hbm_bytes_per_token"]["kv"]


@pytest.mark.sampled
def test_tensor_parallel_over_more_ranks_than_kv_heads_equals_onnxruntime() -> None:
    """--tp 4 on 2 KV heads: each KV head is held by two ranks, and the cache the step returns
    keeps one copy of each head (all_gather, then every other chunk)."""
    ref = np.load(DATA / "llama" / "reference.npz")
    want = ref["generated_ids"]
    g = generate(DATA / "llama" / "model.onnx", 0, want.shape[1], prompt=ref["input:input_ids"], tp=4)
    np.testing.assert_array_equal(g.outputs["generated_ids"], want)
    np.testing.assert_allclose(g.outputs["final_logits"], ref["final_logits"], rtol=1e-4, atol=1e-5)


@pytest.mark.sampled
def test_tensor_parallel_replicates_a_single_kv_head() -> None:
    """--tp 2 on Mistral's one KV head: every rank computes and holds that head (its K / V
    projections replicated, as vLLM / MindIE replicate KV heads fewer than the ranks), the
    query heads and the MLP are split; onnxruntime's tokens and logits, and the single-device
    run's. Before, the K projection was split along head_dim and RoPE's halves dealt it as
    packed parts: "an operand of 2 packed parts (q|k|v) along dim 3 cannot be gathered"."""
    ref = np.load(DATA / "mistral" / "reference.npz")
    want = ref["generated_ids"]
    g = generate(DATA / "mistral" / "model.onnx", 0, want.shape[1], prompt=ref["input:input_ids"], tp=2)
    np.testing.assert_array_equal(g.outputs["generated_ids"], want)
    np.testing.assert_allclose(g.outputs["final_logits"], ref["final_logits"], rtol=1e-4, atol=1e-5)
    one = generate(DATA / "mistral" / "model.onnx", 0, want.shape[1], prompt=ref["input:input_ids"])
    np.testing.assert_allclose(g.outputs["final_logits"], one.outputs["final_logits"], rtol=1e-4, atol=1e-5)
    kv = g.report["kv_cache"]
    assert kv["bytes_final_per_device"] == kv["bytes_final"]  # each device holds the one head
    # a decode step: K / V never cross the link, the one all_gather is the vocab-parallel logits'
    step = _Model(DATA / "mistral" / "model.onnx", "ascend910b2", "fp32", False, tp=2).step(1, 1, 8, None).report
    gathers = [c for c in step["cluster"]["collectives"] if c["kernel"].startswith("all_gather")]
    assert len(gathers) == 1


def test_tensor_parallel_errors_are_one_line() -> None:
    model = DATA / "qwen2" / "model.onnx"
    assert_clean_error(run_cli("generate", model, "--tp", 2, "--devices", 4), "--tp 2 runs on 2 devices; --devices 4 differs")
    assert_clean_error(run_cli("generate", model, "--tp", 2, "--devices", 1), "--tp 2 runs on 2 devices; --devices 1 differs")
    assert_clean_error(run_cli("generate", model, "--devices", 16, "--timing-only"), "does not fit topology atlas800-a2 (8 devices)")
    assert_clean_error(run_cli("generate", model, "--tp", 3, "--timing-only"), "4 query heads do not split over 3 devices")
    assert_clean_error(run_cli("generate", model, "--topology", "atlas800-a2"), "give --tp N")


@pytest.mark.sampled
@pytest.mark.parametrize("tp", [2, 4])
def test_tensor_parallel_cache_stays_with_its_heads(tp: int) -> None:
    """--tp: each rank holds only its KV heads (the one it shares with tp / 2 - 1 others at tp 4
    over 2 KV heads): the cache arguments and presents of the sharded step have the rank's
    heads, and no collective gathers them (the one all_gather left is the vocab-parallel
    logits'). The report gives the bytes a device holds."""
    from ascendir.driver import io_names, main_func, parse_pipeline, run_passes
    from ascendir.frontends.onnx import import_onnx
    from ascendir.session import Session
    from ascendir.transforms.nn.shard_tensor_parallel import shard_module

    m = _Model(DATA / "llama" / "model.onnx", "ascend910b2", "fp32", False)
    module, weights = import_onnx(m.path, m.sig.shapes(2, 1, 40), dtype="fp32")
    session = Session(echo_notes=False)
    run_passes(module, parse_pipeline("cache-append,O2", "O2", "ascend910b2", None), weights, None, session)
    shard_module(module, weights, tp, False, "ascend910b2", session)
    main = main_func(module)
    args = dict(zip(io_names(main, False), main.function_type.inputs.data))
    results = dict(zip(io_names(main, True), main.function_type.outputs.data))
    for c in m.sig.cache:
        assert args[c.past].get_shape()[1] == results[c.present].get_shape()[1] == 1  # of 2 KV heads
    assert sum(op.name == "nn.all_gather" for op in module.walk()) == 1
    r = generate(DATA / "llama" / "model.onnx", 6, 3, timing_only=True, tp=tp).report
    assert r["kv_cache"]["bytes_final_per_device"] * 2 == r["kv_cache"]["bytes_final"]


@pytest.mark.sampled
@pytest.mark.parametrize("tp", [2, 4])
def test_tensor_parallel_prefill_gathers_only_the_last_logits(tp: int) -> None:
    """A prefill under --tp returns each rank's KV heads (its presents, marked nn.kv_cache, are
    not all-gathered: there is no cache argument to append to) and computes the lm_head for the
    last position only (greedy decoding reads no other): the one all_gather left moves one row
    of the vocab-parallel logits. Before, each layer all-gathered its new K and V, and the
    logits of every prompt position were gathered."""
    m = _Model(DATA / "llama" / "model.onnx", "ascend910b2", "fp32", False, tp=tp, topology="atlas800-a2")
    vocab = m.vocab_size()
    r = m.step(2, 40, 0, None).report
    gathers = [c for c in r["cluster"]["collectives"] if c["kernel"].startswith("all_gather")]
    assert len(gathers) == 1
    assert gathers[0]["bytes_sent"] == 2 * 1 * vocab // tp * 4 * (tp - 1)  # batch 2, one row, f32, to tp - 1 peers
