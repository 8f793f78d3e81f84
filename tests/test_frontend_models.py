"""Corpus models through the ONNX frontend and the nn reference: the imported module verifies,
keeps only input-dependent work (shape arithmetic is folded), and reproduces onnxruntime's
reference outputs (fp32: rtol 1e-3, atol 1e-4)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from ascendir.session import make_context
from ascendir.dialects import nn
from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from ascendir.frontends.onnx.conversion import INLINE_LIMIT_BYTES
from ascendir.interpreter.exec.nn_reference import run_nn
from onnx_builders import run_onnxruntime

DATA = Path(__file__).parent / "data"
MODELS = ["mlp_small", "llama_small", "llama_small_dynamo"]

# The real work of each model, which import must keep: matmuls, softmaxes, the embedding gather.
EXPECTED_OPS = {
    "mlp_small": {"nn.matmul": 3, "nn.relu": 2, "nn.add": 3},
    "llama_small": {"nn.matmul": 19, "nn.softmax": 2, "nn.sigmoid": 2, "nn.reduce_mean": 5, "nn.gather": 1},
    "llama_small_dynamo": {"nn.matmul": 19, "nn.softmax": 2, "nn.sigmoid": 2, "nn.reduce_mean": 5, "nn.gather": 1},
}


def _reference(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        outputs = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    return inputs, outputs


@pytest.fixture(scope="module", params=MODELS)
def imported(request) -> tuple[str, ModuleOp, object]:
    module, weights = import_onnx(DATA / request.param / "model.onnx")
    return request.param, module, weights


def test_module_verifies_and_names_inputs_outputs(imported) -> None:
    name, module, _ = imported
    module.verify()
    main = module.body.block.first_op
    inputs, outputs = _reference(name)
    assert [d.data["onnx.name"].data for d in main.arg_attrs.data] == list(inputs)
    assert [d.data["onnx.name"].data for d in main.res_attrs.data] == list(outputs)
    for arg, value in zip(main.body.block.args, inputs.values()):
        assert tuple(arg.type.get_shape()) == value.shape


def test_no_op_computes_on_constants_only(imported) -> None:
    """Everything computable from constants and static shapes was folded at import."""
    _, module, _ = imported
    for op in module.walk():
        if isinstance(op, (nn.ConstantOp, nn.WeightOp)) or not op.name.startswith("nn."):
            continue
        sources = [v.owner for v in op.operands]
        assert not all(isinstance(s, (nn.ConstantOp, nn.WeightOp)) for s in sources), f"{op.name} on constants only"


def test_real_work_is_kept(imported) -> None:
    name, module, _ = imported
    counts = Counter(op.name for op in module.walk())
    for op_name, count in EXPECTED_OPS[name].items():
        assert counts[op_name] == count, f"{op_name}: {counts[op_name]} != {count}"


def test_weights_live_in_the_store(imported) -> None:
    _, module, weights = imported
    used = set()
    for op in module.walk():
        if isinstance(op, nn.WeightOp):
            array = weights[op.weight_name]
            assert array.shape == tuple(op.result.type.get_shape())
            used.add(op.weight_name)
        elif isinstance(op, nn.ConstantOp):
            assert len(op.value.data.data) <= INLINE_LIMIT_BYTES
    assert used == set(weights)


def test_ir_text_round_trips(imported) -> None:
    _, module, _ = imported
    parsed = Parser(make_context(), str(module)).parse_module()
    parsed.verify()
    assert parsed.is_structurally_equivalent(module)


def test_matches_reference_outputs(imported) -> None:
    name, module, weights = imported
    inputs, expected = _reference(name)
    got = run_nn(module, weights, inputs)
    assert set(got) == set(expected)
    for key, want in expected.items():
        np.testing.assert_allclose(got[key], want, rtol=1e-3, atol=1e-4, err_msg=f"{name} {key}")


@pytest.mark.parametrize("name", ["llama_small", "llama_small_dynamo"])
def test_llama_padding_mask_matches_onnxruntime(name: str) -> None:
    """The attention-mask path stays runtime work: a left-padded mask changes the logits and
    the import still agrees with onnxruntime."""
    inputs, reference = _reference(name)
    inputs["attention_mask"] = inputs["attention_mask"].copy()
    inputs["attention_mask"][0, :5] = 0
    expected = run_onnxruntime(onnx.load(DATA / name / "model.onnx"), inputs)
    assert not np.allclose(expected["logits"], reference["logits"], rtol=1e-3, atol=1e-4)
    module, weights = import_onnx(DATA / name / "model.onnx")
    got = run_nn(module, weights, inputs)
    np.testing.assert_allclose(got["logits"], expected["logits"], rtol=1e-3, atol=1e-4)


def test_external_data_is_read_only_when_used(tmp_path: Path) -> None:
    """Weights stored as external data stay on disk through import; run_nn reads them."""
    from onnx import helper

    from onnx_builders import make_model

    x, w = np.ones((2, 64), np.float32), np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": x}, ["y"], initializers={"w": w})
    onnx.save_model(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    module, weights = import_onnx(tmp_path / "m.onnx")
    (tmp_path / "m.data").rename(tmp_path / "moved.data")
    with pytest.raises(AscendirError, match="initializer 'w': cannot read external data 'm.data'"):
        weights["w"]  # import did not read the bytes
    (tmp_path / "moved.data").rename(tmp_path / "m.data")
    np.testing.assert_allclose(run_nn(module, weights, {"x": x})["y"], x @ w, rtol=1e-6)
