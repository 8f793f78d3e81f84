"""Tile ops (copy, mmad, vector, gather, any op added with `register_op`): semantics (skipped in
timing-only mode), cost looked up per operand shapes, the pipe clocks advanced; GM copies also
touch the L2 and the address logs of steady.py / memo.py.

Within one compile, a tile op that is the same op again (same class, operand values, attributes
and properties: an unrolled pipeline's repeated on-chip copies and vector ops) gets the closure
compiled for the first (`TileOps.tile`). Exact: the built-in semantics and cost factories read
nothing of an op but those, so both ops' closures would compute the same things from the same
slots, and a closure's state is caches of what those compute (the last operands and their cost,
pipe slots by shape, a copy's plans): running one closure at both places is running each at its
place. A register_op'd class is compiled per op (nothing says what its factories read), and so
is a timed GM copy (its closure logs its op's id for steady.py's replays)."""

from __future__ import annotations

import math
import weakref
from operator import itemgetter
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation
from ascendir.dialects import ascend
from ascendir.dialects.ascend import subblock
from ascendir.errors import AscendirError
from ascendir.interpreter.exec import registry
from ascendir.costmodel import LEVELS, OpCost, builtin_costs, copy_path, quantise, shared_cost
from ascendir.interpreter.timing.l2 import SHIFT
from ascendir.interpreter.state import CUBE_PEAK_CYCLES, FLOPS, OPS, VECTOR_OPS
from ascendir.interpreter.timing.timeline import NPIPES, PIPE_INDEX
from ascendir.interpreter.exec.common import Closure, _per_type, np_dtype, space_name, unit_of
from ascendir.interpreter.exec.walk import _is_a, operands_of
from ascendir.interpreter.exec.semantics import builtin_semantics
from ascendir.interpreter.exec.wide import F16, declared, storage_dtype

# the built-in cost factories (costmodel/ops.py): each gives one op the same pipe and unit
# whatever its operands (copy: its path's; mmad: M; vector ops: V; gather: MTE2)
_FIXED_PIPE = builtin_costs()
_BUILTIN_SEMANTICS = builtin_semantics()


# The timed run of a tile op (`TileOps.tile`), generated per operand count: its operands are
# fetched into locals and compared with the last ones by identity, one `is` each (a generic
# `all(map(is_, ...))` over a fetched tuple was a third of the closure's own time). Compiled once
# per count, like steady.step_test; each op's run is the template's closure over its own values.
_TILE_RUN = """
def make(F, R, A, ins, cache, cost_fn, resolve, key_of, sem, race_ops, name, label):
    {slots} = ins
    {lasts} = {sentinels}
    last_c = None

    def run():
        nonlocal {lasts}, last_c
        {fetch}
        if {same}:
            c = last_c
        else:
            vals = ({vals},)
            key = key_of(vals)
            c = cache.get(key)
            if c is None:
                c = cache[key] = resolve(cost_fn(*vals))
            {lasts} = {vals}
            last_c = c
        pid, sid, cyc, lat, items, flops = c
        if F.slow_path:  # race check running, or a pipe held (holds.py): one test on the common path
            h = F.hold
            if h is not None and pid in h.lists:
                h.defer(pid, me(), ins, sid)
                return
            if F.races is not None:
                F.races.access(pid, [(A[i], R[i].shape, w) for i, w in race_ops if A[i] is not None], name, F.block)
        if sem is not None and F.numerics_on:
            sem({vals})
        sig = F.cost_log
        if sig is not None:
            sig.append(c)
        core = F.core
        free = core.free
        t = free[pid]
        s = free[sid]
        if s >= t:  # the S clock decides the start (loop_memo.LoopMemo counts these)
            t = s
            F.s_clock_decisions += 1
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
            F.trace.append((core.index, pid, t, cyc, label, items))

    me = weakref.ref(run)  # what a held pipe queues, without a reference cycle (sync_ops.py `set_flag`)
    return run
"""
_TILE_RUNS: dict[int, object] = {}


def _timed_tile(n: int):
    """The factory of timed tile-op runs with n operands (`_TILE_RUN`)."""
    make = _TILE_RUNS.get(n)
    if make is None:
        names = lambda p: ", ".join(f"{p}{j}" for j in range(n))  # noqa: E731
        src = _TILE_RUN.format(slots=names("i") + ",", lasts=names("l"), sentinels=", ".join(["object()"] * n),
                               fetch="; ".join(f"v{j} = R[i{j}]" for j in range(n)), same=" and ".join(f"v{j} is l{j}" for j in range(n)),
                               vals=names("v"))
        env = {"FLOPS": FLOPS, "OPS": OPS, "weakref": weakref}
        exec(src, env)  # noqa: S102 (our own text)
        make = _TILE_RUNS[n] = env["make"]
    return make


def _memref_facts(t: MemRefType) -> tuple:
    """(numpy dtype, space name, whether numerics runs widen it: wide.storage_dtype) of memref
    type `t`, once per type object (common._per_type: the data walk's compile asks them of every
    memref operand of every tile op)."""
    return _per_type(_FACTS, t, lambda: _derive_facts(t))


def _derive_facts(t: MemRefType) -> tuple:
    dt, space = np_dtype(t), space_name(t)
    return dt, space, storage_dtype(space, dt) != dt


_FACTS: dict = {}  # id(memref type) -> (the type, its `_memref_facts`)


def slice_name(op: Operation, target, path: tuple | None = None) -> str:
    """What a trace slice of `op` is called: a copy by its path ("GM->UB", "L1->L0A"; `path`: its
    copy_path when known), other ops by their name without the dialect ("mmad", "vexp")."""
    if _is_a(type(op), ascend.CopyOp):
        src, dst, _ = path if path is not None else copy_path(op, target)
        return f"{src.upper()}->{dst.upper()}"
    return op.name.removeprefix("ascend.")


class TileOps:
    """Compiler part: tile ops (mixed into compiler.Compiler)."""

    # -- tile ops (copy, mmad, vector, gather, registered ops) --------------------------------
    def tile(self, op: Operation) -> Closure:
        """The closure of tile op `op` (`_tile`), shared with an earlier op of this compile that
        is the same op again: same class, same operand values, same attributes and properties.
        The built-in semantics and costs are functions of those alone, and the closure's state
        is caches of them, so running one closure for both is running each: an unrolled
        pipeline repeats its on-chip copies and vector ops (FlashAttention of the 7B layer: 479
        of its 776 tile ops). Not an op of registered semantics or cost (register_op: nothing
        says what its factories read of the op), nor a GM copy of the timed walk (its closure
        logs its op's id: steady.py)."""
        t = type(op)
        if registry.SEMANTICS[t] is not _BUILTIN_SEMANTICS.get(t) or registry.COSTS[t] is not _FIXED_PIPE.get(t):
            return self._tile(op)[0]
        key = (t, tuple(map(id, operands_of(op))))
        attrs, props = op.attributes, op.properties
        same = self.same_tiles.get(key)
        if same is None:
            same = self.same_tiles[key] = []
        for a, p, got in same:  # (equal dicts: the same names, equal attributes)
            if a == attrs and p == props:
                return got
        got, shared = self._tile(op)
        if shared:
            same.append((attrs, props, got))
        return got

    def _tile(self, op: Operation) -> tuple[Closure, bool]:
        k, F, R = self.k, self.F, self.F.values
        sem = None if k.timing_only else registry.SEMANTICS[type(op)](op)
        # (the kernel's compiles share it: KernelInfo.costs; cost functions depend on the op's
        # operand shapes and attributes only, registry.py; built-in ones are shared between ops
        # of one form: costmodel.shared_cost)
        cost_fn = k.costs.get(op)
        if cost_fn is None:
            cost_fn = k.costs[op] = shared_cost(registry.COSTS[type(op)], op, k.env, k.paths.get(op))
        operands = operands_of(op)  # (xDSL's `operands` makes a view per access)
        ins = [self.slot(v) for v in operands]
        types = [v.type for v in operands]
        mem = [isinstance(t, MemRefType) for t in types]
        # per memref operand (dtype, space, widened), once per type object: `_wide` and the data
        # walk's GM operands read them (None: a scalar operand)
        facts = [_memref_facts(t) if m_ else None for t, m_ in zip(types, mem)] if sem is not None else None
        name = op.name
        nunits = k.nunits
        sub = subblock(op)  # AIV 1 of the group
        mem_slots = [i for i, m_ in zip(ins, mem) if m_]
        race_ops = [(i, j == len(mem_slots) - 1) for j, i in enumerate(mem_slots)]  # last memref is written
        if sem is not None:
            sem, typed = self._wide(op, sem, mem, facts)
            raw_cost = cost_fn
            cost_fn = lambda *vals, **kw: raw_cost(*typed(vals), **kw)  # noqa: E731 (costs see declared dtypes)

        def resolve(c: OpCost) -> tuple:
            if not (c.cycles >= 0 and c.latency >= 0):
                raise AscendirError(f"{name} in kernel @{k.name}: negative or NaN duration ({c.cycles}, {c.latency}) from its cost function")
            if c.cycles == math.inf or c.latency == math.inf:
                raise AscendirError(f"{name} in kernel @{k.name}: infinite duration ({c.cycles}, {c.latency}) from its cost function")
            if c.pipe not in PIPE_INDEX:
                raise AscendirError(f"{name}: cost function returned unknown pipe {c.pipe!r}")
            unit = unit_of(c.pipe, c.unit, nunits, sub)
            items = tuple((LEVELS.index(lv), float(b)) for lv, b in c.bytes.items() if b)
            if c.vector_ops is not None and c.vector_ops[1]:  # acct slots past LEVELS (state.VECTOR_OPS)
                items += ((VECTOR_OPS[c.vector_ops[0]], c.vector_ops[1]),)
            if c.cube_peak_cycles:
                items += ((CUBE_PEAK_CYCLES, quantise(c.cube_peak_cycles)),)
            # durations enter the timeline as multiples of the cycle quantum: its sums are then
            # exact, whatever their order (costmodel/quantum.py)
            return (unit * NPIPES + PIPE_INDEX[c.pipe], unit * NPIPES, quantise(c.cycles), quantise(c.latency), items, float(c.flops))

        if k.data_only:
            if F.cube is not None:  # exec/deferred.py: copies and mmads of a GEMM recorded, summed per L0C tile
                sem = F.cube.wrap(op, sem, ins, facts)
            # a built-in cost function gives every op it serves one pipe and unit (costmodel.shared_cost
            # shares one function between the ops of one form): its ops share their pipe slots
            fixed = (k.costs[op], sub) if _FIXED_PIPE.get(type(op)) is registry.COSTS[type(op)] else None
            gm = [f[1] == "gm" for f in facts if f is not None]
            get = itemgetter(*ins) if len(ins) > 1 else (lambda R, i=ins[0]: (R[i],))
            bf = batch_facts(self, op, sem, mem, facts) if k.batched else None
            return self._data_tile(sem, cost_fn, ins, get, resolve, race_ops, name, fixed, gm, bf), True

        cache: dict = {}
        path = None
        if _is_a(type(op), ascend.CopyOp):  # (read once per kernel: sim/kernel.py `_prewalk`)
            path = k.paths.get(op)
            if path is None:
                path = copy_path(op, self.m.target)
        label = slice_name(op, self.m.target, path)  # what the trace calls it (a data walk traces nothing)
        all_mem = all(mem)
        A = F.gm_tags
        gm_copy = None
        if path is not None and self.m.target.memory.l2_model == "tile":
            if path[0] == "gm":
                gm_copy = (0, True)
            elif path[1] == "gm":
                gm_copy = (1, False)
        if gm_copy is not None:
            return self._gm_copy(op, sem, cost_fn, ins, gm_copy, resolve, label), False

        # the last operands and their cost: a loop's op meets the same operand objects every
        # iteration in timing-only mode (views are shared per shape), so identity tests replace
        # building and hashing the shape key (the run holds them: identities stay valid)
        def key_of(vals: tuple) -> tuple:
            return tuple([v.shape for v in vals]) if all_mem else tuple(v.shape if m else v for v, m in zip(vals, mem))

        return _timed_tile(len(ins))(F, R, A, ins, cache, cost_fn, resolve, key_of, sem, race_ops, name, label), True

    def _data_tile(self, sem, cost_fn, ins: list[int], get, resolve, race_ops: list, name: str, fixed: tuple | None,
                   gm: list[bool], facts: tuple) -> Closure:
        """A tile op of the data walk (KernelInfo.data_only): its semantics on its operands. While
        a pipe is held (holds.py) or the race checker runs (`Frame.slow_path`), the op needs its
        pipe (from its cost, looked up then only; when its cost is a built-in one, whose pipe and
        unit do not depend on the operands (`_FIXED_PIPE`), once per compile for all the ops of
        its cost function and AIV subblock: `fixed`, that pair, else None): queued
        behind a held wait as in the timed walk, its accesses checked (race.py) as in the single
        walk. In a block the race check follows without running (race.py `reset`: F.races None,
        F.ctl set), its GM operands (`gm`: per memref operand, whether it is in GM) are logged.
        While a batched data walk records (F.tape set: exec/tape.py), the op is recorded with
        `facts` (`batch_facts`; None in a walk that never records: KernelInfo.batched) instead of run."""
        F, R, A = self.F, self.F.values, self.F.gm_tags
        # operand shapes (scalars: values) -> (pipe slot, S slot); a `fixed` op's: the compile's, by `fixed`
        pipes: dict = self.fixed_pipes if fixed is not None else {}
        ps = None  # (pipe slot, S slot) of a `fixed` op, once known
        # the memref operands the race check reads: (position in the operands, slot, written)
        racing = [(ins.index(i), i, w) for i, w in race_ops]
        in_gm = [r for r, g in zip(racing, gm) if g]

        def run() -> None:
            nonlocal ps
            vals = get(R)
            if F.slow_path:
                got = ps
                if got is None:
                    key = fixed if fixed is not None else tuple([getattr(v, "shape", v) for v in vals])
                    got = pipes.get(key)
                    if got is None:
                        got = pipes[key] = resolve(cost_fn(*vals))[:2]
                    if fixed is not None:
                        ps = got
                pid = got[0]
                h = F.hold
                if h is not None and pid in h.lists:
                    h.defer_read(pid, me(), ins, vals, get(A), got[1])
                    return
                if F.races is not None:
                    F.races.access(pid, [(A[i], vals[j].shape, w) for j, i, w in racing if A[i] is not None], name, F.block)
            if in_gm and F.ctl is not None and F.races is None:  # a block running unchecked logs its GM operands
                log = [(A[i], vals[j].shape, w) for j, i, w in in_gm if A[i] is not None]
                if log:
                    F.ctl.gmlog.append(log)
            tape = F.tape
            if tape is None:
                sem(*vals)
            else:
                tape.append((facts, vals))

        me = weakref.ref(run)  # what a held pipe queues, without a reference cycle (sync_ops.py `set_flag`)
        return run

    def _wide(self, op: Operation, sem, mem: list[bool], facts: list, batched: bool = False) -> tuple:
        """`sem` of a numerics run with fp16 cube operands held in fp32 (wide.py), and the map
        from its operand values to those its cost is computed from (declared dtypes). A GM fp16
        read into a widened L1 buffer reads the launch's fp32 copy of its GM buffer (F.shadows);
        a write into GM updates that copy; an op other than a copy writing a widened buffer
        leaves fp16 values in it. `mem`: per operand whether it is a memref; `facts`: per
        operand its `_memref_facts`, None for a scalar; `batched`: `sem` is a batched form
        (exec/batch_run.py), whose GM reads convert what each slice spans (`GmShadows.wide_each`)."""
        F = self.F
        dts = tuple(f[0] if f is not None else None for f in facts)
        spaces = [f[1] if f is not None else None for f in facts]
        widened = [f is not None and f[2] for f in facts]

        def typed(vals: tuple) -> tuple:
            return declared(vals, dts)

        out = max(i for i, m_ in enumerate(mem) if m_)  # the written operand (race.py convention)
        if _is_a(type(op), ascend.CopyOp):
            if spaces[0] == "gm" and dts[0] == F16 and widened[1]:

                def read_wide(s, d) -> None:
                    sh = F.shadows
                    sem(s if sh is None else sh.wide_each(s) if batched else sh.wide(s), d)

                return read_wide, typed
        elif widened[out]:

            def narrowed(*vals) -> None:
                sem(*vals)
                d = vals[out]
                d[...] = d.astype(F16)

            return narrowed, typed
        if spaces[out] == "gm":

            def writes_gm(*vals) -> None:
                sem(*vals)
                if F.shadows is not None:
                    F.shadows.write(vals[out])

            return writes_gm, typed
        return sem, typed

    def _gm_copy(self, op: Operation, sem, cost_fn, ins: list[int], gm: tuple[int, bool], resolve, label: str) -> Closure:
        """A copy reading or writing GM under the "tile" L2 model: the L2 (l2.py) decides at the
        copy's start time whether a read hits; writes allocate their tile, and a write "hits"
        when it rewrites a tile it left dirty in L2 within the residency window (l2.py `store`)."""
        F, R, A = self.F, self.F.values, self.F.gm_tags
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
            if F.slow_path:  # as in `tile`
                h = F.hold
                if h is not None and pid in h.lists:
                    h.defer(pid, me(), ins, sid)
                    return
                if F.races is not None:
                    ops = []
                    if A[s_in] is not None:
                        ops.append((A[s_in], s.shape, False))
                    if A[s_out] is not None:
                        ops.append((A[s_out], d.shape, True))
                    F.races.access(pid, ops, name, F.block)
            if sem is not None and F.numerics_on:
                sem(s, d)
            core = F.core
            free = core.free
            t = free[pid]
            if free[sid] >= t:
                t = free[sid]
                F.s_clock_decisions += 1
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
                now = F.kernel_start + t
                if is_read:
                    if F.l2_pass.read(l2, k, now, F.block, F.kernel_start):
                        c = both[1]
                elif F.numerics_on:
                    rewrite = l2.store(k, now)
                    if rewrite:
                        c = both[1]
                    wf = F.first_writes
                    if wf is not None and k not in wf:
                        wf[k] = (now, rewrite)
                elif F.l2_pass.store(k, now):  # recording pass: its own dirty map
                    c = both[1]
                log = F.gm_log
                if log is not None:  # steady.py replays these for skipped iterations
                    log.append((cid, sid, tag[1], now, is_read, c is not miss))
                if F.launch_gm_log is not None and F.numerics_on:
                    F.launch_gm_log.append((k, now, is_read))
            sig = F.cost_log
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
                F.trace.append((core.index, pid, t, cyc, label, items))

        me = weakref.ref(run)  # what a held pipe queues, without a reference cycle (sync_ops.py `set_flag`)
        return run


def batch_facts(comp, op: Operation, sem, mem: list[bool], facts: list) -> tuple:
    """What the batched data walk (exec/batch_run.py) needs of tile op `op` of a data walk: (its
    data-walk semantics `sem`, its batched form with the same GM fp32-copy effects (`_wide`;
    registry.BATCHED; None: none, or a deferred kernel's), whether that form needs each operand's
    contiguity kept, ((operand position, written) of each GM memref operand)). `comp`: the
    compiler; `mem`, `facts`: per operand whether it is a memref and its `_memref_facts`."""
    batched = registry.BATCHED.get(type(op))
    bsem, guard = None, False
    form = batched[0](op) if batched is not None and comp.F.cube is None else None
    if form is not None:
        bsem, _ = comp._wide(op, form, mem, facts, batched=True)
        guard = batched[1]
    out = max((i for i, m_ in enumerate(mem) if m_), default=-1)  # the written operand (race.py convention)
    gm = tuple((j, j == out) for j, f in enumerate(facts) if f is not None and f[1] == "gm")
    return sem, bsem, guard, gm
