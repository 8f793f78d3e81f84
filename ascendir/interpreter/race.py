"""Race detection between the pipes of one core (vector clocks; independent of timing).

Happens-before inside a core: program order within a pipe; set_flag(src→dst) → the matching
wait_flag (the waiting pipe inherits everything the setting pipe had done or inherited);
pipe_barrier(ALL) (every pipe inherits every other). pipe_barrier(P) orders P after its own
earlier ops only (program order already does). The scalar pipe issues ops in program order but
issue is not completion, so it gives no happens-before between other pipes. Blocks on a core
start after the previous block finished, so each block starts with fresh clocks.

Every tile op records, per memref operand, the element range it touches in its root buffer
(the address tag the compiler propagates: root, element offset, strides); the last operand is
the one written (ascend convention: copy dst, mmad c, vector dest). A race is two ops on different
pipes touching overlapping elements of the same buffer, one of them writing, with no
happens-before between them: the interpreter raises AscendirError naming the kernel, the buffer,
both ops and both pipes. Overlap is exact for views with the same strides (boxes per dim),
else the [first, last] element interval (conservative). Kept per (buffer, pipe, read/write): the
last few distinct ranges accessed (older accesses of a pipe are ordered before its newer ones).

Only the final pass of a launch checks (the L2 recording pass runs the same program); GM races
between blocks on different cores are not checked (no cross-core sync is modelled). Numerics runs
always check; timing-only runs check when asked (`check_races`, `ascendir run --check-races`):
a race is a property of the program, and a sweep should not pay for the check on every point.
"""

from __future__ import annotations

from ascendir.errors import AscendirError

KEEP = 8  # distinct ranges remembered per (buffer, pipe, read/write)


def extent(tag: tuple, shape: tuple[int, ...]) -> tuple[int, int]:
    """[first, last] element of a view with address tag (root, offset, strides) and `shape`."""
    off, st = tag[1], tag[2]
    hi = off
    for s, t in zip(shape, st):
        if s == 0:
            return off, off - 1
        hi += (s - 1) * t
    return off, hi


def describe(root) -> str:
    """Human name of an address root (compiler.py tags: on-chip (space, n, text), GM input /
    weight (kind, name), GM allocation (int))."""
    if isinstance(root, tuple) and len(root) == 3:
        return root[2]
    if isinstance(root, tuple) and len(root) == 2:
        return f"GM {root[0]} '{root[1]}'"
    return f"GM buffer #{root}"


def _overlap(a: tuple, b: tuple) -> bool:
    """a, b = (lo, hi, offset, strides, shape)."""
    if a[1] < b[0] or b[1] < a[0]:
        return False
    if a[3] != b[3] or not a[3]:
        return True
    # same strides: compare per-dim index boxes (offsets decomposed along the strides)
    st = a[3]
    order = sorted(range(len(st)), key=lambda i: -st[i])
    ra, rb = a[2], b[2]
    for i in order:
        s = st[i]
        if s <= 0:
            return True
        ia, ra = divmod(ra, s)
        ib, rb = divmod(rb, s)
        if ia + a[4][i] <= ib or ib + b[4][i] <= ia:
            return False
    return True


class RaceChecker:
    """Vector clocks of one core's pipes during one block, and the recent accesses per buffer."""

    __slots__ = ("kernel", "labels", "vc", "seen", "nslots")

    def __init__(self, kernel: str, labels: list[str]):
        self.kernel = kernel
        self.labels = labels
        self.nslots = len(labels)
        self.vc: list[list[int]] = []
        self.seen: dict = {}

    def reset(self) -> None:
        n = self.nslots
        self.vc = [[0] * n for _ in range(n)]
        self.seen = {}

    def set(self, src: int) -> list[int]:
        return list(self.vc[src])

    def wait(self, dst: int, clock: list[int]) -> None:
        v = self.vc[dst]
        for i, c in enumerate(clock):
            if c > v[i]:
                v[i] = c

    def barrier_all(self) -> None:
        j = [max(col) for col in zip(*self.vc)]
        self.vc = [list(j) for _ in range(self.nslots)]

    def access(self, pid: int, operands: list[tuple], name: str, block: int) -> None:
        """operands: (tag, shape, writes) of each memref operand of an op on pipe slot `pid`."""
        vc = self.vc[pid]
        vc[pid] += 1
        epoch = vc[pid]
        seen = self.seen
        for tag, shape, w in operands:
            lo, hi = extent(tag, shape)
            if hi < lo:
                continue
            rng = (lo, hi, tag[1], tag[2], shape)
            per = seen.get(tag[0])
            if per is None:
                per = seen[tag[0]] = {}
            for (p, pw), entries in per.items():
                if p == pid or not (pw or w):
                    continue
                known = vc[p]
                # entries are in increasing epoch order: only the tail after `known` can race
                i = len(entries)
                while i and entries[i - 1][0] > known:
                    i -= 1
                for e_epoch, e_rng, e_name in entries[i:]:
                    if _overlap(rng, e_rng):
                        what = describe(tag[0])
                        kinds = f"{'write' if pw else 'read'} / {'write' if w else 'read'}"
                        raise AscendirError(
                            f"race in kernel @{self.kernel} (block {block}): buffer {what}: {e_name} on "
                            f"{self.labels[p]} and {name} on {self.labels[pid]} touch overlapping elements "
                            f"({kinds}) with no set_flag/wait_flag or pipe_barrier ordering them"
                        )
            lst = per.setdefault((pid, w), [])
            for i, (_, r, _) in enumerate(lst):
                if r == rng:
                    del lst[i]
                    break
            lst.append((epoch, rng, name))
            if len(lst) > KEEP:
                del lst[0]
