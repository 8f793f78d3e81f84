"""Facts of a kernel's IR that its compiles share through the kernel's OpTree (walk.py
`OpTree.derived`): a loop's memo inputs (accel/loop_memo.py `memo_inputs`), asked by the
timing-only twin's scf.for and by the data walk's K-loop memo plan (data_loop_memo.py)."""

from __future__ import annotations

from xdsl.dialects import scf

from ascendir.dialects import ascend
from ascendir.interpreter.accel import loop_memo
from ascendir.interpreter.exec.walk import OpTree
from ascendir.interpreter.testing import matmul_ir, parse


def _kernel():
    module = parse(matmul_ir(256, 256, 512, block_dim=2))
    return next(o for o in module.ops if isinstance(o, ascend.KernelOp))


def test_memo_inputs_once_per_tree_and_loop():
    """Each loop's memo inputs are what a fresh computation gives, computed once per tree (the
    same object the second time), per loop (a key that ignored the loop would hand the outer
    loop's inputs to the inner one: they differ)."""
    kernel = _kernel()
    tree = OpTree(kernel)
    loops = [o for o in tree.ops if isinstance(o, scf.ForOp)]
    assert len(loops) >= 2
    got = [loop_memo.memo_inputs(loop, tree) for loop in loops]
    for loop, g in zip(loops, got):
        assert loop_memo.memo_inputs(loop, tree) is g
        fresh = loop_memo._memo_inputs(loop, OpTree(kernel))
        assert g == fresh
    assert len({repr(g[:2]) for g in got}) > 1


def test_memo_inputs_without_a_tree():
    """Without a tree (callers outside a kernel's compile) each call computes its own."""
    kernel = _kernel()
    loop = next(o for o in OpTree(kernel).ops if isinstance(o, scf.ForOp))
    assert loop_memo.memo_inputs(loop) == loop_memo._memo_inputs(loop, OpTree(loop))
