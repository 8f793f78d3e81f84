"""The functions of the Python API that the CLI also has a command for, with the CLI's checks:
save / load IR with its weights (`compile -o`, `run FILE.mlir`), run a pass pipeline given as
text (`ascendir-opt -p`), simulate with inputs validated as `run --inputs` validates them.

    import ascendir
    module, weights = ascendir.compile_model("model.onnx", emit="nn")
    ascendir.run_pipeline(module, "ascend-lowering{target=ascend910b2}", weights)
    ascendir.save("model.mlir", module, weights)      # model.mlir + model.weights.npz
    module, weights = ascendir.load("model.mlir")
    result = ascendir.simulate(module, weights, {"input:x": x}, "ascend910b2")
    print(result.summary())
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from ascendir.api.outputs import output_kind, write_output, write_text
from ascendir.driver import check_feeds, load_ir, main_func, print_ir, run_pipeline, weights_path
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter import Accel, SimResult
from ascendir.interpreter import simulate as _simulate
from ascendir.weights import WeightStore

__all__ = ["save", "load", "run_pipeline", "simulate"]


def save(path: str | Path, module: ModuleOp, weights: WeightStore | None = None) -> None:
    """Write `module` as IR text to `path` (gzip-compressed when it ends in `.gz`) and `weights`
    beside it (`model.mlir` → `model.weights.npz`), as `ascendir compile -o` does: each file
    written atomically, a path that is not a regular file (a FIFO, `-`) written through with the
    IR only.

    Raises:
        AscendirError: an output path that exists and is not writable, or a directory.
    """
    text = print_ir(module)
    if weights is not None and len(weights) and output_kind(path) == "atomic":
        write_output(weights_path(path), weights.save, "weights")
    write_text(path, text, "IR")


def load(path: str | Path) -> tuple[ModuleOp, WeightStore]:
    """The module of an IR file (gzip too) and the WeightStore beside it (empty if absent),
    parsed and verified as `ascendir run FILE.mlir` does.

    Raises:
        AscendirError: unreadable file, parse error, IR that fails to verify, damaged weights.
    """
    return load_ir(path)


def simulate(module: ModuleOp, weights: WeightStore | None, inputs: Mapping[str, np.ndarray],
             target: HardwareConfig | str | Path | None = None, timing_only: bool = False, trace: bool = False,
             check_races: bool | None = None, accel: Accel | None = None,
             progress: Callable[[int, int], None] | None = None) -> SimResult:
    """Run a lowered `module` on `target` (a shipped chip's name, a TOML path or a loaded
    config; default ascend910b2) with `inputs` checked as `ascendir run --inputs` checks an .npz:
    keys are @main's input names, optionally `input:`-prefixed (`output:` keys are ignored),
    each array of the exact shape and element type (an int32 array for an i64 input is an error,
    not a silent cast). Timing-only runs take `inputs={}`.

    Returns:
        The SimResult (outputs by name, report, trace events); `result.summary()` is the headline.

    Raises:
        AscendirError: a missing, unknown or doubled input, a wrong shape or dtype (naming the
            input), and every error of `ascendir.interpreter.simulate`.
    """
    if not isinstance(inputs, Mapping):
        raise AscendirError(f"inputs must be a mapping of input name to array, got {type(inputs).__name__}")
    feeds = {} if timing_only and not inputs else check_feeds(main_func(module), dict(inputs), "inputs")
    return _simulate(module, weights, feeds, target, timing_only=timing_only, trace=trace, check_races=check_races,
                     accel=accel, progress=progress)
