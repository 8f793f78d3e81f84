"""The matmul epilogue: what a result tile goes through before it leaves the core (row bias,
ReLU/GELU/SiLU, residual). `fuse-matmul-epilogue` puts such a chain in a region (match_chain,
fuse_chain); the matmul templates (matmul_epilogue, ffn, norm_matmul) and the tiling model read
the region back with parse_chain. One home for the matchers, so what is fused is what lowers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects.builtin import AnyFloat
from xdsl.ir import Operation, SSAValue

from ascendir.conversion.nn_to_ascend.host_builder import elem, shape
from ascendir.conversion.nn_to_ascend.templates.elementwise import activation_op
from ascendir.dialects import nn
from ascendir.patterns import fuse_ops, other_operand

KIND = "matmul_epilogue"


EPILOGUE_ACTIVATIONS = (nn.ReluOp, nn.GeluOp, nn.SiluOp)


def row_bias_of(add: Operation, mm_result: SSAValue) -> SSAValue | None:
    """The bias operand of `add` if it adds a row (N elements broadcast along the last dim of
    `mm_result`) to `mm_result`, else None."""
    bias = other_operand(add, mm_result) if isinstance(add, nn.AddOp) else None
    if bias is None:
        return None
    bs, ms = shape(bias), shape(mm_result)
    if not ms or elem(bias) != elem(mm_result):
        return None
    n = ms[-1]
    if not bs or bs[-1] != n or math.prod(bs) != n or len(bs) > len(ms):
        return None
    return bias


def residual_of(add: Operation, value: SSAValue) -> SSAValue | None:
    """The other operand of `add` if it adds a tensor of exactly `value`'s shape and element
    type to `value` (no broadcast: the residual tile is the output tile), else None."""
    other = other_operand(add, value) if isinstance(add, nn.AddOp) else None
    if other is None or shape(other) != shape(value) or elem(other) != elem(value) or shape(add.result) != shape(value):
        return None
    return other


def match_chain(mm: nn.MatmulOp) -> list[Operation]:
    """[matmul, add?, activation?, residual add?] starting at `mm` (just [mm] when nothing can be
    fused). An integer product (int8 x int8 -> int32) keeps no epilogue: its L0C holds int32
    and the template's output stage is float."""
    chain: list[Operation] = [mm]
    if not isinstance(elem(mm.result), AnyFloat):
        return chain
    value = mm.result
    user = value.get_user_of_unique_use()
    if user is not None and isinstance(user, nn.AddOp) and row_bias_of(user, value) is not None:
        chain.append(user)
        value = user.result
        user = value.get_user_of_unique_use()
    if user is not None and isinstance(user, EPILOGUE_ACTIVATIONS) and user.input == value:
        chain.append(user)
        value = user.result
        user = value.get_user_of_unique_use()
    if user is not None and residual_of(user, value) is not None:
        chain.append(user)
    return chain


def fuse_chain(chain: list[Operation]) -> nn.FusedOp:
    """Replace `chain` by one nn.fused whose body is a copy of the chain."""
    return fuse_ops(KIND, chain, [chain[-1].results[0]])


@dataclass(frozen=True)
class Epilogue:
    """What happens to a result tile before it leaves the core.

    Attributes:
        bias: GM buffer holding a row bias (N elements), or None.
        activation: "vrelu", "vrelu6", "vgelu", "vgelu_tanh", "vsilu" or None.
        residual: GM buffer of the output's shape and type added after the activation (the
            residual connection of a transformer layer), or None.
        channel_bias: GM buffer holding a column bias (M elements, one per output row: a
            convolution's per-channel bias in W[O, K] @ col[K, P]) added before the
            activation, or None.
    """

    bias: SSAValue | None = None
    activation: str | None = None
    residual: SSAValue | None = None
    channel_bias: SSAValue | None = None


def parse_chain(chain: list[Operation], args: dict[SSAValue, SSAValue]) -> tuple[nn.MatmulOp, Epilogue] | None:
    """(matmul, epilogue with GM buffers) of `chain` = [matmul, row-bias add?, ReLU/GELU/SiLU?,
    residual add?] (each link consuming the previous value; fuse_matmul_epilogue.match_chain's
    shape), or None. `args` maps the region arguments to their GM buffers; the matmul's rhs and
    the bias / residual must be among them (its lhs is the caller's business)."""
    if not chain or not isinstance(chain[0], nn.MatmulOp) or chain[0].rhs not in args:
        return None
    mm = chain[0]
    value, bias, act, residual = mm.result, None, None, None
    rest = chain[1:]
    if rest and row_bias_of(rest[0], value) in args:
        bias, value = args[row_bias_of(rest[0], value)], rest[0].result
        rest = rest[1:]
    if rest and isinstance(rest[0], EPILOGUE_ACTIVATIONS) and rest[0].input == value:
        act, value = activation_op(rest[0]), rest[0].result
        rest = rest[1:]
    if rest and residual_of(rest[0], value) in args:
        residual, value = args[residual_of(rest[0], value)], rest[0].result
        rest = rest[1:]
    return None if rest else (mm, Epilogue(bias, act, residual))
