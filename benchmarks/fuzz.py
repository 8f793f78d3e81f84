"""Fuzz ascendir's inputs and print the outcome table (issue 23).

    OPENBLAS_NUM_THREADS=1 python benchmarks/fuzz.py [--cases 2000] [--fuzzers onnx,ir,toml,cli,tiling]
        [--timeout 30] [--mem-mb 2048] [--seed 0] [--save DIR] [--causes 15]

Each fuzzer (tests/fuzz/: the ONNX importer, IR text through ascendir-opt and run, target TOMLs,
command lines and input files) draws `--cases` cases from its hypothesis strategy (generation
only, no shrinking) and runs each in a forked worker capped at `--timeout` seconds and `--mem-mb`
MiB of address space (tests/fuzz/harness.py). The table gives per fuzzer: cases, successes, clean
errors (exit 2, one line of at most 500 characters), messages that break that rule, internal
errors, crashes (death by a signal), hangs, runs over the memory cap, the share of cases past the
parser of what the fuzzer targets (harness.REACHED), and the peak RSS of any worker; then the most frequent
distinct causes of bad outcomes with one example case each. `--save DIR` writes every bad case's
files and command line there. The goal (issue 23): 0 internal errors, 0 hangs, 0 over memory,
0 bad messages, with >= 10^5 cases per fuzzer.
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
sys.path.insert(0, str(ROOT / "tests"))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from fuzz import fuzzers  # noqa: E402  (tests/fuzz)
from fuzz.harness import BAD_KINDS, KINDS, Case, Outcome, run_case  # noqa: E402


def fuzz(name: str, cases: int, timeout: float, mem_mb: int, rng_seed: int, save: Path | None, log) -> list[tuple[Case, Outcome]]:
    """Run `cases` cases of fuzzer `name`; returns every (case, outcome)."""
    strategy = fuzzers()[name]()
    results: list[tuple[Case, Outcome]] = []
    start = time.monotonic()

    @seed(rng_seed)
    @settings(max_examples=cases, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def one(case: Case) -> None:
        outcome = run_case(case, timeout=timeout, mem_mb=mem_mb)
        results.append((case, outcome))
        if outcome.kind in BAD_KINDS:
            print(f"[{name} #{len(results)}] {outcome.kind}: {outcome.message[:200]}  <- {case.note[:200]}", file=log, flush=True)
            if save is not None:
                _save(save / name / f"{len(results):06d}-{outcome.kind}", case, outcome)
        if len(results) % 250 == 0:
            rate = len(results) / (time.monotonic() - start)
            print(f"[{name}] {len(results)}/{cases} cases ({rate:.1f}/s)", file=sys.stderr, flush=True)

    one()
    return results


def _save(where: Path, case: Case, outcome: Outcome) -> None:
    where.mkdir(parents=True, exist_ok=True)
    for fname, content in case.files.items():
        if isinstance(content, bytes):
            (where / fname).parent.mkdir(parents=True, exist_ok=True)
            (where / fname).write_bytes(content)
    (where / "case.txt").write_text(f"{case.describe()}\n{outcome.kind} {outcome.status}: {outcome.message}\n")


def table(rows: dict[str, list[tuple[Case, Outcome]]]) -> str:
    head = ["fuzzer", "cases", *KINDS, "past parsing", "peak RSS MB", "max s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, results in rows.items():
        counts = Counter(o.kind for _, o in results)
        rss = max((o.rss_mb for _, o in results), default=0)
        slowest = max((o.seconds for _, o in results), default=0)
        past = sum(name in o.reached for _, o in results) / max(len(results), 1)
        lines.append("| " + " | ".join([name, str(len(results))] + [str(counts[k]) for k in KINDS]
                                       + [f"{100 * past:.1f} %", f"{rss:.0f}", f"{slowest:.1f}"]) + " |")
    return "\n".join(lines)


def causes(rows: dict[str, list[tuple[Case, Outcome]]], top: int) -> str:
    out = []
    for name, results in rows.items():
        bad = [(c, o) for c, o in results if o.kind in BAD_KINDS]
        if not bad:
            continue
        by_sig = Counter(o.signature() for _, o in bad)
        out.append(f"\n{name}: {len(by_sig)} distinct causes of {len(bad)} bad outcomes")
        for sig, n in by_sig.most_common(top):
            case, outcome = next((c, o) for c, o in bad if o.signature() == sig)
            out.append(f"  {n:5d}  {outcome.kind}: {outcome.message[:220]}\n         e.g. {case.note[:220]} | {' '.join(case.argv)[:80]}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=2000, help="cases per fuzzer (issue 23 asks >= 100000 for the closing table)")
    ap.add_argument("--fuzzers", default="onnx,ir,toml,cli,tiling")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--mem-mb", type=int, default=2048, help="MiB of address space per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", type=Path, default=None, help="write every bad case here")
    ap.add_argument("--causes", type=int, default=15, help="distinct causes listed per fuzzer")
    args = ap.parse_args()
    rows = {}
    for name in args.fuzzers.split(","):
        start = time.monotonic()
        rows[name] = fuzz(name, args.cases, args.timeout, args.mem_mb, args.seed, args.save, sys.stderr)
        print(f"[{name}] done: {len(rows[name])} cases in {time.monotonic() - start:.0f} s\n{table({name: rows[name]})}",
              file=sys.stderr, flush=True)
    print(table(rows))
    print(causes(rows, args.causes))


if __name__ == "__main__":
    main()
