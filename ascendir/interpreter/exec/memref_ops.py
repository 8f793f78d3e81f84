"""Buffers and views: ascend.alloc, ascend.weight, ascend.view, memref.subview (with its GM
address tag and its cost), memref.load / store."""

from __future__ import annotations

import math
from operator import itemgetter
import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import DYNAMIC_INDEX
from ascendir.costmodel import quantise
from ascendir.costmodel.ops import get_value_cycles
from ascendir.dialects import ascend
from ascendir.dialects.ascend import subblock
from ascendir.dtypes import dense_value, packed_nbytes
from ascendir.errors import AscendirError
from ascendir.interpreter.timing.dcache import ScalarDCache
from ascendir.interpreter.timing.l2 import contiguous_strides
from ascendir.interpreter.check.race import ChipBuffer
from ascendir.interpreter.exec.walk import Subview
from ascendir.interpreter.exec.common import Closure, np_dtype, zero_view
from ascendir.interpreter.exec.wide import storage_dtype
from ascendir.interpreter.exec.scalar_codegen import charge_lines, generated

MEMO_VIEWS = 4096  # views a data walk's subview remembers per source (`_subview_memo`)
# the timed subviews' results, one per (shape, dtype) for every subview op of every kernel: a
# zero view is read-only and holds no data, so any op may share it (a view per op and shape cost
# ~10 us per op, thousands of ops per kernel, the first time each ran)
_ZERO_VIEWS: dict = {}
# the form of a numerics subview (`_subview_code`: per dim its static values, which are dynamic,
# dropped; charged or not) -> its generated factory, shared by every subview of that form
_FACTORIES: dict[tuple, object] = {}
# the same for timed subviews of static sizes and strides (`_subview_timing_static`)
_TIMING_FACTORIES: dict[tuple, object] = {}


class MemrefOps:
    """Compiler part: buffers and views (mixed into compiler.Compiler)."""

    # -- memory -----------------------------------------------------------------------------
    def alloc(self, op: ascend.AllocOp) -> Closure:
        R, A = self.F.values, self.F.gm_tags
        (res,) = op.results  # (xDSL's field: `op.result` is a chain of Python calls, walk.py `operands_of`)
        out = self.slot(res)
        t = res.type
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
            hint = res.name_hint
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
            sdtype = storage_dtype(space, dtype)  # wide.py: fp16 cube operands held in fp32
            F = self.F

            def run() -> None:
                # (a batched data walk's blocks take slices of one buffer per alloc: exec/tape.py)
                R[out] = np.zeros(shape, sdtype) if F.tape is None or gm else F.tape.zeros(out, shape, sdtype)
                A[out] = (new_root(), 0, strides) if gm else chip_tag

        return run

    def weight(self, op: ascend.WeightOp) -> Closure:
        R, A = self.F.values, self.F.gm_tags
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
                # reshape: ascontiguousarray makes a 0-d array 1-d
                return np.ascontiguousarray(dense_value(op.value), dtype=dtype).reshape(shape)
            if sym not in self.m.weights:
                raise AscendirError(f"ascend.weight @{sym}: not in the WeightStore")
            arr = np.asarray(self.m.weights[sym])
            if arr.shape != shape:
                if arr.size != math.prod(shape):
                    raise AscendirError(f"ascend.weight @{sym}: store holds shape {arr.shape}, IR expects {shape}")
                arr = arr.reshape(shape)
            return np.ascontiguousarray(arr, dtype=dtype).reshape(shape)

        def run() -> None:
            if not cached:
                cached.append(load())
            R[out] = cached[0]
            A[out] = tag

        return run

    def view(self, op: ascend.ViewOp) -> Closure:
        R, A = self.F.values, self.F.gm_tags
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
        R = self.F.values
        sv = self.k.tree.subview(op) if self.k is not None and self.k.tree is not None else Subview(op)
        dropped = sv.dropped()
        src, out = self.slot(sv.source), self.slot(op.results[0])

        def spec(static, dyn_vals) -> list[tuple[bool, int]]:
            it = iter(dyn_vals)
            return [(True, self.slot(next(it))) if s == DYNAMIC_INDEX else (False, s) for s in static]

        offs = spec(sv.static_offsets, sv.offsets)
        sizes = spec(sv.static_sizes, sv.sizes)
        strides = spec(sv.static_strides, sv.strides)
        where = f"memref.subview in {'kernel @' + self.k.name if self.k else 'the host function'}"
        charge = self._charge_scalar(op)
        dims = list(zip(offs, sizes, strides, dropped))

        if self.m.timing_only:
            s_ids = self.k.s_ids(op) if charge is not None and self.k is not None else None
            return self._subview_timing(src, out, dims, where, charge, s_ids)

        run = self._subview_code(src, out, dims, where, charge)
        if self.k is not None and self.k.data_only:  # (charges nothing: charge is None)
            return self._subview_memo(run, src, out, dims)
        return run

    def _subview_code(self, src: int, out: int, dims: list, where: str, charge) -> Closure:
        """A numerics subview as generated straight-line Python: per dim (in order) its bounds
        checked, the view indexed with all its slices at once, the address tag's offset and
        strides summed as the loop over dims would (terms of a static 0 offset or a unit stride
        left out: the tags are ints). `dims`: per source dim ((dynamic, slot or value) of the
        offset, size and stride, dropped). The slots are the generated factory's arguments, so
        subviews of one form (static values, dropped dims) share its compiled code.

        Raises (from the closure): AscendirError naming the first dim out of bounds."""
        args = {"R": self.F.values, "A": self.F.gm_tags, "charge": charge, "where": where, "src": src, "out": out}
        for i, dim in enumerate(dims):
            for what, (dyn, x) in zip("ost", dim[:3]):
                if dyn:
                    args[f"{what}{i}_slot"] = x
        # (its source is a function of the form alone: the slots are arguments, the rest static)
        form = (tuple((od, None if od else o, sd, None if sd else sz, td, None if td else st, drop)
                      for (od, o), (sd, sz), (td, st), drop in dims), charge is not None)
        make = _FACTORIES.get(form)
        if make is None:
            make = self._subview_factory(dims, charge is not None)
            if len(_FACTORIES) < 4096:
                _FACTORIES[form] = make
        return make(**args)

    @staticmethod
    def _subview_factory(dims: list, charged: bool):
        """The generated factory of `_subview_code` for subviews of the form of `dims` (its
        dynamic entries' slots are the factory's arguments) and `charged`."""
        params = ["R", "A", "charge", "where", "src", "out"]
        lines = ["a = R[src]", "sh = a.shape"]
        index, offset, strides = [], ["tag[1]"], []
        for i, ((od, o), (sd, sz), (td, st), drop) in enumerate(dims):
            names = []
            for what, (dyn, x) in (("o", (od, o)), ("s", (sd, sz)), ("t", (td, st))):
                if dyn:
                    params.append(f"{what}{i}_slot")
                    lines.append(f"{what}{i} = R[{what}{i}_slot]")
                names.append(f"{what}{i}" if dyn else str(x))
            on, sn, tn = names
            bad = [f"{on} < 0"] if od else (["True"] if o < 0 else [])
            bad += [f"{sn} < 0"] if sd else (["True"] if sz < 0 else [])
            bad += [f"{tn} < 1"] if td else (["True"] if st < 1 else [])
            if sd or td:
                bad.append(f"({sn} > 0 and {on} + ({sn} - 1) * {tn} >= sh[{i}])")
                stop = f"({on} + ({sn} - 1) * {tn} + 1 if {sn} else {on})"
            else:
                stop = f"{on} + {(sz - 1) * st + 1}" if sz else on
                if sz > 0:
                    bad.append(f"{on} + {(sz - 1) * st} >= sh[{i}]")
            if bad:
                lines.append(f"if {' or '.join(bad)}:")
                lines.append(f"    raise _oob(where, {i}, {on}, {sn}, {tn}, sh[{i}])")
            index.append(on if drop else f"{on}:{stop}:{tn}")
            if od or o != 0:
                offset.append(f"{on} * tst[{i}]")
            if not drop:
                strides.append(f"tst[{i}]" if not td and st == 1 else f"tst[{i}] * {tn}")
        lines += ["tag = A[src]", f"R[out] = a[{''.join(x + ', ' for x in index) or '()'}]",
                  "if tag is None:", "    A[out] = None", "else:", "    tst = tag[2]",
                  f"    A[out] = (tag[0], {' + '.join(offset)}, ({''.join(x + ', ' for x in strides)}))"]
        if charged:
            lines.append("charge()")
        head = f"def make({', '.join(params)}):\n    def run() -> None:"
        return generated(head, ["    " + x for x in lines] + ["return run"], {"_oob": _out_of_bounds}, "make")

    def _subview_memo(self, run: Closure, src: int, out: int, dims: list) -> Closure:
        """A data walk's subview (`run`) remembered per value of its dynamic operands while its
        source (the array and its address tag, the same objects) stays: loops revisit the same
        views of one block's buffers, and numpy makes a view object per indexing. The view
        shares the source's data, so a remembered one reads and writes what a new one would; its
        tag is the same tuple. At most MEMO_VIEWS views per source."""
        R, A = self.F.values, self.F.gm_tags
        dyn = [x for dim in dims for (d, x) in dim[:3] if d]
        get_dyn = itemgetter(*dyn) if len(dyn) > 1 else (lambda R, s=dyn[0]: R[s]) if dyn else (lambda R: None)
        table: dict = {}
        last_a = last_tag = object()  # (held: their identities stay valid)

        def memo() -> None:
            nonlocal table, last_a, last_tag
            a, tag = R[src], A[src]
            if a is not last_a or tag is not last_tag:
                table, last_a, last_tag = {}, a, tag
            key = get_dyn(R)
            got = table.get(key)
            if got is None:
                run()
                if len(table) < MEMO_VIEWS:
                    table[key] = (R[out], A[out])
            else:
                R[out], A[out] = got

        return memo

    def _subview_timing(self, src: int, out: int, dims: list, where: str, charge, s_ids: list[int] | None = None) -> Closure:
        """Timing-only subview: buffers are zero-stride views (no data), so only the result shape
        and the GM address tag matter; views are shared per (shape, dtype) instead of indexing
        numpy every time (`_ZERO_VIEWS`). Same bounds checks as the numerics path. `s_ids`: the
        S pipe slots `charge` charges (KernelInfo.s_ids), None when not known."""
        R, A, F = self.F.values, self.F.gm_tags, self.F
        if all(not sd and not td and s >= 0 and st >= 1 and (od or o >= 0) for (od, o), (sd, s), (td, st), _ in dims):
            return self._subview_timing_static(src, out, dims, where, charge, s_ids)
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
        get_dyn = itemgetter(*dyn) if dyn else (lambda R: None)  # (one slot: its value, in one C call)
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
            nst = tuple(nst)
            return _zero_view(tuple(res), a.dtype), off, strides.setdefault(nst, nst)

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

    def _subview_timing_static(self, src: int, out: int, dims: list, where: str, charge, s_ids: list[int] | None) -> Closure:
        """`_subview_timing` of a subview whose sizes and strides are static (and valid), as
        generated straight-line Python: its result view is then one object per source dtype and
        its strides one per source tag strides, so nothing is looked up per run but the offsets,
        which are bounds-checked and summed into the address tag as there (its memo of results
        cost more than this), and the scalar charge on the S pipes `s_ids` is written inline
        (`charge` called when they are not known). Same results, same bounds checks and errors.

        Raises (from the closure): AscendirError naming the first dim out of bounds."""
        args = {"R": self.F.values, "A": self.F.gm_tags, "F": self.F, "charge": charge, "where": where, "src": src, "out": out,
                "alu": self.k.alu if self.k is not None else 0.0, "res": tuple(sz for _, (_, sz), _, drop in dims if not drop)}
        for i, ((od, o), (_, sz), (_, st), _) in enumerate(dims):
            args[f"o{i}_slot" if od else f"so{i}"] = o
            args[f"z{i}"], args[f"t{i}"], args[f"e{i}"] = sz, st, (sz - 1) * st
        inline = tuple(s_ids) if charge is not None and s_ids is not None else None  # the S charge inline
        # (the static values are the factory's arguments too: subviews of one form share its code)
        form = (tuple((od, not od and o == 0, sz > 0, st == 1, drop) for (od, o), (_, sz), (_, st), drop in dims),
                inline if inline is not None else charge is not None)
        make = _TIMING_FACTORIES.get(form)
        if make is None:
            make = self._subview_timing_factory(form)
            if len(_TIMING_FACTORIES) < 4096:
                _TIMING_FACTORIES[form] = make
        return make(**args)

    @staticmethod
    def _subview_timing_factory(form: tuple):
        """The generated factory of `_subview_timing_static` for subviews of `form`: per dim
        (dynamic offset, static offset 0, size > 0, stride 1, dropped), then the S pipe slots
        charged inline (a tuple), True (`charge` called) or False. Its arguments: the frame's
        lists, the slots, per dim i the dynamic offset's slot o{i}_slot or the static offset
        so{i}, the size z{i}, stride t{i} and extent e{i} = (z{i} - 1) * t{i}; `res`: the
        result shape."""
        dims, charged = form
        params = ["R", "A", "F", "charge", "alu", "where", "src", "out", "res"]
        lines = ["nonlocal last_a, last_v, last_sh, last_tst, last_nst", "a = R[src]",
                 "if a is not last_a:  # (its view: one per result shape and source dtype; its shape)",
                 "    last_v = _view(res, a.dtype)", "    last_sh = a.shape", "    last_a = a", "sh = last_sh"]
        offs, nst = [], []
        for i, (od, zero, sized, unit, drop) in enumerate(dims):
            params += [f"o{i}_slot" if od else f"so{i}", f"z{i}", f"t{i}", f"e{i}"]
            if od:
                lines.append(f"o{i} = R[o{i}_slot]")
            on = f"o{i}" if od else "0" if zero else f"so{i}"
            # (the checks of `compute`: size, stride and a static offset are valid, so the
            # offset and the end)
            bad = [f"{on} < 0"] if od else []
            if sized:
                bad.append(f"{on} + e{i} >= sh[{i}]")
            if bad:
                lines.append(f"if {' or '.join(bad)}:")
                lines.append(f"    raise _oob(where, {i}, {on}, z{i}, t{i}, sh[{i}])")
            if not zero:
                offs.append(f"{on} * tst[{i}]")
            if not drop:
                nst.append(f"tst[{i}]" if unit else f"tst[{i}] * t{i}")
        lines += ["R[out] = last_v", "tag = A[src]", "if tag is None:", "    A[out] = None", "else:", "    tst = tag[2]",
                  "    if tst is not last_tst:  # (the strides: interned, as `_subview_timing` interns them)",
                  f"        nst = ({''.join(x + ', ' for x in nst)})", "        last_nst = strides.setdefault(nst, nst)",
                  "        last_tst = tst",
                  f"    A[out] = (tag[0], tag[1] + {' + '.join(offs) or '0'}, last_nst)"]
        if type(charged) is tuple:  # (as `_charge_scalar`'s charge: S pipe by S pipe, free then busy)
            lines += charge_lines(charged)
        elif charged:
            lines.append("charge()")
        head = (f"def make({', '.join(params)}):\n    strides = {{}}\n    last_a = last_v = last_sh = last_tst = last_nst = _NONE\n"
                "    def run() -> None:")
        return generated(head, ["    " + x for x in lines] + ["return run"], {"_oob": _out_of_bounds, "_view": _zero_view, "_NONE": object()}, "make")

    def load(self, op: memref.LoadOp) -> Closure:
        R = self.F.values
        src = self.slot(op.memref)
        idx = [self.slot(v) for v in op.indices]
        out = self.slot(op.res)
        charge = self._charge_scalar(op)

        def run() -> None:
            a = R[src]
            R[out] = a[tuple(R[i] for i in idx)].item()
            if charge is not None:
                charge()

        return run

    def get_value(self, op: ascend.GetValueOp) -> Closure:
        """The element as an int; the S pipe of each unit running the read (a mix kernel's units
        whose ops use the value, scalar_units.py) waits `get_value_cycles`: from GM, a hit or a
        miss of that unit's DCache (timing/dcache.py, `Frame.dcaches`), whose line is the
        element's byte offset in its GM buffer (the address tag: the same on the timing-only
        twin's zero views). It reads data in timing-only runs too: a buffer the host filled with
        a routing (sim/chip.py `moe_routing`) holds real values there, any other one reads zeros."""
        R, A = self.F.values, self.F.gm_tags
        src = self.slot(op.source)
        idx = [self.slot(v) for v in op.indices]
        out = self.slot(op.result)
        if self.k is None:
            raise AscendirError("ascend.get_value in the host function: it runs inside ascend.kernel only")
        F = self.F
        target = self.k.env.target
        s_ids = self.k.s_ids(op)
        if ascend.space_of(op.source.type).value != "gm":
            cyc = quantise(get_value_cycles(op, target))

            def run() -> None:
                R[out] = int(R[src][tuple(R[i] for i in idx)])
                c = F.core
                for s in s_ids:
                    c.free[s] += cyc
                    c.busy[s] += cyc

            return run
        hit_cyc, miss_cyc = quantise(get_value_cycles(op, target, hit=True)), quantise(get_value_cycles(op, target))
        line_bytes = target.memory.dcache_line_bytes
        nlines = target.memory.dcache_bytes // line_bytes
        itemsize = np_dtype(op.source.type).itemsize

        def run() -> None:
            ix = tuple(R[i] for i in idx)
            R[out] = int(R[src][ix])
            tag = A[src]
            # without an address tag (a kernel run alone, tags unknown): the operand's own layout
            root, off, st = tag if tag is not None else (("untagged", src), 0, contiguous_strides(R[src].shape))
            line = (root, (off + sum(i * k for i, k in zip(ix, st))) * itemsize // line_bytes)
            c = F.core
            caches = F.dcaches
            for s in s_ids:
                dc = caches.get((c.index, s))
                if dc is None:
                    dc = caches[(c.index, s)] = ScalarDCache(nlines)
                cyc = hit_cyc if dc.read(line) else miss_cyc
                c.free[s] += cyc
                c.busy[s] += cyc

        return run

    def store(self, op: memref.StoreOp) -> Closure:
        R = self.F.values
        val, dst = self.slot(op.value), self.slot(op.memref)
        idx = [self.slot(v) for v in op.indices]
        charge = self._charge_scalar(op)
        timing = self.m.timing_only
        t = op.memref.type
        space, dtype = ascend.space_of(t).value, np_dtype(t)
        # a widened buffer (wide.py) gets the value its fp16 element would hold; a GM write goes
        # into the launch's fp32 copy of that buffer too
        narrow = dtype if storage_dtype(space, dtype) != dtype else None
        F, gm = self.F, space == "gm"

        def run() -> None:
            if not timing and F.numerics_on:
                a = R[dst]
                at = tuple(R[i] for i in idx)
                a[at] = R[val] if narrow is None else narrow.type(R[val])
                if gm and F.shadows is not None:
                    F.shadows.write(a, at)
            if charge is not None:
                charge()

        return run


def _zero_view(shape: tuple, dtype) -> np.ndarray:
    """The shared zero view of this shape and dtype (`_ZERO_VIEWS`)."""
    key = (shape, dtype)
    v = _ZERO_VIEWS.get(key)
    if v is None:
        if len(_ZERO_VIEWS) >= 4096:
            _ZERO_VIEWS.clear()
        v = _ZERO_VIEWS[key] = zero_view(shape, dtype)
    return v


def _out_of_bounds(where: str, i: int, o: int, s: int, st: int, dim: int) -> AscendirError:
    """The error of a subview (`where`) whose dim `i` (of size `dim`) does not hold offset `o`,
    size `s`, stride `st`."""
    return AscendirError(f"{where}: out of bounds on dim {i}: offset {o}, size {s}, stride {st} in a dim of {dim}")
