"""A representative sample of the ONNX backend node tests through import → lower → simulate
(the full run is benchmarks/conformance.py, which writes docs/onnx-support.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
conformance = pytest.importorskip("conformance")

if not conformance.LISTER.exists():
    pytest.skip(f"{conformance.LISTER} not found (set ASCENDIR_SHARED)", allow_module_level=True)

# One or two cases per op family the corpus models need; each must pass.
SAMPLE = [
    "test_add_bcast", "test_matmul_3d", "test_gemm_default_no_bias", "test_relu", "test_sigmoid",
    "test_softmax_axis_1", "test_reduce_mean_default_axes_keepdims_random",
    "test_transpose_all_permutations_3", "test_concat_3d_axis_negative_1", "test_gather_0", "test_where_example",
    "test_basic_conv_with_padding", "test_conv_with_strides_and_asymmetric_padding", "test_maxpool_2d_pads",
    "test_averagepool_2d_pads", "test_globalaveragepool", "test_top_k",
    "test_cast_FLOAT_to_FLOAT16", "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN", "test_castlike_INT4_to_FLOAT",
    "test_div_uint64",
    # optional outputs, runtime operands, IEEE edge cases, 3-D windows
    "test_layer_normalization_3d_axis1_epsilon", "test_batchnorm_example_training_mode", "test_clip_default_min",
    "test_mod_mixed_sign_float32", "test_mod_float_edge_cases_fmod_0_float32", "test_reduce_max_empty_set",
    "test_maxpool_3d_dilations", "test_averagepool_3d_dilations_small", "test_maxpool_with_argmax_2d_precomputed_strides",
    "test_training_dropout_zero_ratio_mask",
    # ops vision / detection / OCR models need (issue 19)
    "test_resize_upsample_scales_linear", "test_reflect_pad", "test_hardswish", "test_hardsigmoid_example",
    "test_convtranspose_pads", "test_cumsum_2d_axis_1", "test_gather_elements_negative_indices", "test_scatternd_add",
    "test_reduce_l2_default_axes_keepdims_example", "test_reduce_log_sum_exp_empty_set", "test_if",
    "test_lstm_with_peepholes", "test_gru_seq_length", "test_simple_rnn_bidirectional", "test_loop11", "test_scan9_sum",
    # quantized ops (issue 19): integer results exactly
    "test_quantizelinear_blocked_asymmetric", "test_dequantizelinear_int4", "test_dynamicquantizelinear",
    "test_matmulinteger", "test_qlinearmatmul_3D_uint8_float32", "test_convinteger_with_padding", "test_qlinearconv",
    # the rest of onnx-mlir's CPU ops (issue 19 item 1)
    "test_atan_example", "test_acos", "test_bitwise_xor_i16_3d", "test_compress_0", "test_dft_irfft",
    "test_einsum_batch_diagonal", "test_hardmax_one_hot", "test_lrn", "test_nonmaxsuppression_center_point_box_format",
    "test_upsample_nearest", "test_unique_sorted_with_axis", "test_reversesequence_batch", "test_round",
    "test_shrink_soft",
]


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in conformance.node_cases()}


@pytest.mark.parametrize("name", SAMPLE)
def test_node_case_passes(cases, name: str) -> None:
    if name not in cases:
        pytest.skip(f"{name} is not in the installed onnx's node tests")
    outcome = conformance.run_case(cases[name])
    assert outcome.passed, outcome.reason
