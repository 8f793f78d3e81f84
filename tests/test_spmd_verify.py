"""--verify-numerics on modules with collectives (driver.run_passes / lower_tensor_parallel with
interpreter/exec/spmd_reference.py): a module of nn collectives is checked on every rank, each
rank fed its own inputs (`NAME@r`); a tensor-parallel run checks shard-tensor-parallel against
the unsharded module and each MC2 pass (collectives inside fused regions, run in lockstep)
against the module before it; a pass that changes the numbers is caught."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ascendir.dialects import nn
from ascendir.driver import compile_model, lower_tensor_parallel, random_inputs
from ascendir.errors import AscendirError
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.interpreter.exec.spmd_reference import run_spmd
from ascendir.pipelines import after_shard
from ascendir.transforms.nn.shard_tensor_parallel import shard_module
from ascendir.weights import WeightStore
from cli_helpers import run_cli

DATA = Path(__file__).parent / "data"
TARGET = "ascend910b2"

MATMUL_AR = """builtin.module {
func.func @main(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>) -> tensor<16x32xf32> {
  %p = nn.matmul %x, %w : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %y = nn.all_reduce %p {group = #ascend.device_group<[0, 1]>} : (tensor<16x32xf32>) -> tensor<16x32xf32>
  func.return %y : tensor<16x32xf32>
}
}
"""


def test_run_devices_verify_numerics_checks_every_rank(tmp_path: Path) -> None:
    """Was: 'error: nn.all_reduce: no reference semantics'. Each rank's random inputs (seed + r,
    as the run feeds them); the report says what was verified."""
    model = tmp_path / "ar.mlir"
    model.write_text(MATMUL_AR)
    report = tmp_path / "r.json"
    res = run_cli("run", model, "--devices", 2, "--verify-numerics", "--report", report)
    assert res.exit_code == 0, res.output
    assert "verify-numerics: 12 passes" in res.output
    assert json.loads(report.read_text())["verify_numerics"]["status"] == "pass"


def test_spmd_reference_feeds_each_rank_its_inputs() -> None:
    from xdsl.parser import Parser

    from ascendir.session import make_context

    module = Parser(make_context(), MATMUL_AR).parse_module()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((16, 64)).astype(np.float32) for _ in range(2)]
    ws = [rng.standard_normal((64, 32)).astype(np.float32) for _ in range(2)]
    outs = run_spmd(module, [WeightStore()] * 2, {"arg0": xs[0], "arg1": ws[0], "arg0@1": xs[1], "arg1@1": ws[1]})
    want = (xs[0] @ ws[0]).astype(np.float32) + (xs[1] @ ws[1]).astype(np.float32)
    for o in outs:
        np.testing.assert_allclose(o["result0"], want, rtol=1e-5, atol=1e-5)


def test_mc2_regions_run_in_lockstep_equal_to_the_unfused_and_unsharded() -> None:
    """LLaMA at tp 2 with sequence parallelism: the MC2 regions hold the all_gather /
    reduce_scatter / all_reduce; their lockstep evaluation equals the module before fusion
    exactly, and the unsharded module within the f32 tolerance."""
    from xdsl.passes import PassPipeline

    from ascendir.driver import run_passes

    module, weights = compile_model(DATA / "llama_small" / "model.onnx", TARGET, opt_level="O2", emit="nn")
    feeds = random_inputs(module, 0)
    whole = run_nn(module, weights, feeds)
    module, stores = shard_module(module, weights, 2, True, TARGET)
    plain = run_spmd(module, stores, feeds)
    run_passes(module, PassPipeline(after_shard("O2")))
    kinds = {op.kind.data for op in module.walk() if isinstance(op, nn.FusedOp)}
    assert {"all_gather_matmul", "matmul_reduce_scatter"} <= kinds
    fused = run_spmd(module, stores, feeds)
    for r in range(2):
        for k, v in plain[r].items():
            np.testing.assert_array_equal(fused[r][k], v)
            np.testing.assert_allclose(fused[r][k], whole[k], rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(whole[k]).max())))


@dataclass(frozen=True)
class DropAllReduce(ModulePass):
    """A wrong pass: every nn.all_reduce replaced by its operand (each rank keeps its partial sum)."""

    name = "drop-all-reduce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for ar in [o for o in op.walk() if isinstance(o, nn.AllReduceOp)]:
            ar.result.replace_all_uses_with(ar.input)
            ar.detach()
            ar.erase()


def test_a_pass_after_sharding_that_changes_the_numbers_is_caught() -> None:
    module, weights = compile_model(DATA / "llama_small" / "model.onnx", TARGET, opt_level="O2", emit="nn")
    feeds = random_inputs(module, 0)
    with pytest.raises(AscendirError, match=r"pass 'drop-all-reduce' changed output 'logits'"):
        lower_tensor_parallel(module, weights, 2, TARGET, after_shard=(DropAllReduce(),), verify_inputs=feeds)


@pytest.mark.sampled
def test_run_tp_verify_numerics_names_the_shard_and_mc2_passes() -> None:
    res = run_cli("run", DATA / "gpt2_small" / "model.onnx", "--tp", 2, "--verify-numerics", "--check-ort")
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("verify-numerics:"))
    for name in ("shard-tensor-parallel", "fuse-matmul-allreduce", "fuse-allgather-matmul", "fuse-matmul-reducescatter"):
        assert name in line
