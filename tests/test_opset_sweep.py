"""Every claimed op at every opset version from 13 to the newest of the installed onnx (one
test per (op, version)), through import → lower → interpreter against onnxruntime (or
onnx.reference). The table form is `python benchmarks/opset_sweep.py`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import opset_sweep  # noqa: E402

from ascendir.frontends.onnx.converters import CONVERTERS  # noqa: E402


def test_every_claimed_op_has_a_sweep_case() -> None:
    assert sorted(set(CONVERTERS) - set(opset_sweep.CASES)) == []


@pytest.mark.parametrize(("op", "version"), opset_sweep.sweep_ids(set(CONVERTERS) & set(opset_sweep.CASES)))
def test_op_at_opset(op: str, version: int) -> None:
    passed, reason = opset_sweep.run(op, version)
    assert passed, reason


def test_reference_falls_back_to_onnx_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """An opset onnxruntime rejects (simulated: every session fails) is checked with onnx.reference."""
    import onnxruntime

    def reject(*args, **kwargs):
        raise RuntimeError("unsupported opset")

    monkeypatch.setattr(onnxruntime, "InferenceSession", reject)
    assert opset_sweep.run("ReduceMean", 18) == (True, "onnx.reference")
