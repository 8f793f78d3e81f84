"""Expert parallelism (issue 18 part 4): shard-expert-parallel, nn.moe_distribute_dispatch /
combine (numpy SPMD semantics, comm kernels) and `ascendir run --ep`. The corpus MoE models'
outputs under EP equal the single-device run and onnxruntime; the exchanges move the routing's
rows, not the buffers' capacity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ascendir.dialects.ascend.attrs import DeviceGroupAttr
from ascendir.dialects.nn.moe_distribute import MoeDistributeCombineOp, MoeDistributeDispatchOp
from ascendir.driver import TOLERANCES, compile_model, random_inputs
from ascendir.errors import AscendirError
from ascendir.hardware.config import load_target
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.interpreter.exec.spmd_reference import run_spmd, spmd_combine, spmd_dispatch
from ascendir.transforms.nn.shard_expert_parallel import shard_expert_parallel, shard_module
from cli_helpers import assert_clean_error, run_cli

DATA = Path(__file__).parent / "data"
TARGET = "ascend910b2"
MOE_MODELS = ["mixtral_moe_block_small", "qwen2_moe_block_small", "deepseek_v3_moe_block_small",
              "qwen2_moe_block_small_dynamo", "deepseek_v3_moe_block_small_dynamo"]


def _ops(n: int, pairs: int, hidden: int, experts: int):
    """A dispatch and a combine over n ranks (built on placeholder values for their types)."""
    from xdsl.dialects.builtin import TensorType, f32, i64
    from xdsl.ir import Block

    blk = Block(arg_types=[TensorType(f32, [pairs, hidden]), TensorType(i64, [pairs])])
    group = DeviceGroupAttr(list(range(n)))
    d = MoeDistributeDispatchOp(blk.args[0], blk.args[1], group, experts)
    blk.add_op(d)
    c = MoeDistributeCombineOp(d.expand_x, d.ep_recv_offsets, d.expand_idx, group, experts)
    blk.add_op(c)
    d.verify()
    c.verify()
    return d, c


@pytest.mark.parametrize("n,experts", [(2, 8), (4, 8), (4, 16)])
def test_dispatch_routes_each_row_to_its_experts_device_and_combine_brings_it_back(n: int, experts: int) -> None:
    pairs, hidden, local = 12, 3, experts // n
    d, c = _ops(n, pairs, hidden, experts)
    rng = np.random.default_rng(n)
    xs = [rng.standard_normal((pairs, hidden)).astype(np.float32) for _ in range(n)]
    ids = [rng.integers(0, experts, pairs) for _ in range(n)]
    out = spmd_dispatch(d, xs, ids)
    for q, (ex, eids, offs, _) in enumerate(out):
        got = {}
        for s in range(n):
            slot_x, slot_ids = ex[s * pairs : (s + 1) * pairs], eids[s * pairs : (s + 1) * pairs]
            used = slot_ids < local
            # exactly s's pairs for q's experts, sorted by expert, then unused rows (zeros, id El)
            want = sorted([(ids[s][j], j) for j in range(pairs) if ids[s][j] // local == q])
            assert used.sum() == len(want) and used[: len(want)].all()
            assert (slot_ids[len(want):] == local).all() and not slot_x[len(want):].any()
            assert [int(e) + q * local for e in slot_ids[: len(want)]] == [e for e, _ in want]
            np.testing.assert_array_equal(slot_x[: len(want)], xs[s][[j for _, j in want]])
            assert offs[s, -1] - offs[s, 0] == len(want)
            got[s] = len(want)
        assert sum(got.values()) == sum(int((i // local == q).sum()) for i in ids)
    # the experts as identity: combine returns every rank its own rows in (token, k) order
    back = spmd_combine(c, [o[0] for o in out], [o[2] for o in out], [o[3] for o in out])
    for s in range(n):
        np.testing.assert_array_equal(back[s], xs[s])


@pytest.mark.parametrize("ep", [2, 4])
@pytest.mark.parametrize("model", MOE_MODELS)
def test_sharded_module_equals_unsharded_on_every_rank(model: str, ep: int) -> None:
    """The nn reference of each rank (lockstep SPMD) against the unsharded module: equal (the same
    per-row arithmetic; padding rows hit the zero expert and are never combined)."""
    module, weights = compile_model(DATA / model / "model.onnx", TARGET, opt_level="O2", emit="nn")
    inputs = random_inputs(module, 0)
    want = run_nn(module, weights, inputs)
    module, stores = shard_module(module, weights, ep)
    names = [o.name for o in module.walk() if o.name.startswith("nn.moe_distribute")]
    assert names == ["nn.moe_distribute_dispatch", "nn.moe_distribute_combine"]
    for r, outs in enumerate(run_spmd(module, stores, inputs)):
        for k, v in want.items():
            np.testing.assert_array_equal(outs[k], v, err_msg=f"rank {r} {k}")


def test_local_expert_stacks_hold_the_ranks_experts_and_a_zero_expert() -> None:
    module, weights = compile_model(DATA / "mixtral_moe_block_small" / "model.onnx", TARGET, opt_level="O2", emit="nn")
    plan = shard_expert_parallel(module, 4)
    stores = plan.rank_stores(weights)
    w = weights["block.experts.gate_up_proj"]
    for r, store in enumerate(stores):
        local = store["block.experts.gate_up_proj"]
        assert local.shape == (3, *w.shape[1:])
        np.testing.assert_array_equal(local[:2], w[2 * r : 2 * r + 2])
        assert not local[2].any()


@pytest.mark.sampled
@pytest.mark.parametrize("model,ep", [("mixtral_moe_block_small", 2), ("deepseek_v3_moe_block_small", 4)])
def test_run_ep_equals_single_device_and_onnxruntime(tmp_path: Path, model: str, ep: int) -> None:
    """Simulated (lowered kernels, comm kernels on the cluster) outputs of every rank against the
    single-device run, and rank 0 against onnxruntime."""
    path = DATA / model / "model.onnx"
    one, many = tmp_path / "one.npz", tmp_path / "many.npz"
    res = run_cli("run", path, "--outputs", one)
    assert res.exit_code == 0, res.output
    res = run_cli("run", path, "--ep", ep, "--check-ort", "--outputs", many, "--report", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output
    a, b = np.load(one), np.load(many)
    assert sorted(b) == sorted(["moe_output"] + [f"moe_output@{r}" for r in range(1, ep)])
    rtol, atol = TOLERANCES["float32"]  # a pass's tolerance: the grouped MatMul's tiles follow the local expert count
    for k in b:
        np.testing.assert_allclose(b[k], a["moe_output"], rtol=rtol, atol=atol * np.abs(a["moe_output"]).max(), err_msg=k)
    kernels = {c["kernel"].rsplit("_", 1)[0] for c in json.loads((tmp_path / "r.json").read_text())["cluster"]["collectives"]}
    assert kernels == {"moe_distribute_dispatch", "moe_distribute_combine", "all_gather"}


def _mixtral_routing(ep: int) -> tuple[np.ndarray, int, int]:
    """The corpus Mixtral block's top-2 expert ids [R] ((token, k) order) on the run's random
    inputs (seed 0), its hidden size and expert count, computed with numpy from its weights."""
    module, weights = compile_model(DATA / "mixtral_moe_block_small" / "model.onnx", TARGET, opt_level="O0", emit="nn")
    x = random_inputs(module, 0)["hidden_states"][0]
    gate = next(n for n in weights if n.startswith("onnx::MatMul"))
    logits = x @ weights[gate]
    top = np.argsort(-logits, axis=1, kind="stable")[:, :2]
    return top.reshape(-1), x.shape[1], logits.shape[1]


def test_exchange_bytes_follow_the_routing(tmp_path: Path) -> None:
    """Dispatch and combine move each cross-device row once (fp32 rows of H), dispatch also the
    El+1 group-list offsets per peer: not the [ep·P, H] capacity."""
    ep = 2
    ids, hidden, experts = _mixtral_routing(ep)
    pairs, local = ids.size // ep, experts // ep
    cross = sum(int((ids[r * pairs : (r + 1) * pairs] // local != r).sum()) for r in range(ep))
    res = run_cli("run", DATA / "mixtral_moe_block_small" / "model.onnx", "--ep", ep, "--report", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    sent = {c["kernel"].rsplit("_", 1)[0]: c["bytes_sent"] for c in json.loads((tmp_path / "r.json").read_text())["cluster"]["collectives"]}
    assert sent["moe_distribute_combine"] == cross * hidden * 4
    assert sent["moe_distribute_dispatch"] == cross * hidden * 4 + ep * (ep - 1) * (local + 1) * 8
    assert cross < ep * (ep - 1) * pairs  # what fixed-capacity copies would have moved


def test_experts_that_do_not_split_are_one_line_errors() -> None:
    assert_clean_error(run_cli("run", DATA / "mixtral_moe_block_small" / "model.onnx", "--ep", 3),
                       "MoE block /block/gate/TopK", "8 experts do not split over 3 devices")
    assert_clean_error(run_cli("run", DATA / "mixtral_moe_block_small" / "model.onnx", "--ep", 2, "-O1"),
                       "no MoE experts region")
    assert_clean_error(run_cli("run", DATA / "mixtral_moe_block_small" / "model.onnx", "--ep", 2, "--tp", 2), "--ep 2 with --tp 2")
    assert_clean_error(run_cli("run", DATA / "mixtral_moe_block_small" / "model.onnx", "--ep", 2, "--devices", 1), "--ep 2 runs on 2 devices; --devices 1 differs")
    module, _ = compile_model(DATA / "mixtral_moe_block_small" / "model.onnx", TARGET, opt_level="O2", emit="nn")
    shard_expert_parallel(module, 2)
    with pytest.raises(AscendirError, match="already sharded"):
        shard_expert_parallel(module, 2)


def test_dispatch_verifier_names_the_split() -> None:
    from xdsl.utils.exceptions import VerifyException

    with pytest.raises(VerifyException, match="6 experts do not split over 4 devices"):
        _ops(4, 8, 2, 6)


@pytest.mark.sampled
def test_timing_only_with_the_runs_routing_gives_the_same_cycles(tmp_path: Path) -> None:
    """A timing-only EP run moves no data: each device's dispatch sort, received offsets and local
    routing come from the routing (costmodel.moe_routing.ep_routed). Given the routing the numerics
    run computes, the cluster's cycles and every exchange's bytes are the same."""
    ids, _, _ = _mixtral_routing(2)
    routing = tmp_path / "routing.npz"
    np.savez(routing, indices=ids.reshape(-1, 2))
    reports = []
    for extra in ([], ["--timing-only", "--moe-routing", routing]):
        res = run_cli("run", DATA / "mixtral_moe_block_small" / "model.onnx", "--ep", 2, "--report", tmp_path / "r.json", *extra)
        assert res.exit_code == 0, res.output
        reports.append(json.loads((tmp_path / "r.json").read_text())["cluster"])
    numerics, timing = reports
    assert timing["total_cycles"] == numerics["total_cycles"]
    assert [(c["kernel"], c["bytes_sent"]) for c in timing["collectives"]] == [(c["kernel"], c["bytes_sent"]) for c in numerics["collectives"]]


def test_ep_routed_matches_the_spmd_dispatch() -> None:
    """costmodel.moe_routing.ep_routed (what a timing-only device takes) against the dispatch's
    numpy semantics on the same ids."""
    from ascendir.costmodel.moe_routing import ep_routed, init_routing

    n, experts, pairs = 4, 16, 10
    d, _ = _ops(n, pairs, 1, experts)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, experts, n * pairs)
    shards = [ids[r * pairs : (r + 1) * pairs] for r in range(n)]
    out = spmd_dispatch(d, [np.zeros((pairs, 1), np.float32)] * n, shards)
    for q in range(n):
        np.testing.assert_array_equal(ep_routed(ids, n, experts, q, "offsets")[0], out[q][2])
        np.testing.assert_array_equal(ep_routed(ids, n, experts, q, "send")[1], out[q][3])
        order, dest, group = init_routing(out[q][1], experts // n + 1)
        got = ep_routed(ids, n, experts, q, "recv")
        np.testing.assert_array_equal(got[0], order)
        np.testing.assert_array_equal(got[2], group[:-1])


def test_aiv_row_cost_grows_with_row_bytes_and_the_barrier() -> None:
    """One AIV's cost of a row (interpreter/sim/comm.aiv_row_cycles): a DataCopy in and one out,
    linear in the row's bytes at the target's GM rates; the combine's PIPE_ALL row (load, store,
    status flag in series) costs more than the dispatch's double-buffered one."""
    from ascendir.interpreter.sim.comm import aiv_row_cycles

    hw = load_target("ascend910_93")
    for mode in ("barrier", "pipelined"):
        small, big, bigger = (aiv_row_cycles(hw, b, mode) for b in (512, 14336, 28672))
        assert small < big < bigger
        assert bigger - big == pytest.approx(big - aiv_row_cycles(hw, 0, mode))
    assert aiv_row_cycles(hw, 14336, "barrier") > aiv_row_cycles(hw, 14336, "pipelined")
    with pytest.raises(ValueError, match="aiv_rows mode"):
        aiv_row_cycles(hw, 14336, "sdma")


@pytest.mark.sampled
def test_ep_exchange_time_grows_with_rows_and_with_peers() -> None:
    """S20's DeepEP-Ascend combine moves the same rows per rank at every EP and takes longer as EP
    grows (125 -> 103 GB/s from EP 8 to 16): its rows are AIV copies on the die's one UB port, and
    the share of rows that leave over it (not to the die itself or its package twin) grows with
    EP. The AIV-row model does the same: on the A3 slice, rank 0's combine comm kernel takes at
    least 10 % longer from EP 4 to 8 to 16 and the combine's GB/s fall (the per-flow SDMA model before it rose with the peers: 125 -> 175 GB/s at EP 8 -> 16),
    and twice the tokens take about twice the time (the same GB/s) in both ops. (The dispatch's
    GB/s also fall from EP 8 to 16 at S20's 4096 tokens, V18a / b; at these few tokens its
    EP-independent local launches weigh as much as the exchange; the combine's weighted sum,
    EP-independent too, is left out of the comparison: the exchange is its comm kernel.)"""
    from ascendir.api.calibration import moe_distribute_GBps, moe_distribute_kernels

    runs = {ep: moe_distribute_kernels(ep, tokens=256) for ep in (4, 8, 16)}
    comm = {ep: r[1][0] for ep, r in runs.items()}
    assert all(k["name"].startswith("moe_distribute_combine") for k in comm.values())
    assert comm[4]["cycles"] * 1.1 < comm[8]["cycles"] < comm[16]["cycles"] / 1.1, comm
    combine_GBps = {ep: rows * 7168 * 2 / (sum(k["cycles"] for k in combine) / hz) for ep, (_, combine, hz, rows) in runs.items()}
    assert combine_GBps[4] > combine_GBps[8] > combine_GBps[16], combine_GBps
    rates = {8: moe_distribute_GBps(8, tokens=256)}
    more = moe_distribute_GBps(8, tokens=512)
    for i in (0, 1):
        assert more[i] == pytest.approx(rates[8][i], rel=0.1), (more, rates[8])


def test_low_latency_convention_reproduces_s20s_gbps() -> None:
    """V24 reads S20's low-latency table as kernel µs, with GB/s = every sent (token, k) row x its
    bytes / µs (test_low_latency.py at b2e93094): 128 tokens x top-8, int8 dispatch rows of
    7168 + 7168 / 128 x 4 + 16 bytes, bf16 combine rows. That reading gives back the README's
    GB/s from its µs at EP 8 / 16 / 32, within its rounding."""
    from ascendir.api.calibration import low_latency_row_bytes

    assert low_latency_row_bytes(7168) == 7408
    rows = 128 * 8
    published = {8: (132, 58, 126, 116), 16: (139, 55, 135, 109), 32: (153, 49, 151, 97)}
    for us_d, gbps_d, us_c, gbps_c in published.values():
        assert rows * low_latency_row_bytes(7168) / us_d / 1e3 == pytest.approx(gbps_d, abs=0.6)
        assert rows * 7168 * 2 / us_c / 1e3 == pytest.approx(gbps_c, abs=0.6)


@pytest.mark.sampled
def test_int8_dispatch_rows_halve_the_exchange() -> None:
    """V24's dispatch moves int8 rows (7,408 B) where V18's moves bf16 ones (14,380 B): with the same
    routing the dispatch takes a little more than 7408 / 14380 of the bf16 time (its exchange
    scales with the row bytes, its routing launches do not), and the combine (bf16 in both) is
    unchanged."""
    from ascendir.api.calibration import DISPATCH_ROW_EXTRA, low_latency_row_bytes, moe_distribute_times

    bf16 = moe_distribute_times(8, tokens=1024, dispatch_row=(7168 + DISPATCH_ROW_EXTRA // 2, "bf16"))
    int8 = moe_distribute_times(8, tokens=1024, dispatch_row=(low_latency_row_bytes(7168), "i8"))
    assert int8[1] == pytest.approx(bf16[1], rel=1e-9)
    assert int8[2] == bf16[2]
    ratio = low_latency_row_bytes(7168) / (7168 * 2 + DISPATCH_ROW_EXTRA)
    assert ratio < int8[0] / bf16[0] < ratio + 0.1, (int8, bf16, ratio)


@pytest.mark.sampled
def test_combine_time_holds_the_weighted_sum() -> None:
    """Both of S20's combine kernels sum each token's top-k rows, weighted, inside the timed call
    (CamMoeCombineNormal's ReadBufferAndWeightedSum; MoeDistributeCombineV2's ProcessMoeExpert):
    the combine V18 / V24 time is its comm kernel and that sum (moe_finalize_routing), which reads every one of the tokens x top-k rows at least once at the
    die's HBM bandwidth."""
    from ascendir.api.calibration import moe_distribute_kernels

    tokens, topk, hidden = 256, 8, 7168
    dispatch, combine, clock_hz, _ = moe_distribute_kernels(8, tokens=tokens)
    names = [k["name"] for k in combine]
    assert names[0].startswith("moe_distribute_combine") and any(n.startswith("moe_finalize") for n in names), names
    assert not any(k["name"].startswith("moe_finalize") for k in dispatch)
    summed = next(k for k in combine if k["name"].startswith("moe_finalize"))
    hw = load_target("ascend910_93")
    assert summed["cycles"] >= tokens * topk * hidden * 2 / hw.hbm_bytes_per_cycle


@pytest.mark.sampled
def test_normal_dispatch_time_holds_deep_eps_memsets() -> None:
    """S20's normal dispatch call (deep_ep.cpp Buffer::intranode_dispatch, b2e93094) zero-fills
    its outputs with at::zeros inside the timed call, the received rows x 7168 bf16 among them:
    V18's dispatch time is the simulated launches plus those memsets, each a launch head and its
    bytes at the HBM bandwidth; the combine is untouched."""
    from ascendir.api.calibration import deep_ep_zeros_s, moe_distribute_GBps, moe_distribute_times

    hw = load_target("ascend910_93")
    zeros = deep_ep_zeros_s(1000, 7168, 256, "ascend910_93")
    assert zeros >= 1000 * 7168 * 2 / hw.memory.hbm_bw_Bps
    assert deep_ep_zeros_s(2000, 7168, 256, "ascend910_93") > zeros
    t_dispatch, t_combine, rows = moe_distribute_times(8, tokens=256)
    gbps = moe_distribute_GBps(8, tokens=256)
    nbytes = rows * 7168 * 2
    assert nbytes / gbps[0] / 1e9 == pytest.approx(t_dispatch + deep_ep_zeros_s(rows, 7168, 256, "ascend910_93"), rel=1e-9)
    assert nbytes / gbps[1] / 1e9 == pytest.approx(t_combine, rel=1e-9)


def test_combine_read_by_the_finalize_skips_the_unpermute() -> None:
    """The vendor's combine stores each row at its (token, k) slot and sums from there
    (CamMoeCombineNormal::CopyBufferToShare): no un-permute pass. Where the combine's result is
    read only by a moe_finalize_routing region, the lowering launches no row gather after the
    combine's comm kernel (the finalize reads each (token, k) row through expand_idx), and the
    simulated outputs are the weighted sums of each token's own rows (experts as identity)."""
    from xdsl.parser import Parser

    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate_cluster
    from ascendir.session import make_context

    n, tokens, k, hidden, experts = 2, 8, 2, 16, 8
    p, local = tokens * k, experts // n
    group = f"#ascend.device_group<[{', '.join(map(str, range(n)))}]>"
    xt, it, et, ot = f"tensor<{p}x{hidden}xf32>", f"tensor<{p}xi64>", f"tensor<{n * p}x{hidden}xf32>", f"tensor<{n}x{local + 1}xi64>"
    wt, kt, st = f"tensor<{p}x1xf32>", f"tensor<{tokens}x{k}x{hidden}xf32>", f"tensor<{tokens}x{hidden}xf32>"
    text = (f"func.func @main(%x: {xt}, %ids: {it}, %w: {wt}) -> {st} {{\n"
            f"  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {{group = {group}, experts = {experts} : i64}}"
            f" : ({xt}, {it}) -> ({et}, tensor<{n * p}xi64>, {ot}, {it})\n"
            f"  %y = nn.moe_distribute_combine %ex, %offs, %idx {{group = {group}, experts = {experts} : i64}} : ({et}, {ot}, {it}) -> {xt}\n"
            f"  %m = nn.mul %y, %w : ({xt}, {wt}) -> {xt}\n"
            f"  %q = nn.reshape %m : ({xt}) -> {kt}\n"
            f"  %s = nn.reduce_sum %q {{axes = array<i64: 1>, keepdims = false}} : ({kt}) -> {st}\n"
            f"  func.return %s : {st}\n}}\n")
    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline("fuse-moe-finalize-routing", target=TARGET))
    lower(module, None, TARGET)
    rng = np.random.default_rng(0)
    inputs = [{"arg0": rng.standard_normal((p, hidden)).astype(np.float32), "arg1": rng.integers(0, experts, p),
               "arg2": rng.random((p, 1)).astype(np.float32)} for _ in range(n)]  # x, ids, w (as the parser names them)
    res = simulate_cluster([module] * n, [None] * n, inputs, TARGET)
    for r, (out, given) in enumerate(zip(res, inputs)):
        names = [kk["name"] for kk in out.report["kernels"]]
        after = names[next(i for i, nm in enumerate(names) if nm.startswith("moe_distribute_combine")) + 1:]
        assert [nm.rsplit("_", 1)[0] for nm in after] == ["moe_finalize"], names
        want = (given["arg0"] * given["arg2"]).reshape(tokens, k, hidden).sum(axis=1)
        np.testing.assert_allclose(next(iter(out.outputs.values())), want, rtol=1e-6, atol=1e-6, err_msg=f"rank {r}")
