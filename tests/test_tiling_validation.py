"""Tiling fields are validated up front (>= 1, aligned) in every path that can set them —
`--tiling`, the choose-tiling pass option (CLI -p and ascendir-opt) and an IR `ascend.tiling`
attribute — with one line naming where the bad field came from, never an internal error."""

from __future__ import annotations

import subprocess
import sys

import pytest
from xdsl.parser import Parser

from ascendir.session import make_context
from ascendir.driver import lower, parse_pipeline, print_ir, run_passes
from ascendir.errors import AscendirError
from ascendir.conversion.nn_to_ascend.tiling import parse_tiling
from ascendir.weights import WeightStore
from cli_helpers import assert_clean_error, run_cli
from test_flash_attention import attention_ir
from test_lowering_matmul import matmul_text
from sampling import first_then_sampled

ATT = attention_ir(1, 2, 2, 64, 128, 64, 64, True)


def _fused_attention(tmp_path):
    src = tmp_path / "att.mlir"
    src.write_text(ATT)
    return src


@pytest.mark.parametrize("spec,why", first_then_sampled([
    ("br=0", "br=0 must be >= 1"),
    ("bc=0", "bc=0 must be >= 1"),
    ("br=-48", "br=-48 must be >= 1"),
    ("br=-64", "br=-64 must be >= 1"),
    ("m=0", "m=0 must be >= 1"),
    ("l1_depth=0", "l1_depth=0 must be >= 1"),
    ("split_k=-1", "split_k=-1 must be >= 1"),
    ("tail_split=-1", "tail_split=-1 must be >= 0"),  # 0 is allowed (none)
    ("swizzle=0", "swizzle=0 must be >= 1"),
    ("m=8", "m=8 is not aligned"),
    ("bc=40", "bc=40 is not aligned"),
    ("k=12", "k=12 is not aligned"),
    ("br=²", "bad entry 'br=²'"),  # str.isdigit() accepts it, int() does not
    ("m=1_024", "bad entry 'm=1_024'"),
], keep=2))
def test_bad_tiling_fields_fail_up_front_in_every_path(spec, why, tmp_path):
    src = _fused_attention(tmp_path)
    with pytest.raises(AscendirError, match=why):
        parse_tiling(spec)
    assert_clean_error(run_cli("compile", src, "-o", tmp_path / "o.mlir", "--tiling", spec), f"bad --tiling '{spec}'", why)
    assert not (tmp_path / "o.mlir").exists()
    assert_clean_error(run_cli("compile", src, "--emit", "nn", "-p", f'fuse-attention,choose-tiling{{tiling="{spec}"}}'),
                       f'bad choose-tiling option tiling="{spec}"', why)
    r = subprocess.run([sys.executable, "-m", "ascendir.api.opt", str(src), "-p", f'fuse-attention,choose-tiling{{tiling="{spec}"}}'],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == f'ascendir-opt: error: bad choose-tiling option tiling="{spec}": ' + r.stderr.split(": ", 3)[-1].strip()
    assert why in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("entry", ["br = 0 : i64", "bc = 0 : i64", "br = -48 : i64"])
def test_bad_attention_attribute_is_a_user_error(entry):
    module = Parser(make_context(), ATT).parse_module()
    run_passes(module, parse_pipeline("fuse-attention", "O0"))
    text = print_ir(module).replace("nn.attention %0, %1, %2 {", f"nn.attention %0, %1, %2 {{ascend.tiling = #ascend.tiling<{{{entry}}}>, ", 1)
    assert "ascend.tiling" in text
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(AscendirError, match=r"ascend\.tiling.*must be >= 1"):
        lower(module, WeightStore(), "ascend910b2")


def test_whitespace_is_ignored_around_keys_and_values():
    """Defined, not accidental: spaces around an entry, its key, `=` and its value all go."""
    assert parse_tiling("br= 64") == parse_tiling("br =64") == parse_tiling(" br = 64 ") == {"br": 64}
    assert parse_tiling("m=128, n = 64 ;br=16") == {"m": 128, "n": 64, "br": 16}
    with pytest.raises(AscendirError, match="bad entry 'm=1 28'"):
        parse_tiling("m=1 28")


def _mm_ir(tmp_path):
    src = tmp_path / "mm.mlir"
    src.write_text(matmul_text((64, 256), (256, 96), (64, 96), "f16"))
    return src


def test_custom_target_with_a_shipped_name_contradicts_that_chip(tmp_path):
    """A copy of ascend910b2.toml with smaller L1 / L0B keeps `name = "ascend910b2"`: comparing
    names let choose-tiling{target=ascend910b2} tile for the shipped chip under --target small.toml."""
    from pathlib import Path

    import ascendir.hardware.config as cfg

    text = (cfg.CHIPS / "ascend910b2.toml").read_text()
    small = tmp_path / "small.toml"
    small.write_text(text.replace("l1 = 524288", "l1 = 131072", 1).replace("l0b = 65536", "l0b = 16384", 1))
    src = _mm_ir(tmp_path)
    # main's load_target now refuses such a file outright; either way it must not tile for the shipped chip
    msg = assert_clean_error(run_cli("compile", src, "--emit", "nn", "--target", small, "-p", "choose-tiling{target=ascend910b2}"))
    assert (f"choose-tiling{{target=ascend910b2}} contradicts --target {small} (the same name, other parameters)" in msg
            or "give the chip a name of its own" in msg), msg
    # an identical copy is no contradiction
    same = tmp_path / "same.toml"
    same.write_text(text)
    assert run_cli("compile", src, "--emit", "nn", "--target", same, "-p", "choose-tiling{target=ascend910b2}").exit_code == 0


def test_tiling_on_lowered_ir_is_an_error(tmp_path):
    src = _mm_ir(tmp_path)
    low = tmp_path / "low.mlir"
    assert run_cli("compile", src, "-o", low).exit_code == 0
    for cmd in (("run", low, "--timing-only"), ("compile", low)):
        assert_clean_error(run_cli(*cmd, "--tiling", "m=0"), "already lowered", "--tiling")
        assert_clean_error(run_cli(*cmd, "--tiling", "m=32"), "already lowered", "--tiling (choose-tiling's fields) does not apply")
        assert_clean_error(run_cli(*cmd, "-p", "O2"), "already lowered", "-p (an nn-level pipeline) does not apply")


def test_tiling_flag_and_pass_option_conflict(tmp_path):
    src = _mm_ir(tmp_path)
    for cmd in (("run", src, "--timing-only"), ("compile", src, "--emit", "nn")):
        assert_clean_error(run_cli(*cmd, "-p", 'choose-tiling{tiling="m=16"}', "--tiling", "m=32"),
                           '--tiling m=32 conflicts with the pass option choose-tiling{tiling="m=16"}')
    # the pass option alone is obeyed, and its errors name the option, not --tiling
    out = run_cli("compile", src, "--emit", "nn", "-p", 'choose-tiling{tiling="m=16"}')
    assert out.exit_code == 0 and "m = 16 : i64" in out.output
    msg = assert_clean_error(run_cli("compile", src, "--emit", "nn", "-p", 'choose-tiling{tiling="m=4096"}'), "nn.matmul #0")
    msg = assert_clean_error(run_cli("compile", src, "--emit", "nn", "-p", 'choose-tiling{tiling="q=1"}'),
                             'bad choose-tiling option tiling="q=1"')
    assert "--tiling" not in msg
