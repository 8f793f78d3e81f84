"""The batched forms of the tile ops' semantics (semantics.batched_semantics, registry.BATCHED):
run once on operands with a leading batch axis whose slice k is block k's operand, each slice
must hold the bits the op gives run on that block's operands alone. Operands are taken as the
batched data walk takes them (exec/batch_run.py): views of one root per operand, one block's
buffer after the other (on-chip buffers), or tiles a fixed stride apart inside a larger array
(GM), so that slices are partial views of their root; data spans magnitudes, zeros of both
signs, infinities and NaN."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, MemRefType, f16, f32, i64
from xdsl.utils.test_value import create_ssa_value

from ascendir.dialects import ascend
from ascendir.dialects.ascend import MemSpace, MemSpaceAttr
from ascendir.interpreter.exec import registry, semantics
from ascendir.interpreter.exec.ort_cast import CAST_ELEMENTS

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
RNG = np.random.default_rng(11)
B = 4


def _values(shape, dt=F32, finite: bool = False) -> np.ndarray:
    x = (RNG.standard_normal(shape) * 10.0 ** RNG.integers(-6, 5, shape)).astype(dt)
    if finite:
        return x
    flat = x.reshape(-1)
    flat[:4] = [0.0, -0.0, np.inf, -np.inf]
    flat[7] = np.nan
    return x


def _tiles(shape, dt=F32, partial: bool = False, finite: bool = False) -> np.ndarray:
    """A batched operand: B tiles of `shape`, each a block's view of its own root's first rows
    and columns (partial) or of the whole of it, roots one after the other in one array."""
    full = tuple(n + 3 for n in shape) if partial else shape
    root = _values((B,) + full, dt, finite)
    return root[(slice(None),) + tuple(slice(0, n) for n in shape)]


def _bits(a) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _check(run_block, run_batched, operands: list, out: int = -1):
    """run_batched on the batched `operands` (arrays with the batch axis, or scalars) against
    run_block on each slice, on copies of the same roots: every slice's output bits equal."""
    ref = [o.copy() if isinstance(o, np.ndarray) else o for o in operands]
    for k in range(B):
        run_block(*[o[k] if isinstance(o, np.ndarray) else o for o in ref])
    run_batched(*operands)
    assert _bits(operands[out]) == _bits(ref[out])


def _attr(**kw):
    return SimpleNamespace(**{k: SimpleNamespace(value=SimpleNamespace(data=v), data=v) for k, v in kw.items()})


@pytest.mark.parametrize("name", ["vexp", "vsilu", "vsigmoid", "vrsqrt", "vabs", "vcopy", "vln", "vtanh"])
@pytest.mark.parametrize("partial", [False, True])
def test_unary_slices_hold_the_per_block_bits(name, partial):
    t = ascend.vector_op(name)
    per, bat, keep = registry.SEMANTICS[t](None), registry.BATCHED[t][0](None), registry.BATCHED[t][1]
    assert keep  # transcendentals: batched only where the layout stays (batch_run.py)
    src, dst = _tiles((64, 96), partial=partial), _tiles((64, 96), partial=partial)
    with np.errstate(all="ignore"):
        _check(per, bat, [src, dst])


@pytest.mark.parametrize("name", ["vadd", "vsub", "vmul", "vdiv", "vmax", "vmin"])
@pytest.mark.parametrize("dt", [F32, F16])
def test_binary_slices_hold_the_per_block_bits(name, dt):
    """fp16 tiles of CAST_ELEMENTS elements and more per block: the per-block op and the batch
    each decide for fp16 via float32 (semantics._f16_via_f32) on their own; NaN declines it."""
    t = ascend.vector_op(name)
    per, bat = registry.SEMANTICS[t](None), registry.BATCHED[t][0](None)
    rows = -(-CAST_ELEMENTS // 128)
    a, b, dst = _tiles((rows, 128), dt), _tiles((rows, 128), dt, finite=True), _tiles((rows, 128), dt)
    with np.errstate(all="ignore"):
        _check(per, bat, [a, b, dst])  # (a NaN meeting a number: that NaN in every loop)
        _check(per, bat, [a, _tiles((rows, 1), dt, finite=True), dst])  # a broadcast column (the row max / sum)
        with pytest.raises(semantics.Unbatched):  # NaN op NaN: which payload depends on the loop
            bat(a, _tiles((rows, 128), dt), dst)


def test_nan_meeting_nan_declines_batching():
    """NaN op NaN keeps the payload of the operand the element's loop puts first, and numpy's
    float32 add keeps another in its SIMD body than in its scalar tail: the batched form declines
    (Unbatched) rather than give other payloads; a NaN scalar attribute gives no batched form."""
    t = ascend.vector_op("vadd")
    bat = registry.BATCHED[t][0](None)
    x = (np.uint32(0x7FC00000) | RNG.integers(1, 2**22, (B, 3, 24), dtype=np.uint32)).view(np.float32)
    y = (np.uint32(0x7FC00000) | RNG.integers(1, 2**22, (B, 3, 24), dtype=np.uint32)).view(np.float32)
    with pytest.raises(semantics.Unbatched):
        bat(x, y, np.empty_like(x))
    assert registry.BATCHED[ascend.vector_op("vadds")][0](_attr(scalar=float("nan"))) is None


@pytest.mark.parametrize("name", ["vreduce_sum", "vreduce_max", "vblock_reduce_sum", "vblock_reduce_max"])
@pytest.mark.parametrize("partial", [False, True])
def test_reductions_slices_hold_the_per_block_bits(name, partial):
    t = ascend.vector_op(name)
    per, bat = registry.SEMANTICS[t](None), registry.BATCHED[t][0](None)
    src = _tiles((64, 96), partial=partial)
    src[2, 5, :8] = [-0.0, 0.0, -0.0, -0.0, 0.0, -0.0, 0.0, -0.0]  # one block's zero max: its sign
    dst = _tiles((64, 12 if "block" in name else 1), partial=partial)
    with np.errstate(all="ignore"):
        _check(per, bat, [src, dst])


def test_scalar_ops_compare_select_dup_arange():
    for name in ("vmuls", "vadds", "vmaxs"):
        t = ascend.vector_op(name)
        op = _attr(scalar=0.088388346135616302)
        _check(registry.SEMANTICS[t](op), registry.BATCHED[t][0](op), [_tiles((64, 96)), _tiles((64, 96))])
    op = SimpleNamespace(cmp=SimpleNamespace(data="gt"))
    _check(semantics.vcmp(op), registry.BATCHED[ascend.VcmpOp][0](op),
           [_tiles((64, 96)), _tiles((64, 1)), np.zeros((B, 64, 96), bool)])
    cond = _tiles((64, 96)) > 0
    dst = _tiles((64, 96))
    # vsel %c, %a, %d, %d: the dest is its false operand (one array: `is` holds batched too)
    ref = dst.copy()
    for k in range(B):
        semantics.vsel(None)(cond[k], np.float32(-3e38) * np.ones((1, 1), F32), ref[k], ref[k])
    registry.BATCHED[ascend.VselOp][0](None)(cond, np.float32(-3e38) * np.ones((B, 1, 1), F32), dst, dst)
    assert _bits(dst) == _bits(ref)
    op = _attr(scalar=-0.0)
    _check(semantics.vdup(op), registry.BATCHED[ascend.VdupOp][0](op), [_tiles((64, 96))])
    _check(semantics.varange(None), registry.BATCHED[ascend.VarangeOp][0](None), [7, np.zeros((B, 1, 128), np.int32)])


@pytest.mark.parametrize("mkn", [(128, 128, 96), (128, 96, 128), (64, 256, 64)])
@pytest.mark.parametrize("init", [1, 0])
def test_mmad_stacked_matmul_is_the_per_block_product(mkn, init):
    """numpy's stacked matmul makes the per-block BLAS call per slice (FlashAttention's tiles);
    a partial accumulator takes the product's copy, either way the same bits."""
    m, k, n = mkn
    op = _attr(init=init)
    per, bat = semantics.mmad(op), registry.BATCHED[ascend.MmadOp][0](op)
    _check(per, bat, [_tiles((m, k), finite=True), _tiles((k, n), finite=True), _tiles((m, n), finite=True)])
    _check(per, bat, [_tiles((m, k), finite=True), _tiles((k, n), partial=True, finite=True), _tiles((m, n), partial=True, finite=True)])


def _copy_op(transpose: int, src_t=f32, dst_t=f32, space=MemSpace.UB):
    src = create_ssa_value(MemRefType(src_t, [64, 96], memory_space=MemSpaceAttr(MemSpace.L1)))
    dst = create_ssa_value(MemRefType(dst_t, [96, 64] if transpose else [64, 96], memory_space=MemSpaceAttr(space)))
    return SimpleNamespace(dest=dst, source=src, relu=None,
                           transpose=IntegerAttr(transpose, i64) if transpose else None)


@pytest.mark.parametrize("transpose", [0, 1])
def test_copy_slices_hold_the_per_block_bits(transpose):
    """A transposing copy (load2d transpose) swaps each slice's two axes, not the batch axis."""
    op = _copy_op(transpose)
    per, bat = semantics.copy(op), registry.BATCHED[ascend.CopyOp][0](op)
    dst = _tiles((96, 64) if transpose else (64, 96))
    _check(per, bat, [_tiles((64, 96), partial=True), dst])
    # a narrowing copy (FixPipe f32 -> f16) of a block's tile
    op = _copy_op(0, f32, f16)
    _check(semantics.copy(op), registry.BATCHED[ascend.CopyOp][0](op), [_tiles((64, 96)), _tiles((64, 96), F16)])


def test_vtranspose_permutes_each_slice():
    op = SimpleNamespace(perm=SimpleNamespace(data=[SimpleNamespace(value=SimpleNamespace(data=p)) for p in (1, 0)]))
    _check(semantics.vtranspose(op), registry.BATCHED[ascend.VtransposeOp][0](op), [_tiles((64, 96)), _tiles((96, 64))])


def test_gather_and_registered_ops_have_no_batched_form(monkeypatch):
    """gather_rows reads per-block indices: block by block; an op registered anew loses the
    batched form its old semantics had."""
    assert ascend.GatherRowsOp not in registry.BATCHED
    t = ascend.vector_op("vexp")
    monkeypatch.setitem(registry.SEMANTICS, t, registry.SEMANTICS[t])
    monkeypatch.setitem(registry.BATCHED, t, registry.BATCHED[t])
    registry.register_op(t, semantics=registry.SEMANTICS[t])
    assert t not in registry.BATCHED
