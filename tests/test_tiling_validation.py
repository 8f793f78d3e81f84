"""Tiling fields are validated up front (>= 1, aligned) in every path that can set them —
`--tiling`, the choose-tiling pass option (CLI -p and ascendir-opt) and an IR `ascend.tiling`
attribute — with one line naming where the bad field came from, never an internal error."""

from __future__ import annotations

import subprocess
import sys

import pytest
from xdsl.parser import Parser

from ascendir.context import make_context
from ascendir.driver import lower, parse_pipeline, print_ir, run_passes
from ascendir.errors import AscendirError
from ascendir.transforms.choose_tiling import parse_tiling
from ascendir.weights import WeightStore
from cli_helpers import assert_clean_error, run_cli
from test_flash_attention import attention_ir
from test_lowering_matmul import matmul_text

ATT = attention_ir(1, 2, 2, 64, 128, 64, 64, True)


def _fused_attention(tmp_path):
    src = tmp_path / "att.mlir"
    src.write_text(ATT)
    return src


@pytest.mark.parametrize("spec,why", [
    ("br=0", "br=0 must be >= 1"),
    ("bc=0", "bc=0 must be >= 1"),
    ("br=-48", "br=-48 must be >= 1"),
    ("br=-64", "br=-64 must be >= 1"),
    ("m=0", "m=0 must be >= 1"),
    ("l1_depth=0", "l1_depth=0 must be >= 1"),
    ("split_k=-1", "split_k=-1 must be >= 1"),
    ("swizzle=0", "swizzle=0 must be >= 1"),
    ("m=8", "m=8 is not aligned"),
    ("bc=40", "bc=40 is not aligned"),
    ("k=12", "k=12 is not aligned"),
    ("br=²", "bad entry 'br=²'"),  # str.isdigit() accepts it, int() does not
    ("m=1_024", "bad entry 'm=1_024'"),
])
def test_bad_tiling_fields_fail_up_front_in_every_path(spec, why, tmp_path):
    src = _fused_attention(tmp_path)
    with pytest.raises(AscendirError, match=why):
        parse_tiling(spec)
    assert_clean_error(run_cli("compile", src, "-o", tmp_path / "o.mlir", "--tiling", spec), f"bad --tiling '{spec}'", why)
    assert not (tmp_path / "o.mlir").exists()
    assert_clean_error(run_cli("compile", src, "--emit", "nn", "-p", f'fuse-attention,choose-tiling{{tiling="{spec}"}}'),
                       f'bad choose-tiling option tiling="{spec}"', why)
    r = subprocess.run([sys.executable, "-m", "ascendir.opt", str(src), "-p", f'fuse-attention,choose-tiling{{tiling="{spec}"}}'],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == f'ascendir-opt: error: bad choose-tiling option tiling="{spec}": ' + r.stderr.split(": ", 3)[-1].strip()
    assert why in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("entry", ["br = 0 : i64", "bc = 0 : i64", "br = -48 : i64"])
def test_bad_attention_attribute_is_a_user_error(entry):
    module = Parser(make_context(), ATT).parse_module()
    run_passes(module, parse_pipeline("fuse-attention", "O0"))
    text = print_ir(module).replace("nn.attention %0, %1, %2 {", f"nn.attention %0, %1, %2 {{ascend.tiling = {{{entry}}}, ", 1)
    assert "ascend.tiling" in text
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(AscendirError, match=r"ascend.tiling of nn.attention.*must be >= 1"):
        lower(module, WeightStore(), "ascend910b2")


def test_whitespace_is_ignored_around_keys_and_values():
    """Defined, not accidental: spaces around an entry, its key, `=` and its value all go."""
    assert parse_tiling("br= 64") == parse_tiling("br =64") == parse_tiling(" br = 64 ") == {"br": 64}
    assert parse_tiling("m=128, n = 64 ;br=16") == {"m": 128, "n": 64, "br": 16}
    with pytest.raises(AscendirError, match="bad entry 'm=1 28'"):
        parse_tiling("m=1 28")
