"""Phase A of the batched data walk (sim/kernel.py `_data_walk`, exec/batch_run.py): every block
runs as in the plain data walk (its control, scalars, flags, holds, views and the race check, all
of which read address tags and shapes, never data), but its tile ops are recorded in the order
they run instead of computed (exec/tile_ops.py `_data_tile`): per block, a list of (op, operand
values). Phase B then computes them (exec/batch_run.py).

On-chip buffers: block b's execution of an alloc gets slice b of one zeroed buffer of the launch
per alloc, (blocks,) + shape, where the plain walk makes a fresh zeroed array: the same zeros,
and the operands of the same op in consecutive blocks then lie at addresses affine in the block,
so that phase B can view them as one array with a batch axis. An alloc run twice in one block
gets a fresh array the second time, as in the plain walk (its operands are then not affine:
phase B runs their ops block by block). Every block's arrays stay alive and apart until phase B
ends, so the arrays of different blocks never share memory.
"""

from __future__ import annotations

import numpy as np


class Tape:
    """The tile ops of a launch's blocks, recorded (phase A), and the launch's on-chip buffers.

    `blocks[b]`: block b's tile ops in the order they ran, each (op facts, operand values): op
    facts is tile_ops.py's `BatchFacts` of the op, the values are what its closure read from
    its slots (numpy views, Python scalars). `append` adds to the running block's list (`begin`)."""

    __slots__ = ("blocks", "append", "block", "_arena", "_taken")

    def __init__(self, nblocks: int):
        self.blocks: list[list] = [[] for _ in range(nblocks)]
        self.block = 0
        self.append = self.blocks[0].append
        self._arena: dict = {}  # alloc key -> its buffer, (nblocks,) + shape
        self._taken: dict = {}  # alloc key -> the last block that took its slice

    def begin(self, b: int) -> None:
        """Block `b` starts: what its tile ops append goes to blocks[b]."""
        self.block = b
        self.append = self.blocks[b].append

    def zeros(self, key: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A zeroed array of `shape` and `dtype` for an execution of the alloc `key` (its result's
        slot) in the running block: the block's slice of the alloc's launch buffer the first
        time in the block, a fresh array after (the module doc says why)."""
        b = self.block
        if self._taken.get(key) == b:
            return np.zeros(shape, dtype)
        self._taken[key] = b
        buf = self._arena.get(key)
        if buf is None:
            buf = self._arena[key] = np.zeros((len(self.blocks),) + shape, dtype)
        return buf[b]
