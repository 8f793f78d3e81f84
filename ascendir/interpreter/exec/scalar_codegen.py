"""Scalar ops (arith, index math) compiled in runs: consecutive scalar ops become one generated
Python function over the slots (`Compiler.scalar_run`), charged `startup.scalar_alu` cycles
each on the S pipe; `checked_values` evaluates a loop's checked scalar ops for the iterations
steady.py skips."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from types import CodeType, FunctionType
from xdsl.dialects import arith
from xdsl.ir import Operation
from ascendir.interpreter.exec.scalar import SCALAR_OPS, division_by_zero
from ascendir.interpreter.exec.walk import operands_of
from ascendir.interpreter.exec.common import Closure

# generated source of a scalar run, its slots renumbered (`_slot`) -> the code object of its
# function and where its renumbered slots are among its constants: (position, k) per slot
# constant (`generated`; runs of one shape share it across kernels and modules)
_RUN_CODE: dict[str, tuple[CodeType, tuple[tuple[int, int], ...]]] = {}
# a source's k-th distinct slot is written as the constant _SLOT_BASE + k (no slot is that large)
_SLOT_BASE = 1 << 48

# Scalar ops whose SCALAR_OPS function is exactly this Python expression on its operand values
# (`Compiler.scalar_run` writes them inline). min/max: the builtins return the first operand
# unless the second is strictly smaller/larger, which is what these conditionals do.
_INLINE_BIN: dict[type, str] = {
    arith.AddiOp: "{0} + {1}",
    arith.SubiOp: "{0} - {1}",
    arith.MuliOp: "{0} * {1}",
    arith.AndIOp: "{0} & {1}",
    arith.OrIOp: "{0} | {1}",
    arith.XOrIOp: "{0} ^ {1}",
    arith.MinSIOp: "{1} if {1} < {0} else {0}",
    arith.MinUIOp: "{1} if {1} < {0} else {0}",
    arith.MaxSIOp: "{1} if {1} > {0} else {0}",
    arith.MaxUIOp: "{1} if {1} > {0} else {0}",
    # a zero divisor raises scalar.division_by_zero, as scalar._div_check does
    arith.DivUIOp: "{0} // {1} if {1} else _divzero('arith.divui')",
    arith.RemUIOp: "{0} % {1} if {1} else _divzero('arith.remui')",
    arith.FloorDivSIOp: "{0} // {1} if {1} else _divzero('arith.floordivsi')",
    arith.CeilDivSIOp: "-((-{0}) // {1}) if {1} else _divzero('arith.ceildivsi')",
    arith.CeilDivUIOp: "-((-{0}) // {1}) if {1} else _divzero('arith.ceildivui')",
}

# arith.cmpi predicates eq ne slt sle sgt sge ult ule ugt uge (scalar._CMPI)
_CMPI_OPS = ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")

def _slot(slots: dict[int, int] | None, s: int) -> str:
    """Slot `s` in a generated source: R[_SLOT_BASE + k], s being the k-th slot of `slots`
    (slot -> k, filled in order of appearance); R[s] without `slots`."""
    if slots is None:
        return f"R[{s}]"
    return f"R[{_SLOT_BASE + slots.setdefault(s, len(slots))}]"


def generated(head: str, lines: list[str], env: dict, name: str, slots: dict[int, int] | None = None):
    """Function `name` defined by `head` and the body `lines`, with globals `env`; the lines
    write slots as `_slot(slots, s)` (without `slots`: as they are). The code generators of the
    interpreter share it: scalar runs here, the data walk's blocks (data_codegen.py), numerics
    subviews (memref_ops.py).

    Compiling costs far more than running (a layer's first run compiled ~1,100 sources, 0.3 s
    CPU), and most runs differ only in their slots: the source with renumbered slots is compiled
    once per shape, and each function gets that code with its own slots put back into the
    constants: the same bytecode as compiling its own source (a slot is a constant operand of
    the subscript either way)."""
    # (each line indented and ended as f"    {ln}\n" would: one C join instead of a generator)
    src = head + "\n    " + "\n    ".join(lines) + "\n" if lines else head + "\n"
    got = _RUN_CODE.get(src)
    if got is None:
        code = next(c for c in compile(src, "<scalar ops>", "exec").co_consts if isinstance(c, CodeType))
        # (found once per source: testing every constant of every function was a visible part of compiling)
        got = (code, tuple((j, c - _SLOT_BASE) for j, c in enumerate(code.co_consts) if type(c) is int and c >= _SLOT_BASE))
        if len(_RUN_CODE) < 4096:
            _RUN_CODE[src] = got
    code, at = got
    if slots:
        real = list(slots)  # renumbered slot k -> slot
        consts = list(code.co_consts)
        for j, k in at:
            consts[j] = real[k]
        code = code.replace(co_consts=tuple(consts))
    return FunctionType(code, env, name)

def charge_lines(s_ids) -> list[str]:
    """Lines of generated code charging one scalar ALU op (`alu` cycles, a name of the code's)
    on the S pipe slots `s_ids` of the core `F.core`, in `_charge_scalar`'s order: S pipe by S
    pipe, free then busy (the timed walk's closures that write their charge inline)."""
    lines = ["c = F.core", "free, busy = c.free, c.busy"]
    for x in s_ids:
        lines += [f"free[{x}] += alu", f"busy[{x}] += alu"]
    return lines


def _inline(op: Operation) -> str | None:
    """The inline expression template of a scalar op ({0}, {1}: operands), or None (call it).
    Looked up by exact type, as SCALAR_OPS is: isinstance on xDSL's op classes (ABCs) runs Python
    code, and was a fifth of generating the scalar lines of a kernel's compiles."""
    t = type(op)
    if t is arith.CmpiOp:
        return "{0} %s {1}" % _CMPI_OPS[op.predicate.value.data]
    return _INLINE_BIN.get(t)


class ScalarCodegen:
    """Compiler part: scalar op runs (mixed into compiler.Compiler)."""

    # -- scalar -----------------------------------------------------------------------------
    def _charge_scalar(self, op: Operation | None = None) -> Callable[[], None] | None:
        """A function charging one scalar ALU op on the S pipe of every unit running `op`
        (KernelInfo.s_ids: all units when `op` is None or unknown), or None (host)."""
        if self.k is None or self.k.data_only:
            return None
        F, alu = self.F, self.k.alu
        s_ids = self.k.s_ids(op)
        if len(s_ids) == 1:
            s = s_ids[0]

            def charge() -> None:
                c = F.core
                c.free[s] += alu
                c.busy[s] += alu

        elif len(s_ids) == 2:  # (a mix kernel's AIC and AIV: unrolled, the loop cost as much as the sums)
            s0, s1 = s_ids

            def charge() -> None:
                c = F.core
                free, busy = c.free, c.busy
                free[s0] += alu
                busy[s0] += alu
                free[s1] += alu
                busy[s1] += alu

        else:

            def charge() -> None:
                c = F.core
                free, busy = c.free, c.busy
                for s in s_ids:
                    free[s] += alu
                    busy[s] += alu

        return charge

    def scalar_run(self, ops: list[Operation]) -> Closure:
        """One closure running consecutive scalar ops (a loop body's index arithmetic), each
        charging `alu` cycles on the S pipe of each unit that runs it (`KernelInfo.s_ids`; constants
        charge nothing).

        Most closures of a timing-only loop body are these ops, so the closure is generated as
        straight-line Python: one call per run instead of one per op, values produced in the run
        passed on in locals (every result is still written to its slot), simple integer ops
        (`_inline`) written as Python expressions with exactly the semantics of their SCALAR_OPS
        function, the others called. The S clocks get the same additions in the same order as
        op-by-op charging (x + alu + alu + ... evaluates left to right), so they are bit-identical.
        """
        env: dict[str, object] = {"R": self.F.values, "F": self.F, "_divzero": division_by_zero}
        lines: list[str] = []
        slots: dict[int, int] = {}
        charged = self._scalar_lines(ops, env, lines, {}, slots)
        if self.k is not None and not self.k.data_only and charged:
            env["alu"] = self.k.alu
            lines.append("c = F.core")
            lines.append("free, busy = c.free, c.busy")
            # per S pipe the count of the run's ops its unit runs (mix kernels: scalar_units.py)
            counts: dict[int, int] = {}
            for op in charged:
                for s in self.k.s_ids(op):
                    counts[s] = counts.get(s, 0) + 1
            for s, n in sorted(counts.items()):
                add = " + alu" * n
                lines += [f"free[{s}] = free[{s}]{add}", f"busy[{s}] = busy[{s}]{add}"]
        return generated("def run() -> None:", lines, env, "run", slots)

    def _scalar_lines(self, ops: list[Operation], env: dict, lines: list[str], local: dict[int, str],
                      slots: dict[int, int] | None = None, store: bool = True, prefix: str = "") -> list[Operation]:
        """Append to `lines` the straight-line code of scalar ops (`scalar_run`): each result in
        local v<prefix><i> and (`store`) in its slot; operands from `local` (slot -> local name)
        or their slots (written `_slot(slots, s)`); `prefix` keeps the names of several runs in
        one function apart. Returns the ops that charge the S clock (all but constants)."""
        charged: list[Operation] = []
        slot, get = self.slot, local.get
        for i, op in enumerate(ops):
            # (local names are never empty; `_slot` numbers a slot at its first use, as before)
            args = [get(s) or _slot(slots, s) for s in map(slot, operands_of(op))]
            (res,) = op.results  # (every scalar op has one result; SSAValues' [0] is Python code)
            out = slot(res)
            if not args:  # a constant (no S charge: it is an immediate)
                env[f"c{prefix}{i}"] = SCALAR_OPS[type(op)](op)()
                expr = f"c{prefix}{i}"
            else:
                tmpl = _inline(op)
                if tmpl is not None:  # (its SCALAR_OPS function is not made: the expression is it)
                    expr = tmpl.format(*args)
                else:
                    env[f"f{prefix}{i}"] = SCALAR_OPS[type(op)](op)
                    expr = f"f{prefix}{i}({', '.join(args)})"
                charged.append(op)
            lines.append(f"v{prefix}{i} = {expr}")
            if store:
                lines.append(f"{_slot(slots, out)} = v{prefix}{i}")
            local[out] = f"v{prefix}{i}"
        return charged

    def checked_values(self, iv: int, checked: list[Operation]) -> Callable[[int], tuple]:
        """x -> the checked values of the iteration whose iv is x (steady.SteadyLoop.tops): the
        checked ops as generated straight-line code (`_scalar_lines`), without S charges (the
        body charges them when it runs the iteration) and without writing their slots: values
        defined in the body are read only by the body, which computes them again when it runs
        an iteration (and the values are memoised across executions anyway: steady.SteadyLoop.vals).

        Generated at the first call, which then gives the function its generated code (no call
        in between afterwards): most loops never ask for their checked values (on a 7B layer 65
        of 70 loops, 1,274 of 1,310 checked ops; generating them was ~45 ms of its compile).
        The slots it reads are given now: the frame's layout is fixed before the run."""
        slot = self.slot
        for op in checked:  # (in `_scalar_lines`' order)
            for v in operands_of(op):
                slot(v)
            (res,) = op.results
            slot(res)
        # `build` reaches `tops` and its globals through a weak reference: they hold `build`, and
        # a strong one would make a reference cycle (tops is alive: it is the caller)
        def build(x: int) -> tuple:
            fn = me()
            env = fn.__globals__
            lines: list[str] = []
            slots: dict[int, int] = {}
            self._scalar_lines(checked, env, lines, {iv: "x"}, slots, store=False)
            lines.append("return (" + "".join(f"v{i}, " for i in range(len(checked))) + ")")
            fn.__code__ = generated("def tops(x):", lines, env, "tops", slots).__code__
            return fn(x)

        tops = FunctionType(_LAZY_TOPS, {"R": self.F.values, "_divzero": division_by_zero, "_build": build}, "tops")
        me = weakref.ref(tops)
        return tops


# a checked-values function before its first call (`ScalarCodegen.checked_values`)
_LAZY_TOPS = next(c for c in compile("def tops(x):\n    return _build(x)\n", "<scalar ops>", "exec").co_consts if isinstance(c, CodeType))
