"""The xDSL context with every dialect ascendir reads and writes."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.dialects.memref import MemRef
from xdsl.dialects.scf import Scf

from ascendir.dialects.ascend import Ascend
from ascendir.dialects.nn import NN

DIALECTS = (Builtin, Func, Arith, Scf, MemRef, NN, Ascend)


def make_context() -> Context:
    """A fresh context with builtin, func, arith, scf, memref, nn and ascend loaded."""
    ctx = Context()
    for d in DIALECTS:
        ctx.load_dialect(d)
    return ctx
