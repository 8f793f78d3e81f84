"""The fuzz campaign of issue 23: every fuzzer of tests/fuzz (the ONNX importer, IR text, target
TOMLs, command lines and their input files, forced tilings) run in batches on a Dask cluster, then the outcome
table per fuzzer, the rate and what the full campaign would take.

    nice -n 19 env OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fuzz_campaign.py \\
        [--cases 100000] [--budget-min 0] [--workers 1] [--scheduler tcp://host:8786] \\
        [--fuzzers onnx,ir,toml,cli,tiling] [--batch 100] [--seed 0] [--save DIR] [--write-results]

A batch is `--batch` cases of one fuzzer drawn from its hypothesis strategy under a seed of its
own (generation only, no shrinking), each case run in a forked, capped worker
(tests/fuzz/harness.py: `--timeout` s wall clock, `--mem-mb` MiB of address space). Batches go
round-robin over the fuzzers that still lack cases, `2 x workers` in flight, to a local cluster
of `--workers` single-threaded worker processes (the default; they inherit the niceness of
this script) or to the scheduler at `--scheduler`. With `--budget-min M` no batch starts after
M minutes: the table then says how many cases ran, the rate (cases per second of worker time),
the CPU time per case (generation, fork and run: what a worker on a core of its own would take,
whatever the load) and the worker-hours the remaining cases to `--cases` would take.

Outcomes (harness.py): ok (exit 0); clean (exit 2, one line `error: ...` of at most 500
characters); message (exit 2 breaking that rule); internal (`internal error:`, an escaped
exception, another status); crash (killed by a signal); timeout (over `--timeout`); memory
(over `--mem-mb`). `past parsing`: the share of cases that got past the parser of what the
fuzzer targets (harness.REACHED: the ONNX import, the IR parse, the TOML read, the command line,
the --tiling spec), i.e. that exercised the code behind it. Every bad outcome's distinct cause
is listed with one example; `--save DIR` writes each bad case's files and command line under
DIR/<fuzzer>/.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import results  # noqa: E402

FUZZERS = ("onnx", "ir", "toml", "cli", "tiling")
# harness kind -> the table's column
COLUMNS = {"success": "ok", "clean": "clean exit 2", "message": "bad message", "internal": "internal",
           "crash": "crash", "hang": "timeout", "memory": "memory"}


def run_batch(name: str, batch_seed: int, count: int, timeout: float, mem_mb: int, save: str | None) -> dict:
    """Run `count` cases of fuzzer `name` drawn under `batch_seed` (on a Dask worker).

    Returns {"kinds": Counter of harness kinds, "rss": peak RSS MB of any case, "slowest": s,
    "busy": wall s of the batch, "cpu": CPU s of the batch and its workers, "bad": [(kind, signature, message, note, command line)],
    "reached": how many cases got past the step the fuzzer targets (harness.REACHED)}.
    """
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from fuzz import fuzzers
    from fuzz.harness import BAD_KINDS, run_case

    out = {"kinds": Counter(), "rss": 0.0, "slowest": 0.0, "busy": 0.0, "cpu": 0.0, "bad": [], "reached": 0}
    start, cpu0 = time.monotonic(), os.times()

    @seed(batch_seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(fuzzers()[name]())
    def one(case) -> None:
        o = run_case(case, timeout=timeout, mem_mb=mem_mb)
        out["kinds"][o.kind] += 1
        out["reached"] += name in o.reached
        out["rss"] = max(out["rss"], o.rss_mb)
        out["slowest"] = max(out["slowest"], o.seconds)
        if o.kind in BAD_KINDS:
            out["bad"].append((o.kind, o.signature(), o.message, case.note[:300], f"{case.tool} {' '.join(case.argv)}"[:300]))
            if save:
                where = Path(save) / name / f"{batch_seed}-{sum(out['kinds'].values()):05d}-{o.kind}"
                where.mkdir(parents=True, exist_ok=True)
                for fname, content in case.files.items():
                    if isinstance(content, bytes):
                        (where / fname).parent.mkdir(parents=True, exist_ok=True)
                        (where / fname).write_bytes(content)
                (where / "case.txt").write_text(f"{case.describe()}\n{o.kind} {o.status}: {o.message}\n")

    one()
    out["busy"] = time.monotonic() - start
    cpu1 = os.times()  # this process (generation, forks) and its reaped case workers
    out["cpu"] = sum(cpu1[:4]) - sum(cpu0[:4])
    return out


class Tally:
    """What the batches of one fuzzer added up to."""

    def __init__(self) -> None:
        self.kinds: Counter = Counter()
        self.rss = self.slowest = self.busy = self.cpu = 0.0
        self.bad: list[tuple] = []
        self.submitted = self.reached = 0

    @property
    def cases(self) -> int:
        return sum(self.kinds.values())

    def add(self, r: dict) -> None:
        self.kinds.update(r["kinds"])
        self.rss, self.slowest = max(self.rss, r["rss"]), max(self.slowest, r["slowest"])
        self.busy += r["busy"]
        self.cpu += r["cpu"]
        self.reached += r["reached"]
        self.bad += r["bad"]


def campaign(client, names: list[str], cases: int, batch: int, budget_s: float | None, seed: int, timeout: float,
             mem_mb: int, save: str | None, in_flight: int) -> dict:
    """Run the batches; returns fuzzer name -> Tally, and "interrupted": True after a Ctrl-C."""
    from dask.distributed import as_completed

    tallies = {n: Tally() for n in names}
    start = time.monotonic()
    order = iter(range(10**12))

    def next_batch():
        if budget_s is not None and time.monotonic() - start > budget_s:
            return None
        open_ = [n for n in names if tallies[n].submitted < cases]
        if not open_:
            return None
        i = next(order)
        name = min(open_, key=lambda n: tallies[n].submitted)  # round-robin by cases handed out
        count = min(batch, cases - tallies[name].submitted)
        tallies[name].submitted += count
        fut = client.submit(run_batch, name, seed * 1_000_003 + i, count, timeout, mem_mb, save, pure=False,
                            key=f"fuzz-{name}-{i}")
        fut.fuzzer = name
        return fut

    pending = as_completed([f for f in (next_batch() for _ in range(in_flight)) if f is not None])
    try:
        for fut in pending:
            name = fut.fuzzer
            tallies[name].add(fut.result())
            t = tallies[name]
            print(f"[{time.monotonic() - start:6.0f} s] {name}: {t.cases} cases, {t.cases / max(t.busy, 1e-9):.2f}/s, "
                  f"bad {sum(t.kinds[k] for k in COLUMNS if k not in ('success', 'clean'))}", file=sys.stderr, flush=True)
            nxt = next_batch()
            if nxt is not None:
                pending.add(nxt)
    except KeyboardInterrupt:  # the batches done so far still make a table
        print("interrupted: the batches in flight are dropped", file=sys.stderr, flush=True)
        tallies["interrupted"] = True
    return tallies


def table(tallies: dict[str, Tally], cases: int, workers: int) -> str:
    head = ["fuzzer", "cases", *COLUMNS.values(), "past parsing", "peak RSS MB", "max s", "cases/s", "CPU ms/case", f"worker-h to {cases:,}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    left_h = left_cpu_h = 0.0
    for name, t in tallies.items():
        rate = t.cases / t.busy if t.busy else 0.0
        hours = (cases - t.cases) / rate / 3600 if rate else float("inf")
        per_case = t.cpu / t.cases if t.cases else float("inf")
        left_h += hours
        left_cpu_h += (cases - t.cases) * per_case / 3600
        lines.append("| " + " | ".join([name, f"{t.cases:,}", *(f"{t.kinds[k]:,}" for k in COLUMNS),
                                         f"{100 * t.reached / max(t.cases, 1):.1f} %", f"{t.rss:.0f}", f"{t.slowest:.1f}", f"{rate:.2f}", f"{1000 * per_case:.0f}", f"{hours:.1f}"]) + " |")
    lines.append(f"\nThe rest of the campaign ({cases:,} cases per fuzzer): {left_h:.1f} worker-hours at these rates, "
                 f"{left_h / workers:.1f} h on {workers} worker(s); {left_cpu_h:.1f} CPU-hours (the worker-hours on "
                 "cores of their own).")
    return "\n".join(lines)


def causes(tallies: dict[str, Tally], top: int) -> str:
    out = []
    for name, t in tallies.items():
        if not t.bad:
            out.append(f"{name}: no bad outcome")
            continue
        by_sig = Counter(sig for _, sig, *_ in t.bad)
        out.append(f"{name}: {len(by_sig)} distinct causes of {len(t.bad)} bad outcomes")
        for sig, n in by_sig.most_common(top):
            kind, _, message, note, cmd = next(b for b in t.bad if b[1] == sig)
            out.append(f"  {n:5d}  {COLUMNS[kind]}: {message[:220]}\n         e.g. {note[:200]} | {cmd[:100]}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000, help="cases per fuzzer (issue 23: >= 100000)")
    ap.add_argument("--budget-min", type=float, default=0, help="start no batch after this many minutes (0: no limit)")
    ap.add_argument("--fuzzers", default=",".join(FUZZERS))
    ap.add_argument("--workers", type=int, default=1, help="worker processes of the local cluster (a shared machine: 1)")
    ap.add_argument("--scheduler", default=None, help="address of a running Dask scheduler instead of a local cluster")
    ap.add_argument("--batch", type=int, default=100, help="cases per task")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case before it counts as a timeout")
    ap.add_argument("--mem-mb", type=int, default=2048, help="MiB of address space per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None, help="write every bad case under this directory")
    ap.add_argument("--causes", type=int, default=20, help="distinct causes listed per fuzzer")
    results.add_flag(ap)
    args = ap.parse_args()
    names = args.fuzzers.split(",")
    unknown = set(names) - set(FUZZERS)
    if unknown:
        ap.error(f"unknown fuzzer(s) {', '.join(sorted(unknown))}; choose from {', '.join(FUZZERS)}")

    from dask.distributed import Client, LocalCluster

    code = results._commit()  # the workers import the code as it is now; a commit made during the run is not in it
    start = time.monotonic()
    if args.scheduler:
        client = Client(args.scheduler)
        workers = len(client.scheduler_info()["workers"])
    else:
        # memory_limit 0: the harness caps each case; the nanny must not kill the worker for it
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, memory_limit=0,
                               dashboard_address=None)
        client = Client(cluster)
        workers = args.workers
    try:
        tallies = campaign(client, names, args.cases, args.batch, args.budget_min * 60 or None, args.seed, args.timeout,
                           args.mem_mb, args.save, 2 * workers)
    finally:
        client.close()
        if not args.scheduler:
            cluster.close()
    wall = time.monotonic() - start
    interrupted = tallies.pop("interrupted", False)
    done = sum(t.cases for t in tallies.values())
    print(f"{done:,} cases of ascendir {code} in {wall / 60:.1f} min on {workers} Dask worker(s) (batches of {args.batch}, seed {args.seed}, "
          f"caps {args.timeout:.0f} s and {args.mem_mb} MiB per case)"
          + (", interrupted" if interrupted else f", stopped by the {args.budget_min:g}-minute budget" if done < args.cases * len(names) else "")
          + "\n")
    print(table(tallies, args.cases, workers))
    print()
    print(causes(tallies, args.causes))


if __name__ == "__main__":
    with results.recorded("fuzz_campaign"):
        main()
