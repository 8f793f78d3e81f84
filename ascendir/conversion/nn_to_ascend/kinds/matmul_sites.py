"""Matmul sites: what every template whose region holds nn.matmul ops (matmul_epilogue, ffn,
norm_matmul) and the plain nn.matmul (kinds/ops/matmul.py) tell choose-tiling about a matmul's
tiles, through the tiling model of tiling.py (one Problem per matmul, which each template builds from its plan with
`problem_of`; its candidates, buffer footprint and analytic estimate; `search`)."""

from __future__ import annotations

from collections.abc import Iterable

from ascendir.conversion.nn_to_ascend import tiling
from ascendir.conversion.nn_to_ascend.template import Plan, Searched, Site
from ascendir.dialects import nn
from ascendir.hardware.config import HardwareConfig

FAMILY = "matmul"


def matmul_site(mm: nn.MatmulOp, p: tiling.Problem, target: HardwareConfig, searched: bool = True) -> Site | None:
    """The Site of `mm` posing `p` (the Problem its template's plan lays out), or None when
    there is nothing to tile: a dynamic or empty dimension, a dtype other than f16 / bf16 / f32 /
    i8 (int8 x int8 -> int32), or one the target's cube has no mmad for (910A f32: the template
    says so)."""
    if not all(isinstance(d, int) and d > 0 for d in (p.m, p.n, p.k)) or p.dtype not in ("f16", "bf16", "f32", "i8"):
        return None
    if {"i8": "s8"}.get(p.dtype, p.dtype) not in target.cube.k_per_cycle:
        return None
    return Site(mm, FAMILY, p, searched)


class MatmulTiles:
    """candidates / footprint / estimate / search of a matmul Site (mixed into the templates)."""

    def candidates(self, plan: Plan, site: Site, target: HardwareConfig) -> Iterable[tiling.Tiling]:
        return tiling.candidates(site.problem, target)

    def footprint(self, plan: Plan, site: Site, t: tiling.Tiling, target: HardwareConfig) -> dict[str, int]:
        return tiling.buffer_needs(site.problem, t, target)

    def estimate(self, plan: Plan, site: Site, t: tiling.Tiling, target: HardwareConfig) -> float:
        """The cycles `t` is ranked by (tiling.ranked), the order tiling.search picks in."""
        return tiling.ranked(site.problem, tiling.estimate(site.problem, t, target), t)

    def search(self, plan: Plan, site: Site, target: HardwareConfig) -> Searched:
        """tiling.search: the candidates with swizzle tried only where row-major order misses
        the B panels in L2, ties broken towards fewer splits and larger tiles.

        Raises:
            AscendirError: no candidate fits."""
        r = tiling.search(site.problem, target)
        return Searched(r.best, r.estimate.cycles, r.scored, r.seconds, r)
