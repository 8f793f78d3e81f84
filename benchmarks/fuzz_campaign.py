"""The fuzz campaign of issue 23, resumable and accumulating: every fuzzer of tests/fuzz (the ONNX
importer, IR text, target TOMLs, command lines and their input files, forced tilings) run in
shards on a Dask cluster; each finished shard is kept on disk, so runs over many sessions add up
to the 10^5 cases per fuzzer the issue asks.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fuzz_campaign.py \\
        [--cases 100000] [--budget-min 0] [--workers 1] [--scheduler tcp://host:8786] \\
        [--fuzzers onnx,ir,toml,cli,tiling] [--dir DIR] [--since COMMIT [--bad-only]] [--table] [--write-results]

Shards. Shard i of a fuzzer is its cases i*B .. (i+1)*B-1 (B = the directory's shard size, 100):
B cases drawn from the fuzzer's hypothesis strategy under the shard's own seed (a hash of the
campaign seed, the fuzzer and i; generation only, no shrinking), each run in a forked, capped
worker (tests/fuzz/harness.py: `--timeout` s wall clock, `--mem-mb` MiB of address space).
Shards go round-robin over the fuzzers that have fewest cases done, lowest index first, `2 x
workers` in flight, to a local cluster of `--workers` single-threaded worker processes or to the
scheduler at `--scheduler`. Each worker hands its shards to a shard runner of its own (a warm,
thread-free interpreter without Dask: `run_shard`), which forks a child per shard.

The directory (`--dir`, default $XDG_CACHE_HOME/ascendir/fuzz-campaign, i.e.
~/.cache/ascendir/fuzz-campaign: outside the checkout, so it outlives worktrees; a session's
end state is committed as benchmarks/fuzz_campaign_state.tar.xz, which the next session unpacks
with `tar xJf benchmarks/fuzz_campaign_state.tar.xz -C ~/.cache/ascendir` to continue) holds campaign.json (seed, shard size, caps: a run with other values is refused) and
<fuzzer>/<i>.json per finished shard: its outcome counts, peak RSS, wall and CPU seconds, every
bad case's message and command line, and the code it ran (git commit of the checkout the workers
import; "+" when that checkout had local changes). Bad cases' files go to <fuzzer>/bad/. A run
skips finished shards; `--since COMMIT` counts a shard finished only if its code contains COMMIT
(`git merge-base --is-ancestor`), so shards run before a fix are run again on the fixed code (and
replaced); a shard of a checkout with local changes is never finished under --since. With
`--bad-only` only the shards of older code that had a bad outcome run again (after a fix, to see
the fixed cases pass), the others still count. Ctrl-C or
SIGTERM loses only the shards in flight.

`--table` runs nothing: it prints the accumulated outcome table per fuzzer (the shards counted
under `--since`) with the code versions of its shards, the rate, and what the rest to `--cases`
would take. Outcomes (harness.py): ok (exit 0); clean (exit 2, one line `error: ...` of at most
500 characters); message (exit 2 breaking that rule); internal (`internal error:`, an escaped
exception, another status); crash (killed by a signal); timeout (over `--timeout`); memory (over
`--mem-mb`). `past parsing`: the share of cases past the parser of what the fuzzer targets
(harness.REACHED). Every bad outcome's distinct cause is listed with one example.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
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
SHARD = 100  # cases per shard of a new campaign directory
DEFAULT_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ascendir" / "fuzz-campaign"


def shard_seed(seed: int, name: str, index: int) -> int:
    """The hypothesis seed of shard `index` of fuzzer `name` (stable across runs and machines)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}:{index}".encode()).digest()[:8], "little")


def _runner_slot() -> dict:
    """This process's slot for its shard runner (run_shard). run_shard reaches a worker pickled
    by value when it is __main__'s (cloudpickle), with fresh globals at every task: a global of
    this module would start a runner per shard; a module object in sys.modules lives as long as
    the worker."""
    import types

    return sys.modules.setdefault("_ascendir_fuzz_runner", types.ModuleType("_ascendir_fuzz_runner")).__dict__


def run_shard(name: str, index: int, batch_seed: int, count: int, timeout: float, mem_mb: int, bad_dir: str | None) -> dict:
    """Run `count` cases of fuzzer `name` drawn under `batch_seed` (a Dask task) in this worker's
    shard runner: a fresh interpreter started at the worker's first shard (`runner`), warmed once
    and kept, which forks a single-threaded child per shard. The cases run in workers forked from
    that child (harness.run_case), and a fork costs in proportion to the memory it copies the page
    tables of: forked from the Dask worker itself (as before) each case carried Dask's ~40-60 MB
    (its modules, event loop and comm buffers) through the fork, the case and its exit, ~2 ms
    of a trivial case's 17-20 ms CPU at load ~20. The runner has no thread either: a Dask
    worker's event loop drew from the global `random` while hypothesis drew a case
    (HypothesisDeprecationWarning "from case=toml_cases()"). Returns what `_shard` returns.

    Raises:
        RuntimeError: the runner or its shard child died without a result (its exit status), or the
            shard raised (its message)."""
    slot = _runner_slot()
    runner_ = slot.get("runner")
    if runner_ is None or runner_.poll() is not None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        runner_ = slot["runner"] = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--runner"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    request = {"name": name, "index": index, "batch_seed": batch_seed, "count": count, "timeout": timeout,
               "mem_mb": mem_mb, "bad_dir": bad_dir}
    try:
        runner_.stdin.write(json.dumps(request) + "\n")
        runner_.stdin.flush()
        line = runner_.stdout.readline()
    except OSError:
        line = ""
    if not line:
        status, slot["runner"] = runner_.wait(), None
        raise RuntimeError(f"fuzz shard {name} {index}: the shard runner ended with status {status} and no result")
    out = json.loads(line)
    if "error" in out:
        raise RuntimeError(f"fuzz shard {name} {index}: {out['error']}")
    return out


def _die_with_parent() -> None:
    """Linux: have this process sent SIGTERM when its parent ends (prctl PR_SET_PDEATHSIG), so a
    campaign stopped mid-shard (its Dask worker ended) leaves no runner or shard child working on
    a shard that is dropped anyway; elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def runner() -> None:
    """The shard runner's loop (`fuzz_campaign.py --runner`, started by run_shard): warm once
    (harness.warm, fuzz.warm_cases, warm_hypothesis), then for each JSON request line on stdin
    fork a child that runs `_shard` and write its JSON result (or {"error": ...}) as one line.
    The child is forked so every shard starts from the same warm state. Anything else printed
    goes to stderr; stdin's end (the worker gone) ends the runner."""
    _die_with_parent()
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the warm-up's and the shards' prints must not reach the protocol
    tests = str(ROOT / "tests")
    sys.path.insert(0, tests)  # tests/fuzz, before benchmarks/fuzz.py
    from fuzz import warm_cases
    from fuzz.harness import ensure_warm

    ensure_warm()
    warm_cases()
    warm_hypothesis()
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            status = 0
            try:
                _die_with_parent()
                os.close(r)
                try:
                    data = json.dumps(_shard(**req))
                except BaseException as e:  # noqa: BLE001 - the worker raises it
                    data, status = json.dumps({"error": f"{type(e).__name__}: {e}"}), 1
                with os.fdopen(w, "w") as f:
                    f.write(data)
            finally:
                os._exit(status)
        os.close(w)
        with os.fdopen(r) as f:
            data = f.read()
        _, wstatus = os.waitpid(pid, 0)
        try:
            json.loads(data)
        except ValueError:
            data = json.dumps({"error": f"its runner's child ended with status {wstatus} and no result"})
        proto.write(data + "\n")
        proto.flush()


def warm_hypothesis() -> None:
    """Do once in the process that forks the shard runners what hypothesis does at the first
    case of every runner, so no runner redoes it: register this thread's global `Random`
    (`register_random` runs a full gc.collect over the warm heap) and collect the constants of
    the loaded local modules (hypothesis draws them with probability 0.05 per choice; it scans
    every module's source the first time, and only modules new to it later). Together ~0.2-0.3 s
    of every 100-case shard. The cases do not change: a runner sees the same modules, so the same
    constants, and the global Random is seeded per case anyway (fuzz_campaign's
    test_warm_hypothesis_keeps_the_cases). Private hypothesis API: if it moves, warm nothing."""
    try:
        from hypothesis.internal.conjecture.providers import _get_local_constants
        from hypothesis.internal.entropy import deterministic_PRNG
    except ImportError:
        return
    with deterministic_PRNG(0):  # registers the thread's Random on first use; restores the states
        pass
    _get_local_constants()


def shard_cases(name: str, batch_seed: int, count: int, each) -> None:
    """Call `each(case)` on the `count` cases of fuzzer `name` drawn under `batch_seed`
    (hypothesis, generation only: no shrinking, no example database)."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from fuzz import fuzzers

    @seed(batch_seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(fuzzers()[name]())
    def one(case) -> None:
        each(case)

    one()


def _shard(name: str, index: int, batch_seed: int, count: int, timeout: float, mem_mb: int, bad_dir: str | None) -> dict:
    """Run `count` cases of fuzzer `name` drawn under `batch_seed`.

    Returns {"kinds": {harness kind: count}, "rss": peak RSS MB of any case, "slowest": s,
    "busy": wall s of the shard, "cpu": CPU s of the shard and its case workers, "bad": [[kind,
    signature, message, note, command line]], "reached": how many cases got past the step the
    fuzzer targets (harness.REACHED)}. Bad cases' files are written under `bad_dir`.
    """
    from fuzz.harness import BAD_KINDS, run_case

    out = {"kinds": Counter(), "rss": 0.0, "slowest": 0.0, "busy": 0.0, "cpu": 0.0, "bad": [], "reached": 0}
    start, cpu0 = time.monotonic(), os.times()

    def one(case) -> None:
        o = run_case(case, timeout=timeout, mem_mb=mem_mb)
        out["kinds"][o.kind] += 1
        out["reached"] += name in o.reached
        out["rss"] = max(out["rss"], o.rss_mb)
        out["slowest"] = max(out["slowest"], o.seconds)
        if o.kind in BAD_KINDS:
            out["bad"].append([o.kind, o.signature(), o.message, case.note[:300], f"{case.tool} {' '.join(case.argv)}"[:300]])
            if bad_dir:
                where = Path(bad_dir) / f"{index:06d}-{sum(out['kinds'].values()):03d}-{o.kind}"
                where.mkdir(parents=True, exist_ok=True)
                for fname, content in case.files.items():
                    if isinstance(content, bytes):
                        (where / fname).parent.mkdir(parents=True, exist_ok=True)
                        (where / fname).write_bytes(content)
                (where / "case.txt").write_text(f"{case.describe()}\n{o.kind} {o.status}: {o.message}\n")

    shard_cases(name, batch_seed, count, one)
    out["busy"] = time.monotonic() - start
    cpu1 = os.times()  # this process (generation, forks) and its reaped case workers
    out["cpu"] = sum(cpu1[:4]) - sum(cpu0[:4])
    out["kinds"] = dict(out["kinds"])
    return out


def code_version() -> str:
    """The full git commit of this checkout (the code the local workers import), "+" appended
    when ascendir/, tests/ or benchmarks/ have local changes."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "ascendir", "tests", "benchmarks")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


class Store:
    """The campaign directory (see the module docstring)."""

    def __init__(self, root: Path, seed: int, timeout: float, mem_mb: int, create: bool) -> None:
        self.root = root
        meta = root / "campaign.json"
        want = {"seed": seed, "shard": SHARD, "timeout": timeout, "mem_mb": mem_mb}
        if meta.exists():
            have = json.loads(meta.read_text())
            if create and have != want:
                raise SystemExit(f"error: {meta} holds a campaign with {have}; this run asks {want} (use another --dir)")
            self.meta = have
        elif create:
            root.mkdir(parents=True, exist_ok=True)
            self._write(meta, want)
            self.meta = want
        else:
            self.meta = want

    @staticmethod
    def _write(path: Path, data: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)  # a shard is on disk whole or not at all

    def shards(self, name: str) -> dict[int, dict]:
        """Finished shards of fuzzer `name` by index."""
        out = {}
        for path in sorted((self.root / name).glob("[0-9]*.json")):
            out[int(path.stem)] = json.loads(path.read_text())
        return out

    def save(self, name: str, index: int, record: dict) -> None:
        self._write(self.root / name / f"{index:06d}.json", record)

    def bad_dir(self, name: str) -> str:
        return str(self.root / name / "bad")


class Current:
    """Which shards count under `--since COMMIT` (memoised git ancestry checks of their code);
    with `bad_only` (--bad-only) a shard of older code still counts if it had no bad outcome."""

    def __init__(self, since: str | None, bad_only: bool = False) -> None:
        self.since, self.bad_only = None, bad_only
        if since:
            try:
                self.since = subprocess.run(["git", "rev-parse", "--verify", since + "^{commit}"], cwd=ROOT,
                                            capture_output=True, text=True, check=True).stdout.strip()
            except subprocess.CalledProcessError:
                raise SystemExit(f"error: --since {since}: not a commit of {ROOT}") from None
        self.memo: dict[str, bool] = {}

    def __call__(self, record: dict) -> bool:
        code = record["code"]
        if self.since is None or (self.bad_only and not record["bad"]):
            return True
        if code not in self.memo:
            ok = not code.endswith("+") and subprocess.run(
                ["git", "merge-base", "--is-ancestor", self.since, code], cwd=ROOT, capture_output=True).returncode == 0
            self.memo[code] = ok
        return self.memo[code]


class Tally:
    """What the counted shards of one fuzzer add up to."""

    def __init__(self) -> None:
        self.kinds: Counter = Counter()
        self.rss = self.slowest = self.busy = self.cpu = 0.0
        self.bad: list[list] = []
        self.reached = 0
        self.codes: Counter = Counter()  # code version -> shards

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
        self.codes[r["code"]] += 1


def accumulated(store: Store, names: list[str], current: Current) -> dict[str, Tally]:
    tallies = {n: Tally() for n in names}
    for n in names:
        for r in store.shards(n).values():
            if current(r):
                tallies[n].add(r)
    return tallies


def campaign(client, store: Store, names: list[str], cases: int, budget_s: float | None, current: Current,
             code: str, in_flight: int) -> tuple[dict[str, Tally], int, bool]:
    """Run the shards still to do; returns (fuzzer name -> Tally of all counted shards, shards run
    now, interrupted)."""
    from dask.distributed import as_completed

    tallies = accumulated(store, names, current)
    seed, size, timeout, mem_mb = (store.meta[k] for k in ("seed", "shard", "timeout", "mem_mb"))
    def want(index: int) -> int:  # cases of shard `index` under --cases (the last one may be short)
        return min(size, cases - index * size)

    def finished(r: dict | None, index: int) -> bool:
        return r is not None and current(r) and sum(r["kinds"].values()) >= want(index)

    done = {n: store.shards(n) for n in names}
    todo = {n: [i for i in range(-(-cases // size)) if not finished(done[n].get(i), i)] for n in names}
    handed = {n: tallies[n].cases for n in names}
    start = time.monotonic()
    ran = 0

    def next_shard():
        if budget_s is not None and time.monotonic() - start > budget_s:
            return None
        open_ = [n for n in names if todo[n]]
        if not open_:
            return None
        name = min(open_, key=lambda n: handed[n])  # the fuzzer with fewest cases done or handed out
        index = todo[name].pop(0)
        count = want(index)
        handed[name] += count
        fut = client.submit(run_shard, name, index, shard_seed(seed, name, index), count, timeout, mem_mb,
                            store.bad_dir(name), pure=False, key=f"fuzz-{name}-{index}-{time.time_ns()}")
        fut.shard = (name, index)
        return fut

    def stop(signum, frame):  # SIGTERM ends the run as Ctrl-C does: finished shards are on disk
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    pending = as_completed([f for f in (next_shard() for _ in range(in_flight)) if f is not None])
    interrupted = False
    try:
        for fut in pending:
            name, index = fut.shard
            r = fut.result()
            r.update(code=code, index=index, seed=shard_seed(seed, name, index), finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            store.save(name, index, r)
            ran += 1
            t = tallies[name]
            t.add(r)
            print(f"[{time.monotonic() - start:6.0f} s] {name} shard {index}: {t.cases} cases counted, "
                  f"{sum(r['kinds'].values()) / max(r['busy'], 1e-9):.2f}/s, bad {len(r['bad'])} (counted {len(t.bad)})",
                  file=sys.stderr, flush=True)
            nxt = next_shard()
            if nxt is not None:
                pending.add(nxt)
    except KeyboardInterrupt:
        print("interrupted: the shards in flight are dropped", file=sys.stderr, flush=True)
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, old)
    return accumulated(store, names, current), ran, interrupted  # from disk: a shard run again replaced its old record


def table(tallies: dict[str, Tally], cases: int, workers: int) -> str:
    head = ["fuzzer", "cases", *COLUMNS.values(), "past parsing", "peak RSS MB", "max s", "cases/s", "CPU ms/case",
            f"worker-h to {cases:,}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    left_h = left_cpu_h = 0.0
    for name, t in tallies.items():
        rate = t.cases / t.busy if t.busy else 0.0
        left = max(cases - t.cases, 0)
        hours = left / rate / 3600 if rate else float("inf")
        per_case = t.cpu / t.cases if t.cases else float("inf")
        left_h += hours
        left_cpu_h += left * per_case / 3600 if t.cases else float("inf")
        lines.append("| " + " | ".join([name, f"{t.cases:,}", *(f"{t.kinds[k]:,}" for k in COLUMNS),
                                         f"{100 * t.reached / max(t.cases, 1):.1f} %", f"{t.rss:.0f}", f"{t.slowest:.1f}",
                                         f"{rate:.2f}", f"{1000 * per_case:.0f}", f"{hours:.1f}"]) + " |")
    lines.append(f"\nThe rest of the campaign ({cases:,} cases per fuzzer): {left_h:.1f} worker-hours at these rates, "
                 f"{left_h / workers:.1f} h on {workers} worker(s); {left_cpu_h:.1f} CPU-hours (the worker-hours on "
                 "cores of their own).")
    lines.append("\nCode of the counted shards (commit: shards):")
    for name, t in tallies.items():
        lines.append(f"  {name}: " + (", ".join(f"{c[:10]}{'+' if c.endswith('+') else ''}: {n}" for c, n in sorted(t.codes.items()))
                                      or "none"))
    return "\n".join(lines)


def causes(tallies: dict[str, Tally], top: int) -> str:
    out = []
    for name, t in tallies.items():
        if not t.bad:
            out.append(f"{name}: no bad outcome")
            continue
        by_sig = Counter(b[1] for b in t.bad)
        out.append(f"{name}: {len(by_sig)} distinct causes of {len(t.bad)} bad outcomes")
        for sig, n in by_sig.most_common(top):
            kind, _, message, note, cmd = next(b for b in t.bad if b[1] == sig)
            out.append(f"  {n:5d}  {COLUMNS[kind]}: {message[:220]}\n         e.g. {note[:200]} | {cmd[:100]}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000, help="cases per fuzzer (issue 23: >= 100000)")
    ap.add_argument("--budget-min", type=float, default=0, help="start no shard after this many minutes (0: no limit)")
    ap.add_argument("--fuzzers", default=",".join(FUZZERS))
    ap.add_argument("--workers", type=int, default=1, help="worker processes of the local cluster (a shared machine: 1)")
    ap.add_argument("--scheduler", default=None, help="address of a running Dask scheduler instead of a local cluster")
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the campaign directory (default {DEFAULT_DIR})")
    ap.add_argument("--since", default=None, help="count (and skip) only shards whose code contains this commit")
    ap.add_argument("--bad-only", action="store_true",
                    help="with --since: only the shards of older code that had a bad outcome run again (the others still count)")
    ap.add_argument("--table", action="store_true", help="print the accumulated table and run nothing")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case before it counts as a timeout")
    ap.add_argument("--mem-mb", type=int, default=2048, help="MiB of address space per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--causes", type=int, default=20, help="distinct causes listed per fuzzer")
    results.add_flag(ap)
    args = ap.parse_args()
    names = args.fuzzers.split(",")
    unknown = set(names) - set(FUZZERS)
    if unknown:
        ap.error(f"unknown fuzzer(s) {', '.join(sorted(unknown))}; choose from {', '.join(FUZZERS)}")
    if args.bad_only and not args.since:
        ap.error("--bad-only goes with --since COMMIT")
    current = Current(args.since, args.bad_only)
    store = Store(args.dir, args.seed, args.timeout, args.mem_mb, create=not args.table)
    since = (f", shards since {current.since[:10]}" + (" (older ones without bad outcomes too)" if args.bad_only else "")
             if current.since else "")

    if args.table:
        tallies = accumulated(store, names, current)
        print(f"{sum(t.cases for t in tallies.values()):,} cases accumulated in {args.dir}{since} "
              f"(shards of {store.meta['shard']}, seed {store.meta['seed']}, caps {store.meta['timeout']:.0f} s and "
              f"{store.meta['mem_mb']} MiB per case)\n")
        print(table(tallies, args.cases, args.workers))
        print()
        print(causes(tallies, args.causes))
        return

    from dask.distributed import Client, LocalCluster

    code = code_version()  # the workers import the code as it is now; a commit made during the run is not in it
    start = time.monotonic()
    if args.scheduler:
        client = Client(args.scheduler)
        workers = len(client.scheduler_info()["workers"])
    else:
        # memory_limit 0: the harness caps each case; the nanny must not kill the worker for it
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, memory_limit=0,
                               dashboard_address=":0")
        client = Client(cluster)
        workers = args.workers
    try:
        tallies, ran, interrupted = campaign(client, store, names, args.cases, args.budget_min * 60 or None, current,
                                             code, 2 * workers)
    finally:
        client.close()
        if not args.scheduler:
            cluster.close()
    wall = time.monotonic() - start
    print(f"{ran} shards of ascendir {code[:10]} run in {wall / 60:.1f} min on {workers} Dask worker(s); "
          f"{sum(t.cases for t in tallies.values()):,} cases accumulated in {args.dir}{since} "
          f"(shards of {store.meta['shard']}, seed {store.meta['seed']}, caps {store.meta['timeout']:.0f} s and "
          f"{store.meta['mem_mb']} MiB per case)" + (", interrupted" if interrupted else "") + "\n")
    print(table(tallies, args.cases, workers))
    print()
    print(causes(tallies, args.causes))


if __name__ == "__main__":
    if sys.argv[1:] == ["--runner"]:  # a Dask worker's shard runner (run_shard)
        runner()
    else:
        with results.recorded("fuzz_campaign"):
            main()
