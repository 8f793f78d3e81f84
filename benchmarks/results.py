"""docs/results.md: the figures the benchmark scripts print, one section per script, written by
the scripts themselves, never by hand.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/calibration.py --quick --write-results

A script given `--write-results` prints as usual and, when it finishes without error, replaces
its own section of docs/results.md with what it printed (stdout only: progress goes to
stderr), the command that produced it, the machine it ran on (cores, CPU, Python, numpy, xDSL)
and the ascendir commit. Every other section is left as it is. A section no run has written yet
says so and gives the command that writes it; `benchmarks/write_results.py` runs the quick ones.

The sections and their order are SECTIONS below; a script not listed there cannot write.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"
FLAG = "--write-results"


@dataclass(frozen=True)
class Section:
    """One script's section: `title` (what its figures are), `quick` (the arguments of the run
    benchmarks/write_results.py makes, a few minutes at most on a 2-core machine; None: the script
    has no run that short) and `full` (the arguments of the complete run)."""

    script: str
    title: str
    quick: tuple[str, ...] | None
    full: tuple[str, ...] = ()


SECTIONS: dict[str, Section] = {s.script: s for s in (
    Section("calibration", "Cost model vs published Ascend measurements (reference §7)", ()),
    Section("corpus", "Corpus models: phase times, simulated cycles, error vs onnxruntime", ()),
    Section("families", "Model families (tests/data/families): error vs onnxruntime, wall time, cycles", ()),
    Section("precision", "Precision policy: output error per model under --dtype fp32 / fp16 / bf16", ()),
    Section("matmul_4096", "4096³ fp16 matmul on 910B2: cycles and % of cube peak per L2 model", ()),
    Section("matmul_ladder", "Matmul optimisation ladder, 4096³ fp16 on 910B2", ()),
    Section("interpreter_speed", "Interpreter speed: tile-ops/s, 7B-shaped model wall time", ("--quick",)),
    Section("numerics_speed", "Numerics speed: a 7B-shaped layer with numerics against its MatMuls in numpy", ("--layers", "0")),
    Section("fusion", "What fusion buys on a LLaMA-2-7B-shaped layer (timing-only, 910B2, f16)", ("--quick",)),
    Section("tiling_search", "choose-tiling: candidates scored, search time, estimate vs simulated", ("--no-sim",)),
    Section("llama7b_shape_only", "LLaMA-2-7B-shaped model compiled --shape-only: wall time and peak RSS", ()),
    Section("opset_sweep", "Opset sweep: claimed ops x opset versions 13..newest vs onnxruntime", ()),
    Section("moe", "MoE layer experts: grouped vs gathered vs dense (analytic and simulated, 910B2, fp16)", ()),
    Section("quant", "Quantized LLaMA-2-7B-shaped layer: fp16 vs W8A8 vs W8A16 vs W4A16 (timing-only, 910B2)", ("--prefill", "0")),
    Section("tp", "Tensor parallelism and MC2 on LLaMA-7B/70B-shaped layers (fp16, 910B2, Atlas 800 A2)", None),
    Section("serve", "Simulated LLM serving: TTFT, TPOT, cache in place, roofline (7B-shaped, fp16, 910B2)", None),
    Section("paged_kv", "Paged KV cache: a decode step with blocks of 16 / 64 / 128 against the contiguous cache (7B-shaped, fp16, 910B2)",
            ("--layers", "1"), ("--layers", "1", "--batch", "1", "8")),
    Section("trace_scale", "`ascendir run --trace` on a 7B-shaped model: overhead and peak memory", None),
    Section("run_models", "`ascendir run` wall time on corpus models",
            ("--models", "mlp_small,llama_small,llama_small_dynamo")),
    Section("fuzz_campaign", "Fuzz campaign: outcomes per fuzzer, rate, projection to 10^5 cases (issue 23)",
            ("--cases", "200"), ("--cases", "100000")),
    Section("wait_flag_deletion", "wait_flag deletion: race detected or flag redundant, per corpus model (910B2, fp16)",
            ("--models", "mlp_small")),
)}


def command(script: str, args: list[str] | tuple[str, ...]) -> str:
    """The shell command that reruns `script` with `args` and writes its section."""
    argv = [a for a in args if a != FLAG]
    return " ".join(["OPENBLAS_NUM_THREADS=1 .venv/bin/python", f"benchmarks/{script}.py", *map(shlex.quote, argv), FLAG])


def machine() -> str:
    """One line: cores, CPU model, OS, Python, numpy, xDSL, and the ascendir commit (with
    '+ local changes' when the worktree differs from it)."""
    import numpy as np

    try:
        from importlib.metadata import version

        xdsl = version("xdsl")
    except Exception:  # not installed as a distribution
        xdsl = "?"
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = names[0].strip() if names else cpu
    return (f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}, xdsl {xdsl}; ascendir {_commit()}")


def _commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short=10", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "ascendir", "benchmarks")
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"
    return f"commit {head}" + (" + local changes" if dirty else "")


def _begin(name: str) -> str:
    return f"<!-- BEGIN {name} -->"


def _end(name: str) -> str:
    return f"<!-- END {name} -->"


def _pending(s: Section) -> str:
    lines = [f"## {s.title}", "", "Not generated yet. Run:", "", "```sh", command(s.script, s.full), "```"]
    if s.quick is None:
        lines += ["", "(no quick form: `benchmarks/write_results.py` does not run it)"]
    return "\n".join(lines)


def _head() -> str:
    return (
        "# Results\n\n"
        "Generated by the benchmark scripts (`benchmarks/results.py`); do not edit by hand. Each\n"
        "section is what one script printed, with the command that produced it and the machine it\n"
        "ran on: rerun the command to refresh that section alone. `benchmarks/write_results.py`\n"
        "reruns the quick forms of all of them. Simulated cycles do not depend on the machine;\n"
        "wall times do (the machine these ran on may have been shared). The ONNX conformance\n"
        "table is generated the same way, by `benchmarks/conformance.py`, into docs/onnx-support.md.\n"
    )


def _skeleton() -> str:
    body = "\n\n".join(f"{_begin(n)}\n{_pending(s)}\n{_end(n)}" for n, s in SECTIONS.items())
    return f"{_head()}\n{body}\n"


def render(name: str, cmd: str, text: str, seconds: float, load: float | None = None) -> str:
    """The markdown of section `name`: title, command, machine, then `text` verbatim. `load`:
    the 1-minute load average when the run started (wall times stretch on a busy machine)."""
    s = SECTIONS[name]
    return "\n".join([
        f"## {s.title}", "",
        f"Command: `{cmd}`  ",
        f"Machine: {machine()}  ",
        f"Run: {seconds:.0f} s wall" + (f", load average {load:.1f} at its start" if load is not None else "")
        + ("" if cmd == command(name, s.full) else
                                         f"; a shorter form of the full run, left to a longer session: `{command(name, s.full)}`"),
        "", "```text", text.strip("\n"), "```",
    ])


def write_section(name: str, cmd: str, text: str, seconds: float, path: Path | None = None,
                  load: float | None = None) -> None:
    """Replace section `name` of `path` (default RESULTS; created with every section pending if absent) with
    `text`, printed by `cmd` in `seconds`. Written whole to a temporary file, then renamed.

    Raises:
        KeyError: `name` is not in SECTIONS.
    """
    path = path or RESULTS
    if name not in SECTIONS:
        raise KeyError(f"{name}: not a section of {path.name} (add it to benchmarks/results.py SECTIONS)")
    doc = path.read_text() if path.exists() else ""
    if "<!-- BEGIN " not in doc:
        doc = _skeleton()
    doc = _head() + "\n" + doc[doc.find("<!-- BEGIN "):]  # the text above the sections is this module's
    block = f"{_begin(name)}\n{render(name, cmd, text, seconds, load)}\n{_end(name)}"
    pat = re.compile(re.escape(_begin(name)) + r".*?" + re.escape(_end(name)), re.S)
    if pat.search(doc):
        doc = pat.sub(lambda _: block, doc, count=1)
    else:  # a section added to SECTIONS after the file was made
        doc = doc.rstrip("\n") + f"\n\n{block}\n"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(doc)
    tmp.replace(path)


def add_flag(ap: argparse.ArgumentParser) -> None:
    """Give a benchmark script the --write-results flag."""
    ap.add_argument(FLAG, action="store_true",
                    help="also write what this run prints into its section of docs/results.md")


class _Tee(io.TextIOBase):
    def __init__(self, out):
        self.out, self.buf = out, io.StringIO()

    def write(self, s: str) -> int:
        self.buf.write(s)
        return self.out.write(s)

    def flush(self) -> None:
        self.out.flush()


@contextlib.contextmanager
def recorded(script: str) -> Iterator[None]:
    """Around a benchmark's main(): when the command line has --write-results (add_flag lets
    argparse accept it), what main prints to stdout goes to the terminal and, if main ends
    without an exception (SystemExit included), into section `script` of docs/results.md, with
    the command line this process was started with."""
    if FLAG not in sys.argv[1:]:
        yield
        return
    tee, t0, load = _Tee(sys.stdout), time.perf_counter(), os.getloadavg()[0]
    with contextlib.redirect_stdout(tee):
        yield
    write_section(script, command(script, sys.argv[1:]), tee.buf.getvalue(), time.perf_counter() - t0, load=load)
    print(f"wrote section '{script}' of {RESULTS}", file=sys.stderr)
