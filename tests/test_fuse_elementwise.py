"""fuse-elementwise + its template: the fused module (one vector kernel per region) gives the
numpy nn reference's outputs, and costs fewer GM bytes and cycles than op by op."""

from __future__ import annotations

import numpy as np
import pytest

from ascendir.dialects import nn
from ascendir.driver import lower, parse_pipeline, run_passes
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.weights import WeightStore
from lowering_harness import parse, rand

# RoPE (x*cos + rotate_half(x)*sin), a residual add written out and reused, a cast + where tail.
ROPE = """
func.func @main(%x: tensor<2x4x8x64xf32> {onnx.name = "x"}, %cos: tensor<1x1x8x64xf32> {onnx.name = "cos"},
                %r: tensor<2x4x8x64xf32> {onnx.name = "r"}, %sin: tensor<1x1x8x64xf32> {onnx.name = "sin"})
    -> (tensor<2x4x8x64xf32> {onnx.name = "y"}) {
  %a = nn.mul %x, %cos : (tensor<2x4x8x64xf32>, tensor<1x1x8x64xf32>) -> tensor<2x4x8x64xf32>
  %n = nn.neg %r : (tensor<2x4x8x64xf32>) -> tensor<2x4x8x64xf32>
  %b = nn.mul %n, %sin : (tensor<2x4x8x64xf32>, tensor<1x1x8x64xf32>) -> tensor<2x4x8x64xf32>
  %y = nn.add %a, %b : (tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>) -> tensor<2x4x8x64xf32>
  func.return %y : tensor<2x4x8x64xf32>
}"""

MULTI = """
func.func @main(%x: tensor<48x80xf32> {onnx.name = "x"}, %d: tensor<48x80xf32> {onnx.name = "d"},
                %b: tensor<80xf32> {onnx.name = "b"})
    -> (tensor<48x80xf32> {onnx.name = "h"}, tensor<48x80xf16> {onnx.name = "y"}) {
  %t = nn.add %x, %b : (tensor<48x80xf32>, tensor<80xf32>) -> tensor<48x80xf32>
  %h = nn.add %t, %d : (tensor<48x80xf32>, tensor<48x80xf32>) -> tensor<48x80xf32>
  %z = nn.constant dense<0.0> : tensor<f32>
  %c = nn.greater %h, %z : (tensor<48x80xf32>, tensor<f32>) -> tensor<48x80xi1>
  %s = nn.sigmoid %h : (tensor<48x80xf32>) -> tensor<48x80xf32>
  %w = nn.where %c, %h, %s : (tensor<48x80xi1>, tensor<48x80xf32>, tensor<48x80xf32>) -> tensor<48x80xf32>
  %l = nn.leaky_relu %w {alpha = -0.5 : f32} : (tensor<48x80xf32>) -> tensor<48x80xf32>
  %y = nn.cast %l : (tensor<48x80xf32>) -> tensor<48x80xf16>
  func.return %h, %y : tensor<48x80xf32>, tensor<48x80xf16>
}"""

CASES = {
    "rope": (ROPE, {"x": (2, 4, 8, 64), "cos": (1, 1, 8, 64), "r": (2, 4, 8, 64), "sin": (1, 1, 8, 64)}, 1, 3),
    "multi_output": (MULTI, {"x": (48, 80), "d": (48, 80), "b": (80,)}, 1, 6),
}


def _simulate(text: str, inputs: dict, passes: str | None):
    module = parse(text)
    store = WeightStore()
    if passes:
        run_passes(module, parse_pipeline(passes), store)
    fused = [op for op in module.walk() if isinstance(op, nn.FusedOp)]
    lower(module, store, "ascend910b2")
    kernels = [op for op in module.walk() if op.name == "ascend.launch"]  # identical kernels are built once
    return simulate(module, store, inputs, load_target("ascend910b2")), fused, kernels


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_matches_reference_in_fewer_kernels(case: str) -> None:
    text, shapes, regions, saved = CASES[case]
    inputs = {k: rand(s, seed=i) for i, (k, s) in enumerate(shapes.items())}
    want = run_nn(parse(text), WeightStore(), inputs)
    plain, _, plain_kernels = _simulate(text, inputs, None)
    got, fused, kernels = _simulate(text, inputs, "fuse-elementwise")
    assert len(fused) == regions and all(f.kind.data == "elementwise" for f in fused)
    assert len(plain_kernels) - len(kernels) == saved
    for k, v in want.items():
        assert got.outputs[k].dtype == v.dtype
        np.testing.assert_allclose(got.outputs[k].astype(np.float64), v.astype(np.float64), rtol=1e-3, atol=1e-4, err_msg=k)
    gm = lambda r: sum(k["bytes"]["gm_read"] + k["bytes"]["gm_write"] for k in r.report["kernels"])  # noqa: E731
    assert got.report["total_cycles"] < plain.report["total_cycles"]
    assert gm(got) < gm(plain)
