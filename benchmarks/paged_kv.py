"""Paged KV cache (`generate --kv-block-size`): what gathering K/V block by block through the
block table costs, on the LLaMA-2-7B-shaped decoder (benchmarks/kv_decoder_model.py, fp16, 910B2,
timing-only, weights not read), one decode step at cache 4096.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/paged_kv.py [--layers N] [--batch 1 8] [--write-results]

Prints per layout (contiguous; blocks of 16, 64, 128 positions): TPOT, the decode attention's
time (flash_attention + its KV-split combine), the cache write's, and each against the
contiguous layout. The attention's KV tile is Bc = 128 keys (choose-tiling's pick for this
shape), so a block of 16 is loaded in 8 DMAs per K and V tile, each after a block-table read
by the scalar unit (a GM read latency when it enters a new 64-B line of the table, a scalar-DCache
hit otherwise); 64 in 2, 128 in 1. `--layers`
(default 1) is the decoder's depth: every layer is the same, so one shows the per-layer cost.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kv_decoder_model  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)

from ascendir.api.generate import decode_step  # noqa: E402

TARGET = "ascend910b2"
CACHE = 4096
BLOCKS = (0, 16, 64, 128)  # 0: contiguous


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=1, help="decoder layers (default 1: every layer is the same)")
    ap.add_argument("--batch", type=int, nargs="+", default=[1], help="batch sizes (default 1)")
    results.add_flag(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = kv_decoder_model.build(Path(tmp) / "llama2-7b", "llama2-7b", args.layers)
        print(f"llama2-7b shape, {args.layers} layer(s), fp16, {TARGET}, timing-only, one decode step at cache {CACHE}; "
              f"load average {os.getloadavg()[0]:.1f} at start")
        print(f"{'batch':>5} {'layout':>12} {'TPOT ms':>9} {'attention ms':>12} {'vs contig':>9} {'cache write ms':>14} {'TPOT vs contig':>14}")
        for b in args.batch:
            base = None
            for bs in BLOCKS:
                s = decode_step(path, b, CACHE, TARGET, kv_block_size=bs)
                k = s["kinds"]
                att = sum(v for n, v in k.items() if n.startswith("flash"))
                write = sum(v for n, v in k.items() if "cache_append" in n)
                if base is None:
                    base = (s["tpot_s"], att)
                layout = f"block {bs}" if bs else "contiguous"
                print(f"{b:>5} {layout:>12} {s['tpot_s'] * 1e3:9.4f} {att * 1e3:12.4f} {att / base[1]:9.3f}x {write * 1e3:14.4f} "
                      f"{s['tpot_s'] / base[0]:13.3f}x")


if __name__ == "__main__":
    with results.recorded("paged_kv"):
        main()
