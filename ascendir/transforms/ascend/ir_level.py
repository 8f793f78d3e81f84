"""The IR level an ascend-level pass (plan-memory, insert-sync, double-buffer) needs.

Those passes work on `ascend.kernel`s; on nn IR (the input of convert-nn-to-ascend) they find no
kernel and would leave the module as it was, so `ascendir-opt nn.mlir -p plan-memory` looked like
it succeeded. This is the mirror of driver.parse_pipeline's check, which rejects these passes in
the nn-level pipeline of compile / run.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from ascendir.dialects import ascend
from ascendir.errors import AscendirError


def require_ascend_ir(module: ModuleOp, pass_name: str) -> None:
    """Raise unless `module` is lowered IR: it has an `ascend.kernel`, or no nn op at all (a model
    whose graph launches no kernel passes, as the lowering pipeline runs these passes on it).

    Raises:
        AscendirError: one line naming the pass and the first nn op found.
    """
    if any(isinstance(op, ascend.KernelOp) for op in module.ops):
        return
    nn_op = next((op for op in module.walk() if op.name.startswith("nn.")), None)
    if nn_op is not None:
        raise AscendirError(
            f"{pass_name} is an ascend-level pass, but the module is nn IR ({nn_op.name}, no ascend.kernel): "
            f"lower it first (-p '...,convert-nn-to-ascend,{pass_name}', or ascendir compile)"
        )
