"""Kernel walks (interpreter/walk.py): `OpTree.walk` gives every op's `walk_ops` as a slice of one
walk of the kernel, which the per-loop analyses of compiling (steady.py, remap.py) use."""

from __future__ import annotations

import pytest

from ascendir.dialects import ascend
from ascendir.interpreter.testing import matmul_ir, parse
from ascendir.interpreter.walk import OpTree, walk_ops


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
    with pytest.raises(KeyError):
        tree.walk(module)  # not an op of the tree


def test_compiling_a_kernel_walks_it_once(monkeypatch):
    # the loops' analyses take their walks from the kernel's OpTree, none of their own
    from ascendir.hardware import load_target
    from ascendir.interpreter import compiler, kernel, remap, steady
    from ascendir.interpreter.executor import compile_module

    hw = load_target("ascend910b2")
    module = parse(matmul_ir(512, 512, 512, tm=128, tn=128, tk=128, block_dim=4, nbuf=2))
    walks = []

    def counted(op):
        walks.append(op.name)
        return walk_ops(op)

    for mod in (compiler, kernel, remap, steady):
        monkeypatch.setattr(mod, "walk_ops", counted)
    prog = compile_module(module, hw, None, timing_only=True, extrapolate=True)
    assert walks == []
    assert prog.run({})[1] is not None
