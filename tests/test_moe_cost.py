"""MoE routing statistics (costmodel/moe_routing.py) and the analytic grouped / gathered / dense
cost of a MoE layer's expert GEMMs (conversion/nn_to_ascend/moe_cost.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ascendir.conversion.nn_to_ascend.moe_cost import MoeShape, dense, gathered, grouped, grouped_gemm_cycles
from ascendir.conversion.nn_to_ascend.tiling import Problem, search
from ascendir.costmodel.moe_routing import (
    RoutingSpec, RoutingStats, check_indices, make_routing, parse_routing, tokens_per_expert,
)
from ascendir.errors import AscendirError
from ascendir.hardware import load_target

HW = load_target("ascend910b2")


def test_parse_routing(tmp_path) -> None:
    assert parse_routing("uniform") == RoutingSpec("uniform")
    assert parse_routing("skew=1.5").alpha == 1.5
    f = tmp_path / "r.npz"
    np.savez(f, indices=np.array([[0, 1]]))
    assert parse_routing(str(f)).text() == str(f)
    for bad in ("skew=-1", "skew=x", "skew=nan", "zipf", str(tmp_path / "missing.npz")):
        with pytest.raises(AscendirError, match="--moe-routing"):
            parse_routing(bad)


@pytest.mark.parametrize("spec", [RoutingSpec("uniform"), RoutingSpec("skew", alpha=1.2)])
def test_made_routing_is_topk_shaped_and_seeded(spec: RoutingSpec) -> None:
    a = make_routing(spec, 300, 8, 64)
    assert a.shape == (300, 8) and a.dtype == np.int64
    check_indices(a, 64)  # distinct experts per token, ids in range
    assert np.array_equal(a, make_routing(spec, 300, 8, 64))
    counts = tokens_per_expert(a, 64)
    assert counts.sum() == 300 * 8
    if spec.kind == "skew":  # Zipf: expert 0 far above the uniform share, the tail below it
        assert counts[0] > 3 * 300 * 8 / 64 > counts[-8:].max()
    else:
        assert counts.max() < 2 * 300 * 8 / 64


def test_steep_skew_routes_without_warnings() -> None:
    """skew=A for a large A: (e + 1)^-A underflows to 0 for the tail experts; the keys are taken
    in logs, so no log(0) RuntimeWarning (printed on the CLI) and the k head experts win."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = make_routing(RoutingSpec("skew", alpha=1e4), 8, 2, 16)
    assert np.array_equal(a, np.tile([0, 1], (8, 1)))


def test_routing_from_file(tmp_path) -> None:
    f = tmp_path / "r.npz"
    np.savez(f, indices=np.array([[3, 1], [1, 0]]))
    spec = parse_routing(str(f))
    a = make_routing(spec, 2, 2, 4)
    s = RoutingStats.of(a, 4, bytes_per_expert=100)
    assert s.tokens_per_expert == (1, 2, 0, 1) and s.experts_touched == 3 and s.expert_weight_bytes == 300
    with pytest.raises(AscendirError, match=r"indices \[2, 2\], the layer routes \[3, 2\]"):
        make_routing(spec, 3, 2, 4)
    np.savez(f, indices=np.array([[1, 1]]))
    with pytest.raises(AscendirError, match="same expert twice"):
        make_routing(parse_routing(str(f)), 1, 2, 4)
    np.savez(f, indices=np.array([[0, 4]]))
    with pytest.raises(AscendirError, match=r"in \[0, 4\)"):
        make_routing(parse_routing(str(f)), 1, 2, 4)


def test_grouped_single_group_matches_the_matmul_estimate() -> None:
    """One expert holding every row is one GEMM: the grouped kernel's cycles are the matmul
    template's estimate for it, up to the per-core rounding of items the grouped sum spreads."""
    counts = np.array([0, 512, 0, 0])
    e = search(Problem(1, 512, 2048, 1024, "f16", 2), HW).estimate.cycles
    g = grouped_gemm_cycles(counts, 2048, 1024, "f16", HW)
    assert 0.9 * e <= g <= e * 1.0001
    assert grouped_gemm_cycles(np.zeros(4, np.int64), 2048, 1024, "f16", HW) == 0.0


def test_grouped_reads_only_touched_experts() -> None:
    s = MoeShape(hidden=1024, inter=512, experts=16, top_k=2)
    idx = make_routing(RoutingSpec("uniform"), 1, 2, 16)
    counts = tokens_per_expert(idx, 16)
    g, ga, d = grouped(s, counts, "f16", HW), gathered(s, 1, "f16", HW), dense(s, 1, "f16", HW)
    assert g.weight_bytes == 2 * s.expert_bytes("f16")
    assert d.weight_bytes == 16 * s.expert_bytes("f16")
    assert ga.weight_bytes == 2 * g.weight_bytes  # gathered: read by the gather, then by the MatMul
    assert g.cycles < ga.cycles and g.cycles < d.cycles
    # more tokens on the same experts: more cycles, the same weight bytes
    g2 = grouped(s, counts * 64, "f16", HW)
    assert g2.cycles > g.cycles and g2.weight_bytes == g.weight_bytes


GATHERED = """
func.func @main(%x: tensor<{p}x{h}x1xf16>, %ids: tensor<{p}xi64>) -> tensor<{p}x{i2}x1xf16> {{
  %wgu = nn.weight @gate_up : tensor<{e}x{i2}x{h}xf16>
  %gu = nn.gather %wgu, %ids {{axis = 0 : i64}} : (tensor<{e}x{i2}x{h}xf16>, tensor<{p}xi64>) -> tensor<{p}x{i2}x{h}xf16>
  %a = nn.matmul %gu, %x : (tensor<{p}x{i2}x{h}xf16>, tensor<{p}x{h}x1xf16>) -> tensor<{p}x{i2}x1xf16>
  func.return %a : tensor<{p}x{i2}x1xf16>
}}
"""


def _simulated(text: str) -> float:
    """Total cycles of nn IR `text` lowered as the benchmark's model check does (choose-tiling, -O0),
    timing-only on HW."""
    from xdsl.parser import Parser

    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate
    from ascendir.session import make_context

    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline(f"choose-tiling{{target={HW.name}}}", "O0", HW.name, None), None)
    lower(module, None, HW.name)
    return simulate(module, None, {}, HW, timing_only=True).report["total_cycles"]


def test_gathered_matches_the_simulated_lowering() -> None:
    """The gather kernel and the batched MatMul over its output, lowered and simulated, against
    the analytic gate/up half of moe_cost.gathered: the MatMul reads the just-gathered weights
    from L2 (they fit), which the estimate must count: -2 % against the simulation, +28 % when
    priced at HBM."""
    from ascendir.conversion.nn_to_ascend.moe_cost import ES
    from ascendir.costmodel import bandwidth_bound_cycles

    p, h, i2, e = 32, 512, 512, 8
    sim = _simulated(GATHERED.format(p=p, h=h, i2=i2, e=e))
    w = p * i2 * h * ES["f16"]
    gather = bandwidth_bound_cycles(w, w, HW) + HW.kernel_launch_cycles
    warm, cold = (search(Problem(p, i2, 1, h, "f16", 2, a_batch=p, b_batch=p, l2_warm=t), HW).estimate for t in (True, False))
    assert warm.parts["l2_hit_rate"] == 1.0 and cold.parts["l2_hit_rate"] < 1.0
    assert warm.cycles < cold.cycles
    assert abs(gather + warm.cycles - sim) / sim < 0.10, (gather, warm.cycles, cold.cycles, sim)


@pytest.mark.parametrize("tokens", [40, 56])
def test_gathered_is_warm_only_while_the_gathers_traffic_fits_l2(tokens: int) -> None:
    """80 / 112 pairs of a [1024, 512] f16 gate/up: the gathered weights (84 / 117 MB) fit the 192
    MiB L2 both times, but the gather reads and writes 2 w, and its first writes stay resident
    only while that traffic fits L2 (interpreter/timing/l2.py): the simulated MatMul finds 93 % /
    6 % of its reads there. moe_cost.gathered, whole layer (gate/up and down, the benchmark's
    graph), against the simulation: -2.6 % / -0.4 % (priced warm whenever w fits L2, 112 pairs
    were -16 %; priced cold, 80 pairs +16 %)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from moe import CHECK

    s = MoeShape(512, 512, 8, 2)
    pairs = tokens * s.top_k
    assert 0.4 < pairs * 2 * s.inter * s.hidden * 2 / HW.memory.l2_bytes < 1
    sim = _simulated(CHECK.format(p=pairs, h=s.hidden, i=s.inter, i2=2 * s.inter, e=s.experts, t="f16"))
    est = gathered(s, tokens, "f16", HW).cycles
    assert abs(est - sim) / sim < 0.05, (est, sim)
