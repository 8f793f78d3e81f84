"""scf.for and scf.if. A timing-only loop that steady.uniform_loop accepts runs through the
accelerated loop driver (accel/loop_driver.py) when `Accel.steady` is on."""

from __future__ import annotations

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, IntegerAttr, IntegerType, MemRefType
from ascendir.interpreter.accel import Accel
from ascendir.interpreter.accel.remap import Remap, address_plan
from ascendir.interpreter.accel.loop_memo import LoopMemo, memo_inputs, never_again
from ascendir.interpreter.accel.steady import uniform_loop
from ascendir.dialects import ascend
from ascendir.interpreter.timing.timeline import NPIPES
from ascendir.interpreter.accel.xblock import BlockMemo
from ascendir.interpreter.accel.loop_driver import calls
from ascendir.dialects.ir_checks import loop_range
from ascendir.interpreter.exec.common import Closure, KernelInfo
from ascendir.interpreter.exec.walk import operands_of
from ascendir.interpreter.exec.scalar_codegen import charge_lines, generated
from ascendir.interpreter.exec.sync_ops import flag_slots

class ScfOps:
    """Compiler part: structured control flow (mixed into compiler.Compiler)."""

    # -- regions ----------------------------------------------------------------------------
    def for_(self, op: scf.ForOp) -> Closure:
        R = self.F.values
        # (xDSL's fields: each named accessor is a chain of Python calls, walk.py `operands_of`)
        lb, ub, st, *init_vals = operands_of(op)
        lb, ub, st = self.slot(lb), self.slot(ub), self.slot(st)
        body_block = op.regions[0].block
        iv = self.slot(body_block.args[0])
        carried = [self.slot(a) for a in body_block.args[1:]]
        inits = [self.slot(v) for v in init_vals]
        results = [self.slot(r) for r in op.results]
        body = self.block(body_block)
        if self.k is not None and self.k.data_only:
            body = [self._iteration_decided(), *body]
        yields = [self.slot(v) for v in body_block.last_op.operands] if isinstance(body_block.last_op, scf.YieldOp) else []
        charge = self._charge_scalar(op)
        acc = self.m.accel if self.m is not None else Accel()  # (unit tests compile without a module)
        checked = uniform_loop(op, self.k.tree) if not carried and self.k is not None and self.k.timing_only and acc.steady else None
        if checked is not None:
            ctrl, addr, copies = memo_inputs(op, self.k.tree)
            memo = LoopMemo([self.slot(v) for v in ctrl], [self.slot(v) for v in addr],
                            {id(c): (self.slot(src), dims) for c, (src, dims) in copies.items()}, self.k.flag_keys, NPIPES,
                            [("dynamic" if DYNAMIC_INDEX in v.type.get_shape() else "static") if isinstance(v.type, MemRefType) else False
                             for v in ctrl], never_again(op, ctrl), *loop_units(op, self.k))
            self.F.memos.append(memo)
            plan = address_plan(op, checked, self.k.tree)
            gen = Remap(plan, self.slot) if plan is not None and acc.remap else None
            bm = None
            steps = len(checked)
            if gen is not None and acc.xblock and acc.loop_memo:
                more = BlockMemo.hoisted(op, checked, self.k.tree)
                xplan = BlockMemo.plan(op, checked + more, ctrl + addr, plan, self.k.tree)
                if xplan is not None:
                    xctrl, moves = xplan
                    bm = BlockMemo([(self.slot(v), isinstance(v.type, MemRefType)) for v in xctrl], gen, moves.compile(self.slot),
                                   list(range(steps, steps + len(more))))
                    self.F.memos.append(bm)
                    checked = checked + more  # (evaluated per iteration with the checked values, never step-tested)
            return self._steady_for(lb, ub, st, iv, body, charge, checked, memo, gen, bm, acc.loop_memo, steps, _constant_range(op),
                                    self.k.s_ids(op), in_bounds(op, checked[:steps], self.k.tree, self.slot, R))
        if not carried:

            def run() -> None:
                for i in loop_range(R[lb], R[ub], R[st]):
                    R[iv] = i
                    for f in body:
                        f()
                    if charge is not None:
                        charge()

            return self._decided(run)

        pairs_init = list(zip(carried, inits))
        pairs_yield = list(zip(carried, yields))
        pairs_res = list(zip(results, carried))

        def run_iter() -> None:
            for c, v in pairs_init:
                R[c] = R[v]
            for i in loop_range(R[lb], R[ub], R[st]):
                R[iv] = i
                for f in body:
                    f()
                vals = [R[y] for _, y in pairs_yield]
                for (c, _), v in zip(pairs_yield, vals):
                    R[c] = v
                if charge is not None:
                    charge()
            for r, c in pairs_res:
                R[r] = R[c]

        return self._decided(run_iter)

    def _iteration_decided(self) -> Closure:
        """The first closure of a data-walk loop's body: an iteration starts, a control decision
        (race.py `RaceChecker.decide`: True per iteration, False at the loop's end, `_decided`).
        Decided so rather than by the trip count at the start, a block whose loop runs fewer
        iterations than its checked block's keeps its decisions, and runs cheaply, to the end of
        its own (the last wave's tiles of a GEMM)."""
        F = self.F

        def iteration() -> None:
            c = F.ctl
            if c is not None:
                c.decide(True)

        return iteration

    def _decided(self, run: Closure) -> Closure:
        """An scf.for of the data walk (its body led by `_iteration_decided`): the loop's end
        given to the race check after it; other walks: `run`."""
        if self.k is None or not self.k.data_only:
            return run
        F = self.F

        def decided() -> None:
            run()
            c = F.ctl
            if c is not None:
                c.decide(False)

        return decided

    def if_(self, op: scf.IfOp) -> Closure:
        R = self.F.values
        (cond,) = operands_of(op)  # (xDSL's fields, as in `for_`)
        cond = self.slot(cond)
        results = [self.slot(r) for r in op.results]

        def branch(region) -> tuple[list[Closure], list[int]]:
            if region._first_block is None:
                return [], []
            b = region.block
            body = self.block(b)
            y = b._last_op
            ys = [self.slot(v) for v in operands_of(y)] if isinstance(y, scf.YieldOp) else []
            return body, ys

        then_r, else_r = op.regions
        then_body, then_y = branch(then_r)
        else_body, else_y = branch(else_r)
        charge = self._charge_scalar(op)
        F = self.F
        data = self.k is not None and self.k.data_only  # its branch given to the race check (race.py `decide`)
        if not results and not data and charge is not None:  # a kernel's timed walk (hot): no tests but the branch
            return _timed_if(R, F, cond, then_body, else_body, self.k.s_ids(op), self.k.alu)

        def run() -> None:
            if data and F.ctl is not None:
                F.ctl.decide(bool(R[cond]))
            if R[cond]:
                body, ys = then_body, then_y
            else:
                body, ys = else_body, else_y
            for f in body:
                f()
            if results:
                vals = [R[y] for y in ys]
                for r, v in zip(results, vals):
                    R[r] = v
            if charge is not None:
                charge()

        return run


def loop_units(op: scf.ForOp, k: KernelInfo) -> tuple[list[int] | None, list[int] | None]:
    """The units of a mix kernel whose clocks running the timing-only loop `op` can read or move,
    and the flag keys (queues) it can set or wait on, for `LoopMemo`'s key: (sorted unit indices,
    sorted flag keys), or (None, None) when that is every unit or not known. A unit is used by
    an op of the loop (the loop itself for its scalar charge) that runs on it: a flag op on both
    its ends, a tile op of a static pipe on its unit (`KernelInfo.op_units`), a scalar op on the
    units `KernelInfo.scalar_units` gives it (its S charges: `s_ids`). Any other op (a tile op
    of a run-time pipe, a pipe_barrier, a scalar op no unit needs, charged to every unit) may
    use any unit: then every unit. `k`: the kernel's KernelInfo, its flag keys filled by the
    compile of the loop's body."""
    if k.nunits == 1:
        return None, None
    every = (1 << k.nunits) - 1
    mask = 0
    keys = []
    fixed, scalar = k.op_units, k.scalar_units
    for o in (op, *k.tree.walk(op)):
        m = fixed.get(o)
        if m is None:
            units = scalar.get(o)
            if units is None:
                if type(o) is scf.YieldOp:  # (no charge: the loop's or branch's own charge counts it)
                    continue
                return None, None
            m = sum(1 << u for u in units)
        elif isinstance(o, ascend.FlagOp):
            keys.append(flag_slots(k, o)[2])
        mask |= m
        if mask == every:
            return None, None
    return [u for u in range(k.nunits) if mask >> u & 1], sorted(set(keys))


def in_bounds(op: scf.ForOp, checked: list, tree, slot, R: list):
    """fn(iv value, checked values of that iteration) -> whether every GM subview of the loop's
    body (or of its scf.if regions) whose offsets or sizes move with the iv is in bounds in that
    iteration, as the subview's own check (memref_ops) would find; None when the loop has none.
    For the iterations a steady jump skips (SteadyLoop.inb), whose subviews never run: a jump
    stops short of an iteration that would raise, so the run reaches it and raises as the walk of
    every op does. A subview under a branch not taken counts too: the jump is then refused, not
    wrong. `checked`: the loop's checked ops (steady.uniform_loop), in the order of the values;
    offsets, sizes and strides are the iv, checked values, constants or values from outside the
    loop (others: that subview is left out, as before)."""
    body = op.body.block
    iv = body.args[0]
    pos = inside = None
    plans = []
    for o in tree.walk(op):
        if type(o) is not memref.SubviewOp:
            continue
        b = o.parent  # at loop level: in the body or in its scf.if regions, not in an inner loop
        while b is not body:
            p = b.parent_op()
            if type(p) is not scf.IfOp:
                break
            b = p.parent
        if b is not body:
            continue
        if inside is None:  # (built for loops that have such a subview only)
            inside = tree.defined(op)
            pos = {id(c.results[0]): i for i, c in enumerate(checked)}
        sv = tree.subview(o)
        if not sv.gm or id(sv.source) in inside:
            continue
        dims, moves = [], False
        for statics, dyn in ((sv.static_offsets, sv.offsets), (sv.static_sizes, sv.sizes), (sv.static_strides, sv.strides)):
            it = iter(dyn)
            spec = []
            for x in statics:
                if x != DYNAMIC_INDEX:
                    spec.append((0, x))
                    continue
                v = next(it)
                if v is iv:
                    spec.append((2, 0))
                    moves = True
                elif id(v) in pos:
                    spec.append((3, pos[id(v)]))
                    moves = True
                elif id(v) not in inside or type(v.owner) is arith.ConstantOp:
                    spec.append((1, slot(v)))
                else:
                    spec = None
                    break
            if spec is None:
                break
            dims.append(spec)
        else:
            if moves:
                plans.append((slot(sv.source), list(zip(*dims))))
    if not plans:
        return None

    def ok(i: int, vals: tuple) -> bool:
        for src, spec in plans:
            shape = R[src].shape
            for d, ((ko, o), (ks, s), (kt, t)) in enumerate(spec):
                o = o if ko == 0 else R[o] if ko == 1 else i if ko == 2 else vals[o]
                s = s if ks == 0 else R[s] if ks == 1 else i if ks == 2 else vals[s]
                t = t if kt == 0 else R[t] if kt == 1 else i if kt == 2 else vals[t]
                if o < 0 or s < 0 or t < 1 or (s > 0 and o + (s - 1) * t >= shape[d]):
                    return False
        return True

    return ok


def _constant_range(op: scf.ForOp) -> range | None:
    """The induction values of `op` when its bounds and step are integer constants (a step that
    is not positive left to `loop_range`'s error at run time), else None."""
    vals = []
    for v in (op.lb, op.ub, op.step):
        c = v.owner
        if type(c) is not arith.ConstantOp or not isinstance(c.value, IntegerAttr) or isinstance(c.value.type, IntegerType) and c.value.type.width.data == 1:
            return None
        vals.append(c.value.value.data)
    return range(*vals) if vals[2] > 0 else None


def _timed_if(R: list, F, cond: int, then_body: list[Closure], else_body: list[Closure], s_ids: list[int], alu: float) -> Closure:
    """A timed scf.if without results (a kernel's walk that charges clocks) as generated code:
    the closures of the branch its condition picks called in order (loop_driver.calls), then
    the scalar charge on the S pipes `s_ids` written inline, in `_charge_scalar`'s order. Its
    code is shared per branch lengths and S pipes."""
    args: dict = {"R": R, "F": F, "cond": cond, "alu": alu}
    lines = ["if R[cond]:", *["    " + x for x in calls(then_body, "t", args)], "else:", *["    " + x for x in calls(else_body, "e", args)],
             *charge_lines(s_ids)]
    make = generated(f"def make({', '.join(args)}):\n    def run() -> None:", ["    " + x for x in lines] + ["return run"], {}, "make")
    return make(**args)
