"""pto-isa's hand-written FlashAttention (S27 kernels/manual/common/flash_atten) as an ascend kernel.

`pto_fa_ir(s0, s1)` writes the schedule of pto-isa's runTFA (fa_performance_kernel.cpp) as IR
text, so that calibration rows V20 time pto-isa's kernel and not ascendir's own flash_attention
template with pto-isa's tile (the V21 / V22 way: testing.matmul_ir is pto-isa's GEMM). One head,
q [s0, 128], k and v [s1, 128] f16, not causal; output o [s0, 128] f32 (runTFA's o_out is float).
Its defaults (fa_performance_kernel.h kFa*, generate_cases.py): CUBE_S0 128 query rows per block,
CUBE_S1 128 keys per cube step, TILE_S1 256 keys per tile (kTileFactor 2 cube steps),
QK_PRELOAD 4, CV FIFO 8 slots (kFaCvFifoSize), SyncPeriod 4 (TPush.hpp: SlotNum / 2).

What it takes from pto-isa's source, and where:
* Blocks (LaunchTFA): s0 / 128 blocks, one per 128 query rows, each an AIC and its two AIVs
  (mix kernel, VEC_CORES 2); here dealt block-cyclically over min(24, blocks) groups, as a
  launch of more blocks than cores runs them. Per block: a warm-up of QK_PRELOAD tiles (QK on the
  cube, P on the vector cores), then per tile t the cube runs QK(t + 4) and PV(t) step by step
  (sub-tile 0: QK, PV; sub-tile 1: QK, PV), the vector cores P(t + 4) in two row slices, then
  GU(t) (runTFA's two loops).
* compute_qk: per 128-key step, K [128, 128] GM -> L1 (one of two L1 buffers, MTE1 -> MTE2 event
  per buffer), Q loaded once per block at the first step; pto_macro_matmul: L1 -> L0A / L0B
  (one of two 32 KiB L0 buffers, alternating per matmul), one 128 x 128 x 128 mmad; the 64 KiB fp32
  S step stored by FixPipe into the block's QK FIFO slot (t mod 8). L0C: assign_running_acc_tile
  gives the QK and PV accumulators one static index between them (both TileAcc<float, 128, 128>
  at D 128): the warm-up's QK steps alternate the two 64 KiB L0C halves, the main loop's QK steps
  share one half and its PV steps the other, the drain's PV steps alternate.
* compute_pv: per step V [128, 128] and P [128, 128] f16 (its FIFO slot) GM -> L1 (two buffers
  each), L1 -> L0, mmad accumulating both steps into one L0C half, one FixPipe store of the
  64 KiB fp32 PV tile into the PV FIFO after the second step.
* compute_p on each AIV: its 64 rows of a tile in two row slices of 32 (Vec_S0): per slice the
  two [32, 128] fp32 chunks of S loaded from the QK slot, softmax (pto_macro_fa_softmax: row max
  by group reduces and vmax (TRowReduceOps.hpp), max with the running max, exp of the scaled
  difference, the rescale factor exp_max kept per tile in a ring of 8, cast to f16, row sum),
  the two [32, 128] f16 chunks of P stored into the P slot.
* compute_gu on each AIV: its [64, 128] fp32 half of the PV tile loaded; the first tile becomes
  the running O, the others rescale it by exp_max (row broadcast) and add; the last divides by
  the row sums and stores O.
* FIFOs (TPipe, TPush.hpp / TAlloc.hpp / TFree.hpp, a2a3): the consumer waits for every tile
  (TPOP: wait_flag_dev); it frees after every 4th tile (TFREE, set from its MTE2 pipe); the
  producer waits for a free before allocating a tile t >= 8 with t mod 4 = 0 (TALLOC), sets
  "ready" after its last store of a tile (TPUSH: from FIX on the cube, MTE3 on the vector
  cores), and waits for the frees it did not consume at the block's end (the TPipe destructor).
  Every such wait is wait_flag_dev, which stops the core's scalar unit until the set (S2,
  CrossCoreWaitFlag: every later instruction is held): written as a wait on S, nothing of the
  core issues past it before the set.
  A cube set reaches both AIVs (CV_CORES_SYNC), an AIV -> cube hand-off needs both AIVs: one
  flag per AIV here.
* Intra-core flags as runTFA / pto_macro_matmul write them (MTE2 -> MTE1 after each load,
  M -> MTE1 / MTE1 -> M per L0 buffer, V -> MTE2 / MTE3 -> V per vector ping-pong buffer: compute_p
  and compute_gu share one ping-pong counter, and the QK tile and the PV tile share their UB
  (allocate_vec_tile_buffers' union); pipe_barrier(PIPE_V) where pto_macro_fa_softmax has them).

What the IR cannot say, and how it is written instead:
* The unit flag (UF_ENABLE: mmad and FixPipe hand L0C over per fractal without flags): written
  as M -> FIX before each store and FIX -> M before an accumulator half is written again, so
  FixPipe starts when the whole mmad is done, not fractal by fractal (later than on the chip).
* UB has no reshape: the QK tile / PV tile union of allocate_vec_tile_buffers is one [64, 128]
  fp32 buffer, and the S rows of a slice are kept chunk-major in it (the [32, 128] chunk of each
  cube step, one above the other) instead of pto-isa's [32, 256] rows: the same bytes loaded by
  the same DMAs, the same vector work, but the row broadcasts and the combining of the two
  halves of a row reduce are two calls (each a vector call head more) where pto-isa has one.
* Block-cyclic blocks instead of the hardware's dispatch of blocks to free cores (equal work per
  block: the same waves).
* The harness's prefetch: LaunchTFA (fa_performance_kernel.cpp, which main.cpp calls) first runs
  an empty 24-block AIC kernel (warm-up) and PTO_PREFETCH (SDMA) of S0 · 128 f16 of each of q, k,
  v into L2, then the kernel; main.cpp times only the kernel (its blocks' timestamps). Here
  @main launches `@prefetch` first: AIVs reading those rows of q, k, v as the [128, 128] tiles
  the kernel reads them in, so the kernel's first reads of them find them in L2 as on the chip. How fast the SDMA engine
  streams them is not modelled: only the kernel is timed (calibration.pto_fa_us). The empty
  warm-up kernel touches no memory and is left out.
"""

from __future__ import annotations

CUBE_S0, CUBE_S1, TILE_S1, QK_PRELOAD, FIFO, SYNC = 128, 128, 256, 4, 8, 4
HEAD = 128
VEC_S0 = CUBE_S0 // 2 // (TILE_S1 // CUBE_S1)  # 32 rows per row slice (runTFA Vec_S0)
GU_ROWS = CUBE_S0 // 2  # 64 rows per AIV


def _t(shape, dt: str, space: str, layout: str = "") -> str:
    return f"memref<{'x'.join(map(str, shape))}x{dt}{layout}, #ascend<space {space}>>"


def _dyn(rows: int, cols: int, dt: str, stride: int) -> str:
    return _t((rows, cols), dt, "gm", f", strided<[{stride}, 1], offset: ?>")


class _Ir:
    """Text of one kernel body: fresh SSA names, constants once, ops tagged per unit."""

    def __init__(self):
        self.lines: list[str] = []
        self.n = 0
        self.consts: dict[int, str] = {}

    def fresh(self, hint: str = "v") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def c(self, v: int) -> str:
        if v not in self.consts:
            self.consts[v] = f"%c{v}"
        return self.consts[v]

    def op(self, text: str) -> None:
        self.lines.append(text)

    def arith(self, kind: str, a: str, b: str) -> str:
        r = self.fresh()
        self.op(f"{r} = arith.{kind} {a}, {b} : index")
        return r

    def cmp(self, pred: str, a: str, b: str) -> str:
        r = self.fresh("b")
        self.op(f"{r} = arith.cmpi {pred}, {a}, {b} : index")
        return r

    def andi(self, a: str, b: str) -> str:
        r = self.fresh("b")
        self.op(f"{r} = arith.andi {a}, {b} : i1")
        return r

    def when(self, cond: str | bool, body) -> None:
        """`body()` under `cond`: a Python bool decides at generation, an i1 value at run time."""
        if cond is True:
            body()
        elif cond is not False:
            self.op(f"scf.if {cond} {{")
            body()
            self.op("}")

    def sub(self, src: str, src_t: str, offs, sizes, res_t: str) -> str:
        r = self.fresh("s")
        o = ", ".join(map(str, offs))
        s = ", ".join(map(str, sizes))
        self.op(f"{r} = memref.subview {src}[{o}] [{s}] [1, 1] : {src_t} to {res_t}")
        return r


def pto_fa_ir(s0: int, s1: int, cores: int = 24) -> str:
    """IR text of a module: kernel @pto_fa (pto-isa's runTFA schedule, module docstring), kernel
    @prefetch (the harness's L2 prefetch of q, k, v) and host @main(q [s0, 128] f16, k [s1, 128]
    f16, v [s1, 128] f16) -> o [s0, 128] f32 (onnx names q, k, v, o) launching both, scale
    1/sqrt(128), not causal; blocks of 128 rows dealt over min(`cores`, s0 / 128) AIC groups (the
    chip's AIC count).

    Raises: ValueError when s0 is not a positive multiple of 128, s1 not one of 256 (pto-isa's
    static_asserts: S0 % CUBE_S0, S1 / TILE_S1 tiles) or `cores` is not a positive int."""
    for name, v, unit in (("s0", s0, CUBE_S0), ("s1", s1, TILE_S1), ("cores", cores, 1)):
        if not isinstance(v, int) or v <= 0 or v % unit:
            raise ValueError(f"pto_fa_ir: {name} = {v!r} must be a positive multiple of {unit}")
    nblk, ntile = s0 // CUBE_S0, s1 // TILE_S1
    bd = min(cores, nblk)
    npre = min(QK_PRELOAD, ntile)
    scale = HEAD ** -0.5
    f16, f32 = "f16", "f32"
    q_t, kv_t, o_t = _t((s0, HEAD), f16, "gm"), _t((s1, HEAD), f16, "gm"), _t((s0, HEAD), f32, "gm")
    ws_rows = bd * FIFO * 2 * CUBE_S0  # per core: FIFO slots of two [128, 128] cube steps
    wqk_t, wp_t = _t((ws_rows, CUBE_S1), f32, "gm"), _t((ws_rows, CUBE_S1), f16, "gm")
    wpv_t = _t((bd * FIFO * CUBE_S0, HEAD), f32, "gm")
    l1_t = _t((128, 128), f16, "l1")
    l0a_t, l0b_t, l0c_t = _t((128, 128), f16, "l0a"), _t((128, 128), f16, "l0b"), _t((128, 128), f32, "l0c")
    ub = {dt: _t((GU_ROWS, 128), dt, "ub") for dt in (f16, f32)}
    col_t = _t((GU_ROWS, 1), f32, "ub")
    ir = _Ir()
    A = "{units = #ascend.flag_units<aic -> aic>}"

    def tag(sb: int, extra: str = "") -> str:
        parts = ([extra] if extra else []) + (["subblock = 1 : i64"] if sb else [])
        return f" {{{', '.join(parts)}}}" if parts else ""

    def aiv(sb: int) -> str:
        return "aiv1" if sb else "aiv"

    def xflag(kind: str, pipes: str, ev: int, src: str, dst: str) -> None:
        """A flag `pipes` ("FIX -> S") from unit `src` to unit `dst`, tagged with the AIV that
        runs it (the set's unit, the wait's)."""
        on = src if kind == "set" else dst
        sb = ", subblock = 1 : i64" if on == "aiv1" else ""
        ir.op(f"ascend.{kind}_flag {pipes}, {ev} {{units = #ascend.flag_units<{src} -> {dst}>{sb}}}")

    # -- allocations -----------------------------------------------------------------------
    allocs = []
    qL1 = "%qL1"
    allocs.append(f"{qL1} = ascend.alloc : {l1_t}")
    kL1, vL1, pL1 = [f"%kL1_{i}" for i in (0, 1)], [f"%vL1_{i}" for i in (0, 1)], [f"%pL1_{i}" for i in (0, 1)]
    l0a, l0b, l0c = [f"%l0a_{i}" for i in (0, 1)], [f"%l0b_{i}" for i in (0, 1)], [f"%l0c_{i}" for i in (0, 1)]
    for names, t in ((kL1, l1_t), (pL1, l1_t), (vL1, l1_t), (l0a, l0a_t), (l0b, l0b_t), (l0c, l0c_t)):
        allocs += [f"{n} = ascend.alloc : {t}" for n in names]
    U = [[f"%ub{sb}_{i}" for i in (0, 1)] for sb in (0, 1)]  # QK tile / PV tile union
    X = [[f"%xe{sb}_{i}" for i in (0, 1)] for sb in (0, 1)]  # x_exp (P, f16)
    RO, TMP = [f"%ro{sb}" for sb in (0, 1)], [f"%tmp{sb}" for sb in (0, 1)]
    GMAX, LMAX, GSUM, LSUM = ([f"%{n}{sb}" for sb in (0, 1)] for n in ("gmax", "lmax", "gsum", "lsum"))
    EM = [f"%em{sb}" for sb in (0, 1)]
    tmp_t, em_t = _t((GU_ROWS, 16), f32, "ub"), _t((GU_ROWS, FIFO), f32, "ub")
    for sb in (0, 1):
        at = tag(sb)
        allocs += [f"{n} = ascend.alloc{at} : {ub[f32]}" for n in U[sb]]
        allocs += [f"{n} = ascend.alloc{at} : {ub[f16]}" for n in X[sb]]
        allocs += [f"{RO[sb]} = ascend.alloc{at} : {ub[f32]}", f"{TMP[sb]} = ascend.alloc{at} : {tmp_t}",
                   f"{EM[sb]} = ascend.alloc{at} : {em_t}"]
        allocs += [f"{n[sb]} = ascend.alloc{at} : {col_t}" for n in (GMAX, LMAX, GSUM, LSUM)]

    # -- flags -------------------------------------------------------------------------------
    # cross-core, set on the pipe of the last access, waited on S (wait_flag_dev stops the
    # scalar unit), one event per (pipe pair, unit pair): QK / PV ready FIX -> S 0-1 / 2-3, P
    # ready MTE3 -> S 0-1; frees of QK / PV MTE2 -> S 0-1 / 2-3, of P MTE2 -> S 4-5
    def both(kind: str, pipes: str, ev0: int, to_aiv: bool) -> None:
        for sb in (0, 1):
            xflag(kind, pipes, ev0 + sb, *(("aic", aiv(sb)) if to_aiv else (aiv(sb), "aic")))

    def ready_qk() -> None:
        both("set", "FIX -> S", 0, True)

    def ready_pv() -> None:
        both("set", "FIX -> S", 2, True)

    def free_p() -> None:
        both("set", "MTE2 -> S", 4, True)

    def wait_free_qk() -> None:
        both("wait", "MTE2 -> S", 0, False)

    def wait_free_pv() -> None:
        both("wait", "MTE2 -> S", 2, False)

    def wait_ready_p() -> None:
        both("wait", "MTE3 -> S", 0, False)

    def aic_flag(kind: str, src: str, dst: str, ev: int) -> None:
        ir.op(f"ascend.{kind}_flag {src} -> {dst}, {ev} {A}")

    def vflag(kind: str, src: str, dst: str, pp: int, sb: int) -> None:
        """An AIV's own flag: ping-pong events 0-1 (AIV 0) / 2-3 (AIV 1); the set-then-wait
        hand-offs (MTE2 -> V, V -> MTE3) event 0 / 1."""
        ev = (pp + 2 * sb) if (src, dst) in (("V", "MTE2"), ("MTE3", "V")) else sb
        xflag(kind, f"{src} -> {dst}", ev, aiv(sb), aiv(sb))

    # -- GM rows of FIFO slots ---------------------------------------------------------------
    def slot_row(base: str, slot, step: int, rows_per_slot: int, extra: int) -> str:
        """base + slot * rows_per_slot + step * 128 + extra (slot an SSA index or an int)."""
        if isinstance(slot, int):
            return ir.arith("addi", base, ir.c(slot * rows_per_slot + step * CUBE_S0 + extra))
        r = ir.arith("muli", slot, ir.c(rows_per_slot))
        r = ir.arith("addi", base, r)
        return ir.arith("addi", r, ir.c(step * CUBE_S0 + extra)) if step * CUBE_S0 + extra else r

    def kv_row(t, j: int) -> str:
        if isinstance(t, int):
            return ir.c(t * TILE_S1 + j * CUBE_S1)
        r = ir.arith("muli", t, ir.c(TILE_S1))
        return ir.arith("addi", r, ir.c(j * CUBE_S1)) if j else r

    def slot_of(t):
        return t % FIFO if isinstance(t, int) else ir.arith("remui", t, ir.c(FIFO))

    def cond_alloc(t):
        """TALLOC waits for a free before tile t: t >= 8 and t mod 4 = 0 (shouldWaitFree)."""
        if isinstance(t, int):
            return t >= FIFO and t % SYNC == 0
        ge = ir.cmp("uge", t, ir.c(FIFO))
        m = ir.arith("remui", t, ir.c(SYNC))
        return ir.andi(ge, ir.cmp("eq", m, ir.c(0)))

    def cond_free(t):
        """TFREE signals after tile t when (t + 1) mod 4 = 0 (shouldNotifyFree)."""
        if isinstance(t, int):
            return (t + 1) % SYNC == 0
        m = ir.arith("remui", t, ir.c(SYNC))
        return ir.cmp("eq", m, ir.c(SYNC - 1))

    # -- cube ----------------------------------------------------------------------------------
    def matmul(a_l1: str, b_l1: str, lp: int, cb: int, init: bool, transpose_b: bool) -> None:
        aic_flag("wait", "M", "MTE1", lp)
        ir.op(f"ascend.copy {a_l1}, {l0a[lp]} : {l1_t}, {l0a_t}")
        tr = " {transpose = true}" if transpose_b else ""
        ir.op(f"ascend.copy {b_l1}, {l0b[lp]}{tr} : {l1_t}, {l0b_t}")
        aic_flag("set", "MTE1", "M", lp)
        aic_flag("wait", "MTE1", "M", lp)
        ir.op(f"ascend.mmad {l0a[lp]}, {l0b[lp]}, {l0c[cb]} {{init = {'true' if init else 'false'}}} : {l0a_t}, {l0b_t}, {l0c_t}")
        aic_flag("set", "M", "MTE1", lp)

    def qk(t, j: int, lp: int, cb: int, kpp: int) -> None:
        if j == 0:
            ir.when(cond_alloc(t), wait_free_qk)
        aic_flag("wait", "MTE1", "MTE2", kpp)
        if isinstance(t, int) and t == 0 and j == 0:
            qs = ir.sub("%q", q_t, [ROW0, 0], [CUBE_S0, HEAD], _dyn(CUBE_S0, HEAD, f16, HEAD))
            ir.op(f"ascend.copy {qs}, {qL1} {{layout = #ascend.layout<nd2nz>}} : {_dyn(CUBE_S0, HEAD, f16, HEAD)}, {l1_t}")
        ks = ir.sub("%k", kv_t, [kv_row(t, j), 0], [CUBE_S1, HEAD], _dyn(CUBE_S1, HEAD, f16, HEAD))
        ir.op(f"ascend.copy {ks}, {kL1[kpp]} {{layout = #ascend.layout<nd2nz>}} : {_dyn(CUBE_S1, HEAD, f16, HEAD)}, {l1_t}")
        aic_flag("set", "MTE2", "MTE1", 0)
        aic_flag("wait", "MTE2", "MTE1", 0)
        aic_flag("wait", "FIX", "M", cb)
        matmul(qL1, kL1[kpp], lp, cb, True, True)
        aic_flag("set", "MTE1", "MTE2", kpp)
        aic_flag("set", "M", "FIX", cb)
        aic_flag("wait", "M", "FIX", cb)
        row = slot_row(QK_BASE, slot_of(t), j, 2 * CUBE_S0, 0)
        d = ir.sub("%wqk", wqk_t, [row, 0], [CUBE_S0, CUBE_S1], _dyn(CUBE_S0, CUBE_S1, f32, CUBE_S1))
        ir.op(f"ascend.copy {l0c[cb]}, {d} {{layout = #ascend.layout<nz2nd>}} : {l0c_t}, {_dyn(CUBE_S0, CUBE_S1, f32, CUBE_S1)}")
        aic_flag("set", "FIX", "M", cb)
        if j == 1:
            ready_qk()

    def pv(t, j: int, lp: int, cb: int, vpp: int) -> None:
        if j == 0:
            wait_ready_p()
        aic_flag("wait", "MTE1", "MTE2", 2 + vpp)
        vs = ir.sub("%v", kv_t, [kv_row(t, j), 0], [CUBE_S1, HEAD], _dyn(CUBE_S1, HEAD, f16, HEAD))
        ir.op(f"ascend.copy {vs}, {vL1[vpp]} {{layout = #ascend.layout<nd2nz>}} : {_dyn(CUBE_S1, HEAD, f16, HEAD)}, {l1_t}")
        row = slot_row(QK_BASE, slot_of(t), j, 2 * CUBE_S0, 0)
        ps = ir.sub("%wp", wp_t, [row, 0], [CUBE_S0, CUBE_S1], _dyn(CUBE_S0, CUBE_S1, f16, CUBE_S1))
        ir.op(f"ascend.copy {ps}, {pL1[vpp]} {{layout = #ascend.layout<nd2nz>}} : {_dyn(CUBE_S0, CUBE_S1, f16, CUBE_S1)}, {l1_t}")
        if j == 1:
            ir.when(cond_free(t), free_p)
        aic_flag("set", "MTE2", "MTE1", 0)
        aic_flag("wait", "MTE2", "MTE1", 0)
        if j == 0:
            aic_flag("wait", "FIX", "M", cb)
        matmul(pL1[vpp], vL1[vpp], lp, cb, j == 0, False)
        aic_flag("set", "MTE1", "MTE2", 2 + vpp)
        if j == 1:
            ir.when(cond_alloc(t), wait_free_pv)
            aic_flag("set", "M", "FIX", cb)
            aic_flag("wait", "M", "FIX", cb)
            row = slot_row(PV_BASE, slot_of(t), 0, CUBE_S0, 0)
            d = ir.sub("%wpv", wpv_t, [row, 0], [CUBE_S0, HEAD], _dyn(CUBE_S0, HEAD, f32, HEAD))
            ir.op(f"ascend.copy {l0c[cb]}, {d} {{layout = #ascend.layout<nz2nd>}} : {l0c_t}, {_dyn(CUBE_S0, HEAD, f32, HEAD)}")
            aic_flag("set", "FIX", "M", cb)
            ready_pv()

    # -- vector --------------------------------------------------------------------------------
    half_t = _t((VEC_S0, 128), f32, "ub", ", strided<[128, 1], offset: ?>")
    half16_t = _t((VEC_S0, 128), f16, "ub", ", strided<[128, 1], offset: ?>")
    c32_t = _t((VEC_S0, 1), f32, "ub", ", strided<[1, 1], offset: ?>")
    em_col_t = _t((VEC_S0, 1), f32, "ub", f", strided<[{FIFO}, 1], offset: ?>")
    em_full_t = _t((GU_ROWS, 1), f32, "ub", f", strided<[{FIFO}, 1], offset: ?>")
    tmp_a_t = _t((VEC_S0, 16), f32, "ub", ", strided<[16, 1], offset: ?>")
    tmp_b_t = _t((VEC_S0, 8), f32, "ub", ", strided<[16, 1], offset: ?>")

    def v(opname: str, operands: list[tuple[str, str]], sb: int, extra: str = "") -> None:
        names = ", ".join(o for o, _ in operands)
        types = ", ".join(t for _, t in operands)
        ir.op(f"ascend.{opname} {names}{tag(sb, extra)} : {types}")

    def barrier(sb: int) -> None:
        ir.op(f"ascend.pipe_barrier V{tag(sb)}")

    def row_reduce(kind: str, src: str, dst: str, dst_t: str, sb: int) -> None:
        """TROWMAX / TROWSUM of a slice's [32, 256] rows held chunk-major in `src` [64, 128]: group
        reduce 256 -> 32 per row, two binary steps 32 -> 8, group reduce 8 -> 1 (TRowReduceOps.hpp)."""
        bin_op = "vmax" if kind == "max" else "vadd"
        v(f"vblock_reduce_{kind}", [(src, ub[f32]), (TMP[sb], tmp_t)], sb)
        lo = ir.sub(TMP[sb], tmp_t, [0, 0], [VEC_S0, 16], tmp_a_t)
        hi = ir.sub(TMP[sb], tmp_t, [VEC_S0, 0], [VEC_S0, 16], tmp_a_t)
        v(bin_op, [(lo, tmp_a_t), (hi, tmp_a_t), (lo, tmp_a_t)], sb)
        a = ir.sub(TMP[sb], tmp_t, [0, 0], [VEC_S0, 8], tmp_b_t)
        b = ir.sub(TMP[sb], tmp_t, [0, 8], [VEC_S0, 8], tmp_b_t)
        v(bin_op, [(a, tmp_b_t), (b, tmp_b_t), (a, tmp_b_t)], sb)
        v(f"vblock_reduce_{kind}", [(a, tmp_b_t), (dst, dst_t)], sb)

    def col(buf: str, rs: int) -> str:
        return ir.sub(buf, col_t, [rs * VEC_S0, 0], [VEC_S0, 1], c32_t)

    def softmax(rs: int, pp: int, sb: int, init: bool, em_slot) -> None:
        x = U[sb][pp]
        halves = [ir.sub(x, ub[f32], [c * VEC_S0, 0], [VEC_S0, 128], half_t) for c in (0, 1)]
        gmax, gsum, lmax, lsum = col(GMAX[sb], rs), col(GSUM[sb], rs), col(LMAX[sb], rs), col(LSUM[sb], rs)
        if init:
            row_reduce("max", x, gmax, c32_t, sb)
            barrier(sb)
            for h in halves:
                v("vsub", [(h, half_t), (gmax, c32_t), (h, half_t)], sb)
            v("vmuls", [(x, ub[f32]), (x, ub[f32])], sb, f"scalar = {scale!r} : f64")
            v("vexp", [(x, ub[f32]), (x, ub[f32])], sb)
            barrier(sb)
            row_reduce("sum", x, gsum, c32_t, sb)
            v("vcast", [(x, ub[f32]), (X[sb][pp], ub[f16])], sb)
            return
        em_c = ir.sub(EM[sb], em_t, [0, em_slot], [GU_ROWS, 1], em_full_t)
        em = ir.sub(em_c, em_full_t, [rs * VEC_S0, 0], [VEC_S0, 1], em_col_t)
        row_reduce("max", x, lmax, c32_t, sb)
        barrier(sb)
        v("vmax", [(lmax, c32_t), (gmax, c32_t), (lmax, c32_t)], sb)
        barrier(sb)
        v("vsub", [(gmax, c32_t), (lmax, c32_t), (em, em_col_t)], sb)
        barrier(sb)
        v("vmuls", [(lmax, c32_t), (gmax, c32_t)], sb, "scalar = 1.0 : f64")
        barrier(sb)
        for h in halves:
            v("vsub", [(h, half_t), (lmax, c32_t), (h, half_t)], sb)
        v("vmuls", [(em, em_col_t), (em, em_col_t)], sb, f"scalar = {scale!r} : f64")
        v("vmuls", [(x, ub[f32]), (x, ub[f32])], sb, f"scalar = {scale!r} : f64")
        v("vexp", [(em, em_col_t), (em, em_col_t)], sb)
        v("vexp", [(x, ub[f32]), (x, ub[f32])], sb)
        v("vcast", [(x, ub[f32]), (X[sb][pp], ub[f16])], sb)
        barrier(sb)
        v("vmul", [(em, em_col_t), (gsum, c32_t), (gsum, c32_t)], sb)
        row_reduce("sum", x, lsum, c32_t, sb)
        barrier(sb)
        v("vadd", [(gsum, c32_t), (lsum, c32_t), (gsum, c32_t)], sb)

    def compute_p(t, rs: int, pp: int, sb: int) -> None:
        vflag("wait", "V", "MTE2", pp, sb)
        if rs == 0:
            xflag("wait", "FIX -> S", sb, "aic", aiv(sb))  # TPOP
        slot = slot_of(t)
        x = U[sb][pp]
        for j in (0, 1):
            row = slot_row(QK_BASE, slot, j, 2 * CUBE_S0, sb * GU_ROWS + rs * VEC_S0)
            src = ir.sub("%wqk", wqk_t, [row, 0], [VEC_S0, CUBE_S1], _dyn(VEC_S0, CUBE_S1, f32, CUBE_S1))
            dst = ir.sub(x, ub[f32], [j * VEC_S0, 0], [VEC_S0, 128], half_t)
            ir.op(f"ascend.copy {src}, {dst}{tag(sb)} : {_dyn(VEC_S0, CUBE_S1, f32, CUBE_S1)}, {half_t}")
        if rs == 1:
            ir.when(cond_free(t), lambda: xflag("set", "MTE2 -> S", sb, aiv(sb), "aic"))
        vflag("set", "MTE2", "V", pp, sb)
        vflag("wait", "MTE2", "V", pp, sb)
        vflag("wait", "MTE3", "V", pp, sb)
        init = isinstance(t, int) and t == 0
        softmax(rs, pp, sb, init, None if init else slot)
        vflag("set", "V", "MTE2", pp, sb)
        vflag("set", "V", "MTE3", pp, sb)
        vflag("wait", "V", "MTE3", pp, sb)
        if rs == 0:
            ir.when(cond_alloc(t), lambda: xflag("wait", "MTE2 -> S", 4 + sb, "aic", aiv(sb)))
        for j in (0, 1):
            row = slot_row(QK_BASE, slot, j, 2 * CUBE_S0, sb * GU_ROWS + rs * VEC_S0)
            dst = ir.sub("%wp", wp_t, [row, 0], [VEC_S0, CUBE_S1], _dyn(VEC_S0, CUBE_S1, f16, CUBE_S1))
            src = ir.sub(X[sb][pp], ub[f16], [j * VEC_S0, 0], [VEC_S0, 128], half16_t)
            ir.op(f"ascend.copy {src}, {dst}{tag(sb)} : {half16_t}, {_dyn(VEC_S0, CUBE_S1, f16, CUBE_S1)}")
        if rs == 1:
            xflag("set", "MTE3 -> S", sb, aiv(sb), "aic")  # TPUSH
        vflag("set", "MTE3", "V", pp, sb)

    def compute_gu(t, pp: int, sb: int) -> None:
        vflag("wait", "V", "MTE2", pp, sb)
        xflag("wait", "FIX -> S", 2 + sb, "aic", aiv(sb))  # TPOP
        slot = slot_of(t)
        row = slot_row(PV_BASE, slot, 0, CUBE_S0, sb * GU_ROWS)
        src = ir.sub("%wpv", wpv_t, [row, 0], [GU_ROWS, HEAD], _dyn(GU_ROWS, HEAD, f32, HEAD))
        first = isinstance(t, int) and t == 0
        dst = RO[sb] if first else U[sb][pp]
        ir.op(f"ascend.copy {src}, {dst}{tag(sb)} : {_dyn(GU_ROWS, HEAD, f32, HEAD)}, {ub[f32]}")
        vflag("set", "MTE2", "V", pp, sb)
        vflag("wait", "MTE2", "V", pp, sb)
        last = isinstance(t, int) and t == ntile - 1
        if not first:
            em = ir.sub(EM[sb], em_t, [0, slot], [GU_ROWS, 1], em_full_t)
            v("vmul", [(RO[sb], ub[f32]), (em, em_full_t), (RO[sb], ub[f32])], sb)
            v("vadd", [(RO[sb], ub[f32]), (U[sb][pp], ub[f32]), (RO[sb], ub[f32])], sb)
        if last:  # (a one-tile s1 = 256: the first tile is the last, divided too)
            v("vdiv", [(RO[sb], ub[f32]), (GSUM[sb], col_t), (RO[sb], ub[f32])], sb)
        ir.when(cond_free(t), lambda: xflag("set", "MTE2 -> S", 2 + sb, aiv(sb), "aic"))
        vflag("set", "V", "MTE2", pp, sb)
        if last:
            vflag("set", "V", "MTE3", pp, sb)
            vflag("wait", "V", "MTE3", pp, sb)
            orow = ir.arith("addi", ROW0, ir.c(sb * GU_ROWS))
            d = ir.sub("%o", o_t, [orow, 0], [GU_ROWS, HEAD], _dyn(GU_ROWS, HEAD, f32, HEAD))
            ir.op(f"ascend.copy {RO[sb]}, {d}{tag(sb)} : {ub[f32]}, {_dyn(GU_ROWS, HEAD, f32, HEAD)}")

    def primed(how: str) -> None:
        """The intra-core flags every block sets at its start and waits for at its end (runTFA)."""
        for e in (0, 1):
            aic_flag(how, "M", "MTE1", e)
        for e in range(4):
            aic_flag(how, "MTE1", "MTE2", e)
        for e in (0, 1):
            aic_flag(how, "FIX", "M", e)
        for sb in (0, 1):
            for pp in (0, 1):
                vflag(how, "V", "MTE2", pp, sb)
                vflag(how, "MTE3", "V", pp, sb)

    # -- one block (runTFA) ------------------------------------------------------------------
    ir.op(f"scf.for %blk = %bid to {ir.c(nblk)} step {ir.c(bd)} {{")
    ROW0 = ir.arith("muli", "%blk", ir.c(CUBE_S0))
    QK_BASE = ir.arith("muli", "%bid", ir.c(FIFO * 2 * CUBE_S0))
    PV_BASE = ir.arith("muli", "%bid", ir.c(FIFO * CUBE_S0))
    primed("set")
    for t in range(npre):  # QK / P warm-up: matmul j of tile t uses L0 and L0C half j
        for j in (0, 1):
            qk(t, j, lp=j, cb=j, kpp=j)
        for rs in (0, 1):
            for sb in (0, 1):
                compute_p(t, rs, rs, sb)
    nsteady = ntile - npre
    if nsteady > 0:
        ir.op(f"scf.for %t = {ir.c(0)} to {ir.c(nsteady)} step {ir.c(1)} {{")
        nxt = ir.arith("addi", "%t", ir.c(QK_PRELOAD))
        for j in (0, 1):  # cube: QK(t + 4) on L0C half 0, PV(t) on half 1
            qk(nxt, j, lp=0, cb=0, kpp=j)
            pv("%t", j, lp=1, cb=1, vpp=j)
        par = ir.arith("remui", "%t", ir.c(2))
        even = ir.cmp("eq", par, ir.c(0))

        def vec(p0: int) -> None:  # the vector ping-pong counter: P(t+4) slices p0, 1-p0; GU p0
            for rs in (0, 1):
                for sb in (0, 1):
                    compute_p(nxt, rs, p0 ^ rs, sb)
            first = ir.cmp("eq", "%t", ir.c(0))
            for sb in (0, 1):
                ir.op(f"scf.if {first} {{")
                compute_gu(0, p0, sb)
                ir.op("} else {")
                compute_gu("%t", p0, sb)
                ir.op("}")

        ir.op(f"scf.if {even} {{")
        vec(0)
        ir.op("} else {")
        vec(1)
        ir.op("}")
        ir.op("}")
    for k in range(npre):  # drain: PV only, L0C halves alternating
        t = nsteady + k
        for j in (0, 1):
            pv(t, j, lp=j, cb=k % 2, vpp=j)
        for sb in (0, 1):
            compute_gu(t, t % 2, sb)
    # end of block: the flags primed at its start, then the TPipe destructors' unconsumed frees
    primed("wait")
    waited = len([t for t in range(ntile) if t >= FIFO and t % SYNC == 0])
    pending = ntile // SYNC - waited
    for _ in range(pending):
        wait_free_qk()
        wait_free_pv()
        for sb in (0, 1):
            xflag("wait", "MTE2 -> S", 4 + sb, "aic", aiv(sb))
    ir.op("}")

    pf_t = _t((CUBE_S0, HEAD), f16, "gm", f", strided<[{HEAD}, 1], offset: ?>")
    pf_ub = _t((CUBE_S0, HEAD), f16, "ub")
    pf = []
    for name, ty, n in (("q", q_t, s0), ("k", kv_t, s1), ("v", kv_t, s1)):
        # PTO_PREFETCH's S0 * HEAD_SIZE halves of each tensor: whole tensors at S0 = S1 (the table)
        pf += [f"%n{name} = arith.constant {min(s0, n) // CUBE_S0} : index",
               f"scf.for %t{name} = %pid to %n{name} step %pstep {{",
               f"  %r{name} = arith.muli %t{name}, %p128 : index",
               f"  %s{name} = memref.subview %{name}[%r{name}, 0] [{CUBE_S0}, {HEAD}] [1, 1] : {ty} to {pf_t}",
               f"  ascend.copy %s{name}, %pub : {pf_t}, {pf_ub}",
               "}"]
    pf_body = "\n    ".join(pf)
    consts = [f"{n} = arith.constant {v} : index" for v, n in sorted(ir.consts.items())]
    body = "\n    ".join(allocs + consts + ["%bid = ascend.block_idx : index"] + ir.lines)
    args = f"%q: {q_t}, %k: {kv_t}, %v: {kv_t}, %o: {o_t}, %wqk: {wqk_t}, %wp: {wp_t}, %wpv: {wpv_t}"
    return f"""builtin.module attributes {{ascend.arch = #ascend.arch<"dav-c220">}} {{
  ascend.kernel @pto_fa({args}) attributes {{block_dim = {bd} : i64, core_type = #ascend.core_type<mix>}} {{
    {body}
    ascend.return
  }}
  ascend.kernel @prefetch(%q: {q_t}, %k: {kv_t}, %v: {kv_t}) attributes {{block_dim = {2 * bd} : i64, core_type = #ascend.core_type<aiv>}} {{
    %pub = ascend.alloc : {pf_ub}
    %p128 = arith.constant {CUBE_S0} : index
    %pstep = arith.constant {2 * bd} : index
    %pid = ascend.block_idx : index
    {pf_body}
    ascend.return
  }}
  func.func @main(%q: {q_t} {{onnx.name = "q"}}, %k: {kv_t} {{onnx.name = "k"}}, %v: {kv_t} {{onnx.name = "v"}}) -> ({o_t} {{onnx.name = "o"}}) {{
    ascend.launch @prefetch(%q, %k, %v) : {q_t}, {kv_t}, {kv_t}
    %o = ascend.alloc : {o_t}
    %wqk = ascend.alloc : {wqk_t}
    %wp = ascend.alloc : {wp_t}
    %wpv = ascend.alloc : {wpv_t}
    ascend.launch @pto_fa(%q, %k, %v, %o, %wqk, %wp, %wpv) : {q_t}, {kv_t}, {kv_t}, {o_t}, {wqk_t}, {wp_t}, {wpv_t}
    func.return %o : {o_t}
  }}
}}
"""
