"""ascendir: ONNX → `nn` dialect → fusion/tiling → `ascend` dialect → cycle-accounting interpreter.

Python API (pass authors and scripts):

    import ascendir
    module, weights = ascendir.import_onnx("model.onnx")          # nn dialect + WeightStore
    module, weights = ascendir.compile_model("model.onnx", target="ascend910b2")   # ascend dialect
    result = ascendir.simulate(module, weights, inputs, "ascend910b2")   # inputs checked as `run` does
    result.outputs, result.report, print(result.summary())
    ascendir.save("model.mlir", module, weights); module, weights = ascendir.load("model.mlir")
    session = ascendir.run_pipeline(module, "O2", weights)    # any pipeline text, as ascendir-opt -p

`ascendir.PASSES` maps pass names to pass classes (xDSL ModulePass factories);
`ascendir.PIPELINES` holds the named pipelines O0/O1/O2.
"""

from __future__ import annotations

from ascendir.errors import AscendirError

__all__ = ["AscendirError", "PASSES", "PIPELINES", "import_onnx", "compile_model", "simulate", "load_target", "WeightStore",
           "save", "load", "run_pipeline", "SimResult"]


def __getattr__(name: str):
    # Lazy: keeps `ascendir --help` fast and lets submodules import each other freely.
    if name in ("PASSES", "PIPELINES"):
        from ascendir import pipelines

        return getattr(pipelines, name)
    if name == "import_onnx":
        from ascendir.frontends.onnx import import_onnx

        return import_onnx
    if name == "compile_model":
        from ascendir.driver import compile_model

        return compile_model
    if name in ("simulate", "save", "load", "run_pipeline"):
        from ascendir.api import library

        return getattr(library, name)
    if name == "SimResult":
        from ascendir.interpreter import SimResult

        return SimResult
    if name == "load_target":
        from ascendir.hardware import load_target

        return load_target
    if name == "WeightStore":
        from ascendir.weights import WeightStore

        return WeightStore
    raise AttributeError(f"module 'ascendir' has no attribute {name!r}")
