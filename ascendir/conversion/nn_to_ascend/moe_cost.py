"""Analytic cost of a MoE layer's expert GEMMs under three lowerings, for one routing.

* **grouped** (ops-transformer's GroupedMatmul, the lowering issue 18 asks for): one kernel per
  projection over all experts; expert e's c_e routed rows are one GEMM [c_e, K] x [K, N]; the
  work items (output tiles) of all groups share the cores; an expert with no rows is never
  read. Cycles = max(Σ_groups items·item cycles / num_aic + the largest fill, Σ_groups bandwidth
  floors) + one launch (+ split-K reductions), each group's tiling from `tiling.search` on its
  own Problem. An approximation of that kernel: each group's item cycles are `tiling.estimate`'s
  for the group alone (its own HBM share), not re-derived for the shared launch.
* **gathered** (ascendir's lowering of HF's batched-expert export today): the weights of each
  routed (token, k) pair's expert are gathered to [T·k, N, K] (one copy kernel: T·k·W read and
  written) and a batched MatMul of T·k products [N, K] x [K, 1] reads them again, from L2 when
  the gather's traffic (T·k·W read and written) fits L2 (it has just written them: they are still
  resident), else from HBM.
* **dense** (every expert on every token, the router weight zero where not routed): E GEMMs
  [T, K] x [K, N], every expert's weights read once.

The gated experts' gate and up projections are one [H, 2I] GEMM (SwiGLU between it and the
down projection [I, H], as GroupedMatmul fuses it); the SwiGLU's own vector time is left out
of all three, so they compare the GEMMs and the weight traffic. Cycles are of the AI Core clock
of `target` (HardwareConfig.clock_hz); bytes are GM bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ascendir.conversion.nn_to_ascend.tiling import Problem, search
from ascendir.costmodel import bandwidth_bound_cycles
from ascendir.hardware.config import HardwareConfig

ES = {"f16": 2, "bf16": 2, "f32": 4}


@dataclass(frozen=True)
class MoeShape:
    """A MoE layer: hidden H, expert intermediate I, E routed experts, top-k, `shared` shared
    experts of intermediate I each (run densely on every token), gated (SwiGLU) experts."""

    hidden: int
    inter: int
    experts: int
    top_k: int
    shared: int = 0

    def expert_bytes(self, dtype: str) -> int:
        """Bytes of one expert's weights: gate+up [H, 2I] and down [I, H]."""
        return 3 * self.hidden * self.inter * ES[dtype]


@dataclass(frozen=True)
class MoeCost:
    """Cycles of the expert GEMMs and the expert-weight bytes read from GM (shared experts
    excluded from both: they cost the same under every lowering)."""

    cycles: float
    weight_bytes: int
    gm_bytes_peak: int = 0  # the largest intermediate a lowering writes to GM (gathered weights)


def _group(m: int, n: int, k: int, dtype: str, target: HardwareConfig) -> tuple[float, float, float, float]:
    """(items · item cycles, fill, bandwidth floor, split-K reduction) of one [m, k] x [k, n] group."""
    r = search(Problem(1, m, n, k, dtype, ES[dtype]), target)
    t, parts = r.best, r.estimate.parts
    ks = -(-k // t.split_k)
    ks = -(-ks // t.k_l1) * t.k_l1
    items = -(-m // t.m) * -(-n // t.n) * -(-k // ks)
    fill = parts["core"] - parts["items_per_core"] * parts["item"]
    return items * parts["item"], fill, parts["floor"], parts.get("reduce", 0.0)


def grouped_gemm_cycles(counts: np.ndarray, n: int, k: int, dtype: str, target: HardwareConfig) -> float:
    """Cycles of one GroupedMatmul launch: group e is [counts[e], k] x [k, n] (module docstring)."""
    work = fill = floor = red = 0.0
    for c, mult in zip(*np.unique(counts[counts > 0], return_counts=True)):
        w, f, fl, r = _group(int(c), n, k, dtype, target)
        work, fill, floor, red = work + mult * w, max(fill, f), floor + mult * fl, red + mult * r
    if work == 0:
        return 0.0
    return max(work / target.num_aic + fill, floor) + target.kernel_launch_cycles + red


def grouped(shape: MoeShape, counts: np.ndarray, dtype: str, target: HardwareConfig) -> MoeCost:
    """GroupedMatmul for gate+up then down, per-expert rows `counts` [E] (MoeInitRouting's)."""
    h, i = shape.hidden, shape.inter
    cyc = grouped_gemm_cycles(counts, 2 * i, h, dtype, target) + grouped_gemm_cycles(counts, h, i, dtype, target)
    return MoeCost(cyc, int((counts > 0).sum()) * shape.expert_bytes(dtype))


def gathered(shape: MoeShape, tokens: int, dtype: str, target: HardwareConfig) -> MoeCost:
    """Today's gathered-weight batched MatMuls (module docstring): independent of the routing."""
    h, i, es = shape.hidden, shape.inter, ES[dtype]
    pairs = tokens * shape.top_k
    cyc = 0.0
    for n, k in ((2 * i, h), (h, i)):
        w = pairs * n * k * es
        cyc += bandwidth_bound_cycles(w, w, target) + target.kernel_launch_cycles  # the gather
        # [n, k] x [k, 1] per pair, the gathered weights as A (as HF's export multiplies them);
        # the gather just wrote them: the MatMul's reads find them in L2 while l2_bytes of HBM
        # traffic have not passed since (interpreter/timing/l2.py's residency), and the gather's
        # own reads and writes, 2 w, are such traffic: w fitting L2 is not enough (w = 0.58 x L2:
        # 6 % of the simulated MatMul's reads hit; 0.42 x L2: 93 %; at 0.5 x L2 the first writes
        # reach the residency's end as the MatMul starts, a launch later: 41 %, priced cold)
        warm = 2 * w < target.memory.l2_bytes
        cyc += search(Problem(pairs, n, 1, k, dtype, es, a_batch=pairs, b_batch=pairs, l2_warm=warm), target).estimate.cycles
    wb = pairs * shape.expert_bytes(dtype)
    return MoeCost(cyc, 2 * wb, wb)


def dense(shape: MoeShape, tokens: int, dtype: str, target: HardwareConfig) -> MoeCost:
    """Every expert on every token: E GEMMs per projection."""
    h, i, es = shape.hidden, shape.inter, ES[dtype]
    cyc = sum(search(Problem(1, tokens, n, k, dtype, es), target).estimate.cycles for n, k in ((2 * i, h), (h, i)))
    return MoeCost(shape.experts * cyc, shape.experts * shape.expert_bytes(dtype))


def shared_cycles(shape: MoeShape, tokens: int, dtype: str, target: HardwareConfig) -> float:
    """The shared experts (dense on every token, the same under every lowering)."""
    if not shape.shared:
        return 0.0
    h, i, es = shape.hidden, shape.inter * shape.shared, ES[dtype]
    return math.fsum(search(Problem(1, tokens, n, k, dtype, es), target).estimate.cycles for n, k in ((2 * i, h), (h, i)))
