"""What a kernel's compiles compute once: the fixed points of the pre-walk analyses
(exec/scalar_units.py, check/uniform.py), read from the IR once into index lists and iterated
over ints, against the plain fixed points over the IR they replace (written out here as the
reference); and the tile ops' cost functions, built once per kernel and shared by the timing-only
twin's compile and the data walk's (KernelInfo.costs), a single-walk kernel building its own.

The kernel below carries a value through a loop whose next value is yielded by an op placed
after the loop in walk order: its units and its variance reach the loop's block argument only
on a second pass."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import scf

from ascendir.dialects import ascend
from ascendir.hardware import load_target
from ascendir.interpreter import Accel, simulate
from ascendir.interpreter.check.uniform import uniform_blocks
from ascendir.interpreter.exec import registry
from ascendir.interpreter.exec.scalar_units import scalar_units
from ascendir.interpreter.exec.walk import OpTree
from ascendir.interpreter.testing import parse

from test_data_codegen import KERNEL, RACY, _feeds

HW = load_target("ascend910b2")
G = "memref<256x64xf16, #ascend<space gm>>"
U = "memref<32x64xf16, #ascend<space ub>>"
U_TILE = "memref<16x64xf16, strided<[64, 1], offset: ?>, #ascend<space ub>>"

# the UB view's row offset %q is loop-carried: 0 on entry, then 16 * block index (yielded): it
# varies per block (not uniform), found once the yield feeds back into %q
CARRIED = f'''builtin.module {{
  ascend.kernel @k(%a: {G}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c16 = arith.constant 16 : index
    %bid = ascend.block_idx : index
    %u = ascend.alloc : {U}
    %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%q = %c0) -> (index) {{
      %us = memref.subview %u[%q, 0] [16, 64] [1, 1] : {U} to {U_TILE}
      ascend.vadd %us, %us, %us : {U_TILE}, {U_TILE}, {U_TILE}
      %q2 = arith.muli %bid, %c16 : index
      scf.yield %q2 : index
    }}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) {{
    ascend.launch @k(%x) : {G}
    func.return
  }}
}}'''

# the UB view's row offset %o is an scf.if's result: 0 in one branch, 16 * block index in the
# other (yielded): it varies per block through the branch's yield alone
BRANCHED = f'''builtin.module {{
  ascend.kernel @k(%a: {G}) attributes {{block_dim = 2 : i64, core_type = #ascend.core_type<aiv>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %bid = ascend.block_idx : index
    %u = ascend.alloc : {U}
    %p = arith.cmpi ult, %c0, %c1 : index
    %o = scf.if %p -> (index) {{
      %o1 = arith.muli %bid, %c16 : index
      scf.yield %o1 : index
    }} else {{
      scf.yield %c0 : index
    }}
    %us = memref.subview %u[%o, 0] [16, 64] [1, 1] : {U} to {U_TILE}
    ascend.vadd %us, %us, %us : {U_TILE}, {U_TILE}, {U_TILE}
    ascend.return
  }}
  func.func @main(%x: {G} {{onnx.name = "x"}}) {{
    ascend.launch @k(%x) : {G}
    func.return
  }}
}}'''


def _kernel_ops(text: str) -> list:
    """The body of the first ascend.kernel of `text`, in walk order."""
    kernel = next(o for o in parse(text).ops if isinstance(o, ascend.KernelOp))
    return OpTree(kernel).ops[1:]


def _reference_units(order: list, anchored: dict) -> dict:
    """scalar_units' fixed point as full passes over the IR (the answer it must give)."""
    mask = {o: anchored.get(o, 0) for o in order}
    val: dict = {}

    def target(y, i: int) -> int:
        parent = y.parent_op()
        if isinstance(parent, scf.ForOp):
            return val.get(parent.body.block.args[1 + i], 0) | val.get(parent.results[i], 0)
        return val.get(parent.results[i], 0) if parent is not None and i < len(parent.results) else 0

    def need(v) -> int:
        m = 0
        for use in v.uses:
            u = use.operation
            if isinstance(u, scf.YieldOp):
                m |= target(u, use.index)
            elif isinstance(u, scf.ForOp) and use.index >= 3:
                m |= val.get(u.body.block.args[use.index - 2], 0) | val.get(u.results[use.index - 3], 0)
            else:
                m |= mask.get(u, 0)
        return m

    changed = True
    while changed:
        changed = False
        for o in reversed(order):
            m = mask[o]
            for r in o.results:
                n = need(r)
                changed |= n != val.get(r, 0)
                val[r] = n
                m |= n
            for region in o.regions:
                for block in region.blocks:
                    for a in block.args:
                        n = need(a)
                        changed |= n != val.get(a, 0)
                        val[a] = n
                    for inner in block.ops:
                        m |= mask.get(inner, 0)
            changed |= m != mask[o]
            mask[o] = m
    return {o: tuple(u for u in range(3) if m >> u & 1) for o, m in mask.items() if m and o not in anchored}


def _reference_uniform(ops: list, tile) -> bool:
    """uniform_blocks' answer from full passes over the IR (check/uniform.py's module doc)."""
    if any(o.regions and not isinstance(o, (scf.ForOp, scf.IfOp)) for o in ops):
        return False
    varying: set = set()
    changed = True
    while changed:
        changed = False
        for o in ops:
            if isinstance(o, scf.ForOp):
                blk = o.body.block
                new = [blk.args[0]] if o.lb in varying or o.step in varying else []
                ys = list(blk.last_op.operands)
                new += [x for k, (arg, init) in enumerate(zip(blk.args[1:], o.iter_args))
                        if init in varying or ys[k] in varying for x in (arg, o.results[k])]
            elif isinstance(o, scf.IfOp):
                new = [o.results[k] for r in o.regions for b in r.blocks if isinstance(b.last_op, scf.YieldOp)
                       for k, y in enumerate(b.last_op.operands) if y in varying]
            elif o.name.startswith("arith.") or o.name == "memref.subview" or (
                    isinstance(o, ascend.AllocOp) and ascend.space_of(o.result.type).value != "gm"):
                new = list(o.results) if any(v in varying for v in o.operands) else []
            else:
                new = list(o.results)
            changed |= not varying.issuperset(new)
            varying.update(new)
    for o in ops:
        fixed = tile(o)
        if fixed is False or (fixed and any(
                v in varying and ascend.space_of(v.type).value != "gm" for v in o.operands if hasattr(v.type, "memory_space"))):
            return False
    return True


def _tile(o) -> bool | None:
    """Tile ops have a built-in cost (a pipe of their own); other ops are no tile ops."""
    return True if type(o) in registry.COSTS else None


KERNELS = {"carried": CARRIED, "branched": BRANCHED, "kernel": KERNEL, **{f"racy {k}": v for k, v in RACY.items()}}


@pytest.mark.parametrize("name", list(KERNELS))
def test_scalar_units_is_the_fixed_point(name: str) -> None:
    order = _kernel_ops(KERNELS[name])
    rng = np.random.default_rng(5)
    for _ in range(20):  # seeded anchors: units flow back from users, through yields and inits
        picked = rng.choice(len(order), size=min(4, len(order)), replace=False)
        anchored = {order[i]: int(rng.integers(1, 8)) for i in picked}
        assert scalar_units(order, anchored) == _reference_units(order, anchored)


def test_scalar_units_follow_a_yield_back_into_the_loop() -> None:
    """%q's units come from the vadd using its view, %q2's through the yield into %q: the
    second pass gives them (one pass over the IR in reverse walk order misses %q2)."""
    order = _kernel_ops(CARRIED)
    vadd = next(o for o in order if o.name == "ascend.vadd")
    muli = next(o for o in order if o.name == "arith.muli")
    got = scalar_units(order, {vadd: 0b010})
    assert got == _reference_units(order, {vadd: 0b010})
    assert got[muli] == (1,) and got[next(o for o in order if o.name == "ascend.block_idx")] == (1,)


@pytest.mark.parametrize("name", list(KERNELS))
def test_uniform_blocks_is_the_fixed_point(name: str) -> None:
    ops = _kernel_ops(KERNELS[name])
    assert uniform_blocks(ops, _tile) == _reference_uniform(ops, _tile)


def test_uniform_blocks_see_a_yield_feed_back() -> None:
    """The view of the vadd in CARRIED varies per block through the yield only (module doc)."""
    ops = _kernel_ops(CARRIED)
    assert _reference_uniform(ops, _tile) is False
    assert uniform_blocks(ops, _tile) is False
    # without the feedback (the yield gives back the constant) the blocks are uniform
    steady = _kernel_ops(CARRIED.replace("scf.yield %q2 : index", "scf.yield %c0 : index"))
    assert uniform_blocks(steady, _tile) is True and _reference_uniform(steady, _tile) is True


def test_uniform_blocks_see_a_branch_yield() -> None:
    """The view of the vadd in BRANCHED varies per block through the scf.if's yield alone."""
    ops = _kernel_ops(BRANCHED)
    assert _reference_uniform(ops, _tile) is False
    assert uniform_blocks(ops, _tile) is False
    steady = _kernel_ops(BRANCHED.replace("scf.yield %o1 : index", "scf.yield %c16 : index"))
    assert uniform_blocks(steady, _tile) is True and _reference_uniform(steady, _tile) is True


def _counting(monkeypatch) -> dict:
    """Every tile op's cost factory counted per op (id -> calls)."""
    calls: dict = {}
    for cls, factory in list(registry.COSTS.items()):
        def counted(op, env, factory=factory):
            calls[id(op)] = calls.get(id(op), 0) + 1
            return factory(op, env)
        monkeypatch.setitem(registry.COSTS, cls, counted)
    return calls


def test_cost_functions_are_built_once_per_kernel(monkeypatch) -> None:
    """A split launch (the twin's timed walk, the data walk) builds each tile op's cost function
    once: the data walk takes the twin's (KernelInfo.costs), and gets the same outputs and cycles
    as the single walk, which builds its own."""
    calls = _counting(monkeypatch)
    split = simulate(parse(KERNEL), None, _feeds(), HW)
    tiles = [o for o in _kernel_ops(KERNEL) if type(o) in registry.COSTS]
    assert len(calls) == len(tiles) and set(calls.values()) == {1}
    calls.clear()
    single = simulate(parse(KERNEL), None, _feeds(), HW, accel=Accel.none())  # the fallback: one walk, its own compile
    assert len(calls) == len(tiles) and set(calls.values()) == {1}
    assert split.report["total_cycles"] == single.report["total_cycles"]
    assert split.outputs["z"].tobytes() == single.outputs["z"].tobytes()


def _check_subview(a: np.ndarray, spec: list, charged: bool) -> None:
    """Compile and run a numerics subview of `a` (host compile, `_subview_code`) whose dim d is
    spec[d] = (offset, size, stride, (offset, size, stride dynamic?), dropped), charged or not;
    assert its view, address tag and charges."""
    from ascendir.interpreter.exec.compiler import Compiler
    from ascendir.interpreter.state import Frame

    tst = tuple(int(x) for x in np.cumprod((1,) + a.shape[:0:-1])[::-1])  # contiguous strides
    F = Frame(2)
    comp = Compiler(None, F, None)
    F.values[0], F.gm_tags[0] = a, ("root", 7, tst)
    dims, index, offset, strides = [], [], 7, []
    for d, (o, sz, st, dyn, drop) in enumerate(spec):
        entry = []
        for x, is_dyn in zip((o, sz, st), dyn):
            if is_dyn:  # in a slot of its own
                F.values.append(x)
                F.gm_tags.append(None)
                entry.append((True, len(F.values) - 1))
            else:
                entry.append((False, x))
        dims.append((*entry, drop))
        index.append(o if drop else slice(o, o + (sz - 1) * st + 1 if sz else o, st))
        offset += o * tst[d]
        if not drop:
            strides.append(tst[d] * st)
    calls = []
    run = comp._subview_code(0, 1, dims, "here", (lambda: calls.append(1)) if charged else None)
    run()
    want = a[tuple(index)]
    assert F.values[1].shape == want.shape and np.array_equal(F.values[1], want), spec
    assert F.gm_tags[1] == ("root", offset, tuple(strides)), spec
    assert len(calls) == charged, spec


def test_subview_factories_are_per_form() -> None:
    """Numerics subviews share a generated factory per form (memref_ops.py `_FACTORIES`: static
    values, dynamic dims, dropped dims, charged): seeded pairs of subviews differing in one of
    these, compiled one after the other, each give numpy's view, the address tag the loop over
    dims gives, and their charge."""
    rng = np.random.default_rng(11)
    a = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)

    def dim(n: int, dyn=None) -> list:
        sz = int(rng.integers(1, 3))
        st = int(rng.integers(1, 3))
        o = int(rng.integers(0, n - (sz - 1) * st))
        return [o, sz, st, tuple(bool(x) for x in rng.integers(0, 2, 3)) if dyn is None else dyn, sz == 1 and bool(rng.integers(0, 2))]

    for _ in range(80):
        spec = [dim(n) for n in a.shape]
        charged = bool(rng.integers(0, 2))
        _check_subview(a, spec, charged)
        d = int(rng.integers(0, 2))
        what = int(rng.integers(0, 4))
        other = [list(x) for x in spec]
        if what == 0:  # another value of a static or dynamic entry, the same form otherwise
            other[d] = dim(a.shape[d], spec[d][3])
            other[d][4] = spec[d][4] and other[d][1] == 1
        elif what == 1:  # one entry dynamic instead of static, or back
            k = int(rng.integers(0, 3))
            other[d][3] = tuple(x != (j == k) for j, x in enumerate(spec[d][3]))
        elif what == 2:
            other[d][4] = not spec[d][4] and spec[d][1] == 1
        _check_subview(a, other, charged if what < 3 else not charged)


def test_space_name_is_space_of() -> None:
    """space_name (exec/common.py) remembers space_of per type object: the same answer for types
    of every space and dtype, asked twice; a memref without an #ascend space raises, every time."""
    from xdsl.dialects.builtin import MemRefType, f16, f32
    from xdsl.utils.exceptions import VerifyException

    from ascendir.dialects.ascend import MemSpace, memref_type, space_of
    from ascendir.interpreter.exec.common import space_name

    types = [memref_type(shape, elem, space) for space in MemSpace for elem in (f16, f32) for shape in ((16, 16), (4,))]
    for _ in range(2):
        assert [space_name(t) for t in types] == [space_of(t).value for t in types]
    plain = MemRefType(f16, [4])
    for _ in range(2):
        with pytest.raises(VerifyException):
            space_name(plain)


@pytest.mark.parametrize("name", list(KERNELS))
def test_scalar_units_read_from_the_tree_are_the_ir_s(name: str) -> None:
    # the kernel pre-walk gives scalar_units its OpTree (nested ops and block arguments kept by
    # the tree's one walk): the same units as reading the regions from the IR, and the reference
    kernel = next(o for o in parse(KERNELS[name]).ops if isinstance(o, ascend.KernelOp))
    tree = OpTree(kernel)
    order = tree.ops[1:]
    rng = np.random.default_rng(7)
    for _ in range(20):
        picked = rng.choice(len(order), size=min(4, len(order)), replace=False)
        anchored = {order[i]: int(rng.integers(1, 8)) for i in picked}
        got = scalar_units(order, anchored, tree)
        assert got == scalar_units(order, anchored) == _reference_units(order, anchored)
