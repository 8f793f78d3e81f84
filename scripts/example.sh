#!/usr/bin/env bash
# Quick start 1: install, compile the bundled LLaMA example for Ascend 910B2 and simulate it; the
# first lines are the verdict: its outputs against the onnxruntime outputs in reference.npz.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export OPENBLAS_NUM_THREADS=1
exec .venv/bin/ascendir run examples/llama_small/model.onnx --inputs examples/llama_small/reference.npz "$@"
