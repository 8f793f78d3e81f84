"""Phase A of the batched data walk (sim/kernel.py `_data_walk`, exec/batch_run.py): every block
runs as in the plain data walk (its control, scalars, flags, holds, views and the race check, all
of which read address tags and shapes, never data), but its tile ops are recorded in the order
they run instead of computed (exec/tile_ops.py `_data_tile`): per block, a list of (op, operand
values). Phase B then computes them (exec/batch_run.py).

The blocks are recorded and computed a window of `window` consecutive blocks at a time
(`full`, `take`), so that only a window's arrays are alive at once, as the plain walk keeps one
block's.

On-chip buffers: block b's execution of an alloc gets slice b % window of one buffer of the
launch per alloc, (window,) + shape, zeroed, where the plain walk makes a fresh zeroed array: the
same zeros, and the operands of the same op in consecutive blocks then lie at addresses affine
in the block, so that phase B can view them as one array with a batch axis. An alloc run twice
in one block gets a fresh array the second time, as in the plain walk (its operands are then not
affine: phase B runs their ops block by block). The arrays of a window's blocks stay apart until
its phase B ends; a slice taken again in a later window is zeroed first.
"""

from __future__ import annotations

import numpy as np


class Tape:
    """The tile ops of a window of a launch's blocks, recorded (phase A), and the launch's on-chip
    buffers.

    `blocks`: per block of the window (from the first block since the last `take`), its tile ops
    in the order they ran, each (op facts, operand values): op facts is tile_ops.py's
    `batch_facts` of the op, the values are what its closure read from its slots (numpy views,
    Python scalars). `append` adds to the running block's list (`begin`)."""

    __slots__ = ("blocks", "append", "block", "window", "_arena", "_taken")

    def __init__(self, window: int):
        self.window = window
        self.blocks: list[list] = []
        self.block = -1
        self.append = None
        self._arena: dict = {}  # alloc key -> its buffer, (window,) + shape
        self._taken: dict = {}  # alloc key -> the last block that took its slice

    def begin(self, b: int) -> None:
        """Block `b` starts (blocks run in order from 0, `take`n every `window` blocks): its tile
        ops append to a new list of `blocks`."""
        self.block = b
        self.blocks.append([])
        self.append = self.blocks[-1].append

    def full(self) -> bool:
        """Whether the window holds `window` blocks (its ops are to be computed: `take`)."""
        return len(self.blocks) >= self.window

    def take(self) -> list[list]:
        """The window's blocks' tapes, the window emptied: its slices are taken again (zeroed
        first) by the next window's blocks."""
        got, self.blocks = self.blocks, []
        return got

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
            buf = self._arena[key] = np.zeros((self.window,) + shape, dtype)
            return buf[b % self.window]
        got = buf[b % self.window]
        if b >= self.window:  # (an earlier window's block may have written it)
            got[...] = 0
        return got
