"""Element types beyond f16/bf16/f32/signed ints, end to end (import → convert-nn-to-ascend →
interpreter): unsigned 16/32/64-bit arithmetic and comparisons against onnxruntime (onnx.reference
where onnxruntime has no kernel for the type), and ONNX Cast to and from the float 8, float8e8m0,
float4 and 4/2-bit integer types against onnx.reference (the spec's implementation; saturate and
round_mode included). Also: sub-byte types count packed bytes, and conversions the vector unit
has no vconv form for cost more than one pass."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from ascendir.driver import lower
from ascendir.frontends.onnx import import_onnx
from ascendir.interpreter import SimResult, simulate
from lowering_harness import parse, printed, run_both
from onnx_builders import make_model, run_onnxruntime

TARGET = "ascend910b2"
RNG = np.random.default_rng(11)


def run_lowered(model, feeds: dict[str, np.ndarray]) -> SimResult:
    module, weights = import_onnx(model)
    lower(module, weights, TARGET)
    return simulate(module, weights, feeds, TARGET)


def reference(model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs, or onnx.reference's where onnxruntime has no kernel for the type."""
    try:
        return run_onnxruntime(model, feeds)
    except ort.capi.onnxruntime_pybind11_state.NotImplemented:
        return dict(zip([o.name for o in model.graph.output], ReferenceEvaluator(model).run(None, feeds)))


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal dtype, shape and values; floats compared exactly with NaN == NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


# ----------------------------------------------------------------------------------------------
# unsigned integers
# ----------------------------------------------------------------------------------------------
def _unsigned_operands(dtype) -> tuple[np.ndarray, np.ndarray]:
    top = np.iinfo(dtype).max
    # values near the top of the range: a float64 path would round uint64 ones (2**64 - 3 is not
    # a double), and sums/products wrap
    a = np.array([[top, top - 2, 7, 0, 1 << (np.iinfo(dtype).bits - 1), 12345]], dtype)
    b = np.array([[3], [top - 1]], dtype)
    return a, b


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Greater", "LessOrEqual", "Equal"])
def test_unsigned_binary(op: str, dtype) -> None:
    a, b = _unsigned_operands(dtype)
    model = make_model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"], opset=17)
    want = reference(model, {"a": a, "b": b})["y"]
    assert_same(run_lowered(model, {"a": a, "b": b}).outputs["y"], want)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_pow_float_base_unsigned_exponent(dtype) -> None:
    x, e = RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32), np.array([0, 1, 2, 5], dtype)
    model = make_model([helper.make_node("Pow", ["x", "e"], ["y"])], {"x": x, "e": e}, ["y"], opset=15)
    got = run_lowered(model, {"x": x, "e": e}).outputs["y"]
    np.testing.assert_allclose(got, reference(model, {"x": x, "e": e})["y"], rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# Cast to and from the small float and integer types
# ----------------------------------------------------------------------------------------------
SPECIAL = np.array([0.4789, -0.0, 1e6, -1e6, 460.0, 250.0, 6e4, 1e-7, -3.0, np.nan, np.inf, -np.inf], np.float32)

FLOAT8 = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ]


def _cast_model(x: np.ndarray, opset: int = 25, **attrs):
    return make_model([helper.make_node("Cast", ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)


def _check_cast(model, x: np.ndarray) -> SimResult:
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    result = run_lowered(model, {"x": x})
    assert_same(result.outputs["y"], want)
    return result


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("to", FLOAT8, ids=TensorProto.DataType.Name)
def test_cast_to_float8(to: int, saturate: int) -> None:
    # saturate=1 clamps out-of-range values and ±inf to ±max finite; 0 gives inf or NaN
    _check_cast(_cast_model(SPECIAL.reshape(3, 4), to=to, saturate=saturate), SPECIAL.reshape(3, 4))


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_float8e8m0(round_mode: str, saturate: int) -> None:
    x = np.array([[0.0, 0.124, 0.25, 0.75, 1.1, 3.0, 1e38, 3e38], [5.0, 6.0, 7.0, 1e-39, np.nan, np.inf, 2.0, 0.5]], np.float32)
    _check_cast(_cast_model(x, to=TensorProto.FLOAT8E8M0, saturate=saturate, round_mode=round_mode), x)


@pytest.mark.parametrize(
    "dtype, to",
    [
        (ml_dtypes.int4, TensorProto.INT4),
        (ml_dtypes.uint4, TensorProto.UINT4),
        (ml_dtypes.int2, TensorProto.INT2),
        (ml_dtypes.uint2, TensorProto.UINT2),
        (ml_dtypes.float4_e2m1fn, TensorProto.FLOAT4E2M1),
    ],
    ids=["int4", "uint4", "int2", "uint2", "float4e2m1"],
)
def test_cast_small_types_round_trip(dtype, to: int) -> None:
    # float → small type (integers truncate, then keep the low bits) → float again
    x = np.concatenate([np.arange(-9, 16, dtype=np.float32), [2.7, -2.5, 0.25, 1e6, -0.0, 5.5, 0.75]]).reshape(4, 8)
    model = make_model(
        [helper.make_node("Cast", ["x"], ["s"], to=to), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)],
        {"x": x}, ["s", "y"], opset=25,
    )
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = run_lowered(model, {"x": x}).outputs
    assert got["s"].dtype == np.dtype(dtype)
    assert_same(got["s"], want[0])
    assert_same(got["y"], want[1])


def test_cast_float8_input_to_float16() -> None:
    x = SPECIAL.reshape(3, 4).astype(ml_dtypes.float8_e5m2)
    _check_cast(_cast_model(x, to=TensorProto.FLOAT16), x)


def test_cast_mode_round_trips_through_the_ir() -> None:
    text = """func.func @main(%x: tensor<2x8xf32> {onnx.name = "x"}) -> (tensor<2x8xf8E4M3FN> {onnx.name = "a"},
                                                               tensor<2x8xf8E8M0FNU> {onnx.name = "b"}) {
  %a = nn.cast %x {saturate = false} : (tensor<2x8xf32>) -> tensor<2x8xf8E4M3FN>
  %b = nn.cast %x {round_mode = #ascend.round_mode<nearest>} : (tensor<2x8xf32>) -> tensor<2x8xf8E8M0FNU>
  func.return %a, %b : tensor<2x8xf8E4M3FN>, tensor<2x8xf8E8M0FNU>
}"""
    x = np.array([[1e6, np.inf, -np.inf, 0.3, 500.0, np.nan, 3.0, 6.0]] * 2, np.float32)
    ref, sim, lowered = run_both(text, {"x": x})  # lowered IR round-trips through the parser
    for name in ("a", "b"):
        assert_same(sim[name], ref[name])
    assert ref["a"][0, 0] != ref["a"][0, 0] and ref["b"][0, 2] != ref["b"][0, 2]  # NaN: no saturation
    out = printed(lowered)
    assert "saturate = false" in out and 'round_mode = #ascend.round_mode<nearest>' in out
    assert parse(printed(parse(text))).is_structurally_equivalent(parse(text))


def test_cast_mode_on_another_type_is_rejected() -> None:
    with pytest.raises(Exception, match="saturate applies to float 8 results only"):
        parse("""func.func @main(%x: tensor<2xf32>) -> tensor<2xf16> {
  %a = nn.cast %x {saturate = false} : (tensor<2xf32>) -> tensor<2xf16>
  func.return %a : tensor<2xf16>
}""")


# ----------------------------------------------------------------------------------------------
# cost model
# ----------------------------------------------------------------------------------------------
def test_sub_byte_types_count_packed_bytes() -> None:
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    bytes_ = _check_cast(_cast_model(x, to=TensorProto.INT4), x).report["bytes"]
    assert bytes_["gm_read"] == 64 * 64 * 4
    assert bytes_["gm_write"] == 64 * 64 // 2  # two int4 per byte


def test_conversion_without_vconv_form_costs_several_passes() -> None:
    # f32 → f16 is one vconv form of the 910B; f32 → float8 has none and is emulated
    x = RNG.standard_normal((256, 256)).astype(np.float32)
    v16 = _check_cast(_cast_model(x, to=TensorProto.FLOAT16), x).report["pipe_busy"]["V"]
    v8 = _check_cast(_cast_model(x, to=TensorProto.FLOAT8E4M3FN), x).report["pipe_busy"]["V"]
    assert v8 > 4 * v16


def test_64bit_integer_arithmetic_is_emulated() -> None:
    # no 64-bit vector ALU on the 910B: 4 passes over twice the bytes of the 32-bit op
    a = RNG.integers(-1000, 1000, (256, 256))
    busy = {}
    for dtype in (np.int32, np.int64):
        x, y = a.astype(dtype), (a[::-1] | 1).astype(dtype)
        model = make_model([helper.make_node("Div", ["a", "b"], ["y"])], {"a": x, "b": y}, ["y"], opset=17)
        result = run_lowered(model, {"a": x, "b": y})
        assert_same(result.outputs["y"], run_onnxruntime(model, {"a": x, "b": y})["y"])
        busy[dtype] = result.report["pipe_busy"]["V"]
    assert busy[np.int64] > 6 * busy[np.int32]

