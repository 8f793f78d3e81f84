"""Shared helpers of tests/test_lowering*.py: parse an nn module, evaluate it with the numpy
reference (`run_nn`), lower it with convert-nn-to-ascend, simulate it, compare."""

from __future__ import annotations

import io
import math

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from ascendir.session import make_context
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.driver import lower, parse_pipeline, run_passes
from ascendir.weights import WeightStore


def decoder_layer(monkeypatch, hw, s: int, h: int, heads: int, d: int, mlp: int) -> tuple[ModuleOp, WeightStore, np.ndarray]:
    """benchmarks/fusion.py's 7B-shaped decoder layer with hidden size `h`, `heads` heads of `d`
    and MLP width `mlp` (patched into fusion for the test), `s` tokens of prefill, lowered at -O2
    for `hw`: (module, random fp16 weights as benchmarks/numerics_speed.py draws them, an fp16
    input of shape (1, s, h))."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fusion
    import interpreter_speed
    import numerics_speed

    for name, v in (("H", h), ("HEADS", heads), ("D", d), ("MLP", mlp)):
        monkeypatch.setattr(fusion, name, v)
    module, _ = interpreter_speed.lowered(fusion.layer_ir(s, s), hw)
    x = np.random.default_rng(3).standard_normal((1, s, h)).astype(np.float16)
    return module, numerics_speed.random_weights(module), x


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def printed(module: ModuleOp, generic: bool = False) -> str:
    buf = io.StringIO()
    Printer(stream=buf, print_generic_format=generic).print_op(module)
    return buf.getvalue()


def lower_text(text: str, target: str = "ascend910b2", weights: WeightStore | None = None) -> ModuleOp:
    """Parse, lower, verify, and check the result round-trips through the printer and parser
    (custom and generic forms)."""
    module = parse(text)
    lower(module, weights, target)
    module.verify()
    for generic in (False, True):
        again = parse(printed(module, generic))
        assert again.is_structurally_equivalent(module)
    return module


def run_both(
    text: str,
    inputs: dict[str, np.ndarray],
    weights: dict[str, np.ndarray] | None = None,
    target: str = "ascend910b2",
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], ModuleOp]:
    """(reference outputs, simulated outputs, lowered module)."""
    store = WeightStore()
    for k, v in (weights or {}).items():
        store._arrays[k] = v
    ref = run_nn(parse(text), store, inputs)
    lowered = lower_text(text, target, store)
    sim = simulate(lowered, store, inputs, load_target(target))
    return ref, sim.outputs, lowered


def check(
    text: str,
    inputs: dict[str, np.ndarray],
    weights: dict[str, np.ndarray] | None = None,
    target: str = "ascend910b2",
    rtol: float = 1e-3,
    atol: float = 1e-4,
    exact: bool = False,
) -> ModuleOp:
    """Lower and simulate `text`; every output must match the nn reference."""
    ref, out, lowered = run_both(text, inputs, weights, target)
    assert set(ref) == set(out), (sorted(ref), sorted(out))
    for name in ref:
        r, o = ref[name], out[name]
        assert r.shape == o.shape and r.dtype == o.dtype, (name, r.shape, o.shape, r.dtype, o.dtype)
        if exact:
            np.testing.assert_array_equal(o, r, err_msg=name)
        else:
            np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol, err_msg=name)
    return lowered


def rand(shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + len(shape) * 7 + sum(shape)).standard_normal(shape).astype(dtype)


def ty(shape, dt: str) -> str:
    """`tensor<AxBxdt>` text."""
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{dt}>"


def module(args: list[tuple[str, tuple, str]], body: str, out: tuple[str, tuple, str]) -> str:
    """func @main with named tensor args; `body` uses %name for args and defines %out[0]."""
    sig = ", ".join(f'%{n}: {ty(s, d)} {{onnx.name = "{n}"}}' for n, s, d in args)
    name, s, d = out
    return f"""
func.func @main({sig}) -> ({ty(s, d)} {{onnx.name = "{name}"}}) {{
  {body}
  func.return %{name} : {ty(s, d)}
}}"""


def small_attention() -> ModuleOp:
    """A small fp16 causal flash attention (1x2x40x32, 2 heads) fused and lowered for 910B2 at
    -O0 + fuse-attention: a mix kernel whose unrolled pipeline repeats flags between the AIC's
    and both AIVs' pipes, with copies on every path, transposed loads, mmads, vector ops and
    casts of several element types."""
    t = "tensor<1x2x40x32xf16>"
    text = f"""builtin.module {{
func.func @main(%q: {t}, %k: {t}, %v: {t}) -> {t} {{
  %o = nn.attention %q, %k, %v {{num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = true, scale = {1 / math.sqrt(32)} : f32}} : ({t}, {t}, {t}) -> {t}
  func.return %o : {t}
}}
}}"""
    module = parse(text)
    run_passes(module, parse_pipeline("fuse-attention", "O0"))
    lower(module, WeightStore(), "ascend910b2")
    return module
