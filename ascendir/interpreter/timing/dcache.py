"""The scalar unit's data cache (DCache): which `ascend.get_value` reads from GM hit.

Each scalar unit (the AIC's, each AIV's; a coupled core's one) reads GM through its own DCache of
`memory.dcache_bytes` (32 KB on 910B / A3, S2 hardware constraints) in lines of
`memory.dcache_line_bytes` (64 B, pyasc `DataCacheCleanAndInvalid`: SINGLE_CACHE_LINE is 64-byte
aligned, S29). A hit costs a scalar load (`memory.dcache_hit_latency`, S5 scalar LD 6 cycles), a
miss a GM read (`memory.gm_read_latency`). Replacement is modelled as LRU over whole lines (the
associativity is not published).

Every launch starts cold: the DMA writes of earlier kernels make lines stale and kernels start
clean (a kernel that wants a cached GM value written by DMA must invalidate it first). A core
keeps its caches across the blocks it runs in one launch.

Lines are keyed by GM address tags, (root, byte offset // line), not by host addresses: the
timing-only twin of a numerics launch runs on zero-stride views (exec/common.py `zero_view`)
whose host addresses all coincide. GM buffers are taken as line-aligned (GM allocations are
aligned far beyond 64 B); a read spans one line (i32 / i64 elements at natural alignment).
"""

from __future__ import annotations

from collections import OrderedDict


class ScalarDCache:
    """LRU set of the lines one scalar unit holds during one launch.

    lines: capacity in lines (dcache_bytes // dcache_line_bytes)."""

    __slots__ = ("lines", "held", "hits", "misses")

    def __init__(self, lines: int):
        self.lines = lines
        self.held: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def read(self, line) -> bool:
        """Touch `line` (any hashable key of a GM line); True on a hit. A miss fills the line,
        evicting the least recently used one when the cache is full."""
        held = self.held
        if line in held:
            held.move_to_end(line)
            self.hits += 1
            return True
        self.misses += 1
        held[line] = None
        if len(held) > self.lines:
            held.popitem(last=False)
        return False
