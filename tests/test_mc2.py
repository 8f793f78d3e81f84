"""MC2 (templates/mc2.py): fuse-matmul-allreduce, fuse-allgather-matmul, fuse-matmul-reducescatter
and their templates on the corpus transformers, sharded at tp 2 / 4 with and without sequence
parallelism, simulated on a cluster with numerics.

BERT's batch of 2 sequences puts the sequence axis after the batch axis: its sequence shards are
not blocks of whole rows, so the SP fusions leave it (tested at tp 2 without SP).

The chunk counts are forced (the passes' `chunks` option) so that comm kernels really run in the
background beside the next chunk's matmul (the cost model keeps these small models in one chunk):
every output equals the unfused path (the same sharded module lowered without the MC2 passes)
bit for bit, and onnxruntime's reference within the end-to-end tolerance. Timing: the device's
total is its compute plus the exposed part of its communication; MC2 hides some of it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from xdsl.passes import PassPipeline

from ascendir.conversion.nn_to_ascend import tiling
from ascendir.conversion.nn_to_ascend.templates import mc2
from ascendir.dialects import nn
from ascendir.driver import compile_model, lower, run_passes, simulate_ranks
from ascendir.errors import AscendirError
from ascendir.hardware import load_target
from ascendir.interpreter.timing.comm_stream import CommStream
from ascendir.pipelines import after_shard
from ascendir.transforms.nn.fuse_allgather_matmul import FuseAllGatherMatmul
from ascendir.transforms.nn.fuse_matmul_allreduce import FuseMatmulAllReduce
from ascendir.transforms.nn.fuse_matmul_reducescatter import FuseMatmulReduceScatter
from ascendir.transforms.nn.shard_tensor_parallel import shard_module
from tests.blas_order import shape_free_sums

DATA = Path(__file__).parent / "data"
TARGET, TOPOLOGY = "ascend910b2", "atlas800-a2"


def _reference(name: str):
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        outputs = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    return inputs, outputs


MC2_KINDS = {mc2.MATMUL_ALL_REDUCE, mc2.MATMUL_REDUCE_SCATTER, mc2.ALL_GATHER_MATMUL}


def _lowered(name: str, tp: int, sp: bool, passes: tuple):
    module, weights = compile_model(DATA / name / "model.onnx", TARGET, opt_level="O2", emit="nn")
    module, stores = shard_module(module, weights, tp, sp, TARGET)
    if passes:
        run_passes(module, PassPipeline(passes))
    kinds = [op.kind.data for op in module.walk() if op.name == "nn.fused"]
    # a tail_split choose-tiling recorded for a matmul that an MC2 region took (mc2.recorded
    # drops it there: that region sums those tiles' K in one range, not in f32 partials)
    tails = any((tiling.tiling_from_attr(m.attributes.get(tiling.TILING_ATTR)) or {}).get("tail_split", 1) > 1
                for op in module.walk() if op.name == "nn.fused" and op.kind.data in MC2_KINDS
                for m in op.walk() if isinstance(m, nn.MatmulOp))
    lower(module, stores[0], TARGET)
    for store in stores[1:]:
        for w in stores[0]:
            if w not in store:
                store.add(w, stores[0][w])
    return module, stores, kinds, tails


@cache
def _run(name: str, tp: int, sp: bool, fused: bool, stages: int = 0):
    """`stages`: of the SP regions (gather_stages), 0 = one per device."""
    inputs, _ = _reference(name)
    stages = stages or tp
    passes = (FuseMatmulAllReduce(chunks=2), FuseAllGatherMatmul(chunks=stages), FuseMatmulReduceScatter(chunks=stages)) if fused else ()
    module, stores, kinds, tails = _lowered(name, tp, sp, passes)
    asyncs = sum(1 for op in module.walk() if op.name == "ascend.launch" and mc2.ASYNC_ATTR in op.attributes)
    res = simulate_ranks([module] * tp, stores, [inputs] * tp, TARGET, TOPOLOGY)
    return res, kinds, asyncs, tails


# (model, tp, sequence parallel, SP stages: 0 = one per device; 3 of 4 devices: exchanges with 2
# peers, then 1)
CASES = [("llama_small", 2, False, 0), ("llama_small", 4, False, 0), ("llama_small", 2, True, 0), ("llama_small", 4, True, 0),
         ("llama_small", 4, True, 3), ("gpt2_small", 2, False, 0), ("gpt2_small", 2, True, 0), ("bert_small", 2, False, 0)]


@pytest.mark.sampled
@pytest.mark.parametrize("name,tp,sp,stages", CASES,
                         ids=[f"{n}-tp{t}{'-sp' if s else ''}{f'-{c}stages' if c else ''}" for n, t, s, c in CASES])
def test_mc2_equals_unfused_bit_for_bit_and_onnxruntime(name: str, tp: int, sp: bool, stages: int) -> None:
    _, expected = _reference(name)
    plain, _, _, _ = _run(name, tp, sp, False)
    fused, kinds, asyncs, tails = _run(name, tp, sp, True, stages)
    want = {mc2.MATMUL_REDUCE_SCATTER, mc2.ALL_GATHER_MATMUL} if sp else {mc2.MATMUL_ALL_REDUCE}
    assert want <= set(kinds)
    assert asyncs > 0  # comm kernels really ran in the background
    for out, ref in expected.items():
        for r in range(tp):
            key = out if r == 0 else f"{out}@{r}"
            # equal up to the K summation order of the unfused tail tiles (f32), or of the two
            # runs' different GEMM shapes on a BLAS whose sums depend on them (tests/blas_order.py)
            if tails or not shape_free_sums():
                np.testing.assert_allclose(fused.outputs[key], plain.outputs[key], rtol=0, atol=1e-5 * float(np.abs(plain.outputs[key]).max()))
            else:
                np.testing.assert_array_equal(fused.outputs[key], plain.outputs[key])
        np.testing.assert_allclose(fused.outputs[out].astype(np.float32), ref, rtol=1e-3, atol=1e-4)
    cl = fused.report["cluster"]
    assert cl["exposed_comm_cycles"] < cl["comm_cycles"]  # some communication hidden behind compute
    for c in cl["collectives"]:
        assert 0.0 <= c["exposed_cycles"] <= c["cycles"] + 1e-6


@pytest.mark.sampled
def test_device_total_is_compute_plus_exposed_comm() -> None:
    """A background comm kernel adds only its exposed part to the device's time; the report's
    total is the sum of what each launch adds (= the device clock at the end)."""
    res, _, _, _ = _run("llama_small", 2, False, True)
    rep = res.report
    comm_names = {c["kernel"] for c in rep["cluster"]["collectives"]}
    compute = sum(k["cycles"] for k in rep["kernels"] if k["name"] not in comm_names)
    assert rep["total_cycles"] == pytest.approx(compute + rep["cluster"]["exposed_comm_cycles"], rel=1e-9)


def test_comm_stream_exposure_and_shared_hbm() -> None:
    class Rec:
        def __init__(self, start: float, cycles: float, hbm: float):
            self.comm = {"start_cycle": start, "cycles": cycles, "exposed_cycles": cycles, "hbm_bytes": hbm}

    s = CommStream()
    a, b = Rec(100.0, 200.0, 1000.0), Rec(300.0, 100.0, 500.0)
    s.background(a)
    assert s.free == 300.0
    assert s.hbm_bytes_during(100.0, 200.0) == pytest.approx(500.0)  # half of a's span
    s.computed(100.0, 250.0)
    s.background(b)
    clock = s.join(250.0, keep=1)  # b may run on: wait for a alone
    assert clock == 300.0 and a.comm["exposed_cycles"] == pytest.approx(50.0) and s.pending == [b]
    clock = s.join(clock)
    assert clock == 400.0 and b.comm["exposed_cycles"] == pytest.approx(100.0) and not s.pending


def test_chunk_count_from_the_cost_model() -> None:
    hw = load_target(TARGET)
    # 32 rows: the per-chunk handshakes cost more than the overlap saves
    small = tiling.Problem(1, 32, 128, 64, "f32", 4)
    assert mc2.choose_chunks(small, "all_reduce", 128 * 4, 2, hw).chunks == 1
    # LLaMA-7B down_proj at TP8, prefill 2048: pipelining pays
    big = tiling.Problem(1, 2048, 4096, 1376, "f16", 2, 0, True)
    choice = mc2.choose_chunks(big, "all_reduce", 4096 * 2, 8, hw)
    assert choice.chunks > 1 and dict(choice.scores)[choice.chunks] < dict(choice.scores)[1]


def test_o2_runs_mc2_after_sharding_and_o1_does_not() -> None:
    assert [p.name for p in after_shard("O2")] == ["fuse-matmul-allreduce", "fuse-allgather-matmul", "fuse-matmul-reducescatter"]
    assert after_shard("1") == () and after_shard("O0") == ()


def test_forced_chunks_that_do_not_split_the_rows_are_one_line_errors() -> None:
    with pytest.raises(AscendirError, match=r"mc2.chunks = 3 does not split the 32 rows"):
        _lowered("llama_small", 2, False, (FuseMatmulAllReduce(chunks=3),))


@pytest.mark.sampled
def test_cli_run_tp_at_o2_names_the_mc2_passes(tmp_path: Path) -> None:
    from cli_helpers import run_cli

    import json

    r = run_cli("run", DATA / "gpt2_small" / "model.onnx", "--tp", "2", "--check-ort", "--report", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    assert "fuse-matmul-allreduce" in json.loads((tmp_path / "r.json").read_text())["pipeline"]


AR_LAYER = """builtin.module {{
func.func @main(%x: tensor<2048x1376xf16>, %w: tensor<1376x4096xf16>) -> tensor<2048x4096xf16> {{
  %p = nn.matmul %x, %w : (tensor<2048x1376xf16>, tensor<1376x4096xf16>) -> tensor<2048x4096xf16>
  %y = nn.all_reduce %p {{group = #ascend.device_group<[{ranks}]>}} : (tensor<2048x4096xf16>) -> tensor<2048x4096xf16>
  func.return %y : tensor<2048x4096xf16>
}}
}}"""


def _async_launches(ranks: str, topology: str) -> int:
    from xdsl.parser import Parser

    from ascendir.driver import run_pipeline
    from ascendir.session import make_context

    module = Parser(make_context(), AR_LAYER.format(ranks=ranks)).parse_module()
    on = f' topology="{topology}"' if topology else ""
    run_pipeline(module, f"fuse-matmul-allreduce,ascend-lowering{{target={TARGET}{on}}}")
    return sum(1 for op in module.walk() if op.name == "ascend.launch" and mc2.ASYNC_ATTR in op.attributes)


@pytest.mark.sampled
def test_chunk_count_is_chosen_for_the_lowering_topology() -> None:
    """LLaMA-7B's down_proj at TP8, prefill 2048, as MatmulAllReduce: on one server's HCCS mesh
    (the default topology) the cost model pipelines 4 chunks; the same group spread over two
    servers (4 + 4 devices of atlas800-a2-x2, RoCE between them at 12 GB/s per flow) makes each
    chunk's all_reduce slower and fewer, larger chunks win. The lowering reads the topology it
    is given (ascend-lowering{topology=...}, which `ascendir run --topology` passes)."""
    hw = load_target(TARGET)
    # the problem the lowering hands choose_chunks for AR_LAYER (x[2048, 1376] @ w[1376, 4096])
    big = tiling.Problem(1, 2048, 4096, 1376, "f16", 2, 0, False)
    from ascendir.hardware.topology import load_topology

    one = mc2.choose_chunks(big, "all_reduce", 4096 * 2, tuple(range(8)), hw, topo=load_topology("atlas800-a2"))
    two = mc2.choose_chunks(big, "all_reduce", 4096 * 2, (0, 1, 2, 3, 8, 9, 10, 11), hw, topo=load_topology("atlas800-a2-x2"))
    assert one.chunks != two.chunks
    assert _async_launches("0, 1, 2, 3, 4, 5, 6, 7", "") == one.chunks - 1
    assert _async_launches("0, 1, 2, 3, 8, 9, 10, 11", "atlas800-a2-x2") == two.chunks - 1


def test_sp_stages_other_than_one_or_the_group_where_the_model_prefers_them() -> None:
    """LLaMA-70B's gate projection at TP4, prefill 2048, as AllGatherMatmul: exchanging with all
    3 peers at once (2 stages) beats one peer per step (4 stages: one SDMA flow at a time, 19.3
    GB/s of the port's 392) and the unfused gather; the stages keep each block's tiling, so the
    numerics are the unfused ones (test_mc2_equals_unfused_bit_for_bit_and_onnxruntime, 3 stages)."""
    hw = load_target(TARGET)
    gate = tiling.Problem(1, 2048, 8192, 7168, "f16", 2)
    choice = mc2.choose_sp_chunks(gate, 4, 8192 * 2, hw, True)
    assert choice.chunks not in (1, 4)
    assert mc2.gather_stages(4, 3) == [[1, 2], [3]] and mc2.gather_stages(8, 2) == [[1, 2, 3, 4, 5, 6, 7]]


def test_a_group_the_lowering_topology_lacks_is_a_one_line_error() -> None:
    from xdsl.parser import Parser

    from ascendir.driver import run_pipeline
    from ascendir.session import make_context

    ranks = ", ".join(map(str, range(16)))
    module = Parser(make_context(), AR_LAYER.format(ranks=ranks)).parse_module()
    with pytest.raises(AscendirError, match=r"^nn.fused #\d+ \(matmul_all_reduce\): its group: a group of 16 devices does not fit "
                                            r"topology atlas800-a2 \(8 devices\): lower it for a topology that has the group"):
        run_pipeline(module, "fuse-matmul-allreduce,ascend-lowering")
    _async_launches(ranks, "a3-supernode-16")  # lowers: the 16-die topology has the group
