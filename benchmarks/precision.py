"""Precision policy: each corpus model compiled with --dtype fp32 / fp16 / bf16 and run on its
onnxruntime (fp32) reference inputs; per model the worst output error relative to the output's
largest |value|, max |got - want| / max |want|, next to the bound tests/test_precision.py holds
it to (8 units of roundoff: fp16 8 · 2^-11, bf16 8 · 2^-8; the test's docstring says why).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/precision.py [--models mlp_small,bert_small]

Models: tests/data/ (910B2, -O2, numerics). Integer outputs must be equal and are not listed.
A model the compiler refuses under a dtype (its clean error: e.g. float values cast to integers,
which need float32 arithmetic) shows `refused` in that column, its reason below the table.

MoE blocks (templates/moe_match.py): the router's top-k is a discrete choice, so a token whose
k-th and (k+1)-th expert scores are closer than the dtype's rounding can be routed to another
expert set than in fp32, and its output row then differs by far more than roundoff. -O2's
moe_gating kernel scores a softmax router as ops-transformer's MoeGatingTopKSoftmax does, the
softmax and the top-k in fp32 on the logits widened (fp16 and bf16), so the scores are not
rounded to the dtype before the top-k (two scores 0.5 % apart would round to one bf16 value,
which TopK's tie rule gives to the lower index); the logits themselves are the dtype's. For each
model and dtype with such tokens a line below the table gives the tokens routed to another set
(each block's TopK indices as the kernels compute them; api/moe_report.routing_by_block and
flipped_tokens, which `ascendir run --check-ort` uses too) and the error over the other tokens'
rows, which the bound holds; the last lines give the worst error both over every output and over
the tokens routed as in fp32.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

import math  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

from ascendir.api.moe_report import flipped_tokens as moe_flipped_tokens, routing_by_block  # noqa: E402
from ascendir.driver import compile_model  # noqa: E402
from ascendir.errors import AscendirError  # noqa: E402
from ascendir.frontends.onnx import import_onnx  # noqa: E402
from ascendir.hardware import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
DTYPES = ("fp32", "fp16", "bf16")
BOUND = {"fp16": 8 * 2.0**-11, "bf16": 8 * 2.0**-8}


@dataclass(frozen=True)
class Errors:
    """A model's error under a dtype: `worst`, max over float outputs of max |got - want| /
    max |want|; `flipped`, the tokens (rows of the MoE blocks' TopK) routed to another expert
    set than in fp32, and `tokens`, how many the blocks route (0 without a block); `unflipped`,
    `worst` over the output rows of the other tokens (= `worst` when none flipped)."""

    worst: float
    flipped: tuple[int, ...] = ()
    tokens: int = 0
    unflipped: float = 0.0


def _inputs(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(DATA / name / "reference.npz") as ref:
        inputs = {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}
        expected = {k.removeprefix("output:"): ref[k] for k in ref.files if k.startswith("output:")}
    return inputs, expected


def routing(name: str, dtype: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each MoE block's TopK indices [tokens, k] by block name, of the model imported under
    `dtype` on `inputs` (cast to its argument types); {} without a recognised block."""
    module, weights = import_onnx(DATA / name / "model.onnx", dtype=dtype)
    return routing_by_block(module, weights, inputs)


def flipped_tokens(name: str, dtype: str, inputs: dict[str, np.ndarray]) -> tuple[tuple[int, ...], int]:
    """(tokens whose expert set under `dtype` differs from fp32's in some MoE block, tokens a
    block routes); ((), 0) without a block."""
    want = routing(name, "fp32", inputs)
    if not want:
        return (), 0
    return moe_flipped_tokens(routing(name, dtype, inputs), want), next(iter(want.values())).shape[0]


def errors(name: str, dtype: str) -> Errors:
    """The model's `Errors` under `dtype` (910B2, -O2) on its onnxruntime reference."""
    inputs, expected = _inputs(name)
    hw = load_target("ascend910b2")
    module, weights = compile_model(DATA / name / "model.onnx", hw.name, dtype=dtype)
    outputs = simulate(module, weights, inputs, hw).outputs
    flipped, tokens = flipped_tokens(name, dtype, inputs) if dtype != "fp32" else ((), 0)
    worst = unflipped = 0.0
    for k, want in expected.items():
        if want.dtype.kind != "f":
            continue
        w = want.astype(np.float64)
        diff = np.abs(outputs[k].astype(np.float64) - w) / np.max(np.abs(w))
        worst = max(worst, float(np.max(diff)))
        if flipped:  # the output's rows are the routed tokens' (a MoE block's [.., tokens, hidden])
            if math.prod(want.shape[:-1]) != tokens:
                raise ValueError(f"{name} output {k} {list(want.shape)}: its rows are not the {tokens} routed tokens")
            diff = np.delete(diff.reshape(tokens, -1), list(flipped), axis=0)
        unflipped = max(unflipped, float(np.max(diff)) if diff.size else 0.0)
    return Errors(worst, flipped, tokens, unflipped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated (default: every model of tests/data)")
    results.add_flag(ap)
    args = ap.parse_args()
    names = args.models.split(",") if args.models else sorted(p.name for p in DATA.iterdir() if (p / "model.onnx").exists())
    print(f"{'model':36} " + " ".join(f"{d:>9}" for d in DTYPES) + "   (max |error| / max |reference|, 910B2, -O2)")
    refused = []
    worst = dict.fromkeys(BOUND, 0.0)
    unflipped = dict.fromkeys(BOUND, 0.0)
    flips = []
    for name in names:
        errs: dict[str, Errors | None] = {}
        for d in DTYPES:
            try:
                errs[d] = errors(name, d)
            except AscendirError as e:
                errs[d] = None
                refused.append(f"{name}: {e}")
        for d in BOUND:
            if errs[d] is not None:
                worst[d] = max(worst[d], errs[d].worst)
                unflipped[d] = max(unflipped[d], errs[d].unflipped)
                if errs[d].flipped:
                    flips.append((name, d, errs[d]))
        print(f"{name:36} " + " ".join("  refused" if errs[d] is None else f"{errs[d].worst:9.1e}" for d in DTYPES), flush=True)
    for line in refused:
        print(f"refused: {line}")
    for name, d, e in flips:
        u = BOUND[d] / 8
        print(f"routing: {name} {d}: {len(e.flipped)} of {e.tokens} tokens routed to another expert set than in fp32 "
              f"(token{'s' if len(e.flipped) > 1 else ''} {', '.join(map(str, e.flipped))}: its router's logits rounded to {d}); "
              f"the other tokens {e.unflipped:.1e} = {e.unflipped / u:.1f} units: "
              + ("within" if e.unflipped <= BOUND[d] else "EXCEEDED"))
    for d, b in BOUND.items():
        line = (f"{d}: worst {worst[d]:.1e} = {worst[d] / (b / 8):.1f} units of roundoff; bound {b:.1e} (8 units): "
                + ("within" if worst[d] <= b else "EXCEEDED"))
        if unflipped[d] != worst[d]:
            line += (f"; over the tokens routed as in fp32 {unflipped[d]:.1e} = {unflipped[d] / (b / 8):.1f} units: "
                     + ("within" if unflipped[d] <= b else "EXCEEDED"))
        print(line)


if __name__ == "__main__":
    with results.recorded("precision"):
        main()
