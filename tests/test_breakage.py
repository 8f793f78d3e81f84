"""Bad and odd input found by trying to break the CLIs: each must give one line `error: ...`
naming the file/input/op and the reason, exit code 2, no traceback and no output file left
behind; odd-but-valid models must match onnxruntime."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

from ascendir.api.cli import main
from cli_helpers import assert_clean_error as _clean_error
from cli_helpers import run_cli as _run
from ascendir.errors import AscendirError
from ascendir.frontends.onnx import import_onnx
from ascendir.hardware import load_target
from ascendir.interpreter import simulate
from ascendir.interpreter.exec.nn_reference import run_nn
from ascendir.interpreter.testing import parse
from ascendir.api.opt import main as opt_main
from onnx_builders import check_against_onnxruntime, make_model

DATA = Path(__file__).parent / "data"
MLP = DATA / "mlp_small" / "model.onnx"
MLP_REF = DATA / "mlp_small" / "reference.npz"



def _leftovers(folder: Path, *names: str) -> list[str]:
    return [p.name for p in folder.iterdir() if any(p.name == n or p.name.startswith(f".{n}") for n in names)]


def _opt(capsys, *args) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        opt_main([str(a) for a in args])
        raise SystemExit(0)
    return info.value.code, capsys.readouterr().err


def _relu_model(tmp_path: Path, shape: tuple[int, ...] = (4, 8)) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    p = tmp_path / "relu.onnx"
    onnx.save(m, p)
    return p


# ------------------------------------------------------------------------------------------
# pass pipelines
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["fuse-matmul-epilogue{", "fuse-matmul-epilogue}", "{", "recompose-nn{x=}"])
def test_pipeline_syntax_error_is_one_line(spec: str) -> None:
    # xDSL raises ArgSpecParseError, a BaseException: it used to escape as a traceback
    _clean_error(_run("compile", MLP, "-p", spec), "bad pass pipeline")


def test_named_pipeline_with_options_says_so() -> None:
    # used to say "Unrecognized passes: ['O2']", though O2 is a pipeline name -p accepts
    _clean_error(_run("compile", MLP, "-p", "O2{x=1}"), "named pipeline 'O2' takes no options", "fuse-ffn")


def test_nn_pipeline_with_the_lowering_pass_is_rejected() -> None:
    # used to emit ascend IR under --emit nn, or fail with "already lowered?"
    _clean_error(_run("compile", MLP, "--emit", "nn", "-p", "convert-nn-to-ascend"), "convert-nn-to-ascend", "--target")
    _clean_error(_run("run", MLP, "-p", "fuse-matmul-epilogue,convert-nn-to-ascend{target=ascend910a}"), "--target")


def test_opt_pipeline_syntax_error_is_one_line(capsys, tmp_path: Path) -> None:
    nn_ir = tmp_path / "in.mlir"
    assert _run("compile", MLP, "--emit", "nn", "-o", nn_ir).exit_code == 0
    code, err = _opt(capsys, nn_ir, "-p", "fuse-matmul-epilogue{")
    assert code == 2 and err.startswith("ascendir-opt: error: ") and len(err.strip().splitlines()) == 1, err
    assert "Expected argument name" in err and "Traceback" not in err


def test_opt_parse_error_is_one_line(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("builtin.module { func.func @main( }")
    code, err = _opt(capsys, bad)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "bad.mlir:1:35" in err and "Expected argument or type" in err and "^" not in err


def test_opt_failure_leaves_no_output_file(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("builtin.module { func.func @main( }")
    out = tmp_path / "out.mlir"
    code, err = _opt(capsys, bad, "-o", out)
    assert code == 2
    assert not _leftovers(tmp_path, "out.mlir")  # xdsl-opt used to open (truncate) it first


def test_opt_output_into_missing_folder(capsys, tmp_path: Path) -> None:
    ir = tmp_path / "in.mlir"
    ir.write_text("builtin.module {}\n")
    code, err = _opt(capsys, ir, "-o", tmp_path / "nope" / "out.mlir")
    assert code == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1, err
    code, err = _opt(capsys, ir, "-o", tmp_path)
    assert code == 2 and "is a directory" in err, err


def test_opt_success_writes_output(capsys, tmp_path: Path) -> None:
    ir, out = tmp_path / "in.mlir", tmp_path / "out.mlir"
    ir.write_text("builtin.module {}\n")
    code, err = _opt(capsys, ir, "-o", out)
    assert code == 0, err
    assert "builtin.module" in out.read_text()


def test_gm_footprint_above_hbm_is_bad_input(tmp_path: Path) -> None:
    """Nothing compared plan-memory's GM footprint with the chip's HBM: a program needing more
    device memory than the target has compiled and ran. A chip whose HBM is 192 MiB (memory.
    hbm_bytes = l2_bytes, the least a target file may say) and y = relu(x) on 8192 x 8192 f32
    (256 MiB in + 256 MiB out): compile and run fail on one line naming the footprint, the HBM
    bytes and the target, and leave no output; IR planned for the 910B2 (where it fits) and run
    on the small chip fails the same way before simulating."""
    chip = tmp_path / "small_hbm.toml"
    text = (Path(__file__).resolve().parent.parent / "ascendir" / "hardware" / "chips" / "ascend910b2.toml").read_text()
    chip.write_text(text.replace('name = "ascend910b2"', 'name = "smallhbm"')
                    .replace("hbm_bytes = 68719476736 ", "hbm_bytes = 201326592   "))
    model = _relu_model(tmp_path, (8192, 8192))
    need = "@main needs 536870912 B of GM (weights 0 + inputs 268435456 + outputs 268435456 + arena 0)"
    out = tmp_path / "m.mlir"
    _clean_error(_run("compile", model, "--target", chip, "-o", out), f"plan-memory: {need}", "than the 201326592 B of HBM on smallhbm")
    assert not _leftovers(tmp_path, "m.mlir", "m.weights.npz")
    _clean_error(_run("run", model, "--target", chip, "--timing-only"), need, "201326592 B of HBM on smallhbm")
    assert _run("compile", model, "-o", out).exit_code == 0  # 64 GiB on the default 910B2
    _clean_error(_run("run", out, "--target", chip, "--timing-only"), need, "201326592 B of HBM on smallhbm")


def test_gm_footprint_of_unplanned_ir_above_hbm_is_bad_input(capsys, tmp_path: Path) -> None:
    """IR lowered without plan-memory (ascendir-opt -p convert-nn-to-ascend) has no
    ascend.gm_footprint: `ascendir run` used to simulate it whatever its size (48 GiB of GM ran
    on a 32 GiB 910B4). It now checks the footprint plan-memory would give it, before running."""
    chip = tmp_path / "small_hbm.toml"
    text = (Path(__file__).resolve().parent.parent / "ascendir" / "hardware" / "chips" / "ascend910b2.toml").read_text()
    chip.write_text(text.replace('name = "ascend910b2"', 'name = "smallhbm"')
                    .replace("hbm_bytes = 68719476736 ", "hbm_bytes = 201326592   "))
    nn_ir, ir = tmp_path / "nn.mlir", tmp_path / "m.mlir"
    assert _run("compile", _relu_model(tmp_path, (8192, 8192)), "--emit", "nn", "-o", nn_ir).exit_code == 0
    code, err = _opt(capsys, nn_ir, "-p", "convert-nn-to-ascend", "-o", ir)
    assert code == 0, err
    assert "gm_footprint" not in ir.read_text()
    need = "@main needs 536870912 B of GM (weights 0 + inputs 268435456 + outputs 268435456 + arena 0)"
    _clean_error(_run("run", ir, "--target", chip, "--timing-only"), need, "201326592 B of HBM on smallhbm")
    r = _run("run", ir, "--timing-only", "--report", tmp_path / "r.json")  # fits the 910B2's 64 GiB
    assert r.exit_code == 0, r.output
    assert "gm_footprint" not in json.loads((tmp_path / "r.json").read_text())  # nothing planned, nothing reported


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda fp: "{total = 99999999999999 : i64}", "ascend.gm_footprint must be a dictionary of weights = N : i64"),
        (lambda fp: '"big"', "ascend.gm_footprint must be a dictionary of"),
        (lambda fp: fp.replace("weights = 0 : i64", 'weights = "a"'), "weights is not a non-negative integer"),
        (lambda fp: fp.replace("arena = 0 : i64", "arena = -5 : i64"), "arena is not a non-negative integer"),
        (lambda fp: fp.replace("total = 256 : i64", "total = 99999999999999 : i64"),
         "total = 99999999999999 is not weights + inputs + outputs + arena = 256"),
    ],
    ids=["missing-keys", "not-a-dict", "string-value", "negative", "total-not-the-sum"],
)
def test_hand_edited_gm_footprint_is_bad_input(tmp_path: Path, edit, fragment: str) -> None:
    # simulate's HBM check read the attribute as plan-memory writes it: any other shape was an
    # internal error (KeyError: 'weights', AttributeError), a total beyond the sum of its parts
    # an HBM error quoting parts that do not add up
    import re

    ir = tmp_path / "m.mlir"
    assert _run("compile", _relu_model(tmp_path), "-o", ir).exit_code == 0
    text = ir.read_text()
    fp = re.search(r"ascend.gm_footprint = (\{[^}]*\})", text).group(1)
    assert "total = 256 : i64" in fp, fp
    ir.write_text(text.replace(fp, edit(fp)))
    _clean_error(_run("run", ir, "--timing-only"), "@main: ", fragment)


def test_kernel_gm_workspace_counts_in_the_gm_footprint(capsys, tmp_path: Path) -> None:
    """GM a kernel allocates itself (a workspace, fresh for each launch) was left out of the
    footprint: a kernel with a 512 GiB workspace planned to 180 KiB and ran timing-only on a
    64 GiB 910B2. The mix kernel of filecheck/insert-sync/mix_kernel.mlir has a 32 KiB
    workspace: the arena holds it now; with a 512 GiB one plan-memory and `ascendir run` of the
    unplanned IR fail on one line."""
    from ascendir.costmodel.memory import gm_footprint
    from ascendir.transforms.ascend.plan_memory import plan_module

    text = (Path(__file__).parent / "filecheck" / "insert-sync" / "mix_kernel.mlir").read_text()
    module = parse(text)
    plan_module(module, load_target("910b2"))
    fp = gm_footprint(module)
    assert fp["arena"] == 64 * 128 * 4 and fp["total"] == 256 * 64 * 2 + 64 * 128 * 2 + 256 * 128 * 4 + 64 * 128 * 4, fp
    assert fp["live_peak"] == fp["total"]
    big = tmp_path / "big.mlir"
    big.write_text(text.replace("    %ws = ascend.alloc : memref<64x128xf32, #ascend<space gm>>\n",
                                "    %ws = ascend.alloc : memref<64x128xf32, #ascend<space gm>>\n"
                                "    %big = ascend.alloc : memref<65536x65536x32xf32, #ascend<space gm>>\n"))
    need = "@main needs 549756026880 B of GM (weights 0 + inputs 49152 + outputs 131072 + arena 549755846656)"
    code, err = _opt(capsys, big, "-p", "plan-memory")
    assert code == 2 and err.strip() == f"ascendir-opt: error: plan-memory: {need}, more than the 68719476736 B of HBM on ascend910b2", err
    _clean_error(_run("run", big, "--timing-only"), need, "68719476736 B of HBM on ascend910b2")


ADD_LOOP = Path(__file__).parent / "filecheck" / "double-buffer" / "add_loop.mlir"


def _pass_bug(self, ctx, op) -> None:
    raise RuntimeError("double-buffer tripped over\n  its own feet")


def test_opt_internal_error_is_not_bad_input(capsys, monkeypatch, tmp_path: Path) -> None:
    """An exception that is no bad input (here a pass with a bug) used to print `ascendir-opt:
    error:` and exit 2, as bad IR does. Now one line `internal error: <type>: <message>`, exit
    1 and no output file, as `ascendir` does; ASCENDIR_DEBUG=1 adds the traceback."""
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer

    monkeypatch.setattr(DoubleBuffer, "apply", _pass_bug)
    monkeypatch.delenv("ASCENDIR_DEBUG", raising=False)
    out = tmp_path / "out.mlir"
    code, err = _opt(capsys, ADD_LOOP, "-p", "double-buffer", "-o", out)
    assert (code, err) == (1, "ascendir-opt: internal error: RuntimeError: double-buffer tripped over its own feet "
                               "(set ASCENDIR_DEBUG=1 for a traceback)\n")
    assert not _leftovers(tmp_path, "out.mlir")
    monkeypatch.setenv("ASCENDIR_DEBUG", "1")
    code, err = _opt(capsys, ADD_LOOP, "-p", "double-buffer")
    assert code == 1 and err.startswith("Traceback") and "in _pass_bug" in err, err
    assert err.splitlines()[-1].startswith("ascendir-opt: internal error: RuntimeError: "), err


def test_opt_out_of_memory_is_not_internal(capsys, monkeypatch) -> None:
    """MemoryError is this machine's limit, not a bug: `error: out of memory`, exit 2, as `ascendir`."""
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer

    def _oom(self, ctx, op):
        raise MemoryError("cannot allocate 64 GiB")

    monkeypatch.setattr(DoubleBuffer, "apply", _oom)
    assert _opt(capsys, ADD_LOOP, "-p", "double-buffer") == (2, "ascendir-opt: error: out of memory: cannot allocate 64 GiB\n")


def test_cli_internal_error_is_not_bad_input(monkeypatch, tmp_path: Path) -> None:
    """The same bug under `ascendir compile` (its lowering runs double-buffer): the same line."""
    from ascendir.transforms.ascend.double_buffer import DoubleBuffer

    monkeypatch.setattr(DoubleBuffer, "apply", _pass_bug)
    monkeypatch.delenv("ASCENDIR_DEBUG", raising=False)
    r = _run("compile", MLP, "-o", tmp_path / "m.mlir")
    assert (r.exit_code, r.output) == (1, "internal error: RuntimeError: double-buffer tripped over its own feet "
                                          "(set ASCENDIR_DEBUG=1 for a traceback)\n")


@pytest.mark.parametrize(("spec", "says"), [
    ("no-such-pass", "Unrecognized passes: ['no-such-pass']"),
    ("double-buffer{bogus=1}", 'Provided arguments ["bogus"] not found'),
    ("double-buffer{quiet=maybe}", "Incompatible types"),
])
def test_opt_bad_pass_or_option_is_bad_input(capsys, spec: str, says: str) -> None:
    # xDSL raises a plain ValueError for these: bad -p text, not an internal error
    code, err = _opt(capsys, ADD_LOOP, "-p", spec)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"ascendir-opt: error: bad pass pipeline '{spec}': ") and says in err, err


@pytest.mark.parametrize("spec", ["O2{x=1}", "canonicalize,O0{x=1}"])
def test_opt_named_pipeline_with_options_says_so_as_the_cli_does(capsys, spec: str) -> None:
    # ascendir-opt used to say "Unrecognized passes: ['O2']" where `ascendir` names the pipeline
    code, err = _opt(capsys, ADD_LOOP, "-p", spec)
    cli = _clean_error(_run("compile", MLP, "-p", spec), "takes no options")
    assert (code, err) == (2, f"ascendir-opt: {cli}\n")


def test_option_given_twice_is_an_error_not_the_last_one(capsys) -> None:
    # xDSL's pipeline parser keeps the last value: plan-memory{target=a target=b} planned for b
    spec = "plan-memory{target=ascend910a target=ascend910b2}"
    code, err = _opt(capsys, ADD_LOOP, "-p", spec)
    assert (code, err) == (2, f"ascendir-opt: error: bad pass pipeline '{spec}': plan-memory is given option 'target' twice (give it once)\n")
    _clean_error(_run("compile", MLP, "-p", "fuse-ffn,choose-tiling{tiling=\"m=64\" target=ascend910b2 tiling=\"m=128\"}"),
                 "choose-tiling is given option 'tiling' twice")


@pytest.mark.sampled
@pytest.mark.parametrize("nn_pipeline", ["O2", "recompose-nn"])
def test_opt_lowers_imported_nn_ir_and_it_runs(capsys, tmp_path: Path, nn_pipeline: str) -> None:
    """The README's `ascendir-opt in.mlir -p '...,convert-nn-to-ascend{target=...}'` on the nn IR
    of `compile --emit nn`: llama_small keeps nn.constant ops (scalars, the attention mask's
    fill) that ascendir-opt has no WeightStore for; lowering used to fail ("nn.constant must be
    moved into the WeightStore"). Now they stay in the IR as valued ascend.weight ops, and the
    lowered text runs (with the nn IR's weights file) to onnxruntime's reference output.
    With `-p recompose-nn` the nn IR holds unfused nn.attention ops, which ascendir-opt's
    convert-nn-to-ascend used to reject ("no template for nn.attention"): it now decomposes
    them as the driver does."""
    llama = DATA / "llama_small"
    nn_ir, low = tmp_path / "nn.mlir", tmp_path / "low.mlir"
    assert _run("compile", llama / "model.onnx", "--emit", "nn", "-p", nn_pipeline, "-o", nn_ir).exit_code == 0
    assert ('#nn.fused_kind<flash_attention>' in nn_ir.read_text()) == (nn_pipeline == "O2")  # else bare nn.attention
    assert "nn.constant" in nn_ir.read_text()
    code, err = _opt(capsys, nn_ir, "-p", "fuse-matmul-epilogue,convert-nn-to-ascend{target=ascend910b2}", "-o", low)
    assert code == 0, err
    assert "ascend.weight @inline_const_0 {value = dense<" in low.read_text()
    os.replace(tmp_path / "nn.weights.npz", tmp_path / "low.weights.npz")
    out = tmp_path / "out.npz"
    result = _run("run", low, "--inputs", llama / "reference.npz", "--outputs", out)
    assert result.exit_code == 0, result.output
    want = np.load(llama / "reference.npz")["output:logits"]
    np.testing.assert_allclose(np.load(out)["logits"], want, rtol=1e-4, atol=1e-5)


def test_readme_tiling_example_fits_an_f32_model() -> None:
    """The README's `--tiling` example must compile the default (fp32) precision: it showed
    m=128,n=256,k=64, whose double-buffered 256x64 f32 B tile needs 128 KiB of the 910B's 64 KiB
    L0B, so the command failed as written on every f32 model."""
    import re

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    tiling = re.search(r"ascendir run model\.onnx --tiling '([^']+)'", readme).group(1)
    result = _run("compile", DATA / "llama_small" / "model.onnx", "--tiling", tiling)
    assert result.exit_code == 0, result.output


def test_ir_with_a_bad_or_missing_weights_file(tmp_path: Path) -> None:
    """IR run beside a weights file that is not an .npz used to end in "internal error:
    ValueError: This file contains pickled (object) data" (exit 1); without its weights file
    it failed mid-simulation on the first weight read. Both are one-line errors naming the file
    now, before any work; --timing-only still needs no weights."""
    ir = tmp_path / "m.mlir"
    assert _run("compile", MLP, "-o", ir).exit_code == 0
    (tmp_path / "m.weights.npz").write_text("not an archive\n")
    _clean_error(_run("run", ir), "m.weights.npz", "not an .npz archive")
    _clean_error(_run("compile", ir), "m.weights.npz", "not an .npz archive")
    (tmp_path / "m.weights.npz").unlink()
    _clean_error(_run("run", ir), "m.weights.npz", "does not exist", "@")
    assert _run("run", ir, "--timing-only").exit_code == 0


def test_errors_in_fused_regions_name_the_kind_and_an_onnx_node(tmp_path: Path) -> None:
    """A fused region's lowering error used to name only `nn.fused #13`: the fusion passes give
    the region no node name. It now says which fusion and the first ONNX node of its body; the
    no-f32-cube error says which flag fixes it. (A forced --tiling is now rejected earlier, by
    choose-tiling, naming the matmul's node; a bad tile in IR text still reaches lowering.)"""
    import re

    llama = DATA / "llama_small" / "model.onnx"
    _clean_error(_run("run", llama, "--target", "ascend910a"), "nn.fused #", "(norm_matmul, from '/lm/model/layers.0/", "--dtype fp16")
    _clean_error(_run("run", llama, "--tiling", "m=16,n=16,k=8,split_k=3"), "nn.matmul #", "('/lm/model/layers.0/")
    ir = tmp_path / "l.mlir"
    assert _run("compile", llama, "--emit", "nn", "-o", ir).exit_code == 0
    text, n = re.subn(r'(onnx\.node = "/lm/model/layers\.0/self_attn/o_proj/MatMul", ascend\.tiling = )#ascend\.tiling<\{[^}]*\}>',
                      r"\1#ascend.tiling<{m = 128 : i64, n = 256 : i64}>", ir.read_text())
    assert n == 1
    ir.write_text(text)
    _clean_error(_run("run", ir, "--timing-only"), "(matmul_epilogue, from '/lm/model/layers.0/", "bytes of UB")


def test_out_of_range_token_id_names_the_kernel(tmp_path: Path) -> None:
    """A token id beyond the embedding table is bad data, found only when the gather runs: one
    line naming the launched kernel (it used to name only the tile op `ascend.gather_rows`)."""
    ref = np.load(DATA / "llama_small" / "reference.npz")
    feeds = tmp_path / "in.npz"
    ids = np.full_like(ref["input:input_ids"], 100000)
    np.savez(feeds, input_ids=ids, attention_mask=ref["input:attention_mask"])
    out = tmp_path / "out.npz"
    _clean_error(_run("run", DATA / "llama_small" / "model.onnx", "--inputs", feeds, "--outputs", out),
                 "kernel @gather_0", "index 100000 out of range for a table of 512 rows")
    assert not _leftovers(tmp_path, "out.npz")


# ------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, fragment",
    [
        (("run", MLP, "--seed", "-5"), "--seed"),  # used to be an internal ValueError from numpy
        (("compile", MLP, "--emit", "bogus"), "--emit"),
        (("compile", MLP, "-O", "7"), "-O"),
        (("run",), "MODEL"),
        (("run", MLP, "--no-such-flag"), "--no-such-flag"),
        (("frobnicate",), "frobnicate"),
    ],
)
def test_bad_command_line_is_one_line(args, fragment: str) -> None:
    _clean_error(_run(*args), fragment)


def test_input_shape_on_ir_is_an_error(tmp_path: Path) -> None:
    ir = tmp_path / "m.mlir"
    assert _run("compile", MLP, "-o", ir).exit_code == 0
    _clean_error(_run("run", ir, "--input-shape", "input=3x3", "--timing-only"), "--input-shape", "m.mlir")
    _clean_error(_run("compile", ir, "--input-shape", "input=3x3"), "--input-shape")
    _clean_error(_run("run", ir, "-p", "fuse-matmul-epilogue", "--timing-only"), "already lowered", "-p")


def test_lowered_ir_on_another_architecture(tmp_path: Path) -> None:
    ir = tmp_path / "m.mlir"
    assert _run("compile", MLP, "-o", ir).exit_code == 0
    # used to fail deep in the interpreter with "ascend310p has no bt buffer"
    _clean_error(_run("run", ir, "--timing-only", "--target", "310p"), "ascend910b2", "ascend310p", "m.mlir")
    assert _run("run", ir, "--timing-only", "--target", "910b4").exit_code == 0  # same arch: fine


# ------------------------------------------------------------------------------------------
# output files
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--outputs", "--report", "--trace"])
def test_run_output_into_missing_folder(tmp_path: Path, flag: str) -> None:
    target = tmp_path / "missing" / "out.json"
    _clean_error(_run("run", MLP, flag, target), str(target), "does not exist")
    assert not (tmp_path / "missing").exists()  # used to be created silently


def test_compile_output_into_missing_folder(tmp_path: Path) -> None:
    _clean_error(_run("compile", MLP, "-o", tmp_path / "missing" / "m.mlir"), "does not exist")
    assert not (tmp_path / "missing").exists()


def test_output_is_a_directory(tmp_path: Path) -> None:
    _clean_error(_run("compile", MLP, "-o", tmp_path), "is a directory")  # was an internal IsADirectoryError
    _clean_error(_run("run", MLP, "--trace", tmp_path), "is a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_output_folder_not_writable(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _clean_error(_run("compile", MLP, "-o", ro / "m.mlir"), "permission denied")
    finally:
        ro.chmod(0o700)


def test_no_output_written_when_another_output_cannot_be(tmp_path: Path) -> None:
    out = tmp_path / "o.npz"
    _clean_error(_run("run", MLP, "--outputs", out, "--trace", tmp_path / "missing" / "t.json"), "does not exist")
    assert not _leftovers(tmp_path, "o.npz")


def test_output_never_overwrites_an_input(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(MLP.read_bytes())
    _clean_error(_run("compile", model, "-o", model), "overwrite")
    assert model.read_bytes() == MLP.read_bytes()
    _clean_error(_run("run", model, "--outputs", tmp_path / "r.json", "--report", tmp_path / "r.json"), "differ")


def test_outputs_are_written_before_the_report_is_printed(tmp_path: Path) -> None:
    # `ascendir run ... | head` closes stdout while the report renders; rich then exits(1):
    # the files must already be there.
    import rich.console

    out = tmp_path / "o.npz"
    original = rich.console.Console.print

    def broken_pipe(self, *a, **k):
        raise SystemExit(1)

    rich.console.Console.print = broken_pipe
    try:
        CliRunner().invoke(main, ["run", str(MLP), "--inputs", str(MLP_REF), "--outputs", str(out)])
    finally:
        rich.console.Console.print = original
    np.testing.assert_allclose(np.load(out)["output"], np.load(MLP_REF)["output:output"], rtol=1e-3, atol=1e-4)


def test_output_files_get_the_usual_permissions(tmp_path: Path) -> None:
    out = tmp_path / "m.mlir"
    umask = os.umask(0o022)
    try:
        assert _run("compile", MLP, "-o", out).exit_code == 0
    finally:
        os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o644  # mkstemp's 0600 leaked through
    assert (tmp_path / "m.weights.npz").stat().st_mode & 0o777 == 0o644


# ------------------------------------------------------------------------------------------
# --inputs files
# ------------------------------------------------------------------------------------------
def _x() -> np.ndarray:
    return np.load(MLP_REF)["input:input"]


@pytest.mark.parametrize(
    "arrays, fragments",
    [
        ({"input": _x().reshape(-1)}, ["'input'", "(12544,)", "(16, 784)"]),  # used to be reshaped silently
        ({"input": _x().astype(np.int64)}, ["'input'", "int64", "float32"]),  # used to be cast silently
        ({"input": _x().astype(np.float64)}, ["'input'", "float64"]),
        ({"input": _x(), "bogus": np.zeros(3)}, ["bogus"]),  # used to be ignored
        ({"input": _x(), "input:input": _x()}, ["'input'", "'input:input'"]),  # which one wins?
        ({"inptu": _x()}, ["input"]),
    ],
)
def test_bad_inputs_file(tmp_path: Path, arrays, fragments) -> None:
    p = tmp_path / "in.npz"
    np.savez(p, **arrays)
    out = tmp_path / "o.npz"
    _clean_error(_run("run", MLP, "--inputs", p, "--outputs", out), "in.npz", *fragments)
    assert not _leftovers(tmp_path, "o.npz")


def test_inputs_checked_in_timing_only_mode_too(tmp_path: Path) -> None:
    p = tmp_path / "in.npz"
    np.savez(p, input=_x()[:1])
    _clean_error(_run("run", MLP, "--timing-only", "--inputs", p), "(1, 784)")


@pytest.mark.parametrize("content", [b"PK garbage", b"hello", None])
def test_inputs_file_that_is_no_npz(tmp_path: Path, content) -> None:
    p = tmp_path / "in.npz"
    if content is None:
        np.save(p.with_suffix(".npy"), _x())
        p = p.with_suffix(".npy")  # an .npy, not an .npz: was an internal TypeError
    else:
        p.write_bytes(content)
    _clean_error(_run("run", MLP, "--inputs", p), "not an .npz")


def test_inputs_with_output_keys_and_prefix_are_fine(tmp_path: Path) -> None:
    out = tmp_path / "o.npz"
    assert _run("run", MLP, "--inputs", MLP_REF, "--outputs", out).exit_code == 0


def test_bfloat16_inputs_round_trip_through_npz(tmp_path: Path) -> None:
    import ml_dtypes

    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4, 16])
    y = helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4, 16])
    m = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    model = tmp_path / "bf.onnx"
    onnx.save(m, model)
    data = np.arange(64, dtype=np.float32).reshape(4, 16).astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "in.npz", x=data)  # numpy stores bfloat16 as raw |V2
    r = _run("run", model, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert r.exit_code == 0, r.output
    got = np.load(tmp_path / "o.npz")["y"]  # bf16 outputs are written as float32 (dtypes.numpy_native)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, 2 * data.astype(np.float32))


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_fp32_inputs_feed_a_model_run_in_lower_precision(tmp_path: Path, precision: str) -> None:
    # --dtype makes the f32 graph inputs fp16/bf16: the ONNX model's own f32 data still feeds them
    out = tmp_path / "o.npz"
    r = _run("run", MLP, "--dtype", precision, "--inputs", MLP_REF, "--outputs", out)
    assert r.exit_code == 0, r.output
    assert np.load(out)["output"].shape == (16, 10)
    p = tmp_path / "in.npz"
    np.savez(p, input=_x().astype(np.int64))
    _clean_error(_run("run", MLP, "--dtype", precision, "--inputs", p), "int64")


def test_timing_only_makes_no_random_inputs(tmp_path: Path, monkeypatch) -> None:
    # timing-only moves no data; it used to build random inputs anyway (a MemoryError for a
    # 100000 x 100000 input)
    import ascendir.driver

    def boom(*a, **k):
        raise AssertionError("random inputs built in timing-only mode")

    monkeypatch.setattr(ascendir.driver, "random_inputs", boom)
    assert _run("run", _relu_model(tmp_path), "--timing-only").exit_code == 0


def test_out_of_memory_is_one_line(tmp_path: Path, monkeypatch) -> None:
    import ascendir.driver

    def oom(*a, **k):
        raise MemoryError("Unable to allocate 74.5 GiB for an array with shape (100000, 100000)")

    monkeypatch.setattr(ascendir.driver, "random_inputs", oom)
    _clean_error(_run("run", _relu_model(tmp_path)), "out of memory", "--timing-only")


# ------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"a": 1}, "no 'target'"),
        ([1, 2], "list"),
        ({"target": "x", "total_cycles": "abc", "total_seconds": 1, "clock_hz": 1, "kernels": []}, "'total_cycles'"),
        ({"target": "x", "total_cycles": 1, "total_seconds": 1, "clock_hz": 1, "kernels": [{"name": "k"}]}, "kernels[0]"),
    ],
)
def test_report_of_a_json_that_is_no_report(tmp_path: Path, data, fragment: str) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(data))
    _clean_error(_run("report", p), "r.json", "not a report", fragment)  # used to be an internal KeyError


# ------------------------------------------------------------------------------------------
# IR text
# ------------------------------------------------------------------------------------------
_KERNEL = """
builtin.module {{
  ascend.kernel @k(%x: memref<8x32xf32, #ascend<space gm>>) attributes {{block_dim = {bd}, core_type = {ct}}} {{
    ascend.return
  }}
  func.func @main(%x: memref<8x32xf32, #ascend<space gm>>) {{
    ascend.launch @k(%x) : memref<8x32xf32, #ascend<space gm>>
    func.return
  }}
}}
"""


@pytest.mark.parametrize(
    "bd, ct, fragment",
    [("2 : i64", '"xyz"', "core_type"), ("2 : i64", "3 : i64", "core_type"), ("2 : i64", '"aiv"', "core_type"),
     ('"two"', "#ascend.core_type<aiv>", "block_dim")],
)
def test_kernel_with_bad_attributes_is_a_parse_error(tmp_path: Path, bd: str, ct: str, fragment: str) -> None:
    p = tmp_path / "k.mlir"
    p.write_text(_KERNEL.format(bd=bd, ct=ct))
    # used to be an internal ValueError ("'xyz' is not a valid CoreType")
    _clean_error(_run("run", p, "--timing-only"), "k.mlir", "parse error", "ascend.kernel @k", fragment)


def test_valid_kernel_attributes_still_parse(tmp_path: Path) -> None:
    p = tmp_path / "k.mlir"
    p.write_text(_KERNEL.format(bd="2 : i64", ct="#ascend.core_type<aiv>"))
    assert _run("run", p, "--timing-only").exit_code == 0


# ------------------------------------------------------------------------------------------
# split cube / vector cores (910B)
# ------------------------------------------------------------------------------------------
def _split_kernel(core_type: str, body: str, allocs: str) -> str:
    return f"""
builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">, ascend.target = #ascend.target<"ascend910b2">}} {{
  ascend.kernel @k(%x: memref<32x32xf32, #ascend<space gm>>) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<{core_type}>}} {{
{allocs}
{body}
    ascend.return
  }}
  func.func @main(%x: memref<32x32xf32, #ascend<space gm>>) {{
    ascend.launch @k(%x) : memref<32x32xf32, #ascend<space gm>>
    func.return
  }}
}}
"""


def _sp(space: str, dt: str = "f16") -> str:
    return f"memref<32x32x{dt}, #ascend<space {space}>>"


@pytest.mark.parametrize(
    "core_type, body, allocs",
    [
        (
            "aiv",
            f"    ascend.mmad %a, %b, %c {{init = true}} : {_sp('l0a')}, {_sp('l0b')}, {_sp('l0c', 'f32')}",
            f"    %a = ascend.alloc : {_sp('l0a')}\n    %b = ascend.alloc : {_sp('l0b')}\n    %c = ascend.alloc : {_sp('l0c', 'f32')}",
        ),
        ("aic", f"    ascend.vexp %u, %u : {_sp('ub')}, {_sp('ub')}", f"    %u = ascend.alloc : {_sp('ub')}"),
    ],
    ids=["mmad-on-aiv", "vector-on-aic"],
)
def test_op_on_a_core_type_without_its_unit(core_type: str, body: str, allocs: str) -> None:
    # the interpreter used to run mmad on a vector core and vector ops on a cube core of a 910B
    other = "aic" if core_type == "aiv" else "aiv"
    with pytest.raises(AscendirError, match=rf"kernel @k \({core_type}\): .* needs an {other} core"):
        simulate(parse(_split_kernel(core_type, body, allocs)), None, {}, load_target("910b2"), timing_only=True)


def test_coupled_chip_runs_cube_and_vector_on_one_core() -> None:
    # 910A's AI core has both units: an aic kernel may use UB there
    body = f"    ascend.vexp %u, %u : {_sp('ub')}, {_sp('ub')}"
    text = _split_kernel("aic", body, f"    %u = ascend.alloc : {_sp('ub')}").replace("dav-c220", "dav-c100").replace(
        "ascend910b2", "ascend910a")
    simulate(parse(text), None, {}, load_target("910a"), timing_only=True)


@pytest.mark.parametrize("target", ["910a", "310p"])
def test_aiv1_work_on_a_coupled_chip_is_rejected(target: str) -> None:
    # a coupled core has one UB: AIV 1's buffers used to get a UB of their own there (capacity is
    # counted per subblock), so two 256 KiB buffers ran in 910A's 256 KiB UB
    hw = load_target(target)
    ub = f"memref<512x128xf32, #ascend<space ub>>"
    body = f"    ascend.vexp %a, %a : {ub}, {ub}\n    ascend.vexp %b, %b {{subblock = 1 : i64}} : {ub}, {ub}"
    allocs = f"    %a = ascend.alloc : {ub}\n    %b = ascend.alloc {{subblock = 1 : i64}} : {ub}"
    text = _split_kernel("mix", body, allocs).replace("dav-c220", hw.arch.name).replace("ascend910b2", hw.name)
    with pytest.raises(AscendirError, match=rf"kernel @k: work on AIV 1 \(subblock = 1\) but {hw.name} \({hw.arch}\) "
                                            "has no separate vector cores"):
        simulate(parse(text), None, {}, hw, timing_only=True)
    # one AIV's worth of the same work runs there
    simulate(parse(text.replace(" {subblock = 1 : i64}", "").replace("512x128", "256x128")), None, {}, hw, timing_only=True)


# ------------------------------------------------------------------------------------------
# ONNX frontend
# ------------------------------------------------------------------------------------------
def test_negative_dim_value_is_a_dynamic_dim() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    x.type.tensor_type.shape.dim[0].dim_value = -1  # some exporters write -1 for "unknown"
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(AscendirError, match=r"input 'x' has dynamic dim 0"):
        import_onnx(m)  # used to build tensor<?x3xf32> and fail later on a misleading output shape
    module, weights = import_onnx(m, input_shapes={"x": (2, 3)})
    xs = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(run_nn(module, weights, {"x": xs})["y"], np.maximum(xs, 0))


@pytest.mark.parametrize("bounds", [(-0.5, None), (None, 0.5), (None, None)])
def test_clip_with_an_absent_bound_clips_infinities(bounds) -> None:
    # ONNX: an absent bound is numeric_limits lowest()/max(): inf clips to FLT_MAX, not inf
    x = np.array([[np.inf, -np.inf, 0.25, np.nan, -3.0, 3.0]], np.float32)
    inits, names = {}, ["x"]
    for key, bound in zip(("lo", "hi"), bounds):
        if bound is not None:
            inits[key] = np.array(bound, np.float32)
        names.append(key if bound is not None else "")
    while names[-1] == "":
        names.pop()
    model = make_model([helper.make_node("Clip", names, ["y"])], {"x": x}, ["y"], initializers=inits, opset=13)
    check_against_onnxruntime(model, {"x": x}, exact=True)


# ------------------------------------------------------------------------------------------
# odd but valid models, end to end through `ascendir run` vs onnxruntime
# ------------------------------------------------------------------------------------------
def _node(op: str, inputs: list[str], **attrs) -> onnx.NodeProto:
    return helper.make_node(op, inputs, ["y"], **attrs)


_RNG = np.random.default_rng(7)


def _f(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(np.float32)


_I64 = lambda *v: np.array(v, np.int64)  # noqa: E731

ODD_MODELS = {
    "matmul-33x47x65": ([_node("MatMul", ["a", "b"])], {"a": _f(33, 47), "b": _f(47, 65)}, {}),
    "matmul-batched-broadcast": ([_node("MatMul", ["a", "b"])], {"a": _f(2, 1, 17, 19), "b": _f(3, 19, 23)}, {}),
    "add-rank-mismatch": ([_node("Add", ["a", "b"])], {"a": _f(2, 3, 4, 5), "b": _f(4, 1)}, {}),
    "gather-negative-indices": (
        [_node("Gather", ["w", "i"], axis=1)], {"w": _f(4, 10, 3), "i": _I64(-1, 0, -10, 9, -3)}, {}),
    "softmax-3d-axis0": ([_node("Softmax", ["x"], axis=0)], {"x": _f(3, 5, 7)}, {}),
    "softmax-3d-axis1": ([_node("Softmax", ["x"], axis=1)], {"x": _f(3, 5, 7)}, {}),
    "reduce-mean-middle-axes": (
        [_node("ReduceMean", ["x", "ax"], keepdims=0)], {"x": _f(2, 3, 4, 5)}, {"ax": _I64(1, 2)}),
    "transpose-4d": ([_node("Transpose", ["x"], perm=[2, 0, 3, 1])], {"x": _f(2, 3, 5, 7)}, {}),
    "slice-steps": (
        [_node("Slice", ["x", "s", "e", "a", "st"])], {"x": _f(10, 12)},
        {"s": _I64(1, 0), "e": _I64(9, 12), "a": _I64(0, 1), "st": _I64(2, 3)}),
    "concat-3": ([_node("Concat", ["a", "b", "c"], axis=1)], {"a": _f(2, 3, 4), "b": _f(2, 5, 4), "c": _f(2, 1, 4)}, {}),
    "gemm-transA": ([_node("Gemm", ["a", "b", "c"], transA=1, alpha=0.5)], {"a": _f(47, 33), "b": _f(47, 65)}, {"c": _f(65)}),
}


@pytest.mark.parametrize("name", list(ODD_MODELS))
def test_odd_model_end_to_end(tmp_path: Path, name: str) -> None:
    from onnx_builders import run_onnxruntime

    nodes, inputs, inits = ODD_MODELS[name]
    model = make_model(nodes, inputs, ["y"], initializers=inits, opset=18)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    np.savez(tmp_path / "in.npz", **inputs)
    r = _run("run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert r.exit_code == 0, r.output
    want = run_onnxruntime(model, inputs)["y"]
    got = np.load(tmp_path / "o.npz")["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------------------------------------
# ONNX external data
# ------------------------------------------------------------------------------------------
def test_compile_a_model_with_external_data(tmp_path: Path) -> None:
    # WeightStore.save iterated its lazy entries while reading them: "dictionary changed size
    # during iteration" (an internal error) for every model with external data
    w = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": np.zeros((4, 64), np.float32)}, ["y"],
                       initializers={"w": w})
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.data", size_threshold=0)
    ir = tmp_path / "ext.mlir"
    r = _run("compile", path, "-o", ir)
    assert r.exit_code == 0, r.output
    x = np.linspace(-1, 1, 4 * 64, dtype=np.float32).reshape(4, 64)
    np.savez(tmp_path / "in.npz", x=x)
    r = _run("run", ir, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["y"], x @ w, rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------------------------------------
# IR files that are not text
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"\xff\xfe\x00", b"builtin.module {}\n\xff"])
def test_ir_that_is_not_utf8_is_one_line(capsys, tmp_path: Path, content: bytes) -> None:
    # a binary file given as IR used to be "internal error: UnicodeDecodeError" (exit 1) from
    # both tools
    bad = tmp_path / "bin.mlir"
    bad.write_bytes(content)
    pos = content.index(b"\xff")
    _clean_error(_run("run", bad, "--timing-only"), "bin.mlir", f"not UTF-8 text (byte 0xff at offset {pos})")
    out = tmp_path / "out.mlir"
    code, err = _opt(capsys, bad, "-p", "insert-sync", "-o", out)
    assert code == 2 and err.strip() == f"ascendir-opt: error: {bad}: not UTF-8 text (byte 0xff at offset {pos})", err
    assert not out.exists()


def test_run_lowered_ir_defaults_to_the_chip_it_was_lowered_for(tmp_path: Path) -> None:
    # `ascendir run x.mlir` took the default --target (910B2) and refused IR lowered for the 910A
    ir = tmp_path / "mlp_910a.mlir"
    _run("compile", MLP, "--target", "ascend910a", "--dtype", "fp16", "-o", ir)
    report = tmp_path / "r.json"
    _run("run", ir, "--timing-only", "--report", report)
    assert json.loads(report.read_text())["target"] == "ascend910a"
    _clean_error(_run("run", ir, "--timing-only", "--target", "ascend910b2"),
                 "was lowered for ascend910a (dav-c100), --target ascend910b2 is dav-c220")
