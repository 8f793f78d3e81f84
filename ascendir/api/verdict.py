"""The verdict of a run: its outputs against expected ones, PASS or FAIL per output.

Expected outputs come from one reference: `--check-ort` (onnxruntime on the ONNX model, same
inputs), `--expected FILE.npz`, or the `output:` keys of `--inputs` (as the shipped
`reference.npz` files hold them).

Tolerance, per output (err = |got - expected|, element-wise, in float64):
* float outputs of an fp32 run: err <= 1e-4 + 1e-3 * |expected| (numpy's allclose form; the
  project's end-to-end tolerance against onnxruntime, tests/test_models_e2e.py);
* float outputs of an fp16 / bf16 run (`--dtype`, or outputs of that type): err <= 8 u * max
  |expected|, u the unit roundoff (2^-11 fp16, 2^-8 bf16): inputs, weights and activations are
  each rounded once, accumulation and statistics are f32 (tests/test_precision.py argues the 8);
* integer and boolean outputs: equal.
NaN passes only where NaN is expected, an infinity only where the same one is.

Reported per output: max abs err = max err; max rel err = max err / max |expected| (relative to
the output's largest magnitude, stable where expected values cross zero).

A 16-bit --check-ort FAIL of a MoE model says which tokens its routers send to another expert
set than in fp32 and whether they explain it: `explain_routing_flip`, "FAIL (routing flip)".
Another --check-ort FAIL says whether onnxruntime's optimised graph computes what the run did:
`explain_by_optimised`, "FAIL (as onnxruntime optimised)".
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ascendir.errors import AscendirError

FP32_RTOL, FP32_ATOL = 1e-3, 1e-4
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}
LOW_PRECISION = {"fp16": "float16", "bf16": "bfloat16"}  # --dtype → numpy dtype name


def tolerance(got_dtype: np.dtype, precision: str, want: np.ndarray) -> tuple[float, float] | None:
    """(rtol, atol) of the verdict for an output of `got_dtype` in a `precision` run (fp32, fp16,
    bf16) against `want`; None: must be equal (integers, booleans)."""
    if got_dtype.kind not in "fV" and got_dtype.name != "bfloat16":
        return None
    low = got_dtype.name if got_dtype.name in UNIT_ROUNDOFF else LOW_PRECISION.get(precision)
    if low is None:
        return FP32_RTOL, FP32_ATOL
    w = np.abs(want.astype(np.float64))
    w = w[np.isfinite(w)]
    scale = float(w.max()) if w.size and w.max() > 0 else 1.0
    return 0.0, 8 * UNIT_ROUNDOFF[low] * scale


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray], precision: str, reference: str) -> dict:
    """The verdict of outputs `got` against `want` (the outputs `want` names; every one must be
    in `got`) as a JSON-ready dict: {"status": "pass"|"fail", "reference", "outputs": [{"name",
    "status", "shape", "dtype", "max_abs_err", "max_rel_err", "rtol", "atol", "mismatched",
    "size", "nonfinite_mismatched", ("reason")}]}; explain_routing_flip may add "cause" and
    an output's "routing_flip"."""
    rows = []
    for name, w in want.items():
        g = got[name]
        row: dict = {"name": name, "shape": list(g.shape), "dtype": str(g.dtype), "size": int(g.size)}
        if g.shape != w.shape:
            rows.append({**row, "status": "fail", "reason": f"shape {list(g.shape)}, expected {list(w.shape)}"})
            continue
        rtol, atol = _tol(g, w, precision)
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        err, ok = _within(g64, w64, rtol, atol)
        finite = np.isfinite(err)
        max_abs = float(err[finite].max()) if finite.any() else 0.0
        big = np.abs(w64[np.isfinite(w64)])
        peak = float(big.max()) if big.size else 0.0
        bad = int(np.count_nonzero(~ok))
        rows.append({**row, "status": "pass" if bad == 0 else "fail", "max_abs_err": max_abs,
                     "max_rel_err": max_abs / peak if peak else (0.0 if max_abs == 0 else float(max_abs)),
                     "rtol": rtol, "atol": atol, "mismatched": bad,
                     # NaN / inf where the other side differs: no finite error to show for them
                     "nonfinite_mismatched": int(np.count_nonzero(~ok & ~finite))})
    status = "pass" if all(r["status"] == "pass" for r in rows) else "fail"
    return {"status": status, "reference": reference, "outputs": rows}


def _tol(got: np.ndarray, want: np.ndarray, precision: str) -> tuple[float, float]:
    """(rtol, atol) of `compare` for one output; (0, 0): must be equal."""
    tol = tolerance(got.dtype, precision, want)
    return tol if tol is not None else (0.0, 0.0)


def _within(g64: np.ndarray, w64: np.ndarray, rtol: float, atol: float) -> tuple[np.ndarray, np.ndarray]:
    """(|g64 - w64|, whether each element is within atol + rtol·|w64|), float64 arrays."""
    with np.errstate(invalid="ignore"):
        err = np.abs(g64 - w64)
        same = (g64 == w64) | (np.isnan(g64) & np.isnan(w64))
        # an infinity passes only where the same one is: atol + rtol·inf would take any value
        return err, same | (np.isfinite(w64) & (err <= atol + rtol * np.abs(w64)))


def explain_routing_flip(verdict: dict, got: dict[str, np.ndarray], want: dict[str, np.ndarray], precision: str,
                         flipped: tuple[int, ...], tokens: int) -> None:
    """Say in `verdict` (compare's, of a 16-bit run against an fp32 reference) how much of a FAIL
    the MoE routing flips explain: `flipped`, the tokens the run's kernels route to another expert
    set than fp32 does (moe_report.flipped_tokens), of `tokens` routed. A failing output whose
    rows ([..., hidden], prod of the leading dims = `tokens`) are the routed tokens gets
    `routing_flip`: {"tokens", "of", "dtype", "other_max_abs" (max |got - want| over the other
    tokens' rows), "atol", "rtol", "within" (every element of those rows within tolerance)}.
    The verdict gets "cause": "routing flip" when it FAILs and every element beyond tolerance
    is in a flipped token's row: its status stays "fail" (the outputs do differ), the cause
    tells that failure from a kernel's error. Does nothing without flipped tokens."""
    if not flipped or verdict["status"] != "fail":
        return
    explained = True
    for r in verdict["outputs"]:
        if r["status"] != "fail":
            continue
        g, w = got[r["name"]], want[r["name"]]
        if "reason" in r or g.ndim < 2 or int(np.prod(g.shape[:-1])) != tokens:
            explained = False  # its rows are not the routed tokens: nothing to attribute
            continue
        keep = np.setdiff1d(np.arange(tokens), flipped)
        g64 = g.astype(np.float64).reshape(tokens, -1)[keep]
        w64 = w.astype(np.float64).reshape(tokens, -1)[keep]
        err, ok = _within(g64, w64, r["rtol"], r["atol"])
        finite = err[np.isfinite(err)]
        within = bool(ok.all())
        r["routing_flip"] = {"tokens": list(flipped), "of": tokens, "dtype": precision,
                             "other_max_abs": float(finite.max()) if finite.size else 0.0,
                             "atol": r["atol"], "rtol": r["rtol"], "within": within}
        explained &= within
    if explained:
        verdict["cause"] = "routing flip"


def explain_by_optimised(verdict: dict, got: dict[str, np.ndarray], optimised: dict[str, np.ndarray], precision: str) -> None:
    """Say in a FAILing --check-ort `verdict` (compare's) whether onnxruntime's own optimised graph
    (`optimised`: onnxruntime_outputs(..., optimised=True)) computes what the run did: fused
    kernels (attention or an RMSNorm recomposed from their nodes, QDQ pairs as QLinear kernels) round differently
    from the node-by-node graph, and a quantized model's DynamicQuantizeLinear / QuantizeLinear can
    turn an ulp into a quantization step (llama_dynamic at -O1: 3.4e-3 in the logits, onnxruntime's
    optimised graph the same). Adds "ort_optimised": {"status", "max_abs_err"} (the run's outputs
    against the optimised ones, same tolerances) and, when those agree, "cause": "as onnxruntime
    optimised"; the status stays "fail" (the outputs do differ from the ONNX semantics). Does
    nothing on a PASS or a FAIL whose cause is already known."""
    if verdict["status"] != "fail" or verdict.get("cause"):
        return
    names = [r["name"] for r in verdict["outputs"]]
    agree = compare(got, {n: optimised[n] for n in names}, precision, "onnxruntime (ORT_ENABLE_ALL)")
    worst = max((r["max_abs_err"] for r in agree["outputs"] if "max_abs_err" in r), default=0.0)
    verdict["ort_optimised"] = {"status": agree["status"], "max_abs_err": float(worst)}
    if agree["status"] == "pass":
        verdict["cause"] = "as onnxruntime optimised"


def load_expected(path: Path, names: list[str], what: str, required: bool) -> dict[str, np.ndarray]:
    """Expected outputs from an .npz: keys `output:NAME` (and, when not `what` == "inputs", bare
    output names). Keys of other outputs are an error; `required`: at least one.

    Raises:
        AscendirError: unreadable file, a key naming no graph output, none found when required.
    """
    # only the outputs' entries are decompressed: the inputs' are checked for size (a zip bomb)
    # before they are read (run_cmd._check_entry_sizes)
    data = read_npz(path, what, keep=lambda k: k.startswith("output:") or (what != "inputs" and not k.startswith("input:")))
    keys = list(data)
    arrays = {}
    for k in keys:
        if k.startswith("output:"):
            arrays[k.removeprefix("output:")] = data[k]
        elif what != "inputs" and not k.startswith("input:"):
            arrays[k] = data[k]
    unknown = [n for n in arrays if n not in names]
    if unknown:
        raise AscendirError(f"{what} {path}: expected output(s) {', '.join(unknown)} name no graph output (outputs: {', '.join(names)})")
    if required and not arrays:
        raise AscendirError(f"{what} {path} holds no outputs (keys: {', '.join(keys) or 'none'})")
    return arrays


def read_npz(path: Path, what: str, keep=None) -> dict[str, np.ndarray]:
    """Every array of the .npz `path` (no pickles), or those whose key `keep(key)` accepts (the
    others are not decompressed).

    Raises:
        AscendirError: unreadable, or not an .npz archive (an .npy, text, a broken zip).
    """
    import zipfile

    if path.is_file() and not zipfile.is_zipfile(path):
        raise AscendirError(f"cannot read {what} {path}: not an .npz archive (write it with numpy.savez)")
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files if keep is None or keep(k)}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise AscendirError(f"cannot read {what} {path}: {' '.join(str(e).split())}") from None


# ONNX ops whose u8 x s8 products onnxruntime's CPU kernels may saturate (`onnxruntime_u8s8_exact`)
U8S8_OPS = frozenset({"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv"})


@functools.cache
def onnxruntime_u8s8_exact() -> bool:
    """Whether onnxruntime's u8 x s8 integer kernels (MatMulInteger, ConvInteger, QLinearMatMul,
    QLinearConv, DynamicQuantizeLinear + MatMulInteger) are exact on this CPU. On x86-64 with AVX2
    but no VNNI they use VPMADDUBSW, which adds pairs of u8 x s8 products in int16 with
    saturation (onnxruntime's quantization docs, "When and why do I need to try U8U8?"): there
    255 * 127 + 255 * 127 = 64770 comes back as 32767, and a reference of such a model may be
    wrong where ascendir's int32 accumulation is exact."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 2]),
                               helper.make_tensor_value_info("b", TensorProto.INT8, [2, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"a": np.full((1, 2), 255, np.uint8), "b": np.full((2, 1), 127, np.int8)})[0]
    return int(y[0, 0]) == 64770


def note_u8s8(verdict: dict, model: Path) -> None:
    """Say in a FAILing --check-ort `verdict` that onnxruntime's reference may be the wrong one:
    the ONNX `model` has U8S8_OPS nodes and onnxruntime's u8 x s8 kernels saturate on this CPU
    (`onnxruntime_u8s8_exact`). Adds "ort_u8s8_nodes": the nodes' names (op type and name, or
    first output). The status stays "fail": which side is off is not decided here (onnx.reference
    computes those ops exactly, at Python speed)."""
    if verdict["status"] != "fail" or verdict.get("cause") or onnxruntime_u8s8_exact():
        return
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    nodes = [f"{n.op_type} '{n.name or n.output[0]}'" for n in graph.node if n.op_type in U8S8_OPS]
    if nodes:
        verdict["ort_u8s8_nodes"] = nodes


def onnxruntime_outputs(model: Path, feeds: dict[str, np.ndarray], optimised: bool = False) -> dict[str, np.ndarray]:
    """The outputs onnxruntime (CPU, graph optimisations off: the ONNX semantics of each node;
    `optimised`: all on, ORT_ENABLE_ALL, its fused kernels) computes for the ONNX `model` on
    `feeds`; a feed is cast to
    the type the model declares (an fp16 run's inputs go back to the model's f32, exactly). A
    sequence input or output is its elements, keyed `name[i]` as ascendir's @main names them.

    Raises:
        AscendirError: onnxruntime missing, or it cannot load or run the model.
    """
    try:
        import onnxruntime as ort
    except ImportError:
        raise AscendirError("--check-ort needs onnxruntime (pip install onnxruntime)") from None
    from ascendir.frontends.onnx.values import element_names, with_elements
    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}
    try:
        # the graph as ONNX defines it: onnxruntime's default optimisations fuse QDQ pairs into
        # QLinear* / MatMulIntegerToFloat kernels that requantise differently (one int8 step off
        # on transformer_qdq's random inputs: 4e-3 in the logits), a reference of their own
        options = ort.SessionOptions()
        level = ort.GraphOptimizationLevel
        options.graph_optimization_level = level.ORT_ENABLE_ALL if optimised else level.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        ins = {}
        for i in sess.get_inputs():
            if i.type.startswith("seq("):  # a sequence: its elements are fed as name[0], name[1], ...
                ins[i.name] = [feeds[n] for n in element_names(i.name, feeds)]
                continue
            arr = feeds[i.name]
            want = types.get(i.type)
            ins[i.name] = arr.astype(want) if want is not None and arr.dtype != want else arr
        outs = sess.run(None, ins)
    except Exception as e:  # noqa: BLE001 - onnxruntime's own errors: say which, on one line
        raise AscendirError(f"onnxruntime cannot run {model}: {' '.join(str(e).split())[:300]}") from None
    return with_elements({o.name: v for o, v in zip(sess.get_outputs(), outs)})


_TOKENS_SHOWN = 8  # a routing-flip note lists this many tokens, then "..."


def lines(verdict: dict) -> list[str]:
    """The verdict as text: a headline, then one line per output."""
    n = len(verdict["outputs"])
    cause = f" ({verdict['cause']})" if verdict.get("cause") else ""
    head = f"{verdict['status'].upper()}{cause}: {n} output{'s' if n != 1 else ''} against {verdict['reference']}"
    out = [head]
    for r in verdict["outputs"]:
        if "reason" in r:
            out.append(f"  {r['status'].upper()} {r['name']}: {r['reason']}")
            continue
        if r["rtol"] == 0 and r["atol"] == 0:
            tol = "equal"
        elif r["rtol"] == 0:
            tol = f"tol {r['atol']:.1e}"
        else:
            tol = f"tol {r['atol']:.0e} + {r['rtol']:.0e}·|exp|"
        miss = f", {r['mismatched']:,} of {r['size']:,} beyond" if r["mismatched"] else ""
        if r.get("nonfinite_mismatched"):
            miss += f", {r['nonfinite_mismatched']:,} NaN / inf where the other has another value"
        out.append(f"  {r['status'].upper()} {r['name']}: max abs {r['max_abs_err']:.1e}, max rel {r['max_rel_err']:.1e} "
                   f"({tol}{miss})")
        f = r.get("routing_flip")
        if f:
            shown = ", ".join(map(str, f["tokens"][:_TOKENS_SHOWN])) + (", ..." if len(f["tokens"]) > _TOKENS_SHOWN else "")
            other = f"tol {f['atol']:.1e}" if f["rtol"] == 0 else f"tol {f['atol']:.0e} + {f['rtol']:.0e}·|exp|"
            out.append(f"  note: {len(f['tokens'])} of {f['of']} tokens routed to another expert set than in fp32 "
                       f"(scores tied within {f['dtype']} rounding: token{'s' if len(f['tokens']) > 1 else ''} {shown}); "
                       f"the other tokens: max abs {f['other_max_abs']:.1e} ({other}): {'within' if f['within'] else 'beyond'}")
    u8s8 = verdict.get("ort_u8s8_nodes")
    if u8s8:
        shown = ", ".join(u8s8[:3]) + (f" and {len(u8s8) - 3} more" if len(u8s8) > 3 else "")
        out.append(f"  note: onnxruntime's u8 x s8 kernels saturate on this CPU (AVX2 without VNNI: int16 pair sums), so "
                   f"its reference may be wrong after {shown}, where this run sums in int32 exactly")
    o = verdict.get("ort_optimised")
    if o and o["status"] == "pass":
        out.append(f"  note: onnxruntime with its graph optimisations on (ORT_ENABLE_ALL) computes these outputs "
                   f"(max abs {o['max_abs_err']:.1e} from them): its fused kernels round as this run's do, away from "
                   f"the node-by-node graph")
    return out
