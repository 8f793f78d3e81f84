"""Multi-device runs (interpreter/sim/cluster.py): the nn collectives lowered to comm kernels
(templates/collectives.py) give numpy's numbers on 2, 4 and 8 devices; a row-parallel matmul +
all_reduce equals the unsharded matmul; a deadlock across devices is reported; link figures
follow the topology; bad topology files get one line naming the key."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from ascendir.driver import lower
from ascendir.errors import AscendirError
from ascendir.hardware.topology import TOPOLOGIES, load_topology
from ascendir.interpreter import simulate, simulate_cluster
from ascendir.session import make_context
from ascendir.weights import WeightStore
from cli_helpers import run_cli

F16, F32 = "f16", "f32"


def _module(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def _lowered(text: str, weights: WeightStore | None = None) -> ModuleOp:
    m = _module(text)
    lower(m, weights, "ascend910b2")
    return m


def _group(n: int) -> str:
    return f"#ascend.device_group<[{', '.join(map(str, range(n)))}]>"


def _collective(op: str, n: int, shape: tuple[int, ...], el: str, **attrs) -> tuple[str, tuple[int, ...]]:
    out = list(shape)
    if op == "all_gather":
        out[attrs["axis"]] *= n
    elif op == "reduce_scatter":
        out[attrs["axis"]] //= n
    elif op == "all_to_all":
        out[attrs["split_axis"]] //= n
        out[attrs["concat_axis"]] *= n
    ty = lambda s: f"tensor<{'x'.join(map(str, s))}x{el}>"  # noqa: E731
    extra = "".join(f", {k} = {v} : i64" for k, v in attrs.items())
    text = (f"func.func @main(%x: {ty(shape)}) -> {ty(out)} {{\n"
            f"  %y = nn.{op} %x {{group = {_group(n)}{extra}}} : ({ty(shape)}) -> {ty(out)}\n"
            f"  func.return %y : {ty(out)}\n}}\n")
    return text, tuple(out)


def _reference(op: str, xs: list[np.ndarray], **attrs) -> list[np.ndarray]:
    """What each rank should hold (sums in f32, rounded once, as HCCL's sum is specified here)."""
    n = len(xs)
    if op == "all_reduce":
        s = np.sum([x.astype(np.float32) for x in xs], axis=0).astype(xs[0].dtype)
        return [s] * n
    if op == "all_gather":
        return [np.concatenate(xs, axis=attrs["axis"])] * n
    if op == "reduce_scatter":
        s = np.sum([x.astype(np.float32) for x in xs], axis=0).astype(xs[0].dtype)
        return np.split(s, n, axis=attrs["axis"])
    split, concat = attrs["split_axis"], attrs["concat_axis"]
    return [np.concatenate([np.split(x, n, axis=split)[r] for x in xs], axis=concat) for r in range(n)]


CASES = [
    ("all_reduce", (4, 8), {}),
    ("all_reduce", (3, 5), {}),  # 15 elements: the one-shot form on 2, 4 and 8 devices
    ("all_gather", (4, 8), {"axis": 0}),
    ("all_gather", (4, 8), {"axis": 1}),
    ("reduce_scatter", (8, 16), {"axis": 0}),
    ("reduce_scatter", (2, 16, 8), {"axis": 1}),
    ("all_to_all", (8, 16), {"split_axis": 0, "concat_axis": 1}),
    ("all_to_all", (16, 8), {"split_axis": 0, "concat_axis": 0}),
]


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("el", [F16, F32])
@pytest.mark.parametrize("op,shape,attrs", CASES, ids=lambda c: str(c))
def test_collective_numerics(op, shape, attrs, el, n):
    text, _ = _collective(op, n, shape, el, **attrs)
    m = _lowered(text)
    rng = np.random.default_rng(n)
    dt = np.float16 if el == F16 else np.float32
    xs = [rng.standard_normal(shape).astype(dt) for _ in range(n)]
    res = simulate_cluster([m] * n, [None] * n, [{"arg0": x} for x in xs], topology="atlas800-a2")
    for r, (got, want) in enumerate(zip([x.outputs["out0"] for x in res], _reference(op, xs, **attrs))):
        np.testing.assert_array_equal(got, want, err_msg=f"rank {r}")


def test_all_reduce_of_sixteen_bit_floats_accumulates_in_f32():
    """0.5 ulp contributions that an f16 running sum would round away survive the f32 sum."""
    n = 8
    text, _ = _collective("all_reduce", n, (16,), F16)
    m = _lowered(text)
    xs = [np.full(16, 2048.0 if r == 0 else 1.0, np.float16) for r in range(n)]
    res = simulate_cluster([m] * n, [None] * n, [{"arg0": x} for x in xs])
    assert np.all(res[0].outputs["out0"] == np.float16(2048 + 7))  # an f16 running sum stays at 2048


MATMUL_AR = """func.func @main(%x: tensor<16x{k}xf32>) -> tensor<16x32xf32> {{
  %w = nn.weight @w : tensor<{k}x32xf32>
  %p = nn.matmul %x, %w : (tensor<16x{k}xf32>, tensor<{k}x32xf32>) -> tensor<16x32xf32>
  %y = nn.all_reduce %p {{group = {group}}} : (tensor<16x32xf32>) -> tensor<16x32xf32>
  func.return %y : tensor<16x32xf32>
}}
"""


@pytest.mark.parametrize("n", [2, 8])
def test_row_parallel_matmul_all_reduce_equals_numpy(n):
    """Megatron's row-parallel linear: rank r holds rows r of W and columns r of x; the all_reduce
    of the partial products is x @ W."""
    K = 64
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, K)).astype(np.float32)
    w = rng.standard_normal((K, 32)).astype(np.float32)
    k = K // n
    stores = []
    for r in range(n):
        s = WeightStore()
        s.add("w", w[r * k:(r + 1) * k])
        stores.append(s)
    m = _lowered(MATMUL_AR.format(k=k, group=_group(n)), stores[0])
    res = simulate_cluster([m] * n, stores, [{"arg0": x[:, r * k:(r + 1) * k]} for r in range(n)])
    for r in res:
        np.testing.assert_allclose(r.outputs["out0"], x @ w, rtol=1e-5, atol=1e-4)
    cl = res[0].report["cluster"]
    assert cl["devices"] == n and len(cl["per_device"]) == n
    assert len(cl["links"]) == n * (n - 1)  # the mesh: every rank sends to every peer
    (c,) = cl["collectives"]
    assert 0 < c["exposed_cycles"] == c["cycles"] <= cl["total_cycles"]
    # the compute kernel comes first: the comm kernel is part of the device's time
    assert res[0].report["total_cycles"] == cl["total_cycles"] > c["cycles"]


def test_timing_only_gives_the_same_cycles():
    n = 4
    text, _ = _collective("all_reduce", n, (64, 64), F16)
    m = _lowered(text)
    xs = [np.ones((64, 64), np.float16)] * n
    full = simulate_cluster([m] * n, [None] * n, [{"arg0": x} for x in xs])
    timing = simulate_cluster([m] * n, [None] * n, [{}] * n, timing_only=True)
    assert full[0].report["cluster"] == timing[0].report["cluster"]


def test_link_figures_follow_the_topology():
    """An 8-rank all_gather of 16 MiB per rank: each rank sends 7 chunks, one per link, each at
    HCCL's SDMA flow rate (19.3 GB/s, below the 56 GB/s HCCS link): one chunk time, plus heads."""
    n, rows = 8, 16 * 2**20 // (4 * 1024)
    text, _ = _collective("all_gather", n, (rows, 1024), F32, axis=0)
    m = _lowered(text)
    res = simulate_cluster([m] * n, [None] * n, [{}] * n, timing_only=True)
    cl = res[0].report["cluster"]
    topo = load_topology("atlas800-a2")
    clock = 1.8e9
    chunk = rows * 1024 * 4
    transfer = chunk / (topo.hccl.sdma_GBps * 1e9) * clock
    assert {u["bytes"] for u in cl["links"]} == {chunk}
    (c,) = cl["collectives"]
    assert transfer < c["cycles"] < transfer * 1.05
    algbw = n * chunk / (c["cycles"] / clock) / 1e9  # nccl-tests all_gather counting: output bytes / time
    assert 140 < algbw < 8 * 19.3



def test_a_port_shares_its_bandwidth_and_keeps_its_bytes():
    """Links' port model (interpreter/timing/links.py) on the A3 slice, a die's UB port 196 GB/s:
    15 equal transfers issued together are port-bound (15 x 19.3 GB/s flows exceed it) and the
    last lands when the port has moved all their bytes; a 4 KiB transfer issued beside 6 big ones
    (6 x 19.3 GB/s, under the port) lands after its own head and bytes, not after the bytes the
    other links booked on the port first (a FIFO port made it wait ~1.5 ms)."""
    from ascendir.interpreter.timing.links import Links

    topo = load_topology("a3-supernode-16")
    clock, n = 1.85e9, 32 * 2**20
    ub = next(d for d in topo.domains if d.name == "ub")
    links = Links(topo, clock)
    ends = [links.transfer(0, q, n, 0.0) for q in range(2, 16)] + [links.transfer(0, 1, n, 0.0)]
    port_bound = 14 * n / (ub.total_GBps * 1e9) * clock  # the 14 UB peers; peer 1 is on the die-to-die link
    assert port_bound < max(ends[:14]) < port_bound * 1.01
    links = Links(topo, clock)
    for q in range(2, 8):
        links.transfer(0, q, n, 0.0)
    small = links.transfer(0, 8, 4096, 0.0)
    assert small < links.cycles(2 * topo.hccl.sdma_head_us), small

DEADLOCK = """builtin.module {
  ascend.kernel @k(%x: memref<8xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %c1 = arith.constant 1 : index
    %r = ascend.group_rank {group = #ascend.device_group<[0, 1]>} : index
    %p = arith.addi %r, %c1 : index
    %c2 = arith.constant 2 : index
    %q = arith.remui %p, %c2 : index
    ascend.notify_wait %q {group = #ascend.device_group<[0, 1]>}
    ascend.notify_record %q {group = #ascend.device_group<[0, 1]>}
    ascend.return
  }
  func.func @main(%x: memref<8xf32, #ascend<space gm>>) {
    ascend.launch @k(%x) : memref<8xf32, #ascend<space gm>>
    func.return
  }
}
"""


def test_deadlock_across_devices_is_reported():
    """Both ranks wait for the other's notify before recording their own: reported, not hung."""
    m = _module(DEADLOCK)
    with pytest.raises(AscendirError, match=r"deadlock across devices: device 0: kernel @k waits for a notify from device 1; "
                                            r"device 1: kernel @k waits for a notify from device 0"):
        simulate_cluster([m, m], [None, None], [{"arg0": np.zeros(8, np.float32)}] * 2)


def test_waiting_on_a_finished_device_is_a_deadlock():
    """Device 0 waits for a second notify device 1 never records: device 1 finishes, 0 is stuck."""
    wait = "    ascend.notify_wait %q {group = #ascend.device_group<[0, 1]>}\n"
    record = "    ascend.notify_record %q {group = #ascend.device_group<[0, 1]>}\n"
    handshake = _module(DEADLOCK.replace(wait + record, record + wait))
    extra = _module(DEADLOCK.replace(wait + record, record + wait + wait))
    with pytest.raises(AscendirError, match=r"^deadlock across devices: device 0: kernel @k waits for a notify from device 1 "
                                            r"\(finished: devices 1\)$"):
        simulate_cluster([extra, handshake], [None, None], [{"arg0": np.zeros(8, np.float32)}] * 2)


def test_a_comm_kernel_needs_a_cluster():
    m = _lowered(_collective("all_reduce", 2, (4, 8), F32)[0])
    with pytest.raises(AscendirError, match=r"kernel @all_reduce_0: a collective over 2 devices; run the module on a cluster"):
        simulate(m, None, {"arg0": np.zeros((4, 8), np.float32)})


def test_groups_the_topology_cannot_run():
    m = _lowered(_collective("all_reduce", 2, (4, 8), F32)[0].replace("[0, 1]", "[0, 9]"))
    with pytest.raises(AscendirError, match=r"kernel @all_reduce_0: device 9 is not in topology atlas800-a2"):
        simulate_cluster([m] * 2, [None] * 2, [{}] * 2, timing_only=True)
    m = _lowered(_collective("all_reduce", 16, (4, 8), F32)[0])
    with pytest.raises(AscendirError, match=r"a group of 16 devices does not fit topology atlas800-a2 \(8 devices\)"):
        simulate_cluster([m] * 8, [None] * 8, [{}] * 8, timing_only=True)
    with pytest.raises(AscendirError, match=r"9 devices do not fit topology atlas800-a2"):
        simulate_cluster([m] * 9, [None] * 9, [{}] * 9, timing_only=True)


def test_roce_between_servers_is_slower_than_hccs():
    """16 ranks over two servers: the links between them are RoCE (12 GB/s RDMA flows sharing a
    25 GB/s port), inside a server HCCS; the all_gather waits for the RoCE part."""
    text, _ = _collective("all_gather", 16, (1024, 1024), F32, axis=0)
    m = _lowered(text)
    res = simulate_cluster([m] * 16, [None] * 16, [{}] * 16, topology="atlas800-a2-x2", timing_only=True)
    links = res[0].report["cluster"]["links"]
    dom = {(u["src"], u["dst"]): u["domain"] for u in links}
    assert dom[(0, 1)] == "hccs" and dom[(0, 8)] == "roce" and dom[(9, 15)] == "hccs"
    busy = {u["domain"]: u["busy_cycles"] for u in links}
    assert busy["roce"] > 2 * busy["hccs"]


def test_cluster_trace_has_a_process_per_device_and_a_track_per_link():
    n = 2
    m = _lowered(_collective("all_reduce", n, (4, 8), F32)[0])
    res = simulate_cluster([m] * n, [None] * n, [{}] * n, timing_only=True, trace=True)
    names = {e["args"]["name"] for e in res[0].trace_events if e["name"] == "process_name"}
    assert names == {"device 0", "device 1", "links"}
    tracks = {e["args"]["name"] for e in res[0].trace_events if e["name"] == "thread_name" and e["pid"] == n + 1}
    assert tracks == {"0 -> 1", "1 -> 0"}


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_shipped_topologies_load(name):
    t = load_topology(name)
    assert t.devices >= 8 and t.link(0, 1).flow_GBps > 0


BASE = """[topology]
name = "t"
chip = "ascend910b2"
devices = 2

[[domains]]
name = "hccs"
transport = "sdma"
groups = [[0, 1]]
per_peer_GBps = 56.0
total_GBps = 392.0
latency_us = 0.0

[hccl]
sdma_GBps = 19.3
sdma_head_us = 0.6
sdma_large_head_us = 1.5
sdma_large_bytes = 524288
rdma_GBps = 12.0
rdma_head_us = 7.0
notify_record_us = 1.0
notify_wait_us = 0.02
"""


@pytest.mark.parametrize("old,new,message", [
    ("devices = 2", "devices = 0", "topology.devices: must be an integer in [1, 4096], got 0"),
    ("sdma_GBps = 19.3", "sdma_GBps = -1", "hccl.sdma_GBps: must be a positive number, got -1"),
    ("notify_wait_us = 0.02", "", "hccl.notify_wait_us: missing"),
    ("latency_us = 0.0", "latency_us = 0.0\nbandwidth = 3", "domains[0].bandwidth: unknown key"),
    ("groups = [[0, 1]]", "groups = [[0, 2]]", "domains[0].groups: device 2 is not in 0..1"),
    ("groups = [[0, 1]]", "groups = [[0, 0]]", "domains[0].groups: a device is listed twice in [0, 0]"),
    ("transport = \"sdma\"", "transport = \"pcie\"", "domains[0].transport: must be one of sdma, rdma, got 'pcie'"),
    ("total_GBps = 392.0", "total_GBps = 10.0", "domains[0].total_GBps: 10.0 is below per_peer_GBps 56.0"),
    ("[hccl]", "[hccs]", "hccs: unknown table"),
    ("name = \"t\"", "name = \"t\"\nname = \"u\"", "cannot read topology file"),
])
def test_bad_topology_file_names_the_key(tmp_path, old, new, message):
    p = tmp_path / "t.toml"
    p.write_text(BASE.replace(old, new, 1))
    with pytest.raises(AscendirError) as e:
        load_topology(p)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_cli_run_devices(tmp_path):
    """`ascendir run M.mlir --devices 2`: rank-suffixed inputs, every rank's outputs, the cluster
    report; a bad topology file is one line and exit code 2."""
    text, _ = _collective("all_reduce", 2, (4, 8), F32)
    src = tmp_path / "m.mlir"
    src.write_text(text)
    x0, x1 = np.arange(32, dtype=np.float32).reshape(4, 8), np.ones((4, 8), np.float32)
    np.savez(tmp_path / "in.npz", **{"arg0@0": x0, "arg0@1": x1})
    r = run_cli("run", str(src), "--devices", "2", "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "o.npz"),
                "--report", str(tmp_path / "r.json"))
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "o.npz") as o:
        np.testing.assert_array_equal(o["out0"], x0 + x1)
        np.testing.assert_array_equal(o["out0@1"], x0 + x1)
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["cluster"]["devices"] == 2 and rep["cluster"]["topology"] == "atlas800-a2"
    bad = tmp_path / "bad.toml"
    bad.write_text(BASE.replace("devices = 2", "devices = \"two\""))
    r = run_cli("run", str(src), "--devices", "2", "--topology", str(bad))
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        f"error: topology file {bad}: topology.devices: must be an integer in [1, 4096], got 'two'"]


def test_calibration_rows_of_v8():
    """S16's 2- and 8-card figures within 10 % (the 4-card ones are 21-25 % high: calibration table)."""
    from ascendir.api.calibration import collective_GBps

    for op, cards, measured in (("all_gather", 2, 38.0), ("all_gather", 8, 149.0), ("all_reduce", 2, 18.0), ("all_reduce", 8, 72.0)):
        assert abs(collective_GBps(op, cards) / measured - 1) < 0.10, (op, cards)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("op,shape,attrs", [c for c in CASES if c[1] != (3, 5)], ids=lambda c: str(c))
def test_symmetric_ranks_time_like_every_rank(op, shape, attrs, n):
    """Timing-only over symmetric ranks simulates rank 0 alone: its cycles, collectives and links
    are those of the run of every device."""
    text, _ = _collective(op, n, shape, F32, **attrs)
    m = _lowered(text)
    every = simulate_cluster([m] * n, [None] * n, [{}] * n, timing_only=True)[0].report
    (one,) = simulate_cluster([m] * n, [None] * n, [{}] * n, timing_only=True, symmetric=True)
    a, b = every["cluster"], one.report["cluster"]
    assert b["symmetric"] and not a["symmetric"] and b["devices"] == a["devices"] == n
    assert one.report["total_cycles"] == every["total_cycles"]
    assert b["collectives"][0]["cycles"] == a["collectives"][0]["cycles"]
    assert b["links"] == [u for u in a["links"] if u["src"] == 0]


def test_symmetric_ranks_refused_where_ranks_differ():
    m = _lowered(_collective("all_gather", 16, (64, 64), F32, axis=0)[0])
    with pytest.raises(AscendirError, match="symmetric ranks need a timing-only run"):
        simulate_cluster([m] * 16, [None] * 16, [{}] * 16, topology="atlas800-a2-x2", timing_only=True, symmetric=True)


def test_cli_run_devices_refuses_plots(tmp_path):
    src = tmp_path / "m.mlir"
    src.write_text(_collective("all_reduce", 2, (4, 8), F32)[0])
    r = run_cli("run", str(src), "--devices", "2", "--plots", str(tmp_path / "p"))
    assert r.exit_code == 2 and "--plots draws one chip" in r.output and not (tmp_path / "p").exists()
