"""The expert-major hand-off from the moe_experts kernels to moe_finalize_routing (ops-transformer:
GroupedMatmul's expert-major rows go to MoeFinalizeRouting with MoeInitRouting's
expanded_row_idx, no un-permute in between): on the corpus MoE models the un-permute gather kernel
is gone and the outputs are those of the un-permuting pipeline bit for bit; two identical MoE
layers (the second replays the first's kernels, kernel_reuse) each read through their own
permutation; under expert parallelism (the combine reads the rows) the un-permute stays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ascendir.conversion.nn_to_ascend.kinds import moe_experts as moe_experts_kind
from ascendir.conversion.nn_to_ascend.templates import moe_experts
from ascendir.dialects import ascend, nn
from ascendir.driver import compile_model, lower, parse_pipeline, run_passes
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.patterns import top_level_ops
from ascendir.weights import WeightStore
from lowering_harness import parse

DATA = Path(__file__).parent / "data"
HW = load_target("ascend910b2")


def _launches(module) -> list[str]:
    """The kernels launched by @main, in order."""
    return [op.callee.root_reference.data for op in module.walk() if isinstance(op, ascend.LaunchOp)]


@pytest.mark.sampled
@pytest.mark.parametrize("model", ["mixtral_moe_block_small", "deepseek_v3_moe_block_small_dynamo"])
def test_corpus_handoff_drops_the_unpermute(model: str, monkeypatch) -> None:
    path = DATA / model / "model.onnx"
    with np.load(DATA / model / "reference.npz") as ref:
        feeds = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        want = [ref[k] for k in ref.files if k.startswith("output:")]
    runs = {}
    for handoff in (False, True):
        if not handoff:
            monkeypatch.setattr(moe_experts_kind, "expert_major_readers", lambda region: False)
        else:
            monkeypatch.undo()
        module, weights = compile_model(path, HW.name, opt_level="O2")
        result = simulate(module, weights, feeds, HW)
        names = [k["name"] for k in result.report["kernels"]]
        runs[handoff] = (list(result.outputs.values()), names, result.report["total_cycles"])
    (before, names0, cyc0), (after, names1, cyc1) = runs[False], runs[True]
    assert sum(n.startswith("gather") for n in names1) == sum(n.startswith("gather") for n in names0) - 1
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_allclose(after[0], want[0], rtol=1e-3, atol=1e-4)
    assert cyc1 < cyc0


LAYER = """
  %xr{n} = nn.reshape %x{n} : (tensor<{t}x{h}xf32>) -> tensor<{t}x1x{h}xf32>
  %xx{n} = nn.expand %xr{n} : (tensor<{t}x1x{h}xf32>) -> tensor<{t}x{k}x{h}xf32>
  %xe{n} = nn.reshape %xx{n} : (tensor<{t}x{k}x{h}xf32>) -> tensor<{r}x{h}x1xf32>
  %wgu{n} = nn.weight @gate_up{n} : tensor<{e}x{i2}x{h}xf32>
  %gu{n} = nn.gather %wgu{n}, %ids{n} {{axis = 0 : i64}} : (tensor<{e}x{i2}x{h}xf32>, tensor<{r}xi64>) -> tensor<{r}x{i2}x{h}xf32>
  %wd{n} = nn.weight @down{n} : tensor<{e}x{h}x{i}xf32>
  %d{n} = nn.gather %wd{n}, %ids{n} {{axis = 0 : i64}} : (tensor<{e}x{h}x{i}xf32>, tensor<{r}xi64>) -> tensor<{r}x{h}x{i}xf32>
  %a{n} = nn.matmul %gu{n}, %xe{n} : (tensor<{r}x{i2}x{h}xf32>, tensor<{r}x{h}x1xf32>) -> tensor<{r}x{i2}x1xf32>
  %hh{n} = nn.reshape %a{n} : (tensor<{r}x{i2}x1xf32>) -> tensor<{r}x{i2}xf32>
  %g{n} = nn.slice %hh{n} {{starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}xf32>) -> tensor<{r}x{i}xf32>
  %u{n} = nn.slice %hh{n} {{starts = array<i64: 0, {i}>, steps = array<i64: 1, 1>}} : (tensor<{r}x{i2}xf32>) -> tensor<{r}x{i}xf32>
  %s{n} = nn.silu %g{n} : (tensor<{r}x{i}xf32>) -> tensor<{r}x{i}xf32>
  %m{n} = nn.mul %s{n}, %u{n} : (tensor<{r}x{i}xf32>, tensor<{r}x{i}xf32>) -> tensor<{r}x{i}xf32>
  %mr{n} = nn.reshape %m{n} : (tensor<{r}x{i}xf32>) -> tensor<{r}x{i}x1xf32>
  %y{n} = nn.matmul %d{n}, %mr{n} : (tensor<{r}x{h}x{i}xf32>, tensor<{r}x{i}x1xf32>) -> tensor<{r}x{h}x1xf32>
  %y2{n} = nn.reshape %y{n} : (tensor<{r}x{h}x1xf32>) -> tensor<{r}x{h}xf32>
  %p{n} = nn.mul %y2{n}, %w{n} : (tensor<{r}x{h}xf32>, tensor<{r}x1xf32>) -> tensor<{r}x{h}xf32>
  %q{n} = nn.reshape %p{n} : (tensor<{r}x{h}xf32>) -> tensor<{t}x{k}x{h}xf32>
  %x{n1} = nn.reduce_sum %q{n} {{axes = array<i64: 1>, keepdims = false}} : (tensor<{t}x{k}x{h}xf32>) -> tensor<{t}x{h}xf32>
"""


def test_two_identical_layers_each_read_their_own_permutation() -> None:
    t, k, h, i, e = 16, 2, 32, 48, 4
    r = t * k
    dims = dict(t=t, k=k, h=h, i=i, i2=2 * i, e=e, r=r)
    args = ", ".join(f"%ids{n}: tensor<{r}xi64>, %w{n}: tensor<{r}x1xf32>" for n in (0, 1))
    text = (f"func.func @main(%x0: tensor<{t}x{h}xf32>, {args}) -> tensor<{t}x{h}xf32> {{"
            + "".join(LAYER.format(n=n, n1=n + 1, **dims) for n in (0, 1))
            + f"  func.return %x2 : tensor<{t}x{h}xf32>\n}}\n")
    rng = np.random.default_rng(3)
    store = WeightStore()
    for n in (0, 1):
        store._arrays[f"gate_up{n}"] = (0.2 * rng.standard_normal((e, 2 * i, h))).astype(np.float32)
        store._arrays[f"down{n}"] = (0.2 * rng.standard_normal((e, h, i))).astype(np.float32)
    inputs = {"arg0": rng.standard_normal((t, h)).astype(np.float32)}
    for n in (0, 1):  # different routings per layer: a layer reading the other's order would differ
        inputs[f"arg{1 + 2 * n}"] = rng.integers(0, e, r).astype(np.int64)
        inputs[f"arg{2 + 2 * n}"] = rng.random((r, 1)).astype(np.float32)
    ref = run_nn(parse(text), store, inputs)

    module = parse(text)
    run_passes(module, parse_pipeline("fuse-ffn", "O0", HW.name, None), store)
    for ffn in [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == "ffn"]:
        moe_experts.fuse(moe_experts.match(ffn), "blk")  # one block name: the regions' signatures are equal
    run_passes(module, parse_pipeline("fuse-moe-finalize-routing", "O0", HW.name, None), store)
    lower(module, store, HW.name)
    result = simulate(module, store, inputs, HW)
    kernels = [op.sym_name.data for op in module.ops if isinstance(op, ascend.KernelOp)]
    launched = _launches(module)
    assert sum(n.startswith("moe_finalize") for n in kernels) == 2  # each reads through its own dest: not replayed
    assert sum(n.startswith("grouped_matmul") for n in kernels) == 2  # layer 1's, replayed by layer 2
    assert sum(n.startswith("grouped_matmul") for n in launched) == 4
    assert not any(n.startswith(("gather", "expand")) for n in launched)  # MoeInitRouting gathers the rows; no un-permute
    np.testing.assert_allclose(list(result.outputs.values())[0], list(ref.values())[0], rtol=1e-5, atol=1e-5)


def test_expert_parallel_keeps_the_unpermute() -> None:
    """Under shard-expert-parallel the combine reads the experts' rows: they are put back in
    (token, k) order (expert_major_readers is False; EP numerics: test_expert_parallel)."""
    from ascendir.transforms.nn.shard_expert_parallel import shard_expert_parallel

    from ascendir.frontends.onnx import import_onnx

    module, weights = import_onnx(DATA / "mixtral_moe_block_small" / "model.onnx")
    run_passes(module, parse_pipeline(None, "O2"), weights)
    regions = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == moe_experts.KIND]
    assert len(regions) == 1 and moe_experts.expert_major_readers(regions[0])
    shard_expert_parallel(module, 2)
    regions = [op for op in top_level_ops(module, nn.FusedOp) if op.kind.data == moe_experts.KIND]
    assert not moe_experts.expert_major_readers(regions[0])
