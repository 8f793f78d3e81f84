"""A forced tiling is fit-checked at choose-tiling against everything its kernel allocates --
the epilogue's UB tiles too -- and a misfit's suggestion (`largest tile that fits: ...`) is a
spec that fits EVERY matmul the flag applies to: compiling with it succeeds."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from ascendir.session import make_context
from ascendir.dialects import ascend, nn
from ascendir.dialects.ascend import space_of
from ascendir.dtypes import to_numpy_dtype
from ascendir.hardware import load_target
from ascendir.transforms.nn.choose_tiling import ChooseTiling, tiled_sites
from ascendir.conversion.nn_to_ascend.tiling import Tiling, epilogue_ub_bytes, tiling_from_attr
from cli_helpers import assert_clean_error, run_cli
from lowering_harness import lower_text, parse, printed
from test_lowering_matmul import epilogue_text, fuse, kernels
from sampling import first_then_sampled

LLAMA = Path(__file__).parent / "data" / "llama_small" / "model.onnx"


def _ub_bytes(kernel, align: int = 32) -> int:
    """UB bytes of `kernel`'s allocs in its fullest AIV sub-block (each rounded to `align`)."""
    per: dict = {}
    for op in kernel.walk():
        if isinstance(op, ascend.AllocOp) and space_of(op.result.type).value == "ub":
            t = op.result.type
            n = math.prod(t.get_shape()) * np.dtype(to_numpy_dtype(t.element_type)).itemsize
            key = op.attributes.get("ascend.subblock")
            per[key] = per.get(key, 0) + -(-n // align) * align
    return max(per.values(), default=0)


@pytest.mark.parametrize("target,dt", [("ascend910b2", "f32"), ("ascend910b2", "f16"), ("ascend910a", "f16")])
@pytest.mark.parametrize("act,bias,residual", first_then_sampled([
    (None, False, False), ("relu", True, False), ("gelu", True, False), ("silu", False, True), ("gelu", True, True),
], keep=2))
def test_epilogue_ub_bytes_is_what_the_template_allocates(target, dt, act, bias, residual):
    text = fuse(epilogue_text(100, 64, 200, act, bias, dt, residual=residual))
    module = parse(text)
    ChooseTiling(target=target, tiling="m=64,n=128").apply(make_context(), module)
    (mm,) = [o for o in module.walk() if isinstance(o, nn.MatmulOp)]
    t = Tiling(**tiling_from_attr(mm.attributes["ascend.tiling"]))
    hw = load_target(target)
    (site,) = [s for _, _, s in tiled_sites(module, hw)]  # the matmul as the region's template plans it
    assert site.op is mm
    want = epilogue_ub_bytes(site.problem, t, hw)
    (k,) = [k for k in kernels(lower_text(printed(module), target)) if "reduce" not in k.sym_name.data]
    assert _ub_bytes(k) == want


def _suggestion(msg: str) -> str:
    return re.search(r"largest tile that fits: (\S+)$", msg).group(1)


@pytest.mark.sampled
@pytest.mark.parametrize("spec,why", [
    # the o_proj epilogue (residual, f32): 3 UB tiles of 128 x 256 f32; used to pass choose-tiling
    # and fail in lowering ("kernel matmul_epilogue_0 needs 262144 bytes of UB") with no buffer or hint
    ("m=128,n=256", "needs 393216 bytes of UB (the epilogue's output tiles), ascend910b2 has 196608"),
    ("m=4096,n=4096", "bytes of L1"),  # suggested m=128,n=256, which failed as above
    ("split_k=5", "needs a plain matmul for split_k = 5"),  # suggested split_k=4: "split-K needs a plain matmul"
])
def test_suggestion_fits_every_matmul(spec, why, tmp_path):
    msg = assert_clean_error(run_cli("compile", LLAMA, "-o", tmp_path / "x.mlir", "--tiling", spec), "error: nn.matmul #", why)
    fit = _suggestion(msg)
    assert set(k for k, _ in (kv.split("=") for kv in fit.split(","))) == set(k for k, _ in (kv.split("=") for kv in spec.split(",")))
    r = run_cli("compile", LLAMA, "-o", tmp_path / "y.mlir", "--tiling", fit)
    assert r.exit_code == 0, r.output


@pytest.mark.sampled
@pytest.mark.parametrize("spec", ["m=272", "l1_depth=13"])
def test_off_grid_forced_field_is_completed_around(spec, tmp_path):
    """m=272 / l1_depth=13 used to be completed with the template defaults (which overflow L0A /
    L1) and then suggest m=256 / l1_depth=12, which failed on matmul #4; the completion now takes
    the search grid's other fields around the forced one, and the model compiles as asked."""
    out = tmp_path / "x.mlir"
    r = run_cli("compile", LLAMA, "-o", tmp_path / "n.mlir", "--emit", "nn", "--tiling", spec)
    assert r.exit_code == 0, r.output
    key, val = spec.split("=")
    assert f"{key} = {val} : i64" in (tmp_path / "n.mlir").read_text()
    r = run_cli("compile", LLAMA, "-o", out, "--tiling", spec)
    assert r.exit_code == 0, r.output
