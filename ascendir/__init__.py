"""ascendir: ONNX → `nn` dialect → fusion/tiling → `ascend` dialect → cycle-accounting interpreter.

Python API (pass authors and scripts):

    import ascendir
    module, weights = ascendir.import_onnx("model.onnx")          # nn dialect + WeightStore
    module, weights = ascendir.compile_model("model.onnx", target="ascend910b2")   # ascend dialect
    result = ascendir.simulate(module, weights, inputs, ascendir.load_target("ascend910b2"))
    result.outputs, result.report

`ascendir.PASSES` maps pass names to pass classes (xDSL ModulePass factories);
`ascendir.PIPELINES` holds the named pipelines O0/O1/O2.
"""

from __future__ import annotations

from ascendir.errors import AscendirError

__all__ = ["AscendirError", "PASSES", "PIPELINES", "import_onnx", "compile_model", "simulate", "load_target", "WeightStore"]


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
    if name == "simulate":
        from ascendir.interpreter import simulate

        return simulate
    if name == "load_target":
        from ascendir.hardware import load_target

        return load_target
    if name == "WeightStore":
        from ascendir.weights import WeightStore

        return WeightStore
    raise AttributeError(f"module 'ascendir' has no attribute {name!r}")
