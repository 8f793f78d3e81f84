"""`ascendir`: compile ONNX models for Ascend NPUs and run them in the cycle-accounting interpreter.

    ascendir compile model.onnx -o model.mlir [--emit nn|ascend] [--target 910b2] [-p PIPELINE]
    ascendir run model.onnx [--inputs in.npz] [--outputs out.npz] [--report r.json] [--trace t.json]
    ascendir report r.json
    ascendir calibrate [--quick]

Bad input (file, op, shape, IR) prints one line `error: ...` and exits with code 2.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import click
import numpy as np
from rich.console import Console

from ascendir.errors import AscendirError

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # BLAS threads thrash on small tiles


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in the same folder, renamed only on success, so a failure
    never leaves a half-written output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _Group(click.Group):
    """Turns every AscendirError (and xDSL parse/verify error) into one line and exit code 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AscendirError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except Exception as e:  # an internal bug: one line, the traceback only on request
            if os.environ.get("ASCENDIR_DEBUG"):
                traceback.print_exc()
            click.echo(f"internal error: {type(e).__name__}: {' '.join(str(e).split())} (set ASCENDIR_DEBUG=1 for a traceback)", err=True)
            sys.exit(1)


@click.group(cls=_Group)
@click.version_option(package_name="ascendir")
def main() -> None:
    """Compile ONNX models to the Ascend NPU dialect and simulate them."""


_target_opt = click.option("--target", default="ascend910b2", show_default=True, help="Chip name (910b1..b4, 910a, 310p) or a hardware TOML file.")
_pipeline_opt = click.option("-p", "--pipeline", default=None, help="nn-level pass pipeline, xdsl-opt syntax (default: the -O level's).")
_opt_level = click.option("-O", "opt_level", type=click.Choice(["0", "1", "2"]), default="2", show_default=True, help="Optimization level.")
_verify_opt = click.option("--verify-numerics", is_flag=True, help="Evaluate the nn module before and after every pass (same inputs) and fail on a difference beyond the dtype's tolerance.")
_tiling_opt = click.option("--tiling", default=None, metavar="m=128,n=128,k=64",
                           help="Force this matmul tiling (keys m, n, k, l1_depth, split_k, swizzle; others searched) on every nn.matmul instead of choose-tiling's.")
_shape_only_opt = click.option("--shape-only", is_flag=True,
                               help="Read no weight bytes from ONNX external data (weights are zeros); compile writes no weights file, run is timing-only.")
_dtype_opt = click.option("--dtype", type=click.Choice(["fp32", "fp16", "bf16"]), default="fp32", show_default=True,
                          help="Precision policy for ONNX input: weights and activations in this type; fp32 accumulation (L0C) and softmax/norm statistics.")
_shape_opt = click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DxD", help="Pin a dynamic input shape, e.g. input_ids=1x128.")


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write IR here (weights go to OUT.weights.npz); default stdout.")
@click.option("--emit", type=click.Choice(["nn", "ascend"]), default="ascend", show_default=True)
@_target_opt
@_pipeline_opt
@_opt_level
@_shape_opt
@_verify_opt
@_tiling_opt
@_shape_only_opt
@_dtype_opt
def compile(model: Path, output: Path | None, emit: str, target: str, pipeline: str | None, opt_level: str, input_shapes,
            verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx, or .mlir IR) to the nn or ascend dialect."""
    from ascendir.driver import compile_model, parse_input_shapes, print_ir, weights_path

    module, weights = compile_model(
        model, target, opt_level=f"O{opt_level}", pipeline=pipeline, emit=emit, input_shapes=parse_input_shapes(input_shapes),
        verify_numerics=verify_numerics, tiling=tiling, shape_only=shape_only, dtype=dtype,
    )
    text = print_ir(module)
    if output is None:
        click.echo(text, nl=False)
        return
    _atomic_write(output, lambda p: p.write_text(text))
    if shape_only:  # the weights are zeros: writing them would only fill the disk
        click.echo(f"wrote {output} (--shape-only: no weights file)", err=True)
        return
    _atomic_write(weights_path(output), lambda p: weights.save(str(p)))
    click.echo(f"wrote {output} and {weights_path(output)} ({len(weights)} weights)", err=True)


def _load_inputs(path: Path, expected: list[str]) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as data:
            arrays = {k.removeprefix("input:"): data[k] for k in data.files if not k.startswith("output:")}
    except (OSError, ValueError) as e:
        raise AscendirError(f"cannot read inputs {path}: {' '.join(str(e).split())}") from None
    missing = [n for n in expected if n not in arrays]
    if missing:
        raise AscendirError(f"inputs {path} lack graph input(s) {', '.join(missing)} (keys: {', '.join(arrays) or 'none'})")
    return {n: arrays[n] for n in expected}


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--inputs", type=click.Path(path_type=Path), default=None, help=".npz whose keys are graph input names; default: seeded random inputs.")
@click.option("--outputs", type=click.Path(path_type=Path), default=None, help="Write the output tensors to this .npz.")
@click.option("--timing-only", is_flag=True, help="Simulate cycles without moving data.")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None, help="Write the report as JSON.")
@click.option("--trace", "trace_path", type=click.Path(path_type=Path), default=None, help="Write a Chrome/Perfetto trace JSON.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@_target_opt
@_pipeline_opt
@_opt_level
@_shape_opt
@_verify_opt
@_tiling_opt
@_shape_only_opt
@_dtype_opt
def run(model: Path, inputs: Path | None, outputs: Path | None, timing_only: bool, report_path: Path | None,
        trace_path: Path | None, seed: int, target: str, pipeline: str | None, opt_level: str, input_shapes,
        verify_numerics: bool, tiling: str | None, shape_only: bool, dtype: str) -> None:
    """Compile MODEL (.onnx or .mlir) for TARGET and run it in the interpreter; print the report."""
    from ascendir.driver import (
        gather_bounds, io_names, is_lowered, load_ir, lower, main_func, parse_input_shapes, parse_pipeline,
        random_inputs, run_passes,
    )
    from ascendir.frontends.onnx import import_onnx
    from ascendir.hardware import load_target
    from ascendir.interpreter import simulate
    from ascendir.report_table import render

    if shape_only:
        if verify_numerics:
            raise AscendirError("--verify-numerics needs the weights; drop --shape-only")
        timing_only = True  # zeros for weights: only the timing is meaningful
    if timing_only and outputs is not None:
        raise AscendirError(f"--outputs needs numerics; drop {'--shape-only' if shape_only else '--timing-only'}")
    hw = load_target(target)
    if model.suffix == ".onnx":
        module, weights = import_onnx(model, parse_input_shapes(input_shapes), shape_only=shape_only, dtype=dtype)
    else:
        module, weights = load_ir(model)
    bounds = {} if is_lowered(module) else gather_bounds(main_func(module))
    if not is_lowered(module):
        checks = None
        if verify_numerics:
            nn_names = io_names(main_func(module), results=False)
            checks = _load_inputs(inputs, nn_names) if inputs else random_inputs(module, seed, bounds)
        run_passes(module, parse_pipeline(pipeline, f"O{opt_level}", target, tiling), weights, checks)
        lower(module, weights, target)
    names = io_names(main_func(module), results=False)
    feeds = _load_inputs(inputs, names) if inputs else random_inputs(module, seed, bounds)

    console = Console(stderr=False)
    with console.status(f"simulating on {hw.name}..."):
        result = simulate(module, weights, feeds, hw, timing_only=timing_only, trace=trace_path is not None)
    render(result.report, console)
    if outputs is not None:
        _atomic_write(outputs, lambda p: np.savez(p.open("wb"), **result.outputs))
    if report_path is not None:
        _atomic_write(report_path, lambda p: p.write_text(json.dumps(result.report, indent=1)))
    if trace_path is not None:
        _atomic_write(trace_path, lambda p: p.write_text(json.dumps({"traceEvents": result.trace_events})))


@main.command()
@click.argument("report_path", type=click.Path(path_type=Path))
def report(report_path: Path) -> None:
    """Render a REPORT.json written by `ascendir run --report`."""
    from ascendir.report_table import render

    try:
        data = json.loads(report_path.read_text())
    except (OSError, ValueError) as e:
        raise AscendirError(f"cannot read report {report_path}: {' '.join(str(e).split())}") from None
    render(data, Console())


@main.command()
@click.option("--quick", is_flag=True, help="Only the small cases (V3, V7, V14a; V11-V13 pending).")
def calibrate(quick: bool) -> None:
    """Predicted vs measured for reference §7 (V1-V7, V9, V14): error, median and worst."""
    from ascendir.interpreter import calibration

    console = Console()
    rows = calibration.run(quick, progress=lambda vid: console.print(f"simulating {vid} ...", style="dim"))
    calibration.render(rows, console)


if __name__ == "__main__":
    main()
