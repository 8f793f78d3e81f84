"""The Python API (ascendir/__init__.py, api/library.py): save / load, run_pipeline, simulate with
the CLI's input checks, SimResult's summary and displays, on the committed MLP model against
its onnxruntime reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ascendir
from tests.cli_helpers import assert_clean_error, run_cli

MODEL = Path(__file__).parent / "data" / "mlp_small"


@pytest.fixture(scope="module")
def lowered():
    module, weights = ascendir.compile_model(MODEL / "model.onnx", emit="nn")
    ascendir.run_pipeline(module, "ascend-lowering{target=ascend910b2}", weights)
    return module, weights


def _ref() -> dict[str, np.ndarray]:
    with np.load(MODEL / "reference.npz") as d:
        return {k: d[k] for k in d.files}


@pytest.mark.parametrize("name", ["m.mlir", "m.mlir.gz"])
def test_save_load_roundtrip(tmp_path: Path, lowered, name: str):
    module, weights = lowered
    ascendir.save(tmp_path / name, module, weights)
    assert (tmp_path / "m.weights.npz").is_file()
    module2, weights2 = ascendir.load(tmp_path / name)
    assert str(module2) == str(module)
    assert sorted(weights2) == sorted(weights) and len(weights) > 0
    for n in weights:
        assert np.array_equal(weights2[n], weights[n])


def test_simulate_matches_onnxruntime_with_the_clis_keys(lowered):
    """`input:` / `output:` keys as the reference .npz holds them (the CLI takes them; the
    interpreter's own simulate did not)."""
    module, weights = lowered
    ref = _ref()
    result = ascendir.simulate(module, weights, ref, "ascend910b2")
    np.testing.assert_allclose(result.outputs["output"], ref["output:output"], rtol=1e-3, atol=1e-4)


def test_simulate_rejects_what_the_cli_rejects(tmp_path: Path, lowered):
    module, weights = lowered
    x = _ref()["input:input"]
    with pytest.raises(ascendir.AscendirError, match=r"^inputs: input 'input' is int32, the model expects float32$"):
        ascendir.simulate(module, weights, {"input": x.astype(np.int32)}, "ascend910b2")
    with pytest.raises(ascendir.AscendirError, match=r"keys 'input' and 'input:input' both give input 'input'"):
        ascendir.simulate(module, weights, {"input": x, "input:input": x}, "ascend910b2")
    with pytest.raises(ascendir.AscendirError, match=r"input 'input' has shape \(1, 784\), the model expects \(16, 784\)"):
        ascendir.simulate(module, weights, {"input": x[:1]}, "ascend910b2")
    # the CLI says the same about the same array
    np.savez(tmp_path / "in.npz", input=x.astype(np.int32))
    assert_clean_error(run_cli("run", MODEL / "model.onnx", "--inputs", tmp_path / "in.npz"),
                       "input 'input' is int32, the model expects float32")


def test_run_pipeline_text():
    module, weights = ascendir.compile_model(MODEL / "model.onnx", emit="nn")
    with pytest.raises(ascendir.AscendirError, match=r"^bad pass pipeline 'no-such-pass'"):
        ascendir.run_pipeline(module, "no-such-pass", weights)
    ascendir.run_pipeline(module, "O2", weights)
    assert "nn.fused" in str(module)  # -O2 fused the MLP


def test_summary_and_displays_never_print_arrays(lowered):
    module, weights = lowered
    result = ascendir.simulate(module, weights, _ref(), "ascend910b2")
    text = result.summary()
    assert text.splitlines()[0].startswith("latency ") and "cycles" in text.splitlines()[0]
    assert "output output: 16x10 float32" in text and "time by kind:" in text
    r = repr(result)
    assert r.startswith("SimResult(") and "output: 16x10 float32" in r and "[" not in r  # no array body
    assert result._repr_html_() == "<pre>" + text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "</pre>"
    assert result.__rich__() == text
