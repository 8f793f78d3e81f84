"""The ascend dialect's verifier rejects IR no chip can run (one line naming the kernel and the op),
so every path that verifies (IR text, ascendir-opt after each pass, the driver after lowering)
stops it before the interpreter compiles a kernel."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from ascendir.dialects import ascend
from ascendir.interpreter.testing import parse
from cli_helpers import assert_clean_error, run_cli

UB = "memref<16x32xf32, #ascend<space ub>>"
GM = "memref<32x32xf32, #ascend<space gm>>"
GM_ROWS = "memref<16x32xf32, strided<[32, 1], offset: ?>, #ascend<space gm>>"


def _sub(s: int) -> str:
    return f"{{subblock = {s} : i64}} " if s else ""


def mix_kernel(op_sub: int, buf_sub: int, via_subview: bool = False) -> str:
    """A 910B mix kernel whose AIV `op_sub` adds rows [0, 16) in %a and %b (AIV 0's UB) and rows
    [16, 32) in %c and %d (AIV 1's UB); its vadd writes %t, a buffer of AIV `buf_sub`. With
    `via_subview` the stray access is an AIV copy into a subview of that buffer instead."""
    t = f"    %t = ascend.alloc {_sub(buf_sub)}: {UB}"
    if via_subview:
        stray = (
            f"    %tv = memref.subview %t[0, 0] [8, 32] [1, 1] : {UB} to memref<8x32xf32, strided<[32, 1]>, #ascend<space ub>>\n"
            f"    %xv = memref.subview %x[0, 0] [8, 32] [1, 1] : {GM} to memref<8x32xf32, strided<[32, 1]>, #ascend<space gm>>\n"
            f"    ascend.copy %xv, %tv {_sub(op_sub)}: memref<8x32xf32, strided<[32, 1]>, #ascend<space gm>>, "
            "memref<8x32xf32, strided<[32, 1]>, #ascend<space ub>>"
        )
    else:
        own = "%c, %d" if op_sub else "%a, %b"
        stray = f"    ascend.vadd {own}, %t {_sub(op_sub)}: {UB}, {UB}, {UB}"
    return f"""builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">}} {{
  ascend.kernel @k(%x: {GM}, %y: {GM}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<mix>}} {{
    %a = ascend.alloc : {UB}
    %b = ascend.alloc : {UB}
    %c = ascend.alloc {{subblock = 1 : i64}} : {UB}
    %d = ascend.alloc {{subblock = 1 : i64}} : {UB}
{t}
    %c16 = arith.constant 16 : index
    %x0 = memref.subview %x[0, 0] [16, 32] [1, 1] : {GM} to {GM_ROWS}
    %x1 = memref.subview %x[%c16, 0] [16, 32] [1, 1] : {GM} to {GM_ROWS}
    ascend.copy %x0, %a : {GM_ROWS}, {UB}
    ascend.copy %x0, %b : {GM_ROWS}, {UB}
    ascend.copy %x1, %c {{subblock = 1 : i64}} : {GM_ROWS}, {UB}
    ascend.copy %x1, %d {{subblock = 1 : i64}} : {GM_ROWS}, {UB}
{stray}
    ascend.return
  }}
  func.func @main(%x: {GM}) -> {GM} {{
    %y = ascend.alloc : {GM}
    ascend.launch @k(%x, %y) : {GM}, {GM}
    func.return %y : {GM}
  }}
}}"""


@pytest.mark.parametrize(("op_sub", "buf_sub", "via_subview", "op"), [
    (1, 0, False, "ascend.vadd"),
    (0, 1, False, "ascend.vadd"),
    (1, 0, True, "ascend.copy"),
    (0, 1, True, "ascend.copy"),
])
def test_an_aiv_op_on_the_other_aivs_ub_fails_to_verify(op_sub: int, buf_sub: int, via_subview: bool, op: str) -> None:
    """Each AIV of a 910B group has its own UB: an op of AIV 1 cannot reach AIV 0's buffers, nor
    the reverse. The interpreter used to run such a kernel, with one UB array shared by both."""
    with pytest.raises((VerifyException, DiagnosticException)) as info:
        parse(mix_kernel(op_sub, buf_sub, via_subview))
    assert f"ascend.kernel @k: {op} on AIV {op_sub} uses a UB buffer of AIV {buf_sub} (%t: {UB})" in str(info.value)


def test_own_buffers_verify() -> None:
    for sub in (0, 1):
        parse(mix_kernel(sub, sub))
        parse(mix_kernel(sub, sub, via_subview=True))


def test_cli_reports_it_on_one_line(tmp_path: Path) -> None:
    ir = tmp_path / "k.mlir"
    ir.write_text(mix_kernel(1, 0))
    assert_clean_error(run_cli("run", ir, "--timing-only"), "IR fails to verify",
                       "ascend.kernel @k: ascend.vadd on AIV 1 uses a UB buffer of AIV 0 (%t: ")


def test_lowered_mix_kernels_keep_each_aiv_on_its_own_ub() -> None:
    """The templates that put work on AIV 1 (FlashAttention splits an item's rows over both AIVs)
    and the fused FFN's mix kernels verify; the check has AIV 1 ops to look at."""
    from test_ffn_template import gated_ir
    from test_flash_attention import attention_ir, compile_attention, kernels
    from xdsl.parser import Parser

    from ascendir.session import make_context
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.weights import WeightStore

    fa = compile_attention(attention_ir(1, 1, 1, 256, 512, 64, 64, False, dt="f16"), "ascend910b2")
    fa.verify()
    ops = [o for k in kernels(fa) for o in k.walk()]
    assert any(ascend.subblock(o) for o in ops if not isinstance(o, ascend.AllocOp))
    assert any(ascend.subblock(o) for o in ops if isinstance(o, ascend.AllocOp))

    ffn = Parser(make_context(), gated_ir(40, 64, 200)).parse_module()
    run_passes(ffn, parse_pipeline("fuse-ffn"))
    lower(ffn, WeightStore(), "ascend910b2")
    ffn.verify()
    assert any(k.core_type.data == "mix" for k in kernels(ffn))
