"""ascendir as an xDSL plugin: the `Universe` its `xdsl.universe` entry point names
(pyproject.toml), so plain `xdsl-opt` (and every tool built on xDSL's `CommandLineTool`) parses
`nn` and `ascend` IR and runs every ascendir pass:

    xdsl-opt nn.mlir -p 'fuse-elementwise,choose-tiling{target=ascend910b2}'

xDSL 0.75 discovers plugins with `importlib.metadata.entry_points(group="xdsl.universe")`
(xdsl/universe.py, `Universe.get_multiverse`) and refuses a dialect or pass name two universes
define: xDSL's own `canonicalize`, `cse` and `dce`, which ascendir's registry offers too, stay
xDSL's. Under xdsl-opt a pass gets xDSL's plain Context: it runs with a throwaway session (its
notes go to stderr, no weights: passes that read weight values see none). The named pipelines
(O0/O1/O2, `ascend-lowering{target=…}`) are ascendir-opt's; xdsl-opt takes pass lists.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.universe import Universe

from ascendir.pipelines import PASSES


def _nn():
    from ascendir.dialects.nn import NN

    return NN


def _ascend():
    from ascendir.dialects.ascend import Ascend

    return Ascend


def _passes() -> dict[str, Callable]:
    from xdsl.transforms import get_all_passes

    xdsl_own = get_all_passes()
    return {name: factory for name, factory in PASSES.items() if name not in xdsl_own}


ASCENDIR_UNIVERSE = Universe(all_dialects={"nn": _nn, "ascend": _ascend}, all_passes=_passes())
