"""`ascendir generate --kv-block-size` (api/generate.py, transforms/nn/page_kv_cache.py): the KV
cache as pools of blocks read through a block table. Checked against onnxruntime's step-by-step
generation (contiguous past/present fed forward, run here) and against the contiguous run, over
prompts long enough that sequences hold several blocks, cross a block boundary while decoding
and the attention's KV tile gathers several blocks; timing-only against numerics (the table is
fed to both); the host's block allocation; bad block sizes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ascendir.api.generate import _Model, generate, schema_problem
from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from tests.cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data" / "kv"


def _ort_generate(model: Path, prompt: np.ndarray, new_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's greedy generation: prefill, then each present fed back as the next past."""
    import onnxruntime as ort

    m = _Model(model, "ascend910b2", "fp32", False)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    ids, past, cache, tokens = prompt, 0, {}, []
    for _ in range(new_tokens):
        feeds = m.feeds(ids, past, cache)
        res = dict(zip(outs, sess.run(None, {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}})))
        logits = res[m.sig.logits][:, -1]
        tokens.append(logits.argmax(-1))
        past += ids.shape[1]
        cache = {c.past: res[c.present] for c in m.sig.cache}
        ids = tokens[-1][:, None]
    return np.stack(tokens, 1), logits


@pytest.mark.sampled
@pytest.mark.parametrize("name, block", [("llama", 16), ("qwen2", 32), ("gpt2", 16)])
def test_paged_generation_equals_onnxruntime_and_contiguous(name: str, block: int) -> None:
    """Prompt 40, 12 new tokens, batch 2: each sequence holds 3 blocks of 16 after the prompt and
    gains a 4th at position 48, its blocks interleaved with the other sequence's; the decode
    attention's KV tile (48 or 32 keys) spans several blocks of 16. Tokens equal onnxruntime's
    and the contiguous run's; the logits too."""
    model = DATA / name / "model.onnx"
    prompt = np.random.default_rng(3).integers(0, 200, (2, 40))
    want_ids, want_logits = _ort_generate(model, prompt, 12)
    paged = generate(model, 0, 12, prompt=prompt, kv_block_size=block)
    np.testing.assert_array_equal(paged.outputs["generated_ids"], want_ids)
    np.testing.assert_allclose(paged.outputs["final_logits"], want_logits, rtol=1e-4, atol=1e-5)
    contiguous = generate(model, 0, 12, prompt=prompt)
    np.testing.assert_array_equal(paged.outputs["generated_ids"], contiguous.outputs["generated_ids"])
    np.testing.assert_allclose(paged.outputs["final_logits"], contiguous.outputs["final_logits"], rtol=1e-5, atol=1e-6)
    kv = paged.report["kv_cache"]
    assert schema_problem(paged.report) is None
    assert kv["layout"] == "paged" and kv["block_size"] == block
    assert kv["blocks_used"] == 2 * -(-51 // block) == kv["blocks_allocated"]  # 40 + 12 - 1 positions
    assert contiguous.report["kv_cache"]["layout"] == "contiguous"


def test_block_table_interleaves_after_the_prompt() -> None:
    """The host's allocation: the prompt's blocks per sequence, then one block per sequence each
    time the sequences cross a block boundary."""
    m = _Model(DATA / "llama" / "model.onnx", "ascend910b2", "fp32", False, kv_block_size=16, capacity=60, prompt_len=40)
    np.testing.assert_array_equal(m.block_table(2, 41), [[0, 1, 2, 0], [3, 4, 5, 0]])
    np.testing.assert_array_equal(m.block_table(2, 49), [[0, 1, 2, 6], [3, 4, 5, 7]])
    assert m.block_table(2, 49).dtype == np.int32 and m.blocks_used(2, 49) == 8


@pytest.mark.sampled
def test_paged_timing_only_equals_numerics() -> None:
    """The block table steers the kernels' addresses, so a timing-only run is fed it too: its
    TTFT and TPOT equal the numerics run's."""
    model = DATA / "llama" / "model.onnx"
    prompt = np.random.default_rng(0).integers(0, 200, (1, 30))
    num = generate(model, 0, 5, prompt=prompt, kv_block_size=16).report
    tim = generate(model, 30, 5, batch=1, timing_only=True, kv_block_size=16, every_step=True).report
    assert tim["ttft_s"] == num["ttft_s"] and tim["tpot_s"] == num["tpot_s"]


def test_paged_decode_launches_the_paged_kernels() -> None:
    """A paged decode step writes its row through the table (paged_cache_append) and its
    attention reads the pool block by block: a table read (scalar pipe) per block."""
    m = _Model(DATA / "llama" / "model.onnx", "ascend910b2", "fp32", True, kv_block_size=16, capacity=64, prompt_len=60)
    report = m.step(2, 1, 60, None).report
    names = {k["name"].rsplit("_", 1)[0] for k in report["kernels"]}
    assert "paged_cache_append" in names and "cache_append" not in names


@pytest.mark.parametrize("size, why", [(24, "multiple of 16"), (8, "16..512"), (1024, "16..512"), (0, "16..512"), (-16, "16..512")])
def test_bad_block_size_is_one_line(size: int, why: str) -> None:
    assert_clean_error(run_cli("generate", DATA / "llama" / "model.onnx", "--kv-block-size", size, "--timing-only"),
                       f"--kv-block-size {size}", why)


# llama at TP 2 is the CI sample; qwen2, mistral (one KV head, on both ranks) and TP 4 (70 s
# each) run with -m slow
@pytest.mark.sampled
@pytest.mark.parametrize("name, tp", [("llama", 2), pytest.param("qwen2", 2, marks=pytest.mark.slow),
                                      pytest.param("mistral", 2, marks=pytest.mark.slow),
                                      pytest.param("llama", 4, marks=pytest.mark.slow)])
def test_paged_tensor_parallel_equals_onnxruntime_and_one_device(name: str, tp: int) -> None:
    """--kv-block-size with --tp: each rank pages the caches of its KV heads (pools [blocks,
    rank's heads, block, head_dim]; at tp 4 over 2 KV heads a head is held by two ranks), one
    block table for all. Prompt 40, 12 new tokens, batch 2, blocks of 16: tokens equal
    onnxruntime's and the one-device paged run's, the logits too; a device holds 1 / min(tp,
    KV heads) of the pools."""
    model = DATA / name / "model.onnx"
    prompt = np.random.default_rng(3).integers(0, 200, (2, 40))
    want_ids, want_logits = _ort_generate(model, prompt, 12)
    sharded = generate(model, 0, 12, prompt=prompt, kv_block_size=16, tp=tp)
    one = generate(model, 0, 12, prompt=prompt, kv_block_size=16)
    np.testing.assert_array_equal(sharded.outputs["generated_ids"], want_ids)
    np.testing.assert_allclose(sharded.outputs["final_logits"], want_logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(sharded.outputs["generated_ids"], one.outputs["generated_ids"])
    np.testing.assert_allclose(sharded.outputs["final_logits"], one.outputs["final_logits"], rtol=1e-5, atol=1e-6)
    r = sharded.report
    assert schema_problem(r) is None and r["tp"] == tp and r["kv_cache"]["layout"] == "paged"
    kv_heads = {"mistral": 1}.get(name, 2)
    assert r["kv_cache"]["bytes_final_per_device"] * min(tp, kv_heads) == r["kv_cache"]["bytes_final"]


def test_paged_tensor_parallel_decode_pages_each_ranks_heads() -> None:
    """Under --tp 2 a paged decode step writes through the table and its pools hold one of the
    two KV heads; no collective touches the cache (the two all_reduce per layer and the
    logits' all_gather only)."""
    m = _Model(DATA / "llama" / "model.onnx", "ascend910b2", "fp32", True, kv_block_size=16, capacity=64, prompt_len=60,
               tp=2, topology="atlas800-a2")
    report = m.step(2, 1, 60, None).report
    names = {k["name"].rsplit("_", 1)[0] for k in report["kernels"]}
    assert "paged_cache_append" in names and "cache_append" not in names
    assert {c["kernel"].rsplit("_", 1)[0] for c in report["cluster"]["collectives"]} <= {"all_reduce", "all_gather", "mc2_all_reduce"}


def test_paged_bad_block_size_with_tp_is_one_line() -> None:
    assert_clean_error(run_cli("generate", DATA / "llama" / "model.onnx", "--kv-block-size", 24, "--tp", 2, "--timing-only"),
                       "--kv-block-size 24", "multiple of 16")
    with pytest.raises(AscendirError, match="multiple of 16"):
        generate(DATA / "llama" / "model.onnx", 4, 2, timing_only=True, kv_block_size=40)


@pytest.mark.sampled
def test_cli_reports_the_layout(tmp_path: Path) -> None:
    res = run_cli("generate", DATA / "qwen2" / "model.onnx", "--prompt-len", 20, "--new-tokens", 3, "--timing-only",
                  "--kv-block-size", 16, "--report", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    assert "KV layout: paged, blocks of 16 positions: 2 of 2 blocks used" in res.output
    r = json.loads((tmp_path / "r.json").read_text())
    assert schema_problem(r) is None and r["kv_cache"]["blocks_used"] == 2
    # one block of every cache tensor: 2 layers x (K, V) x 2 KV heads x 16 positions x 16 dims x fp32
    assert r["kv_cache"]["bytes_allocated"] == 2 * 2 * 2 * 16 * 16 * 4 * 2


@pytest.mark.sampled
def test_paged_interpolation_equals_every_step() -> None:
    """Timing-only decode steps of a paged cache: the pieces are cut where a pool block is added
    too (a KV tile of several blocks loads one more), and the interpolated TPOT equals
    simulating every step, across blocks 16 -> 32 -> 48 positions."""
    model = DATA / "llama" / "model.onnx"
    fast = generate(model, 12, 30, batch=1, timing_only=True, kv_block_size=16).report
    full = generate(model, 12, 30, batch=1, timing_only=True, kv_block_size=16, every_step=True).report
    # equal to a hundredth of a cycle (a piece's steps are linear in the cache length up to the
    # quantised durations' rounding, ~1e-3 cycle)
    np.testing.assert_allclose(fast["tpot_s"], full["tpot_s"], rtol=0, atol=0.01 / load_target("ascend910b2").clock_hz)
    assert fast["steps"]["interpolated"] > 0
