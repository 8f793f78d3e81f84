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

    OPENBLAS_NUM_THREADS=1 python benchmarks/wait_flag_deletion.py [--models mlp_small,...] [--dtype fp16]

prints one row per outcome and per kernel kind, and every case that is not detected or redundant.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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


def _flags(module) -> list[tuple[str, int, WaitFlagOp]]:
    """(kernel name, index of the wait within the kernel, op) of every wait_flag."""
    out = []
    for k in module.ops:
        if isinstance(k, KernelOp):
            waits = [op for op in k.walk() if isinstance(op, WaitFlagOp)]
            out += [(k.sym_name.data, i, w) for i, w in enumerate(waits)]
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


def _without(module, kernel_name: str, index: int, with_set: bool):
    clone = module.clone()
    kernel = next(k for k in clone.ops if isinstance(k, KernelOp) and k.sym_name.data == kernel_name)
    wait = [op for op in kernel.walk() if isinstance(op, WaitFlagOp)][index]
    doomed = [wait]
    if with_set:
        s = _matching_set(kernel, wait)
        if s is not None:
            doomed.append(s)
    for op in doomed:
        op.detach()
        op.erase()
    return clone


def classify(module, weights, inputs, reference: dict, kernel: str, index: int, wait: WaitFlagOp) -> str:
    kind, out = _run(_without(module, kernel, index, False), weights, inputs)
    if kind != "clean":
        return f"detected: {kind}"
    if not _same(out, reference):
        return "outputs changed"
    again, _ = _run(_without(module, kernel, index, False), weights, inputs, unbounded=True)
    if again == "race":
        return "missed by the history bound"
    pair, _ = _run(_without(module, kernel, index, True), weights, inputs)
    if pair in ("race", "deadlock"):
        return "redundant: covered by the queue"
    return "redundant: pair, at kernel level" if isinstance(wait.parent_op(), KernelOp) else "redundant: pair, in a loop"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated tests/data model names (default: all)")
    ap.add_argument("--dtype", default="fp16", choices=["fp32", "fp16", "bf16"])
    args = ap.parse_args()
    data = ROOT / "tests" / "data"
    names = args.models.split(",") if args.models else sorted(p.name for p in data.iterdir() if (p / "model.onnx").exists())
    outcomes: collections.Counter = collections.Counter()
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    notable = []
    for name in names:
        module, weights = compile_model(data / name / "model.onnx", TARGET, opt_level="O2", dtype=args.dtype)
        inputs = _inputs(data / name)
        kind, reference = _run(module, weights, inputs)
        assert kind == "clean", f"{name}: the unmodified model fails: {reference}"
        flags = _flags(module)
        for kernel, index, wait in flags:
            verdict = classify(module, weights, inputs, reference, kernel, index, wait)
            outcomes[verdict] += 1
            by_kind[re.sub(r"_\d+$", "", kernel)][verdict] += 1
            if not verdict.startswith(("detected", "redundant")):
                notable.append(f"{name} {kernel} wait #{index} ({wait.src.data}->{wait.dst.data}, event {wait.event.value.data}): {verdict}")
        print(f"{name}: {len(flags)} wait_flags", flush=True)
    total = sum(outcomes.values())
    print(f"\n{total} wait_flag deletions over {len(names)} models ({args.dtype}, {TARGET})")
    for verdict, n in sorted(outcomes.items()):
        print(f"  {verdict:36s} {n:5d}  {100 * n / total:5.1f} %")
    print("\nby kernel kind:")
    verdicts = sorted(outcomes)
    for kind, c in sorted(by_kind.items()):
        print(f"  {kind:24s} " + ", ".join(f"{v.split(': ')[-1]} {c[v]}" for v in verdicts if c[v]))
    for line in notable:
        print("  " + line)


if __name__ == "__main__":
    main()
