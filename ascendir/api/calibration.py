"""Calibration: the interpreter's predictions for the measurements of reference §7.

Each case compiles a one-op ONNX model with ascendir's own pipeline (or, for the V9 ladder, a
hand-written kernel of `testing.matmul_ir`) for the case's chip, runs it timing-only, and
compares one figure with the published one. Nothing is fitted per case: every constant comes from
the target TOML (sources [Sn] in /work/shared/reference/ascend-hardware.md).

Cases (measured figure, its unit, and how the prediction is made comparable):
* V2–V5 [S15] torch.matmul BF16 on 910B2C: TFLOPS = 2·M·N·K / simulated time (launch included).
* V1 [S15] "best shape" 322.5 TFLOPS: the best predicted TFLOPS over the V2–V5 shapes and 8192³.
* V6 [S16] peak BF16 328 TF and FP32 87 TF: 8192³ matmuls.
* V7 [S16] torch.exp fp32: limulidae's bench_membw.py divides the *input* bytes by the time, so
  the prediction is input bytes / simulated time of a 256 MB Exp. The one row a constant is
  fitted on: the chip files' memory.hbm_efficiency (the share of the nominal HBM bandwidth a
  streaming kernel sustains, the bandwidth floor's HBM roof) is 2 x 642 GB/s / 1.6 TB/s = 0.80
  (0.803 exactly under this row's convention, launch included; the README does not say which
  column or size its figure is, so two digits). V14 and V20 then validate it.
* V9 [S17] PTO-DSL ladder on 910B2 (fp16 4096³): naive ≈ 50 % of torch.matmul, double buffered +
  swizzled ≈ 90 %; torch.matmul taken as 90 % of peak (V5) → 45 % / 81 % of cube peak. The naive
  rung uses the tile of S17's step1_baseline.py (128 x 256, baseK 64, 256 of K per B load, one
  buffer), not a smaller one.
* V14 [S19] Qwen3-14B decode GEMMs, M = 16, BF16, on an A3 die (= 910B1 constants, §1.1):
  microseconds per kernel (launch wall time) for gate/up/down. Their B are the model's weights,
  so B is an `nn.weight` here (weight_matmul_us), not a graph input: a constant weight is stored
  NZ and its kernel may prefetch it on the AIVs without tiling.PREFETCH_MARGIN, which is for the
  runtime B of torch.matmul (V2–V5). q_proj (26 µs for 52 MB of
  weights = 2 TB/s) and k/v are left out: their implied bandwidth exceeds the die's 1.6 TB/s, so
  the "per block" figures are not whole-GEMM times.
* V11–V13 [S17 PR #126, #112] FlashAttention forward, one head, f16, not causal (Q rows x S1,
  head dim D): µs of torch_npu's npu_fused_infer_attention_score, the "ref" / "npu_fused_attn"
  column the PTO-DSL kernels were compared with (PR #126: ref 175.53 / 242.52 / 388.52 µs at 8192
  / 16384 / 32768 keys, the last one row V12b here; PR #112: npu_fused_attn 178.20 µs), against
  ascendir's fuse-attention + flash_attention template. S17 times every call with
  `ptodsl.utils.bench.do_bench`: per iteration a 256 MB `cache.zero_()` (the L2 flush, M µs on
  the device), a start event, the call, an end event, and no synchronisation until the end. With
  P the host's time per iteration and K the kernel: the flush of iteration i queues behind kernel
  i-1, so it ends max(0, K - e) + M after the host enqueued it (e: host time from a kernel launch
  to the next flush, a few µs), and the kernel, launched P - e after the flush, starts when both
  are there. The events then record K + max(0, P - K - M) = max(K, F), F = P - M (for K > e):
  the kernel, or, when the host is slower than flush + kernel, the host's period less the flush.
  A ctypes launch (the PTO-DSL kernels) has a small P and records K; torch_npu's op (views, the
  aclnn tiling on the host, the launch) evidently does not: V13 (2.15 GFLOP, a quarter of V11's
  K/V bytes, two thirds of its softmax elements, a sixth of its flops) takes 178.2 µs, longer than
  V11 (12.88 GFLOP, 175.53 µs), which no kernel time that grows with the work allows, and the
  same op took 174.28 µs in a comment on PR #112 (at 513.41 GFLOP/s: 0.089 GFLOP; the shape is
  not given), while 16k and 32k keys (V12, V12b) grow with the work (146 µs per 16k keys:
  176.5 TFLOPS). So the prediction is max(simulated kernel, FIA_HOST_FLOOR_US), the floor being
  that 0.089 GFLOP call, which is none of the rows; the note column shows the simulated kernel,
  and rows predicted at the floor are marked and summarised apart (they say only that the kernel
  is below it). The floor is a property of the harness and of torch_npu's host code, not of the
  chip: it lives here, not in a target TOML.
  Re-derived (this revision): the three 3072-row calls lie on one line in S1, 175.53 / 242.52 /
  388.52 µs = F + 146.0 µs per 16384 keys with F = 96-102 µs that grows with nothing, and the
  same op measured back to back without the flush (S27 demos/torch_jit/flash_atten README:
  50 calls between two events, 2048 query rows, 4096 -> 8192 keys: 91.80 -> 126.85 µs on an
  aarch64 host, 101.94 -> 142.38 µs on x86) has F = 57-62 µs at its zero-key intercept. The
  flush keeps the device, not the host, the slower side (256 MB at <= 1.6 TB/s is >= 168 µs of
  device time per iteration, against a 47-77 µs host floor of the op in S27), so the recorded
  time is the op's device time: F is torch_npu / CANN's fixed device cost of the fused-attention
  call (its size differs by machine and harness), not FlashAttention work, and a kernel model
  cannot predict it. Only differences of calls from one harness cancel it: "V12-V11" (+8192
  keys) and "V12b-V12" (+16384 keys) compare the template's cost per key with torch_npu's
  kernel; the absolute V12 / V12b rows (F + kernel) were a mis-conversion and are dropped. V11
  and V13 stay as floor rows (F dominates both).
* V20 [S27] pto-isa's 910B2 FlashAttention table (kernels/manual/common/flash_atten README,
  "910B2 Multi-Core Comparison"): one head, S0 = S1 = 16384 / 32768 (V20a/b) and 1024 / 2048 /
  4096 / 8192 (V20e-h), D 128, f16, not causal, "total task time" of pto-isa's hand-written
  kernel; the table's MOps (S0·S1·128·4 / 1e6) and TFLOPS (MOps / µs) are what main.cpp computes
  from its own timing, so that is the harness. main.cpp at that path times one launch by device
  timestamps (the earliest block start to the latest block end, launch not included); the
  LaunchTFA it calls (fa_performance_kernel.cpp) first runs an empty warm-up kernel and an SDMA
  prefetch (PTO_PREFETCH) of S0 · 128 halves of each of Q, K, V into L2. The kernel launches
  S0 / CUBE_S0 blocks (128 / 256; 6 / 11 waves on 24 AICs) and is configured by CUBE_S0 (rows per
  block), CUBE_S1 = 128 keys per cube step and TILE_S1 keys per vector tile; the table does not
  give them, the directory's defaults are 128 / 128 / 256 (fa_performance_kernel.h,
  generate_cases.py). The prediction is pto-isa's kernel itself, written for the interpreter as
  V21's GEMM is (api/pto_flash_attention: its S0 / 128 blocks, three GM FIFOs of 8 slots with
  their TALLOC / TPUSH / TPOP / TFREE flags, the L0C and L1 / L0 / UB ping-pongs, QK_PRELOAD 4;
  what the IR cannot say is listed there), launched after a kernel that reads Q, K, V into L2 as
  the harness's prefetch does, timed without its launch (pto_fa_us): -13.2 / -14.6 / -19.8 / +0.7
  / -6.4 / -27.9 % (V20a, b, e-h). Its hand-offs are read in other shapes than they are written
  (the AIVs read the cube's [128, 128] fp32 FIFO tiles as [32, 128] / [64, 128] chunks, the cube
  reads the P the AIVs wrote as four chunks as one tile): they hit because the writes hold every
  element read (interpreter/timing/l2.py); before the L2 model counted that, every such read at
  2k (one wave, each slot used once) went to HBM and 2k read +64 %. Each row's note is ascendir's
  own template pinned to the same tile, `br = 128, bc = 256` (PTO_ISA_FA_TILING: Bc 256 in two
  cube steps of 128): -21.2 / -17.7 / -21.9 / -24.9 / -18.5 / -35.2 %, faster by schedule:
  pto-isa's cube runs each 128-key Q·Kᵀ and P·V step as load, mmad, FixPipe store of a 64 KiB
  fp32 tile into a GM FIFO, one L0C accumulator per kind; its README calls it bound by those
  cube-side stores (~30 % cube utilisation at 1k keys), and its own cycle model
  (scripts/fa_cost_model.py, fitted to simulator traces of the kernel) costs a 256-key tile 2487
  + 1617 cycles of QK and PV stages against 2048 of mmad, where the template overlaps the stores
  with the next step (S ping-pong, FixPipe by halves).
  The measurements are single launches, one per length, and not smooth in the work: counting
  waves (S0 / 128 blocks over 24 AICs) times 256-key tiles per block, the 4k -> 8k step costs
  3.3 µs per added tile, the 16k -> 32k step 2.27 µs. pto-isa's own model, at TILE_S1 256-1024
  and QK_PRELOAD 2-4, is -23..-18 / -22..-14 / -8..-4 / -21..-17 / 0..+4 / +1..+6 % off the six
  points (1k .. 32k): for its authors' model too the 8k point lies well above the kernel's trend
  (their -21..-17 %, its kernel here -27.9 %), and the 1k point below it (theirs -23..-18 %, here
  -19.8 %). That model's on-board mode adds terms fitted to B3 / B4 rankings for what its
  simulator lacks (1000 cycles of "logical tile sync" per tile and wave, 2000 per block
  dispatched); ascendir's cross-core flags take no time between a set and its wait, as no public
  source gives a CrossCoreSetFlag -> CrossCoreWaitFlag latency (S2 gives their semantics only).
  The README's smaller tables (1 / 2 / 4 / 8 cores, S0 = 128 · cores, S1 1k - 8k) are not
  compared: they come with the directory's first commit (6cc68238, an earlier kernel), their tiles
  are not given, and the same work as V20e (8 blocks, 1024 x 1024) reads 63.7 us there against
  20.96 us in the 910B2 table.
  The table's torch_npu column (1118.5 / 3646.2 us; rows V20c/d until this revision) is not
  compared: the harness that timed it is not published (the numbers were "supplied by the user",
  commit a977dd11), nor which torch_npu op; F + W / R through its two points gives F = 276 us of
  fixed cost, 2.7-4.8x what S17's and S27's own harnesses show for torch_npu's fused attention (57-102
  us, V11-V13), so the rows would measure an unknown harness. torch_npu's kernel is compared in
  V12-V11 and V12b-V12, whose harness is known.
* V21 [S27] pto-isa's hand-written GEMM (kernels/manual/a2a3/gemm_performance README, "Measured
  Performance (Reference)", on a 24-core A3 die): fp16 A [n, n] x B -> fp32 C for n = 1536 / 3072
  / 6144 / 7680, "execution time" next to msprof's per-pipe ratios (TMATMUL, TEXTRACT, TLOAD,
  TSTORE), i.e. the op's device task time; main.cpp launches once and does not time. The kernel:
  blockDim 24, base tile 128 x 256 x 64 (baseM, baseN, baseK), stepKa = stepKb = 4 (256 of K per
  L1 load), double-buffered L1 / L0A / L0B, one 128 x 256 fp32 tile stored per output tile.
  Predicted by the same kernel written for the interpreter (testing.matmul_ir: tm 128, tn 256,
  tk 64, l1_k 256, nbuf 2, f32 out) on the A3 die's chip file (the chip of the a3-supernode-16 topology = 910B1 figures,
  §A3). Not reproduced: pto-isa gives each core one contiguous block of C (4 x 6 cores; at 6144
  1536 x 1024) where matmul_ir deals tiles block-cyclically, and its B is stored [n, k]; the
  L2 sees different reuse orders (A + B exceed the 192 MiB L2 only at 7680).
* V22 [S27] the GEMM of pto-isa's GEMM + AllReduce example (kernels/manual/a2a3/gemm_ar README,
  "Compute-only" 368.1 µs on an 8-card 910B server; run.sh builds for Ascend910B1): each rank's
  C = A [5416, 6144] x B [6144, 1408], f16 in and out, padded to 5504 x 1536 = 43 x 6 tiles of
  128 x 256 on 24 AICs, baseK 64, stepKa = stepKb = 4, L1 / L0 double-buffered. main.cpp times it
  on the host, launch to aclrtSynchronizeStream, averaged over iterations (so the host's launch
  and synchronise, a few µs that no source sizes, are in the measurement and not in the
  prediction). Predicted as V21's kernel (testing.matmul_ir, f16 out) on the padded shape on
  ascend910b1. Not reproduced: its zigzag tile order, its B stored [N, K], and the
  pipe_barrier(PIPE_ALL) + ready-queue write after each tile's store.
* V23 [S27] pto-isa's TGET_ASYNC benchmark (kernels/manual/a2a3/tget_bandwidth README, "A2/A3",
  2 NPUs, float): one AIV of the root rank reads 256 KiB / 1 MiB / 4 MiB from its peer's GM
  through the SDMA engine, TGET_ASYNC then the event's Wait and a PIPE_ALL barrier per transfer,
  timed on the device by the system counter around the timed loop ("device avg cycles" are
  counter ticks per transfer, 20 ns on A2/A3 as the FA harness's default sys_cnt_multiple says:
  745.54 / 2624.24 / 10273.68 ticks). Bytes / (ticks x 20 ns) = 17.6 / 20.0 / 20.4 GB/s: one
  SDMA flow, what S23's 19.3 GB/s per flow and its fixed 0.6 / 1.5 µs stand for. (Its host
  bandwidth column includes the launch and is not compared.) Predicted as the peer half of a
  2-rank f32 all_gather on the atlas800-a2 topology (each rank receives the same bytes in one
  SDMA flow): bytes received / the comm kernel's time; the all_gather also pays HCCL's notify
  record (S23), which a TGET_ASYNC's event wait replaces.
  The directory's allgather_gemm README (A3, 2 / 4 / 8 ranks, f16 -> f32, fused AllGather +
  GEMM: 0.297 - 2.585 ms) is not compared: its comm kernel moves A with TPUT on 4 AIV blocks
  (UB-staged remote stores), the per-die rate the V18 / V24 rows lack a source for, its compute
  kernel runs on 20 of the 24 AICs, and its time is the host's, both launches included.
* V8 [S16] all_gather / all_reduce (torch.distributed over HCCL, f32) on 2, 4 and 8 cards of an
  8-NPU 910B server: algorithm bandwidth as bench_collective.py counts it, 4·nglobal bytes (the
  gathered output; the reduced buffer) / time of one call, nccl-tests' "algbw" convention (not
  "busbw"); predicted for a 1000 MB call (the README gives one figure per row, read as the
  large-message plateau) by the comm kernels of templates/collectives.py on the atlas800-a2
  topology with HCCL's constants (S23).
* V18 [S20] DeepEP-Ascend's normal dispatch / combine on an A3 supernode (sgl-kernel-npu
  README, table added in b2e93094; its tests/python/deepep/test_intranode.py at that commit counts
  them): 4096 tokens per rank, hidden 7168, top-8 of 256 experts routed uniformly (top-k of
  |randn| + 1), "INT8 dispatching and BF16 combining" (README). Bytes = the rows rank 0 receives (one per routed
  (token, expert) pair, its own included: `recv_x.numel()`, recv_x cast back to bf16) x 7168 x 2
  for both ops: the tuning loop times `buffer.dispatch` on `x`, a bf16 tensor, never a tuple, so
  its `fp8_factor` branch is dead and the dispatch's GB/s are bf16 bytes (every
  version of the test from 438e24be to b2e93094 alike). Time = one call on rank 0 (`bench`).
  The rows the dispatch moves are bf16: the kernel quantises only when
  DEEP_NORMAL_MODE_USE_INT8_QUANT=1 (buffer.py at b2e93094), which the test does not set, and the
  measured dispatch takes about the combine's time for the same rows (4.39 vs 4.56 ms at EP16),
  as equal bytes on the same links do; the README's "INT8 dispatching" repeats DeepEP's setting
  line. (Were they int8, 7168 + 44 bytes a row, the prediction at EP 8 / 16 would be 1.94x / 1.96x
  the bf16 one; docs/hardware-reference.md §Calibration.) Predicted by nn.moe_distribute_dispatch
  on rows of 7168 x 2 + 44 bytes (what CamMoeDispatchNormal's DataCopyPad moves per row without
  quantisation: the values, a 32-byte scale slot and the 12-byte (rank, token, k) triple,
  `hScaleIdxSize` in cam_moe_dispatch_normal.h) and nn.moe_distribute_combine on bf16 rows,
  timing-only on the a3-supernode-16 topology, both comm kernels moving their rows with the AIVs
  as the vendor's do (interpreter/sim/comm.py `aiv_row_cycles`): the dispatch is all its
  launches (MoeInitRouting, the row gather, the comm kernel, expand_ids) and the memsets its
  timed call runs (deep_ep.cpp's at::zeros of the exchanged counts and of the outputs, the
  received rows x 7168 bf16 among them: deep_ep_zeros_s), the combine its comm kernel and the
  weighted sum of each token's top-k rows that the vendor's combine kernel runs
  (moe_finalize_routing, reading each (token, k) row through expand_idx: the vendor stores each
  row at its (token, k) slot, so neither it nor the model un-permutes in a pass of its own;
  moe_distribute_kernels). Not charged: the dispatch call's
  host round trips (topk_idx and the NotifyDispatch counts copied to the host, host loops over
  the pairs, copies back: no source gives their cost). EP 32 / 64 / 128 need more devices than
  the shipped A3 slice (16 dies) holds: not predicted.
* V24 [S20] DeepEP-Ascend's low-latency dispatch / combine on an A3 supernode (sgl-kernel-npu
  README, low-latency table added in b2e93094; its tests/python/deepep/test_low_latency.py at that
  commit runs them): `low_latency_dispatch` / `low_latency_combine` call CANN's
  MoeDistributeDispatchV2 / MoeDistributeCombineV2 (deep_ep.cpp), 128 tokens per rank (README),
  hidden 7168, top-8 of 256 experts, dispatch quantised to int8 (`use_fp8 = True`: quant_mode 2,
  int8 values and one fp32 dynamic scale per row, deep_ep.cpp), combine BF16. The test counts a
  dispatch row as DeepEP's fp8 layout, 7168 + 7168 / 128 x 4 + 16 = 7,408 bytes; the simulated
  rows are those 7,408 bytes (at most 3 % above what one int8 row and its scale take). Measured = the kernel time of each
  (`bench_kineto` over the two kernel names), 132 / 139 µs dispatch and 126 / 135 µs combine at
  EP 8 / 16; the README's GB/s are every sent (token, k) row, local ones included, x row bytes
  over these times (58 / 55 and 116 / 109 GB/s). Predicted: moe_distribute_low_latency_us, the
  same simulated ops as V18 with int8 dispatch rows, the combine with its weighted sum (kernel
  times: no memsets, no host). The dispatch's quantisation pass (QuantProcess in
  moe_distribute_dispatch_v2.h, per routed row: Cast, Abs, Max, Muls and three Casts over 7168
  elements, 923 cycles by the model's vector costs, and CalTokenSendExpertCnt's count, 166 at
  the mean index) runs on the AIVs between a row's load and its remote store: in the comm
  kernel's AIV pool it takes 12.6 µs at EP 8 against 29.0 µs of the UB link, so it hides under
  the link and is not charged apart. EP 32 (153 / 151 µs) needs more than the 16-die slice: not
  predicted.
* V10 [S17 §4.5] msprof L2 hit rate of the guide's double-buffered fp16 matmul (128 x 256 tiles)
  at 4096³ and 16384³, without and with its block swizzle (5 tile groups): the report's
  l2_hit_rate (GM read bytes served by L2 / GM read bytes) under the "tile" L2 model.
"""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ascendir.hardware.config import load_target


@dataclass
class Case:
    vid: str
    what: str
    unit: str
    measured: float
    predict: Callable[[], float]
    note: str | Callable[[], str] = ""  # a callable is read after `predict`
    floor_bound: Callable[[], bool] | None = None  # the harness floor, not the kernel, decides


@dataclass
class Row:
    vid: str
    what: str
    unit: str
    measured: float
    predicted: float
    seconds: float
    note: str
    floor_bound: bool = False

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted - self.measured) / self.measured


def _onnx_module(nodes, inputs, outputs, target: str, tiling: str | None = None):
    import onnx
    from onnx import helper

    from ascendir.driver import compile_model

    g = helper.make_graph(nodes, "cal", inputs, outputs)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "cal.onnx"
        onnx.save(model, p)
        module, _ = compile_model(p, target, tiling=tiling)
    return module


def _simulate(module, target: str) -> dict:
    from ascendir.interpreter import simulate

    return simulate(module, None, {}, load_target(target), timing_only=True).report


def _dtype(name: str):
    from onnx import TensorProto

    return {"bf16": TensorProto.BFLOAT16, "f16": TensorProto.FLOAT16, "f32": TensorProto.FLOAT}[name]


def matmul_report(m: int, n: int, k: int, dtype: str, target: str, tiling: str | None = None) -> dict:
    """Report of ascendir's lowering of one [m, k] x [k, n] MatMul (`tiling` as `--tiling`)."""
    from onnx import helper

    t = _dtype(dtype)
    mod = _onnx_module(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        [helper.make_tensor_value_info("a", t, [m, k]), helper.make_tensor_value_info("b", t, [k, n])],
        [helper.make_tensor_value_info("c", t, [m, n])],
        target,
        tiling,
    )
    return _simulate(mod, target)


def matmul_tflops(m: int, n: int, k: int, dtype: str = "bf16", target: str = "ascend910b2") -> float:
    rep = matmul_report(m, n, k, dtype, target)
    return 2.0 * m * n * k / rep["total_seconds"] / 1e12


def weight_matmul_us(m: int, n: int, k: int, dtype: str, target: str) -> float:
    """µs (launch included) of x [m, k] @ W [k, n] with W a model weight (`nn.weight`, as a
    framework's linear layer holds it, so stored in NZ fractals: tiling.nz_weight), compiled at
    -O2 for `target` like the ONNX cases. `dtype` is "bf16", "f16" or "f32"."""
    from ascendir.driver import compile_model

    def t(*d: int) -> str:
        return f"tensor<{'x'.join(map(str, d))}x{dtype}>"

    text = f"""builtin.module {{
func.func @main(%x: {t(m, k)}) -> {t(m, n)} {{
  %w = nn.weight @w : {t(k, n)}
  %y = nn.matmul %x, %w : ({t(m, k)}, {t(k, n)}) -> {t(m, n)}
  func.return %y : {t(m, n)}
}}
}}"""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "cal.mlir"
        p.write_text(text)
        module, _ = compile_model(p, target)
    return _simulate(module, target)["total_seconds"] * 1e6


def exp_input_GBps(elements: int, target: str = "ascend910b2") -> float:
    """limulidae's figure: fp32 input bytes / time of torch.exp."""
    from onnx import TensorProto, helper

    rows = elements // 8192
    mod = _onnx_module(
        [helper.make_node("Exp", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 8192])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 8192])],
        target,
    )
    rep = _simulate(mod, target)
    return rows * 8192 * 4 / rep["total_seconds"] / 1e9


# S17's matmul guide kernels (step2_doublebuffer.py / step3_swizzle.py): 128 x 256 output tiles,
# base K 64, 256 of K per L1 load (B; A loads 512), ping-pong buffers; step 3 visits the tiles in
# groups of SWIZZLE_COUNT = 5 (catlass's GemmIdentityBlockSwizzle, groups of tile columns there,
# of tile rows here: the same reuse on a square matrix).
S17_TILING = "m=128,n=256,k=64,l1_depth=4,split_k=1,swizzle=1"
S17_SWIZZLE = 5


def l2_hit_percent(n: int, swizzle: int = 1, target: str = "ascend910b2") -> float:
    """% of GM read bytes served by L2 for an fp16 n³ MatMul with S17's tiling (msprof's "L2 hit")."""
    tiling = S17_TILING.replace("swizzle=1", f"swizzle={swizzle}")
    return 100.0 * matmul_report(n, n, n, "f16", target, tiling)["l2_hit_rate"]


def attention_us(sq: int, skv: int, d: int, target: str = "ascend910b2", tiling: str | None = None) -> float:
    """µs of ascendir's FlashAttention (fuse-attention, then the flash_attention template) on one
    head: q [1, 1, sq, d], k and v [1, 1, skv, d], f16, not causal, launch included. `tiling`
    ("br = 128, bc = 256") pins the template's tile as `--tiling` does; else the search picks."""
    from xdsl.parser import Parser

    from ascendir.session import make_context
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.weights import WeightStore

    q, kv = f"tensor<1x1x{sq}x{d}xf16>", f"tensor<1x1x{skv}x{d}xf16>"
    pin = f", ascend.tiling = #ascend.tiling<{{{tiling}}}>" if tiling else ""
    text = f"""builtin.module {{
func.func @main(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{
  %o = nn.attention %q, %k, %v {{num_heads = 1 : i64, num_kv_heads = 1 : i64, causal = false, scale = {d ** -0.5} : f32{pin}}} : ({q}, {kv}, {kv}) -> {q}
  func.return %o : {q}
}}
}}"""
    module = Parser(make_context(), text).parse_module()
    run_passes(module, parse_pipeline("fuse-attention", "O0"))
    lower(module, WeightStore(), target)
    return _simulate(module, target)["total_seconds"] * 1e6


# pto-isa's FlashAttention defaults [S27 fa_performance_kernel.h, generate_cases.py]: CUBE_S0 128
# query rows per block, TILE_S1 256 keys per vector tile (two cube steps of CUBE_S1 128)
PTO_ISA_FA_TILING = "br = 128, bc = 256"


def pto_fa_us(s: int, target: str = "ascend910b2") -> float:
    """µs of pto-isa's FlashAttention kernel (S27 flash_atten; module docstring, V20) on one head
    of s x s keys, D 128, f16, as api/pto_flash_attention's kernel (its schedule, its default
    tiles) on all AICs of `target`, timing-only, after the harness's L2 prefetch of q, k, v: the
    kernel without its launch, as main.cpp times it (earliest block start to latest block end).

    Raises: ValueError when s is not a multiple of 256."""
    from ascendir.api.pto_flash_attention import pto_fa_ir
    from ascendir.interpreter.testing import parse

    hw = load_target(target)
    _, k = _simulate(parse(pto_fa_ir(s, s, hw.num_aic)), target)["kernels"]  # (prefetch, pto_fa)
    return (k["cycles"] - k["launch_cycles"]) / hw.clock_hz * 1e6


# µs: torch_npu's npu_fused_infer_attention_score at 0.089 GFLOP under do_bench [S17 PR #112,
# comment of 2026-04-16: 174.28 µs, 513.41 GFLOP/s]: the floor a host-bound call records (see the
# module docstring); reported, not fitted to any row.
FIA_HOST_FLOOR_US = 174.28


def fia_call_us(kernel_us: float) -> float:
    """µs S17's do_bench records for a torch_npu fused-attention call whose kernel takes
    `kernel_us`: the kernel, or the host floor when the host is slower."""
    return max(kernel_us, FIA_HOST_FLOOR_US)


def fia_note(kernel_us: float) -> str:
    floor = "; below the host floor" if kernel_us < FIA_HOST_FLOOR_US else ""
    return f"kernel {kernel_us:.1f} us{floor}"


def ladder_fraction(nbuf: int, tm: int, tn: int, target: str = "ascend910b2", n: int = 4096) -> float:
    """% of cube peak of a hand-written fp16 n³ kernel (testing.matmul_ir)."""
    from ascendir.interpreter.testing import matmul_ir, parse

    hw = load_target(target)
    mod = parse(matmul_ir(n, n, n, tm=tm, tn=tn, tk=64, l1_k=256, block_dim=hw.num_aic, nbuf=nbuf, out_dtype="f16"))
    rep = _simulate(mod, target)
    return 100.0 * rep["cube_peak_fraction"]


# S27's gemm_performance kernel: base tile 128 x 256 x 64, 4 K slices per L1 load, double buffered
PTO_GEMM_TILE = {"tm": 128, "tn": 256, "tk": 64, "l1_k": 256, "nbuf": 2}


def pto_gemm_us(n: int, target: str | None = None, mnk: tuple[int, int, int] | None = None,
                out_dtype: str = "f32") -> float:
    """µs of pto-isa's hand-written fp16 GEMM (S27 gemm_performance / gemm_ar; module docstring,
    V21, V22) as the interpreter's testing.matmul_ir kernel on all AICs of `target` (default: the
    A3 die, the chip of the a3-supernode-16 topology): n³, or `mnk` = (M, N, K), with `out_dtype`
    ("f32" or "f16") output."""
    from ascendir.hardware.topology import load_topology
    from ascendir.interpreter.testing import matmul_ir, parse

    target = target or load_topology("a3-supernode-16").chip

    m, nn, k = mnk or (n, n, n)
    hw = load_target(target)
    mod = parse(matmul_ir(m, nn, k, block_dim=hw.num_aic, out_dtype=out_dtype, **PTO_GEMM_TILE))
    return _simulate(mod, target)["total_seconds"] * 1e6


def collective_GBps(op: str, devices: int, megabytes: float = 1000.0, target: str = "ascend910b2",
                    topology: str = "atlas800-a2") -> float:
    """Algorithm bandwidth (GB/s) of an f32 `op` ("all_reduce" or "all_gather") over `devices`
    ranks as S16's bench_collective.py counts it: nglobal = megabytes·1e6 / 4 f32 elements (a
    multiple of the rank count), bytes = 4·nglobal (all_gather: the gathered output, each rank
    sending nglobal / devices; all_reduce: the reduced buffer), divided by the time of one call
    (nccl-tests' "algbw": bytes / time, not its "busbw"). The time is the comm kernel's on the
    slowest rank, timing-only, over `topology`."""
    from xdsl.parser import Parser

    from ascendir.driver import lower
    from ascendir.interpreter import simulate_cluster
    from ascendir.session import make_context

    n = int(megabytes * 1e6 / 4) // devices * devices
    group = f"#ascend.device_group<[{', '.join(map(str, range(devices)))}]>"
    if op == "all_gather":
        x, y, attrs = n // devices, n, ", axis = 0 : i64"
    else:
        x, y, attrs = n, n, ""
    text = (f"func.func @main(%x: tensor<{x}xf32>) -> tensor<{y}xf32> {{\n"
            f"  %y = nn.{op} %x {{group = {group}{attrs}}} : (tensor<{x}xf32>) -> tensor<{y}xf32>\n"
            f"  func.return %y : tensor<{y}xf32>\n}}\n")
    module = Parser(make_context(), text).parse_module()
    lower(module, None, target)
    hw = load_target(target)
    res = simulate_cluster([module] * devices, [None] * devices, [{}] * devices, hw, topology, timing_only=True)
    (c,) = res[0].report["cluster"]["collectives"]
    return 4.0 * n / (c["cycles"] / hw.clock_hz) / 1e9


def p2p_read_GBps(nbytes: int) -> float:
    """GB/s of one SDMA read of `nbytes` between two NPUs of a 910B server as S27's tget_bandwidth
    counts it (module docstring, V23): `nbytes` over the time of a 2-rank f32 all_gather in which
    each rank receives `nbytes` from its peer."""
    return collective_GBps("all_gather", 2, megabytes=2 * nbytes / 1e6) / 2


# S20's CamMoeDispatchNormal (b2e93094, cam_moe_dispatch_normal.h): per routed row it moves the
# values plus a 32-byte slot (the fp32 dynamic scale when quantising) and the 12-byte (rank,
# token, k) triple (hScaleIdxSize = hUBAlignSize + UB_ALIGN + 3 * 4): 22 more bf16 elements
DISPATCH_ROW_EXTRA = 32 + 12


def moe_distribute_kernels(ep: int, tokens: int = 4096, hidden: int = 7168, topk: int = 8, experts: int = 256,
                           dispatch_row: tuple[int, str] = (7168 + DISPATCH_ROW_EXTRA // 2, "bf16"),
                           topology: str = "a3-supernode-16") -> tuple[list[dict], list[dict], float, int]:
    """(dispatch kernels, combine kernels, clock Hz, rows rank 0 receives) of expert-parallel
    dispatch / combine over `ep` ranks, timing-only on `topology`'s chip (the A3 die for the
    supernode file): `tokens` per rank, top-`topk` of `experts` routed uniformly (seeded); the
    dispatch moves rows of `dispatch_row` = (elements, element type) (bf16 values plus scale slot
    and index triple for S20's normal kernel, DISPATCH_ROW_EXTRA; int8 rows for its low-latency
    one), the combine bf16 rows of `hidden`. The kernels are rank 0's report entries (name, cycles,
    ...) in launch order: the dispatch's (MoeInitRouting, the row gather, the comm kernel,
    expand_ids), then the combine's: its comm kernel and the weighted sum of each token's top-k
    rows (moe_finalize_routing, bf16 weights, reading the rows through expand_idx: no un-permute
    pass, templates/moe_distribute.py), which both of S20's combine kernels run inside the timed call (CamMoeCombineNormal's ReadBufferAndWeightedSum,
    cam_moe_combine_normal.h at b2e93094; MoeDistributeCombineV2's LocalWindowCopy /
    ProcessMoeExpert: per row Cast to fp32, Muls by the weight, Add).

    Raises: AscendirError when the topology has fewer than `ep` devices."""
    from xdsl.parser import Parser

    from ascendir.costmodel.moe_routing import RoutingSpec, make_routing
    from ascendir.driver import lower, parse_pipeline, run_passes
    from ascendir.interpreter import simulate_cluster
    from ascendir.hardware.topology import load_topology
    from ascendir.session import make_context

    (cols, dt), p, local = dispatch_row, tokens * topk, experts // ep
    group = f"#ascend.device_group<[{', '.join(map(str, range(ep)))}]>"
    xt, it, et = f"tensor<{p}x{cols}x{dt}>", f"tensor<{p}xi64>", f"tensor<{ep * p}x{hidden}xbf16>"
    ot, yt, wt = f"tensor<{ep}x{local + 1}xi64>", f"tensor<{p}x{hidden}xbf16>", f"tensor<{p}x1xbf16>"
    kt, st = f"tensor<{tokens}x{topk}x{hidden}xbf16>", f"tensor<{tokens}x{hidden}xbf16>"
    text = (f"func.func @main(%x: {xt}, %ids: {it}, %ey: {et}, %w: {wt}) -> (tensor<{ep * p}x{cols}x{dt}>, {st}) {{\n"
            f"  %ex, %eids, %offs, %idx = nn.moe_distribute_dispatch %x, %ids {{group = {group}, experts = {experts} : i64, "
            f"moe_block = \"v18\"}} : ({xt}, {it}) -> (tensor<{ep * p}x{cols}x{dt}>, tensor<{ep * p}xi64>, {ot}, {it})\n"
            f"  %y = nn.moe_distribute_combine %ey, %offs, %idx {{group = {group}, experts = {experts} : i64}} "
            f": ({et}, {ot}, {it}) -> {yt}\n"
            f"  %p = nn.mul %y, %w : ({yt}, {wt}) -> {yt}\n"
            f"  %q = nn.reshape %p : ({yt}) -> {kt}\n"
            f"  %s = nn.reduce_sum %q {{axes = array<i64: 1>, keepdims = false}} : ({kt}) -> {st}\n"
            f"  func.return %ex, %s : tensor<{ep * p}x{cols}x{dt}>, {st}\n}}\n")
    module = Parser(make_context(), text).parse_module()
    target = load_topology(topology).chip
    run_passes(module, parse_pipeline("fuse-moe-finalize-routing,choose-tiling", target=target))
    lower(module, None, target)
    hw = load_target(target)
    routing = make_routing(RoutingSpec("uniform"), ep * tokens, topk, experts)
    res = simulate_cluster([module] * ep, [None] * ep, [{}] * ep, hw, topology, timing_only=True, moe_routing={"v18": routing})
    kernels = res[0].report["kernels"]  # rank 0's, in launch order: the dispatch's, then the combine's
    first = next(i for i, k in enumerate(kernels) if k["name"].startswith("moe_distribute_combine"))
    rows = int((routing.reshape(-1)[: ep * p] // local == 0).sum())  # received by rank 0
    return kernels[:first], kernels[first:], hw.clock_hz, rows


def moe_distribute_times(ep: int, tokens: int = 4096, hidden: int = 7168, topk: int = 8, experts: int = 256,
                         dispatch_row: tuple[int, str] = (7168 + DISPATCH_ROW_EXTRA // 2, "bf16"),
                         topology: str = "a3-supernode-16") -> tuple[float, float, int]:
    """(dispatch s, combine s, rows rank 0 receives): the sums of rank 0's kernels of
    moe_distribute_kernels (same arguments), each op all its launches.

    Raises: AscendirError when the topology has fewer than `ep` devices."""
    dispatch, combine, clock_hz, rows = moe_distribute_kernels(ep, tokens, hidden, topk, experts, dispatch_row, topology)
    return sum(k["cycles"] for k in dispatch) / clock_hz, sum(k["cycles"] for k in combine) / clock_hz, rows


def deep_ep_zeros_s(rows: int, hidden: int, experts: int, target: str) -> float:
    """Seconds of the device memsets S20's normal dispatch runs inside its timed call: deep_ep.cpp's
    Buffer::intranode_dispatch (b2e93094) allocates with at::zeros the counts it exchanges
    (send_data and recv_data, `experts` x 3 int32 each; send_data_offset, `experts` int32) and its
    outputs sized by the received `rows` (expandx_out rows x `hidden` bf16, dynamic_scales_out rows
    fp32, expand_idx_out rows x 3 int32). Each is one kernel: the chip's launch head (`kernel_launch_cycles`)
    and its bytes written at the HBM bandwidth (costmodel bandwidth_bound_cycles, the model's
    floor for any kernel's GM traffic)."""
    from ascendir.costmodel.ops import bandwidth_bound_cycles

    hw = load_target(target)
    sizes = (experts * 3 * 4, experts * 3 * 4, experts * 4, rows * hidden * 2, rows * 4, rows * 3 * 4)
    return sum(hw.kernel_launch_cycles + bandwidth_bound_cycles(0.0, b, hw) for b in sizes) / hw.clock_hz


def moe_distribute_GBps(ep: int, tokens: int = 4096, hidden: int = 7168, topk: int = 8, experts: int = 256,
                        topology: str = "a3-supernode-16") -> tuple[float, float]:
    """(dispatch, combine) bandwidth in GB/s of expert-parallel dispatch / combine over `ep` ranks
    as S20's test_intranode.py counts them (module docstring, V18): `tokens` per rank, top-`topk`
    of `experts` routed uniformly (seeded), dispatch of bf16 rows of hidden x 2 + DISPATCH_ROW_EXTRA
    bytes (data, scale slot and index triple: the test runs no quantisation), BF16 combine; both
    as rank 0's received rows x hidden x 2 bytes over rank 0's time (moe_distribute_times), the
    dispatch's with the memsets of its timed call (deep_ep_zeros_s).

    Raises: AscendirError when the topology has fewer than `ep` devices."""
    from ascendir.hardware.topology import load_topology

    t_dispatch, t_combine, rows = moe_distribute_times(ep, tokens, hidden, topk, experts,
                                                       (hidden + DISPATCH_ROW_EXTRA // 2, "bf16"), topology)
    t_dispatch += deep_ep_zeros_s(rows, hidden, experts, load_topology(topology).chip)
    nbytes = rows * hidden * 2  # bf16-equivalent for both ops (module docstring, V18)
    return nbytes / t_dispatch / 1e9, nbytes / t_combine / 1e9


# S20's low-latency test (test_low_latency.py at b2e93094): an int8 dispatch row is the values, one
# fp32 scale per 128 values and 16 bytes more (`num_fp8_bytes = hidden + hidden // 128 * 4 + 16`)
def low_latency_row_bytes(hidden: int = 7168) -> int:
    """Bytes of one int8 dispatch row of S20's low-latency kernels (values, per-128 fp32 scales, 16 B)."""
    return hidden + hidden // 128 * 4 + 16


def moe_distribute_low_latency_us(ep: int, tokens: int = 128, hidden: int = 7168, topk: int = 8, experts: int = 256,
                                  topology: str = "a3-supernode-16") -> tuple[float, float]:
    """(dispatch, combine) µs of S20's low-latency kernels (CANN's MoeDistributeDispatchV2 /
    MoeDistributeCombineV2) as test_low_latency.py times them (module docstring, V24): `tokens` per
    rank, top-`topk` of `experts`, int8 dispatch rows of low_latency_row_bytes, BF16 combine,
    rank 0's simulated time of each (moe_distribute_times). The published GB/s are sent rows
    (tokens x topk, local ones included) x row bytes over these times.

    Raises: AscendirError when the topology has fewer than `ep` devices."""
    t_dispatch, t_combine, _ = moe_distribute_times(ep, tokens, hidden, topk, experts,
                                                    (low_latency_row_bytes(hidden), "i8"), topology)
    return t_dispatch * 1e6, t_combine * 1e6


def cases(quick: bool = False) -> list[Case]:
    """The §7 cases; `quick` drops the largest GEMMs (for tests and a fast look)."""
    best_shapes = [(6912, 16384, 2048), (2304, 5120, 1536), (6144, 17920, 2816), (14336, 4096, 4096), (8192, 8192, 8192)]
    # each simulation once, whichever rows and notes ask for it
    tf, pto = functools.cache(matmul_tflops), functools.cache(pto_fa_us)
    dist, low = functools.cache(moe_distribute_GBps), functools.cache(moe_distribute_low_latency_us)

    @functools.cache
    def att(sq, skv, d, tiling=None):
        return attention_us(sq, skv, d, tiling=tiling)

    def v20(vid, s, us):
        """pto-isa's kernel (its schedule, api/pto_flash_attention); ascendir's template at
        pto-isa's tile in the note."""
        return Case(f"V20{vid}", f"FlashAttention {s}^2, D 128 (pto-isa kernel, 910B2)", "us", us, lambda: pto(s),
                    lambda: f"template at br 128, bc 256: {att(s, s, 128, PTO_ISA_FA_TILING):.1f} us "
                            f"({100 * (att(s, s, 128, PTO_ISA_FA_TILING) / us - 1):+.1f} %)")

    def fa(vid, sq, skv, d, us):
        """torch_npu's fused attention under S17's do_bench: max(kernel, host floor)."""
        return Case(vid, f"FlashAttention {sq}x{skv}, D {d} (torch_npu, 910B)", "us", us,
                    lambda: fia_call_us(att(sq, skv, d)), lambda: fia_note(att(sq, skv, d)),
                    lambda: att(sq, skv, d) < FIA_HOST_FLOOR_US)

    out = [
        Case("V2", "matmul bf16 6912x16384x2048 (910B2)", "TFLOPS", 291.6, lambda: tf(6912, 16384, 2048)),
        Case("V3", "matmul bf16 2304x5120x1536 (910B2)", "TFLOPS", 272.6, lambda: tf(2304, 5120, 1536)),
        Case("V4", "matmul bf16 6144x17920x2816 (910B2)", "TFLOPS", 301.3, lambda: tf(6144, 17920, 2816)),
        Case("V5", "matmul bf16 14336x4096x4096 (910B2)", "TFLOPS", 317.3, lambda: tf(14336, 4096, 4096)),
        Case("V6a", "matmul bf16 peak, 8192^3 (910B)", "TFLOPS", 328.0, lambda: tf(8192, 8192, 8192)),
        Case("V6b", "matmul fp32 peak, 8192^3 (910B)", "TFLOPS", 87.0, lambda: tf(8192, 8192, 8192, "f32")),
        Case("V1", "matmul bf16 best shape (910B2C)", "TFLOPS", 322.5, lambda: max(tf(*s) for s in best_shapes), "best of V2-V5, 8192^3"),
        Case("V7", "torch.exp fp32 256 MB, input bytes / time", "GB/s", 642.0, lambda: exp_input_GBps(64 * 2**20),
             "the fit of memory.hbm_efficiency"),
        # the S17 step-1 baseline kernel (step1_baseline.py) is single-buffered with M_TILE 128,
        # N_FULL 256, K_QTILE 64 and B chunks of K_TILE 256 in L1: the same tile as here
        Case("V9a", "ladder: naive (single buffer, 128x256)", "% peak", 45.0, lambda: ladder_fraction(1, 128, 256), "50 % of torch (90 % peak)"),
        Case("V9b", "ladder: double-buffered 128x256", "% peak", 81.0, lambda: ladder_fraction(2, 128, 256), "~90 % of torch with swizzle"),
        Case("V14a", "decode gate_proj 16x5120->17408 bf16 (A3 die)", "us", 136.0, lambda: weight_matmul_us(16, 17408, 5120, "bf16", "ascend910b1")),
        Case("V14b", "decode up_proj 16x5120->17408 bf16 (A3 die)", "us", 146.0, lambda: weight_matmul_us(16, 17408, 5120, "bf16", "ascend910b1")),
        Case("V14c", "decode down_proj 16x17408->5120 bf16 (A3 die)", "us", 161.0, lambda: weight_matmul_us(16, 5120, 17408, "bf16", "ascend910b1")),
        # torch_npu's fused attention (npu_fused_infer_attention_score) under S17's do_bench, the
        # "ref" column of PR #126 / #112: max(kernel, host floor); 4·Q·S1·D flops; one head, f16
        fa("V11", 3072, 8192, 128, 175.53),
        fa("V13", 2048, 8192, 32, 178.2),
        # differences of calls of one harness: torch_npu's fixed device cost F cancels (module
        # docstring); the template's cost of more keys against torch_npu's kernel
        Case("V12-V11", "FlashAttention +8192 keys, 3072 rows, D 128", "us", 242.52 - 175.53,
             lambda: att(3072, 16384, 128) - att(3072, 8192, 128), "= 192.3 TFLOPS marginal"),
        Case("V12b-V12", "FlashAttention +16384 keys, 3072 rows, D 128", "us", 388.52 - 242.52,
             lambda: att(3072, 32768, 128) - att(3072, 16384, 128), "= 176.5 TFLOPS marginal"),
        # S27: pto-isa's kernel, one head of S x S, D 128, f16 (910B2), at its default tile
        # (V20c/d were its torch_npu column, retired: docstring)
        *(v20(vid, s, us) for vid, s, us in (("a", 16384, 909.058), ("b", 32768, 3262.645), ("e", 1024, 20.960),
                                              ("f", 2048, 32.461), ("g", 4096, 88.902), ("h", 8192, 292.626))),
        # S27: pto-isa's hand-written GEMM on an A3 die, msprof task time (pto_gemm_us)
        *(Case(f"V21{vid}", f"pto-isa GEMM f16->f32 {n}^3 (A3 die)", "us", us, lambda n=n: pto_gemm_us(n),
               "128x256x64 tile, stepK 4, 2 buffers")
          for vid, n, us in (("a", 1536, 38.8), ("b", 3072, 206.7), ("c", 6144, 1506.0), ("d", 7680, 3168.0))),
        # S27: the GEMM of pto-isa's gemm_ar example, compute-only (host-timed), padded shape
        Case("V22", "pto-isa GEMM f16 5504x1536x6144 (910B1)", "us", 368.1,
             lambda: pto_gemm_us(0, "ascend910b1", (5504, 1536, 6144), "f16"), "host-timed launch to sync"),
        # msprof L2 hit rate of S17's double-buffered kernel (fp16 n³, 128 x 256 tiles), §4.5
        Case("V10a", "L2 hit, matmul 4096^3 fp16, no swizzle (910B2)", "% hit", 97.88, lambda: l2_hit_percent(4096)),
        Case("V10b", "L2 hit, matmul 16384^3 fp16, no swizzle (910B2)", "% hit", 30.9, lambda: l2_hit_percent(16384)),
        Case("V10c", "L2 hit, matmul 16384^3 fp16, swizzle 5 (910B2)", "% hit", 93.72, lambda: l2_hit_percent(16384, S17_SWIZZLE)),
    ]
    # S16's torch.distributed all_gather_into_tensor / all_reduce (HCCL) on 2, 4, 8 cards of an
    # 8-NPU 910B server: GB/s as bench_collective.py counts them (collective_GBps), 1000 MB calls
    for i, (cards, ag, ar) in enumerate(((2, 38.0, 18.0), (4, 64.0, 30.0), (8, 149.0, 72.0))):
        out.append(Case(f"V8{'abc'[i]}", f"all_gather f32 1000 MB, {cards} cards (910B)", "GB/s", ag,
                        lambda c=cards: collective_GBps("all_gather", c), "output bytes / time"))
        out.append(Case(f"V8{'def'[i]}", f"all_reduce f32 1000 MB, {cards} cards (910B)", "GB/s", ar,
                        lambda c=cards: collective_GBps("all_reduce", c), "buffer bytes / time"))
    # S27's TGET_ASYNC (one SDMA flow between two NPUs), device ticks of 20 ns per transfer
    for vid, nbytes, ticks in (("a", 2**18, 745.54), ("b", 2**20, 2624.24), ("c", 2**22, 10273.68)):
        out.append(Case(f"V23{vid}", f"SDMA read {nbytes // 1024} KiB, 2 NPUs (A2/A3)", "GB/s", nbytes / (ticks * 20e-9) / 1e9,
                        lambda b=nbytes: p2p_read_GBps(b), "bytes / device time per transfer"))
    # S20's DeepEP-Ascend normal kernels on an A3 supernode (moe_distribute_GBps), EP 8 and 16
    for i, (ep, disp, comb) in enumerate(((8, 146.0, 125.0), (16, 107.0, 103.0))):
        out.append(Case(f"V18{'ab'[i]}", f"MoE dispatch, EP{ep}, 4096 tok x 7168 (A3)", "GB/s", disp,
                        lambda e=ep: dist(e)[0], "received bytes / time"))
        out.append(Case(f"V18{'cd'[i]}", f"MoE combine BF16, EP{ep}, 4096 tok x 7168 (A3)", "GB/s", comb,
                        lambda e=ep: dist(e)[1], "received bytes / time"))
    # S20's low-latency kernels (CANN's MoeDistributeDispatchV2 / CombineV2) on an A3 supernode,
    # 128 tokens per rank, EP 8 and 16: kernel times as bench_kineto takes them
    for i, (ep, disp, comb) in enumerate(((8, 132.0, 126.0), (16, 139.0, 135.0))):
        out.append(Case(f"V24{'ab'[i]}", f"MoE dispatch INT8 low-latency, EP{ep}, 128 tok x 7168 (A3)", "us", disp,
                        lambda e=ep: low(e)[0], "kernel time"))
        out.append(Case(f"V24{'cd'[i]}", f"MoE combine BF16 low-latency, EP{ep}, 128 tok x 7168 (A3)", "us", comb,
                        lambda e=ep: low(e)[1], "kernel time"))
    if quick:
        out = [c for c in out if c.vid in ("V3", "V7", "V14a", "V13", "V8c")]
    return out


def run(quick: bool = False, progress: Callable[[str], None] | None = None) -> list[Row]:
    rows = []
    for c in cases(quick):
        if progress:
            progress(c.vid)
        t0 = time.perf_counter()
        pred = c.predict()
        note = c.note() if callable(c.note) else c.note
        bound = c.floor_bound() if c.floor_bound else False
        rows.append(Row(c.vid, c.what, c.unit, c.measured, pred, time.perf_counter() - t0, note, bound))
    return rows


def summary(rows: list[Row]) -> tuple[float, float, int]:
    """(median |error|, worst |error|, cases compared) over rows with a prediction."""
    errs = [abs(r.error) for r in rows]
    if not errs:
        return float("nan"), float("nan"), 0
    return statistics.median(errs), max(errs), len(errs)


def render(rows: list[Row], console=None) -> None:
    """Print the table with rich (to `console` or stdout)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    t = Table(title="ascendir calibration vs reference §7 (timing-only, nothing fitted per case)")
    for col in ("case", "workload", "unit", "measured", "predicted", "error", "sim s", "note"):
        t.add_column(col, justify="right" if col in ("measured", "predicted", "error", "sim s") else "left")
    for r in rows:
        pred = f"{r.predicted:.1f}"
        err = f"{100 * r.error:+.1f} %"
        t.add_row(r.vid, r.what, r.unit, f"{r.measured:.1f}", pred, err, f"{r.seconds:.1f}", r.note)
    console.print(t)
    med, worst, n = summary(rows)
    console.print(f"median |error| {100 * med:.1f} %, worst |error| {100 * worst:.1f} % over {n} cases (goal, issue 22: median <= 8 %, worst <= 25 %)")
    bound = [r.vid for r in rows if r.floor_bound]
    if bound:
        med, worst, n = summary([r for r in rows if not r.floor_bound])
        console.print(f"without {', '.join(bound)} (predicted at the harness floor, not the kernel): "
                      f"median {100 * med:.1f} %, worst {100 * worst:.1f} % over {n} cases")
