"""fuse-moe-gating's group-limited mode (DeepSeek-V3's noaux_tc router; ops-transformer's
MoeGatingTopK with groupCount > 1): the regions it builds, and the fused kernel against the
unfused lowering of the same router bit for bit (f32, f16, bf16), the nn reference (the ids
exactly, ties in group scores and in expert scores included) and the corpus models."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from moe_router import grouped_router  # noqa: E402  (benchmarks/moe_router.py: the router as exported)

from ascendir.dialects import nn
from ascendir.driver import compile_model, lower, parse_pipeline, run_passes
from ascendir.interpreter import simulate
from ascendir.session import Session
from lowering_harness import parse, run_both

DATA = Path(__file__).parent / "data"
DT = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _fused(text: str, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict]:
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-moe-gating", "O0", "ascend910b2", None), None)
    assert [o.kind.data for o in module.walk() if isinstance(o, nn.FusedOp)] == ["moe_gating"]
    lower(module, None, "ascend910b2")
    result = simulate(module, None, inputs, "ascend910b2")
    return result.outputs, result.report


def _check(text: str, inputs: dict[str, np.ndarray], t: str) -> dict:
    ref, unfused, _ = run_both(text, inputs)
    fused, report = _fused(text, inputs)
    assert [k["name"] for k in report["kernels"]] == ["moe_gating_0"]
    for (name, got), want in zip(fused.items(), ref.values()):
        np.testing.assert_array_equal(got, unfused[name], err_msg=name)
        if want.dtype.kind == "i":
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            tol = {"f32": 1e-6, "f16": 2e-3, "bf16": 2e-2}[t]
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    return report


@pytest.mark.sampled
@pytest.mark.parametrize("t", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("t_rows,e,g,kg,k,select,opts", [
    (64, 16, 4, 2, 4, "top2_sum", {}),                              # the corpus block's router
    (37, 64, 8, 4, 8, "top2_sum", {"eps": False}),                  # DeepSeek-V3's 8 groups, top-4, k 8; no eps (dynamo)
    (5, 32, 4, 1, 2, "max", {"scale": False, "fix": False}),        # group_select_mode 0
    (20, 24, 3, 2, 1, "top2_sum", {"bias": False}),
])
def test_fused_equals_unfused_bit_for_bit(t_rows: int, e: int, g: int, kg: int, k: int, select: str, opts: dict, t: str) -> None:
    text = grouped_router(t_rows, e, g, kg, k, t, select, **opts)
    rng = np.random.default_rng(e + k)
    inputs = {"arg0": rng.standard_normal((t_rows, e)).astype(DT[t])}
    if opts.get("bias", True):
        inputs["arg1"] = (0.2 * rng.standard_normal(e)).astype(DT[t])
    _check(text, inputs, t)


@pytest.mark.sampled
@pytest.mark.parametrize("t", ["f32", "f16"])
def test_ties_in_group_scores_and_experts(t: str) -> None:
    """Groups with equal scores: the lower group index is taken first (ONNX TopK), so which
    experts are eligible follows the graph; equal experts inside a group count twice in its
    top-2 sum; equal expert scores across the kept groups go by index."""
    t_rows, e, g = 6, 16, 4
    x = np.random.default_rng(1).standard_normal((t_rows, e)).astype(DT[t])
    x[0] = np.tile(x[0, :4], 4)           # every group alike: groups 0 and 1 are kept
    x[1, 4:8] = x[1, 8:12] = x[1, 12:16]  # groups 1, 2, 3 tie: 1 and 2 kept (or 0 and 1 if group 0 is best)
    x[1, :4] = -3.0
    x[2, 0] = x[2, 1] = 4.0               # a group's top 2 are equal: its score counts both
    x[2, 8:12] = [3.9, 3.9, 3.9, 3.9]
    x[3] = 0.0                            # every score equal
    text = grouped_router(t_rows, e, g, 2, 4, t, bias=False)
    report = _check(text, {"arg0": x}, t)
    assert report["total_cycles"] > 0
    ids = _fused(text, {"arg0": x})[0]["out1"]
    assert set(ids[0]) <= set(range(8)) and set(ids[1]) <= set(range(4, 12)) and sorted(ids[3]) == [0, 1, 2, 3]


def test_index_constants_are_checked() -> None:
    """A router whose scatter iota is not 0..G-1 computes something else: not fused."""
    text = grouped_router(8, 16, 4, 2, 4).replace("dense<[[0, 1, 2, 3]]>", "dense<[[0, 1, 3, 2]]>")
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-moe-gating", "O0", "ascend910b2", None), None)
    assert not [o for o in module.walk() if isinstance(o, nn.FusedOp)]


def test_cycles_follow_the_groups() -> None:
    """The kernel's vector work grows with the groups scored (one top-2 per group)."""
    cycles = {}
    for g in (2, 8):
        text = grouped_router(64, 64, g, 2, 4)
        x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        cycles[g] = _fused(text, {"arg0": x, "arg1": np.zeros(64, np.float32)})[1]["total_cycles"]
    assert cycles[8] > cycles[2]


@pytest.mark.sampled
@pytest.mark.parametrize("name", ["deepseek_v3_moe_block_small", "deepseek_v3_moe_block_small_dynamo"])
def test_models_group_limited_router_is_one_kernel(name: str) -> None:
    session = Session()
    module, weights = compile_model(DATA / name / "model.onnx", "ascend910b2", session=session)
    assert all(d.kind != "moe_gating" for d in session.declined)
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    result = simulate(module, weights, inputs, "ascend910b2")
    names = [k["name"] for k in result.report["kernels"]]
    assert sum(n.startswith("moe_gating") for n in names) == 1
    assert not any(n.startswith(("topk", "reduce_sum", "slice")) for n in names), names  # the router ops
    for k, want in expected.items():
        np.testing.assert_allclose(result.outputs[k], want, rtol=1e-5, atol=1e-6, err_msg=k)
