"""shard-tensor-parallel on the corpus transformers, checked by the SPMD nn reference.

Every rank's outputs of the sharded module (all ranks evaluated in lockstep, collectives summing
and concatenating across them) equal the unsharded module's (the nn-level pass tolerance of
driver.compare_outputs) and onnxruntime's (the end-to-end tolerance, rtol 1e-3, atol 1e-4).
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from cli_helpers import assert_clean_error, run_cli

from ascendir.dialects.ascend.attrs import DeviceGroupAttr
from ascendir.dialects.nn.collectives import AllGatherOp, AllReduceOp, AllToAllOp, ReduceScatterOp
from ascendir.driver import compare_outputs, compile_model, parse_pipeline, run_passes
from ascendir.errors import AscendirError
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.interpreter.exec.spmd_reference import evaluate_collective, run_spmd
from ascendir.pipelines import PASSES
from ascendir.session import Session
from ascendir.transforms.nn.shard_tensor_parallel import Layout, rank_slice, shard_module
from ascendir.weights import WeightStore

DATA = Path(__file__).parent / "data"
TRANSFORMERS = ["llama_small", "llama_small_dynamo", "gpt2_small", "bert_small", "vit_small", "mixtral_moe_block_small"]
# 4 attention heads: tp = 8 splits only the MoE block (no attention, 8 experts' 128-wide MLPs)
TP8 = ["mixtral_moe_block_small"]


@cache
def _compiled(name: str, level: str, dtype: str = "fp32"):
    module, weights = compile_model(DATA / name / "model.onnx", "ascend910b2", opt_level=level, emit="nn", dtype=dtype)
    return module, weights


def _reference(name: str):
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        outputs = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    return inputs, outputs


def _collectives(module) -> Counter:
    return Counter(op.name for op in module.walk() if op.name in ("nn.all_reduce", "nn.all_gather", "nn.reduce_scatter"))


def _cases():
    for name in TRANSFORMERS:
        for level in ("O0", "O1", "O2"):  # O0 too: attention as matmul / softmax ops
            for tp in (2, 4, 8):
                for sp in (False, True):
                    yield pytest.param(name, level, tp, sp, id=f"{name}-{level}-tp{tp}{'-sp' if sp else ''}")


@pytest.mark.parametrize("name,level,tp,sp", list(_cases()))
def test_sharded_corpus_matches_unsharded_and_onnxruntime(name: str, level: str, tp: int, sp: bool) -> None:
    module, weights = _compiled(name, level)
    module = module.clone()
    inputs, expected = _reference(name)
    unsharded = run_nn(module, weights, inputs)
    if tp == 8 and name not in TP8:
        # fused attention says so itself; at O0 the output projection meets the 4 heads
        with pytest.raises(AscendirError, match=r"4 (query )?heads .*do not split over 8 devices"):
            shard_module(module, weights, tp, sp)
        return
    if sp and name == "vit_small":  # 64 patches + the class token
        with pytest.raises(AscendirError, match=r"sequence parallelism: 65 tokens .* do not split over"):
            shard_module(module, weights, tp, sp)
        return
    sharded, stores = shard_module(module, weights, tp, sp)
    assert len(stores) == tp
    counts = _collectives(sharded)
    assert sum(counts.values()) > 0
    if sp and name != "mixtral_moe_block_small":  # the MoE block's input is replicated: nothing to scatter
        assert counts["nn.reduce_scatter"] > 0 and counts["nn.all_gather"] > 0
    ranks = run_spmd(sharded, stores, inputs)
    for r, outputs in enumerate(ranks):
        compare_outputs(unsharded, outputs, f"{name} {level} tp={tp} sp={sp} rank {r}")
        for k, want in expected.items():
            np.testing.assert_allclose(outputs[k], want, rtol=1e-3, atol=1e-4, err_msg=f"{name} rank {r} output {k}")


def test_llama_placement_megatron() -> None:
    """LLaMA at O2, tp=2: one all_reduce per row-parallel block (2 layers x attention + MLP) and
    after the vocab-parallel embedding, one all_gather of the logits; with sequence parallelism
    the reduces become reduce_scatters and an all_gather precedes each column-parallel block."""
    module, weights = _compiled("llama_small", "O2")
    plain, _ = shard_module(module.clone(), weights, 2, False)
    assert _collectives(plain) == {"nn.all_reduce": 5, "nn.all_gather": 1}
    seq, _ = shard_module(module.clone(), weights, 2, True)
    assert _collectives(seq) == {"nn.reduce_scatter": 5, "nn.all_gather": 6}


def test_partial_sums_summed_once() -> None:
    """BERT at O2, tp=2: the word and token-type embeddings (both vocab-parallel) add as partial
    sums in their elementwise region, so the embeddings cost one all_reduce, each layer two."""
    module, weights = _compiled("bert_small", "O2")
    sharded, _ = shard_module(module.clone(), weights, 2, False)
    assert _collectives(sharded) == {"nn.all_reduce": 5, "nn.all_gather": 1}


def test_tp1_is_the_identity_and_a_sharded_module_is_refused() -> None:
    module, weights = _compiled("llama_small", "O2")
    text = str(module)
    same, stores = shard_module(module.clone(), weights, 1, False)
    assert str(same) == text and len(stores) == 1
    assert stores[0]["lm.model.embed_tokens.weight"] is weights["lm.model.embed_tokens.weight"]
    sharded, _ = shard_module(module.clone(), weights, 2, False)
    with pytest.raises(AscendirError, match="already sharded"):
        shard_module(sharded, weights, 2, False)


def test_fused_regions_kept_where_no_collective_is_needed() -> None:
    """O2 LLaMA: flash attention, ffn, norm_matmul and elementwise regions stay regions, sharded
    whole; only the o_proj regions (matmul + residual add, which must follow the all_reduce) are
    dissolved."""
    module, weights = _compiled("llama_small", "O2")
    kinds = Counter(str(op.kind.data.value) for op in module.walk() if op.name == "nn.fused")
    sharded, _ = shard_module(module.clone(), weights, 2, False)
    after = Counter(str(op.kind.data.value) for op in sharded.walk() if op.name == "nn.fused")
    assert after["flash_attention"] == kinds["flash_attention"] == 2
    assert after["ffn"] == kinds["ffn"] == 2
    assert after["norm_matmul"] == kinds["norm_matmul"]
    assert after["matmul_epilogue"] == 0 < kinds["matmul_epilogue"]
    for op in sharded.walk():
        if op.name == "nn.attention":
            assert op.num_heads.value.data == 2 and op.num_kv_heads.value.data == 1
        assert "ascend.tiling" not in op.attributes  # chosen for the unsharded shapes


def test_rank_stores_are_views_and_lazy() -> None:
    """Rank stores read nothing until asked; a contiguous slice is a view of the unsharded array
    and an unsplit weight is the unsharded array itself (no per-rank copy of the model)."""
    module, weights = _compiled("llama_small", "O1")
    reads: list[str] = []
    base = WeightStore()
    for name in weights:
        base.add(name, lambda name=name: reads.append(name) or weights[name])
    sharded, stores = shard_module(module.clone(), base, 4, False)
    assert reads == []
    q = "onnx::MatMul_551"  # layer 0 q_proj [128, 128], column-parallel
    assert stores[1][q].shape == (128, 32)
    assert np.shares_memory(stores[1][q], weights[q])
    np.testing.assert_array_equal(stores[1][q], weights[q][:, 32:64])
    norm = "lm.model.layers.0.input_layernorm.weight"
    assert stores[3][norm] is weights[norm]
    emb = "lm.model.embed_tokens.weight"  # vocab-parallel rows
    np.testing.assert_array_equal(stores[2][emb], weights[emb][256:384])
    assert stores[2]["tp.vocab_start.512"] == 256
    assert set(reads) <= set(weights)


def test_gqa_kv_heads_replicated_when_tp_exceeds_them() -> None:
    """LLaMA's 2 KV heads over 4 ranks: ranks 0, 1 hold KV head 0, ranks 2, 3 head 1."""
    module, weights = _compiled("llama_small", "O2")
    sharded, stores = shard_module(module.clone(), weights, 4, False)
    k = "onnx::MatMul_567"  # layer 0 k_proj [128, 64] = 2 heads of 32
    for r in range(4):
        np.testing.assert_array_equal(stores[r][k], weights[k][:, (r // 2) * 32 : (r // 2 + 1) * 32])


def test_packed_qkv_columns_dealt_per_part() -> None:
    """GPT-2's c_attn [128, 384] (q | k | v): rank r holds columns r/2 of each of q, k, v."""
    module, weights = _compiled("gpt2_small", "O2")
    _, stores = shard_module(module.clone(), weights, 2, False)
    w = weights["lm.transformer.h.0.attn.c_attn.weight"]
    got = stores[1]["lm.transformer.h.0.attn.c_attn.weight"]
    np.testing.assert_array_equal(got, np.concatenate([w[:, 64:128], w[:, 192:256], w[:, 320:384]], axis=1))


def test_row_parallel_bias_held_by_rank_zero() -> None:
    """A bias added to a partial sum (GPT-2's c_proj in the ffn region) is rank 0's alone."""
    module, weights = _compiled("gpt2_small", "O2")
    _, stores = shard_module(module.clone(), weights, 2, False)
    partial = [n for n in stores[0] if ".tp.p" in n]
    assert partial
    for n in partial:
        assert not np.any(stores[1][n])
        np.testing.assert_array_equal(stores[0][n], weights[n.split(".tp.p")[0]])


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_half_precision_sharded_matches_unsharded(dtype: str) -> None:
    """16-bit LLaMA, tp=2 with sequence parallelism: collectives sum in float32 and round once,
    so the sharded run stays within the dtype's tolerance of the unsharded one."""
    module, weights = _compiled("llama_small", "O2", dtype)
    inputs, _ = _reference("llama_small")
    unsharded = run_nn(module, weights, inputs)
    sharded, stores = shard_module(module.clone(), weights, 2, True)
    for r, outputs in enumerate(run_spmd(sharded, stores, inputs)):
        assert outputs["logits"].dtype == unsharded["logits"].dtype != np.float32
        compare_outputs(unsharded, outputs, f"{dtype} rank {r}")


def test_shard_module_retiles_for_a_target() -> None:
    module, weights = _compiled("llama_small", "O2")
    sharded, _ = shard_module(module.clone(), weights, 2, False, target="ascend910b2")
    tiled = [op for op in sharded.walk() if "ascend.tiling" in op.attributes]
    assert any(op.name == "nn.matmul" for op in tiled) and any(op.name == "nn.attention" for op in tiled)


def test_pass_registered_and_session_holds_rank_stores() -> None:
    assert "shard-tensor-parallel" in PASSES
    module, weights = _compiled("bert_small", "O1")
    module = module.clone()
    session = Session(weights=weights)
    run_passes(module, parse_pipeline("shard-tensor-parallel{tp=2 sequence-parallel=true}", "O0"), weights, session=session)
    assert session.rank_stores is not None and len(session.rank_stores) == 2
    assert session.weights is session.rank_stores[0]
    inputs, expected = _reference("bert_small")
    for outputs in run_spmd(module, session.rank_stores, inputs):
        for k, want in expected.items():
            np.testing.assert_allclose(outputs[k], want, rtol=1e-3, atol=1e-4)


def test_compile_cli_error_is_one_line() -> None:
    result = run_cli("compile", DATA / "llama_small" / "model.onnx", "-p", "O2,shard-tensor-parallel{tp=8}", "--emit", "nn")
    assert_clean_error(result, "shard-tensor-parallel", "nn.attention", "4 query heads do not split over 8 devices")


# ----------------------------------------------------------------------------------------------
# the SPMD reference's collectives
# ----------------------------------------------------------------------------------------------
def _value(shape, dtype=np.float32):
    from xdsl.dialects.builtin import Float16Type, Float32Type, TensorType
    from xdsl.ir import Block

    elem = Float16Type() if dtype == np.float16 else Float32Type()
    return Block(arg_types=[TensorType(elem, list(shape))]).args[0]


def test_collectives_sum_and_concatenate_in_group_order() -> None:
    g = DeviceGroupAttr([0, 1])
    a, b = np.arange(8, dtype=np.float32).reshape(2, 4), np.ones((2, 4), np.float32)
    ar = evaluate_collective(AllReduceOp(_value((2, 4)), g), [a, b])
    np.testing.assert_array_equal(ar[1], a + b)
    ag = evaluate_collective(AllGatherOp(_value((2, 4)), g, 1), [a, b])
    np.testing.assert_array_equal(ag[0], np.concatenate([a, b], axis=1))
    rs = evaluate_collective(ReduceScatterOp(_value((2, 4)), g, 0), [a, b])
    np.testing.assert_array_equal(rs[1], (a + b)[1:])
    a2a = evaluate_collective(AllToAllOp(_value((2, 4)), g, 1, 0), [a, b])
    np.testing.assert_array_equal(a2a[0], np.concatenate([a[:, :2], b[:, :2]], axis=0))
    np.testing.assert_array_equal(a2a[1], np.concatenate([a[:, 2:], b[:, 2:]], axis=0))


def test_half_precision_reduction_accumulates_in_f32() -> None:
    """60000 + 60000 overflows f16 (max 65504); summed in f32 the four ranks give 0 exactly."""
    g = DeviceGroupAttr([0, 1, 2, 3])
    parts = [np.full((2,), v, np.float16) for v in (60000, 60000, -60000, -60000)]
    out = evaluate_collective(AllReduceOp(_value((2,), np.float16), g), parts)
    assert out[0].dtype == np.float16
    np.testing.assert_array_equal(out[0], np.zeros(2, np.float16))


def test_group_must_be_the_run_ranks() -> None:
    with pytest.raises(AscendirError, match="ranks 0..1"):
        evaluate_collective(AllReduceOp(_value((2,)), DeviceGroupAttr([1, 0])), [np.ones(2, np.float32)] * 2)


def test_rank_slice_layouts() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    np.testing.assert_array_equal(rank_slice(x, Layout("S", 1), 2, 1), x[:, 6:])
    # 3 blocks (q | k | v) of 4 columns, 2 chunks each
    np.testing.assert_array_equal(rank_slice(x, Layout("S", 1, blocks=3), 2, 0), x[:, [0, 1, 4, 5, 8, 9]])
    # 2 chunks held by 4 ranks (replicated KV heads)
    np.testing.assert_array_equal(rank_slice(x, Layout("S", 1, parts=2), 4, 1), x[:, :6])
    np.testing.assert_array_equal(rank_slice(x, Layout("P"), 2, 1), np.zeros_like(x))
    assert ml_dtypes.bfloat16  # the 16-bit types the reference widens
