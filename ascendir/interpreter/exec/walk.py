"""Reading a kernel's IR fast: walks and decoded subviews (compiling reads them several times per
kernel and per loop)."""

from __future__ import annotations

import functools
import struct
from operator import attrgetter

from xdsl.dialects import memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, DenseArrayBase
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from ascendir.costmodel.buffer_lifetimes import dropped_dims
from ascendir.dialects import ascend


# op -> its operands as a tuple (`tuple(op.operands)`, not copied). xDSL (pinned to one release:
# pyproject.toml) keeps them in `Operation._operands`; its `operands` property wraps them in a new
# OpOperands view at every access, and iterating that costs about 4x the tuple: the compile's
# analyses read every op's operands several times (about a twentieth of compiling a 7B layer's
# kernels). A test checks it against `op.operands` (test_interpreter_walk.py).
operands_of = attrgetter("_operands")


def walk_ops(op: Operation) -> list[Operation]:
    """`op` and every op nested in it, in `op.walk()` order (pre-order, program order): the ops of
    an `OpTree` of it."""
    return OpTree(op).ops


def is_gm(v: SSAValue) -> bool:
    """Whether `v` is a memref in GM (False for any other value)."""
    try:
        return ascend.space_of(v.type).value == "gm"
    except Exception:  # noqa: BLE001 - non-memref or no space: not GM
        return False


def int_values(a: DenseArrayBase) -> tuple[int, ...]:
    """`a.get_values()` of a dense array of integers, unpacked as xDSL does (its element type's
    struct format, as many elements as its bytes hold) with the format found once per element
    type object: xDSL derives it again at every call through four Python properties (half of
    decoding a subview, a few thousand per 7B layer compile). A test compares it with the
    accessors (test_interpreter_walk.py)."""
    t = a.elt_type
    got = _FORMATS.get(id(t))
    if got is None:
        f = t.format
        got = _FORMATS[id(t)] = (t, f[0], f[1:], t.size)  # (the type held: its id stays its own)
    _, order, code, size = got
    data = a.data.data
    return struct.unpack(f"{order}{len(data) // size}{code}", data)


_FORMATS: dict[int, tuple] = {}  # id(integer type) -> (the type, byte order, struct code, element bytes)


class Subview:
    """A memref.subview's operands and static lists, decoded once: xDSL decodes the operand
    segment sizes again at every access of `source`, `offsets`, `sizes` or `strides`.
    `dyn_offsets`: the dims whose offset is dynamic (one per value of `offsets`, in order);
    `gm`: whether the source is in GM."""

    __slots__ = ("source", "offsets", "sizes", "strides", "static_offsets", "static_sizes", "static_strides", "dyn_offsets", "gm",
                 "op", "_dropped")

    def __init__(self, op: memref.SubviewOp):
        self.op = op
        self._dropped: tuple[bool, ...] | None = None
        # operands: source, offsets, sizes, strides, as many of each as the segment sizes say (the
        # property xDSL's accessors read, AttrSizedOperandSegments)
        props = op.properties  # (what the static_* accessors read)
        _, n_off, n_size, n_stride = int_values(props["operandSegmentSizes"])
        vals = operands_of(op)
        self.source = vals[0]
        self.offsets = vals[1:1 + n_off]
        self.sizes = vals[1 + n_off:1 + n_off + n_size]
        self.strides = vals[1 + n_off + n_size:1 + n_off + n_size + n_stride]
        self.static_offsets = int_values(props["static_offsets"])
        self.static_sizes = int_values(props["static_sizes"])
        self.static_strides = int_values(props["static_strides"])
        self.dyn_offsets = [d for d, s in enumerate(self.static_offsets) if s == DYNAMIC_INDEX]
        self.gm = is_gm(self.source)

    def dropped(self) -> tuple[bool, ...]:
        """Per dim of the source, whether the view drops it (a rank-reducing subview:
        buffer_lifetimes.dropped_dims of its static sizes, dynamic ones DYNAMIC_INDEX), found at
        the first call that succeeds: both compiles of a kernel ask it of every subview.

        Raises: AscendirError (dropped_dims) when the sizes do not match the result shape."""
        got = self._dropped
        if got is None:
            n = self.source.type.get_num_dims()
            drop = dropped_dims(list(self.static_sizes), list(self.op.results[0].type.get_shape()), n)
            got = self._dropped = tuple(i in drop for i in range(n))
        return got


class OpTree:
    """The ops of `root` in `root.walk()` order (`ops`; a plain recursion over the block lists:
    xDSL's walk passes every op up through a generator per enclosing op, region and block, which
    made the kernel walks a visible part of compiling), with where each op's own walk lies in it: in pre-order
    an op and the ops nested in it are consecutive, so `walk(op)` is a slice and the per-loop
    analyses of a kernel (steady.py, remap.py; the tile loop's walk holds the K loop's, ...) need
    no walk of their own; and its subviews decoded once (`subview`). The same recursion keeps
    what the compiles and analyses would otherwise read from xDSL's linked lists again (about a
    twentieth of compiling a 7B layer's kernels went to xDSL's iterators and properties): each
    block's ops (`block_ops`), each op's directly nested ops and its regions' block arguments
    (`nested`) and its parent (`parents`), and the ids of the values each walk defines (`defined`). Valid while the IR is
    not changed: build one per compile."""

    __slots__ = ("ops", "_span", "_subviews", "_derived", "_blocks", "_nested", "_defs", "_def_at", "_parents")

    def __init__(self, root: Operation):
        ops: list[Operation] = []
        span: dict[int, tuple[int, int]] = {}  # id(op) -> (its index, the index past its nested ops)
        blocks: dict[int, list[Operation]] = {}  # id(block) -> its ops in order
        nested: dict[int, tuple[list[int], list]] = {}  # op index -> (nested op indices, block args); ops with regions
        defs: list[int] = []  # ids of the values defined, in walk order: per op its results, its blocks' arguments
        def_at: list[int] = []  # op index -> where its values start in `defs` (then one past the end)
        parents: list[int] = []  # op index -> its parent op's index (-1: the root)

        # xDSL's own fields, not its accessors (each a Python property or generator; the fields
        # are what they read, the release is pinned: pyproject.toml; a test compares them)
        def visit(o: Operation, up: int) -> None:
            i = len(ops)
            ops.append(o)
            parents.append(up)
            def_at.append(len(defs))
            defs.extend(map(id, o.results))
            if o.regions:
                kids: list[int] = []
                args: list = []
                for region in o.regions:
                    block = region._first_block
                    while block is not None:
                        args += block._args
                        defs.extend(map(id, block._args))
                        inside = blocks[id(block)] = []
                        x = block._first_op
                        while x is not None:
                            inside.append(x)
                            kids.append(len(ops))
                            visit(x, i)
                            x = x._next_op
                        block = block._next_block
                nested[i] = (kids, args)
            span[id(o)] = (i, len(ops))  # (ids are unique: `ops` keeps every op alive)

        visit(root, -1)
        del visit  # (it calls itself: a reference cycle otherwise)
        def_at.append(len(defs))
        self.ops = ops
        self._span = span
        self._blocks = blocks
        self._nested = nested
        self._defs = defs
        self._def_at = def_at
        self._parents = parents
        self._subviews: dict[Operation, Subview] = {}
        self._derived: dict = {}

    def block_ops(self, block: Block) -> list[Operation]:
        """The ops of `block` in order (`list(block.ops)`), a block of the tree; `block.ops` read
        now for any other block. The list is shared: callers do not change it."""
        got = self._blocks.get(id(block))
        return got if got is not None else list(block.ops)

    def nested(self, i: int) -> tuple[list[int], list[BlockArgument]]:
        """(Indices in `ops` of the ops directly in the regions of op `ops[i]`, the arguments of
        its regions' blocks), both in order; empty for an op without regions. Shared: not to be
        changed."""
        return self._nested.get(i, _NO_NESTED)

    def parents(self) -> list[int]:
        """Per op of `ops`, the index of the op whose region holds it (-1 for the root). Shared:
        not to be changed."""
        return self._parents

    def defined(self, op: Operation) -> set[int]:
        """The ids of the values `op` and the ops nested in it define (their results, their
        regions' block arguments); `op` an op of the tree (KeyError otherwise)."""
        i, j = self._span[id(op)]
        return set(self._defs[self._def_at[i]:self._def_at[j]])

    def walk(self, op: Operation) -> list[Operation]:
        """`walk_ops(op)` for an op of the tree (KeyError for any other op)."""
        i, j = self._span[id(op)]
        return self.ops[i:j]

    def span(self, op: Operation) -> tuple[int, int]:
        """(The position of `op` in `ops`, the position past the ops nested in it): `walk(op)` is
        `ops` between them (KeyError for an op not in the tree)."""
        return self._span[id(op)]

    def index(self, op: Operation) -> int:
        """The position of `op` in `ops` (KeyError for an op not in the tree)."""
        return self._span[id(op)][0]

    def derived(self, key, make):
        """`make()`, computed once per tree and `key`: a fact of the IR that the kernel's compiles
        (the timing-only twin's and the data walk's share the tree) would both derive, e.g. a
        loop's memo inputs. The result is shared: callers do not change it."""
        got = self._derived.get(key, self)  # (self: no entry)
        if got is self:
            got = self._derived[key] = make()
        return got

    def subview(self, op: memref.SubviewOp) -> Subview:
        """`op` decoded (`Subview`), once per tree; `op` is any subview (of the tree or not)."""
        got = self._subviews.get(op)
        if got is None:
            got = self._subviews[op] = Subview(op)
        return got


_NO_NESTED: tuple[list[int], list] = ([], [])


@functools.cache
def _is_a(cls: type, base: type) -> bool:
    """issubclass(cls, base), remembered per pair of classes: the pre-walks ask it of every op of
    the kernel, and isinstance on xDSL's op classes (ABCs) runs Python code at every call."""
    return issubclass(cls, base)
