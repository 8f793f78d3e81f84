"""Compile an ascend module once (kernels + host `func.func @main`) and run it.

`compile_module(module, target, weights, timing_only, trace)` walks the module once: each
`ascend.kernel` becomes a `KernelProgram` (kernel.py) and the host function a list of closures
(compiler.py) in which `ascend.launch` runs a kernel. `ModuleProg.run(inputs)` can be called
many times.

Timing-only mode moves no data: GM and on-chip buffers are zero-stride views
(`np.broadcast_to(np.zeros((), dtype), shape)`) so subviews still have the right shapes, and
semantics functions are not called. Costs are computed identically.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr

from ascendir.dialects import ascend
from ascendir.dialects.ascend.ops_scalar import ADDRESS_DATA_ATTR, MOE_BLOCK_ATTR
from ascendir.costmodel.moe_routing import RoutingSpec, ep_routed, init_routing, make_routing, parse_ep_block
from ascendir.errors import AscendirError
from ascendir.hardware.config import HardwareConfig
from ascendir.interpreter.accel import Accel
from ascendir.interpreter.accel.memo import LaunchMemo
from ascendir.interpreter.exec.compiler import Compiler, Return, np_dtype, zero_view
from ascendir.interpreter.exec.walk import OpTree
from ascendir.interpreter.exec.wide import GmShadows
from ascendir.interpreter.sim.comm import CommKernelProgram, is_comm_kernel
from ascendir.interpreter.sim.kernel import KernelProgram
from ascendir.interpreter.timing.comm_stream import CommStream
from ascendir.interpreter.timing.l2 import L2Cache, contiguous_strides
from ascendir.interpreter.state import FLOPS, Frame, KernelRecord
from ascendir.weights import WeightStore

__all__ = ["compile_module", "ModuleProg", "io_names", "FLOPS", "KernelRecord"]
NAME_ATTR = "onnx.name"


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


class ModuleProg:
    """A compiled module: run it with `run(inputs)` as many times as needed."""

    def __init__(self, module: ModuleOp, target: HardwareConfig, weights: WeightStore | None, timing_only: bool, trace: bool,
                 extrapolate: bool = True, check_races: bool | None = None, accel: Accel | None = None,
                 moe_routing: Mapping[str, np.ndarray] | None = None, launch_memo: LaunchMemo | None = None):
        self.target = target
        # timing-only: each MoE block's TopK indices [tokens, k] (api/moe_report.py), written into
        # its init-routing kernel's outputs so the grouped MatMuls after it follow that routing;
        # a block without one is routed uniformly (seeded) and `assumed` says so in the report
        self.moe_routing = dict(moe_routing or {})
        self.assumed: list[str] = []
        # the speed-ups that run (accel/); `extrapolate=False` is Accel(steady=False)
        self.accel = accel if accel is not None else Accel()
        if not extrapolate:
            self.accel = replace(self.accel, steady=False)
        self.extrapolate = self.accel.steady  # timing-only: steady-state loops are extrapolated (steady.py)
        self.weights = weights if weights is not None else WeightStore()
        self.timing_only = timing_only
        # race.py: always with numerics; a timing-only sweep checks when asked (a race is a
        # property of the program, not of the timing, and the check costs a third of the run)
        self.check_races = (not timing_only) if check_races is None else check_races
        self.trace = trace
        self.trace_sink = None  # report/trace.py TraceWriter: each launch's slices as it ends (None: kept in the record)
        self.records: list[KernelRecord] = []
        self.kernels: dict[str, KernelProgram] = {}
        self.l2 = L2Cache(target) if target.memory.l2_model == "tile" else None
        self.shadows = None if timing_only else GmShadows()  # fp32 copies of GM fp16 cube operands (exec/wide.py)
        self.clock = 0.0  # chip time (cycles) at which the next kernel launches
        self.stream = CommStream()  # background comm kernels (MC2: timing/comm_stream.py)
        self.comm = None  # the cluster's side of this device (sim/cluster.py DeviceComm); None: a lone chip
        # identical timing-only launches (memo.py): `launch_memo` when given (shared with other
        # runs), else one of this program's own; `memo` is its entries (None: off)
        self.memo_ids = launch_memo if launch_memo is not None and self.accel.launch_memo else LaunchMemo()
        self.memo_ids.bind((target, timing_only, trace, self.check_races, self.accel))
        self.memo: dict | None = self.memo_ids.entries if self.accel.launch_memo else None
        self.memo_hits = 0
        self._roots = 0
        main = None
        self.kernel_ops: dict[str, ascend.KernelOp] = {}
        for op in module.ops:
            if isinstance(op, ascend.KernelOp):
                self.kernel_ops[op.sym_name.data] = op
                tree = OpTree(op)  # (one walk: the comm test's and the kernel's compile's)
                self.kernels[op.sym_name.data] = CommKernelProgram(self, op) if is_comm_kernel(op, tree.ops) else KernelProgram(self, op, tree=tree)
            elif isinstance(op, func.FuncOp) and op.sym_name.data == "main":
                main = op
        if main is None:
            raise AscendirError("module has no func.func @main (the host function launching the kernels)")
        # launches @main makes (loops counted once) and a callback(done, launches) after each one
        self.launches = sum(isinstance(o, ascend.LaunchOp) for o in main.walk())
        self.progress = None
        self.arg_names = io_names(main, results=False)
        self.res_names = io_names(main, results=True)
        self.arg_types = list(main.function_type.inputs.data)
        attrs = main.arg_attrs.data if main.arg_attrs is not None else ()
        # inputs kept in timing-only runs too: what kernels address by (a block table)
        self.address_args = {n for n, d in zip(self.arg_names, attrs) if ADDRESS_DATA_ATTR in d.data}
        self.frame = Frame()
        comp = Compiler(self, self.frame, None)
        blk = main.body.block
        self.arg_slots = [comp.slot(a) for a in blk.args]
        self.body = comp.block(blk)

    def close(self) -> None:
        """Drop the compiled program: it cannot run afterwards; the outputs and records of its runs
        stay valid. The program's closures refer back to it (and kernels' loop memos to their
        frames): reference cycles, which the cyclic collector would free only at its next full
        pass (~300,000 objects, ~0.4-0.5 s CPU after a 7B layer), while without them reference
        counting frees the program as soon as the last reference goes."""
        for kp in self.kernels.values():
            if isinstance(kp, KernelProgram):  # (a comm kernel's refer to this program only)
                kp.close()
        self.kernels = {}
        self.body = None
        self.__dict__.pop("_timing_view", None)  # (sim/kernel.py timing_view: it holds this program)

    def routed_outputs(self, block: str, rows: int) -> tuple[np.ndarray, ...]:
        """(sorted_rows, dest, group_list) of MoE block `block` for a timing-only init-routing
        launch over `rows` (token, k) pairs: from `moe_routing`, else a uniform routing.

        An expert-parallel launch (costmodel.moe_routing.ep_block names it) takes its device's part
        of the block's routing (ep_routed; the device is this chip's rank in the cluster).

        Raises: AscendirError when the given routing does not hold `rows` pairs."""
        ep = parse_ep_block(block)
        if ep is not None:
            base, n, experts, role = ep
            idx = self.moe_routing.get(base)
            if idx is None:
                raise AscendirError(f"MoE block {base}: an expert-parallel timing-only run needs the block's routing "
                                    "(--inputs or --moe-routing)")
            rank = self.comm.device if self.comm is not None else 0
            return ep_routed(idx, n, experts, rank, role)
        experts = None
        for k in self.kernel_ops.values():
            a = k.attributes.get(MOE_BLOCK_ATTR)
            if a is not None and a.data == block:
                experts = k.body.block.args[3].type.get_shape()[0] - 1
        idx = self.moe_routing.get(block)
        if idx is None:
            idx = make_routing(RoutingSpec("uniform"), rows, 1, experts)
            self.assumed.append(f"MoE block {block}: a timing-only run without its routing; expert ids assumed uniform "
                                "(seeded, each (token, k) pair drawn alone): give the routing (--inputs or --moe-routing)")
            self.moe_routing[block] = idx
        idx = np.asarray(idx)
        if idx.size != rows:
            raise AscendirError(f"MoE block {block}: the routing holds {idx.size} (token, k) pairs, the model routes {rows}")
        return init_routing(idx, experts)

    def new_root(self) -> int:
        """A fresh id for a GM buffer (address tags, l2.py)."""
        self._roots += 1
        return self._roots

    def _input(self, name: str, value, ty: MemRefType) -> np.ndarray:
        shape, dtype = tuple(ty.get_shape()), np_dtype(ty)
        if self.timing_only and (value is None or name not in self.address_args):
            return zero_view(shape, dtype)
        arr = np.asarray(value)
        if arr.shape != shape:
            if arr.size == math.prod(shape) and arr.size:
                arr = arr.reshape(shape)
            else:
                raise AscendirError(f"input '{name}' has shape {arr.shape}, the module expects {shape}")
        return np.array(arr, dtype=dtype, copy=True)

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[KernelRecord]]:
        """The outputs by name and the launches' records of one run on `inputs` (by name).

        Raises: AscendirError (missing or misshapen inputs, what the kernels raise, a closed program)."""
        if self.body is None:
            raise AscendirError("this program was closed (ModuleProg.close): compile the module again")
        R, A = self.frame.values, self.frame.gm_tags
        for name, s, ty in zip(self.arg_names, self.arg_slots, self.arg_types):
            if name not in inputs and not self.timing_only:
                raise AscendirError(f"missing input '{name}' (inputs: {', '.join(self.arg_names)})")
            R[s] = self._input(name, inputs.get(name), ty)
            A[s] = (("input", name), 0, contiguous_strides(ty.get_shape()))
        self.records = []
        self.clock = 0.0
        self.stream.reset()
        if self.l2 is not None:
            self.l2.reset()
        with gc_paused(self.accel.gc_pause):
            try:
                for f in self.body:
                    f()
                values: list = []
            except Return as r:
                values = r.values
        self.clock = self.stream.join(self.clock)  # nothing of a run is still in flight at its end
        outs = {}
        for name, v in zip(self.res_names, values):
            outs[name] = v if self.timing_only else np.array(v, copy=True)
        return outs, self.records


def compile_module(module: ModuleOp, target: HardwareConfig, weights: WeightStore | None = None, timing_only: bool = False, trace: bool = False,
                   extrapolate: bool = True, check_races: bool | None = None, accel: Accel | None = None,
                   moe_routing: Mapping[str, np.ndarray] | None = None, launch_memo: LaunchMemo | None = None) -> ModuleProg:
    """Compile `module` (ascend kernels + host @main) for `target`. `accel` picks the speed-ups
    (accel/__init__.py; default all); `extrapolate=False` is `Accel(steady=False)`: every loop
    iteration runs in timing-only mode too (the reference for steady.py's extrapolation).
    `check_races` (race.py) defaults to on with numerics and off in timing-only mode.
    `moe_routing` (timing-only): MoE block name -> its TopK indices [tokens, k] (ModuleProg).
    `launch_memo`: a launch memo (accel/memo.py) to use and fill, shared with earlier runs on
    the same target with the same options (e.g. the decode steps of `generate`); default one of
    the program's own.

    Raises:
        AscendirError: unsupported ops, missing paths on the target, buffer capacity overflow.
        ValueError: `launch_memo` served a run on another target or with other options.
    """
    with gc_paused(accel is None or accel.gc_pause):
        return ModuleProg(module, target, weights, timing_only, trace, extrapolate, check_races, accel, moe_routing, launch_memo)


@contextmanager
def gc_paused(pause: bool = True):
    """Pause Python's cyclic garbage collector (if on) for the block (`Accel.gc_pause`; nothing when
    `pause` is False). Compiling and running allocate many containers that live to the end
    (closures, GM logs, stored loop executions): the collector's generational passes keep walking
    them and find next to nothing (a 4096^3 timing-only run leaves no cyclic garbage; a compile a
    few thousand objects, collected after the block), yet cost about 1 % of the instructions
    (callgrind) and 3-4 % of the wall time of benchmarks/interpreter_speed.py's 4096^3 run, 8-13 %
    of its 7B 32-layer run (time inside gc.callbacks' start/stop)."""
    was = pause and gc.isenabled()
    if was:
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
