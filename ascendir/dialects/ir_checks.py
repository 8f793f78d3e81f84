"""Checks of IR that xDSL (0.75) leaves out, made where ascendir parses IR text (driver.load_ir,
ascendir-opt): string literals before lexing, SSA dominance after parsing.

* `check_string_literals`: xDSL lexes a string literal with the regex
  `"(?:[^"\\\\\\n\\v\\f]+|\\\\(?:["nt\\\\]|[0-9A-Fa-f]{2}))*"`, whose nested quantifier backtracks
  exponentially when the literal does not close: 35 bytes (`builtin.module { "` and 30 letters)
  take minutes, the time doubling per letter. We scan the text once, in linear time, with the same
  grammar (a literal ends on its line; escapes are \\n \\t \\\\ \\" or two hex digits) and reject a
  bad literal before xDSL sees it.
* `check_declarations`: a public func.func without a body (`{}` parses as no block at all).
* `check_signatures`: a func.func argument or result of a tensor type with a dynamic dim
  (`tensor<?x8xf32>`): the nn ops' verifier refuses dynamic dims on their operands, but an
  argument no op uses (or one only returned) reached the random inputs as a shape of -1; one of
  more than TENSOR_BUDGET elements (a 2^62-wide dim overflowed numpy's sizes).
* dense literals (reported upstream: docs/upstream/xdsl-dense-splat-memory.md): xDSL expands a
  splat (`dense<1.0> : tensor<4611686018427387904xf32>`) to a Python list of one element per
  value of the type before packing it, so a big type took all memory (a MemoryError with no
  message, or gigabytes under the cap). Importing this module makes xDSL's parser refuse a
  literal over DENSE_LITERAL_BUDGET elements first, with a parse error at the literal (the line
  shows the op).
* `check_loop_steps`: an scf.for with a constant step of 0 or less (MLIR's verifier refuses it;
  the simulator's loop and insert-sync's trip count met it as range() / a division by 0).
* `check_dominance`: xDSL's parser accepts a value used before the op that defines it (a forward
  reference) and its verifier does not check dominance, so the lowering or the simulator met an
  undefined value. MLIR's verifier rejects it in SSACFG regions; so do we.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, TensorType
from xdsl.ir import Operation, Region, SSAValue
from xdsl.parser.attribute_parser import AttrParser
from xdsl.traits import IsolatedFromAbove

from ascendir.errors import AscendirError

TENSOR_BUDGET = 2**34
"""Elements any tensor may have, of an imported graph or a parsed function's signature (the
interpreter's and the lowering's sizes stay well inside int64 byte offsets)."""


def over_budget(shape) -> str | None:
    """Why a static `shape` (a sequence of non-negative ints) is too large for a tensor, or None:
    more than TENSOR_BUDGET elements, or a dim above it (a zero-size shape too: numpy refuses
    0x2^62, "array is too big", as it sizes the other dims' product)."""
    size = math.prod(shape)
    if size > TENSOR_BUDGET:
        return f"has {size} elements; at most {TENSOR_BUDGET}"
    if max(shape, default=0) > TENSOR_BUDGET:
        return f"has a dim of {max(shape)}; at most {TENSOR_BUDGET}"
    return None

DENSE_LITERAL_BUDGET = 2**26
"""Elements a dense literal of parsed IR may have (256 MiB of f32; xDSL holds it as a Python list
of 8-byte references, 512 MiB, while it packs it)."""

_xdsl_dense_literal_type = AttrParser._parse_dense_literal_type
_xdsl_dense_elements_attr = AttrParser.parse_dense_int_or_fp_elements_attr


def _check_dense_size(parser: AttrParser, type) -> None:
    n = math.prod(type.get_shape())
    if n > DENSE_LITERAL_BUDGET:
        parser.raise_error(f"dense literal of {type} has {n} elements, over the {DENSE_LITERAL_BUDGET} a literal may have")


def _bounded_dense_literal_type(self: AttrParser):
    type = _xdsl_dense_literal_type(self)
    _check_dense_size(self, type)
    return type


def _bounded_dense_elements_attr(self: AttrParser, type):
    if type is not None:  # a type given before the literal (else it is parsed after, above)
        _check_dense_size(self, type)
    return _xdsl_dense_elements_attr(self, type)


AttrParser._parse_dense_literal_type = _bounded_dense_literal_type
AttrParser.parse_dense_int_or_fp_elements_attr = _bounded_dense_elements_attr

_HEX = frozenset("0123456789abcdefABCDEF")


def check_string_literals(text: str, where: str) -> None:
    """Raises AscendirError naming `where:line:column` of the first string literal of `text` that
    does not close on its line or holds an escape xDSL does not know (linear time)."""
    i, n, line, line_start = 0, len(text), 1, 0
    while i < n:
        c = text[i]
        if c == "\n":
            line, line_start = line + 1, i + 1
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == '"':
            start = i
            i += 1
            while True:
                if i >= n or text[i] in "\n\v\f":
                    raise AscendirError(f"{where}:{line}:{start - line_start + 1} string literal does not close on its line")
                if text[i] == '"':
                    break
                if text[i] == "\\":
                    if text[i + 1 : i + 2] in ('"', "n", "t", "\\") and i + 1 < n:
                        i += 2
                        continue
                    if i + 2 < n and text[i + 1] in _HEX and text[i + 2] in _HEX:
                        i += 3
                        continue
                    raise AscendirError(
                        f"{where}:{line}:{i - line_start + 1} unknown escape in a string literal (\\n \\t \\\\ \\\" or two hex digits)"
                    )
                i += 1
        i += 1


def check_module(module: ModuleOp) -> None:
    """What every parsed module must satisfy before a pass or the simulator sees it:
    `check_declarations`, `check_signatures`, `check_value_shapes`, `check_dominance` and
    `check_loop_steps`.

    Raises:
        AscendirError: naming the function or op and the reason.
    """
    check_declarations(module)
    check_signatures(module)
    check_value_shapes(module)
    check_dominance(module)
    check_loop_steps(module)


def check_declarations(module: ModuleOp) -> None:
    """Every public func.func has a body. `func.func @main() {}` parses as a function without
    blocks, which every pass reads as a body; MLIR refuses it too ("symbol declaration cannot
    have public visibility").

    Raises:
        AscendirError: naming the function.
    """
    for op in module.walk():
        if isinstance(op, func.FuncOp) and not op.body.blocks and (op.sym_visibility is None or op.sym_visibility.data == "public"):
            raise AscendirError(f"func.func @{op.sym_name.data} has no body (a public function must be defined)")


def check_signatures(module: ModuleOp) -> None:
    """Every tensor or memref argument and result of every func.func has static dims (as the nn
    ops' operands must, NNOp.verify_; @main's become the run's inputs and outputs), at most
    TENSOR_BUDGET elements and no dim above it (an argument no op uses reached the inputs, or a
    timing-only run's zero views, unchecked: 2^62-wide dims overflowed numpy, a `?` dim made a
    negative shape, a 0x2^62 one was "too big" for numpy); kernels' memrefs are left to the ascend
    verifiers.

    Raises:
        AscendirError: naming the function, the argument or result and its type.
    """
    for op in module.walk():
        if not isinstance(op, func.FuncOp):
            continue
        for kind, types in (("argument", op.function_type.inputs.data), ("result", op.function_type.outputs.data)):
            for i, t in enumerate(types):
                if not isinstance(t, (TensorType, MemRefType)):
                    continue
                shape = t.get_shape()
                where = f"func.func @{op.sym_name.data}: {kind} {i}"
                if any(d < 0 for d in shape):
                    raise AscendirError(f"{where} has a dynamic dim ({t}); function arguments and results must have static shapes")
                if (why := over_budget(shape)) is not None:
                    raise AscendirError(f"{where} {why} ({t})")


def check_value_shapes(module: ModuleOp) -> None:
    """No op result inside a function or kernel is a tensor or memref with a dim above
    TENSOR_BUDGET (dynamic dims are left to the verifiers): an nn.reshape of a 0x4 tensor to
    0x2^62 made numpy refuse the shape mid-run. Element counts are left to the checks that know
    the chip (plan-memory's HBM capacity, the host-memory estimate), which say more.

    Raises:
        AscendirError: naming the op and the type.
    """
    for op in module.walk():
        for r in op.results:
            t = r.type
            if isinstance(t, (TensorType, MemRefType)) and max(t.get_shape(), default=0) > TENSOR_BUDGET:
                raise AscendirError(f"{op.name}: result has a dim of {max(t.get_shape())}; at most {TENSOR_BUDGET} ({t})")


def check_loop_steps(module: ModuleOp) -> None:
    """Every scf.for whose step is an arith.constant steps by a positive amount, as MLIR's
    verifier requires (xDSL's does not check it): a step of 0 never ends, and the passes that
    count trips divide by it. A step computed at run time is checked when the loop runs
    (`loop_range`).

    Raises:
        AscendirError: naming the loop and its step.
    """
    for op in module.walk():
        if isinstance(op, scf.ForOp) and isinstance(c := op.step.owner, arith.ConstantOp):
            value = c.value
            if isinstance(value, IntegerAttr) and value.value.data <= 0:
                raise AscendirError(f"scf.for: constant step {value.value.data} must be positive")


def loop_range(lb: int, ub: int, step: int) -> range:
    """The induction values of an scf.for from `lb` to `ub` by `step` (a step computed at run time:
    the interpreter runs the loop over them, insert-sync's analysis counts them).

    Raises:
        AscendirError: a step that is not positive (MLIR: undefined; range() would refuse 0 and
            count a negative one down)."""
    if step <= 0:
        raise AscendirError(f"scf.for: step {step} must be positive (lower bound {lb}, upper bound {ub})")
    return range(lb, ub, step)


def check_dominance(module: ModuleOp | Operation) -> None:
    """Every operand is defined before its use: by an earlier op of its block or of an enclosing
    block, or as an argument of its block or an enclosing one, and never from outside an op
    isolated from above (a function, a kernel). Regions of several blocks (unstructured control
    flow) are checked leniently: a value of any of their blocks counts as visible.

    Raises:
        AscendirError: naming the op and the value used before its definition.
    """
    _check_op(module, set())


def _check_region(region: Region, visible: set[SSAValue]) -> None:
    # one set, grown on entry to a block and shrunk on leaving it: no copy per nested block
    added: list[SSAValue] = []
    if len(region.blocks) > 1:
        added = [a for b in region.blocks for a in b.args] + [r for b in region.blocks for op in b.ops for r in op.results]
    fresh = [v for v in added if v not in visible]
    visible.update(fresh)
    for block in region.blocks:
        mine = [a for a in block.args if a not in visible]
        visible.update(mine)
        for op in block.ops:
            for operand in op.operands:
                if operand not in visible:
                    name = f"%{operand.name_hint}" if operand.name_hint else "a value"
                    raise AscendirError(f"{op.name}: operand {name} is used before its definition (or outside its scope)")
            _check_op(op, visible)
            new = [r for r in op.results if r not in visible]
            visible.update(new)
            mine.extend(new)
        visible.difference_update(mine)
    visible.difference_update(fresh)


def _check_op(op: Operation, visible: set[SSAValue]) -> None:
    inner = set() if op.has_trait(IsolatedFromAbove) else visible
    for region in op.regions:
        _check_region(region, inner)
