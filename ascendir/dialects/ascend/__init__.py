"""The `ascend` dialect: what a Da Vinci NPU does.

Vocabulary follows Huawei's own (AscendNPU-IR HIVM / Ascend C), typed:

* attrs.py: memory spaces on memref types (`#ascend<space l0a>`), pipes, core types, copy
  layouts as enum attributes;
* placement.py: which unit and pipe runs an op (the one place that answers it);
* ops_kernel.py: `ascend.kernel`, `ascend.launch`, `ascend.block_idx`, `ascend.alloc`,
  `ascend.weight`, `ascend.view`;
* ops_dma.py: `ascend.copy`, `ascend.gather_rows`; ops_cube.py: `ascend.mmad`;
* ops_scalar.py: `ascend.get_value` (an integer of GM / UB read by the scalar unit into an index);
* ops_vector.py: the `ascend.v*` ops (UB only, destination-passing style), one class each;
* ops_sync.py: `ascend.set_flag` / `ascend.wait_flag` (pipe pair + event id), `ascend.pipe_barrier`;
* ops_comm.py: `ascend.group_rank`, `ascend.remote_copy` (GM to a peer's GM over a link),
  `ascend.notify_record` / `ascend.notify_wait` (cross-device), `ascend.comm_reduce`.

Loops are `scf.for`, index math `arith`, tiles of GM tensors `memref.subview`.
"""

from xdsl.ir import Dialect

from ascendir.dialects.ascend.attrs import (
    ARCH_ATTR,
    FFN_PLAN_ATTR,
    FLAG_UNITS_ATTR,
    OFFSET_ATTR,
    SLOT_ATTR,
    SUBBLOCK_ATTR,
    TARGET_ATTR,
    TILING_ATTR,
    Arch,
    ArchAttr,
    BarrierPipe,
    BarrierPipeAttr,
    CmpPredicate,
    CmpPredicateAttr,
    CoreType,
    CoreTypeAttr,
    DeviceGroupAttr,
    FlagUnit,
    FlagUnitAttr,
    FlagUnitsAttr,
    Layout,
    LayoutAttr,
    MemSpace,
    MemSpaceAttr,
    Pipe,
    PipeAttr,
    TargetAttr,
    TilingAttr,
    memref_type,
    module_arch,
    space_of,
)
from ascendir.dialects.ascend.ops_cube import MmadOp
from ascendir.dialects.cast_mode import RoundMode, RoundModeAttr
from ascendir.dialects.ascend.ops_dma import CopyOp, GatherRowsOp
from ascendir.dialects.ascend.ops_scalar import GetValueOp
from ascendir.dialects.ascend.ops_kernel import (
    AllocOp,
    BlockIdxOp,
    KernelOp,
    LaunchOp,
    ReturnOp,
    ViewOp,
    WeightOp,
    subblock,
)
from ascendir.dialects.ascend.ops_comm import (
    COMM_OPS,
    CommReduceOp,
    GroupRankOp,
    NotifyOp,
    NotifyRecordOp,
    NotifyWaitOp,
    RemoteCopyOp,
)
from ascendir.dialects.ascend.ops_sync import FlagOp, PipeBarrierOp, SetFlagOp, WaitFlagOp
from ascendir.dialects.ascend.ops_vector import (  # one class per vector op
    VECTOR_BINARY,
    VECTOR_OPS,
    VECTOR_REDUCE,
    VECTOR_SCALAR,
    VECTOR_UNARY,
    VabsOp,
    VaddOp,
    VaddsOp,
    VandOp,
    VarangeOp,
    VcastOp,
    VceilOp,
    VcmpOp,
    VcopyOp,
    VcosOp,
    VdivOp,
    VdupOp,
    VectorBinaryOp,
    VectorOp,
    VectorReduceOp,
    VectorScalarOp,
    VectorUnaryOp,
    VerfOp,
    VexpOp,
    VfloorOp,
    VfmodOp,
    VgeluOp,
    VgeluTanhOp,
    VlnOp,
    VmaxOp,
    VmaxsOp,
    VminOp,
    VminsOp,
    VmodOp,
    VmulOp,
    VmulsOp,
    VnegOp,
    VnotOp,
    VorOp,
    VpowOp,
    VpowsOp,
    VrecOp,
    VblockReduceMaxOp,
    VblockReduceSumOp,
    VreduceMaxOp,
    VreduceMinOp,
    VreduceProdOp,
    VreduceSumOp,
    VreluOp,
    VrsqrtOp,
    VselOp,
    VsigmoidOp,
    VsiluOp,
    VsinOp,
    VsqrtOp,
    VsubOp,
    VtanhOp,
    VtransposeOp,
    vector_op,
)
from ascendir.dialects.ascend.placement import (
    AIC_PIPES,
    AIV_PIPES,
    COPY_PATHS,
    Placement,
    Unit,
    copy_pipe,
)
# (the `placement` function is imported from its module, ascendir.dialects.ascend.placement: a
# package attribute of that name would hide the module)

Ascend = Dialect(
    "ascend",
    [
        KernelOp, ReturnOp, LaunchOp, BlockIdxOp, AllocOp, WeightOp, ViewOp, CopyOp, MmadOp,
        *VECTOR_OPS.values(), VcastOp, VcmpOp, VselOp, VdupOp, VtransposeOp, VarangeOp, GatherRowsOp, GetValueOp,
        SetFlagOp, WaitFlagOp, PipeBarrierOp, *COMM_OPS,
    ],
    [
        MemSpaceAttr, PipeAttr, BarrierPipeAttr, CoreTypeAttr, LayoutAttr, TilingAttr, CmpPredicateAttr,
        FlagUnitAttr, FlagUnitsAttr, ArchAttr, TargetAttr, RoundModeAttr, DeviceGroupAttr,
    ],
)
