"""The `nn` dialect: what the model computes.

Value semantics on builtin `tensor<...>` types with static shapes. One op per neural-network
concept, named as ONNX names it (ops.py). Weights are `nn.weight @name` ops referring to an entry
of a `WeightStore`; they are never printed as literals. Fused ops are `nn.fused` regions whose
body is their meaning, their kind a `#nn.fused_kind<...>` (fused.py). Closed-set ONNX string
attributes are enum attributes (attrs.py): `#nn.pool_kind<max>`, `#nn.gelu_approximate<tanh>`.

Collectives over device groups (collectives.py): `nn.all_reduce`, `nn.all_gather`,
`nn.reduce_scatter`, `nn.all_to_all`, the points where the ranks of a sharded (SPMD) module meet;
expert-parallel exchanges (moe_distribute.py): `nn.moe_distribute_dispatch` / `_combine`.
Weight-only quantized matmul (quant.py): `nn.weight_quant_matmul` (antiquant).

Every op prints as `nn.op %operands {attrs} : (operand types) -> result types`.
"""

from xdsl.ir import Dialect

from ascendir.dialects.nn.attrs import GeluApproximate, GeluApproximateAttr, PoolKind, PoolKindAttr
from ascendir.dialects.nn.cache import CacheAppendOp, PagedCacheAppendOp, PagedKVOp  # noqa: F401 (re-exported)
from ascendir.dialects.nn.collectives import AllGatherOp, AllReduceOp, AllToAllOp, CollectiveOp, ReduceScatterOp
from ascendir.dialects.nn.moe_distribute import MoeDistributeCombineOp, MoeDistributeDispatchOp, MoeDistributeOp  # noqa: F401
from ascendir.dialects.nn.quant import WeightQuantMatmulOp  # noqa: F401 (re-exported)
from ascendir.dialects.nn.fused import FusedKind, FusedKindAttr, FusedOp, YieldOp
from ascendir.dialects.nn.ops import (
    AbsOp,
    AddOp,
    AndOp,
    AttentionOp,
    AxisOp,
    BinaryOp,
    CastOp,
    CeilOp,
    ClipOp,
    ComparisonOp,
    ConcatOp,
    ConstantOp,
    Conv2dOp,
    CosOp,
    DivOp,
    EqualOp,
    ErfOp,
    ExpOp,
    ExpandOp,
    FloorOp,
    FmodOp,
    GatherOp,
    GeluOp,
    GreaterEqualOp,
    GreaterOp,
    IdentityOp,
    LayerNormOp,
    LeakyReluOp,
    LessEqualOp,
    LessOp,
    LogOp,
    MatmulOp,
    MaxOp,
    MinOp,
    ModOp,
    MulOp,
    NNOp,
    NegOp,
    NotOp,
    OrOp,
    Pool2dOp,
    PowOp,
    ReciprocalOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceMinOp,
    ReduceOp,
    ReduceProdOp,
    ReduceSumOp,
    ReluOp,
    ReshapeOp,
    RmsNormOp,
    RsqrtOp,
    SigmoidOp,
    SiluOp,
    SinOp,
    SliceOp,
    SoftmaxOp,
    SqrtOp,
    SubOp,
    TanhOp,
    TopKOp,
    TransposeOp,
    UnaryOp,
    WeightOp,
    WhereOp,
    WindowOp,
    broadcast_shapes,
    matmul_shape,
    shape_of,
    window_output_size,
)

NN = Dialect(
    "nn",
    [
        WeightOp, ConstantOp,
        ReluOp, SigmoidOp, SiluOp, TanhOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, NegOp, AbsOp,
        ErfOp, SinOp, CosOp, FloorOp, CeilOp, NotOp, IdentityOp, GeluOp, LeakyReluOp, ClipOp,
        AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, ModOp, FmodOp, AndOp, OrOp,
        EqualOp, LessOp, LessEqualOp, GreaterOp, GreaterEqualOp, WhereOp, CastOp,
        MatmulOp, SoftmaxOp, LayerNormOp, RmsNormOp, AttentionOp, Conv2dOp, Pool2dOp,
        ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp, TopKOp,
        TransposeOp, ReshapeOp, ExpandOp, ConcatOp, SliceOp, GatherOp,
        YieldOp, FusedOp,
        AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp,
        MoeDistributeDispatchOp, MoeDistributeCombineOp,
        CacheAppendOp, PagedCacheAppendOp, PagedKVOp,
        WeightQuantMatmulOp,
    ],
    [FusedKindAttr, PoolKindAttr, GeluApproximateAttr],
)
