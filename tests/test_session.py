"""The session carries weights, notes and the tiling-search log between passes and their caller
(no module globals), and `ascend-lowering` is the one lowering: the driver's `lower` and
`ascendir-opt -p ascend-lowering` give the same module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from xdsl.parser import Parser
from xdsl.passes import PassPipeline

from ascendir.driver import compile_model, lower, parse_pipeline, print_ir, run_passes
from ascendir.pipelines import PASSES, expand_pipelines
from ascendir.session import Session, make_context
from ascendir.transforms.ascend.double_buffer import DoubleBuffer

DATA = Path(__file__).parent / "data"

# A loop whose two copies share no buffer but whose UB is too small to double-buffer on the
# chip: double-buffer leaves a note saying why (see tests/filecheck/double-buffer/notes_no_fit.mlir).
NO_FIT = (Path(__file__).parent / "filecheck" / "double-buffer" / "notes_no_fit.mlir").read_text()


def parse(text: str):
    return Parser(make_context(), text).parse_module()


def test_ascend_lowering_is_the_drivers_lowering():
    module, _ = compile_model(DATA / "mlp_small" / "model.onnx", "ascend910b2", emit="nn")
    text = print_ir(module)
    by_driver = parse(text)
    lower(by_driver, None, "ascend910b2")
    by_name = parse(text)
    PassPipeline.parse_spec(PASSES, expand_pipelines("ascend-lowering{target=ascend910b2}")).apply(make_context(), by_name)
    assert print_ir(by_name) == print_ir(by_driver)
    assert "ascend.kernel" in print_ir(by_name)


def test_notes_stay_in_their_session(capsys):
    quiet, loud = Session(), Session(echo_notes=True)
    DoubleBuffer().apply(make_context(quiet), parse(NO_FIT))
    assert quiet.notes and all(n.startswith("double-buffer: ") for n in quiet.notes)
    assert capsys.readouterr().err == ""  # collected, not printed
    DoubleBuffer().apply(make_context(loud), parse(NO_FIT))
    assert loud.notes == quiet.notes
    assert capsys.readouterr().err == "".join(f"note: {n}\n" for n in quiet.notes)


def test_search_log_and_weights_travel_in_the_session():
    module, weights = compile_model(DATA / "llama_small_dynamo" / "model.onnx", "ascend910b2", emit="nn", pipeline="O0")
    session = run_passes(module, parse_pipeline("recompose-nn,fuse-attention,choose-tiling", "O0", "ascend910b2"), weights)
    assert session.weights is weights
    assert session.search_log["matmul"].ops > 0 and session.search_log["attention"].ops > 0
    # the dynamo exporter stores the causal mask as an initializer: recompose-nn reads it from
    # the session's store and makes the attention causal; without the store it cannot
    causal = [o for o in module.walk() if o.name == "nn.attention"]
    assert causal and all(o.causal.value.data for o in causal)
    blind, _ = compile_model(DATA / "llama_small_dynamo" / "model.onnx", "ascend910b2", emit="nn", pipeline="O0")
    run_passes(blind, parse_pipeline("recompose-nn", "O0"))
    assert not [o for o in blind.walk() if o.name == "nn.attention" and o.causal.value.data]
    np.testing.assert_equal(len(Session().search_log), 0)  # a fresh session knows nothing of the last


def test_a_declining_template_says_why_and_the_report_lists_it(tmp_path):
    # On 910A (no FixPipe) the moe_experts template declines Mixtral's experts, whose body then
    # lowers op by op; in it the ffn template declines the gathered-weight experts' body
    session = Session()
    compile_model(DATA / "mixtral_moe_block_small" / "model.onnx", "ascend910a", session=session, dtype="fp16")
    moe, d = session.declined
    assert moe.kind == "moe_experts" and "no FixPipe" in moe.reason and "'/block/experts/Tile'" in moe.region  # the region starts at the tokens' expand (ONNX Tile)
    assert type(d.kind) is str and d.kind == "ffn" and d.region.startswith("nn.fused #") and "'/block/experts/MatMul'" in d.region
    assert "not a gated" in d.reason
    assert any(n.startswith(f"convert-nn-to-ascend: {d.region}: the ffn template declines it") for n in session.notes)
    import json
    import subprocess
    import sys

    report = tmp_path / "r.json"
    subprocess.run([sys.executable, "-m", "ascendir.api.cli", "run", str(DATA / "mixtral_moe_block_small" / "model.onnx"),
                    "--target", "ascend910a", "--dtype", "fp16", "--timing-only", "--report", str(report)],
                   check=True, capture_output=True)
    assert json.loads(report.read_text())["declined"] == [{"region": x.region, "kind": x.kind, "reason": x.reason} for x in (moe, d)]


def test_compile_names_ascend_lowering_when_given_as_an_nn_pipeline():
    import pytest

    from ascendir.errors import AscendirError

    with pytest.raises(AscendirError, match="ascend-lowering is the lowering itself"):
        parse_pipeline("O2,ascend-lowering{target=ascend910b2}")


def test_simulate_rejects_an_accel_that_is_not_one():
    import pytest

    from ascendir.errors import AscendirError
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate

    module, weights = compile_model(DATA / "mlp_small" / "model.onnx", "ascend910b2")
    with pytest.raises(AscendirError, match="accel must be an ascendir.interpreter.Accel"):
        simulate(module, weights, {}, load_target("ascend910b2"), timing_only=True, accel="fast")
