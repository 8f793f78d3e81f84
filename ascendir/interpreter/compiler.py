"""Compile the ops of one program (host function or kernel body) into closures over a register list.

Each SSA value gets a slot in `Frame.R`; each op becomes a zero-argument closure reading and writing
slots, so running a program is `for f in body: f()`. Tile ops (copy, mmad, vector, gather and any
op added with `register_op`) call their semantics (skipped in timing-only mode), look their cost
up in a per-op cache keyed by operand shapes, and advance the core's pipe clocks (timeline.py).
Scalar ops (arith, subview, loop control) charge `startup.scalar_alu` cycles on the S pipe.
A wait_flag issued before its set_flag holds its destination pipe, whose later ops queue until the
set runs (holds.py); tile ops test one flag (`Frame.slow`) for that and the race checker.

In timing-only mode `Compiler.for_` runs loops that `steady.uniform_loop` accepts through
`steady.SteadyLoop`: once two consecutive periods advance the core state by the same delta, the
remaining whole periods are added as a multiple of it; a whole execution of such a loop entered
again from the same relative state is applied from `steady.LoopMemo` (see steady.py for the
conditions and the L2 treatment). Tile ops, flags and barriers count in `Frame.srel` when an S
clock decided a start (LoopMemo leaves the S clock out of its key when it decided nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import is_, itemgetter

import numpy as np
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import AIC_PIPES, AIV_PIPES, subblock
from ascendir.dialects.ascend.placement import default_unit
from ascendir.dtypes import packed_nbytes, to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.interpreter import registry
from ascendir.interpreter.cost import LEVELS, CostEnv, OpCost, copy_path
from ascendir.interpreter.holds import Holds
from ascendir.interpreter.l2 import SHIFT, contiguous_strides
from ascendir.interpreter.race import ChipBuffer
from ascendir.interpreter.scalar import SCALAR_OPS, division_by_zero
from ascendir.interpreter.state import CUBE_PEAK_CYCLES, FLOPS, OPS, VECTOR_OPS, Frame
from ascendir.interpreter.remap import Remap, address_plan
from ascendir.interpreter.steady import MIN_TRIPS, LoopMemo, SteadyLoop, memo_inputs, never_again, step_test, uniform_loop
from ascendir.interpreter.timeline import NPIPES, PIPE_INDEX
from ascendir.interpreter.walk import OpTree, Subview
from ascendir.interpreter.xblock import BlockMemo, Track

Closure = Callable[[], None]


class Return(Exception):
    """Raised by func.return in the host program to hand back its values."""

    def __init__(self, values: list):
        self.values = values


@dataclass
class KernelInfo:
    """Compile-time facts about the kernel whose body is being compiled."""

    name: str
    nunits: int
    env: CostEnv
    static_units: dict[Operation, int]  # flag op -> (src unit, dst unit) resolution helper input
    flag_keys: dict[tuple[int, int, int], int]
    alu: float
    timing_only: bool
    set_keys: set = field(default_factory=set)  # flag keys some set_flag sets (holds.py deadlock messages)
    tree: OpTree | None = None  # the kernel's ops (walk.OpTree): walks and decoded subviews for steady.py, remap.py, `subview`


def np_dtype(t: MemRefType) -> np.dtype:
    return to_numpy_dtype(t.element_type)


def zero_view(shape, dtype: np.dtype) -> np.ndarray:
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


# ----------------------------------------------------------------------------------------------
# compiling a region
# ----------------------------------------------------------------------------------------------
class Compiler:
    """Compiles the ops of one program (host function or kernel) into closures over `frame.R`."""

    def __init__(self, module, frame: Frame, kernel: KernelInfo | None):
        self.m = module
        self.F = frame
        self.k = kernel
        self.slots: dict[SSAValue, int] = {}

    # -- slots ------------------------------------------------------------------------------
    def slot(self, v: SSAValue) -> int:
        s = self.slots.get(v)  # one lookup: xDSL values hash in Python
        if s is None:
            s = self.slots[v] = len(self.slots)
            self.F.R.append(None)
            self.F.A.append(None)
        return s

    def block(self, block: Block) -> list[Closure]:
        """Closures of the ops of `block`, in order; runs of consecutive scalar ops become one
        closure (`scalar_run`)."""
        out: list[Closure] = []
        run: list[Operation] = []
        for op in block.ops:
            if type(op) in SCALAR_OPS:
                run.append(op)
                continue
            if run:
                out.append(self.scalar_run(run))
                run = []
            c = self.op(op)
            if c is not None:
                out.append(c)
        if run:
            out.append(self.scalar_run(run))
        return out

    # -- dispatch ---------------------------------------------------------------------------
    def op(self, op: Operation) -> Closure | None:
        t = type(op)
        if t in SCALAR_OPS:
            return self.scalar_run([op])
        if t in registry.COSTS and t in registry.SEMANTICS and self.k is not None:
            return self.tile(op)
        h = _HANDLERS.get(t)
        if h is None:
            where = f"kernel @{self.k.name}" if self.k else "the host function"
            if t in registry.COSTS or t in registry.SEMANTICS:
                if self.k is None:
                    raise AscendirError(f"{op.name} in {where}: tile ops run inside ascend.kernel only")
                raise AscendirError(f"{op.name} in {where}: needs both semantics and cost (register_op)")
            raise AscendirError(f"{op.name} in {where}: the interpreter does not support this op")
        return h(self, op)

    # -- scalar -----------------------------------------------------------------------------
    def _charge_scalar(self) -> Callable[[], None] | None:
        """A function charging one scalar ALU op on every S pipe of the core, or None (host)."""
        if self.k is None:
            return None
        F, alu = self.F, self.k.alu
        s_ids = [u * NPIPES for u in range(self.k.nunits)]
        if len(s_ids) == 1:

            def charge() -> None:
                c = F.core
                c.free[0] += alu
                c.busy[0] += alu

        else:

            def charge() -> None:
                c = F.core
                for s in s_ids:
                    c.free[s] += alu
                    c.busy[s] += alu

        return charge

    def scalar_run(self, ops: list[Operation]) -> Closure:
        """One closure running consecutive scalar ops (a loop body's index arithmetic), each
        charging `alu` cycles on every S pipe of the kernel's core (constants charge nothing).

        Most closures of a timing-only loop body are these ops, so the closure is generated as
        straight-line Python: one call per run instead of one per op, values produced in the run
        passed on in locals (every result is still written to its slot), simple integer ops
        (`_inline`) written as Python expressions with exactly the semantics of their SCALAR_OPS
        function, the others called. The S clocks get the same additions in the same order as
        op-by-op charging (x + alu + alu + ... evaluates left to right), so they are bit-identical.
        """
        env: dict[str, object] = {"R": self.F.R, "F": self.F, "_divzero": division_by_zero}
        lines: list[str] = []
        charged = self._scalar_lines(ops, env, lines, {})
        if self.k is not None and charged:
            env["alu"] = self.k.alu
            lines.append("c = F.core")
            lines.append("free, busy = c.free, c.busy")
            add = " + alu" * charged
            for s in (u * NPIPES for u in range(self.k.nunits)):
                lines += [f"free[{s}] = free[{s}]{add}", f"busy[{s}] = busy[{s}]{add}"]
        return _generated("def run() -> None:", lines, env, "run")

    def _scalar_lines(self, ops: list[Operation], env: dict, lines: list[str], local: dict[int, str], store: bool = True) -> int:
        """Append to `lines` the straight-line code of scalar ops (`scalar_run`): each result in
        local v<i> and (`store`) in its slot; operands from `local` (slot -> local name) or their
        slots. Returns the number of ops that charge the S clock (all but constants)."""
        charged = 0
        for i, op in enumerate(ops):
            fn = SCALAR_OPS[type(op)](op)
            args = [local.get(s, f"R[{s}]") for s in (self.slot(v) for v in op.operands)]
            out = self.slot(op.results[0])
            if not args:  # a constant (no S charge: it is an immediate)
                env[f"c{i}"] = fn()
                expr = f"c{i}"
            else:
                tmpl = _inline(op)
                if tmpl is not None:
                    expr = tmpl.format(*args)
                else:
                    env[f"f{i}"] = fn
                    expr = f"f{i}({', '.join(args)})"
                charged += 1
            lines.append(f"v{i} = {expr}")
            if store:
                lines.append(f"R[{out}] = v{i}")
            local[out] = f"v{i}"
        return charged

    def checked_values(self, iv: int, checked: list[Operation]) -> Callable[[int], tuple]:
        """x -> the checked values of the iteration whose iv is x (steady.SteadyLoop.tops): the
        checked ops as generated straight-line code (`_scalar_lines`), without S charges (the
        body charges them when it runs the iteration) and without writing their slots: values
        defined in the body are read only by the body, which computes them again when it runs
        an iteration (and the values are memoised across executions anyway: steady.SteadyLoop.vals)."""
        env: dict[str, object] = {"R": self.F.R, "_divzero": division_by_zero}
        lines: list[str] = []
        self._scalar_lines(checked, env, lines, {iv: "x"}, store=False)
        lines.append("return (" + "".join(f"v{i}, " for i in range(len(checked))) + ")")
        return _generated("def tops(x):", lines, env, "tops")

    # -- tile ops (copy, mmad, vector, gather, registered ops) --------------------------------
    def tile(self, op: Operation) -> Closure:
        k, F, R = self.k, self.F, self.F.R
        sem = None if k.timing_only else registry.SEMANTICS[type(op)](op)
        cost_fn = registry.COSTS[type(op)](op, k.env)
        ins = [self.slot(v) for v in op.operands]
        mem = [isinstance(v.type, MemRefType) for v in op.operands]
        get = itemgetter(*ins) if len(ins) > 1 else (lambda R, i=ins[0]: (R[i],))
        cache: dict = {}
        name = op.name
        nunits = k.nunits
        sub = subblock(op)  # AIV 1 of the group
        all_mem = all(mem)
        A = F.A
        mem_slots = [i for i, m_ in zip(ins, mem) if m_]
        race_ops = [(i, j == len(mem_slots) - 1) for j, i in enumerate(mem_slots)]  # last memref is written

        def resolve(c: OpCost) -> tuple:
            if not (c.cycles >= 0 and c.latency >= 0):
                raise AscendirError(f"{name} in kernel @{k.name}: negative or NaN duration ({c.cycles}, {c.latency}) from its cost function")
            if c.pipe not in PIPE_INDEX:
                raise AscendirError(f"{name}: cost function returned unknown pipe {c.pipe!r}")
            unit = unit_of(c.pipe, c.unit, nunits, sub)
            items = tuple((LEVELS.index(lv), float(b)) for lv, b in c.bytes.items() if b)
            if c.vector_ops is not None and c.vector_ops[1]:  # acct slots past LEVELS (state.VECTOR_OPS)
                items += ((VECTOR_OPS[c.vector_ops[0]], c.vector_ops[1]),)
            if c.cube_peak_cycles:
                items += ((CUBE_PEAK_CYCLES, float(c.cube_peak_cycles)),)
            return (unit * NPIPES + PIPE_INDEX[c.pipe], unit * NPIPES, float(c.cycles), float(c.latency), items, float(c.flops))

        gm_copy = None
        if isinstance(op, ascend.CopyOp) and self.m.target.memory.l2_model == "tile":
            src_space, dst_space, _ = copy_path(op, self.m.target)
            if src_space == "gm":
                gm_copy = (0, True)
            elif dst_space == "gm":
                gm_copy = (1, False)
        if gm_copy is not None:
            return self._gm_copy(op, sem, cost_fn, ins, gm_copy, resolve)

        # the last operands and their cost: a loop's op meets the same operand objects every
        # iteration in timing-only mode (views are shared per shape), so an identity test
        # replaces building and hashing the shape key (`last_vals` holds them: identities stay
        # valid; the initial sentinels match nothing)
        last_vals: tuple = (object(),) * len(ins)
        last_c = None

        def run() -> None:
            nonlocal last_vals, last_c
            vals = get(R)
            if all(map(is_, vals, last_vals)):
                c = last_c
            else:
                key = tuple([v.shape for v in vals]) if all_mem else tuple(v.shape if m else v for v, m in zip(vals, mem))
                c = cache.get(key)
                if c is None:
                    c = cache[key] = resolve(cost_fn(*vals))
                last_vals, last_c = vals, c
            pid, sid, cyc, lat, items, flops = c
            if F.slow:  # race check running, or a pipe held (holds.py): one test on the common path
                h = F.hold
                if h is not None and pid in h.lists:
                    h.defer(pid, run, ins, sid)
                    return
                if F.rc is not None:
                    F.rc.access(pid, [(A[i], R[i].shape, w) for i, w in race_ops if A[i] is not None], name, F.block)
            if sem is not None and F.sem_on:
                sem(*vals)
            sig = F.sig
            if sig is not None:
                sig.append(c)
            core = F.core
            free = core.free
            t = free[pid]
            s = free[sid]
            if s >= t:  # the S clock decides the start (steady.LoopMemo counts these)
                t = s
                F.srel += 1
            e = t + cyc
            free[pid] = e
            e += lat
            if e > core.done[pid]:
                core.done[pid] = e
            core.busy[pid] += cyc
            acct = F.acct
            for i, b in items:
                acct[i] += b
            if flops:
                acct[FLOPS] += flops
            acct[OPS] += 1
            if F.trace is not None:
                F.trace.append((core.index, pid, t, cyc, name, items))

        return run

    def _gm_copy(self, op: Operation, sem, cost_fn, ins: list[int], gm: tuple[int, bool], resolve) -> Closure:
        """A copy reading or writing GM under the "tile" L2 model: the L2 (l2.py) decides at the
        copy's start time whether a read hits; writes allocate their tile, and a write "hits"
        when it rewrites a tile it left dirty in L2 within the residency window (l2.py `store`)."""
        F, R, A = self.F, self.F.R, self.F.A
        s_in, s_out = ins
        g_slot = ins[gm[0]]
        gi, is_read = gm
        cache: dict = {}
        name = op.name
        cid = id(op)
        # the last operands seen and their costs, and the last GM stream id (`L2Cache.sid`) with
        # what it came from: a loop's copy meets the same operand objects every iteration
        # (timing-only views are shared per shape, address tags' roots and strides are shared),
        # so identity tests replace building and hashing shape tuples; held references keep the
        # identities valid
        last_s = last_d = last_g = last_root = last_st = last_l2 = object()  # sentinels: match nothing
        last_both = None
        last_sid = 0

        def run() -> None:
            nonlocal last_s, last_d, last_both, last_g, last_root, last_st, last_l2, last_sid
            s, d = R[s_in], R[s_out]
            if s is last_s and d is last_d:
                both = last_both
            else:
                key = (s.shape, d.shape)
                both = cache.get(key)
                if both is None:
                    both = cache[key] = (resolve(cost_fn(s, d, hit=False)), resolve(cost_fn(s, d, hit=True)))
                last_s, last_d, last_both = s, d, both
            miss = both[0]
            pid, sid = miss[0], miss[1]
            if F.slow:  # as in `tile`
                h = F.hold
                if h is not None and pid in h.lists:
                    h.defer(pid, run, ins, sid)
                    return
                if F.rc is not None:
                    ops = []
                    if A[s_in] is not None:
                        ops.append((A[s_in], s.shape, False))
                    if A[s_out] is not None:
                        ops.append((A[s_out], d.shape, True))
                    F.rc.access(pid, ops, name, F.block)
            if sem is not None and F.sem_on:
                sem(s, d)
            core = F.core
            free = core.free
            t = free[pid]
            if free[sid] >= t:
                t = free[sid]
                F.srel += 1
            tag = A[g_slot]
            c = miss
            if tag is not None:
                l2 = F.l2
                g = s if gi == 0 else d
                if g is last_g and tag[0] is last_root and tag[2] is last_st and l2 is last_l2:
                    sid = last_sid
                else:
                    sid = l2.sid(tag[0], g.shape, tag[2])
                    last_g, last_root, last_st, last_l2, last_sid = g, tag[0], tag[2], l2, sid
                k = sid * SHIFT + tag[1]
                now = F.t0 + t
                if is_read:
                    if F.l2p.read(l2, k, now, F.block, F.t0):
                        c = both[1]
                elif F.sem_on:
                    rewrite = l2.store(k, now)
                    if rewrite:
                        c = both[1]
                    wf = F.wfirst
                    if wf is not None and k not in wf:
                        wf[k] = (now, rewrite)
                elif F.l2p.store(k, now):  # recording pass: its own dirty map
                    c = both[1]
                log = F.gmlog
                if log is not None:  # steady.py replays these for skipped iterations
                    log.append((cid, sid, tag[1], now, is_read, c is not miss))
                if F.launchlog is not None and F.sem_on:
                    F.launchlog.append((k, now, is_read))
            sig = F.sig
            if sig is not None:
                sig.append(c)
            _, _, cyc, lat, items, _ = c
            e = t + cyc
            free[pid] = e
            e += lat
            if e > core.done[pid]:
                core.done[pid] = e
            core.busy[pid] += cyc
            acct = F.acct
            for i, b in items:
                acct[i] += b
            acct[OPS] += 1
            if F.trace is not None:
                F.trace.append((core.index, pid, t, cyc, name, items))

        return run

    # -- regions ----------------------------------------------------------------------------
    def for_(self, op: scf.ForOp) -> Closure:
        R = self.F.R
        lb, ub, st = self.slot(op.lb), self.slot(op.ub), self.slot(op.step)
        body_block = op.body.block
        iv = self.slot(body_block.args[0])
        carried = [self.slot(a) for a in body_block.args[1:]]
        inits = [self.slot(v) for v in op.iter_args]
        results = [self.slot(r) for r in op.results]
        body = self.block(body_block)
        yields = [self.slot(v) for v in body_block.last_op.operands] if isinstance(body_block.last_op, scf.YieldOp) else []
        charge = self._charge_scalar()
        checked = uniform_loop(op, self.k.tree) if not carried and self.k is not None and self.k.timing_only else None
        if checked is not None:
            ctrl, addr, copies = memo_inputs(op, self.k.tree)
            memo = LoopMemo([self.slot(v) for v in ctrl], [self.slot(v) for v in addr],
                            {id(c): (self.slot(src), dims) for c, (src, dims) in copies.items()}, self.k.flag_keys, NPIPES,
                            [("dynamic" if DYNAMIC_INDEX in v.type.get_shape() else "static") if isinstance(v.type, MemRefType) else False
                             for v in ctrl], never_again(op, ctrl))
            self.F.memos.append(memo)
            plan = address_plan(op, checked, self.k.tree)
            gen = Remap(plan, self.slot) if plan is not None else None
            bm = None
            xctrl = BlockMemo.plan(op, checked, ctrl, self.k.tree) if gen is not None else None
            if xctrl is not None:
                bm = BlockMemo([(self.slot(v), isinstance(v.type, MemRefType)) for v in xctrl], gen)
                self.F.memos.append(bm)
            return self._steady_for(lb, ub, st, iv, body, charge, checked, memo, gen, bm)
        if not carried:

            def run() -> None:
                for i in range(R[lb], R[ub], R[st]):
                    R[iv] = i
                    for f in body:
                        f()
                    if charge is not None:
                        charge()

            return run

        pairs_init = list(zip(carried, inits))
        pairs_yield = list(zip(carried, yields))
        pairs_res = list(zip(results, carried))

        def run_iter() -> None:
            for c, v in pairs_init:
                R[c] = R[v]
            for i in range(R[lb], R[ub], R[st]):
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

        return run_iter

    def _steady_for(self, lb: int, ub: int, st: int, iv: int, body: list[Closure], charge, checked: list[Operation], memo: LoopMemo,
                    gen: Remap | None = None, bm: BlockMemo | None = None) -> Closure:
        """A timing-only loop that may be extrapolated once steady (steady.py). `checked`: the
        loop-level scalar ops steady.py re-evaluates for the iterations it skips; `memo`: stored
        executions of the whole loop (steady.LoopMemo), applied when the loop is entered again
        from the same relative state (next tile of an outer loop, another block); `gen`: its
        address values that are not affine in the iv (remap.py), None when it has none; `bm`:
        its whole executions kept for the next blocks (xblock.py), None when it may not."""
        F, R = self.F, self.F.R
        values_at = self.checked_values(iv, checked) if checked else None
        same_all = step_test(list(range(len(checked))))
        same_ctl = step_test(gen.control_pos) if gen is not None else None
        # the checked values are pure functions of the iv and these outside values: memoised per
        # their values across executions of the loop (steady.SteadyLoop.vals)
        inputs = sorted({self.slot(v) for o in checked for v in o.operands} - {iv} - {self.slot(o.results[0]) for o in checked})
        known: dict[tuple, dict] = {}

        def known_vals(rng) -> dict | None:
            ik = (rng.start, rng.step, *[R[x] for x in inputs])
            vals = known.get(ik)
            if vals is None and len(known) < 64:
                vals = known[ik] = {}
            return vals

        def values_of(vals: dict | None, rng):
            """i -> the checked values of iteration i, kept in `vals` (SteadyLoop.value_of's)."""
            if vals is None:
                return lambda i: values_at(rng[i])

            def value_of(i: int) -> tuple:
                v = vals.get(i)
                if v is None:
                    v = vals[i] = values_at(rng[i])
                return v

            return value_of

        def plain(rng) -> None:
            for i in rng:
                R[iv] = i
                for f in body:
                    f()
                if charge is not None:
                    charge()

        def run() -> None:
            rng = range(R[lb], R[ub], R[st])
            n = len(rng)
            if n < MIN_TRIPS or not F.extrap or F.trace is not None or F.hold is not None:
                plain(rng)  # a held pipe (holds.py) is state the steady-state jump does not see
                return
            ent = xkey = vals = None
            # across blocks (xblock.py): the outermost sampling loop, in the recording pass
            cross = bm is not None and F.gmlog is None and F.l2p is not None and F.l2p.recording
            # the race checker needs every op; a `once` loop (steady.never_again) is never reused
            # by its LoopMemo, so it enters it only for its BlockMemo
            if F.rc is None and (not memo.once or cross):
                ent = memo.enter(F, R)
                if memo.reuse(F, R, ent, n):
                    return
                if cross:
                    xkey = bm.key(R, F.A, ent, n)
                    # (the checked values go where this block's timed pass looks them up)
                    vals = known_vals(rng) if checked else None
                    if bm.reuse(F, R, memo, ent, xkey, values_of(vals, rng), n):
                        return
            own = F.gmlog is None  # the outermost sampling loop owns the logs
            if own:
                F.gmlog, F.sig = [], []
            g0, l0 = len(F.gmlog), len(F.sig)

            def tops(i: int) -> tuple:
                """Checked values of iteration i (pure scalar ops; body closures rewrite them)."""
                return values_at(rng[i])

            h0 = F.nholds
            try:
                # address values remapped only where no read outcome can change with the address:
                # in the timed pass the misses repeat with the addresses' longer period, which is
                # then the loop's (a shorter one is cut at once by the next miss)
                remapped = gen is not None and (F.l2p is None or F.l2p.recording)
                sl = SteadyLoop(F, n, tops if checked else None, memo, NPIPES, gen if remapped else None, same_ctl if remapped else same_all)
                if checked:
                    if vals is None:
                        vals = known_vals(rng)
                    if vals is not None:
                        sl.vals = vals
                idx = 0
                pre = memo.prefix(F, R, ent, n) if ent is not None else None
                track = sl.track = Track() if xkey is not None and pre is None else None
                if pre is not None:  # start at a stored execution's first jump, in its regime
                    idx, P, d, prev, cur, regime, tshift = pre
                    F.skipped += idx
                    sl.snapshot(idx)
                    m = sl._periods_checked(P, idx, (n - idx) // P)
                    skipped = sl.jump(P, d, prev, cur, m, regime, tshift) if m >= 1 else 0
                    idx += skipped
                    F.skipped += skipped
                    sl.hist.clear()
                while idx < n:
                    if F.nholds != h0:  # a pipe was held in this loop (holds.py): no jump, no memo
                        plain(rng[idx:])
                        ent = None
                        break
                    sl.snapshot(idx)
                    if sl.regime is not None:
                        skipped = sl.reenter(idx)
                        if skipped:
                            idx += skipped
                            F.skipped += skipped
                            continue
                    if n - idx > 2 and len(sl.hist) > 2:  # (detect needs two periods of 1)
                        found = sl.detect()
                        if found is not None:
                            skipped = sl.jump(*found)
                            if skipped:
                                idx += skipped
                                F.skipped += skipped
                                continue
                    if track is not None:
                        track.marks.append((len(F.gmlog), idx))
                    R[iv] = rng[idx]
                    for f in body:
                        f()
                    if charge is not None:
                        charge()
                    idx += 1
                if ent is not None and F.nholds == h0:
                    # an enclosing loop samples (not `own`): its periods compare log records and
                    # cost entries, so record this execution as a reuse of it would (one GM log
                    # record, one cost entry): a period that ran it and one that reused it then
                    # compare equal, as they are (the stored execution is this one)
                    stored = memo.store(F, R, ent, F.gmlog[g0:], sl.first, g0, collapse=not own)
                    if track is not None and stored is not None:
                        bm.store(xkey, stored[0], F.gmlog[g0:], track, sl.value_of, n)
                    if stored is not None and not own:
                        token, log = stored
                        del F.gmlog[g0:]
                        F.gmlog.extend(log)
                        del F.sig[l0:]
                        F.sig.append(token)
            finally:
                if own:
                    F.gmlog = F.sig = None

        return run

    def if_(self, op: scf.IfOp) -> Closure:
        R = self.F.R
        cond = self.slot(op.cond)
        results = [self.slot(r) for r in op.results]

        def branch(region) -> tuple[list[Closure], list[int]]:
            if not region.blocks:
                return [], []
            b = region.block
            body = self.block(b)
            ys = [self.slot(v) for v in b.last_op.operands] if isinstance(b.last_op, scf.YieldOp) else []
            return body, ys

        then_body, then_y = branch(op.true_region)
        else_body, else_y = branch(op.false_region)
        charge = self._charge_scalar()
        if not results and charge is not None and self.k.nunits == 1:  # the common case (hot), S charged inline
            F, alu = self.F, self.k.alu

            def run_plain() -> None:
                for f in then_body if R[cond] else else_body:
                    f()
                c = F.core
                c.free[0] += alu
                c.busy[0] += alu

            return run_plain

        def run() -> None:
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

    # -- memory -----------------------------------------------------------------------------
    def alloc(self, op: ascend.AllocOp) -> Closure:
        R, A = self.F.R, self.F.A
        out = self.slot(op.result)
        t = op.result.type
        shape, dtype = tuple(t.get_shape()), np_dtype(t)
        strides = contiguous_strides(shape)
        space = ascend.space_of(t).value
        gm = space == "gm"
        new_root = self.m.new_root
        # on-chip buffers get a fixed address root (race.py names it and, when the alloc has an
        # `offset`, compares the bytes it occupies in its space; the L2 tracks GM only)
        self.nbufs = getattr(self, "nbufs", 0) + 1
        chip_tag = None
        if not gm:
            count = math.prod(shape)
            size = packed_nbytes(dtype, count)
            placed = "offset" in op.attributes
            # named as the IR names it (race messages): SSA name, double-buffer slot, and the
            # alloc's number in the kernel (names can repeat: a slot twin keeps its original's)
            hint = op.result.name_hint
            slot = op.attributes.get("ascend.slot")
            root = ChipBuffer(
                f"{space} buffer {'%' + hint + ' ' if hint else ''}#{self.nbufs}{f' (slot {slot.value.data})' if slot is not None else ''} "
                f"{'x'.join(map(str, shape))}x{dtype}",
                (space, subblock(op)) if placed else None,
                op.attributes["offset"].value.data if placed else 0,
                size / count if count else 0.0,
                size,
            )
            chip_tag = (root, 0, strides)
        if self.m.timing_only:
            view = zero_view(shape, dtype)

            def run() -> None:
                R[out] = view
                A[out] = (new_root(), 0, strides) if gm else chip_tag

        else:

            def run() -> None:
                R[out] = np.zeros(shape, dtype)
                A[out] = (new_root(), 0, strides) if gm else chip_tag

        return run

    def weight(self, op: ascend.WeightOp) -> Closure:
        R, A = self.F.R, self.F.A
        out = self.slot(op.result)
        t = op.result.type
        shape, dtype = tuple(t.get_shape()), np_dtype(t)
        sym = op.sym.root_reference.data
        tag = (("weight", sym), 0, contiguous_strides(shape))
        if self.m.timing_only:
            view = zero_view(shape, dtype)

            def run() -> None:
                R[out] = view
                A[out] = tag

            return run
        cached: list = []

        def load() -> np.ndarray:
            if op.value is not None:  # an inline constant (convert-nn-to-ascend without a store)
                from ascendir.lowering.constants_to_weights import dense_value

                return np.ascontiguousarray(dense_value(op.value), dtype=dtype)
            if sym not in self.m.weights:
                raise AscendirError(f"ascend.weight @{sym}: not in the WeightStore")
            arr = np.asarray(self.m.weights[sym])
            if arr.shape != shape:
                if arr.size != math.prod(shape):
                    raise AscendirError(f"ascend.weight @{sym}: store holds shape {arr.shape}, IR expects {shape}")
                arr = arr.reshape(shape)
            return np.ascontiguousarray(arr, dtype=dtype)

        def run() -> None:
            if not cached:
                cached.append(load())
            R[out] = cached[0]
            A[out] = tag

        return run

    def view(self, op: ascend.ViewOp) -> Closure:
        R, A = self.F.R, self.F.A
        src, out = self.slot(op.source), self.slot(op.result)
        t = op.result.type
        shape, dtype = tuple(t.get_shape()), np_dtype(t)
        strides = contiguous_strides(shape)
        if self.m.timing_only:
            view = zero_view(shape, dtype)

            def run() -> None:
                R[out] = view
                tag = A[src]
                A[out] = None if tag is None else (tag[0], tag[1], strides)

            return run

        def run() -> None:
            tag = A[src]
            A[out] = None if tag is None else (tag[0], tag[1], strides)
            v = R[src].view()
            try:
                v.shape = shape
            except AttributeError:
                raise AscendirError(f"ascend.view: source of shape {R[src].shape} is not contiguous; cannot view it as {shape}") from None
            R[out] = v

        return run

    def subview(self, op: memref.SubviewOp) -> Closure:
        R = self.F.R
        sv = self.k.tree.subview(op) if self.k is not None and self.k.tree is not None else Subview(op)
        src, out = self.slot(sv.source), self.slot(op.result)
        n = sv.source.type.get_num_dims()

        def spec(static, dyn_vals) -> list[tuple[bool, int]]:
            it = iter(dyn_vals)
            return [(True, self.slot(next(it))) if s == DYNAMIC_INDEX else (False, s) for s in static]

        offs = spec(sv.static_offsets, sv.offsets)
        sizes = spec(sv.static_sizes, sv.sizes)
        strides = spec(sv.static_strides, sv.strides)
        res_shape = list(op.result.type.get_shape())
        dropped = _dropped_dims([s if not d else DYNAMIC_INDEX for d, s in sizes], res_shape, n)
        where = f"memref.subview in {'kernel @' + self.k.name if self.k else 'the host function'}"
        charge = self._charge_scalar()
        dims = list(zip(offs, sizes, strides, [i in dropped for i in range(n)]))

        A = self.F.A
        if self.m.timing_only:
            return self._subview_timing(src, out, dims, where, charge)

        def run() -> None:
            a = R[src]
            idx = []
            tag = A[src]
            if tag is not None:
                off, tst = tag[1], tag[2]
                nst = []
            for i, ((od, o), (sd, s), (td, st), drop) in enumerate(dims):
                if od:
                    o = R[o]
                if sd:
                    s = R[s]
                if td:
                    st = R[st]
                dim = a.shape[i]
                if o < 0 or s < 0 or st < 1 or (s > 0 and o + (s - 1) * st >= dim):
                    raise AscendirError(f"{where}: out of bounds on dim {i}: offset {o}, size {s}, stride {st} in a dim of {dim}")
                idx.append(o if drop else slice(o, o + (s - 1) * st + 1 if s else o, st))
                if tag is not None:
                    off += o * tst[i]
                    if not drop:
                        nst.append(tst[i] * st)
            R[out] = a[tuple(idx)]
            A[out] = None if tag is None else (tag[0], off, tuple(nst))
            if charge is not None:
                charge()

        return run

    def _subview_timing(self, src: int, out: int, dims: list, where: str, charge) -> Closure:
        """Timing-only subview: buffers are zero-stride views (no data), so only the result shape
        and the GM address tag matter; views are shared per (shape, dtype) instead of indexing
        numpy every time. Same bounds checks as the numerics path."""
        R, A, F = self.F.R, self.F.A, self.F
        views: dict = {}
        # the result (view, address offset added, strides) is a function of the source shape,
        # dtype and strides and of the dynamic operands: memoised per subview op (most subviews
        # of a loop body see the same few operand values; bounded), in one table per source
        # (shape, dtype, strides) keyed by the dynamic operands. The source view and its strides
        # are mostly the same objects every time, so identity tests find the table (`last_a` and
        # `last_st` hold them: the identities stay valid)
        memo: dict = {}
        size = 0
        last_a = last_st = object()
        last_table: dict = {}
        # result strides are interned: equal strides are one object (steady-state GM copies
        # compare their address tags' strides by identity, `_gm_copy`)
        strides: dict = {}
        dyn = [x for dim in dims for (d, x) in dim[:3] if d]
        get_dyn = itemgetter(*dyn) if len(dyn) > 1 else (lambda R, s=dyn[0]: R[s]) if dyn else (lambda R: None)
        one = charge is not None and self.k is not None and self.k.nunits == 1
        alu = self.k.alu if self.k is not None else 0.0

        def compute(a, tag) -> tuple:
            shape = a.shape
            res = []
            off = 0
            nst = []
            tst = tag[2] if tag is not None else None
            for i, ((od, o), (sd, s), (td, st), drop) in enumerate(dims):
                if od:
                    o = R[o]
                if sd:
                    s = R[s]
                if td:
                    st = R[st]
                dim = shape[i]
                if o < 0 or s < 0 or st < 1 or (s > 0 and o + (s - 1) * st >= dim):
                    raise AscendirError(f"{where}: out of bounds on dim {i}: offset {o}, size {s}, stride {st} in a dim of {dim}")
                if not drop:
                    res.append(s)
                if tst is not None:
                    off += o * tst[i]
                    if not drop:
                        nst.append(tst[i] * st)
            key = (tuple(res), a.dtype)
            v = views.get(key)
            if v is None:
                v = views[key] = zero_view(key[0], a.dtype)
            nst = tuple(nst)
            return v, off, strides.setdefault(nst, nst)

        def run() -> None:
            nonlocal size, last_a, last_st, last_table
            a = R[src]
            tag = A[src]
            tst = None if tag is None else tag[2]
            if a is last_a and tst is last_st:
                table = last_table
            else:
                table = memo.get((a.shape, a.dtype, tst))
                if table is None:
                    table = memo[(a.shape, a.dtype, tst)] = {}
                last_a, last_st, last_table = a, tst, table
            key = get_dyn(R)
            got = table.get(key)
            if got is None:
                got = compute(a, tag)
                if size < 1024:
                    table[key] = got
                    size += 1
            R[out] = got[0]
            A[out] = None if tag is None else (tag[0], tag[1] + got[1], got[2])
            if one:
                c = F.core
                c.free[0] += alu
                c.busy[0] += alu
            elif charge is not None:
                charge()

        return run

    def load(self, op: memref.LoadOp) -> Closure:
        R = self.F.R
        src = self.slot(op.memref)
        idx = [self.slot(v) for v in op.indices]
        out = self.slot(op.res)
        charge = self._charge_scalar()

        def run() -> None:
            a = R[src]
            R[out] = a[tuple(R[i] for i in idx)].item()
            if charge is not None:
                charge()

        return run

    def store(self, op: memref.StoreOp) -> Closure:
        R = self.F.R
        val, dst = self.slot(op.value), self.slot(op.memref)
        idx = [self.slot(v) for v in op.indices]
        charge = self._charge_scalar()
        timing = self.m.timing_only

        def run() -> None:
            if not timing and self.F.sem_on:
                R[dst][tuple(R[i] for i in idx)] = R[val]
            if charge is not None:
                charge()

        return run

    # -- kernel-only ops --------------------------------------------------------------------
    def block_idx(self, op: ascend.BlockIdxOp) -> Closure:
        R, F = self.F.R, self.F
        out = self.slot(op.result)

        def run() -> None:
            R[out] = F.block

        return run

    def _flag_slots(self, op: ascend.FlagOp) -> tuple[int, int, int]:
        su, du = self.k.static_units[op]
        src = su * NPIPES + PIPE_INDEX[op.src.data]
        dst = du * NPIPES + PIPE_INDEX[op.dst.data]
        key = self.k.flag_keys.setdefault((src, dst, op.event.value.data), len(self.k.flag_keys))
        return src, dst, key

    def set_flag(self, op: ascend.SetFlagOp) -> Closure:
        F = self.F
        src, dst, key = self._flag_slots(op)
        self.k.set_keys.add(key)
        s_id = (src // NPIPES) * NPIPES
        event = op.event.value.data

        def run() -> None:
            if not F.slow and F.trace is None:  # no race check, no held pipe, no trace (hot)
                core = F.core
                free = core.free
                t = free[src]
                d = core.done[src]
                if d > t:
                    t = d
                s = free[s_id]
                if s >= t:
                    t = s
                    F.srel += 1
                free[src] = t
                F.flags.queues[key].append(t)
                return
            slow = F.slow
            if slow and F.hold is not None and src in F.hold.lists:
                F.hold.defer(src, run, (), s_id)
                return
            core = F.core
            free = core.free
            t = t0 = free[src]
            if core.done[src] > t:
                t = core.done[src]
            if free[s_id] >= t:
                t = free[s_id]
                F.srel += 1
            if F.trace is not None and free[s_id] > t0:  # the set is issued when src and S reached it
                t0 = free[s_id]
            free[src] = t
            F.flags.queues[key].append(t)
            if F.rc is not None:
                F.rcq.queues[key].append(F.rc.set(src))
            if F.trace is not None:
                fid = next(F.flow_ids)
                F.flowq.queues[key].append(fid)
                # src holds the set from its issue until everything before it completed
                F.flows.append(("s", core.index, src, dst, event, t0, t, fid))
            if slow and F.hold is not None:
                F.hold.release(key)  # a pipe held on this flag runs what queued behind its wait

        return run

    def wait_flag(self, op: ascend.WaitFlagOp) -> Closure:
        F = self.F
        src, dst, key = self._flag_slots(op)
        kname = self.k.name
        text = f"ascend.wait_flag {op.src.data} -> {op.dst.data}, {op.event.value.data}"
        s_id = (dst // NPIPES) * NPIPES
        event = op.event.value.data
        set_keys = self.k.set_keys

        def run() -> None:
            q = F.flags.queues[key]
            if q and not F.slow and F.trace is None:  # a pending set, no race check, no held pipe, no trace (hot)
                t = q.popleft()
                free = F.core.free
                fd = free[dst]
                if t > fd:
                    free[dst] = t
                elif fd <= free[s_id]:
                    F.srel += 1  # a pipe at (or behind) its S clock keeps that value
                return
            if F.slow and F.hold is not None and dst in F.hold.lists:
                F.hold.defer(dst, run, (), s_id)
                return
            if not q:
                if dst == s_id:  # the scalar unit stalls: it would issue every later set
                    flag = text.split(" ", 1)[1]
                    why = (
                        "it stalls the scalar unit, which issues in program order, so no later set can be issued"
                        if key in set_keys else f"the kernel has no ascend.set_flag {flag}"
                    )
                    raise AscendirError(
                        f"deadlock in kernel @{kname} (block {F.block}): {text} has no earlier matching "
                        f"ascend.set_flag {flag}: {why}"
                    )
                # the set may come later in program order: only dst waits for it (holds.py)
                if F.hold is None:
                    F.hold = Holds(F, kname, set_keys)
                    F.slow = True
                F.hold.block(dst, key, run, s_id, text)
                return
            t = q.popleft()
            core = F.core
            free = core.free
            if F.trace is not None:  # the wait is issued when dst and the S unit reached it
                w0 = free[dst] if free[dst] > free[s_id] else free[s_id]
            if t > free[dst]:
                free[dst] = t
            elif free[dst] <= free[(dst // NPIPES) * NPIPES]:
                F.srel += 1  # a pipe at (or behind) its S clock keeps that value
            if F.rc is not None:
                F.rc.wait(dst, F.rcq.queues[key].popleft())
            if F.trace is not None:
                # dst is blocked from the wait's issue until the set (zero length if it came first)
                F.flows.append(("f", core.index, dst, src, event, w0, free[dst] if free[dst] > w0 else w0,
                                F.flowq.queues[key].popleft()))

        return run

    def barrier(self, op: ascend.PipeBarrierOp) -> Closure:
        F = self.F
        p = op.pipe.data
        if p == "ALL":

            def run_all() -> None:
                if F.hold is not None:  # the scalar unit waits for a pipe held on a set after the barrier
                    raise F.hold.deadlock(F.block, "ascend.pipe_barrier ALL waits for the pipe it holds, and the "
                                          "scalar unit would issue the matching set only after the barrier")
                core = F.core
                t = core.end()
                core.free = [t] * len(core.free)
                F.srel += 1
                if F.rc is not None:
                    F.rc.barrier_all()

            return run_all
        if p not in PIPE_INDEX:
            raise AscendirError(f"ascend.pipe_barrier in kernel @{self.k.name}: unknown pipe {p}")
        ids = [u * NPIPES + PIPE_INDEX[p] for u in range(self.k.nunits)]
        if self.k.nunits > 1 and p in AIC_PIPES:
            ids = ids[:1]
        elif self.k.nunits > 1 and p in AIV_PIPES:
            ids = ids[1:]

        def one(i: int) -> None:
            core = F.core
            free, done = core.free, core.done
            s = free[(i // NPIPES) * NPIPES]
            t = max(free[i], done[i], s)
            if s >= t:
                F.srel += 1
            free[i] = t

        per = {i: (lambda i=i: one(i)) for i in ids}

        def run() -> None:
            h = F.hold
            if h is not None:  # a held pipe queues its barrier (holds.py)
                for i in ids:
                    if i in h.lists:
                        h.defer(i, per[i], (), (i // NPIPES) * NPIPES)
                    else:
                        one(i)
                return
            core = F.core
            free, done = core.free, core.done
            for i in ids:
                s = free[(i // NPIPES) * NPIPES]
                t = max(free[i], done[i], s)
                if s >= t:
                    F.srel += 1
                free[i] = t

        return run

    # -- host-only ops ----------------------------------------------------------------------
    def launch(self, op: ascend.LaunchOp) -> Closure:
        R = self.F.R
        name = op.callee.root_reference.data
        if name not in self.m.kernels:
            raise AscendirError(f"ascend.launch @{name}: no such ascend.kernel")
        kp = self.m.kernels[name]
        args = [self.slot(v) for v in op.args]
        if len(args) != len(kp.arg_slots):
            raise AscendirError(f"ascend.launch @{name}: {len(args)} arguments, kernel takes {len(kp.arg_slots)}")
        m = self.m
        A = self.F.A

        def run() -> None:
            try:
                m.records.append(kp.run([R[a] for a in args], [A[a] for a in args]))
            except AscendirError as e:  # data errors (e.g. a gather index) name the launch too
                if f"@{name}" in str(e):
                    raise
                raise AscendirError(f"kernel @{name}: {e}") from None
            if m.progress is not None:
                m.progress(len(m.records), m.launches)

        return run

    def ret(self, op: func.ReturnOp) -> Closure:
        R = self.F.R
        vals = [self.slot(v) for v in op.arguments]

        def run() -> None:
            raise Return([R[v] for v in vals])

        return run


def unit_of(pipe: str, unit: str | None, nunits: int, sub: int = 0) -> int:
    """Unit index of an op: 0 = AIC (or the only unit), 1 = AIV 0, 2 = AIV 1 (`sub`, the op's
    SUBBLOCK_ATTR, moves AIV work to the group's second AIV)."""
    if nunits == 1:
        return 0
    if unit is None:  # no unit from the cost: the pipe's (placement.default_unit)
        unit = default_unit(pipe)
    return 0 if unit == "aic" else 1 + sub


# generated source of a scalar run -> its code object (`Compiler.scalar_run`; the same module
# compiled again, e.g. one compile per benchmark run, generates the same sources)
_RUN_CODE: dict[str, object] = {}

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


def _generated(head: str, lines: list[str], env: dict, name: str):
    """Function `name` defined by `head` and the body `lines`, executed in `env`."""
    src = head + "\n" + "".join(f"    {ln}\n" for ln in lines)
    code = _RUN_CODE.get(src)
    if code is None:  # compiling the source costs far more than running it: shared by text
        code = compile(src, "<scalar ops>", "exec")
        if len(_RUN_CODE) < 4096:
            _RUN_CODE[src] = code
    exec(code, env)
    return env[name]


def _inline(op: Operation) -> str | None:
    """The inline expression template of a scalar op ({0}, {1}: operands), or None (call it)."""
    if isinstance(op, arith.CmpiOp):
        return "{0} %s {1}" % _CMPI_OPS[op.predicate.value.data]
    return _INLINE_BIN.get(type(op))


def _dropped_dims(sizes: list[int], res_shape: list[int], n: int) -> set[int]:
    """Source dims a rank-reducing subview drops (unit dims, matched greedily from the left)."""
    r = len(res_shape)
    if r == n:
        return set()
    dropped, j = set(), 0
    for i, s in enumerate(sizes):
        keep_left = r - j
        if j < r and s != 1:
            j += 1
        elif j < r and s == 1 and res_shape[j] in (1, DYNAMIC_INDEX) and (n - i) <= keep_left:
            j += 1
        elif s == 1:
            dropped.add(i)
        else:
            raise AscendirError(f"memref.subview: cannot match sizes {sizes} to result shape {res_shape}")
    return dropped


def _noop(self: Compiler, op: Operation) -> None:
    return None


_HANDLERS: dict[type, Callable[[Compiler, Operation], Closure | None]] = {
    scf.ForOp: Compiler.for_,
    scf.IfOp: Compiler.if_,
    scf.YieldOp: _noop,
    ascend.AllocOp: Compiler.alloc,
    ascend.WeightOp: Compiler.weight,
    ascend.ViewOp: Compiler.view,
    memref.SubviewOp: Compiler.subview,
    memref.LoadOp: Compiler.load,
    memref.StoreOp: Compiler.store,
    ascend.BlockIdxOp: Compiler.block_idx,
    ascend.SetFlagOp: Compiler.set_flag,
    ascend.WaitFlagOp: Compiler.wait_flag,
    ascend.PipeBarrierOp: Compiler.barrier,
    ascend.ReturnOp: _noop,
    ascend.LaunchOp: Compiler.launch,
    func.ReturnOp: Compiler.ret,
}
