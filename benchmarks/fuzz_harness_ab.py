"""The fuzz campaign's harness cost, A/B: CPU per case of the same shards run by an older
benchmarks/fuzz_campaign.py and by this checkout's, in one run on one Dask worker (as the campaign
runs them), the two alternating so load drifts touch both alike.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fuzz_harness_ab.py --old 2657edc \\
        [--fuzzers onnx,ir,toml,cli,tiling] [--cases 40] [--reps 1]

`--old COMMIT`: its fuzz_campaign.py is written to a temporary directory and imported from there
(its ROOT is then this checkout: the same ascendir, fuzzers and harness run; only the campaign's
shard runner differs). Shard r of each fuzzer (r < --reps) runs `--cases` cases under the
campaign's seed 0, once per version; a shard's CPU is what its process and its reaped case
workers used (the campaign's "CPU ms/case"). Prints per shard the outcome counts of both (they
must be equal: the same cases) and per fuzzer the CPU ms per case, old -> new, and their ratio.
Time-measuring: under load, compare ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]


def shard(module_dir: str, module: str, name: str, index: int, count: int) -> tuple:
    """A Dask task: shard `index` of fuzzer `name` by `module`'s run_shard (imported from
    `module_dir`); returns (outcome counts, past-parsing count, CPU s)."""
    import importlib

    for p in (module_dir, str(ROOT / "benchmarks")):
        if p not in sys.path:
            sys.path.insert(0, p)
    m = importlib.import_module(module)
    r = m.run_shard(name, index, m.shard_seed(0, name, index), count, 30.0, 2048, None)
    return r["kinds"], r["reached"], r["cpu"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="the commit whose benchmarks/fuzz_campaign.py is A")
    ap.add_argument("--fuzzers", default="onnx,ir,toml,cli,tiling")
    ap.add_argument("--cases", type=int, default=40, help="cases per shard")
    ap.add_argument("--reps", type=int, default=1, help="shards per fuzzer")
    args = ap.parse_args()
    names = args.fuzzers.split(",")
    try:
        text = subprocess.run(["git", "show", f"{args.old}:benchmarks/fuzz_campaign.py"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"error: --old {args.old}: {e.stderr.strip()}") from None
    from dask.distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory(prefix="fuzz-ab-") as d:
        # the old file, with ROOT pointing at this checkout (it computes ROOT from its own path)
        (Path(d) / "fuzz_campaign_old.py").write_text(
            text.replace("ROOT = Path(__file__).resolve().parents[1]", f"ROOT = Path({str(ROOT)!r})"))
        versions = {"old": (d, "fuzz_campaign_old"), "new": (str(ROOT / "benchmarks"), "fuzz_campaign")}
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, memory_limit=0, dashboard_address=":0")
        client = Client(cluster)
        try:
            for v in versions.values():  # warm-ups (the worker's, the runner's start) are no shard's cost
                client.submit(shard, *v, "toml", 10**6, 1, pure=False).result()
            cpu = {v: {n: 0.0 for n in names} for v in versions}
            for rep in range(args.reps):
                for name in names:
                    got = {}
                    for v in (("old", "new") if rep % 2 == 0 else ("new", "old")):
                        kinds, reached, seconds = client.submit(shard, *versions[v], name, rep, args.cases, pure=False).result()
                        got[v] = (kinds, reached)
                        cpu[v][name] += seconds
                    same = "same outcomes" if got["old"] == got["new"] else f"OUTCOMES DIFFER: {got}"
                    print(f"{name} shard {rep}: {got['new'][0]}, past parsing {got['new'][1]}; {same}", flush=True)
        finally:
            client.close()
            cluster.close()
    n = args.cases * args.reps
    print(f"\nCPU ms per case, {args.old} -> this checkout ({n} cases per fuzzer):")
    for name in names:
        o, w = cpu["old"][name] / n * 1000, cpu["new"][name] / n * 1000
        print(f"  {name}: {o:.1f} -> {w:.1f} ({w / o:.2f}x)")


if __name__ == "__main__":
    main()
