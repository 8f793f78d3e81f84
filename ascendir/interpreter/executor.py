"""Compile an ascend module once into Python closures over pre-resolved value slots, then run it.

`compile_module(module, target, weights, timing_only, trace)` walks the module once:
* the host `func.func @main` becomes a list of closures over a register list `R` (one slot per
  SSA value); `ascend.launch` runs a compiled kernel;
* each `ascend.kernel` becomes a `KernelProgram`: its own register list, a list of closures for
  its body, a `CostEnv` (GM bandwidth share of the launch), and a cost cache per op keyed by the
  operand shapes (costs depend on shapes only, so uniform loops hit the cache).

Timing-only mode moves no data: GM and on-chip buffers are zero-stride views
(`np.broadcast_to(np.zeros((), dtype), shape)`) so subviews still have the right shapes, and
semantics functions are not called. Costs are computed identically.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, Pipe, space_of
from ascendir.dtypes import to_numpy_dtype
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter import registry
from ascendir.interpreter.cost import LEVELS, CostEnv, OpCost, copy_path, space_unit
from ascendir.interpreter.scalar import SCALAR_OPS
from ascendir.interpreter.timeline import NPIPES, PIPE_INDEX, PIPES, CoreState, FlagQueues
from ascendir.weights import WeightStore

NAME_ATTR = "onnx.name"
FLOPS = len(LEVELS)  # index of the flop counter in Frame.acct
_AIC_PIPES = frozenset({"M", "MTE1", "FIX"})
_AIV_PIPES = frozenset({"V"})
Closure = Callable[[], None]


class _Return(Exception):
    """Raised by func.return in the host program to hand back its values."""

    def __init__(self, values: list):
        self.values = values


class Frame:
    """Mutable state the closures of one program share."""

    __slots__ = ("R", "core", "flags", "flowq", "acct", "trace", "flows", "block", "flow_ids")

    def __init__(self, nslots: int = 0):
        self.R: list = [None] * nslots
        self.core: CoreState | None = None
        self.flags: FlagQueues | None = None
        self.flowq: FlagQueues | None = None
        self.acct: list[float] = [0.0] * (len(LEVELS) + 1)
        self.trace: list | None = None
        self.flows: list | None = None
        self.block = 0
        self.flow_ids = itertools.count()


@dataclass
class KernelRecord:
    """What one kernel launch did (raw; report.py turns it into the report dict)."""

    name: str
    block_dim: int
    core_type: str
    pipe_labels: list[str]  # label of each pipe slot ("M", or "aic.MTE2" in mixed kernels)
    cores: list[CoreState]
    acct: list[float]  # bytes per LEVELS, then flops
    launch_cycles: float
    gm_share: float  # bytes/cycle per GM stream
    gm_streams: int
    events: list = field(default_factory=list)  # (core, slot, start, cycles, name)
    flows: list = field(default_factory=list)  # (phase "s"/"f", core, slot, time, id)

    @property
    def body_cycles(self) -> float:
        return max((c.end() for c in self.cores), default=0.0)

    @property
    def cycles(self) -> float:
        return self.body_cycles + self.launch_cycles


@dataclass
class _KernelInfo:
    """Compile-time facts about the kernel whose body is being compiled."""

    name: str
    nunits: int
    env: CostEnv
    static_units: dict[Operation, int]  # flag op -> (src unit, dst unit) resolution helper input
    flag_keys: dict[tuple[int, int, int], int]
    alu: float
    timing_only: bool


def _np_dtype(t: MemRefType) -> np.dtype:
    return to_numpy_dtype(t.element_type)


def _zero_view(shape, dtype: np.dtype) -> np.ndarray:
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def io_names(fn: func.FuncOp, results: bool) -> list[str]:
    """`onnx.name` of each argument (or result) of `fn`; `arg{i}` / `out{i}` when absent."""
    attrs = fn.res_attrs if results else fn.arg_attrs
    n = len(fn.function_type.outputs.data if results else fn.function_type.inputs.data)
    names = []
    for i in range(n):
        d = attrs.data[i].data if attrs is not None and i < len(attrs.data) else {}
        a = d.get(NAME_ATTR)
        names.append(a.data if isinstance(a, StringAttr) else f"{'out' if results else 'arg'}{i}")
    return names


# ----------------------------------------------------------------------------------------------
# compiling a region
# ----------------------------------------------------------------------------------------------
class _Compiler:
    """Compiles the ops of one program (host function or kernel) into closures over `frame.R`."""

    def __init__(self, module: ModuleProg, frame: Frame, kernel: _KernelInfo | None):
        self.m = module
        self.F = frame
        self.k = kernel
        self.slots: dict[SSAValue, int] = {}

    # -- slots ------------------------------------------------------------------------------
    def slot(self, v: SSAValue) -> int:
        if v not in self.slots:
            self.slots[v] = len(self.slots)
            self.F.R.append(None)
        return self.slots[v]

    def block(self, block: Block) -> list[Closure]:
        out = []
        for op in block.ops:
            c = self.op(op)
            if c is not None:
                out.append(c)
        return out

    # -- dispatch ---------------------------------------------------------------------------
    def op(self, op: Operation) -> Closure | None:
        t = type(op)
        if t in SCALAR_OPS:
            return self.scalar(op)
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

    def scalar(self, op: Operation) -> Closure:
        fn = SCALAR_OPS[type(op)](op)
        R = self.F.R
        ins = [self.slot(v) for v in op.operands]
        out = self.slot(op.results[0])
        charge = self._charge_scalar() if not isinstance(op, arith.ConstantOp) else None
        if not ins:
            val = fn()

            def run() -> None:
                R[out] = val

            return run
        get = itemgetter(*ins)
        if len(ins) == 1:
            a = ins[0]
            if charge is None:

                def run() -> None:
                    R[out] = fn(R[a])

            else:

                def run() -> None:
                    R[out] = fn(R[a])
                    charge()

            return run
        if charge is None:

            def run() -> None:
                R[out] = fn(*get(R))

        else:

            def run() -> None:
                R[out] = fn(*get(R))
                charge()

        return run

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
        all_mem = all(mem)

        def resolve(c: OpCost) -> tuple:
            if not (c.cycles >= 0 and c.latency >= 0):
                raise AscendirError(f"{name} in kernel @{k.name}: negative or NaN duration ({c.cycles}, {c.latency}) from its cost function")
            if c.pipe not in PIPE_INDEX:
                raise AscendirError(f"{name}: cost function returned unknown pipe {c.pipe!r}")
            unit = _unit_of(c.pipe, c.unit, nunits)
            items = tuple((LEVELS.index(lv), float(b)) for lv, b in c.bytes.items() if b)
            return (unit * NPIPES + PIPE_INDEX[c.pipe], unit * NPIPES, float(c.cycles), float(c.latency), items, float(c.flops))

        def run() -> None:
            vals = get(R)
            if sem is not None:
                sem(*vals)
            key = tuple([v.shape for v in vals]) if all_mem else tuple(v.shape if m else v for v, m in zip(vals, mem))
            c = cache.get(key)
            if c is None:
                c = cache[key] = resolve(cost_fn(*vals))
            pid, sid, cyc, lat, items, flops = c
            core = F.core
            free = core.free
            t = free[pid]
            s = free[sid]
            if s > t:
                t = s
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
            if F.trace is not None:
                F.trace.append((core.index, pid, t, cyc, name))

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
        R = self.F.R
        out = self.slot(op.result)
        t = op.result.type
        shape, dtype = tuple(t.get_shape()), _np_dtype(t)
        if self.m.timing_only:
            view = _zero_view(shape, dtype)

            def run() -> None:
                R[out] = view

        else:

            def run() -> None:
                R[out] = np.zeros(shape, dtype)

        return run

    def weight(self, op: ascend.WeightOp) -> Closure:
        R = self.F.R
        out = self.slot(op.result)
        t = op.result.type
        shape, dtype = tuple(t.get_shape()), _np_dtype(t)
        sym = op.sym.root_reference.data
        if self.m.timing_only:
            view = _zero_view(shape, dtype)

            def run() -> None:
                R[out] = view

            return run
        cached: list = []

        def load() -> np.ndarray:
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

        return run

    def view(self, op: ascend.ViewOp) -> Closure:
        R = self.F.R
        src, out = self.slot(op.source), self.slot(op.result)
        t = op.result.type
        shape, dtype = tuple(t.get_shape()), _np_dtype(t)
        if self.m.timing_only:
            view = _zero_view(shape, dtype)

            def run() -> None:
                R[out] = view

            return run

        def run() -> None:
            v = R[src].view()
            try:
                v.shape = shape
            except AttributeError:
                raise AscendirError(f"ascend.view: source of shape {R[src].shape} is not contiguous; cannot view it as {shape}") from None
            R[out] = v

        return run

    def subview(self, op: memref.SubviewOp) -> Closure:
        R = self.F.R
        src, out = self.slot(op.source), self.slot(op.result)
        n = op.source.type.get_num_dims()

        def spec(static, dyn_vals) -> list[tuple[bool, int]]:
            it = iter(dyn_vals)
            return [(True, self.slot(next(it))) if s == DYNAMIC_INDEX else (False, s) for s in static]

        offs = spec(op.static_offsets.get_values(), op.offsets)
        sizes = spec(op.static_sizes.get_values(), op.sizes)
        strides = spec(op.static_strides.get_values(), op.strides)
        res_shape = list(op.result.type.get_shape())
        dropped = _dropped_dims([s if not d else DYNAMIC_INDEX for d, s in sizes], res_shape, n)
        where = f"memref.subview in {'kernel @' + self.k.name if self.k else 'the host function'}"
        charge = self._charge_scalar()
        dims = list(zip(offs, sizes, strides, [i in dropped for i in range(n)]))

        def run() -> None:
            a = R[src]
            idx = []
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
            R[out] = a[tuple(idx)]
            if charge is not None:
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
            if not timing:
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
        src, _dst, key = self._flag_slots(op)
        s_id = (src // NPIPES) * NPIPES

        def run() -> None:
            core = F.core
            free = core.free
            t = free[src]
            if core.done[src] > t:
                t = core.done[src]
            if free[s_id] > t:
                t = free[s_id]
            free[src] = t
            F.flags.queues[key].append(t)
            if F.trace is not None:
                fid = next(F.flow_ids)
                F.flowq.queues[key].append(fid)
                F.flows.append(("s", core.index, src, t, fid))

        return run

    def wait_flag(self, op: ascend.WaitFlagOp) -> Closure:
        F = self.F
        src, dst, key = self._flag_slots(op)
        kname = self.k.name
        text = f"ascend.wait_flag {op.src.data} -> {op.dst.data}, {op.event.value.data}"

        def run() -> None:
            q = F.flags.queues[key]
            if not q:
                raise AscendirError(
                    f"deadlock in kernel @{kname} (block {F.block}): {text} has no earlier matching "
                    f"ascend.set_flag {text.split(' ', 1)[1]} in program order"
                )
            t = q.popleft()
            core = F.core
            free = core.free
            if t > free[dst]:
                free[dst] = t
            if F.trace is not None:
                F.flows.append(("f", core.index, dst, free[dst], F.flowq.queues[key].popleft()))

        return run

    def barrier(self, op: ascend.PipeBarrierOp) -> Closure:
        F = self.F
        p = op.pipe.data
        if p == "ALL":

            def run_all() -> None:
                core = F.core
                t = core.end()
                core.free = [t] * len(core.free)

            return run_all
        if p not in PIPE_INDEX:
            raise AscendirError(f"ascend.pipe_barrier in kernel @{self.k.name}: unknown pipe {p}")
        ids = [u * NPIPES + PIPE_INDEX[p] for u in range(self.k.nunits)]
        if self.k.nunits > 1 and p in _AIC_PIPES:
            ids = ids[:1]
        elif self.k.nunits > 1 and p in _AIV_PIPES:
            ids = ids[1:]

        def run() -> None:
            core = F.core
            free, done = core.free, core.done
            for i in ids:
                s = free[(i // NPIPES) * NPIPES]
                t = max(free[i], done[i], s)
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

        def run() -> None:
            m.records.append(kp.run([R[a] for a in args]))

        return run

    def ret(self, op: func.ReturnOp) -> Closure:
        R = self.F.R
        vals = [self.slot(v) for v in op.arguments]

        def run() -> None:
            raise _Return([R[v] for v in vals])

        return run


def _unit_of(pipe: str, unit: str | None, nunits: int) -> int:
    if nunits == 1:
        return 0
    if unit is not None:
        return 0 if unit == "aic" else 1
    if pipe in _AIC_PIPES:
        return 0
    if pipe in _AIV_PIPES or pipe == "MTE3":
        return 1
    return 0


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


def _noop(self: _Compiler, op: Operation) -> None:
    return None


_HANDLERS: dict[type, Callable[[_Compiler, Operation], Closure | None]] = {
    scf.ForOp: _Compiler.for_,
    scf.IfOp: _Compiler.if_,
    scf.YieldOp: _noop,
    ascend.AllocOp: _Compiler.alloc,
    ascend.WeightOp: _Compiler.weight,
    ascend.ViewOp: _Compiler.view,
    memref.SubviewOp: _Compiler.subview,
    memref.LoadOp: _Compiler.load,
    memref.StoreOp: _Compiler.store,
    ascend.BlockIdxOp: _Compiler.block_idx,
    ascend.SetFlagOp: _Compiler.set_flag,
    ascend.WaitFlagOp: _Compiler.wait_flag,
    ascend.PipeBarrierOp: _Compiler.barrier,
    ascend.ReturnOp: _noop,
    ascend.LaunchOp: _Compiler.launch,
    func.ReturnOp: _Compiler.ret,
}


# ----------------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------------
def _static_pipe(op: Operation, target: HardwareConfig) -> tuple[str, str | None, bool] | None:
    """(pipe, unit, touches GM) of a built-in tile op known before running, else None."""
    if isinstance(op, ascend.CopyOp):
        src, dst, pipe = copy_path(op, target)
        return pipe.value, space_unit(src if src != "gm" else dst), "gm" in (src, dst)
    if isinstance(op, ascend.MmadOp):
        return "M", "aic", False
    if isinstance(op, ascend.GatherRowsOp):
        return "MTE2", "aiv", True
    if isinstance(op, ascend.VectorOp):
        return "V", "aiv", False
    return None


def _check_capacity(kernel: ascend.KernelOp, target: HardwareConfig) -> None:
    need: dict[str, int] = {}
    for op in kernel.walk():
        if isinstance(op, ascend.AllocOp):
            t = op.result.type
            space = space_of(t).value
            if space == "gm":
                continue
            nbytes = math.prod(t.get_shape()) * _np_dtype(t).itemsize
            align = target.align.get(space, 1)
            need[space] = need.get(space, 0) + -(-nbytes // align) * align
    for space, n in need.items():
        if space not in target.buffers:
            raise AscendirError(f"kernel @{kernel.sym_name.data}: {target.name} has no {space} buffer")
        if n > target.buffers[space]:
            raise AscendirError(
                f"kernel @{kernel.sym_name.data}: {space} buffers need {n} bytes but {target.name} has "
                f"{target.buffers[space]} bytes of {space} per core (summed over every ascend.alloc, aligned to "
                f"{target.align.get(space, 1)} B)"
            )


class KernelProgram:
    """One compiled `ascend.kernel`."""

    def __init__(self, m: ModuleProg, op: ascend.KernelOp):
        t = m.target
        self.name = op.sym_name.data
        self.block_dim = op.block_dim.value.data
        self.core_type = op.core_type.data
        self.m = m
        _check_capacity(op, t)
        self.nunits = 2 if (self.core_type == "mix" and t.split) else 1
        self.ncores = t.cores(self.core_type)
        if self.nunits == 1:
            self.labels = list(PIPES)
        else:
            self.labels = [f"{u}.{p}" for u in ("aic", "aiv") for p in PIPES]

        # pre-walk: static pipes/units of tile ops, GM streams, flag unit resolution
        order = list(op.body.walk())
        statics = {o: _static_pipe(o, t) for o in order}
        streams = {(_unit_of(sp[0], sp[1], self.nunits), sp[0]) for sp in statics.values() if sp is not None and sp[2]}
        self.gm_streams = max(1, len(streams))
        active = min(self.block_dim, self.ncores)
        gm_share = t.hbm_bytes_per_cycle / (active * self.gm_streams)
        env = CostEnv(t, gm_share)
        units = self._flag_units(order, statics)
        self.frame = Frame()
        info = _KernelInfo(self.name, self.nunits, env, units, {}, float(t.startup["scalar_alu"]), m.timing_only)
        comp = _Compiler(m, self.frame, info)
        block = op.body.block
        self.arg_slots = [comp.slot(a) for a in block.args]
        self.arg_types = list(block.arg_types)
        self.body = comp.block(block)
        self.nflags = max(1, len(info.flag_keys))
        self.env = env

    def _flag_units(self, order: list[Operation], statics: dict) -> dict[Operation, tuple[int, int]]:
        """(src unit, dst unit) of every flag op. In mixed kernels MTE2/MTE3/S exist on both units:
        take the unit of the nearest op on that pipe (before a set, after a wait), else the
        partner pipe's unit, else AIC."""
        res: dict[Operation, tuple[int, int]] = {}
        if self.nunits == 1:
            for o in order:
                if isinstance(o, ascend.FlagOp):
                    res[o] = (0, 0)
            return res
        pipes = [(statics[o][0], _unit_of(statics[o][0], statics[o][1], 2)) if statics.get(o) else None for o in order]

        def fixed(p: str) -> int | None:
            return 0 if p in _AIC_PIPES else 1 if p in _AIV_PIPES else None

        def nearest(i: int, p: str, step: int) -> int | None:
            j = i + step
            while 0 <= j < len(order):
                if pipes[j] is not None and pipes[j][0] == p:
                    return pipes[j][1]
                j += step
            return None

        by_name: dict[tuple[str, str, int], tuple[int, int]] = {}
        for i, o in enumerate(order):
            if not isinstance(o, ascend.FlagOp):
                continue
            s, d = o.src.data, o.dst.data
            su = fixed(s)
            if su is None:
                su = nearest(i, s, -1)
                su = nearest(i, s, +1) if su is None else su
            du = fixed(d)
            if du is None:
                du = nearest(i, d, +1)
                du = nearest(i, d, -1) if du is None else du
            if su is None:
                su = du if du is not None else 0
            if du is None:
                du = su
            # a set and its waits must agree: the first resolution of a (src, dst, id) wins
            res[o] = by_name.setdefault((s, d, o.event.value.data), (su, du))
        return res

    def run(self, args: list[np.ndarray]) -> KernelRecord:
        F, R = self.frame, self.frame.R
        for i, (s, a, ty) in enumerate(zip(self.arg_slots, args, self.arg_types)):
            if tuple(a.shape) != tuple(ty.get_shape()):
                raise AscendirError(f"ascend.launch @{self.name}: argument {i} has shape {a.shape}, kernel expects {tuple(ty.get_shape())}")
            R[s] = a
        nslots = NPIPES * self.nunits
        cores = [CoreState(i, nslots) for i in range(min(self.block_dim, self.ncores))]
        F.acct = [0.0] * (len(LEVELS) + 1)
        F.flags = FlagQueues(self.nflags)
        tracing = self.m.trace
        F.trace = [] if tracing else None
        F.flows = [] if tracing else None
        F.flowq = FlagQueues(self.nflags) if tracing else None
        body = self.body
        for b in range(self.block_dim):
            core = cores[b % len(cores)]
            core.start_block()
            F.core = core
            F.block = b
            F.flags.reset()
            if tracing:
                F.flowq.reset()
            for f in body:
                f()
        return KernelRecord(
            name=self.name,
            block_dim=self.block_dim,
            core_type=self.core_type,
            pipe_labels=self.labels,
            cores=cores,
            acct=F.acct,
            launch_cycles=float(self.m.target.kernel_launch_cycles),
            gm_share=self.env.gm_share,
            gm_streams=self.gm_streams,
            events=F.trace or [],
            flows=F.flows or [],
        )


# ----------------------------------------------------------------------------------------------
# module
# ----------------------------------------------------------------------------------------------
class ModuleProg:
    """A compiled module: run it with `run(inputs)` as many times as needed."""

    def __init__(self, module: ModuleOp, target: HardwareConfig, weights: WeightStore | None, timing_only: bool, trace: bool):
        self.target = target
        self.weights = weights if weights is not None else WeightStore()
        self.timing_only = timing_only
        self.trace = trace
        self.records: list[KernelRecord] = []
        self.kernels: dict[str, KernelProgram] = {}
        main = None
        for op in module.ops:
            if isinstance(op, ascend.KernelOp):
                self.kernels[op.sym_name.data] = KernelProgram(self, op)
            elif isinstance(op, func.FuncOp) and op.sym_name.data == "main":
                main = op
        if main is None:
            raise AscendirError("module has no func.func @main (the host function launching the kernels)")
        self.arg_names = io_names(main, results=False)
        self.res_names = io_names(main, results=True)
        self.arg_types = list(main.function_type.inputs.data)
        self.frame = Frame()
        comp = _Compiler(self, self.frame, None)
        blk = main.body.block
        self.arg_slots = [comp.slot(a) for a in blk.args]
        self.body = comp.block(blk)

    def _input(self, name: str, value, ty: MemRefType) -> np.ndarray:
        shape, dtype = tuple(ty.get_shape()), _np_dtype(ty)
        if self.timing_only:
            return _zero_view(shape, dtype)
        arr = np.asarray(value)
        if arr.shape != shape:
            if arr.size == math.prod(shape) and arr.size:
                arr = arr.reshape(shape)
            else:
                raise AscendirError(f"input '{name}' has shape {arr.shape}, the module expects {shape}")
        return np.array(arr, dtype=dtype, copy=True)

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[KernelRecord]]:
        R = self.frame.R
        for name, s, ty in zip(self.arg_names, self.arg_slots, self.arg_types):
            if name not in inputs and not self.timing_only:
                raise AscendirError(f"missing input '{name}' (inputs: {', '.join(self.arg_names)})")
            R[s] = self._input(name, inputs.get(name), ty)
        self.records = []
        try:
            for f in self.body:
                f()
            values: list = []
        except _Return as r:
            values = r.values
        outs = {}
        for name, v in zip(self.res_names, values):
            outs[name] = v if self.timing_only else np.array(v, copy=True)
        return outs, self.records


def compile_module(module: ModuleOp, target: HardwareConfig, weights: WeightStore | None = None, timing_only: bool = False, trace: bool = False) -> ModuleProg:
    """Compile `module` (ascend kernels + host @main) for `target`.

    Raises:
        AscendirError: unsupported ops, missing paths on the target, buffer capacity overflow.
    """
    return ModuleProg(module, target, weights, timing_only, trace)
