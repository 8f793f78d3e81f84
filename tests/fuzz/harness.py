"""Run one fuzz case in a capped worker and classify what happened.

A case is a command line of `ascendir` or `ascendir-opt` and the files it reads (written to a
fresh directory). The parent (which generated the case) forks; the child caps its address space
(resource.setrlimit RLIMIT_AS: `mem_mb` above what the parent already maps) and its CPU time,
sends stdout to /dev/null and stderr to a file, and calls the tool's `main` in-process, so a case
costs a fork, not an interpreter start-up. The parent waits up to `timeout` seconds (woken by the
worker's end), then kills it. The parent is warmed once (`warm`: every module a tool imports,
the shipped targets, one small compile and simulation) and its objects are frozen for the fork
(gc.freeze), so a worker spends its time on the case, not on re-importing or re-filling caches.
`Outcome.reached` says which parsers the case got past (REACHED), for the tables' share of
cases that exercise the code behind the parser.

Outcomes (the contract of docs/architecture.md "Errors" and issue 23's goal):

| kind      | meaning                                                                           |
|-----------|-----------------------------------------------------------------------------------|
| success   | exit 0; or exit 1 with a FAIL verdict against the case's own expected outputs     |
| clean     | exit 2 and one line `error: ...` of at most 500 characters                        |
| message   | exit 2 but several lines, or longer than 500 characters                           |
| internal  | `internal error:` (exit 1), an escaped exception, a FAIL against onnxruntime, or  |
|           | any other exit status                                                             |

(`run` exits 1 on a FAIL verdict, as documented; against the case's own --expected / --inputs
outputs that is the tool working, against onnxruntime it is ascendir computing wrong numbers.)
| crash     | death by a signal (other than the memory cap's)                                   |
| hang      | still running after `timeout` seconds (killed)                                    |
| memory    | out of memory under the cap (MemoryError), or a peak RSS above the cap            |
"""

from __future__ import annotations

import gc
import os
import re
import resource
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # forking a process with BLAS threads hangs

KINDS = ("success", "clean", "message", "internal", "crash", "hang", "memory")
BAD_KINDS = frozenset({"message", "internal", "crash", "hang", "memory"})
MAX_MESSAGE = 500
REACHED_FILE = ".fuzz-reached"  # written by the worker in the case's directory: the REACHED steps it passed
STDOUT_FILE = ".stdout"  # the worker's stdout (the verdict's first line is read from it)


@dataclass(frozen=True)
class Case:
    """A command line (`tool` is "ascendir" or "ascendir-opt"; `{dir}` in an argument is the
    case's directory) and the files it needs, by name relative to that directory (bytes, or a
    callable writing the file at the given path, e.g. a sparse file)."""

    tool: str
    argv: tuple[str, ...]
    files: Mapping[str, bytes | Callable[[Path], None]] = field(default_factory=dict)
    note: str = ""  # what the generator did, for the report of a bad case

    def describe(self) -> str:
        sizes = ", ".join(f"{k} ({len(v) if isinstance(v, bytes) else 'written'})" for k, v in self.files.items())
        return f"{self.tool} {' '.join(self.argv)}  [{self.note}] files: {sizes}"


@dataclass
class Outcome:
    kind: str
    status: int | None  # exit status, or None when killed
    message: str  # the last stderr line (truncated to 300 characters)
    seconds: float
    rss_mb: float  # peak resident set of the worker
    reached: frozenset[str] = frozenset()  # the REACHED steps the worker got past

    def signature(self) -> str:
        """The message with numbers, quoted names and paths blanked: one entry per distinct cause."""
        s = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", self.message)
        s = re.sub(r"/[^\s:,)]+", "/_", s)
        s = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", s)
        return f"{self.kind}: {s[:160]}"


# What the tools import on first use (found by listing the modules a worker added to
# sys.modules over 150 cases of each fuzzer): folding, --plots (matplotlib: ~0.5 s a case),
# the IR printer and parser of `ascendir-opt`, rich's emoji table, zip archives' code page.
LAZY_IMPORTS = ("onnx.reference", "onnx.reference.ops", "matplotlib", "matplotlib.pyplot", "xdsl.syntax_printer",
                "xdsl.targets.mlir", "xdsl.frontend.mlir", "click._textwrap", "rich._emoji_codes", "encodings.cp437")


def warm() -> None:
    """Import and build once in the parent what every case needs, so each forked worker starts
    warm (a worker importing the compiler itself would spend about a second per case; the lazy
    imports and caches below cost 20-40 ms per case when each worker redoes them).

    Only state a fresh `ascendir` process would build for itself goes here: the modules, the
    shipped targets (parsed and checked, a case's own TOML file is read anew: its path is new),
    the report schema's validator. What a case reads is never cached (its files are new)."""
    import importlib
    import pkgutil

    import ascendir

    for info in pkgutil.walk_packages(ascendir.__path__, "ascendir."):
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional module; the case will say what is wrong
            pass
    for name in LAZY_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - not installed: the case that needs it says so
            pass
    from ascendir.api.report_schema import _validator
    from ascendir.hardware.config import TARGETS, load_target

    _validator()  # jsonschema, imported and built by every `run --report` and `report`
    for name in TARGETS:
        load_target(name)  # the parsed TOML is cached; the checks fill the ABC caches
    _exercise()


def _exercise() -> None:
    """Compile, simulate, print and parse a small well-formed model once in the parent (library
    calls: no signal handlers, no change of directory), so every worker starts with the caches a
    run fills: mostly the ABC caches of isinstance checks on xDSL's IR classes, which cost a
    worker that fills them anew ~85 ms per simulated case. The cases themselves are unchanged."""
    import tempfile

    import numpy as np
    from xdsl.parser import Parser

    from ascendir.driver import compile_model, print_ir
    from ascendir.interpreter import simulate
    from ascendir.session import make_context

    from .tiling_cases import attention_ir
    from .toml_cases import tiny_model

    try:
        with tempfile.TemporaryDirectory(prefix="ascendir-fuzz-warm-") as d:
            path = Path(d) / "tiny.onnx"
            path.write_bytes(tiny_model())
            x = {"x": np.linspace(-1, 1, 8 * 64, dtype=np.float32).reshape(8, 64)}
            for target, dtype in (("ascend910b2", "fp32"), ("ascend910a", "fp16")):
                module, weights = compile_model(path, target, opt_level="O2", dtype=dtype)
                simulate(module, weights, x, target)
                Parser(make_context(), print_ir(module)).parse_module().verify()
            Parser(make_context(), attention_ir("f16").decode()).parse_module().verify()
    except Exception as e:  # noqa: BLE001 - a warm-up only: the cases will meet whatever this met
        print(f"fuzz harness: the warm-up run failed ({type(e).__name__}: {e})", file=sys.stderr)


# What each fuzzer means to reach: its input parsed, so the case exercises what lies past the
# parser (the share of cases that do is in the tables: a faster fuzzer must not reach less).
# The names are the fuzzers of tests/fuzz; a probe records its name when the step returns.
REACHED = {
    "onnx": "the ONNX model imported into nn (frontends/onnx import_onnx returned)",
    "ir": "the IR text parsed into a module (xDSL Parser.parse_module returned)",
    "toml": "the target file read as TOML (hardware/config.py checks its values)",
    "cli": "the command line parsed (the subcommand's function called)",
    "tiling": "the --tiling spec parsed (tiling.parse_tiling returned)",
}


def _probe(reached: set[str]) -> None:
    """In the worker: wrap the step each fuzzer must get past (REACHED) so it records its name in
    `reached` when it returns (the import, the IR parse, the --tiling spec) or when the step after
    it starts (the checks of a TOML file that parsed, the subcommand of a parsed command line).
    The wrappers replace module and class attributes the tools look up when they call."""
    import click
    from xdsl.parser import Parser

    import ascendir.frontends.onnx as onnx_frontend
    from ascendir.conversion.nn_to_ascend import tiling
    from ascendir.frontends.onnx import importer
    from ascendir.hardware import config

    def wrap(owner, attr: str, name: str, when=lambda *a, **k: True, at_entry: bool = False) -> None:
        inner = getattr(owner, attr)

        def probe(*args, **kwargs):
            if at_entry and when(*args, **kwargs):
                reached.add(name)
            out = inner(*args, **kwargs)
            if not at_entry and when(*args, **kwargs):
                reached.add(name)
            return out

        setattr(owner, attr, probe)

    wrap(importer, "import_onnx", "onnx")
    onnx_frontend.import_onnx = importer.import_onnx
    wrap(Parser, "parse_module", "ir")
    wrap(config, "_validate", "toml", lambda raw, path: Path(path).suffix == ".toml" and Path(path).parent != config.CHIPS,
         at_entry=True)
    wrap(tiling, "parse_tiling", "tiling")
    wrap(click.Command, "invoke", "cli", lambda self, ctx: not isinstance(self, click.Group), at_entry=True)


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(case: Case, workdir: Path, stderr_path: Path, mem_mb: int, cpu_s: int) -> None:
    """Runs in the forked worker; never returns."""
    status = 70
    reached: set[str] = set()
    try:
        limit = _vm_bytes() + mem_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (2**31, 2**31))  # no case writes a 2 GB output
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.chdir(workdir)
        out = os.open(workdir / STDOUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # under pytest sys.stdout / sys.stderr are capture objects, not fds 1 / 2
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
        os.environ["COLUMNS"] = "120"
        args = [a.replace("{dir}", str(workdir)) for a in case.argv]
        _probe(reached)
        if case.tool == "ascendir":
            from ascendir.api.cli import main

            main.main(args=args, prog_name="ascendir", standalone_mode=True)
        else:
            from ascendir.api.opt import main

            main(args)
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except MemoryError:
        status = 71
    except BaseException as e:  # noqa: BLE001 - the tool let something escape: a bug
        try:
            print(f"escaped: {type(e).__name__}: {e}", file=sys.stderr)
        except BaseException:  # noqa: BLE001
            pass
        status = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        try:
            (workdir / REACHED_FILE).write_text(" ".join(sorted(reached)))
        except BaseException:  # noqa: BLE001 - e.g. at the file-size cap: counts as not reached
            pass
        os._exit(status)


_warmed: list[bool] = []


def ensure_warm() -> None:
    """`warm` once per process (run_case calls it; a process that forks runners of cases calls it
    first, so each of them starts warm)."""
    if not _warmed:
        warm()
        _warmed.append(True)


def run_case(case: Case, timeout: float = 30.0, mem_mb: int = 2048, root: Path | None = None) -> Outcome:
    """Run `case` in a forked, capped worker (see the module docstring).

    `timeout` (s, wall clock) and `mem_mb` (MiB of address space above the parent's, and the peak
    RSS over which a success still counts as `memory`) are the caps.
    """
    ensure_warm()
    with tempfile.TemporaryDirectory(prefix="ascendir-fuzz-", dir=root) as d:
        workdir = Path(d)
        for name, content in case.files.items():
            path = workdir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                content(path)
        stderr_path = workdir / ".stderr"
        sys.stdout.flush()
        sys.stderr.flush()
        # the parent's objects go to the permanent generation for the fork: the worker's
        # collections then leave them (and their copy-on-write pages) alone
        gc.freeze()
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(case, workdir, stderr_path, mem_mb, int(timeout) + 5)
        gc.unfreeze()
        killed = False
        # woken when the worker ends (a pidfd), not by polling: a case's time is its own
        pidfd = os.pidfd_open(pid)
        try:
            ready = select.select([pidfd], [], [], timeout)[0]
        finally:
            os.close(pidfd)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            killed = True
        _, wstatus, usage = os.wait4(pid, 0)
        seconds = time.monotonic() - start
        rss_mb = usage.ru_maxrss / 1024
        try:
            text = stderr_path.read_bytes().decode("utf-8", "replace")
        except OSError:
            text = ""
        try:
            reached = frozenset((workdir / REACHED_FILE).read_text().split())
        except OSError:
            reached = frozenset()
        try:
            with open(workdir / STDOUT_FILE, "rb") as f:
                head = f.read(200).decode("utf-8", "replace")
        except OSError:
            head = ""
    outcome = classify(text, None if killed or os.WIFSIGNALED(wstatus) else os.WEXITSTATUS(wstatus),
                       killed, os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) and not killed else None,
                       seconds, rss_mb, mem_mb, head)
    outcome.reached = reached
    return outcome


_NOTE = re.compile(r"^(ascendir-opt: )?note: |^wrote |^warning: ")
_OWN_FAIL = re.compile(r"^FAIL: \d+ outputs? against (?!onnxruntime)", re.MULTILINE)  # the case's own expected outputs


def classify(stderr: str, status: int | None, killed: bool, signum: int | None, seconds: float, rss_mb: float,
             mem_mb: int, stdout_head: str = "") -> Outcome:
    """The outcome of a worker from its stderr text, the start of its stdout (where `run` prints
    its verdict, unless stdout holds an output file) and how it ended (see the module docstring)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if not _NOTE.match(ln)]
    last = (errors or lines or [""])[-1]
    shown = last[:300]
    if killed:
        return Outcome("hang", None, shown, seconds, rss_mb)
    if signum is not None:
        kind = "memory" if signum in (signal.SIGKILL, signal.SIGSEGV) and rss_mb > mem_mb * 0.9 else "crash"
        return Outcome(kind, None, f"killed by signal {signum}: {shown}", seconds, rss_mb)
    if status == 71 or "out of memory" in stderr or "MemoryError" in stderr:
        return Outcome("memory", status, shown, seconds, rss_mb)
    if rss_mb > mem_mb:
        return Outcome("memory", status, shown, seconds, rss_mb)
    if status == 0 or (status == 1 and (_OWN_FAIL.match(stdout_head) or _OWN_FAIL.search(stderr))):
        return Outcome("success", status, shown, seconds, rss_mb)
    if status == 2:
        one = len(errors) == 1 and len(errors[0]) <= MAX_MESSAGE and re.match(r"^(ascendir-opt: )?error: ", errors[0])
        return Outcome("clean" if one else "message", status, shown if one else f"[{len(errors)} lines, {len(stderr)} chars] {shown}",
                       seconds, rss_mb)
    return Outcome("internal", status, shown, seconds, rss_mb)
