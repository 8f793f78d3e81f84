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

A run is of the deleted wait's kernel alone (`KernelRuns`): the model runs once undeleted, which
records every launch's arguments before and after it (copies, aliasing kept); each deletion then
compiles only its kernel and replays that kernel's launches on copies of the recorded arguments,
the race check on. The other kernels are unchanged, so their launches, and the arguments they
hand to this one, are those of the recorded run; a race or a deadlock is a property of one
launch (race.py checks the pipes of one core within a launch). `WholeModel`, the reference, runs
the whole modified model each time (about 20x slower on the small models, too slow for bert /
gpt2 / vit / llama / resnet); tests/test_wait_flag_deletion.py checks both give the same
verdicts.

    OPENBLAS_NUM_THREADS=1 python benchmarks/wait_flag_deletion.py [--models mlp_small,...] [--dtype fp16]
        [--max-waits 2000] [--write-results]

prints one row per model and outcome, one per kernel kind, and every case that is not detected or
redundant. Models with more than `--max-waits` wait_flags are skipped and named (about two
replays of one kernel per wait_flag, plus one run of the model).
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
from ascendir.hardware.config import load_target  # noqa: E402
from ascendir.interpreter import simulate  # noqa: E402
from ascendir.interpreter.check import race  # noqa: E402
from ascendir.interpreter.check.invariants import check  # noqa: E402
from ascendir.interpreter.sim.chip import compile_module  # noqa: E402

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


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def _kind(e: AscendirError) -> str:
    text = str(e)
    return "race" if "race" in text else "deadlock" if "deadlock" in text else "error"


@contextlib.contextmanager
def _history(unbounded: bool):
    """The race check's history bound (race.KEEP ranges per buffer and pipe), or none."""
    keep = race.KEEP
    if unbounded:
        race.KEEP = 10**9
    try:
        yield
    finally:
        race.KEEP = keep


class WholeModel:
    """A run is the whole (modified) model with numerics; the reference method."""

    def __init__(self, module, weights, inputs: dict[str, np.ndarray]):
        self.module, self.weights, self.inputs = module, weights, inputs
        kind, self.reference = self._simulate()
        assert kind == "clean", f"the unmodified model fails: {self.reference}"

    def _simulate(self) -> tuple[str, dict | None]:
        try:
            return "clean", simulate(self.module, self.weights, self.inputs, TARGET).outputs
        except AscendirError as e:
            return _kind(e), None

    def run(self, kernel: KernelOp, unbounded: bool = False) -> tuple[str, bool]:
        """(clean / race / deadlock / error, whether the outputs equal the unmodified run's)."""
        with _history(unbounded):
            kind, out = self._simulate()
        return kind, out is not None and _same(out, self.reference)


def _copies(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Copies of `arrays` that alias one another as the originals do (views of one buffer stay
    views of one copy): a launch may get two views of one GM buffer."""
    roots: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    out = []
    for a in arrays:
        root = a
        while isinstance(root.base, np.ndarray):
            root = root.base
        if not root.flags.c_contiguous or root.dtype.hasobject:
            out.append(a.copy())
            continue
        if id(root) not in roots:
            roots[id(root)] = (root, root.copy())
        src, dup = roots[id(root)]
        offset = a.__array_interface__["data"][0] - src.__array_interface__["data"][0]
        out.append(np.ndarray(a.shape, a.dtype, buffer=dup, offset=offset, strides=a.strides))
    return out


class KernelRuns:
    """A run is the deleted wait's kernel alone, replaying its launches of one recorded numerics
    run of the unmodified model (see the module docstring)."""

    def __init__(self, module, weights, inputs: dict[str, np.ndarray]):
        self.hw = load_target(TARGET)
        self.prog = compile_module(module, self.hw, weights)
        self.launches: dict[str, list[tuple[list, list, list]]] = collections.defaultdict(list)
        for name, kp in self.prog.kernels.items():
            kp.run = self._recorder(name, kp.run)
        with np.errstate(all="ignore"):
            _, records = self.prog.run(inputs)
        for r in records:
            check(r, self.hw)
        # replays check races on every launch: a memo entry would skip the check for a launch
        # like one already checked (the unmodified kernel's)
        self.prog.memo = None

    def _recorder(self, name: str, run):
        def recorded(args, tags=None, **kw):
            before = _copies(args)
            rec = run(args, tags, **kw)
            self.launches[name].append((before, list(tags) if tags is not None else None, _copies(args)))
            return rec
        return recorded

    def run(self, kernel: KernelOp, unbounded: bool = False) -> tuple[str, bool]:
        """(clean / race / deadlock / error, whether every launch wrote what it wrote unmodified)."""
        name = kernel.sym_name.data
        same = True
        with _history(unbounded), np.errstate(all="ignore"):
            try:
                kp = type(self.prog.kernels[name])(self.prog, kernel)
                for before, tags, after in self.launches[name]:
                    args = _copies(before)
                    check(kp.run(args, tags), self.hw)
                    same = same and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(args, after))
            except AscendirError as e:
                return _kind(e), False
        return "clean", same


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


def classify(runs: WholeModel | KernelRuns, kernel: KernelOp, wait: WaitFlagOp) -> str:
    """The verdict on deleting `wait` from `kernel` (see the module docstring)."""
    with _removed([wait]):
        kind, same = runs.run(kernel, unbounded=True)
        if kind != "clean":  # the bounded check tells detected from missed
            bounded, _ = runs.run(kernel)
            if bounded != "clean":
                return f"detected: {bounded}"
            return "missed by the history bound" if kind == "race" else f"unbounded only: {kind}"
    if not same:
        return "outputs changed"
    partner = _matching_set(kernel, wait)
    with _removed([wait] + ([partner] if partner is not None else [])):
        pair, _ = runs.run(kernel)
    if pair in ("race", "deadlock"):
        return "redundant: covered by the queue"
    return "redundant: pair, at kernel level" if isinstance(wait.parent_op(), KernelOp) else "redundant: pair, in a loop"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated tests/data model names (default: all)")
    ap.add_argument("--dtype", default="fp16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--max-waits", type=int, default=2000, help="skip models with more wait_flags than this")
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
    # done so far, which still make the tables: printed, never written as the section (exit 130)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        for name in names:
            stopped = name
            t0 = time.perf_counter()
            try:
                module, weights = compile_model(data / name / "model.onnx", TARGET, opt_level="O2", dtype=args.dtype)
            except AscendirError as e:  # e.g. a model that refuses --dtype fp16
                skipped.append(f"{name} (does not compile at {args.dtype}: {str(e)[:160]})")
                print(f"{name}: skipped: {e}", file=sys.stderr, flush=True)
                continue
            flags = _flags(module)
            if len(flags) > args.max_waits:
                skipped.append(f"{name} ({len(flags)} wait_flags > --max-waits {args.max_waits})")
                print(f"{name}: {len(flags)} wait_flags > --max-waits {args.max_waits}, skipped", file=sys.stderr, flush=True)
                continue
            runs = KernelRuns(module, weights, _inputs(data / name))
            mine, kinds, lines = collections.Counter(), collections.defaultdict(collections.Counter), []
            for kernel, index, wait in flags:
                verdict = classify(runs, kernel, wait)
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
        print(f"\nskipped: {'; '.join(skipped)}")
    if stopped is not None:
        print(f"\nstopped (a signal) during {stopped}; not run: {', '.join(names[names.index(stopped):])}")
        sys.exit(130)  # (results.recorded writes no section when main raises, SystemExit included)


if __name__ == "__main__":
    with results.recorded("wait_flag_deletion"):
        main()
