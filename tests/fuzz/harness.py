"""Run one fuzz case in a capped worker and classify what happened.

A case is a command line of `ascendir` or `ascendir-opt` and the files it reads (written to a
fresh directory). The parent (which generated the case) forks; the child caps its address space
(resource.setrlimit RLIMIT_AS: `mem_mb` above what the parent already maps) and its CPU time,
sends stdout to /dev/null and stderr to a file, and calls the tool's `main` in-process, so a case
costs a fork, not an interpreter start-up. The parent waits up to `timeout` seconds, then kills it.

Outcomes (the contract of docs/architecture.md "Errors" and issue 23's goal):

| kind      | meaning                                                                           |
|-----------|-----------------------------------------------------------------------------------|
| success   | exit 0                                                                            |
| clean     | exit 2 and one line `error: ...` of at most 500 characters                        |
| message   | exit 2 but several lines, or longer than 500 characters                           |
| internal  | `internal error:` (exit 1), an escaped exception, or any other exit status        |
| crash     | death by a signal (other than the memory cap's)                                   |
| hang      | still running after `timeout` seconds (killed)                                    |
| memory    | out of memory under the cap (MemoryError), or a peak RSS above the cap            |
"""

from __future__ import annotations

import os
import re
import resource
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

    def signature(self) -> str:
        """The message with numbers, quoted names and paths blanked: one entry per distinct cause."""
        s = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", self.message)
        s = re.sub(r"/[^\s:,)]+", "/_", s)
        s = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", s)
        return f"{self.kind}: {s[:160]}"


def warm() -> None:
    """Import what every case needs once in the parent, so each forked worker starts warm (a
    worker importing the compiler itself would spend about a second per case)."""
    import importlib
    import pkgutil

    import ascendir
    import onnx.reference  # noqa: F401 - import-time folding

    for info in pkgutil.walk_packages(ascendir.__path__, "ascendir."):
        if info.name.endswith("plots"):
            continue  # matplotlib: only --plots needs it
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional module; the case will say what is wrong
            pass


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(case: Case, workdir: Path, stderr_path: Path, mem_mb: int, cpu_s: int) -> None:
    """Runs in the forked worker; never returns."""
    status = 70
    try:
        limit = _vm_bytes() + mem_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (2**31, 2**31))  # no case writes a 2 GB output
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.chdir(workdir)
        null = os.open(os.devnull, os.O_WRONLY)
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(null, 1)
        os.dup2(err, 2)
        # under pytest sys.stdout / sys.stderr are capture objects, not fds 1 / 2
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
        os.environ["COLUMNS"] = "120"
        args = [a.replace("{dir}", str(workdir)) for a in case.argv]
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
        os._exit(status)


_warmed: list[bool] = []


def run_case(case: Case, timeout: float = 30.0, mem_mb: int = 2048, root: Path | None = None) -> Outcome:
    """Run `case` in a forked, capped worker (see the module docstring).

    `timeout` (s, wall clock) and `mem_mb` (MiB of address space above the parent's, and the peak
    RSS over which a success still counts as `memory`) are the caps.
    """
    if not _warmed:
        warm()
        _warmed.append(True)
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
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(case, workdir, stderr_path, mem_mb, int(timeout) + 5)
        killed = False
        while True:
            done, wstatus, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - start > timeout:
                os.kill(pid, signal.SIGKILL)
                _, wstatus, usage = os.wait4(pid, 0)
                killed = True
                break
            time.sleep(0.002 if time.monotonic() - start < 0.05 else 0.01)
        seconds = time.monotonic() - start
        rss_mb = usage.ru_maxrss / 1024
        try:
            text = stderr_path.read_bytes().decode("utf-8", "replace")
        except OSError:
            text = ""
    return classify(text, None if killed or os.WIFSIGNALED(wstatus) else os.WEXITSTATUS(wstatus),
                    killed, os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) and not killed else None,
                    seconds, rss_mb, mem_mb)


_NOTE = re.compile(r"^(ascendir-opt: )?note: |^wrote |^warning: ")


def classify(stderr: str, status: int | None, killed: bool, signum: int | None, seconds: float, rss_mb: float,
             mem_mb: int) -> Outcome:
    """The outcome of a worker from its stderr text and how it ended (see the module docstring)."""
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
    if status == 0:
        return Outcome("success", status, shown, seconds, rss_mb)
    if status == 2:
        one = len(errors) == 1 and len(errors[0]) <= MAX_MESSAGE and re.match(r"^(ascendir-opt: )?error: ", errors[0])
        return Outcome("clean" if one else "message", status, shown if one else f"[{len(errors)} lines, {len(stderr)} chars] {shown}",
                       seconds, rss_mb)
    return Outcome("internal", status, shown, seconds, rss_mb)
