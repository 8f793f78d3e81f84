"""The data walk's blocks (KernelInfo.data_only, sim/kernel.py `_data_walk`) as generated Python.

A block of the data walk becomes one function: its scalar ops written inline (as `scalar_run`
writes them), scf.for as a Python `for` and scf.if as a Python `if`, each with the control
decision the race check takes first (race.py `RaceChecker.decide`: a loop's iterations, a
branch), and every other op a call of its closure (`Compiler.op`). Running a block is then one
call per tile op, flag or view instead of a closure per loop, branch and scalar run besides.
The data walk charges no clock, so a loop or branch there is nothing but its control flow and
its decision: what the closures of scf_ops.py do, in the same order. A region nested deeper
than MAX_NEST is left to those closures (its body generated again from depth 0): Python limits
the statically nested blocks of one function.
"""

from __future__ import annotations

import re

from xdsl.dialects import scf
from xdsl.ir import Block

from ascendir.dialects import ascend
from ascendir.dialects.ir_checks import loop_range
from ascendir.interpreter.exec.common import Closure, space_name
from ascendir.interpreter.exec.data_loop_memo import DataLoopMemo, plan, run_memos
from ascendir.interpreter.exec.scalar import SCALAR_OPS, division_by_zero
from ascendir.interpreter.exec.walk import operands_of
from ascendir.interpreter.exec.scalar_codegen import generated

MAX_NEST = 12  # scf.for / scf.if nested in one generated function (CPython: at most 20 loops)
CALL_LOOP = 4  # consecutive closures called in a loop over their tuple from this many on (`_data_lines`)


class DataCodegen:
    """Compiler part: the data walk's blocks as one generated function each (mixed into
    compiler.Compiler)."""

    # (slots of scalar results stored, slots other code reads) of the function being generated
    # (`_read_outside`); a region's function has its own while it is generated
    _slots_used: tuple[set[int], set[int]] | None = None
    _in_memo = 0  # loops with a memo (`_data_memo`) and runs (`_data_runs`) around the ops being generated

    def data_block(self, block: Block) -> Closure:
        """One function running the ops of `block` in order (a kernel body's or a region's) with
        the data walk's semantics; `Compiler.block` gives it for data-only kernels."""
        env: dict[str, object] = {"R": self.F.values, "F": self.F, "_divzero": division_by_zero, "_range": loop_range}
        # F.ctl (the race check's control decisions) and F.flags (the flag queues, cleared in
        # place per block) are set for the whole data walk (_data_walk)
        lines = ["ctl = F.ctl", "Q = F.flags.queues"]
        outer, self._slots_used = self._slots_used, (set(), set())
        try:
            self._data_lines(block, env, lines, {}, 0, [0])
            if isinstance(block.last_op, scf.YieldOp):  # (a region's: its loop or branch closure copies them, scf_ops.py)
                self._read_outside([block.last_op])
            results, read = self._slots_used
        finally:
            self._slots_used = outer
        return generated("def run() -> None:", _unread_stores_dropped(lines, results, read), env, "run")

    def _read_outside(self, ops) -> None:
        """Note the slots of the operands of `ops` as read by other code than the function being
        generated (closures, loop memos, yields' copies): their scalar results are stored."""
        read, get = self._slots_used[1], self._ids.get
        for o in ops:
            for v in operands_of(o):
                s = get(id(v))
                if s is not None:  # (a value without a slot yet is defined inside `ops`)
                    read.add(s)

    def _data_lines(self, block: Block, env: dict, lines: list[str], local: dict[int, str], nest: int, n: list[int],
                    part: list | None = None) -> None:
        """Append the code of the ops of `block` (but its scf.yield) at nesting `nest`; `local`: slot
        -> the local holding its value (scalar results and induction variables in scope); `n`:
        the counter naming locals and closures; `part`: those ops of `block` only (a run a memo
        replays, `_data_runs`)."""
        pad = "    " * nest
        run: list = []
        calls: list = []  # closures of consecutive ops, not yet written
        flags: list = []  # `data_flag`s of consecutive flag ops, not yet written

        def flush() -> None:
            if flags:
                _flag_lines(flags, self.data_flag_fns(), env, lines, pad, f"g{n[0]}")
                n[0] += 1
                flags.clear()
            if calls:
                name = f"o{n[0]}"
                n[0] += 1
                if len(calls) < CALL_LOOP:
                    for j, c in enumerate(calls):
                        env[f"{name}_{j}"] = c
                        lines.append(f"{pad}{name}_{j}()")
                else:  # (one loop: compiling a line per call was a quarter of a data walk's compile)
                    env[name] = tuple(calls)
                    lines.extend((f"{pad}for o in {name}:", f"{pad}    o()"))
                calls.clear()
            if run:
                body: list[str] = []
                self._scalar_lines(run, env, body, local, prefix=f"s{n[0]}_")
                self._slots_used[0].update(self.slot(o.results[0]) for o in run)
                n[0] += 1
                lines.extend(pad + x for x in body)
                run.clear()

        tree = self.k.tree
        ops = part if part is not None else tree.block_ops(block) if tree is not None else list(block.ops)
        runs = self._data_runs(ops, nest) if part is None else {}
        i = -1
        while i + 1 < len(ops):
            i += 1
            op = ops[i]
            if i in runs:  # (data_loop_memo.py `run_memos`: a stored execution of the run applied, else it runs and is stored)
                flush()
                end, memo = runs[i]
                k = n[0]
                n[0] += 1
                env[f"M{k}"] = memo
                lines.append(f"{pad}if not M{k}.replay():")
                lines.append(f"{pad}    t{k} = M{k}.start()")
                self._in_memo += 1  # (no runs inside a run: its replays skip them)
                try:
                    self._data_lines(block, env, lines, dict(local), nest + 1, n, ops[i:end])
                finally:
                    self._in_memo -= 1
                lines.append(f"{pad}    M{k}.stop(t{k})")
                i = end - 1
                continue
            t = type(op)
            if t in SCALAR_OPS:
                if calls or flags:
                    flush()
                run.append(op)
                continue
            if t in _FLAGS:
                if calls or run:
                    flush()
                flags.append(self.data_flag(op))
                continue
            if run or flags:
                flush()
            if t is scf.YieldOp:
                continue
            if t is scf.ForOp and nest < MAX_NEST:
                flush()
                self._data_for(op, env, lines, dict(local), nest, n)
            elif t is scf.IfOp and nest < MAX_NEST:
                flush()
                self._data_if(op, env, lines, dict(local), nest, n)
            else:
                c = self.op(op)
                if c is not None:
                    calls.append(c)
                self._read_outside((tree.walk(op) if tree is not None else list(op.walk())) if op.regions else (op,))
        flush()

    def _data_for(self, op: scf.ForOp, env: dict, lines: list[str], local: dict[int, str], nest: int, n: list[int]) -> None:
        """scf.for: its range (loop_range's errors), then the iterations, each decided (True;
        False at the end: scf_ops.py `_iteration_decided` says why): the induction variable and
        the carried values in their slots, the body, the yielded values carried (all read before
        any is written). A deferred kernel's K loop runs through its memo (data_loop_memo.py): a
        stored execution applied, else the loop run and stored."""
        pad = "    " * nest
        k = n[0]
        n[0] += 1

        def val(v) -> str:
            return _value(local, self.slot(v))

        lb, ub, st, *inits = operands_of(op)  # (xDSL's fields: its named accessors are chains of Python calls)
        body = op.regions[0].block
        iv = self.slot(body.args[0])
        carried = [self.slot(a) for a in body.args[1:]]
        lines.append(f"{pad}r{k} = _range({val(lb)}, {val(ub)}, {val(st)})")
        for c, v in zip(carried, inits):
            lines.append(f"{pad}R[{c}] = {val(v)}")
        memo = self._data_memo(op, nest)
        fpad, fnest = pad, nest
        if memo is not None:  # (data_loop_memo.py: a stored execution applied, else the loop run and stored)
            env[f"M{k}"] = memo
            lines.append(f"{pad}if not M{k}.replay():")
            lines.append(f"{pad}    t{k} = M{k}.start()")
            fpad, fnest = pad + "    ", nest + 1
        lines.append(f"{fpad}for i{k} in r{k}:")
        lines.append(f"{fpad}    if ctl is not None:")
        lines.append(f"{fpad}        ctl.decide(True)")
        lines.append(f"{fpad}    R[{iv}] = i{k}")
        local[iv] = f"i{k}"
        self._in_memo += memo is not None
        try:
            self._data_lines(body, env, lines, local, fnest + 1, n)
        finally:
            self._in_memo -= memo is not None
        if memo is not None:
            lines.append(f"{pad}    M{k}.stop(t{k})")
        if carried:
            ys = [self.slot(v) for v in body.last_op.operands] if isinstance(body.last_op, scf.YieldOp) else []
            self._read_outside([body.last_op])
            pairs = list(zip(carried, ys))
            if pairs:
                lines.append(f"{pad}    {_assign(pairs)}")
            for r, c in zip((self.slot(x) for x in op.results), carried):
                lines.append(f"{pad}R[{r}] = R[{c}]")
        lines.append(f"{pad}if ctl is not None:")
        lines.append(f"{pad}    ctl.decide(False)")

    def _data_runs(self, ops: list, nest: int) -> dict:
        """The runs of `ops` (a block's) a memo replays whole (data_loop_memo.py `run_memos`):
        first index -> (index past the last, its DataLoopMemo); none outside a deferred kernel,
        past MAX_NEST - 1 (a run adds a block) and inside a loop or run with a memo of its own
        (whose replays skip the runs)."""
        if self.F.cube is None or nest >= MAX_NEST - 1 or self.k.tree is None or self._in_memo:
            return {}
        tree = self.k.tree
        out = {}
        for i, j, planned in run_memos(ops, tree):
            self._read_outside(tree.ops[tree.span(ops[i])[0]:tree.span(ops[j - 1])[1]])  # (the memo reads the run's outside values from their slots)
            out[i] = (j, DataLoopMemo(self.F, self.slot, planned, self._chip_slots()))
        return out

    def _data_memo(self, op: scf.ForOp, nest: int) -> DataLoopMemo | None:
        """The memo of a K loop of a deferred kernel's data walk (data_loop_memo.py), None for any
        other loop and past MAX_NEST - 1 (it adds a block). (A memo whose loop runs inside a loop
        being stored neither applies nor stores: `DataLoopMemo.replay`, `start`.)"""
        if self.F.cube is None or nest >= MAX_NEST - 1 or self.k.tree is None:
            return None
        planned = plan(op, self.k.tree)
        if planned is None:
            return None
        self._read_outside(self.k.tree.walk(op))  # (the memo reads the loop's outside values from their slots)
        return DataLoopMemo(self.F, self.slot, planned, self._chip_slots())

    def _chip_slots(self) -> list[int]:
        """The slots of the kernel's on-chip buffers (its allocs outside GM): a memo's stored
        executions name their on-chip views by these (DataLoopMemo `chips`)."""
        return [self.slot(o.result) for o in self.k.tree.ops if type(o) is ascend.AllocOp and space_name(o.result.type) != "gm"]

    def _data_if(self, op: scf.IfOp, env: dict, lines: list[str], local: dict[int, str], nest: int, n: list[int]) -> None:
        """scf.if: its branch decided, the branch's ops, its yielded values into the results."""
        pad = "    " * nest
        k = n[0]
        n[0] += 1
        (cond,) = operands_of(op)  # (xDSL's fields, as in `_data_for`)
        lines.append(f"{pad}b{k} = {_value(local, self.slot(cond))}")
        lines.append(f"{pad}if ctl is not None:")
        lines.append(f"{pad}    ctl.decide(bool(b{k}))")
        results = [self.slot(r) for r in op.results]
        then_r, else_r = op.regions
        for head, region in ((f"{pad}if b{k}:", then_r), (f"{pad}else:", else_r)):
            lines.append(head)
            start = len(lines)
            if region._first_block is not None:
                b = region.block
                self._data_lines(b, env, lines, dict(local), nest + 1, n)
                y = b._last_op
                ys = [self.slot(v) for v in operands_of(y)] if isinstance(y, scf.YieldOp) else []
                self._read_outside([y])
                pairs = list(zip(results, ys))
                if pairs:
                    lines.append(f"{pad}    {_assign(pairs)}")
            if len(lines) == start:
                lines.append(f"{pad}    pass")


_FLAGS = (ascend.SetFlagOp, ascend.WaitFlagOp)


def _flag_lines(flags: list, fns: tuple, env: dict, lines: list[str], pad: str, name: str) -> None:
    """Append the code of consecutive flag ops (`flags`: SyncOps.data_flag of each, in order): on
    the common path (no held pipe, no race check: `F.slow_path` false) with enough pending sets
    for each wait, only what they leave in the queues (`Q`), as counts (the data walk's sets
    carry no time): a set followed by its wait (most of a software pipeline's flags) leaves
    nothing; else each op's function (`fns`: SyncOps.data_flag_fns), in order. ~1,750 flag ops a block
    of the 7B layer's FlashAttention ran as ~0.25 us closures each."""
    fs, fw = fns
    run = tuple((is_set, args[1]) for is_set, args in flags)
    got = _FLAG_RUNS.get(run)
    if got is None:
        need: dict[int, int] = {}  # key -> pending sets the run's waits need before it
        net: dict[int, int] = {}  # key -> sets minus waits of the run
        for is_set, k in run:
            b = net[k] = net.get(k, 0) + (1 if is_set else -1)
            if -b > need.get(k, 0):
                need[k] = -b
        moves = [f"Q[{k}].append(0.0)" for k, c in net.items() for _ in range(c)]
        moves += [f"Q[{k}].popleft()" for k, c in net.items() for _ in range(-c)]
        got = "".join(f" or len(Q[{k}]) < {c}" for k, c in need.items()), tuple(moves)
        if len(_FLAG_RUNS) < 4096:
            _FLAG_RUNS[run] = got
    short, moves = got
    env[name] = tuple((fs if is_set else fw, args) for is_set, args in flags)
    lines.append(f"{pad}if F.slow_path{short}:")
    lines.append(f"{pad}    for f, a in {name}:")
    lines.append(f"{pad}        f(*a)")
    if moves:
        lines.append(f"{pad}else:")
        lines.extend(f"{pad}    {m}" for m in moves)


# (set?, key) per op of a flag run -> (`_flag_lines`' condition, its moves): the runs of an unrolled
# pipeline repeat
_FLAG_RUNS: dict[tuple, tuple[str, tuple[str, ...]]] = {}


_STORE = re.compile(r" *R\[(\d+)\] = v\w+")


def _unread_stores_dropped(lines: list[str], results: set[int], read: set[int]) -> list[str]:
    """`lines` without the stores of scalar results (`results`: their slots) that nothing but the
    generated function reads, which reads them from locals (`read`: the slots other code reads).
    A fifth of a data walk's block was such stores: they cost compiling and running it."""
    out = []
    for ln in lines:
        m = _STORE.fullmatch(ln)
        if m is None or int(m.group(1)) not in results or int(m.group(1)) in read:
            out.append(ln)
    return out


def _value(local: dict[int, str], s: int) -> str:
    """The expression of slot `s`'s value: the local holding it, else the slot."""
    return local.get(s, f"R[{s}]")


def _assign(pairs: list[tuple[int, int]]) -> str:
    """The statement copying slot y into slot x for every (x, y) of `pairs`, all read first."""
    return f"{', '.join(f'R[{x}]' for x, _ in pairs)} = {', '.join(f'R[{y}]' for _, y in pairs)}"
