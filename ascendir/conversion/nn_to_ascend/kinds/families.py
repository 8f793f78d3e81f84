"""Tiling families (template.TilingFamily): the sites of one `family` name (template.Site) share
a tiling type (template.Tiling: recorded as `#ascend.tiling` through its `to_attr`), the fields of
a forced tiling (`--tiling`, choose-tiling's option) that apply to them, and how a forced one is
completed and checked (with the error a user sees when it does not fit).

    matmul     tiling.Tiling      m, n, k, l1_depth, split_k, swizzle  (tiling.py)
    attention  FlashTiling        br, bc                               (templates/flash_attention.py)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from xdsl.ir import Operation

from ascendir.conversion.nn_to_ascend.template import Site, TilingFamily
from ascendir.conversion.nn_to_ascend.templates import flash_attention as fa
from ascendir.conversion.nn_to_ascend.tiling import (
    ATTENTION_FIELDS, FIELDS, Problem, TILING_ATTR, Tiling, complete, fit_error, largest_fit,
)
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.session import Session


@dataclass(frozen=True)
class MatmulFamily:
    name: str = "matmul"
    fields: tuple[str, ...] = FIELDS

    def describe(self, op: Operation, index: int) -> str:
        """How errors name a matmul: `nn.matmul #3` and its ONNX node when the importer kept one."""
        node = op.attributes.get("onnx.node") or op.attributes.get("onnx.name")
        return f"nn.matmul #{index}" + (f" ('{node.data}')" if node is not None and hasattr(node, "data") else "")

    def force(self, sites: list[tuple[str, Site]], force: dict[str, int], target: HardwareConfig,
              session: Session, stats: list | None) -> None:
        """Record `force` (completed per matmul, see tiling.complete) on every (name, site).

        Raises:
            AscendirError: on the first matmul the completed tiling does not fit: names the
                buffer, the bytes needed vs available and, as `largest tile that fits`, the
                largest values of the forced fields that fit EVERY matmul (`suggest`) -- the
                flag applies to all of them, so a per-op fit could just move the error to the
                next matmul."""
        done: dict[Problem, tuple[Tiling, int]] = {}
        for name, site in sites:
            p = site.problem
            t0 = time.perf_counter()
            new = p not in done
            if new:
                done[p] = complete(p, force, target, count=True)
            t, n = done[p]
            why = fit_error(p, t, target)
            if why is not None:
                if why.startswith("is not aligned"):
                    raise AscendirError(f"{name}: tiling {t.text()} {why}")
                fit = suggest([s.problem for _, s in sites], force, target)
                spec = ",".join(f"{k}={v}" for k, v in fit.items()) if fit else None
                hint = f"; largest tile that fits: {spec}" if spec else "; no tile fits"
                raise AscendirError(f"{name}: tiling {t.text()} {why}{hint}")
            site.op.attributes[TILING_ATTR] = t.to_attr()
            session.record_search(self.name, new and n > 0, n if new else 0, time.perf_counter() - t0)
            if stats is not None:
                stats.append((site.op, p, None))


def suggest(problems: list[Problem], force: dict[str, int], target: HardwareConfig) -> dict[str, int] | None:
    """The largest values of the forced fields (none above the forced ones) with which every
    problem's completed tiling (`complete`) fits `target`, or None: start from `force`, and while
    some problem's completion does not fit, take the forced fields of its largest_fit (each no
    larger than before, so this ends)."""
    f = dict(force)
    distinct = list(dict.fromkeys(problems))
    while True:
        for p in distinct:
            t = complete(p, f, target)
            if fit_error(p, t, target) is None:
                continue
            fit = largest_fit(p, t, target)
            if fit is None:
                return None
            nf = {k: getattr(fit, k) for k in f}
            if nf == f:  # its fitting tile needs other non-forced fields than `complete` finds
                return None
            f = nf
            break
        else:
            return f


@dataclass(frozen=True)
class AttentionFamily:
    name: str = "attention"
    fields: tuple[str, ...] = ATTENTION_FIELDS

    def describe(self, op: Operation, index: int) -> str:
        return f"nn.attention #{index}"

    def force(self, sites: list[tuple[str, Site]], force: dict[str, int], target: HardwareConfig,
              session: Session, stats: list | None) -> None:
        """Record the forced (br, bc) on every (name, site), a missing one of the two searched.

        Raises:
            AscendirError: a tile that is misaligned or does not fit (flash_attention.forced:
                names the buffer, bytes needed vs available and the largest tile that fits)."""
        for name, site in sites:
            s = site.problem
            t0 = time.perf_counter()
            br, bc, n = force.get("br"), force.get("bc"), 0
            if br is None or bc is None:
                try:
                    t, n = fa.search(s, target, br, bc)
                    br, bc = t.br if br is None else br, t.bc if bc is None else bc
                except ValueError:
                    br, bc = br or 128, bc or 128
            t = fa.forced(s, target, br, bc, name)
            site.op.attributes[TILING_ATTR] = t.to_attr()
            session.record_search(self.name, n > 0, n, time.perf_counter() - t0)


MATMUL = MatmulFamily()
ATTENTION = AttentionFamily()
# In this order choose-tiling handles them (and the search log lists them).
FAMILIES: tuple[TilingFamily, ...] = (MATMUL, ATTENTION)
