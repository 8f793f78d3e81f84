"""RNN / GRU / LSTM (frontends/onnx/converters/recurrent.py) against onnxruntime: every
direction, both layouts, constant weights (as exported models hold them) and runtime ones,
sequence_lens shorter than the sequence (constant and as an input), initial states, peepholes,
clip, input_forget, linear_before_reset and non-default activations; one LSTM through the
whole pipeline (lowering and simulation)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from ascendir.driver import lower
from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from tests.onnx_builders import check_against_onnxruntime, make_model, run_onnxruntime

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, IN, H = 5, 3, 4, 6


def _model(op: str, direction: str = "forward", layout: int = 0, lens: np.ndarray | None = None, lens_input: bool = False,
           states: bool = False, const_weights: bool = True, seed: int = 0, **attrs):
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x = rng.standard_normal((BATCH, SEQ, IN) if layout else (SEQ, BATCH, IN)).astype(np.float32)
    arrays = {"W": (rng.standard_normal((dirs, g * H, IN)) * 0.5).astype(np.float32),
              "R": (rng.standard_normal((dirs, g * H, H)) * 0.5).astype(np.float32),
              "B": (rng.standard_normal((dirs, 2 * g * H)) * 0.2).astype(np.float32)}
    names = ["X", "W", "R", "B", "", "", "", ""]
    if lens is not None:
        arrays["sequence_lens"] = lens.astype(np.int32)
        names[4] = "sequence_lens"
    if states:
        shape = (BATCH, dirs, H) if layout else (dirs, BATCH, H)
        arrays["initial_h"] = rng.standard_normal(shape).astype(np.float32)
        names[5] = "initial_h"
        if op == "LSTM":
            arrays["initial_c"] = rng.standard_normal(shape).astype(np.float32)
            names[6] = "initial_c"
    if op == "LSTM" and attrs.pop("peepholes", False):
        arrays["P"] = (rng.standard_normal((dirs, 3 * H)) * 0.3).astype(np.float32)
        names[7] = "P"
    while names and not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outputs, hidden_size=H, direction=direction, layout=layout, **attrs)
    runtime = {"X": x}
    if not const_weights:
        runtime.update({k: arrays.pop(k) for k in ("W", "R", "B")})
    if lens_input:
        runtime["sequence_lens"] = arrays.pop("sequence_lens")
    return make_model([node], runtime, outputs, initializers=arrays, opset=14), runtime


SHORT = np.array([5, 2, 0])  # one full, one short, one empty sequence


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(op: str, direction: str):
    model, feeds = _model(op, direction, lens=SHORT, states=True)
    check_against_onnxruntime(model, feeds, rtol=1e-5, atol=1e-5, expect_ops=["nn.matmul"])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_batchwise_layout(op: str):
    """layout = 1 (batch first; onnxruntime has no kernel for it): equal to the layout-0 node
    run by onnxruntime on the transposed input and states, its outputs transposed back."""
    model1, feeds1 = _model(op, "bidirectional", 1, lens=SHORT, states=True, seed=7)
    model0, _ = _model(op, "bidirectional", 0, lens=SHORT, states=True, seed=7)
    inits1 = {i.name: numpy_helper.to_array(i) for i in model1.graph.initializer}
    inits0 = {i.name for i in model0.graph.initializer}
    for name in ("initial_h", "initial_c"):
        if name in inits0:  # the seeded draws differ in shape only: give model 0 model 1's, transposed
            model0.graph.initializer.remove(next(i for i in model0.graph.initializer if i.name == name))
            model0.graph.initializer.append(numpy_helper.from_array(inits1[name].transpose(1, 0, 2).copy(), name))
    want = run_onnxruntime(model0, {"X": feeds1["X"].transpose(1, 0, 2).copy()})
    module, weights = import_onnx(model1)
    got = run_nn(module, weights, feeds1)
    np.testing.assert_allclose(got["Y"], want["Y"].transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["Y_h"], want["Y_h"].transpose(1, 0, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, attrs", [
    ("LSTM", {"peepholes": True}),
    ("LSTM", {"input_forget": 1, "clip": 0.7}),
    ("LSTM", {"activations": ["HardSigmoid", "Tanh", "Relu"], "activation_alpha": [0.3], "activation_beta": [0.4]}),
    ("GRU", {"linear_before_reset": 1}),
    ("GRU", {"activations": ["Sigmoid", "ScaledTanh"], "activation_alpha": [1.5], "activation_beta": [0.8]}),
    ("RNN", {"activations": ["LeakyRelu"], "activation_alpha": [0.1]}),
    ("RNN", {"activations": ["Affine"], "activation_alpha": [0.5], "activation_beta": [0.25]}),
])
def test_attributes(op: str, attrs: dict):
    direction = "bidirectional" if op != "RNN" else "forward"
    if direction == "bidirectional":  # one list of functions per direction
        attrs = {k: v * 2 if k.startswith("activation") else v for k, v in attrs.items()}
    model, feeds = _model(op, direction, states=True, **attrs)
    check_against_onnxruntime(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_runtime_weights_and_lengths(op: str):
    model, feeds = _model(op, "bidirectional", lens=SHORT, lens_input=True, const_weights=False, seed=3)
    check_against_onnxruntime(model, feeds, rtol=1e-5, atol=1e-5)


def test_lstm_through_lowering_and_simulation():
    """An exported-style LSTM (constant weights, short sequences) lowered for 910B2 and run by the
    interpreter equals onnxruntime."""
    model, feeds = _model("LSTM", "bidirectional", lens=SHORT, states=True, seed=5)
    want = run_onnxruntime(model, feeds)
    module, weights = import_onnx(model)
    lower(module, weights, "ascend910b2")
    got = simulate(module, weights, feeds, "ascend910b2").outputs
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-3, atol=1e-4, err_msg=name)


def test_unsupported_activation_names_the_node():
    model, _ = _model("RNN", activations=["Elu"])
    with pytest.raises(AscendirError, match=r"RNN .*activation Elu is not supported"):
        import_onnx(model)
