"""The verdict of `ascendir run` (api/verdict.py): PASS / FAIL per output against expected
outputs (the output: keys of --inputs, --expected, --check-ort), first on the screen, in the
JSON report, exit code 1 on a mismatch; what --verify-numerics checked."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from ascendir.api.verdict import FP32_ATOL, FP32_RTOL, compare, lines
from cli_helpers import assert_clean_error, run_cli

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
MLP = DATA / "mlp_small" / "model.onnx"
REF = DATA / "mlp_small" / "reference.npz"


def _expected() -> dict[str, np.ndarray]:
    with np.load(REF) as d:
        return {k.removeprefix("output:"): d[k] for k in d.files if k.startswith("output:")}


def test_reference_npz_gives_pass_first(tmp_path: Path) -> None:
    rep = tmp_path / "r.json"
    r = run_cli("run", MLP, "--inputs", REF, "--report", rep)
    assert r.exit_code == 0, r.output
    first, second = r.stdout.splitlines()[:2]
    assert first == f"PASS: 1 output against {REF}"
    assert re.fullmatch(r"  PASS output: max abs \S+, max rel \S+ \(tol 1e-04 \+ 1e-03·\|exp\|\)", second), second
    v = json.loads(rep.read_text())["verdict"]
    assert v["status"] == "pass" and v["reference"] == str(REF)
    again = run_cli("report", rep)  # a saved report shows its verdict first too
    assert again.exit_code == 0 and again.stdout.splitlines()[:2] == [first, second]
    (row,) = v["outputs"]
    assert row["name"] == "output" and row["mismatched"] == 0 and (row["rtol"], row["atol"]) == (FP32_RTOL, FP32_ATOL)
    assert 0 <= row["max_abs_err"] <= FP32_ATOL + FP32_RTOL * np.abs(_expected()["output"]).max()


def test_a_wrong_expected_output_fails_with_exit_1(tmp_path: Path) -> None:
    want = _expected()["output"].copy()
    want[0, 0] += 1.0  # one element off by 1
    exp, rep = tmp_path / "exp.npz", tmp_path / "r.json"
    np.savez(exp, output=want)
    r = run_cli("run", MLP, "--inputs", REF, "--expected", exp, "--report", rep)
    assert r.exit_code == 1, r.output
    assert r.stdout.startswith(f"FAIL: 1 output against {exp}\n  FAIL output: max abs 1.0e+00")
    assert f"1 of {want.size:,} beyond" in " ".join(r.stdout.split())  # wrapped at 80 columns
    v = json.loads(rep.read_text())["verdict"]  # the report is written all the same
    assert v["status"] == "fail" and v["outputs"][0]["mismatched"] == 1


def test_check_ort_compares_with_onnxruntime(tmp_path: Path) -> None:
    r = run_cli("run", MLP, "--check-ort", "--seed", "3")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("PASS: 1 output against onnxruntime\n  PASS output:")


def test_fp16_run_uses_the_roundoff_bound(tmp_path: Path) -> None:
    rep = tmp_path / "r.json"
    r = run_cli("run", MLP, "--inputs", REF, "--dtype", "fp16", "--report", rep)
    assert r.exit_code == 0, r.output
    (row,) = json.loads(rep.read_text())["verdict"]["outputs"]
    scale = float(np.abs(_expected()["output"]).max())
    assert row["rtol"] == 0 and row["atol"] == pytest.approx(8 * 2.0**-11 * scale)
    assert row["max_rel_err"] <= 8 * 2.0**-11 and row["max_rel_err"] > 0  # fp16 rounds: not exact


def test_compare_rules() -> None:
    want = {"f": np.array([1.0, -2.0, np.nan], np.float32), "i": np.array([1, 2], np.int64)}
    ok = compare({"f": want["f"] + np.float32(1e-5), "i": want["i"].copy()}, want, "fp32", "x")
    assert ok["status"] == "pass" and ok["outputs"][1]["rtol"] == 0 and ok["outputs"][1]["atol"] == 0
    bad = compare({"f": np.array([1.0, -2.0, 0.0], np.float32), "i": np.array([1, 3])}, want, "fp32", "x")
    assert [o["status"] for o in bad["outputs"]] == ["fail", "fail"]  # NaN expected, 0 got; 2 vs 3
    shape = compare({"f": np.zeros(2, np.float32), "i": want["i"]}, want, "fp32", "x")
    assert shape["outputs"][0]["reason"] == "shape [2], expected [3]"


def test_an_expected_infinity_needs_the_same_infinity() -> None:
    want = {"f": np.array([-np.inf, np.inf, 1.0], np.float32)}
    assert compare({"f": want["f"].copy()}, want, "fp32", "x")["status"] == "pass"
    for got in ([-3e38, np.inf, 1.0], [-np.inf, 1.0, 1.0], [np.inf, np.inf, 1.0]):
        out = compare({"f": np.array(got, np.float32)}, want, "fp32", "x")["outputs"][0]
        assert out["status"] == "fail" and out["mismatched"] == 1, got


def test_bad_references_are_clean_errors(tmp_path: Path) -> None:
    exp = tmp_path / "exp.npz"
    np.savez(exp, nope=np.zeros(3))
    assert_clean_error(run_cli("run", MLP, "--expected", exp), "nope", "name no graph output")
    assert_clean_error(run_cli("run", MLP, "--expected", REF, "--timing-only"), "--expected needs numerics")
    assert_clean_error(run_cli("run", MLP, "--check-ort", "--expected", REF), "one reference")
    ir = tmp_path / "m.mlir"
    assert run_cli("compile", MLP, "-o", ir).exit_code == 0
    assert_clean_error(run_cli("run", ir, "--check-ort"), "is IR")
    # without expected outputs: no verdict line, no verdict key
    rep = tmp_path / "r.json"
    r = run_cli("run", MLP, "--report", rep)
    assert r.exit_code == 0 and not r.stdout.startswith(("PASS", "FAIL")) and "verdict" not in json.loads(rep.read_text())


def test_verify_numerics_says_what_it_checked(tmp_path: Path) -> None:
    rep = tmp_path / "r.json"
    r = run_cli("run", MLP, "--inputs", REF, "--verify-numerics", "--report", rep)
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stderr.splitlines() if x.startswith("verify-numerics: "))
    checked = json.loads(rep.read_text())["verify_numerics"]
    assert f"{len(checked['passes'])} passes" in line and "choose-tiling" in checked["passes"] and str(REF) in line
    assert "f32: rtol 0.0001" in line and "f16" not in line
    c = run_cli("compile", MLP, "--verify-numerics")
    assert c.exit_code == 0 and "verify-numerics: " in c.stderr and "random inputs (seed 0)" in c.stderr
    # a 16-bit policy's outputs are checked at their own tolerance: the line says which
    h = run_cli("compile", MLP, "--verify-numerics", "--dtype", "fp16")
    assert h.exit_code == 0 and "f16: rtol 0.01, atol 0.001" in h.stderr, h.output


def test_quick_start_prints_the_verdict() -> None:
    """scripts/example.sh (the README quick start) runs with the example's reference.npz: its
    first line is the verdict."""
    cmd = shlex.split((ROOT / "scripts" / "example.sh").read_text().strip().splitlines()[-1])
    assert cmd[:3] == ["exec", ".venv/bin/ascendir", "run"]
    args = [str(ROOT / a) if a.startswith("examples/") else a for a in cmd[3:] if a != "$@"]
    r = run_cli("run", *args)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == f"PASS: 1 output against {ROOT / 'examples/llama_small/reference.npz'}"


def test_a_nonfinite_mismatch_is_counted() -> None:
    """A NaN got where a number is expected has no finite error: the line says so (it showed
    max abs 0.0 on a FAIL)."""
    want = {"f": np.array([1.0, 2.0], np.float32)}
    v = compare({"f": np.array([np.nan, 2.0], np.float32)}, want, "fp32", "x")
    assert v["status"] == "fail" and v["outputs"][0]["nonfinite_mismatched"] == 1
    assert "1 NaN / inf where the other has another value" in lines(v)[1]


def test_expected_with_inputs_needs_them_as_inputs(tmp_path: Path) -> None:
    """--expected on an .npz that holds the inputs too, without --inputs, would run on random
    inputs and FAIL for sure: a one-line error says to pass it as --inputs."""
    from click.testing import CliRunner

    from ascendir.api.cli import main

    ref = Path(__file__).parent / "data" / "mlp_small" / "reference.npz"
    r = CliRunner().invoke(main, ["run", str(ref.with_name("model.onnx")), "--expected", str(ref)])
    assert r.exit_code == 2 and f"pass it as --inputs {ref}" in r.output, r.output


QWEN_MOE = DATA / "qwen2_moe_block_small" / "model.onnx"
MIXTRAL_MOE = DATA / "mixtral_moe_block_small" / "model.onnx"
FLIP_NOTE = re.compile(r"note: (\d+) of (\d+) tokens routed to another expert set than in fp32 \(scores tied within fp16 rounding: "
                       r"tokens? ([\d, ]+)\); the other tokens: max abs (\S+) \(tol (\S+)\): within")


def _router_logits(model: Path, feeds: dict[str, np.ndarray], name: str) -> np.ndarray:
    """The fp32 router logits (ONNX value `name`) onnxruntime computes on `feeds`: the model
    with that value as an extra graph output."""
    import onnx
    import onnxruntime as ort

    m = onnx.load(model)
    m.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run([name], {k: v.astype(np.float32) for k, v in feeds.items()})[0]


@pytest.mark.sampled
def test_check_ort_names_a_moe_routing_flip(tmp_path: Path) -> None:
    """qwen2_moe fp16 on the CLI's random inputs FAILs because one of its 64 tokens has two
    router scores tied within fp16 rounding and goes to another expert set: the verdict says
    "FAIL (routing flip)" and a note names the token and the other tokens' error (within).
    Checked independently of ascendir's routing: the noted tokens' 4th and 5th fp32 router
    logits (onnxruntime) are within fp16 rounding of each other, and every element beyond
    tolerance (the --outputs against onnxruntime) is in a noted token's row."""
    from ascendir.api.verdict import onnxruntime_outputs
    from ascendir.driver import random_inputs
    from ascendir.frontends.onnx import import_onnx

    rep, out = tmp_path / "r.json", tmp_path / "o.npz"
    r = run_cli("run", QWEN_MOE, "--dtype", "fp16", "--check-ort", "--report", rep, "--outputs", out)
    assert r.exit_code == 1, r.output
    text = " ".join(r.stdout.split())
    assert text.startswith("FAIL (routing flip): 1 output against onnxruntime FAIL moe_output:"), text[:200]
    m = FLIP_NOTE.search(text)
    assert m, text[:600]
    flipped = [int(t) for t in m.group(3).split(",")]
    assert int(m.group(1)) == len(flipped) >= 1 and int(m.group(2)) == 64
    v = json.loads(rep.read_text())["verdict"]
    assert v["status"] == "fail" and v["cause"] == "routing flip"
    assert v["outputs"][0]["routing_flip"]["tokens"] == flipped

    module, _ = import_onnx(QWEN_MOE, dtype="fp16")
    feeds = random_inputs(module, 0)  # the CLI's (seed 0)
    logits = _router_logits(QWEN_MOE, feeds, "/block/gate/MatMul_output_0")  # [64, 16]
    top = -np.sort(-logits, axis=-1)
    u = 2.0**-11
    for t in flipped:  # top-4: the 4th and 5th logits rounded to fp16 may swap
        assert top[t, 3] - top[t, 4] <= 8 * u * np.abs(top[t]).max(), (t, top[t, :6])
    with np.load(out) as o:
        got = o["moe_output"].astype(np.float64).reshape(64, -1)
    want = onnxruntime_outputs(QWEN_MOE, feeds)["moe_output"].astype(np.float64).reshape(64, -1)
    atol = v["outputs"][0]["atol"]
    assert atol == 8 * u * np.abs(want).max()
    beyond_rows = set(np.nonzero((np.abs(got - want) > atol).any(axis=1))[0].tolist())
    assert beyond_rows and beyond_rows <= set(flipped)
    assert float(m.group(4)) <= atol


@pytest.mark.sampled
@pytest.mark.parametrize("model, dtype", [(MIXTRAL_MOE, "fp16"), (QWEN_MOE, "fp32")])
def test_check_ort_has_no_flip_note_without_a_flip(model: Path, dtype: str, tmp_path: Path) -> None:
    """mixtral fp16 PASSes and qwen2_moe fp32 routes as onnxruntime: neither has a note or a cause."""
    rep = tmp_path / "r.json"
    r = run_cli("run", model, "--dtype", dtype, "--check-ort", "--report", rep)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("PASS: 1 output against onnxruntime\n"), r.stdout[:200]
    assert "note:" not in r.stdout and "routing flip" not in r.stdout
    v = json.loads(rep.read_text())["verdict"]
    assert "cause" not in v and all("routing_flip" not in o for o in v["outputs"])


def test_a_flip_does_not_explain_an_error_in_another_token() -> None:
    """explain_routing_flip: an element beyond tolerance in a token routed as in fp32 keeps the
    plain FAIL (no cause) and the note says `beyond`; within, the cause is "routing flip"."""
    from ascendir.api.verdict import explain_routing_flip

    rng = np.random.default_rng(1)
    want = {"y": rng.standard_normal((1, 4, 8)).astype(np.float32)}
    got = {"y": want["y"].astype(np.float16)}
    got["y"][0, 2] += np.float16(1.0)  # token 2: another expert set
    v = compare(got, want, "fp16", "onnxruntime")
    explain_routing_flip(v, got, want, "fp16", (2,), 4)
    assert v["status"] == "fail" and v["cause"] == "routing flip"
    assert lines(v)[0].startswith("FAIL (routing flip): ")
    assert lines(v)[2].startswith("  note: 1 of 4 tokens routed to another expert set than in fp32") and lines(v)[2].endswith(": within")
    got["y"][0, 0, 3] += np.float16(0.5)  # and an error in token 0, routed as in fp32
    v = compare(got, want, "fp16", "onnxruntime")
    explain_routing_flip(v, got, want, "fp16", (2,), 4)
    assert v["status"] == "fail" and "cause" not in v
    assert lines(v)[0].startswith("FAIL: ") and lines(v)[2].endswith(": beyond")


def test_check_ort_says_when_onnxruntime_optimised_agrees(tmp_path: Path) -> None:
    """llama_dynamic (DynamicQuantizeLinear before each MatMulInteger) on the CLI's random inputs:
    recompose-nn's attention and RMSNorm round an ulp away from the node-by-node graph and a quantization step
    flips, so -O1 FAILs against onnxruntime's node-by-node semantics; onnxruntime's own optimised
    graph flips the same step. Checked independently: onnxruntime's two graphs differ beyond the
    tolerance on these inputs, and -O0 (no recomposition) PASSes with no note."""
    from ascendir.api.verdict import compare, onnxruntime_outputs
    from ascendir.driver import random_inputs
    from ascendir.frontends.onnx import import_onnx

    from ascendir.api.verdict import onnxruntime_u8s8_exact

    if not onnxruntime_u8s8_exact():  # its MatMulIntegers saturate the same way in both graphs here
        pytest.skip("onnxruntime's u8 x s8 kernels saturate on this CPU (AVX2 without VNNI): the premise is its exact ones")
    model = DATA / "quant" / "llama_dynamic" / "model.onnx"
    feeds = random_inputs(import_onnx(model)[0], 0)  # the CLI's (seed 0)
    plain, fused = onnxruntime_outputs(model, feeds), onnxruntime_outputs(model, feeds, optimised=True)
    assert compare(fused, plain, "fp32", "onnxruntime")["status"] == "fail"

    rep = tmp_path / "r.json"
    r = run_cli("run", model, "-O1", "--check-ort", "--report", rep)
    assert r.exit_code == 1, r.output
    text = " ".join(r.stdout.split())
    assert text.startswith("FAIL (as onnxruntime optimised): 1 output against onnxruntime FAIL logits:"), text[:200]
    assert "note: onnxruntime with its graph optimisations on (ORT_ENABLE_ALL) computes these outputs" in text
    v = json.loads(rep.read_text())["verdict"]
    assert v["cause"] == "as onnxruntime optimised" and v["ort_optimised"]["status"] == "pass"
    assert v["ort_optimised"]["max_abs_err"] < v["outputs"][0]["atol"]
    o0 = run_cli("run", model, "-O0", "--check-ort")
    assert o0.exit_code == 0 and o0.stdout.startswith("PASS") and "note:" not in o0.stdout, o0.output



@pytest.mark.sampled
def test_check_ort_without_optimised_session_keeps_the_fail(tmp_path: Path, monkeypatch) -> None:
    """When onnxruntime's optimised session (ORT_ENABLE_ALL) cannot load or run a model its plain
    session runs, a FAILing --check-ort keeps its plain FAIL (exit 1, no note, a report `ascendir
    report` reads) instead of exiting 2 on the optimised session's error. llama_dynamic -O1 FAILs
    (test above); the optimised session's failure is simulated by refusing optimised=True."""
    import ascendir.api.verdict as verdict_mod
    from ascendir.errors import AscendirError

    real = verdict_mod.onnxruntime_outputs

    def no_optimised(model, feeds, optimised=False):
        if optimised:
            raise AscendirError(f"onnxruntime cannot run {model}: optimiser failed")
        return real(model, feeds)

    monkeypatch.setattr(verdict_mod, "onnxruntime_outputs", no_optimised)
    rep = tmp_path / "r.json"
    r = run_cli("run", DATA / "quant" / "llama_dynamic" / "model.onnx", "-O1", "--check-ort", "--report", rep)
    assert r.exit_code == 1, r.output
    assert r.stdout.startswith("FAIL: 1 output against onnxruntime") and "ORT_ENABLE_ALL" not in r.stdout, r.output
    v = json.loads(rep.read_text())["verdict"]
    assert v["status"] == "fail" and "cause" not in v and "ort_optimised" not in v
    assert run_cli("report", rep).exit_code == 0


def test_check_ort_notes_onnxruntime_u8s8_saturation(tmp_path: Path, monkeypatch) -> None:
    """On a CPU where onnxruntime's u8 x s8 kernels saturate (AVX2 without VNNI), a --check-ort
    FAIL of a model with MatMulInteger / ConvInteger / QLinear* nodes says its reference may be the
    wrong side, naming the nodes (screen and report); where they are exact, llama_dynamic -O0
    PASSes with no note. The note's own condition is checked on any CPU with the probe forced."""
    import ascendir.api.verdict as verdict_mod

    model = DATA / "quant" / "llama_dynamic" / "model.onnx"
    rep = tmp_path / "r.json"
    r = run_cli("run", model, "-O0", "--check-ort", "--report", rep)
    if verdict_mod.onnxruntime_u8s8_exact():
        assert r.exit_code == 0 and r.stdout.startswith("PASS") and "note:" not in r.stdout, r.output
    else:
        assert r.exit_code == 1, r.output
        text = " ".join(r.stdout.split())
        assert "note: onnxruntime's u8 x s8 kernels saturate on this CPU" in text and "MatMulInteger '" in text, text
        v = json.loads(rep.read_text())["verdict"]
        assert v["ort_u8s8_nodes"] and all(n.startswith("MatMulInteger '") for n in v["ort_u8s8_nodes"])
        assert run_cli("report", rep).exit_code == 0

    def failing() -> dict:
        return {"status": "fail", "reference": "onnxruntime", "outputs": []}

    for exact, path, noted in ((False, model, True), (True, model, False), (False, MLP, False)):
        monkeypatch.setattr(verdict_mod, "onnxruntime_u8s8_exact", lambda exact=exact: exact)
        v = failing()
        verdict_mod.note_u8s8(v, path)
        assert ("ort_u8s8_nodes" in v) == noted, (exact, path)
        assert any("u8 x s8" in line for line in lines(v)) == noted
    v = {"status": "pass", "reference": "onnxruntime", "outputs": []}
    verdict_mod.note_u8s8(v, model)  # still forced inexact: a PASS gets no note
    assert "ort_u8s8_nodes" not in v
