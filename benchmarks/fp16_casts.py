"""fp16 <-> float32 conversions of the numerics: ns per element of numpy's cast against
interpreter/exec/ort_cast.py (onnxruntime's Cast) on the array shapes the 7B layer of
numerics_speed.py converts, process CPU time, minimum over --repeat runs (the machine may be
shared), caches warm (the layer's own conversions run at ~0.9 ns per element, its work buffers
and weights out of cache: memory bandwidth bounds them).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fp16_casts.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ascendir.interpreter.exec.ort_cast import narrow_into, widen_into


def cpu_ns(fn, n: int, repeat: int) -> float:
    """Least process CPU time of `fn()` over `repeat` runs (after one untimed), per element of `n`."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(10):
            fn()
        best = min(best, (time.process_time() - t) / 10)
    return best / n * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((4096, 11008)) * 0.02).astype(np.float16)
    rows = (rng.standard_normal(1 << 20)).astype(np.float16)
    cases = [  # (name, fp16 -> f32 or f32 -> fp16 destination, source)
        ("fp16 -> f32, 1 M contiguous (GM copy chunks)", np.empty(1 << 20, np.float32), rows),
        ("fp16 -> f32, 4096 x 1024 column slice of 4096 x 11008", np.empty((4096, 1024), np.float32), weight[:, 2048:3072]),
        ("f32 -> fp16, 64 x 128 tile", np.empty((64, 128), np.float16), rng.standard_normal((64, 128)).astype(np.float32)),
        ("f32 -> fp16, 256 x 64 of 256 x 128 into a GM tile", np.empty((512, 4096), np.float16)[:256, 64:128],
         rng.standard_normal((256, 128)).astype(np.float32)[:, :64]),
        ("f32 -> fp16, 1 M contiguous", np.empty(1 << 20, np.float16), rng.standard_normal(1 << 20).astype(np.float32)),
    ]
    print(f"{'conversion':<54} {'numpy ns/el':>11} {'ORT ns/el':>10}")
    for name, dst, src in cases:
        ours = (lambda: widen_into(dst, src)) if dst.dtype == np.float32 else (lambda: narrow_into(dst, src))
        base = cpu_ns(lambda: np.copyto(dst, src), src.size, args.repeat)
        print(f"{name:<54} {base:>11.2f} {cpu_ns(ours, src.size, args.repeat):>10.2f}")


if __name__ == "__main__":
    main()
