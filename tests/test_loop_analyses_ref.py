"""The per-loop analyses of a timing-only compile (steady.uniform_loop, loop_memo.memo_inputs,
remap.address_plan, xblock.BlockMemo.hoisted, the offset chains of BlockMemo.plan), made
cheaper (one pass, id-keyed sets, sets built when first needed), give what their earlier plain
forms (the references below, as they were) give, on every loop of a small decoder layer's
kernels (the 7B layer's kernel family), a matmul and test_xblock_moves' kernels."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith, memref, scf
from xdsl.ir import Block, Operation, SSAValue

from ascendir.dialects import ascend
from ascendir.hardware import load_target
from ascendir.interpreter.accel import steady, xblock
from ascendir.interpreter.accel.loop_memo import _external, _memo_inputs
from ascendir.interpreter.accel.remap import _AFFINE, AddressPlan, address_plan
from ascendir.interpreter.accel.steady import _AFF, _INV, _OTHER
from ascendir.interpreter.accel.xblock import _CHAIN, _PARTIAL, _offset_chain
from xdsl.dialects.builtin import MemRefType
from ascendir.interpreter.exec.scalar import SCALAR_OPS
from ascendir.interpreter.exec.walk import OpTree, operands_of
from ascendir.interpreter.testing import matmul_ir, parse
from lowering_harness import decoder_layer
from test_xblock_moves import _first_tile, _kernel, _read

HW = load_target("ascend910b2")


# -- the references: the analyses as they were -------------------------------------------------
def ref_uniform_loop(loop: scf.ForOp, tree: OpTree | None = None) -> list[Operation] | None:
    if loop.iter_args:
        return None
    body = loop.body.block
    iv = body.args[0]
    if tree is None:
        tree = OpTree(loop)
    order = tree.walk(loop)[1:]  # the body, in program order
    inside = {id(o) for o in order}  # (ids: an xDSL op's hash is Python code)
    kind: dict[SSAValue, int] = {}
    checked: set[Operation] = set()
    # ids of the blocks whose ops run once per iteration: the body and the regions of its scf.if
    # ops, nested (in pre-order an scf.if comes after the op holding its block)
    level = {id(body)}
    for op in order:
        if type(op) is scf.IfOp and id(op.parent) in level:  # (`parent`: what parent_block() returns, without the call)
            level.update(id(b) for r in op.regions for b in r.blocks)

    def loop_level(op: Operation) -> bool:
        return id(op.parent) in level

    def k(v: SSAValue) -> int:
        if v is iv:
            return _AFF
        got = kind.get(v)
        if got is not None:
            return got
        owner = v.owner
        if type(owner) is Block:
            parent = owner.parent_op()
            if parent is None or id(parent) not in inside:
                r = _INV
            elif type(parent) is scf.ForOp and owner.args and v is owner.args[0]:
                # an inner loop's iv takes the same values every iteration if its bounds do
                r = _INV if all(k(x) == _INV or x.owner in checked for x in (parent.lb, parent.ub, parent.step)) else _OTHER
            else:
                r = _OTHER
        elif id(owner) not in inside:
            r = _INV
        elif type(owner) is arith.ConstantOp:
            r = _INV
        elif type(owner) in SCALAR_OPS and loop_level(owner):
            kinds = [k(x) for x in operands_of(owner)]
            if all(x == _INV for x in kinds):
                r = _INV
            elif _OTHER in kinds:
                r = _OTHER
            else:
                r = _AFF  # evaluated for every skipped iteration (SteadyLoop.jump)
                checked.add(owner)
        elif type(owner) in (arith.AddiOp, arith.SubiOp):
            r = max(k(owner.lhs), k(owner.rhs))
        elif type(owner) is arith.MuliOp:
            a, b = k(owner.lhs), k(owner.rhs)
            r = _INV if a == b == _INV else _AFF if {a, b} == {_INV, _AFF} else _OTHER
        elif type(owner) is arith.IndexCastOp:
            r = k(owner.input)
        else:
            r = _INV if all(k(x) == _INV for x in operands_of(owner)) else _OTHER
        kind[v] = r
        return r

    # classify every loop-level value first, in scf.if regions too: each scalar one that depends on
    # the iv is checked, even when only sizes or inner-loop bounds use it (a partial last tile)
    for op in order:
        if loop_level(op):
            for res in op.results:
                k(res)
    uniform = True
    for op in order:
        if type(op) in (memref.LoadOp, memref.StoreOp, ascend.GetValueOp, scf.ForOp) and op is not loop:
            if type(op) is not scf.ForOp or op.iter_args:
                uniform = False
                break
        if type(op) is memref.SubviewOp:
            sv = tree.subview(op)
            if sv.gm and any(k(o) == _OTHER for o in sv.offsets):
                uniform = False
                break
    del k  # (it calls itself: a reference cycle otherwise)
    if not uniform or not ref_with_body_operands(checked, iv, inside, loop_level):
        return None
    return sorted(checked, key=tree.index)  # (program order; an op's hash is Python code: no set test per op)


def ref_with_body_operands(checked: set[Operation], iv: SSAValue, inside: set[int], loop_level) -> bool:
    todo = list(checked)
    while todo:
        for x in operands_of(todo.pop()):
            owner = x.owner
            if x is iv or owner in checked or type(owner) is arith.ConstantOp:
                continue
            if type(owner) is Block:
                parent = owner.parent_op()
                if parent is not None and id(parent) in inside:
                    return False
                continue
            if id(owner) not in inside:
                continue
            if type(owner) not in SCALAR_OPS or not loop_level(owner):
                return False
            checked.add(owner)
            todo.append(owner)
    return True


def ref_address_plan(loop: scf.ForOp, checked: list[Operation], tree: OpTree | None = None) -> AddressPlan | None:
    if tree is None:
        tree = OpTree(loop)
    ops = tree.walk(loop)
    inside = {id(o) for o in ops}  # (as loop_memo._external takes them)
    results = [op.results[0] for op in checked]
    pos = {v: i for i, v in enumerate(results)}
    checked_set = set(checked)
    offsets_of: dict[SSAValue, list[tuple[Operation, int]]] = {}
    control: set[SSAValue] = set()
    for v in results:
        for use in v.uses:
            u = use.operation
            if u in checked_set:
                continue
            # (operands of a subview: source, offsets, sizes, strides; only copies may use it,
            # the ops whose accesses steady.py logs)
            sv = tree.subview(u) if type(u) is memref.SubviewOp else None
            if (sv is not None and sv.gm and _external(sv.source, inside) and 1 <= use.index <= len(sv.offsets)
                    and all(type(w.operation) is ascend.CopyOp for w in u.result.uses)):
                offsets_of.setdefault(v, []).append((u, sv.dyn_offsets[use.index - 1]))
                continue
            control.add(v)
    addr = [v for v in results if v in offsets_of and v not in control]
    if not any(ref_nonaffine(v, checked_set) for v in addr):
        return None
    # intermediate values (used by checked ops only) act through the values they feed
    control_pos = [pos[v] for v in results if v in control]
    return AddressPlan([pos[v] for v in addr], control_pos, ref_offset_copies(ops, tree, addr, offsets_of))


def ref_nonaffine(v: SSAValue, checked: set[Operation]) -> bool:
    seen: set[Operation] = set()
    todo = [v.owner]
    while todo:
        op = todo.pop()
        if op in seen or op not in checked:
            continue
        seen.add(op)
        if not isinstance(op, _AFFINE):
            return True
        todo.extend(x.owner for x in op.operands)
    return False


def ref_hoisted(loop: scf.ForOp, checked: list, tree: OpTree) -> list[Operation]:
    iv = loop.body.block.args[0]
    inside = {id(o) for o in tree.walk(loop)}
    known = {op.results[0] for op in checked}
    ids = {id(op) for op in checked}
    out: list[Operation] = []
    mine: set[SSAValue] = set()
    for op in tree.walk(loop)[1:]:
        t = type(op)
        if id(op) in ids or t not in SCALAR_OPS or t in _PARTIAL or len(op.results) != 1:
            continue
        xs = op.operands
        if any(x is iv or x in mine for x in xs) and all(x is iv or x in known or x in mine or _external(x, inside) for x in xs):
            out.append(op)
            mine.add(op.results[0])
    return out


def ref_memo_inputs(loop: scf.ForOp, tree: OpTree) -> tuple:
    ops = tree.walk(loop)
    # ids of the values the loop defines (its ops' results, their regions' block arguments): a
    # value is external (`_external`) when its id is not here; one set test per operand
    defined = tree.defined(loop)
    uses: dict[SSAValue, list] = {}
    other: set[SSAValue] = set()
    for op in ops:
        sv = tree.subview(op) if type(op) is memref.SubviewOp else None
        gm_sv = sv is not None and sv.gm and id(sv.source) not in defined
        dyn_dims = sv.dyn_offsets if gm_sv else []
        offsets = sv.offsets if gm_sv else ()
        for v in operands_of(op):
            if id(v) in defined:
                continue
            uses.setdefault(v, [])
            if gm_sv and any(v is o for o in offsets):
                continue
            other.add(v)
        for k, o in enumerate(offsets):
            if id(o) not in defined:
                uses[o].append((op, dyn_dims[k]))
    addr = [v for v in uses if v not in other and uses[v]]
    ctrl = [v for v in uses if v not in addr]
    return ctrl, addr, ref_offset_copies(ops, tree, addr, uses)


def ref_offset_copies(ops: list[Operation], tree: OpTree, addr: list[SSAValue],
                  uses: dict[SSAValue, list[tuple[Operation, int]]]) -> dict[Operation, tuple[SSAValue, list[tuple[int, int]]]]:
    index = {v: j for j, v in enumerate(addr)}
    by_sv: dict[Operation, list[tuple[int, int]]] = {}
    for v in addr:
        for op, dim in uses[v]:
            by_sv.setdefault(op, []).append((dim, index[v]))
    copies: dict[Operation, tuple[SSAValue, list[tuple[int, int]]]] = {}
    for op in ops:
        if type(op) is ascend.CopyOp:
            for g in operands_of(op):  # (source, dest: its only operands; xDSL's accessors decode per access)
                sv = g.owner
                if type(sv) is memref.SubviewOp and sv in by_sv:
                    copies[op] = (tree.subview(sv).source, by_sv[sv])
    return copies


def ref_offset_chain(v: SSAValue, loop: scf.ForOp, checked: set[int], inside: dict[int, int], tree: OpTree) -> dict | None:
    # the ops the chain reaches (through uses: cheaper than walking the loop per value), then
    # in program order
    reach: dict[int, Operation] = {}
    todo = [v]
    while todo:
        x = todo.pop()
        for u in x.uses:
            op = u.operation
            i = id(op)
            if i not in inside or i in reach or i in checked:
                continue
            if op is loop:
                if u.index != 0:
                    return None
                continue  # (the lower bound: iterations are compared by their checked values)
            t = type(op)
            if t not in _CHAIN:
                return None
            reach[i] = op
            if t is not memref.SubviewOp:
                todo.append(op.results[0])
    coef: dict[SSAValue, int] = {v: 1}
    out: dict = {}
    for op in sorted(reach.values(), key=lambda o: inside[id(o)]):
        t = type(op)
        if t is arith.AddiOp or t is arith.SubiOp:
            a, b = coef.get(op.lhs, 0), coef.get(op.rhs, 0)
            coef[op.result] = a + b if t is arith.AddiOp else a - b
        elif t is arith.MuliOp:
            k = op.rhs if op.lhs in coef else op.lhs
            if k in coef or type(k.owner) is not arith.ConstantOp:
                return None
            coef[op.result] = coef[op.lhs if op.lhs in coef else op.rhs] * k.owner.value.value.data
        elif t is arith.IndexCastOp:
            coef[op.result] = coef[op.input]
        elif t is memref.SubviewOp:
            sv = tree.subview(op)
            if (not sv.gm or not _external(sv.source, inside) or sv.source in coef or any(x in coef for x in (*sv.sizes, *sv.strides))
                    or not all(type(u.operation) is ascend.CopyOp for u in op.result.uses)):
                return None
            dims = [(d, coef[o]) for d, o in zip(sv.dyn_offsets, sv.offsets) if o in coef]
            for u in op.result.uses:
                got = out.setdefault(u.operation, (op, sv.source, []))
                if got[0] is not op:  # (a copy between two moved GM views: one access record, two moves)
                    return None
                got[2].extend(dims)
        else:
            return None
    return {c: (src, dims) for c, (_, src, dims) in out.items()}


# -- the comparison ---------------------------------------------------------------------------
def _loops(module):
    """(loop, its kernel's OpTree) for every scf.for of every kernel of `module`."""
    out = []
    for k in module.ops:
        if type(k) is ascend.KernelOp:
            tree = OpTree(k)
            out += [(op, tree) for op in tree.ops if type(op) is scf.ForOp]
    return out


def _same(loops) -> int:
    """Assert each analysis equals its reference on each loop; the number of loops accepted."""
    n = 0
    for loop, tree in loops:
        checked = steady.uniform_loop(loop, tree)
        assert checked == ref_uniform_loop(loop, tree)
        assert _memo_inputs(loop, tree) == ref_memo_inputs(loop, tree)
        if checked is None:
            continue
        n += 1
        got, want = address_plan(loop, checked, tree), ref_address_plan(loop, checked, tree)
        assert (got is None) == (want is None)
        if got is not None:
            assert (got.addr, got.control, got.copies) == (want.addr, want.control, want.copies)
        assert xblock.BlockMemo.hoisted(loop, checked, tree) == ref_hoisted(loop, checked, tree)
        # the offset chains BlockMemo.plan follows from the control values and checked ones
        ids = {id(op) for op in checked}
        inside = {id(o): i for i, o in enumerate(tree.walk(loop))}
        ctrl, addr, _ = _memo_inputs(loop, tree)
        for v in [x for x in ctrl if not isinstance(x.type, MemRefType)] + [op.results[0] for op in checked]:
            assert _offset_chain(v, loop, ids, inside, tree) == ref_offset_chain(v, loop, ids, inside, tree)
    return n


@pytest.fixture(scope="module")
def layer_loops():
    mp = pytest.MonkeyPatch()
    try:
        module, _, _ = decoder_layer(mp, HW, 64, h=256, heads=2, d=128, mlp=512)
    finally:
        mp.undo()
    return module, _loops(module)


def test_decoder_layer_loops_analysed_as_before(layer_loops):
    _, loops = layer_loops
    # (FlashAttention's scf.if-heavy tile loop, GEMM K loops, epilogues, norms: most loops accepted)
    assert _same(loops) >= len(loops) // 2


def test_matmul_loops_analysed_as_before():
    assert _same(_loops(parse(matmul_ir(2048, 2048, 1024, tm=128, tn=128, tk=128, block_dim=24)))) >= 2


def test_xblock_kernels_loops_analysed_as_before():
    """Small kernels with first-tile tests in inner loops (hoisted values), offsets from the block
    index, in the body or outside (test_xblock_moves.py); between them every answer is non-trivial:
    an address plan, hoisted ops."""
    texts = [_kernel("", _first_tile("%f = arith.cmpi eq, %t, %bid : index")),
             _kernel("", _first_tile("%f = arith.cmpi eq, %t, %c5 : index")),
             _kernel("    %o = arith.muli %bid, %c16 : index", _read("%o"), trips=16),
             _kernel("", "      %o = arith.muli %bid, %bid : index\n" + _read("%o"))]
    loops = [x for t in texts for x in _loops(parse(t))]
    assert _same(loops) >= len(texts)
    assert any(xblock.BlockMemo.hoisted(lp, steady.uniform_loop(lp, tr), tr) for lp, tr in loops if steady.uniform_loop(lp, tr) is not None)


def test_some_layer_loop_has_an_address_plan(layer_loops):
    """The layer's comparison covers plans too, not only None."""
    _, loops = layer_loops
    assert any(address_plan(lp, c, tr) is not None for lp, tr in loops if (c := steady.uniform_loop(lp, tr)) is not None)
