"""fold-double-relu from Python: build a small ONNX model with a relu(relu(x)) chain, apply the
pass to the imported nn module, then compile with the pass in the pipeline and simulate.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python examples/custom_pass/demo.py

Prints the relu count before and after the pass, then cycles and max |error| against numpy
with and without it. tests/test_custom_pass_example.py runs this and the ascendir-opt form.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from xdsl.context import Context

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fold_relu, when not pip-installed

import ascendir  # noqa: E402
from ascendir.dialects import nn  # noqa: E402
from fold_relu import FoldDoubleRelu  # noqa: E402

M, K, N = 64, 128, 256
W = np.random.default_rng(1).standard_normal((K, N)).astype(np.float32)


def make_model(path: Path) -> Path:
    """y = relu(relu(x @ W)), x [64, 128] f32, W [128, 256] an initializer; saved at `path`."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Relu", ["r"], ["y"])],
        "double_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
        [numpy_helper.from_array(W, "W")],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def count_relus(module) -> int:
    return sum(isinstance(op, nn.ReluOp) for op in module.walk())


def main(workdir: Path = Path(".")) -> dict:
    model = make_model(workdir / "double_relu.onnx")

    # (1) the pass on its own, on the nn module the importer makes
    module, _ = ascendir.import_onnx(model)
    before = count_relus(module)
    FoldDoubleRelu().apply(Context(), module)
    after = count_relus(module)
    print(f"nn.relu ops: {before} before fold-double-relu, {after} after")

    # (2) registered under its name, it can head the pipeline compile_model runs before lowering
    ascendir.PASSES[FoldDoubleRelu.name] = lambda: FoldDoubleRelu
    x = np.random.default_rng(0).standard_normal((M, K)).astype(np.float32)
    want = np.maximum(x @ W, 0)
    out = {"relus_before": before, "relus_after": after}
    for label, pipeline in (("O2", "O2"), ("fold-double-relu,O2", "fold-double-relu,O2")):
        module, weights = ascendir.compile_model(model, "ascend910b2", pipeline=pipeline)
        res = ascendir.simulate(module, weights, {"x": x}, ascendir.load_target("ascend910b2"))
        err = float(np.abs(res.outputs["y"] - want).max())
        print(f"-p {label:20s}: {res.report['total_cycles']:>8,.0f} cycles, {len(res.report['kernels'])} kernels, "
              f"max |error| {err:.1e}")
        out[label] = (res.report["total_cycles"], len(res.report["kernels"]), err, res.outputs["y"])
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        main(Path(d))
