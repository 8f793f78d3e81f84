"""Scalar runs (scalar_codegen `scalar_run`) write the ops of `_INLINE_BIN` and every arith.cmpi
predicate as Python expressions, and call a function only for the others: `_inline` finds them by
exact type (not isinstance, which runs Python code on xDSL's op classes). The values are checked
against SCALAR_OPS in test_interpreter_fastpaths.py; here, which ops are called."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block

from ascendir.interpreter.exec.compiler import Compiler, KernelInfo
from ascendir.interpreter.exec.scalar_codegen import _INLINE_BIN, _inline
from ascendir.interpreter.state import Frame

_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")


def _called(ops: list, b: Block) -> list[str]:
    """The globals of `ops`' generated run that are functions it calls (f<i>: not inlined)."""
    comp = Compiler(None, Frame(), KernelInfo("k", 1, None, {}, {}, 0.5, True))
    for a in b.args:
        comp.slot(a)
    b.add_ops(ops)
    (run,) = comp.block(b)
    return sorted(k for k in run.__globals__ if k.startswith("f"))


def test_inline_ops_are_written_inline():
    b = Block(arg_types=[IndexType(), IndexType()])
    x, y = b.args
    ops = [cls(x, y) for cls in _INLINE_BIN] + [arith.CmpiOp(x, y, p) for p in _PREDICATES]
    assert _called(ops, b) == []
    for op, p in zip(ops[len(_INLINE_BIN):], ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")):
        assert _inline(op) == "{0} %s {1}" % p


def test_other_ops_are_called():
    b = Block(arg_types=[IndexType(), IndexType()])
    x, y = b.args
    ops = [arith.DivSIOp(x, y), arith.AddiOp(x, y), arith.RemSIOp(x, y), arith.ShLIOp(x, y)]
    assert _called(ops, b) == ["f0", "f2", "f3"]
    assert [_inline(o) is None for o in ops] == [True, False, True, True]


def test_generated_source_is_each_line_indented_once():
    # `generated` joins the lines in one call: the source (its code cache's key, what is
    # compiled) is the head, then every line indented by four spaces and ended, as before
    from ascendir.interpreter.exec import scalar_codegen

    for lines, want in ((["return 1"], 1), (["x = 1", "if x:", "    x = 2", "return x"], 2)):
        scalar_codegen._RUN_CODE.clear()
        fn = scalar_codegen.generated("def f():", lines, {}, "f")
        assert list(scalar_codegen._RUN_CODE) == ["def f():\n" + "".join(f"    {ln}\n" for ln in lines)]
        assert fn() == want


def test_inlined_ops_make_no_function(monkeypatch):
    """An op written inline gets no SCALAR_OPS function made (its expression is it); a called
    op and a constant get theirs, once each."""
    from ascendir.interpreter.exec import scalar_codegen

    made: list = []
    table = dict(scalar_codegen.SCALAR_OPS)
    for cls, factory in list(table.items()):
        table[cls] = lambda op, f=factory: made.append(type(op)) or f(op)
    monkeypatch.setattr(scalar_codegen, "SCALAR_OPS", table)
    b = Block(arg_types=[IndexType(), IndexType()])
    x, y = b.args
    one = arith.ConstantOp.from_int_and_width(1, IndexType())
    ops = [one, arith.AddiOp(x, one.result), arith.CmpiOp(x, y, "slt"), arith.DivSIOp(x, y), arith.MuliOp(x, y)]
    assert _called(ops, b) == ["f3"]
    assert made == [arith.ConstantOp, arith.DivSIOp]
