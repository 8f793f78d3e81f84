"""The `Template` protocol: what a fused kind (an `nn.fused {kind = ...}` region) tells the
compiler, in one place.

    plan(region)                    -> Plan | Declined   read the region the fusion pass built
    sites(plan, target)             -> [Site]            the ops inside whose `ascend.tiling`
                                                          choose-tiling records
    candidates(plan, site, target)  -> tilings that fit  (footprint within every on-chip space)
    footprint(plan, site, tiling, target) -> {space: bytes per core}
    estimate(plan, site, tiling, target)  -> cycles (AI Core clock), analytic
    search(plan, site, target)      -> Searched          the best candidate (default: `search`)
    emit(ctx, plan, operands)       -> GM result buffers kernels launched through ctx, obeying
                                                          the tilings recorded on the sites

`plan` never re-matches the graph: it reads the body the fusion pass put in the region (with
the parse shared with that pass, e.g. templates/epilogue.parse_chain) and either returns what
`emit` needs or `Declined(reason)`; convert-nn-to-ascend then lowers the body op by op and the
session lists the region with that reason. The plan holds the region's own values (block
arguments, body ops) and each tiled op's problem; `emit` works from the plan alone (it parses
nothing and reads no other op than the plan's), mapping its values to GM buffers through
`operands` (one per block argument).

A tiling is per *site*: one fused region may carry several tiled ops (an ffn region's three
matmuls, a norm_matmul region's projections), each with its own `ascend.tiling`. Every tiling,
of whatever family, is recorded as the one declared attribute `#ascend.tiling<{...}>`
(dialects/ascend TilingAttr) through its `to_attr()` (`Tiling` protocol below). Sites of the
same `family` ("matmul", "attention": kinds/families.py, the `TilingFamily` protocol) share
one tiling type, the fields of `--tiling` that apply to them and one search log entry.

Templates are stateless singletons; registry.py maps each kind to one (FUSED_KINDS) and
choose-tiling (transforms/nn/choose_tiling.py) and convert-nn-to-ascend use only this protocol.
Writing one: docs/adding-a-template.md.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import Declined, LoweringContext
from ascendir.conversion.nn_to_ascend.templates.epilogue import Epilogue
from ascendir.dialects import nn
from ascendir.dialects.ascend import TilingAttr
from ascendir.hardware.config import HardwareConfig
from ascendir.session import Session

Plan = Any  # what a template's `plan` returns for its `emit`: each template defines its own


@dataclass(frozen=True)
class Site:
    """One op inside a region whose tiling choose-tiling picks and records on it.

    Attributes:
        op: the op carrying `ascend.tiling` (an nn.matmul, an nn.attention).
        family: the tiling type's name ("matmul", "attention"): the search log's key and which
            fields of a forced tiling (`--tiling`) apply.
        problem: what the tile choice depends on (tiling.Problem, flash_attention.Shape);
            hashable: equal problems are searched once.
        searched: False when the template picks this op's tile itself at emit time and only
            obeys a forced one (an ffn region's gate / up matmuls).
    """

    op: Operation
    family: str
    problem: Hashable
    searched: bool = True


@runtime_checkable
class Tiling(Protocol):
    """What every family's tiling type offers (tiling.Tiling for matmuls, flash_attention.
    FlashTiling for attentions): the attribute choose-tiling records on the site's op, and a
    short text for messages."""

    def to_attr(self) -> TilingAttr: ...

    def text(self) -> str: ...


@runtime_checkable
class TilingFamily(Protocol):
    """The sites of one family (kinds/families.py): their name, the fields of a forced tiling
    (`--tiling`) that apply to them, how errors name one of their ops, and how forced fields are
    completed, checked and recorded on every site of the family.

    `force` raises AscendirError (one line naming the op, the buffer, bytes needed vs available
    and the largest tile that fits) when a completed tiling does not fit."""

    name: str
    fields: tuple[str, ...]

    def describe(self, op: Operation, index: int) -> str: ...

    def force(self, sites: list[tuple[str, Site]], force: dict[str, int], target: HardwareConfig,
              session: Session, stats: list | None) -> None: ...


@dataclass(frozen=True)
class Searched:
    """The outcome of a search: the best tiling, its estimate (cycles) and candidates scored."""

    best: Tiling
    cycles: float
    scored: int
    seconds: float
    detail: Any = None  # the family's own result (tiling.SearchResult for matmuls), for stats


@runtime_checkable
class Template(Protocol):
    """A fused kind's template (see the module docstring)."""

    kind: str

    def plan(self, region: nn.FusedOp) -> Plan | Declined: ...

    def sites(self, plan: Plan, target: HardwareConfig) -> list[Site]: ...

    def candidates(self, plan: Plan, site: Site, target: HardwareConfig) -> Iterable[Any]: ...

    def footprint(self, plan: Plan, site: Site, tiling: Any, target: HardwareConfig) -> dict[str, int]: ...

    def estimate(self, plan: Plan, site: Site, tiling: Any, target: HardwareConfig) -> float: ...

    def search(self, plan: Plan, site: Site, target: HardwareConfig) -> Searched | None: ...

    def emit(self, ctx: LoweringContext, plan: Plan, operands: list[SSAValue]) -> list[SSAValue]: ...


def search(template: Template, plan: Plan, site: Site, target: HardwareConfig) -> Searched | None:
    """The generic search: every candidate scored with `template.estimate`, the fewest cycles
    wins (ties: the first candidate). None when no candidate fits."""
    t0 = time.perf_counter()
    best, n = None, 0
    for t in template.candidates(plan, site, target):
        n += 1
        c = template.estimate(plan, site, t, target)
        if best is None or c < best[0]:
            best = (c, t)
    if best is None:
        return None
    return Searched(best[1], best[0], n, time.perf_counter() - t0)


class TemplateBase:
    """Defaults for the optional parts: no tiled sites, the generic search."""

    kind = ""

    def sites(self, plan: Plan, target: HardwareConfig) -> list[Site]:
        return []

    def candidates(self, plan: Plan, site: Site, target: HardwareConfig) -> Iterable[Any]:
        return ()

    def footprint(self, plan: Plan, site: Site, tiling: Any, target: HardwareConfig) -> dict[str, int]:
        return {}

    def estimate(self, plan: Plan, site: Site, tiling: Any, target: HardwareConfig) -> float:
        raise NotImplementedError(f"the {self.kind} template has no tiled sites")

    def search(self, plan: Plan, site: Site, target: HardwareConfig) -> Searched | None:
        return search(self, plan, site, target)


def body_of(region: nn.FusedOp) -> list[Operation]:
    """The region's body ops without the terminator."""
    return [o for o in region.body.block.ops if not isinstance(o, nn.YieldOp)]


def gm_args(region: nn.FusedOp, operands: list[SSAValue]) -> dict[SSAValue, SSAValue]:
    """Block argument -> GM buffer, for `emit` (operands in block-argument order)."""
    return dict(zip(region.body.block.args, operands, strict=True))


def gm_epilogue(e: Epilogue, args: dict[SSAValue, SSAValue]) -> Epilogue:
    """`e` (a plan's epilogue over the region's values) with its buffers mapped to GM (`args`,
    from gm_args)."""
    return Epilogue(
        args[e.bias] if e.bias is not None else None, e.activation,
        args[e.residual] if e.residual is not None else None,
        args[e.channel_bias] if e.channel_bias is not None else None,
    )
