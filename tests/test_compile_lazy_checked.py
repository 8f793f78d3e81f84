"""A timing-only loop's checked values (scalar_codegen `checked_values`, steady.SteadyLoop.tops)
are generated at their first call, which hands the function its generated code: the values are
those of the checked ops evaluated one by one, at the first call and after it, and no slot is
made while the program runs."""

from __future__ import annotations

from ascendir.hardware import load_target
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.exec.scalar_codegen import _LAZY_TOPS, ScalarCodegen
from ascendir.interpreter.sim.chip import compile_module
from ascendir.interpreter.testing import matmul_ir, parse


def _compiled(monkeypatch) -> list:
    """(function, compiler, iv slot, checked ops) of every checked-values function of a
    timing-only GEMM's compile."""
    made = []
    orig = ScalarCodegen.checked_values

    def record(self, iv, checked):
        f = orig(self, iv, checked)
        made.append((f, self, iv, list(checked)))
        return f

    monkeypatch.setattr(ScalarCodegen, "checked_values", record)
    compile_module(parse(matmul_ir(512, 384, 1024, tm=128, tn=128, tk=128, block_dim=2)), load_target("ascend910b2"), timing_only=True)
    assert made
    return made


def _reference(comp, iv: int, checked: list, x: int) -> tuple:
    """The checked ops' values for iv x, each op's SCALAR_OPS function called in turn."""
    R = comp.F.values
    vals = {iv: x}
    for op in checked:
        args = [vals[s] if s in vals else R[s] for s in (comp.slot(v) for v in op.operands)]
        vals[comp.slot(op.results[0])] = SCALAR_OPS[type(op)](op)(*args)
    return tuple(vals[comp.slot(op.results[0])] for op in checked)


def test_checked_values_generated_at_first_call(monkeypatch):
    made = _compiled(monkeypatch)
    for f, comp, iv, checked in made:
        assert f.__code__ is _LAZY_TOPS  # nothing generated while compiling
        R = comp.F.values
        inside = {comp.slot(op.results[0]) for op in checked}
        for k, s in enumerate(sorted({comp.slot(v) for op in checked for v in op.operands} - inside - {iv})):
            R[s] = 3 + 2 * k  # the outside values the loop reads (nonzero: divisors)
        n = len(R)
        for j, x in enumerate((0, 5, 17)):
            assert f(x) == _reference(comp, iv, checked, x)
            assert f.__code__ is not _LAZY_TOPS  # the generated code, called directly from now on
        assert len(R) == n
