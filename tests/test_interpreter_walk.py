"""Kernel walks (interpreter/exec/walk.py): `OpTree.walk` gives every op's `walk_ops` as a slice of one
walk of the kernel, which the per-loop analyses of compiling (steady.py, remap.py) use."""

from __future__ import annotations

import pytest

from ascendir.dialects import ascend
from ascendir.interpreter.testing import matmul_ir, parse
from ascendir.interpreter.exec.walk import OpTree, walk_ops


def test_op_tree_walk_is_walk_ops_of_every_op():
    module = parse(matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2))
    kernel = next(op for op in module.walk() if isinstance(op, ascend.KernelOp))
    tree = OpTree(kernel)
    assert tree.ops == list(kernel.walk())
    nested = [op for op in tree.ops if op.regions]
    assert len(nested) > 5  # the kernel, its loops and ifs
    for op in tree.ops:
        got = tree.walk(op)
        assert got == walk_ops(op) == list(op.walk()), op.name
    assert [tree.index(op) for op in tree.ops] == list(range(len(tree.ops)))
    with pytest.raises(KeyError):
        tree.walk(module)  # not an op of the tree


def test_compiling_a_kernel_walks_it_once_and_decodes_each_subview_once(monkeypatch):
    # the loops' analyses (steady.py, remap.py) and the subview closures read the kernel through
    # its one OpTree: no walk or subview decoding of their own
    from xdsl.dialects import memref

    from ascendir.hardware import load_target
    from ascendir.interpreter.exec import walk
    from ascendir.interpreter.sim.chip import compile_module

    hw = load_target("ascend910b2")
    module = parse(matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2))
    trees, decoded = [], []
    tree_init, subview_init = walk.OpTree.__init__, walk.Subview.__init__

    def counted_tree(self, root):
        trees.append(root.name)
        tree_init(self, root)

    def counted_subview(self, op):
        decoded.append(op)
        subview_init(self, op)

    monkeypatch.setattr(walk.OpTree, "__init__", counted_tree)
    monkeypatch.setattr(walk.Subview, "__init__", counted_subview)
    prog = compile_module(module, hw, None, timing_only=True, extrapolate=True)
    assert trees == ["ascend.kernel"]
    subviews = [op for op in module.walk() if isinstance(op, memref.SubviewOp)]
    assert len(subviews) > 5 and sorted(map(id, decoded)) == sorted(map(id, subviews))
    assert prog.run({})[1] is not None


def test_subview_decoding_matches_the_accessors():
    from xdsl.dialects import memref

    from ascendir.interpreter.exec.walk import Subview

    module = parse(matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2))
    subviews = [op for op in module.walk() if isinstance(op, memref.SubviewOp)]
    assert {Subview(op).gm for op in subviews} == {True, False}
    for op in subviews:
        sv = Subview(op)
        assert sv.source is op.source
        assert (list(sv.offsets), list(sv.sizes), list(sv.strides)) == (list(op.offsets), list(op.sizes), list(op.strides))
        assert (sv.static_offsets, sv.static_sizes, sv.static_strides) == (
            op.static_offsets.get_values(), op.static_sizes.get_values(), op.static_strides.get_values())
        assert len(sv.dyn_offsets) == len(sv.offsets)


def test_prewalk_class_tests_agree_with_isinstance():
    # kernel._is_a (remembered issubclass of the op's class) stands for isinstance in the
    # kernel pre-walks: the same answer for every op, subclasses (vector ops, flag ops) included
    from xdsl.dialects import memref

    from ascendir.interpreter.exec.walk import _is_a

    module = parse(matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2))
    ops = list(module.walk()) + [ascend.VaddOp.__new__(ascend.VaddOp)]
    bases = (ascend.CopyOp, ascend.MmadOp, ascend.GatherRowsOp, ascend.VectorOp, ascend.AllocOp, ascend.FlagOp, memref.LoadOp)
    hits = 0
    for op in ops:
        for base in bases:
            assert _is_a(type(op), base) == isinstance(op, base), (op.name, base)
            hits += isinstance(op, base)
    assert hits > 20


def test_operands_of_is_the_operands_tuple():
    # walk.operands_of reads xDSL's private operand tuple (the analyses of a compile read every
    # op's operands several times): the same values, in order, as the public accessor
    from ascendir.interpreter.exec.walk import operands_of

    module = parse(matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2))
    ops = list(module.walk())
    assert sum(len(op.operands) for op in ops) > 100
    for op in ops:
        got = operands_of(op)
        assert isinstance(got, tuple) and len(got) == len(op.operands)
        assert all(a is b for a, b in zip(got, op.operands)), op.name


def test_comm_test_reads_the_tree_ops_it_is_given():
    # chip.py asks is_comm_kernel with the kernel's OpTree ops (the tree its compile then reads)
    from ascendir.interpreter.sim.comm import is_comm_kernel

    module = parse(matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2))
    kernel = next(op for op in module.walk() if isinstance(op, ascend.KernelOp))
    ops = OpTree(kernel).ops
    assert is_comm_kernel(kernel, ops) is is_comm_kernel(kernel) is False
    assert is_comm_kernel(kernel, ops + [ascend.GroupRankOp.__new__(ascend.GroupRankOp)])


def test_op_tree_keeps_blocks_nested_ops_and_defined_values_as_the_ir_says():
    # OpTree reads xDSL's block / op fields itself (compiler.py and data_codegen.py iterate its
    # block lists, scalar_units.py its nested ops and block arguments, loop_memo.py its defined
    # values): the same as the public accessors, for every op and block of a kernel with loops,
    # branches and loop-carried values
    from test_data_codegen import KERNEL
    from test_compile_facts import CARRIED

    nblocks = nargs = 0
    for text in (matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2), KERNEL, CARRIED):
        kernel = next(op for op in parse(text).walk() if isinstance(op, ascend.KernelOp))
        tree = OpTree(kernel)
        for i, op in enumerate(tree.ops):
            kids, args = tree.nested(i)
            blocks = [b for r in op.regions for b in r.blocks]
            assert [tree.ops[k] for k in kids] == [o for b in blocks for o in b.ops], op.name
            assert args == [a for b in blocks for a in b.args], op.name
            assert all(tree.parents()[k] == i for k in kids)
            for b in blocks:
                assert tree.block_ops(b) == list(b.ops)
            nblocks += len(blocks)
            nargs += len(args)
            inside = tree.walk(op)
            want = {id(v) for o in inside for v in o.results} | {id(a) for o in inside for r in o.regions for b in r.blocks for a in b.args}
            assert tree.defined(op) == want, op.name
    assert nblocks > 10 and nargs > 5
    assert tree.parents()[0] == -1


def test_int_values_are_get_values():
    """walk.int_values unpacks a dense integer array as xDSL's get_values does, for each width
    and sign (DYNAMIC_INDEX is the most negative i64), empty arrays included."""
    from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseArrayBase, i1, i8, i16, i32, i64

    from ascendir.interpreter.exec.walk import int_values

    for t, vals in ((i64, [DYNAMIC_INDEX, 0, 7, -3, 2**40]), (i32, [1, 0, 3, -2**31]), (i16, [5, -7]), (i8, [-128, 127]),
                    (i64, []), (i1, [0, 1, 1])):
        a = DenseArrayBase.from_list(t, vals)
        assert int_values(a) == a.get_values()
        assert t is i1 or int_values(a) == tuple(vals)


_REDUCING = """
builtin.module {
  ascend.kernel @k(%x: memref<8x16xf32, #ascend<space gm>>, %y: memref<8x16xf32, #ascend<space gm>>) attributes {block_dim = 1 : i64, core_type = #ascend.core_type<aiv>} {
    %t = ascend.alloc : memref<8x16xf32, #ascend<space ub>>
    %r = memref.subview %x[3, 0] [1, 16] [1, 1] : memref<8x16xf32, #ascend<space gm>> to memref<16xf32, strided<[1], offset: 48>, #ascend<space gm>>
    %q = memref.subview %t[0, 0] [1, 16] [1, 1] : memref<8x16xf32, #ascend<space ub>> to memref<1x16xf32, strided<[16, 1]>, #ascend<space ub>>
    %p = memref.subview %x[0, 0] [8, 16] [1, 1] : memref<8x16xf32, #ascend<space gm>> to memref<8x16xf32, strided<[16, 1]>, #ascend<space gm>>
    ascend.copy %x, %t : memref<8x16xf32, #ascend<space gm>>, memref<8x16xf32, #ascend<space ub>>
    ascend.set_flag MTE2 -> MTE3, 0
    ascend.wait_flag MTE2 -> MTE3, 0
    ascend.copy %t, %y : memref<8x16xf32, #ascend<space ub>>, memref<8x16xf32, #ascend<space gm>>
    ascend.return
  }
  func.func @main(%x: memref<8x16xf32, #ascend<space gm>> {onnx.name = "x"}) -> (memref<8x16xf32, #ascend<space gm>> {onnx.name = "y"}) {
    %y = ascend.alloc : memref<8x16xf32, #ascend<space gm>>
    ascend.launch @k(%x, %y) : memref<8x16xf32, #ascend<space gm>>, memref<8x16xf32, #ascend<space gm>>
    func.return %y : memref<8x16xf32, #ascend<space gm>>
  }
}
"""


def test_subview_dropped_dims_decoded_once_for_both_compiles(monkeypatch):
    # Subview.dropped: per source dim whether a rank-reducing view drops it, as
    # buffer_lifetimes.dropped_dims says of the static sizes and the result shape; found once
    # per decoded subview, which the timing-only twin's compile and the data walk's share
    import numpy as np
    from xdsl.dialects import memref

    from ascendir.costmodel.buffer_lifetimes import dropped_dims
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.interpreter.exec import walk
    from ascendir.interpreter.exec.walk import Subview

    module = parse(_REDUCING)
    subviews = [op for op in module.walk() if isinstance(op, memref.SubviewOp)]
    assert [Subview(op).dropped() for op in subviews] == [(True, False), (False, False), (False, False)]
    for op in subviews:
        n = op.source.type.get_num_dims()
        drop = dropped_dims(list(op.static_sizes.get_values()), list(op.result.type.get_shape()), n)
        assert Subview(op).dropped() == tuple(i in drop for i in range(n))
    calls = []
    monkeypatch.setattr(walk, "dropped_dims", lambda *a: calls.append(a) or dropped_dims(*a))
    x = np.arange(128, dtype=np.float32).reshape(8, 16)
    res = simulate(module, None, {"x": x}, load_target("ascend910b2"))  # (a numerics launch: the twin, then the data walk)
    assert np.array_equal(res.outputs["y"], x)
    assert len(calls) == len(subviews)


def test_subview_dropped_dims_error_at_each_ask():
    # sizes that do not fit the result shape: the error of dropped_dims, at every call (nothing kept)
    from xdsl.dialects import memref

    from ascendir.errors import AscendirError
    from ascendir.interpreter.exec.walk import Subview

    module = parse(_REDUCING)
    op = next(op for op in module.walk() if isinstance(op, memref.SubviewOp))
    sv = Subview(op)
    sv.static_sizes = (2, 16)  # (as if the IR said [2, 16] for the 16-element result)
    for _ in range(2):
        with pytest.raises(AscendirError, match="cannot match sizes"):
            sv.dropped()


def test_never_read_reads_the_uses_as_the_accessors_do():
    # semantics.never_read follows xDSL's use lists and operand tuples through their fields (a
    # compile asks it of every copy): the verdicts of a walk through the public accessors. The
    # kernel copies GM into a scratch UB buffer through a view and directly (read by no op: True),
    # into buffers a vector op reads (False: its use found after a copy's in the use list, and
    # before) or a copy reads, and to GM
    from xdsl.dialects import memref
    from xdsl.ir import OpResult
    from ascendir.dialects.ascend import MemSpace, space_of
    from ascendir.interpreter.exec.semantics import never_read

    g, u, ut = ("memref<32x64xf16, #ascend<space gm>>", "memref<32x64xf16, #ascend<space ub>>",
                "memref<16x64xf16, strided<[64, 1]>, #ascend<space ub>>")
    gt = "memref<16x64xf16, strided<[64, 1]>, #ascend<space gm>>"
    module = parse(f'''builtin.module {{
  ascend.kernel @k(%x: {g}, %z: {g}) attributes {{block_dim = 1 : i64, core_type = #ascend.core_type<aiv>}} {{
    %scratch = ascend.alloc : {u}
    %ua = ascend.alloc : {u}
    %uc = ascend.alloc : {u}
    %xs = memref.subview %x[0, 0] [16, 64] [1, 1] : {g} to {gt}
    %sv = memref.subview %scratch[16, 0] [16, 64] [1, 1] : {u} to {ut}
    ascend.copy %xs, %sv : {gt}, {ut}
    ascend.copy %x, %scratch : {g}, {u}
    %av = memref.subview %ua[0, 0] [16, 64] [1, 1] : {u} to {ut}
    ascend.copy %xs, %av : {gt}, {ut}
    ascend.copy %x, %ua : {g}, {u}
    ascend.vadd %ua, %ua, %uc : {u}, {u}, {u}
    %ub = ascend.alloc : {u}
    ascend.vadd %ub, %ub, %uc : {u}, {u}, {u}
    ascend.copy %x, %ub : {g}, {u}
    %ud = ascend.alloc : {u}
    ascend.copy %x, %ud : {g}, {u}
    ascend.copy %ud, %z : {u}, {g}
    ascend.copy %uc, %z : {u}, {g}
    ascend.return
  }}
  func.func @main(%x: {g} {{onnx.name = "x"}}) -> ({g} {{onnx.name = "z"}}) {{
    %z = ascend.alloc : {g}
    ascend.launch @k(%x, %z) : {g}, {g}
    func.return %z : {g}
  }}
}}''')

    def reference(dest) -> bool:
        v = dest
        while isinstance(v, OpResult) and isinstance(v.op, (ascend.ViewOp, memref.SubviewOp)):
            v = v.op.operands[0]
        if not (isinstance(v, OpResult) and isinstance(v.op, ascend.AllocOp)) or space_of(v) == MemSpace.GM:
            return False
        todo = [v]
        while todo:
            for use in todo.pop().uses:
                if isinstance(use.operation, (ascend.ViewOp, memref.SubviewOp)) and use.index == 0:
                    todo.append(use.operation.results[0])
                elif not (isinstance(use.operation, ascend.CopyOp) and use.index == 1):
                    return False
        return True

    dests = [op.dest for op in module.walk() if isinstance(op, ascend.CopyOp)]
    assert [never_read(d) for d in dests] == [reference(d) for d in dests] == [True, True, False, False, False, False, False, False]
