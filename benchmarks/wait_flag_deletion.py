"""What the simulator says when one wait_flag is deleted: every wait_flag of every kernel of the
committed corpus models (tests/data, -O2, fp16, 910B2), one at a time, then the run with numerics
(the race check is on) classified:

* detected: the run fails with a race or a deadlock (or another error naming the kernel);
* redundant: no race even with an unbounded race history; split by why, found by deleting the
  matching set_flag too:
  - `pair redundant`: without the pair there is still no race, so other flags / barriers, or the
    absence of conflicting accesses, already order what the pair orders; `at kernel level` are
    the priming / draining flags outside every loop (a set before the loop that the first
    acquire consumes, a wait after it that balances the last release: the hardware's event
    counters must end where they began, the data needs nothing from them), `in a loop` the rest;
  - `covered by the queue`: without the pair a race appears, so the set alone still ordered the
    pipes through the next wait of the same event (the flag is a counter: the next wait on that
    event pairs with this set, one iteration later), a weaker order that sufficed here;
* missed by the history bound: a race appears only with the race check's history unbounded
  (check/race.py KEEP).

Outputs are no race oracle: the interpreter's numerics follow program order whatever the flags
say, so a deleted flag never changes them (checked: `outputs changed` would be listed); the race
check's happens-before (vector clocks per pipe and unit, independent of timing) is the oracle.

Each deletion is made in place (the op detached, run, put back: cloning a module costs up to a
second) and first run with the history unbounded: no race then means none bounded either, so a
redundant flag costs two runs (unbounded, pair) and a detected one two (unbounded, bounded).

    OPENBLAS_NUM_THREADS=1 python benchmarks/wait_flag_deletion.py [--models mlp_small,...] [--dtype fp16]
        [--max-waits 400] [--write-results]

prints one row per model and outcome, one per kernel kind, and every case that is not detected or
redundant. Models with more than `--max-waits` wait_flags are skipped and named (about two
simulations per wait_flag: resnet_small's 735 take most of an hour on a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import re
import signal
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import results  # noqa: E402

from ascendir.dialects.ascend import KernelOp  # noqa: E402
from ascendir.dialects.ascend.ops_sync import SetFlagOp, WaitFlagOp  # noqa: E402
from ascendir.driver import compile_model  # noqa: E402
from ascendir.errors import AscendirError  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
from ascendir.interpreter.check import race  # noqa: E402

TARGET = "ascend910b2"


def _inputs(model_dir: Path) -> dict[str, np.ndarray]:
    with np.load(model_dir / "reference.npz") as ref:
        return {k.removeprefix("input:"): ref[k] for k in ref.files if k.startswith("input:")}


def _flags(module) -> list[tuple[KernelOp, int, WaitFlagOp]]:
    """(kernel, index of the wait within the kernel, op) of every wait_flag."""
    out = []
    for k in module.ops:
        if isinstance(k, KernelOp):
            waits = [op for op in k.walk() if isinstance(op, WaitFlagOp)]
            out += [(k, i, w) for i, w in enumerate(waits)]
    return out


def _matching_set(kernel: KernelOp, wait: WaitFlagOp) -> SetFlagOp | None:
    """The set_flag of the same pipes and event that precedes `wait` in program order (the last
    one before it), else the last one in the kernel (a wait at a loop head pairs with the set at
    the end of the previous iteration)."""
    key = (wait.src, wait.dst, wait.event)
    before, last = None, None
    for op in kernel.walk():
        if op is wait:
            before = last
        if isinstance(op, SetFlagOp) and (op.src, op.dst, op.event) == key:
            last = op
    return before or last


def _run(module, weights, inputs, unbounded: bool = False) -> tuple[str, dict | None]:
    keep = race.KEEP
    if unbounded:
        race.KEEP = 10**9
    try:
        res = simulate(module, weights, inputs, TARGET)
        return "clean", res.outputs
    except AscendirError as e:
        text = str(e)
        kind = "race" if "race" in text else "deadlock" if "deadlock" in text else "error"
        return kind, {"message": text}
    finally:
        race.KEEP = keep


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


@contextlib.contextmanager
def _removed(ops):
    """The module without `ops` for the block, each put back where it was after."""
    places = []
    for op in ops:
        places.append((op, op.parent_block(), op.next_op))
        op.detach()
    try:
        yield
    finally:
        for op, block, nxt in reversed(places):
            if nxt is None:
                block.add_op(op)
            else:
                block.insert_op_before(op, nxt)


def classify(module, weights, inputs, reference: dict, kernel: KernelOp, wait: WaitFlagOp) -> str:
    with _removed([wait]):
        kind, out = _run(module, weights, inputs, unbounded=True)
        if kind != "clean":  # the bounded check tells detected from missed
            bounded, _ = _run(module, weights, inputs)
            if bounded != "clean":
                return f"detected: {bounded}"
            return "missed by the history bound" if kind == "race" else f"unbounded only: {kind}"
    if not _same(out, reference):
        return "outputs changed"
    partner = _matching_set(kernel, wait)
    with _removed([wait] + ([partner] if partner is not None else [])):
        pair, _ = _run(module, weights, inputs)
    if pair in ("race", "deadlock"):
        return "redundant: covered by the queue"
    return "redundant: pair, at kernel level" if isinstance(wait.parent_op(), KernelOp) else "redundant: pair, in a loop"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated tests/data model names (default: all)")
    ap.add_argument("--dtype", default="fp16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--max-waits", type=int, default=400, help="skip models with more wait_flags than this")
    results.add_flag(ap)
    args = ap.parse_args()
    data = ROOT / "tests" / "data"
    names = args.models.split(",") if args.models else sorted(p.name for p in data.iterdir() if (p / "model.onnx").exists())
    outcomes: collections.Counter = collections.Counter()
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_model: dict[str, collections.Counter] = {}
    notable, skipped, seconds = [], [], {}
    stopped = None
    # SIGTERM (and SIGINT, which a shell's background job ignores) end the run after the models
    # done so far, which still make the tables
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        for name in names:
            stopped = name
            t0 = time.perf_counter()
            module, weights = compile_model(data / name / "model.onnx", TARGET, opt_level="O2", dtype=args.dtype)
            inputs = _inputs(data / name)
            kind, reference = _run(module, weights, inputs)
            assert kind == "clean", f"{name}: the unmodified model fails: {reference}"
            flags = _flags(module)
            if len(flags) > args.max_waits:
                skipped.append(f"{name} ({len(flags)} wait_flags)")
                print(f"{name}: {len(flags)} wait_flags > --max-waits {args.max_waits}, skipped", file=sys.stderr, flush=True)
                continue
            mine, kinds, lines = collections.Counter(), collections.defaultdict(collections.Counter), []
            for kernel, index, wait in flags:
                verdict = classify(module, weights, inputs, reference, kernel, wait)
                mine[verdict] += 1
                kinds[re.sub(r"_\d+$", "", kernel.sym_name.data)][verdict] += 1
                if not verdict.startswith(("detected", "redundant")):
                    lines.append(f"{name} {kernel.sym_name.data} wait #{index} ({wait.src.data}->{wait.dst.data}, "
                                 f"event {wait.event.value.data}): {verdict}")
            by_model[name], seconds[name] = mine, time.perf_counter() - t0
            outcomes.update(mine)
            for k, c in kinds.items():
                by_kind[k].update(c)
            notable += lines
            print(f"{name}: {len(flags)} wait_flags in {seconds[name]:.0f} s: {dict(mine)}", file=sys.stderr, flush=True)
        stopped = None
    except KeyboardInterrupt:
        print(f"stopped during {stopped}", file=sys.stderr, flush=True)
    total = sum(outcomes.values())
    verdicts = sorted(outcomes)
    short = [v.removeprefix("redundant: ").removeprefix("detected: ") for v in verdicts]
    print(f"{total} wait_flag deletions over {len(by_model)} models ({args.dtype}, {TARGET}, -O2)")
    for verdict, n in sorted(outcomes.items()):
        print(f"  {verdict:36s} {n:5d}  {100 * n / max(total, 1):5.1f} %")
    print("\nper model (detected: race / deadlock; redundant: covered by the queue / pair at kernel level / pair in a loop):")
    print("| model | wait_flags | " + " | ".join(short) + " | s |")
    print("|---|---|" + "---|" * len(short) + "---|")
    for name, c in by_model.items():
        print(f"| {name} | {sum(c.values())} | " + " | ".join(str(c[v]) for v in verdicts) + f" | {seconds[name]:.0f} |")
    print("\nby kernel kind:")
    for kind, c in sorted(by_kind.items()):
        print(f"  {kind:24s} " + ", ".join(f"{v.split(': ')[-1]} {c[v]}" for v in verdicts if c[v]))
    for line in notable:
        print("  " + line)
    if skipped:
        print(f"\nskipped (more than {args.max_waits} wait_flags): {', '.join(skipped)}")
    if stopped is not None:
        print(f"\nstopped (a signal) during {stopped}; not run: {', '.join(names[names.index(stopped):])}")


if __name__ == "__main__":
    with results.recorded("wait_flag_deletion"):
        main()
