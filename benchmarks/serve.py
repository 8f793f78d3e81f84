"""Simulated LLM serving on 910B2 (fp16): LLaMA-2-7B- and Qwen2-7B-shaped decoders with their KV
cache (benchmarks/kv_decoder_model.py, weights never read: --shape-only), through
ascendir.api.generate.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/serve.py [--quick] [--write-results]

Prints:
1. TTFT (the prefill) for prompts of 128 / 2048 / 8192 tokens, batch 1.
2. TPOT (one decode step, cache in place) at batch 1 / 8 / 32 / 128 and cache lengths 512 /
   4096, beside the HBM roofline (weights + KV read + new rows written) / HBM bandwidth, and
   the bytes the simulation moved; a batch whose cache exceeds the 64 GB HBM says so.
3. The cache in place (cache-append) against the graph's Concat copy of the past.
4. Where the gap between the simulated TPOT and the roofline goes: time per kernel kind.
5. `generate` P = 2048, N = 256, timing-only, LLaMA-2-7B-shaped: its wall and CPU time (goal
   ≤ 60 s on a 2-core machine), the machine's load before and after, and how many decode steps
   it simulated.
6. Tensor parallelism (`generate --tp N` on the Atlas 800 A2 HCCS mesh): TTFT (prompt 2048) and
   TPOT (batch 1, cache 4096) per TP degree; bytes and roofline per device.
`--quick` leaves out the 8192 prompt and batch 128.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kv_decoder_model  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py: --write-results)

from ascendir.api.generate import decode_step, generate  # noqa: E402
from ascendir.errors import AscendirError  # noqa: E402

TARGET = "ascend910b2"


def ms(s: float) -> str:
    return f"{s * 1e3:8.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="leave out the 8192 prompt and batch 128")
    ap.add_argument("--layers", type=int, default=None, help="decoder layers (default: the model's; fewer for a smoke run)")
    results.add_flag(ap)
    args = ap.parse_args()
    prompts = (128, 2048) if args.quick else (128, 2048, 8192)
    batches = (1, 8, 32) if args.quick else (1, 8, 32, 128)
    with tempfile.TemporaryDirectory() as tmp:
        models = {name: kv_decoder_model.build(Path(tmp) / name, name, args.layers) for name in kv_decoder_model.SHAPES}
        print(f"models: {', '.join(f'{n} ({s})' for n, s in kv_decoder_model.SHAPES.items())}; fp16, {TARGET}, "
              "timing-only, weights not read (--shape-only)")

        print("\n1. TTFT (prefill, batch 1), ms")
        print(f"{'model':<10} " + " ".join(f"{'P=' + str(p):>9}" for p in prompts))
        for name, path in models.items():
            row = []
            for p in prompts:
                g = generate(path, p, 1, 1, None, TARGET, "fp32", True, True)
                row.append(ms(g.report["ttft_s"]))
            print(f"{name:<10} " + " ".join(f"{c:>9}" for c in row))

        print("\n2. TPOT (one decode step, cache in place), ms: simulated / roofline, and simulated HBM bytes / least")
        print(f"{'model':<10} {'batch':>5} {'cache':>6} {'TPOT':>9} {'roofline':>9} {'sim/roof':>8} {'bytes/least':>11} {'tokens/s':>9}  bound")
        steps = {}
        for name, path in models.items():
            for b in batches:
                for c in (512, 4096):
                    try:
                        s = decode_step(path, b, c, TARGET)
                    except AscendirError as e:
                        print(f"{name:<10} {b:>5} {c:>6}  does not fit: {str(e).split(':')[-1].strip()[:90]}")
                        continue
                    steps[name, b, c] = s
                    least = s["weights_bytes"] + s["kv_bytes"]
                    bound = ", ".join(f"{r} {100 * x:.0f}%" for r, x in s["bound"][:2])
                    print(f"{name:<10} {b:>5} {c:>6} {ms(s['tpot_s'])} {ms(s['roofline_s'])} {s['tpot_s'] / s['roofline_s']:8.2f} "
                          f"{s['hbm_bytes'] / least:11.2f} {b / s['tpot_s']:9.0f}  {bound}")

        print("\n3. Cache in place vs the graph's Concat copy of the past (one decode step), ms")
        print(f"{'model':<10} {'batch':>5} {'cache':>6} {'in place':>9} {'concat':>9} {'saved':>7}")
        for name, path in models.items():
            for b, c in ((1, 4096), (8, 4096)):
                if (name, b, c) not in steps:
                    continue
                cat = decode_step(path, b, c, TARGET, in_place=False)
                ip = steps[name, b, c]
                print(f"{name:<10} {b:>5} {c:>6} {ms(ip['tpot_s'])} {ms(cat['tpot_s'])} {100 * (1 - ip['tpot_s'] / cat['tpot_s']):6.1f}%")

        print("\n4. Where the time beyond the roofline goes (batch 1 and 32, cache 4096): ms per kernel kind")
        for key in ((n, b, 4096) for n in models for b in (1, 32)):
            if key not in steps:
                continue
            s = steps[key]
            top = sorted(s["kinds"].items(), key=lambda kv: -kv[1])[:6]
            print(f"{key[0]:<10} batch {key[1]:>3}: TPOT {ms(s['tpot_s']).strip()} vs roofline {ms(s['roofline_s']).strip()}: "
                  + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in top))

        print("\n5. generate llama2-7b, P = 2048, N = 256, batch 1, timing-only (goal: <= 60 s wall)")
        load0 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        g = generate(models["llama2-7b"], 2048, 256, 1, None, TARGET, "fp32", True, True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        r = g.report
        print(f"wall {wall:.1f} s, CPU {cpu:.1f} s (wall exceeds CPU when other work shares the cores: load average "
              f"{load0:.1f} before, {os.getloadavg()[0]:.1f} after); {len(r['steps']['simulated_cache_len'])} of {len(r['tpot_s'])} decode steps simulated, "
              f"{r['steps']['interpolated']} interpolated; TTFT {ms(r['ttft_s']).strip()} ms, TPOT mean "
              f"{ms(r['tpot_mean_s']).strip()} ms (first {ms(r['tpot_s'][0]).strip()}, last {ms(r['tpot_s'][-1]).strip()}), "
              f"roofline {ms(r['roofline_tpot_mean_s']).strip()} ms, {r['tokens_per_s']:.1f} tokens/s")

        print("\n6. Tensor parallel (generate --tp N, atlas800-a2): TTFT (P = 2048, batch 1) and TPOT (batch 1, cache 4096), ms")
        print(f"{'model':<10} {'tp':>3} {'TTFT':>9} {'TPOT':>9} {'roofline':>9} {'sim/roof':>8}")
        for name, path in models.items():
            for tp in (1, 2, 4):
                try:
                    ttft = generate(path, 2048, 1, 1, None, TARGET, "fp32", True, True, tp=tp).report["ttft_s"]
                    s = decode_step(path, 1, 4096, TARGET, tp=tp)
                except AscendirError as e:
                    print(f"{name:<10} {tp:>3}  {str(e)[:110]}")
                    continue
                print(f"{name:<10} {tp:>3} {ms(ttft)} {ms(s['tpot_s'])} {ms(s['roofline_s'])} {s['tpot_s'] / s['roofline_s']:8.2f}")


if __name__ == "__main__":
    with results.recorded("serve"):
        main()
