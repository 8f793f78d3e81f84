"""placement(op, arch): the unit and pipe of every ascend op class, the copy paths of each
architecture, and the interpreter's and insert-sync's answers agreeing with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import memref
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from ascendir.session import make_context
from ascendir.dialects import ascend
from ascendir.dialects.ascend import Ascend, MemSpace, Pipe
from ascendir.dialects.ascend.placement import (
    COPY_PATHS,
    Placement,
    Unit,
    copy_pipe,
    default_unit,
    pipe_unit,
    placement,
    space_unit,
)
from ascendir.interpreter.exec.common import unit_of
from ascendir.costmodel import space_unit as cost_space_unit
from ascendir.transforms.ascend.insert_sync import op_pipe, op_unit

LIT = Path(__file__).resolve().parent / "filecheck" / "dialects" / "ascend"
AIC, AIV = Unit.AIC, Unit.AIV

# (src, dst) of a copy -> where it runs on dav-c220
COPIES = {
    ("gm", "l1"): Placement(AIC, Pipe.MTE2),
    ("l1", "l0a"): Placement(AIC, Pipe.MTE1),
    ("l1", "l0b"): Placement(AIC, Pipe.MTE1),
    ("l0c", "gm"): Placement(AIC, Pipe.FIX),
    ("gm", "ub"): Placement(AIV, Pipe.MTE2),
    ("ub", "gm"): Placement(AIV, Pipe.MTE3),
}
# comm ops run on the SDMA engines (sim/comm.py), on no AI Core pipe
NO_PIPE = (ascend.KernelOp, ascend.ReturnOp, ascend.LaunchOp, ascend.BlockIdxOp, ascend.AllocOp, ascend.WeightOp, ascend.ViewOp,
           *ascend.COMM_OPS)


def expected(op) -> Placement | None:
    if isinstance(op, NO_PIPE):
        return None
    if isinstance(op, ascend.CopyOp):
        return COPIES[(ascend.space_of(op.source).value, ascend.space_of(op.dest).value)]
    if isinstance(op, ascend.MmadOp):
        return Placement(AIC, Pipe.M)
    if isinstance(op, ascend.GatherRowsOp):
        return Placement(AIV, Pipe.MTE2)
    if isinstance(op, ascend.GetValueOp):  # the scalar unit: every core has one
        return Placement(None, Pipe.S)
    if isinstance(op, ascend.VectorOp):
        return Placement(AIV, Pipe.V)
    if isinstance(op, (ascend.SetFlagOp, ascend.WaitFlagOp)):
        p = Pipe(op.src.data if isinstance(op, ascend.SetFlagOp) else op.dst.data)
        return Placement({Pipe.M: AIC, Pipe.MTE1: AIC, Pipe.FIX: AIC, Pipe.V: AIV}.get(p), p)
    if isinstance(op, ascend.PipeBarrierOp):
        return None if op.pipe.data == "ALL" else Placement({"V": AIV}.get(op.pipe.data), Pipe(op.pipe.data))
    raise AssertionError(f"no expected placement for {op.name}")


def _ops():
    ctx = make_context()
    for f in sorted(LIT.glob("roundtrip_*.mlir")):
        module = Parser(ctx, f.read_text(), f.name).parse_module()
        yield from (o for o in module.walk() if o.name.startswith("ascend."))


def test_every_ascend_op_class_is_placed() -> None:
    seen = set()
    for op in _ops():
        assert placement(op, "dav-c220") == expected(op), op.name
        seen.add(type(op))
    assert {op for op in Ascend.operations} <= seen, {o.name for o in Ascend.operations} - {o.name for o in seen}


def test_scalar_loads_and_stores_run_on_s_with_no_fixed_unit() -> None:
    ctx = make_context()
    module = Parser(ctx, """
builtin.module {
  ascend.kernel @k() attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %a = ascend.alloc : memref<4xf32, #ascend<space ub>>
    %i = arith.constant 0 : index
    %v = memref.load %a[%i] : memref<4xf32, #ascend<space ub>>
    memref.store %v, %a[%i] : memref<4xf32, #ascend<space ub>>
    ascend.return
  }
}""").parse_module()
    scalar = [o for o in module.walk() if isinstance(o, (memref.LoadOp, memref.StoreOp))]
    assert len(scalar) == 2 and all(placement(o) == Placement(None, Pipe.S) for o in scalar)
    # insert-sync places them as the interpreter does: the AIC
    assert all(op_pipe(o, None) == Pipe.S and op_unit(o, Pipe.S) == 0 for o in scalar)


@pytest.mark.parametrize("arch", sorted(COPY_PATHS))
def test_copy_paths_of_each_architecture(arch: str) -> None:
    for (src, dst), pipe in COPY_PATHS[arch].items():
        assert copy_pipe(src, dst, arch) == pipe
    coupled = arch != "dav-c220"  # dav-c100 / dav-m200: L0C leaves through UB, on the vector pipe
    assert ((MemSpace.L0C, MemSpace.UB) in COPY_PATHS[arch]) == coupled
    assert ((MemSpace.L0C, MemSpace.GM) in COPY_PATHS[arch]) != coupled
    with pytest.raises(VerifyException, match=f"no DMA path gm -> gm on {arch}"):
        copy_pipe(MemSpace.GM, MemSpace.GM, arch)


def test_copy_paths_of_any_architecture_when_none_is_named() -> None:
    assert copy_pipe(MemSpace.L0C, MemSpace.UB) == Pipe.V and copy_pipe(MemSpace.L0C, MemSpace.GM) == Pipe.FIX


def test_units_of_pipes_and_spaces() -> None:
    assert {p: pipe_unit(p) for p in Pipe} == {
        Pipe.S: None, Pipe.V: AIV, Pipe.M: AIC, Pipe.MTE1: AIC, Pipe.MTE2: None, Pipe.MTE3: None, Pipe.FIX: AIC,
    }
    assert {p: default_unit(p) for p in Pipe} == {
        Pipe.S: AIC, Pipe.V: AIV, Pipe.M: AIC, Pipe.MTE1: AIC, Pipe.MTE2: AIC, Pipe.MTE3: AIV, Pipe.FIX: AIC,
    }
    assert {s: space_unit(s) for s in MemSpace} == {
        MemSpace.GM: AIV, MemSpace.L1: AIC, MemSpace.L0A: AIC, MemSpace.L0B: AIC, MemSpace.L0C: AIC, MemSpace.UB: AIV,
        MemSpace.BT: AIC, MemSpace.FB: AIC,
    }


def test_the_interpreter_asks_placement() -> None:
    """compiler.unit_of and cost.space_unit (kept by name for their callers) give placement's answer."""
    for p in Pipe:
        for sub in (0, 1):
            assert unit_of(p.value, None, 3, sub) == (0 if default_unit(p) is AIC else 1 + sub)
            assert unit_of(p.value, "aic", 3, sub) == 0 and unit_of(p.value, "aiv", 3, sub) == 1 + sub
        assert unit_of(p.value, None, 1) == 0
    for s in MemSpace:
        assert cost_space_unit(s.value) == space_unit(s).value
