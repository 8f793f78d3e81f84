"""MoE recognition (templates/moe_match.py) on the exported MoE blocks of tests/data, and the
report's `moe` section with its routing (api/moe_report.py, `ascendir run --moe-routing`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ascendir.conversion.nn_to_ascend.templates.moe_match import GroupLimit, find_moe_blocks
from ascendir.driver import main_func
from ascendir.frontends.onnx import import_onnx
from cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data"
# name: (scoring, experts, top-k, group limit, normalised, shared expert's intermediate)
EXPECTED = {
    "mixtral_moe_block_small": ("softmax", 8, 2, None, True, 0),
    "qwen2_moe_block_small": ("softmax", 16, 4, None, False, 128),
    "qwen2_moe_block_small_dynamo": ("softmax", 16, 4, None, False, 128),
    "deepseek_v3_moe_block_small": ("sigmoid", 16, 4, GroupLimit(4, 2), True, 64),
    "deepseek_v3_moe_block_small_dynamo": ("sigmoid", 16, 4, GroupLimit(4, 2), True, 64),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_moe_blocks_recognised(name: str) -> None:
    module, _ = import_onnx(DATA / name / "model.onnx")
    (b,) = find_moe_blocks(main_func(module).body.block)
    assert (b.scoring, b.experts, b.top_k, b.group_limit, b.normalised, b.shared_inter) == EXPECTED[name]
    assert b.tokens == 64 and len(b.expert_weights) == 2  # gate_up [E, 2I, H] and down [E, H, I]
    inter = 128 if name.startswith("mixtral") else 64
    assert b.expert_bytes == 3 * inter * 128 * 4


@pytest.mark.parametrize("name", ["llama_small", "bert_small", "gpt2_small"])
def test_no_moe_block_in_dense_models(name: str) -> None:
    module, _ = import_onnx(DATA / name / "model.onnx")
    assert find_moe_blocks(main_func(module).body.block) == []


def _mixtral_routing_numpy() -> np.ndarray:
    """Mixtral's routing of its reference input, by numpy from the router weight: softmax, top-2."""
    module, weights = import_onnx(DATA / "mixtral_moe_block_small" / "model.onnx")
    (b,) = find_moe_blocks(main_func(module).body.block)
    with np.load(DATA / "mixtral_moe_block_small" / "reference.npz") as ref:
        x = ref["input:hidden_states"].reshape(64, 128).astype(np.float64)
    logits = x @ np.asarray(weights[b.router.rhs.owner.weight_name], np.float64)
    return np.argsort(-logits, axis=1, kind="stable")[:, :2]  # softmax keeps the order


def test_report_routes_the_inputs(tmp_path) -> None:
    model, ref = DATA / "mixtral_moe_block_small" / "model.onnx", DATA / "mixtral_moe_block_small" / "reference.npz"
    report = tmp_path / "r.json"
    r = run_cli("run", model, "--inputs", ref, "--timing-only", "--report", report)
    assert r.exit_code == 0, r.output
    (m,) = json.loads(report.read_text())["moe"]
    want = np.bincount(_mixtral_routing_numpy().reshape(-1), minlength=8)
    assert m["tokens_per_expert"] == want.tolist() and sum(want) == 128
    assert m["routing"].startswith("the router on the inputs of")
    assert m["experts_touched"] == int((want > 0).sum())
    per = 3 * 128 * 128 * 4
    assert m["expert_weight_bytes"] == {"per_expert": per, "gathered": 2 * 128 * per, "grouped": m["experts_touched"] * per}
    assert "MoE /block/gate/TopK: top-2 of 8" in r.output


@pytest.mark.sampled
@pytest.mark.parametrize("opt", ["O2", "O0"])
def test_bf16_report_routes_as_the_kernels_do(tmp_path, opt: str) -> None:
    """Under --dtype bf16 the report's routing (the router evaluated by the nn reference) is the
    one the simulated gating kernel computes: its TopK indices, made a graph output here. The nn
    reference's matmul took bf16 (numpy kind "V") for an integer type and multiplied truncated
    int64 values: every logit 0, every token routed to experts 0-3 (64 tokens each). -O2's
    moe_gating kernel takes the softmax and top-k in f32 (token 58 keeps its fp32 experts), -O0's
    unfused softmax rounds the scores to bf16 before the topk kernel (token 58's 4th and 5th tie):
    the report follows the pipeline's."""
    import onnx

    from ascendir.driver import compile_model
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate

    name = "qwen2_moe_block_small"
    model = onnx.load(DATA / name / "model.onnx")
    (topk,) = [n for n in model.graph.node if n.op_type == "TopK"]
    model.graph.output.append(onnx.ValueInfoProto(name=topk.output[1]))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    ref = DATA / name / "reference.npz"
    report = tmp_path / "r.json"
    r = run_cli("run", DATA / name / "model.onnx", "--inputs", ref, "--timing-only", "--dtype", "bf16", "--report", report, f"-{opt}")
    assert r.exit_code == 0, r.output
    (m,) = json.loads(report.read_text())["moe"]
    hw = load_target("ascend910b2")
    module, weights = compile_model(path, hw.name, dtype="bf16", opt_level=opt)
    with np.load(ref) as z:
        ids = simulate(module, weights, {"hidden_states": z["input:hidden_states"]}, hw).outputs[topk.output[1]]
    assert m["tokens_per_expert"] == np.bincount(ids.reshape(-1), minlength=16).tolist()


@pytest.mark.sampled
def test_timing_only_routing_is_stated(tmp_path) -> None:
    model = DATA / "deepseek_v3_moe_block_small" / "model.onnx"
    report = tmp_path / "r.json"
    assert run_cli("run", model, "--timing-only", "--report", report).exit_code == 0
    (m,) = json.loads(report.read_text())["moe"]
    assert m["routing"].startswith("assumed: uniform") and sum(m["tokens_per_expert"]) == 256
    idx = np.tile(np.array([[0, 1, 2, 3]]), (64, 1))
    np.savez(tmp_path / "idx.npz", indices=idx)
    assert run_cli("run", model, "--timing-only", "--moe-routing", tmp_path / "idx.npz", "--report", report).exit_code == 0
    (m,) = json.loads(report.read_text())["moe"]
    assert m["tokens_per_expert"] == [64] * 4 + [0] * 12 and m["experts_touched"] == 4
    assert m["routing"] == f"assumed: {tmp_path / 'idx.npz'}"
    assert run_cli("run", model, "--timing-only", "--moe-routing", "skew=2", "--report", report).exit_code == 0
    (m,) = json.loads(report.read_text())["moe"]
    assert m["routing"] == "assumed: skew=2" and m["tokens_per_expert"][0] == 64


def test_moe_routing_errors(tmp_path) -> None:
    model = DATA / "qwen2_moe_block_small" / "model.onnx"
    assert_clean_error(run_cli("run", model, "--moe-routing", "uniform"), "this run routes its inputs")
    assert_clean_error(run_cli("run", model, "--timing-only", "--moe-routing", "skew=-2"), "skew needs")
    np.savez(tmp_path / "bad.npz", indices=np.tile(np.arange(3), (64, 1)))
    assert_clean_error(run_cli("run", model, "--timing-only", "--moe-routing", tmp_path / "bad.npz"), "routes [64, 4]")
    assert_clean_error(run_cli("run", DATA / "mlp_small" / "model.onnx", "--timing-only", "--moe-routing", "uniform"),
                       "no MoE block")
