"""Buffer sizes as a chip's on-chip spaces count them."""

from __future__ import annotations

from ascendir.hardware.config import HardwareConfig


def aligned_bytes(target: HardwareConfig, space: str, nbytes: int) -> int:
    """Bytes a buffer of `nbytes` takes in on-chip `space` ("ub", "l1", ...): rounded up to the
    space's address alignment (target `align`), an empty buffer one alignment unit. What
    `KernelBuilder.alloc` counts against the capacity, so estimates that use it agree with it."""
    align = target.align.get(space, 32)
    return -(-max(nbytes, 1) // align) * align
