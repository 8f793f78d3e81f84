"""`ascendir`: compile ONNX models for Ascend NPUs and run them in the cycle-accounting interpreter.

    ascendir compile model.onnx -o model.mlir [--emit nn|ascend] [--target 910b2] [-p PIPELINE]
    ascendir run model.onnx [--inputs in.npz] [--outputs out.npz] [--report r.json] [--trace t.json] [--plots DIR]
    ascendir report r.json [--trace t.json] [--plots DIR]
    ascendir calibrate [--quick]

Bad input (file, op, shape, IR) prints one line `error: ...` and exits with code 2. Output files
are written before the printed report; a reader that closes stdout early (`| head`) ends the
command silently with status 141, as SIGPIPE ends other Unix tools.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import traceback
import zipfile
from pathlib import Path

import click
import numpy as np
from rich.console import Console

from ascendir.errors import DEBUG_ENV, INTERNAL_ERROR_EXIT, AscendirError, internal_error
from ascendir.api.outputs import atomic_write, check_writable

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # BLAS threads thrash on small tiles


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2
_CLOSED_STDOUT = 128 + signal.SIGPIPE  # the status of a Unix tool killed by SIGPIPE


def _closed_stdout() -> None:
    """The reader closed stdout: discard what is still buffered and end quietly."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(_CLOSED_STDOUT)


class _Console(Console):
    """rich's Console ends with status 1 on a closed stdout; ours as other Unix tools do."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _closed_stdout()


class _Group(click.Group):
    """Turns every AscendirError (and xDSL parse/verify error) and every bad command line into
    one line and exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except _NO_ARGS_IS_HELP as e:  # bare `ascendir`: the help text
            e.show()
            sys.exit(e.exit_code)
        except click.UsageError as e:  # click would print usage + hint + message on 4 lines
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            click.echo(f"error: {' '.join(e.format_message().split())}{hint}", err=True)
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
        except AscendirError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:  # e.g. `ascendir compile m.onnx | head`
            _closed_stdout()
        except MemoryError as e:  # numerics of a model larger than this machine's memory
            click.echo(f"error: out of memory: {' '.join(str(e).split())} (--timing-only moves no data)", err=True)
            sys.exit(2)
        except Exception as e:  # an internal bug: one line, the traceback only on request
            if os.environ.get(DEBUG_ENV):
                traceback.print_exc()
            click.echo(internal_error(e), err=True)
            sys.exit(INTERNAL_ERROR_EXIT)


@click.group(cls=_Group)
@click.version_option(package_name="ascendir")
def main() -> None:
    """Compile ONNX models to the Ascend NPU dialect and simulate them."""


_target_opt = click.option(
    "--target", default="ascend910b2", show_default=True,
    help="Chip name (a file of ascendir/hardware/chips/, e.g. 910b2, 910a, 310p) or a hardware TOML file; `run` on lowered IR defaults to the chip it was lowered for.",
)
_pipeline_opt = click.option("-p", "--pipeline", default=None, help="nn-level pass pipeline, xdsl-opt syntax (default: the -O level's).")
_opt_level = click.option("-O", "opt_level", type=click.Choice(["0", "1", "2"]), default="2", show_default=True, help="Optimization level.")
_verify_opt = click.option("--verify-numerics", is_flag=True, help="Evaluate the nn module before and after every pass (same inputs) and fail on a difference beyond the dtype's tolerance.")
_tiling_opt = click.option("--tiling", default=None, metavar="m=128,n=128,k=64,br=64,bc=128",
                           help="Force these tiling fields instead of choose-tiling's (others searched): m, n, k, l1_depth, split_k, swizzle on every nn.matmul; br, bc on every flash attention.")
_shape_only_opt = click.option("--shape-only", is_flag=True,
                               help="Read no weight bytes from ONNX external data (weights are zeros); compile writes no weights file, run is timing-only.")
_dtype_opt = click.option("--dtype", type=click.Choice(["fp32", "fp16", "bf16"]), default="fp32", show_default=True,
                          help="Precision policy for ONNX input: weights and activations in this type; fp32 accumulation (L0C) and softmax/norm statistics.")
_plots_opt = click.option("--plots", type=click.Path(path_type=Path), default=None, metavar="DIR",
                          help="Write roofline.{png,svg} and timeline.{png,svg} here (needs matplotlib: pip install 'ascendir[plots]').")
_shape_opt = click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DxD", help="Pin a dynamic input shape, e.g. input_ids=1x128.")



def _compile_options(f):
    """The options `compile` and `run` share (target, pipeline, shapes, precision, tiling...)."""
    for option in reversed((_target_opt, _pipeline_opt, _opt_level, _shape_opt, _verify_opt, _tiling_opt, _shape_only_opt, _dtype_opt)):
        f = option(f)
    return f

@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write IR here (weights go to OUT.weights.npz); default stdout.")
@click.option("--emit", type=click.Choice(["nn", "ascend"]), default="ascend", show_default=True)
@_compile_options
def compile(model: Path, output: Path | None, emit: str, target: str, pipeline: str | None, opt_level: str, input_shapes,
            verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx, or .mlir IR) to the nn or ascend dialect."""
    from ascendir.driver import compile_model, parse_input_shapes, print_ir, weights_path

    from ascendir.session import Session
    from ascendir.transforms.nn.choose_tiling import log_summary

    if output is not None:
        _check_outputs([output, weights_path(output)], [model])
    session = Session(echo_notes=True)
    module, weights = compile_model(
        model, target, opt_level=f"O{opt_level}", pipeline=pipeline, emit=emit, input_shapes=parse_input_shapes(input_shapes),
        verify_numerics=verify_numerics, tiling=tiling, shape_only=shape_only, dtype=dtype, session=session,
    )
    if session.search_log:
        click.echo(log_summary(session.search_log), err=True)
    text = print_ir(module)
    if output is None:
        click.echo(text, nl=False)
        return
    if shape_only:  # the weights are zeros: writing them would only fill the disk
        atomic_write(output, lambda p: p.write_text(text))
        click.echo(f"wrote {output} (--shape-only: no weights file)", err=True)
        return
    atomic_write(weights_path(output), lambda p: weights.save(str(p)))
    atomic_write(output, lambda p: p.write_text(text))
    click.echo(f"wrote {output} and {weights_path(output)} ({len(weights)} weights)", err=True)


def _check_outputs(outputs: list[Path | None], inputs: list[Path | None]) -> None:
    """Before any work: every output path can be written and none overwrites an input file.

    Raises:
        AscendirError: naming the path.
    """
    given = [p for p in outputs if p is not None]
    read = {p.resolve() for p in inputs if p is not None}
    for p in given:
        check_writable(p)
        if p.resolve() in read:
            raise AscendirError(f"output {p} would overwrite an input file")
    if len({p.resolve() for p in given}) < len(given):
        raise AscendirError(f"output paths must differ ({', '.join(map(str, given))})")


def _load_inputs(path: Path, func, precision: str = "fp32") -> dict[str, np.ndarray]:
    """The arrays of an --inputs .npz for the arguments of `func` (@main): one key per graph input
    (optionally `input:`-prefixed; `output:` keys are ignored), each of the exact shape and dtype.
    Under `--dtype fp16|bf16` (`precision`) an f32 array (the ONNX model's type) may feed an input
    the policy made fp16/bf16: it is converted as the weights are (saturating).

    Raises:
        AscendirError: unreadable or not an .npz, a missing, unknown or doubled key, a wrong shape
            or dtype; the message names the input.
    """
    from ascendir.driver import io_names
    from ascendir.dtypes import to_numpy_dtype
    from ascendir.frontends.onnx.precision import DTYPES, saturating_cast

    if path.is_file() and not zipfile.is_zipfile(path):
        raise AscendirError(f"cannot read inputs {path}: not an .npz archive (write it with numpy.savez)")
    _check_entry_sizes(path, func)
    try:
        with np.load(path) as data:
            files = [k for k in data.files if not k.startswith("output:")]
            arrays = {k: data[k] for k in files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise AscendirError(f"cannot read inputs {path}: {' '.join(str(e).split())}") from None
    names = io_names(func, results=False)
    by_name: dict[str, str] = {}
    for k in files:
        name = k.removeprefix("input:")
        if name in by_name:
            raise AscendirError(f"inputs {path}: keys '{by_name[name]}' and '{k}' both give input '{name}'")
        by_name[name] = k
    missing = [n for n in names if n not in by_name]
    if missing:
        raise AscendirError(f"inputs {path} lack graph input(s) {', '.join(missing)} (keys: {', '.join(files) or 'none'})")
    unknown = [k for n, k in by_name.items() if n not in names]
    if unknown:
        raise AscendirError(f"inputs {path}: key(s) {', '.join(unknown)} name no graph input (inputs: {', '.join(names) or 'none'})")
    feeds = {}
    for name, ty in zip(names, func.function_type.inputs.data):
        arr, shape, dtype = arrays[by_name[name]], tuple(ty.get_shape()), to_numpy_dtype(ty.element_type)
        if arr.dtype.kind == "V" and arr.dtype.itemsize == dtype.itemsize and dtype.kind == "V":
            arr = arr.view(dtype)  # bfloat16 & co. are saved as raw bytes (|V2)
        if arr.dtype == np.float32 and precision != "fp32" and dtype == DTYPES[precision][1]:
            arr = saturating_cast(arr, dtype)
        if arr.dtype != dtype:
            raise AscendirError(f"inputs {path}: input '{name}' is {arr.dtype}, the model expects {dtype}")
        if arr.shape != shape:
            raise AscendirError(f"inputs {path}: input '{name}' has shape {arr.shape}, the model expects {shape}")
        feeds[name] = arr
    return feeds


def _check_entry_sizes(path: Path, func) -> None:
    """Before any entry is decompressed: none holds more bytes than the largest input of `func`
    could take (8 bytes an element, plus the .npy header), so a small archive of deflated zeros (a
    zip bomb: 2 MB holding 2 GB) is refused instead of filling memory.

    Raises:
        AscendirError: naming the entry and its size.
    """
    import math

    largest = max((math.prod(t.get_shape()) * 8 for t in func.function_type.inputs.data), default=0) + 65536
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile, ValueError) as e:
        raise AscendirError(f"cannot read inputs {path}: {' '.join(str(e).split())}") from None
    for info in infos:
        if not info.filename.startswith("output:") and info.file_size > largest:
            raise AscendirError(
                f"inputs {path}: entry '{info.filename[:60]}' holds {info.file_size} bytes, more than any input of the model takes ({largest})"
            )


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--inputs", type=click.Path(path_type=Path), default=None, help=".npz whose keys are graph input names; default: seeded random inputs.")
@click.option("--outputs", type=click.Path(path_type=Path), default=None, help="Write the output tensors to this .npz.")
@click.option("--timing-only", is_flag=True, help="Simulate cycles without moving data.")
@click.option("--check-races", is_flag=True, help="Check pipe races in --timing-only runs too (numerics runs always check).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None, help="Write the report as JSON.")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), default=None, help="Write a Chrome/Perfetto trace JSON.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random inputs.")
@_plots_opt
@_compile_options
def run(model: Path, inputs: Path | None, outputs: Path | None, timing_only: bool, check_races: bool, report_path: Path | None,
        trace_path: Path | None, seed: int, plots: Path | None, target: str, pipeline: str | None, opt_level: str, input_shapes,
        verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx or .mlir) for TARGET and run it in the interpreter; print the report."""
    from ascendir.driver import (
        gather_bounds, is_lowered, load_ir, lower, main_func, missing_weights, parse_input_shapes, parse_pipeline,
        random_inputs, reject_nn_options, run_passes, weights_path,
    )
    from ascendir.frontends.onnx import import_onnx
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.api.report_table import render
    from ascendir.transforms.nn.choose_tiling import log_json

    if shape_only:
        if verify_numerics:
            raise AscendirError("--verify-numerics needs the weights; drop --shape-only")
        timing_only = True  # zeros for weights: only the timing is meaningful
    if timing_only and outputs is not None:
        raise AscendirError(f"--outputs needs numerics; drop {'--shape-only' if shape_only else '--timing-only'}")
    _check_outputs([outputs, report_path, trace_path], [model, inputs])
    if plots is not None:
        _prepare_plots(plots)
    hw = load_target(target)
    if model.suffix == ".onnx":
        module, weights = import_onnx(model, parse_input_shapes(input_shapes), shape_only=shape_only, dtype=dtype)
    else:
        if input_shapes:
            raise AscendirError(f"--input-shape applies to .onnx models; {model} is IR with static shapes")
        module, weights = load_ir(model)
        missing = [] if timing_only else missing_weights(module, weights)
        if missing:  # else the interpreter fails mid-run on the first one it reads
            wp = weights_path(model)
            where = f"{wp}, which does not exist" if not wp.exists() else str(wp)
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise AscendirError(
                f"{model}: weight @{missing[0]}{more} not in {where} (`ascendir compile -o` writes it beside the IR; "
                "--timing-only needs none)"
            )
        if is_lowered(module):
            reject_nn_options(model, pipeline, tiling)
            if click.get_current_context().get_parameter_source("target") is click.core.ParameterSource.DEFAULT:
                from ascendir.transforms.ascend.plan_memory import module_target

                hw = module_target(module)  # the chip it was lowered for, not the default one
        arch, lowered_for = (module.attributes.get(k) for k in ("ascend.arch", "ascend.target"))
        if arch is not None and getattr(arch, "data", None) != hw.arch.name:
            chip = getattr(lowered_for, "data", "another chip")
            raise AscendirError(
                f"{model} was lowered for {chip} ({getattr(arch, 'data', arch)}), --target {hw.name} is {hw.arch}: compile the model for it"
            )
    bounds = {} if is_lowered(module) else gather_bounds(main_func(module))
    log, declined = {}, []
    if not is_lowered(module):
        checks = None
        if verify_numerics:
            checks = _load_inputs(inputs, main_func(module), dtype) if inputs else random_inputs(module, seed, bounds)
        session = run_passes(module, parse_pipeline(pipeline, f"O{opt_level}", target, tiling), weights, checks)
        log = session.search_log
        lower(module, weights, target, session)
        declined = session.declined
    if inputs:
        feeds = _load_inputs(inputs, main_func(module), dtype if model.suffix == ".onnx" else "fp32")
    else:  # timing-only moves no data: no need to make (possibly huge) random inputs
        feeds = {} if timing_only else random_inputs(module, seed, bounds)

    console = _Console(stderr=False)
    with _launch_progress(f"simulating on {hw.name}") as progress:
        result = simulate(module, weights, feeds, hw, timing_only=timing_only, trace=trace_path is not None or plots is not None,
                          check_races=True if check_races else None, progress=progress)

    if log:  # what choose-tiling scored (the report's table prints it too)
        result.report["tiling_search"] = log_json(log)
    if declined:  # regions lowered op by op because their template declined them
        result.report["declined"] = [{"region": d.region, "kind": d.kind, "reason": d.reason} for d in declined]

    from ascendir.dtypes import numpy_native

    def save_outputs(p: Path) -> None:
        # bf16 / fp8 / fp4 / int4 outputs upcast exactly (dtypes.numpy_native): np.savez would store
        # ml_dtypes arrays as raw |V bytes that np.load cannot compute with
        with p.open("wb") as f:  # a file object: np.savez would append .npz to a path
            np.savez(f, **{k: numpy_native(v) for k, v in result.outputs.items()})

    # Files first: rendering may stop early (`ascendir run ... | head` closes stdout).
    if outputs is not None:
        atomic_write(outputs, save_outputs)
    if report_path is not None:
        atomic_write(report_path, lambda p: p.write_text(json.dumps(result.report, indent=1)))
    if trace_path is not None:
        from ascendir.interpreter.report.trace import trace_document

        atomic_write(trace_path, lambda p: p.write_text(json.dumps(trace_document(result.trace_events, result.report))))
    if plots is not None:
        _write_plots(result.report, result.trace_events, plots)
    render(result.report, console)


def _prepare_plots(directory: Path) -> None:
    """Before any work: matplotlib importable and `directory` usable (made when the plots are written)."""
    from ascendir.api.plots import prepare_dir, require_matplotlib

    require_matplotlib()
    prepare_dir(directory)


def _write_plots(report: dict, trace_events: list[dict] | None, directory: Path) -> None:
    from ascendir.api.plots import write_plots

    paths = write_plots(report, trace_events, directory)
    click.echo(f"wrote {', '.join(p.name for p in paths)} in {directory}", err=True)


class _launch_progress:
    """A rich progress bar of kernel launches on stderr when stderr is a terminal; otherwise
    nothing (pipes, CI and tests see no control characters). Yields the `progress(done, total)`
    callback for `simulate`, or None."""

    def __init__(self, what: str):
        self.what = what
        self.bar = None

    def __enter__(self):
        if not sys.stderr.isatty():
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("launches"),
                            TimeElapsedColumn(), console=_Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task(self.what, total=None)

        def update(done: int, total: int) -> None:
            self.bar.update(task, completed=done, total=max(done, total))

        return update

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


@main.command()
@click.argument("report_path", type=click.Path(path_type=Path))
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), default=None,
              help="The Chrome trace of the same run (`ascendir run --trace`): --plots then draws the pipe timeline too.")
@_plots_opt
def report(report_path: Path, trace_path: Path | None, plots: Path | None) -> None:
    """Render a REPORT.json written by `ascendir run --report`."""
    from ascendir.api.report_table import render

    if trace_path is not None and plots is None:
        raise AscendirError("--trace is read for the pipe timeline of --plots; add --plots DIR")
    if plots is not None:
        _prepare_plots(plots)
    data = _read_json(report_path, "report")
    problem = _report_problem(data)
    if problem:
        raise AscendirError(f"{report_path} is not a report of `ascendir run --report`: {problem}")
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
        _write_plots(data, events, plots)
    render(data, _Console())


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise AscendirError(f"cannot read {what} {path}: {' '.join(str(e).split())}") from None
    except RecursionError:  # json parses nested arrays recursively
        raise AscendirError(f"cannot read {what} {path}: arrays or objects nested too deeply") from None


def _report_problem(data) -> str | None:
    """What keeps `data` from being a renderable report, or None: a departure from the report's
    schema (report_schema.REPORT: types, finite non-negative figures, a positive clock and
    ceilings, rates in [0, 1]) or totals that disagree with the kernels (total_cycles = Σ kernel
    cycles, total_seconds = total_cycles / clock_hz)."""
    from ascendir.api.report_schema import REPORT, check

    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    problem = check(REPORT, data)
    if problem:
        return problem
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
    """Predicted vs measured for reference §7 (V1-V7, V9, V10, V11-V13, V14): error, median and worst."""
    from ascendir.api import calibration

    console = _Console()
    rows = calibration.run(quick, progress=lambda vid: console.print(f"simulating {vid} ...", style="dim"))
    calibration.render(rows, console)


if __name__ == "__main__":
    main()
