#!/usr/bin/env python3
"""Build the small quantized test models of tests/data/quant from corpus models already there,
with onnxruntime's own quantizers, as users quantize models:

* mlp_qdq         quantize_static, QDQ format (uint8 activations, int8 per-channel weights)
* mlp_nbits4      MatMulNBitsQuantizer (com.microsoft MatMulNBits, 4-bit, block 32, asymmetric)
                  of mlp_small with its Gemms written as MatMul + Add (the quantizer takes MatMuls)
* resnet_qdq      quantize_static, QDQ format, of resnet_small (Conv / Gemm)
* llama_dynamic   quantize_dynamic of llama_small: uint8 activations by DynamicQuantizeLinear,
                  int8 weights, MatMulInteger for every MatMul of the decoder and lm_head
* cnn_dynamic     quantize_dynamic of families/convnext_small (ConvInteger, MatMulInteger)
* transformer_qdq quantize_static, QDQ format, of families/bloom_small

Each gets reference.npz: the source model's inputs and onnxruntime's outputs of the quantized
model (CPU execution provider, graph optimizations off, so ORT runs the ops as written).

    /work/.venv-corpus/bin/python scripts/build_quant_models.py [OUT [NAME...]]   (default tests/data/quant, all)

Needs onnxruntime's quantization tools (onnx_ir: the corpus venv); the product and its tests
only read the results.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _reference(name: str) -> tuple[dict[str, np.ndarray], list[str]]:
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        outputs = [k.removeprefix("output:") for k in ref.files if k.startswith("output:")]
    return inputs, outputs


class _Reader:
    """Calibration data for quantize_static: the reference inputs and 7 seeded variations."""

    def __init__(self, inputs: dict[str, np.ndarray]):
        rng = np.random.default_rng(0)
        self.batches = [inputs] + [
            {k: (v + rng.standard_normal(v.shape).astype(v.dtype) * 0.1 if v.dtype.kind == "f" else v) for k, v in inputs.items()}
            for _ in range(7)
        ]

    def get_next(self):
        return self.batches.pop() if self.batches else None

    def rewind(self):  # onnxruntime >= 1.20 calls it
        pass


def _run_ort(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


def _nbits(src: Path, dst: Path, symmetric: bool) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=symmetric, bits=4)
    q = MatMulNBitsQuantizer(onnx.load(str(src)), algo_config=cfg)
    q.process()
    q.model.save_model_to_file(str(dst), False)


def _gemm_as_matmul(path: Path) -> None:
    """Gemm(x, W, b) with alpha = beta = 1 as MatMul(x, W or W^T) + b, in place."""
    from onnx import helper, numpy_helper

    m = onnx.load(str(path))
    inits = {t.name: t for t in m.graph.initializer}
    nodes = []
    for n in m.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type != "Gemm" or attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
            nodes.append(n)
            continue
        w = n.input[1]
        if attrs.get("transB", 0):
            arr = numpy_helper.to_array(inits[w]).T.copy()
            inits[w].CopyFrom(numpy_helper.from_array(arr, w))
        mm = n.output[0] + "_mm"
        nodes.append(helper.make_node("MatMul", [n.input[0], w], [mm], name=n.name + "_matmul"))
        nodes.append(helper.make_node("Add", [mm, n.input[2]], [n.output[0]], name=n.name + "_bias"))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.save(m, str(path))


def build(out: Path) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    jobs = {
        "mlp_qdq": ("mlp_small", "static"),
        "mlp_nbits4": ("mlp_small", "nbits_asym"),
        "resnet_qdq": ("resnet_small", "static"),
        "llama_dynamic": ("llama_small", "dynamic"),
        "cnn_dynamic": ("families/convnext_small", "dynamic"),
        "transformer_qdq": ("families/bloom_small", "static"),
    }
    if len(sys.argv) > 2:  # only these
        jobs = {k: v for k, v in jobs.items() if k in sys.argv[2:]}
    for name, (source, how) in jobs.items():
        src = DATA / source / "model.onnx"
        inputs, _ = _reference(source)
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        dst = d / "model.onnx"
        with tempfile.TemporaryDirectory() as tmp:
            pre = Path(tmp) / "pre.onnx"
            quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
            if how == "dynamic":
                quantize_dynamic(str(pre), str(dst), weight_type=QuantType.QInt8)
            elif how == "static":
                quantize_static(
                    str(pre), str(dst), _Reader(inputs), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax,
                )
            else:
                _gemm_as_matmul(pre)
                _nbits(pre, dst, symmetric=how == "nbits_sym")
        outputs = _run_ort(dst, inputs)
        np.savez(d / "reference.npz", **{f"input:{k}": v for k, v in inputs.items()},
                 **{f"output:{k}": v for k, v in outputs.items()})
        ops = sorted({(n.domain + "." if n.domain else "") + n.op_type for n in onnx.load(str(dst)).graph.node})
        print(f"{name}: {dst.stat().st_size / 1024:.0f} KiB, ops {', '.join(ops)}")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA / "quant")
