"""`ascendir`: compile ONNX models for Ascend NPUs and run them in the cycle-accounting interpreter.

    ascendir compile model.onnx -o model.mlir [--emit nn|ascend] [--target 910b2] [-p PIPELINE]
    ascendir run model.onnx [--inputs in.npz] [--outputs out.npz] [--report r.json] [--trace t.json] [--plots DIR]
    ascendir report r.json [--trace t.json] [--plots DIR]
    ascendir calibrate [--quick]
    ascendir sweep model.onnx --target 910b2 --target 910b4 --dtype fp16 [--tiling m=128,n=256] [--tp 1,2,4] [-o t.csv] [--plot t.png]

Bad input (file, op, shape, IR) prints one line `error: ...` and exits with code 2. Output files
are written before the printed report; a reader that closes stdout early (`| head`) ends the
command silently with status 141, as SIGPIPE ends other Unix tools.
"""

from __future__ import annotations

import errno
import math
import os
import sys
import traceback
import warnings
from pathlib import Path

import click

from ascendir.errors import DEBUG_ENV, INTERNAL_ERROR_EXIT, AscendirError, AscendirWarning, internal_error, one_line
from ascendir.api.cli_common import (
    check_outputs, cli_console, closed_stdout, compile_options, launch_progress, plots_opt, prepare_plots, run_inputs,
    topology_opt, topology_target, verified, write_plot_files,
)
from ascendir.api.outputs import is_stdout, output_kind, read_bytes, write_output, write_text

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # BLAS threads thrash on small tiles


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


_show_warning = warnings.showwarning


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """An AscendirWarning is one line `warning: ...` on stderr; other warnings as Python shows them."""
    if issubclass(category, AscendirWarning):
        click.echo(f"warning: {message}", err=True)
    else:
        _show_warning(message, category, filename, lineno, file, line)


class _Group(click.Group):
    """Turns every AscendirError (and xDSL parse/verify error) and every bad command line into
    one line and exit code 2, and every AscendirWarning into one line `warning: ...`."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        warnings.showwarning = _one_line_warning
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except _NO_ARGS_IS_HELP as e:  # bare `ascendir`: the help text
            e.show()
            sys.exit(e.exit_code)
        except click.UsageError as e:  # click would print usage + hint + message on 4 lines
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            click.echo(f"error: {one_line(click.ClickException(e.format_message()))}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AscendirError as e:  # clipped: a message may quote a user's 100 kB value
            click.echo(f"error: {one_line(e)}", err=True)
            sys.exit(2)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:  # e.g. `ascendir compile m.onnx | head`
            closed_stdout()
        except MemoryError as e:  # numerics of a model larger than this machine's memory
            click.echo(f"error: out of memory: {' '.join(str(e).split())} (--timing-only moves no data)", err=True)
            sys.exit(2)
        except Exception as e:  # an internal bug: one line, the traceback only on request
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                # e.g. `ascendir compile m.onnx > /dev/full`: the machine's, not a bug (outputs
                # named by an option say which: api/outputs.open_output)
                click.echo(f"error: cannot write {e.filename or 'standard output'}: {e.strerror}", err=True)
                sys.exit(2)
            if os.environ.get(DEBUG_ENV):
                traceback.print_exc()
            click.echo(internal_error(e), err=True)
            sys.exit(INTERNAL_ERROR_EXIT)


@click.group(cls=_Group)
@click.version_option(package_name="ascendir")
def main() -> None:
    """Compile ONNX models to the Ascend NPU dialect and simulate them."""


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write IR here (weights go to OUT.weights.npz); default stdout.")
@click.option("--emit", type=click.Choice(["nn", "ascend"]), default="ascend", show_default=True)
@compile_options
def compile(model: Path, output: Path | None, emit: str, target: str, pipeline: str | None, opt_level: str, input_shapes,
            verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx, or .mlir IR) to the nn or ascend dialect."""
    from ascendir.driver import compile_model, parse_input_shapes, print_ir, weights_path

    from ascendir.session import Session
    from ascendir.transforms.nn.choose_tiling import log_summary

    if is_stdout(output):
        output = None  # `-o -`: the IR on stdout, as without -o
    if output is not None:
        check_outputs([output] if shape_only or output_kind(output) != "atomic" else [output, weights_path(output)],
                      run_inputs(model, target))
    session = Session(echo_notes=True)
    module, weights = compile_model(
        model, target, opt_level=f"O{opt_level}", pipeline=pipeline, emit=emit, input_shapes=parse_input_shapes(input_shapes),
        verify_numerics=verify_numerics, tiling=tiling, shape_only=shape_only, dtype=dtype, session=session,
    )
    if session.search_log:
        click.echo(log_summary(session.search_log), err=True)
    if verify_numerics:
        from ascendir.driver import parse_pipeline

        verified(parse_pipeline(pipeline, f"O{opt_level}", target, tiling), "random inputs (seed 0)", dtype=dtype)
    text = print_ir(module)
    if output is None:
        click.echo(text, nl=False)
        return
    if shape_only:  # the weights are zeros: writing them would only fill the disk
        write_text(output, text)
        click.echo(f"wrote {output} (--shape-only: no weights file)", err=True)
        return
    if output_kind(output) != "atomic":  # a FIFO, device or descriptor takes one stream: the IR
        write_text(output, text)
        click.echo(f"wrote {output}; not a regular file, so no weights were written "
                   f"(`-o FILE.mlir` writes them to FILE.weights.npz)", err=True)
        return
    write_output(weights_path(output), weights.save)
    write_text(output, text)
    click.echo(f"wrote {output} and {weights_path(output)} ({len(weights)} weights)", err=True)


@main.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="REPORT.json [B.json]")
@click.option("--diff", is_flag=True, help="Compare two reports (A.json B.json): settings, totals, and what changed per kernel and per pipe.")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), default=None,
              help="The Chrome trace of the same run (`ascendir run --trace`): --plots then draws the pipe timeline too.")
@plots_opt
def report(reports: tuple[Path, ...], diff: bool, trace_path: Path | None, plots: Path | None) -> None:
    """Render a REPORT.json written by `ascendir run --report` (.json.gz too) or `ascendir generate
    --report`, or with --diff compare two `run` reports."""
    from ascendir.api.report_table import render

    if diff:
        if len(reports) != 2 or trace_path is not None or plots is not None:
            raise AscendirError("--diff takes two reports (A.json B.json) and no --trace / --plots")
        from ascendir.api import report_diff

        a, b = (_read_report(p) for p in reports)
        report_diff.render(a, b, (str(reports[0]), str(reports[1])), cli_console())
        return
    if len(reports) != 1:
        raise AscendirError(f"give one report ({len(reports)} given; --diff compares two)")
    (report_path,) = reports
    if trace_path is not None and plots is None:
        raise AscendirError("--trace is read for the pipe timeline of --plots; add --plots DIR")
    if plots is not None:  # before any work: a missing matplotlib is named first
        check_outputs([], [report_path, trace_path], plots)
        prepare_plots(plots)
    raw = _read_json(report_path, "report")  # once: "-" is stdin
    if _is_generate_report(raw):
        if trace_path is not None or plots is not None:
            raise AscendirError(f"{report_path} is a report of `ascendir generate`: --trace / --plots draw `run` reports "
                                "(generate --plots DIR draws its TPOT)")
        from ascendir.api.generate import schema_problem
        from ascendir.api.generate_cmd import summary

        broken = schema_problem(raw)
        if broken:
            raise AscendirError(f"{report_path} is not a report of `ascendir generate --report`: {broken}")
        for line in summary(raw):
            click.echo(line)
        return
    data = _run_report(raw, report_path)
    events = None
    if trace_path is not None:
        trace = _read_json(trace_path, "trace")
        events = trace.get("traceEvents") if isinstance(trace, dict) else None
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise AscendirError(f"{trace_path} is not a trace of `ascendir run --trace`: no 'traceEvents' list of objects")
        other = _trace_mismatch(data, trace)
        if other:
            raise AscendirError(f"{trace_path} is not the trace of the run of {report_path}: {other}")
    if plots is not None:  # files first, as in `run`: a failure then prints one line
        if events is None:
            click.echo("note: no --trace given: the pipe timeline needs the trace of the run (ascendir run --trace)", err=True)
        write_plot_files(data, events, plots)
    render(data, cli_console())


def _is_generate_report(data) -> bool:
    """Whether `data` (parsed JSON) says it is a serving report (`generate --report`,
    api/generate.schema.json: "kind": "generate")."""
    return isinstance(data, dict) and data.get("kind") == "generate"


def _read_report(path: Path) -> dict:
    """A report file, checked against its schema and its totals.

    Raises:
        AscendirError: unreadable, not JSON, or not a report (naming the first bad field; a
            `generate` report is named as one: --diff compares `run` reports only).
    """
    return _run_report(_read_json(path, "report"), path)


def _run_report(data, path: Path) -> dict:
    """`data` parsed from `path`, checked as a report of `ascendir run` (see _read_report)."""
    if _is_generate_report(data):
        raise AscendirError(f"{path} is a report of `ascendir generate`; --diff compares reports of `ascendir run`")
    if isinstance(data, dict) and set(data) == {"columns", "rows"}:  # api/sweep.py's JSON table
        raise AscendirError(f"{path} is a table of `ascendir sweep` (its rows are the figures); `report` renders `ascendir run --report` files")
    problem = _report_problem(data)
    if problem:
        raise AscendirError(f"{path} is not a report of `ascendir run --report`: {problem}")
    return data


def _read_json(path: Path, what: str):
    from ascendir.api.report_schema import loads

    try:
        return loads(read_bytes(path))
    except (OSError, ValueError, EOFError) as e:
        raise AscendirError(f"cannot read {what} {path}: {' '.join(str(e).split())}") from None
    except RecursionError:  # json parses nested arrays recursively
        raise AscendirError(f"cannot read {what} {path}: arrays or objects nested too deeply") from None


def _report_problem(data) -> str | None:
    """What keeps `data` from being a renderable report, or None: a departure from the report's
    schema (api/report.schema.json: types, finite non-negative figures, a positive clock and
    ceilings, rates in [0, 1]) or totals that disagree with the kernels (total_cycles = Σ kernel
    cycles, total_seconds = total_cycles / clock_hz)."""
    from ascendir.api.report_schema import SCHEMA_VERSION, problem

    if isinstance(data, dict) and "schema_version" not in data and isinstance(data.get("model"), list):
        broken = "no 'schema_version'"  # the cost-model notes under 'model': a report before schema 1
    else:
        broken = problem(data)
    if broken == "no 'schema_version'":
        return f"{broken}: written before report schema {SCHEMA_VERSION}; run it again"
    if broken:
        if isinstance(data, dict) and "schema_version" in data and data["schema_version"] != SCHEMA_VERSION:
            broken += f" (this ascendir reads report schema {SCHEMA_VERSION})"
        return broken
    total = sum(k["cycles"] for k in data["kernels"])
    if not math.isclose(total, data["total_cycles"], rel_tol=1e-9, abs_tol=1e-6):
        return f"'total_cycles' {data['total_cycles']!r} is not the sum of its kernels' cycles ({total!r})"
    if not math.isclose(data["total_seconds"], data["total_cycles"] / data["clock_hz"], rel_tol=1e-9, abs_tol=1e-15):
        return f"'total_seconds' {data['total_seconds']!r} is not total_cycles / clock_hz"
    return None


def _trace_mismatch(report: dict, trace: dict) -> str | None:
    """Why `trace` is not the trace of the run `report` describes, or None: their run ids differ
    (report.run_id); for files without one, the kernel launches (the host track's spans: name and
    cycles, in order) differ from the report's kernels."""
    ours = report.get("run_id")
    other = trace.get("otherData")
    theirs = other.get("run_id") if isinstance(other, dict) else None
    if ours is not None and theirs is not None:
        return None if ours == theirs else f"run id {theirs}, the report's is {ours}"
    launches = [(e.get("name"), (e.get("args") or {}).get("cycles")) for e in trace["traceEvents"]
                if e.get("ph") == "X" and e.get("pid") == 0]
    kernels = [(k["name"], k["cycles"]) for k in report["kernels"]]
    if launches == kernels:
        return None
    first = next((i for i, (a, b) in enumerate(zip(launches, kernels)) if a != b), min(len(launches), len(kernels)))
    where = (f"launch #{first} is {launches[first][0]} ({launches[first][1]} cycles), the report's {kernels[first][0]} "
             f"({kernels[first][1]} cycles)" if first < min(len(launches), len(kernels)) else "")
    return f"{len(launches)} kernel launches, the report has {len(kernels)}" + (f"; {where}" if where else "")


@main.command()
@click.option("--quick", is_flag=True, help="Only the small cases (V3, V7, V13, V14a).")
def calibrate(quick: bool) -> None:
    """Predicted vs measured for reference §7 (V1-V14 kernels and GEMMs; V8: collectives on 2, 4, 8 cards; V18, V24: MoE dispatch / combine at EP 8, 16; V20-V23: pto-isa's kernels): error, median and worst."""
    from ascendir.api import calibration

    console = cli_console()
    rows = calibration.run(quick, progress=lambda vid: console.print(f"simulating {vid} ...", style="dim"))
    calibration.render(rows, console)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--target", "targets", multiple=True, default=("ascend910b2",), show_default=True,
              help="A chip name or TOML file; repeat for more points.")
@click.option("--tiling", "tilings", multiple=True, metavar="m=128,n=128,k=64",
              help="A forced tiling (as run --tiling); repeat for more points. Default: choose-tiling's search.")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(["fp32", "fp16", "bf16"]), default=("fp32",),
              show_default=True, help="Precision policy; repeat for more points.")
@click.option("--tp", "tps", multiple=True, metavar="1,2,4",
              help="Tensor-parallel degrees (as run --tp, on --topology): a comma list or repeated; default 1.")
@topology_opt("the devices of the --tp points")
@click.option("--numerics", is_flag=True, help="Move data too (random inputs, seed 0); default: timing-only, weights not read.")
@click.option("--scheduler", default="local", show_default=True, metavar="local|dask-local|ADDRESS",
              help="Where points run: local processes, a throw-away local Dask cluster, or a Dask scheduler address (tcp://host:8786).")
@click.option("-j", "--jobs", type=click.IntRange(min=1, max=256), default=1, show_default=True,
              help="Worker processes (local, dask-local).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, metavar="TABLE.csv|.json",
              help="Write the table; JSON when the name ends in .json, else CSV (`-`: CSV on stdout).")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), default=None, metavar="FILE.png|.svg",
              help="Latency per point as a bar chart (needs matplotlib).")
def sweep(model: Path, targets: tuple[str, ...], tilings: tuple[str, ...], dtypes: tuple[str, ...], tps: tuple[str, ...],
          topology: str | None, numerics: bool, scheduler: str, jobs: int, output: Path | None, plot_path: Path | None) -> None:
    """Compile and simulate MODEL at every point of a grid of targets, tilings, dtypes and TP degrees: one table and a plot."""
    from ascendir.api import sweep as sw

    if not model.is_file():
        raise AscendirError(f"cannot read {model}: no such file")
    check_outputs([output, plot_path], [model])
    targets = tuple(topology_target(t, topology, "targets") for t in targets)
    from ascendir.conversion.nn_to_ascend.tiling import parse_tiling

    for t in tilings:  # a malformed tiling fails every point: say so once, before any runs
        parse_tiling(t)
    degrees = []
    for value in tps or ("1",):
        for part in value.split(","):
            if not part.strip().isdigit():
                raise AscendirError(f"sweep: --tp takes degrees like 1,2,4; got '{value}'")
            degrees.append(int(part))
    points = sw.grid(targets, tilings or (None,), dtypes, degrees)
    if topology is not None:  # one line before any point runs, as run --topology
        from ascendir.hardware.topology import load_topology

        if max(degrees) == 1:
            raise AscendirError("sweep: --topology joins the devices of --tp points; give --tp N (N > 1)")
        topo = load_topology(topology)
        if max(degrees) > topo.devices:
            raise AscendirError(f"sweep: --tp {max(degrees)} does not fit topology {topo.name} ({topo.devices} devices)")
    console = cli_console(stderr=is_stdout(output))
    with launch_progress(f"sweeping {model.name}", "points") as progress:
        count = iter(range(1, len(points) + 1))
        rows = sw.run_sweep(str(model), points, scheduler, jobs, timing_only=not numerics, topology=topology,
                            done=(lambda row: progress(next(count), len(points))) if progress else None)
    if output is not None:
        text = sw.table_text(rows, "json" if output.name.removesuffix(".gz").endswith(".json") else "csv")
        write_text(output, text)
    if plot_path is not None:
        sw.plot(rows, plot_path, str(model))
    from rich.table import Table

    table = Table(title=f"sweep of {model.name}: {len(rows)} points", title_justify="left")
    for col in ("#", "target", "dtype", "tiling", "tp", "cycles", "µs", "bound"):
        table.add_column(col, justify="right" if col in ("#", "tp", "cycles", "µs") else "left",
                         no_wrap=col != "tiling", overflow="fold")
    for i, r in enumerate(rows, 1):
        ran = not r.get("error")
        table.add_row(str(i), r["target"], r["dtype"], r["tiling"], str(r["tp"]), f"{r['total_cycles']:,.0f}" if ran else "failed",
                      f"{r['latency_us']:,.2f}" if ran else "-", f"{r['bound']} {100 * r['bound_share']:.0f}%" if ran else "-")
    console.print(table)
    for i, r in enumerate(rows, 1):
        if r.get("error"):
            console.print(f"#{i} failed: {r['error']}", markup=False, highlight=False)


from ascendir.api.generate_cmd import generate  # noqa: E402  (`ascendir generate`: its own module)
from ascendir.api.run_cmd import run  # noqa: E402  (`ascendir run`: its own module)

main.add_command(run)
main.add_command(generate)

if __name__ == "__main__":
    main()
